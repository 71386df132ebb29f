"""The judges measured against people: a mean estimated from a few hundred human labels and the
panel's scores on every item (PPI++), how often each judge and the panel's majority agree with
the people (accuracy, Cohen's κ, the confusion counts), Krippendorff's α with the people as one
more coder, and how many items to label for an interval of a given width.

Every interval is clustered by filing, like the rest of the package: the items of one filing
move together, so the units are filings, not items.

PPI++ (Angelopoulos, Duchi and Zrnic, "PPI++: Efficient Prediction-Powered Inference", 2023):
the panel's mean over all N items, corrected by the mean error it makes on the n labeled ones,

    θ̂ = λ·mean(ŷ_all) + mean(y − λ·ŷ),

is unbiased for the people's mean whatever the panel's bias, when the labeled items are a
random sample; λ (0: the labels alone, 1: plain PPI) is tuned to make the interval narrowest,
on the filing-clustered variance and cross-fitted (each half of the filings takes the λ tuned on
the other), and set to 0 where the labels alone give no wider interval: plain PPI loses to the
labels alone when the judge is poor (Angelopoulos et al. 2023, §2; R-AutoEval+, NeurIPS 2025).
Its standard error is linearised by filing: per filing g,

    influence_g = λ·a_g + y_g − λ·ŷ_g,
    a_g = Σ_{i∈g, all} (ŷ_i − mean ŷ_all) / N,
    y_g = Σ_{i∈g, labeled} (y_i − ȳ) / n,   ŷ_g = Σ_{i∈g, labeled} (ŷ_i − mean ŷ) / n,

and stderr = sqrt(G/(G−1)·Σ_g influence_g²) over the G filings with any item (the form of
`uncertainty.clustered_stderr`). The labeled items may be among the N (an audit sample of the
run's items): their two parts fall in the same filings, so the sum holds their covariance too.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.stats import metrics, uncertainty
from finreflect_eval.stats.agreement import Coincidences

_K = len(metrics.code_scores())  # label codes: 0 no, 1 yes, 2 poor, 3 partial, 4 good
_NAMES = [{0: "no", 1: "yes"}.get(label, label) for label in map(metrics.code_label, range(_K))]
"""Each label code's name in the confusion counts (JSON keys: "no"/"yes" for 0/1)."""


UNSEEN = 2
"""A few labels that all agree with the panel show no variation of people − panel, yet cannot
rule it out: the rectifier's variance is taken as at least that of a disagreement rate of
UNSEEN / (n + 2·UNSEEN) per item (as if UNSEEN of n + 2·UNSEEN items disagreed, the
pseudo-counts of Agresti and Coull's interval). It binds only on small or uniform audits."""


@dataclass(frozen=True)
class PPIEstimate:
    """A mean (on the labels' 0–1 scale, unrounded) estimated from people's labels and the
    panel's scores, with its filing-clustered interval."""

    panel: float | None
    """The panel's own mean over all items, uncorrected; None without items."""
    estimate: float | None
    """θ̂; None without labeled items or without the panel's scores on all items."""
    ci: list[float] | None
    """The studentized filing bootstrap's, and at least Student's t's on the floored standard
    error; None with fewer than two filings."""
    stderr: float | None
    lam: float | None
    """The λ used (given, or tuned and clipped to [0, 1])."""
    n_labeled: int
    n_units: int
    """G: the filings with any item, labeled or not."""


