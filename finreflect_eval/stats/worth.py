"""What a panel's votes are worth: how far its judges' errors go together, and so how many
independent judges the panel amounts to; and whether its best judge alone would do as well.

Three judges are not three votes when their errors are correlated (nine frontier judges carried
about two independent votes, arXiv 2605.29800). With a reference label per item, a judge's
error is its label differing from the reference; for each pair of judges, the Pearson (phi)
correlation of their errors over the items both labeled; and with r̄ the mean over pairs, Kish's
effective number of judges (Kish, *Survey Sampling*, 1965: the design effect 1 + (m − 1)·ρ of m
units correlated ρ),

    k_eff = k / (1 + (k − 1)·r̄),

k for independent errors, 1 for errors that always coincide; capped at k (errors that go
against each other, r̄ < 0, make Kish's number exceed k, up to infinity at r̄ = −1/(k − 1):
judges who cancel each other out are counted as independent, no more). The reference is people's
adjudicated label where there is one; else, for a pair, the majority of the judges outside it
(with three judges, the third). Against the panel the figure is a diagnostic, not an estimate:
an error every judge makes is invisible there (they agree), and the reference's own errors read
as errors the pair shares, so it can read low or high; only people's labels measure the errors
that matter. Intervals resample filings, as every interval of the package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from finreflect_eval.stats import uncertainty

_STATS = 4  # per pair and filing: items both labeled, errors of one, of the other, of both


@dataclass(frozen=True)
class ErrorCorrelation:
    pairs: list[tuple[int, int, int, float | None]]
    """(judge, judge, items both labeled, phi) per pair; phi None where an error rate is 0 or 1."""
    mean: float | None
    mean_ci: list[float] | None
    effective: float | None
    """Kish's effective number of judges (None without a defined correlation)."""
    effective_ci: list[float] | None


def strict_majority(codes: np.ndarray) -> np.ndarray:
    """Per row of label codes (negative: none), the label more than half its labels give; -1
    where none does."""
    valid = codes >= 0
    width = int(codes.max(initial=0)) + 1
    counts = np.stack([((codes == value) & valid).sum(axis=1) for value in range(width)], axis=1)
    top = counts.argmax(axis=1)
    enough = 2 * counts.max(axis=1, initial=0) > valid.sum(axis=1)
    return np.where(enough, top, -1)


def others_majority(codes: np.ndarray, left_out: tuple[int, ...]) -> np.ndarray:
    """The strict majority of the judges (columns) other than `left_out`."""
    return strict_majority(np.delete(codes, list(left_out), axis=1))


def kish_effective(mean_correlation: float | np.ndarray, judges: int) -> float | np.ndarray:
    """k / (1 + (k − 1)·r̄), capped at k (at r̄ ≤ 0)."""
    return judges / (1 + (judges - 1) * np.maximum(mean_correlation, 0.0))


def error_correlation(
    codes: np.ndarray,
    reference: Callable[[int, int], np.ndarray],
    units: np.ndarray,
    n_units: int,
    *,
    seed: int,
    iterations: int = uncertainty.BOOTSTRAP_ITERS,
) -> ErrorCorrelation:
    """The judges' pairwise error correlations, their mean and Kish's effective number of
    judges, with percentile intervals from the filing bootstrap: `codes` items × judges (label
    codes; negative: no label), `reference(i, j)` each item's reference label for the pair
    (negative: none), `units` each item's filing."""
    judges = codes.shape[1]
    pairs = list(combinations(range(judges), 2))
    table = np.zeros((n_units, _STATS * len(pairs)))
    for column, (i, j) in enumerate(pairs):
        truth = reference(i, j)
        both = (codes[:, i] >= 0) & (codes[:, j] >= 0) & (truth >= 0)
        a = (codes[both, i] != truth[both]).astype(float)
        b = (codes[both, j] != truth[both]).astype(float)
        at = units[both]
        for offset, values in enumerate((np.ones(len(a)), a, b, a * b)):
            table[:, _STATS * column + offset] = np.bincount(at, values, n_units)
    correlations = _phi(table.sum(axis=0)[None, :])[0]
    replicates = _phi(uncertainty.Resampling(n_units, seed, iterations).totals(table))
    mean, mean_replicates = _mean(correlations[None, :])[0], _mean(replicates)
    effective = None if np.isnan(mean) else float(kish_effective(float(mean), judges))
    effective_replicates = kish_effective(mean_replicates, judges)
    totals = table.sum(axis=0)
    return ErrorCorrelation(
        pairs=[
            (i, j, int(totals[_STATS * column]), _number(correlations[column]))
            for column, (i, j) in enumerate(pairs)
        ],
        mean=_number(mean),
        mean_ci=_ci(mean_replicates),
        effective=None if effective is None else round(effective, 4),
        effective_ci=_ci(effective_replicates),
    )


def _phi(totals: np.ndarray) -> np.ndarray:
    """Per row of totals (n, Σa, Σb, Σab per pair), each pair's phi; NaN where undefined."""
    n, a, b, ab = (totals[:, offset::_STATS] for offset in range(_STATS))
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = (n * a - a * a) * (n * b - b * b)
        return np.where(spread > 0, (n * ab - a * b) / np.sqrt(spread), np.nan)


def _mean(correlations: np.ndarray) -> np.ndarray:
    """Each row's mean over its defined correlations."""
    return uncertainty.mean_of_defined(correlations)


def _number(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 4)


def _ci(replicates: np.ndarray) -> list[float] | None:
    ci, _ = uncertainty.interval(replicates[np.isfinite(replicates)])
    return None if ci is None else [round(ci[0], 4), round(ci[1], 4)]


def accuracy_difference(
    correct: np.ndarray,
    labeled: np.ndarray,
    units: np.ndarray,
    n_units: int,
    *,
    seed: int,
    iterations: int = uncertainty.BOOTSTRAP_ITERS,
) -> tuple[float | None, list[float] | None]:
    """Points of accuracy of one coder minus another's (`correct`, `labeled`: items × 2, each
    coder's right labels and the items it labeled), with the studentized filing interval."""
    present = np.bincount(units, minlength=n_units) > 0
    sums = np.column_stack([np.bincount(units, c, n_units) for c in correct.T.astype(float)])
    counts = np.column_stack([np.bincount(units, c, n_units) for c in labeled.T.astype(float)])
    if (counts.sum(axis=0) == 0).any():
        return None, None
    resampling = uncertainty.Resampling(int(present.sum()), seed, iterations)
    estimate, ci, _ = uncertainty.studentized_interval(
        sums[present], counts[present], resampling, np.array([1.0, -1.0])
    )
    difference = None if estimate is None else round(100 * estimate, 4)
    return difference, None if ci is None else [round(100 * ci[0], 4), round(100 * ci[1], 4)]
