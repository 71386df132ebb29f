"""How sure the scores are: bootstrap intervals that resample filings, Krippendorff's α and its
interval (nominal; ordinal for ordered labels), and paired comparisons of runs with rank ranges.

The unit of resampling is the filing (a company's 10-K for one fiscal year): the benchmark
samples filings and sections, and the spans of one filing share their company, year, writing
and often their facts, so their outcomes move together. Resampling spans as if independent
makes the intervals too narrow; resampling filings keeps each filing's spans together (a
cluster bootstrap). The span bootstrap is kept beside it for comparison.

Every bootstrap here is a weighted sum: a replicate draws n units with replacement, which is a
vector of weights (how often each unit was drawn), and any statistic built from per-unit sums
(a ratio of sums, a coincidence matrix) is that vector times the per-unit table. All replicates
of a run come from one seeded stream, so every criterion, the overall score and α move together.

Comparisons of runs (`compare`) draw nothing: each difference's filing-clustered standard error
is computed (linearised), and one Bonferroni-adjusted t multiplier makes the intervals of all
pairs simultaneous, so the separations a table shows hold together, whatever the seed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, get_args

import numpy as np

from finreflect_eval._util.errors import FinReflectError

BOOTSTRAP_ITERS = 1000
CONFIDENCE = 0.95
MIN_FILINGS = 12
"""From this many filings the studentized filing bootstrap (`studentized_interval`) covered at
least 93% of the time in the coverage simulation (tests/stats/test_interval_coverage.py, scores
near 50% and 90%); under it an interval is marked unreliable. (Near 100% with small filings no
interval here covers so well: see docs/scores.md.)"""
_BLOCK = 1 << 22  # units × replicates held at once (32 MB as float64)

Level = Literal["nominal", "ordinal"]
LEVELS: tuple[Level, ...] = get_args(Level)  # α's levels of measurement computed here


@dataclass(frozen=True)
class Resampling:
    """`iterations` seeded draws of `n_units` units with replacement (the same on any machine)."""

    n_units: int
    seed: int
    iterations: int = BOOTSTRAP_ITERS

    def weights(self) -> Iterator[np.ndarray]:
        """Per block of replicates, how often each draws each unit (replicates × units)."""
        rng = np.random.default_rng(self.seed)
        rows = max(1, _BLOCK // max(self.n_units, 1))
        for start in range(0, self.iterations, rows):
            block = min(rows, self.iterations - start)
            picks = rng.integers(0, self.n_units, size=(block, self.n_units))
            picks += np.arange(block)[:, None] * self.n_units
            counts = np.bincount(picks.ravel(), minlength=block * self.n_units)
            yield counts.reshape(block, self.n_units).astype(float)

    def totals(self, table: np.ndarray) -> np.ndarray:
        """Each replicate's column sums of a per-unit table (units × columns → replicates ×
        columns); NaN with fewer than two units (one cannot show how units vary: no interval)."""
        if self.n_units < 2 or not self.iterations:
            return np.full((self.iterations, table.shape[1]), np.nan)
        return np.vstack([weights @ table for weights in self.weights()])


def ratios(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Σ sums / Σ counts per replicate and column; NaN where a replicate drew no count."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.where(counts > 0, counts, 1), np.nan)


def interval(replicates: np.ndarray) -> tuple[list[float] | None, float | None]:
    """The percentile interval and the standard deviation of a statistic's replicates (NaN
    replicates, those without data, left out); None when none is defined."""
    defined = replicates[~np.isnan(replicates)]
    if len(defined) < 2:
        return None, None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(defined, [tail, 100 - tail])
    return [float(low), float(high)], float(np.std(defined, ddof=1))


def clustered_stderr(influence: np.ndarray) -> float:
    """The cluster-robust standard error of a statistic from its units' linearised influences
    (at least two units): the small-sample factor G/(G-1) times their sum of squares."""
    units = len(influence)
    return math.sqrt(units / (units - 1) * float(influence @ influence))


def clustered_t_interval(
    estimate: float, influence: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[list[float] | None, float | None]:
    """A ratio's interval from its units' linearised influences (`influence`, on the estimate's
    scale): the cluster-robust standard error (factor G/(G-1)) times Student's t with G-1
    degrees of freedom; None with fewer than two units."""
    units = len(influence)
    if units < 2:
        return None, None
    stderr = clustered_stderr(influence)
    half = t_quantile(1 - (1 - confidence) / 2, units - 1) * stderr
    return [estimate - half, estimate + half], stderr


def studentized_interval(
    sums: np.ndarray,
    counts: np.ndarray,
    resampling: Resampling,
    coefficients: np.ndarray | None = None,
    confidence: float = CONFIDENCE,
) -> tuple[float | None, list[float] | None, float | None]:
    """A combination of ratios (per part: Σ sums / Σ counts over units; units × parts in) with
    its studentized (bootstrap-t) interval over the units: each replicate's estimate minus the
    estimate, over the replicate's own clustered standard error, gives the t quantiles the
    interval takes in place of Student's (Efron and Tibshirani 1993, §12.5; clustered: Cameron,
    Gelbach and Miller 2008). The percentile bootstrap and Student's t both under-cover a
    skewed score (near 90%) with few filings; this one does not. It is never narrower than
    Student's t (`clustered_t_interval`), which it is where no replicate has a spread: with few
    units the replicates can only reshuffle them (two: every pivot is 0), and near 100% the
    replicates made only of perfect units have no spread, and the pivot loses its upper tail.

    `coefficients`: each part's weight (a replicate missing a part it weighs is left out);
    None: the mean of the parts defined (in the data, and in each replicate). Returns
    (estimate, ci, stderr) on the ratios' scale, the standard error the clustered one
    (`clustered_stderr`); None where undefined."""
    sums, counts = np.asarray(sums, float), np.asarray(counts, float)
    weights_of = _combination(coefficients)
    estimate, influence = _linearised(sums, counts, np.ones(len(sums)), weights_of)
    if estimate is None:
        return None, None, None
    if len(sums) < 2:
        return estimate, None, None
    stderr = clustered_stderr(influence)
    pivots = []
    for draws in resampling.weights():
        drawn, spread = _linearised(sums, counts, draws, weights_of)
        # A spread within rounding of 0 (one unit drawn again and again) is 0: no pivot.
        pivots.append((drawn - estimate) / np.where(spread > ROUNDING * stderr, spread, np.nan))
    pivot = np.concatenate(pivots) if pivots else np.array([])
    pivot = pivot[~np.isnan(pivot)]
    student, _ = clustered_t_interval(estimate, influence, confidence)
    if len(pivot) < 2:
        return estimate, student, stderr
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(pivot, [tail, 100 - tail])
    ci = [min(estimate - high * stderr, student[0]), max(estimate - low * stderr, student[1])]
    return estimate, ci, stderr


ROUNDING = 1e-9
"""A standard error this small, relative to another's, is 0: rounding, not a spread."""


