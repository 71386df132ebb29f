"""How much the judges agree: Krippendorff's α (nominal; ordinal for ordered labels) from the
coincidences of their votes, with its interval from the run's filing bootstrap, and the gate a
panel's α is held against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from finreflect_eval.stats import uncertainty

# Krippendorff's lowest α from which tentative conclusions may be drawn (Content Analysis, 2004,
# §11.4.4); a panel whose α interval lies wholly below it on a criterion is flagged.
ALPHA_GATE = 0.667
# α is 0/0 when every item with two or more votes has one label: the other labels sit on items
# with a single vote, which pair with nothing. Undefined is neither under the gate nor over it:
# the gate flags a criterion only on a number (`below_gate` stays false) and the reason is shown.
UNPAIRED = (
    "undefined: the items with two or more votes all have the same label (a different label "
    "is only on items with a single vote, which cannot be paired)"
)


@dataclass(frozen=True)
class Coincidences:
    """What α is computed from: per unit (a filing, or an item), the coincidences of its items'
    votes (units × V², the values in the order of their scores), and whether they are ordered."""

    values: list[int]
    by_unit: np.ndarray
    n_items: int
    n_judges: int
    ordered: bool

    @classmethod
    def of(
        cls,
        codes: np.ndarray,
        units: np.ndarray,
        n_units: int,
        *,
        ordered: bool,
        code_scores: np.ndarray,
    ) -> Coincidences:
        """From a label-code matrix (items × judges; negative: no vote), each item's unit and
        each code's score (which orders the values)."""
        present = np.unique(codes[codes >= 0])
        values = sorted(present.tolist(), key=lambda code: (code_scores[code], code))
        pairs = uncertainty.coincidences(uncertainty.value_counts(codes, values))
        by_unit = uncertainty.unit_sums(units, pairs, n_units).reshape(n_units, len(values) ** 2)
        return cls(values, by_unit, len(codes), codes.shape[1], ordered)

    def agreement(self, totals: np.ndarray | None = None) -> dict[str, Any]:
        """α (nominal; ordinal too where the labels are ordered), each with its interval from
        `totals` (the bootstrap's replicates of `by_unit`'s column sums), and whether it is
        below the gate; or the reason it is undefined."""
        result: dict[str, Any] = {
            "alpha": None,
            "ci": None,
            "ordinal": None,
            "ordinal_ci": None,
            "reason": None,
            "n_items": self.n_items,
            "below_gate": False,
        }
        total = self.by_unit.sum(axis=0)
        if self.n_judges < 2:
            result["reason"] = "fewer than two judges"
        elif not total.any():
            result["reason"] = "no item has votes from at least two judges"
        elif len(self.values) < 2:
            result["reason"] = "every vote is the same label: there has to be more than one value"
        elif np.isnan(uncertainty.alpha(total)):
            result["reason"] = UNPAIRED
        if result["reason"]:
            return result
        for key, level in (("alpha", "nominal"), ("ordinal", "ordinal")):
            if level == "ordinal" and not (self.ordered and len(self.values) > 2):
                continue  # two ordered values: the ordinal α is the nominal one
            result[key] = round(float(uncertainty.alpha(total, level)), 4)
            if totals is not None:
                ci, _ = uncertainty.interval(uncertainty.alpha(totals, level))
                result[f"{key}_ci" if key == "ordinal" else "ci"] = (
                    None if ci is None else [round(ci[0], 4), round(ci[1], 4)]
                )
        # Below the gate: the upper end of α's interval (α itself without one) under it.
        result["below_gate"] = (result["ci"] or [None, result["alpha"]])[1] < ALPHA_GATE
        return result