def ppi_mean(
    y: np.ndarray,
    yhat: np.ndarray,
    units: np.ndarray,
    yhat_all: np.ndarray,
    units_all: np.ndarray,
    n_units: int,
    *,
    lam: float | None = None,
    inclusion: np.ndarray | None = None,
    seed: int = 0,
    iterations: int = uncertainty.BOOTSTRAP_ITERS,
    confidence: float = uncertainty.CONFIDENCE,
) -> PPIEstimate:
    """The PPI++ estimate of the people's mean (module docstring) with its studentized filing
    bootstrap interval (`uncertainty.studentized_interval`, `iterations` draws from `seed`):
    `y` the people's labels (as scores 0–1) and `yhat` the panel's scores on the same labeled
    items, `units` their filings; `yhat_all` the panel's scores on all items of the
    population and `units_all` their filings (indices below `n_units`). `lam` None: tuned and
    cross-fitted (`tuned_lambda`, `_cross_fitted`), and 0 (the labels alone, the classical
    estimate) where that one's clustered standard error is no larger: the panel does not help,
    and PPI never loses to the labels alone. The interval is never narrower than Student's t
    on the standard error, itself at least the `UNSEEN` floor's.

    `inclusion`: each labeled item's probability of having been drawn, where the audit drew
    with unequal ones (`audit.inclusion`): each label then weighs 1 / its probability, and the
    rectifier's mean is their weighted (Hájek) mean; None: a uniform draw, every label alike."""
    y, yhat, yhat_all = (np.asarray(v, dtype=float) for v in (y, yhat, yhat_all))
    units, units_all = np.asarray(units, dtype=np.int64), np.asarray(units_all, dtype=np.int64)
    if len(y) != len(yhat) or len(y) != len(units) or len(yhat_all) != len(units_all):
        raise FinReflectError("PPI: every item needs its label, its panel score and its unit")
    n, total = len(y), len(yhat_all)
    if inclusion is not None and not np.all((inclusion > 0) & (inclusion <= 1)):
        raise FinReflectError("PPI: every labeled item's chance of being drawn is in (0, 1]")
    weights = np.ones(n) if inclusion is None else 1 / np.asarray(inclusion, dtype=float)
    present = np.bincount(np.concatenate([units, units_all]), minlength=n_units) > 0
    panel = float(yhat_all.mean()) if total else None
    if not n or panel is None:
        return PPIEstimate(panel, None, None, None, None, n, int(present.sum()))
    a = uncertainty.unit_sums(units_all, yhat_all - panel, n_units)[present] / total

    def corrected(by_unit: np.ndarray) -> tuple[float, float, float | None]:
        """(λ, θ̂, its clustered standard error) with each filing's λ (`by_unit`), the same for
        its labeled items and for all its items, so that θ̂ stays unbiased; λ reported as its
        mean over all items."""
        weighted = by_unit[units_all] * yhat_all
        rectifier = y - by_unit[units] * yhat
        estimate = float(weighted.mean()) + _mean(rectifier, weights)
        part = _centred_sums(rectifier, weights, units, n_units)
        part += uncertainty.unit_sums(units_all, weighted - weighted.mean(), n_units) / total
        return float(by_unit[units_all].mean()) + 0.0, estimate, _stderr(part[present])

    if lam is None:
        by_unit = _cross_fitted(y, yhat, units, a, n_units, present, weights)
        lam, estimate, stderr = corrected(by_unit)
        alone = corrected(np.zeros(n_units))
        if stderr is not None and alone[2] is not None and alone[2] <= stderr:
            by_unit = np.zeros(n_units)  # the panel does not help: the labels alone
            lam, estimate, stderr = alone
    else:
        by_unit = np.full(n_units, float(lam))
        _, estimate, stderr = corrected(by_unit)
    groups = int(present.sum())
    if stderr is None:
        return PPIEstimate(panel, estimate, None, None, lam, n, groups)
    rate = UNSEEN / (n + 2 * UNSEEN)
    stderr = max(stderr, math.sqrt(rate * (1 - rate) / n))
    half = uncertainty.t_quantile(1 - (1 - confidence) / 2, groups - 1) * stderr
    sums = np.column_stack(
        [
            uncertainty.unit_sums(units_all, by_unit[units_all] * yhat_all, n_units),
            uncertainty.unit_sums(units, weights * (y - by_unit[units] * yhat), n_units),
        ]
    )[present]
    counts = np.column_stack(
        [np.bincount(units_all, minlength=n_units), np.bincount(units, weights, n_units)]
    )[present].astype(float)
    resampling = uncertainty.Resampling(groups, seed, iterations)
    _, ci, _ = uncertainty.studentized_interval(
        sums, counts, resampling, np.ones(2), confidence=confidence
    )
    # Never narrower than Student's t on the floored standard error: a few labels that seldom
    # disagree show the bootstrap too little of the variance (its replicates see none either).
    ci = [min(ci[0], estimate - half), max(ci[1], estimate + half)]
    return PPIEstimate(panel, estimate, ci, stderr, lam, n, groups)


def _stderr(influence: np.ndarray) -> float | None:
    return uncertainty.clustered_stderr(influence) if len(influence) >= 2 else None


def _mean(values: np.ndarray, weights: np.ndarray) -> float:
    return float(weights @ values / weights.sum())


def _centred_sums(
    values: np.ndarray, weights: np.ndarray, units: np.ndarray, n_units: int
) -> np.ndarray:
    """Per unit, Σ w·(v − the weighted mean) / Σ w: its part in the weighted mean's influence."""
    centred = weights * (values - _mean(values, weights))
    return uncertainty.unit_sums(units, centred, n_units) / weights.sum()