def _combination(coefficients: np.ndarray | None):
    """Per replicate, each part's weight in the combination (replicates × parts of defined
    ratios in). With `coefficients`, a replicate missing a part it weighs gets NaN weights: it
    is undefined, not a combination of the other parts."""

    def weights_of(defined: np.ndarray) -> np.ndarray:
        if coefficients is not None:
            weights = np.asarray(coefficients, float)
            missing = (~defined & (weights != 0)).any(axis=-1, keepdims=True)
            return np.where(missing, np.nan, np.where(defined, weights, 0.0))
        n = defined.sum(axis=-1, keepdims=True)
        return np.where(defined, 1 / np.maximum(n, 1), 0.0)

    return weights_of


def _linearised(sums, counts, draws, weights_of):
    """The combination of ratios under unit weights `draws` (units, or replicates × units) and
    its clustered standard error: (estimate, stderr) per replicate; for one weight vector, the
    estimate and each unit's linearised influence (units)."""
    single = draws.ndim == 1
    draws = np.atleast_2d(draws)
    total_sums, total_counts = draws @ sums, draws @ counts
    defined = total_counts > 0
    ratio = np.where(defined, total_sums / np.where(defined, total_counts, 1), 0.0)
    coefficient = weights_of(defined)
    if single and (not defined.any() or np.isnan(coefficient).any()):
        return None, None
    estimate = np.where(defined.any(axis=1), (coefficient * ratio).sum(axis=1), np.nan)
    scale = coefficient / np.where(defined, total_counts, 1)
    # influence[b, g] = Σ_p scale[b, p] · (sums[g, p] − ratio[b, p] · counts[g, p])
    influence = scale @ sums.T - (scale * ratio) @ counts.T
    if single:
        return float(estimate[0]), influence[0]
    units = sums.shape[0]
    spread = np.sqrt(units / (units - 1) * (draws * influence**2).sum(axis=1))
    return estimate, spread


def t_quantile(probability: float, degrees_of_freedom: float) -> float:
    """Student's t quantile (scipy.special's: scipy.stats takes a second to import)."""
    from scipy.special import stdtrit

    return float(stdtrit(degrees_of_freedom, probability))


def units_of(keys: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct keys in order of first appearance, and each key's index among them."""
    position: dict[str, int] = {}
    index = np.array([position.setdefault(key, len(position)) for key in keys], dtype=np.int64)
    return list(position), index


def unit_sums(units: np.ndarray, values: np.ndarray, n_units: int) -> np.ndarray:
    """`values` (rows × columns, or rows) summed by each row's unit (units × columns)."""
    if values.ndim == 1:
        return np.bincount(units, weights=values, minlength=n_units)
    sums = np.zeros((n_units, values.shape[1]))
    for column, weights in enumerate(values.T):
        sums[:, column] = np.bincount(units, weights=weights, minlength=n_units)
    return sums


def mean_of_defined(values: np.ndarray) -> np.ndarray:
    """Each row's mean over its defined (not NaN) values; NaN where none is."""
    defined = ~np.isnan(values)
    total = np.where(defined, values, 0).sum(axis=1)
    count = defined.sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


# --- Krippendorff's α from coincidence matrices ---


def value_counts(codes: np.ndarray, values: Sequence[int]) -> np.ndarray:
    """How many of each item's votes (items × judges; negative: none) give each value."""
    counts = np.zeros((len(codes), len(values)))
    for column, value in enumerate(values):
        counts[:, column] = (codes == value).sum(axis=1)
    return counts


def coincidences(counts: np.ndarray) -> np.ndarray:
    """Each item's contribution to the coincidence matrix (items × V × V, as V² columns): the
    pairs of its votes, each weighted 1/(m-1) for its m votes; items with fewer than two votes
    are not pairable and contribute nothing (Krippendorff 2011, "Computing Krippendorff's
    Alpha-Reliability", §B)."""
    m = counts.sum(axis=1)
    scale = np.where(m >= 2, 1 / np.maximum(m - 1, 1), 0.0)
    pairs = counts[:, :, None] * counts[:, None, :]
    diagonal = np.arange(counts.shape[1])
    pairs[:, diagonal, diagonal] -= counts
    return (pairs * scale[:, None, None]).reshape(len(counts), counts.shape[1] ** 2)


def alpha(coincidence: np.ndarray, level: Level = "nominal") -> np.ndarray:
    """α of coincidence matrices (... × V², values in their order), NaN where undefined (no
    pairable votes, or a single value: no disagreement is possible)."""
    if level not in LEVELS:
        raise FinReflectError(
            f"α level {level!r} is not computed here: it is one of {', '.join(LEVELS)}"
        )
    size = math.isqrt(coincidence.shape[-1])
    o = coincidence.reshape(*coincidence.shape[:-1], size, size)
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    if level == "nominal":
        delta = np.broadcast_to(1.0 - np.eye(size), o.shape)
    else:  # ordinal: the values between two ranks, each value's own count halved at the ends
        low = np.minimum.outer(np.arange(size), np.arange(size))
        high = np.maximum.outer(np.arange(size), np.arange(size))
        cumulative = np.cumsum(n_c, axis=-1)
        between = cumulative[..., high] - cumulative[..., low] + n_c[..., low]
        delta = (between - (n_c[..., low] + n_c[..., high]) / 2) ** 2
    observed = (o * delta).sum(axis=(-2, -1))
    expected = (n_c[..., :, None] * n_c[..., None, :] * delta).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected > 0, 1 - (n - 1) * observed / expected, np.nan)