def tuned_lambda(
    y: np.ndarray,
    yhat: np.ndarray,
    units: np.ndarray,
    a: np.ndarray,
    n_units: int,
    present: np.ndarray,
    weights: np.ndarray | None = None,
) -> float:
    """The λ that minimises the clustered variance of θ̂ on these labels (`a`: the all-items
    part of the influence, per filing in `present`): with d_g = a_g − ŷ_g, λ* = −Σ d_g·y_g /
    Σ d_g², clipped to [0, 1] as ppi-python clips it (0 where Σ d_g² = 0: the panel's scores
    do not vary, and cannot help). `weights`: each label's (1 / its inclusion probability)."""
    weights = np.ones(len(y)) if weights is None else weights
    y_g = _centred_sums(y, weights, units, n_units)[present]
    d = a - _centred_sums(yhat, weights, units, n_units)[present]
    spread = float(d @ d)
    return float(np.clip(-(d @ y_g) / spread, 0, 1)) + 0.0 if spread > 0 else 0.0


def _cross_fitted(
    y: np.ndarray,
    yhat: np.ndarray,
    units: np.ndarray,
    a: np.ndarray,
    n_units: int,
    present: np.ndarray,
    weights: np.ndarray,
) -> np.ndarray:
    """Each filing's λ, tuned on the labels of the other half of the filings (halves by the
    filings' order: even and odd); 1 (plain PPI) where a half has no labels."""
    half = units % 2
    by_unit = np.ones(n_units)
    if np.all(half == half[0]):
        return by_unit
    for side in (0, 1):
        other = half != side
        by_unit[side::2] = tuned_lambda(
            y[other], yhat[other], units[other], a, n_units, present, weights[other]
        )
    return by_unit


def panel_interval(
    yhat_all: np.ndarray,
    units_all: np.ndarray,
    n_units: int,
    *,
    confidence: float = uncertainty.CONFIDENCE,
) -> tuple[list[float] | None, float | None]:
    """The panel's own mean over all items with its filing-clustered t interval, as if the
    panel were the people (PPI with λ = 1 and no labeled part): how sure the panel's number is
    of itself, whatever its bias. (ci, stderr); None with fewer than two filings."""
    yhat_all = np.asarray(yhat_all, dtype=float)
    units_all = np.asarray(units_all, dtype=np.int64)
    if not len(yhat_all):
        return None, None
    panel = float(yhat_all.mean())
    present = np.bincount(units_all, minlength=n_units) > 0
    a = uncertainty.unit_sums(units_all, yhat_all - panel, n_units)[present] / len(yhat_all)
    return uncertainty.clustered_t_interval(panel, a, confidence)


def labels_needed(
    halfwidth: float,
    *,
    rectifier_variance: float,
    panel_stderr: float = 0.0,
    design_effect: float = 1.0,
    confidence: float = uncertainty.CONFIDENCE,
) -> int | None:
    """How many items, drawn at random, people must label for the PPI interval's half-width to
    be at most `halfwidth` (in points: the 0–100 scale the results show), or None where no
    number of labels can do it.

    The interval's half-width is about z·sqrt(V_panel + σ_r²·deff/n), so

        n = ceil(z²·σ_r²·deff / (h² − z²·V_panel)),   h = halfwidth / 100,

    impossible (None) when h² ≤ z²·V_panel: the panel's own sampling error (its filings are a
    sample too) already fills the half-width. On the labels' 0–1 scale:

    - `rectifier_variance` σ_r²: the per-item variance of y − λ·ŷ, from a pilot's labels
      (`np.var(y - lam * yhat, ddof=1)`), or from a stated rate at which the panel and the people
      disagree: with λ = 1 and labels in {0, 1}, y − ŷ is −1, 0 or 1, so σ_r² ≤ that rate.
    - `panel_stderr`: the clustered standard error of λ·mean(ŷ_all) (`panel_interval`'s, ×λ);
      V_panel is its square. The two parts are taken as independent (the audit is a small part
      of the items).
    - `design_effect` deff: how much clustering by filing inflates the rectifier's variance,
      1 + (m − 1)·ρ for m labeled items a filing and ρ the intraclass correlation of y − λ·ŷ
      (or, from a pilot, its clustered variance over σ_r²/n).
    - z: the normal quantile of `confidence` (1.96 at 95%)."""
    from scipy.special import ndtri

    z = float(ndtri(1 - (1 - confidence) / 2))
    room = (halfwidth / 100) ** 2 - z**2 * panel_stderr**2
    if room <= 0:
        return None
    return math.ceil(z**2 * rectifier_variance * design_effect / room)


# --- agreement with the people's labels ---


def majority(codes: Sequence[int]) -> int | None:
    """The label (code) more than half the annotators of an item gave; None without one (a
    tie, or a plurality short of half: the item is left unresolved)."""
    counts = Counter(codes).most_common(1)
    return counts[0][0] if counts and 2 * counts[0][1] > len(codes) else None


def agreement_with_people(
    codes: np.ndarray,
    human: np.ndarray,
    units: np.ndarray,
    n_units: int,
    *,
    coders: Sequence[str],
    seed: int,
    iterations: int = uncertainty.BOOTSTRAP_ITERS,
) -> dict[str, dict[str, Any]]:
    """Per coder (a column of `codes`, items × coders: each judge, the panel's majority; label
    codes as `metrics.vote_code` gives them, negative: no label) against the people's adjudicated
    label codes `human` (negative: not labeled by people, left out): `n` (the items both
    labeled), `accuracy` and Cohen's `kappa` ((p_o − p_e)/(1 − p_e), None where p_e = 1: both
    give one label only), each with its percentile interval from the filing bootstrap (`units`:
    each item's filing), and `confusion`: people's label → coder's label → count, with the items
    the coder did not label under "abstained". Rounded to 4 decimals; None where undefined."""
    codes, human = np.asarray(codes), np.asarray(human)
    units = np.asarray(units, dtype=np.int64)
    if codes.ndim != 2 or codes.shape != (len(human), len(coders)) or len(units) != len(human):
        raise FinReflectError("agreement with people: codes must be items × coders")
    labeled = human >= 0
    codes, human, units = codes[labeled], human[labeled].astype(np.int64), units[labeled]
    both = codes >= 0
    width = len(coders) * _K * _K  # per unit: each coder's K × K table (people × coder)
    cell = np.arange(len(coders)) * _K * _K + human[:, None] * _K + np.maximum(codes, 0)
    index = (units[:, None] * width + cell)[both]
    table = np.bincount(index, minlength=n_units * width).reshape(n_units, width).astype(float)
    tables = table.sum(axis=0).reshape(len(coders), _K, _K)
    replicates = uncertainty.Resampling(n_units, seed, iterations).totals(table)
    accuracy, kappa = _accuracy_kappa(tables)
    rep_accuracy, rep_kappa = _accuracy_kappa(replicates.reshape(-1, len(coders), _K, _K))
    shown = np.flatnonzero(np.bincount(np.concatenate([human, codes[both]]), minlength=_K))
    result = {}
    for column, coder in enumerate(coders):
        abstained = np.bincount(human[~both[:, column]], minlength=_K)
        result[coder] = {
            "n": int(both[:, column].sum()),
            "accuracy": _round(accuracy[column]),
            "accuracy_ci": _round_ci(rep_accuracy[:, column]),
            "kappa": _round(kappa[column]),
            "kappa_ci": _round_ci(rep_kappa[:, column]),
            "confusion": {
                _NAMES[h]: {
                    **{_NAMES[c]: int(tables[column, h, c]) for c in shown},
                    "abstained": int(abstained[h]),
                }
                for h in shown
            },
        }
    return result


def _accuracy_kappa(tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy and Cohen's κ of confusion tables (... × K × K, people × coder); NaN where
    undefined (no item; κ: chance agreement 1)."""
    n = tables.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(tables, axis1=-2, axis2=-1) / n
        chance = (tables.sum(axis=-1) * tables.sum(axis=-2)).sum(axis=-1) / n**2
        kappa = np.where(chance < 1 - 1e-12, (observed - chance) / (1 - chance), np.nan)
    return np.where(n > 0, observed, np.nan), np.where(n > 0, kappa, np.nan)


def _round(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 4)


def _round_ci(replicates: np.ndarray) -> list[float] | None:
    ci, _ = uncertainty.interval(replicates)
    return None if ci is None else [round(ci[0], 4), round(ci[1], 4)]


def alpha_with_people(
    codes: np.ndarray,
    human: np.ndarray,
    units: np.ndarray,
    n_units: int,
    *,
    ordered: bool,
    code_scores: np.ndarray | None = None,
    seed: int | None = None,
    iterations: int = uncertainty.BOOTSTRAP_ITERS,
) -> dict[str, Any]:
    """Krippendorff's α over the items people labeled, the people's code (`human`; negative: not
    labeled, left out) one more coder beside the judges' (`codes`, items × judges; negative: no
    vote; the judges only, not the panel's majority, which would count them twice): nominal,
    ordinal too where the labels are `ordered`, with the filing bootstrap's interval when
    seeded; what `Coincidences.agreement` returns. `code_scores`: each code's score, which
    orders the values (`metrics.code_scores`, its default)."""
    codes, human = np.asarray(codes), np.asarray(human)
    labeled = human >= 0
    table = np.column_stack([codes[labeled], human[labeled]]).astype(np.int64)
    coincidences = Coincidences.of(
        table,
        np.asarray(units, dtype=np.int64)[labeled],
        n_units,
        ordered=ordered,
        code_scores=metrics.code_scores() if code_scores is None else code_scores,
    )
    totals = None
    if seed is not None:
        totals = uncertainty.Resampling(n_units, seed, iterations).totals(coincidences.by_unit)
    return coincidences.agreement(totals)