# --- comparing runs on the same spans ---


@dataclass(frozen=True)
class Comparison:
    """Paired comparisons of runs scored on the same filings, as simultaneous intervals: each
    difference ± one critical value × its filing-clustered standard error.

    The standard error is the linearised (delta-method) one of a ratio of sums, clustered by
    filing with the small-sample factor G/(G-1); the critical value is Student's t with G-1
    degrees of freedom (G: the filings), Bonferroni-adjusted over every pair compared. So across
    the whole comparison the chance of showing any separation between runs that are truly equal
    is at most 1 - CONFIDENCE, however many runs there are; and nothing is drawn at random: the
    same scores give the same calls on any machine, with any seed."""

    scores: list[float]
    influence: np.ndarray
    """Filings × runs: each filing's linearised contribution to each run's score (×100)."""

    @property
    def pairs(self) -> int:
        return len(self.scores) * (len(self.scores) - 1) // 2

    @cached_property
    def critical(self) -> float | None:
        """The multiplier of every difference's standard error; None with fewer than two
        filings (nothing shows how filings vary)."""
        filings = self.influence.shape[0]
        if filings < 2 or not self.pairs:
            return None
        return t_quantile(1 - (1 - CONFIDENCE) / (2 * self.pairs), filings - 1)

    def stderr(self, a: int, b: int) -> float:
        """The filing-clustered standard error of run a's score minus run b's."""
        return clustered_stderr(self.influence[:, a] - self.influence[:, b])

    def difference(self, a: int, b: int) -> tuple[float, list[float] | None]:
        """Run a's score minus run b's, with its simultaneous interval."""
        difference = self.scores[a] - self.scores[b]
        if self.critical is None:
            return difference, None
        half = self.critical * self.stderr(a, b)
        return difference, [difference - half, difference + half]

    def tied(self, a: int, b: int) -> bool:
        """The difference's interval contains 0 (or is undefined)."""
        _, ci = self.difference(a, b)
        return ci is None or ci[0] <= 0 <= ci[1]

    def rank_ranges(self) -> list[tuple[int, int]]:
        """Each run's best and worst rank: 1 + the runs surely better, and the number of runs
        not surely worse (as LMArena ranks models)."""
        n = len(self.scores)
        ranges = []
        for a in range(n):
            apart = [b for b in range(n) if b != a and not self.tied(a, b)]
            better = sum(self.scores[b] > self.scores[a] for b in apart)
            worse = sum(self.scores[b] < self.scores[a] for b in apart)
            ranges.append((1 + better, n - worse))
        return ranges


def influence(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each unit's linearised contribution to a score that is the mean over parts of each
    part's Σ sums / Σ counts, ×100 (units × parts in; units out; parts without a count left
    out, as the score leaves them): (sums - ratio × counts) / Σ counts, averaged over parts."""
    total_sums, total_counts = sums.sum(axis=0), counts.sum(axis=0)
    defined = total_counts > 0
    if not defined.any():
        return np.zeros(len(sums))
    ratio = total_sums[defined] / total_counts[defined]
    parts = (sums[:, defined] - ratio * counts[:, defined]) / total_counts[defined]
    return 100 * parts.mean(axis=1)


def compare(runs: Sequence[tuple[float, Sequence[str], np.ndarray, np.ndarray]]) -> Comparison:
    """Runs given as (score ×100, unit ids, per-unit sums, per-unit counts: units × parts; the
    score is the mean over parts of each part's ratio), compared on the union of their filings:
    a filing missing from a run contributes nothing to it."""
    every, _ = units_of([unit for _, ids, _, _ in runs for unit in ids])
    position = {unit: i for i, unit in enumerate(every)}
    table = np.zeros((len(every), len(runs)))
    for column, (_, ids, sums, counts) in enumerate(runs):
        rows = np.array([position[unit] for unit in ids], dtype=np.int64)
        table[rows, column] = influence(np.asarray(sums, float), np.asarray(counts, float))
    return Comparison([score for score, *_ in runs], table)


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall's τ-b between two scorings of the same runs (ties counted as scipy counts them);
    None with fewer than two runs or where either is constant."""
    from scipy.stats import kendalltau

    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(kendalltau(a, b).statistic)
