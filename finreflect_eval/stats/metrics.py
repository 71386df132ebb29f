"""The statistics behind the scores: majority aggregation, the averages' (`stats.averages`)
bootstrap intervals (by filing and by span: `RunBootstrap`), per-judge scores and the scores
without each judge, Krippendorff's α with its interval and gate (the metrics of the triples
themselves are `finreflect_eval.stats.extraction`'s). Pure functions; the resampling itself is
`finreflect_eval.stats.uncertainty`'s.

Aggregation (DESIGN.md §7): an item (a triple on one criterion, or a span on comprehensiveness)
takes the label more than half of its valid votes agree on. A failed judge call is an
abstention; an item with fewer than two valid votes is unscored (and counted). Without a
majority the item takes the most conservative of its labels and is flagged. Any disagreement
between valid votes flags the item for human review.

Scores are ×100: by default (finreflect_eval.protocol.criteria) faithfulness, precision and
relevance are micro-averaged over all triples, comprehensiveness macro-averaged over spans with
good = 1, partial = 0.5, poor = 0 (a task may set other levels: `levels`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from finreflect_eval.protocol.criteria import (
    COMPREHENSIVENESS_LEVELS,
    CRITERIA,
    LEVEL_SCORES,
    Aggregation,
    Label,
)
from finreflect_eval.stats import uncertainty
from finreflect_eval.stats.agreement import Coincidences
from finreflect_eval.stats.averages import SpanScores, average, pct

# The same scores as an `evaluate` metric: evaluate.load(str(EVALUATE_MODULE)).
EVALUATE_MODULE = Path(__file__).parents[1] / "hf_metric" / "finreflect_judges.py"


def label_score(label: Label) -> float:
    return LEVEL_SCORES[label] if isinstance(label, str) else float(label)


@dataclass(frozen=True)
class Item:
    """One judged item: a triple on one criterion, or a span's triples on comprehensiveness."""

    span_id: str
    criterion: str
    index: int  # the triple's position, 0 for a span
    votes: Mapping[str, Label | None]  # judge -> label, None for an abstention
    synthetic: bool = False  # labelled by rule (no triples), not by the judges
    filing: str = ""  # the span's filing (ticker and fiscal year): the bootstrap's unit


@dataclass(frozen=True)
class Outcome:
    label: Label | None  # None when unscored
    unanimous: bool  # every judge voted, and the same way
    split: bool  # valid votes disagree: flagged for human review
    no_majority: bool  # no label has more than half: the most conservative one was taken

    @property
    def scored(self) -> bool:
        return self.label is not None

    @property
    def score(self) -> float | None:
        return None if self.label is None else label_score(self.label)


def aggregate(votes: Mapping[str, Label | None]) -> Outcome:
    valid = [label for label in votes.values() if label is not None]
    counts = Counter(valid)
    split = len(counts) > 1
    if len(valid) < 2:
        return Outcome(None, unanimous=False, split=split, no_majority=False)
    label, top = counts.most_common(1)[0]
    no_majority = 2 * top <= len(valid)
    if no_majority:
        label = min(counts, key=label_score)
    unanimous = not split and len(valid) == len(votes)
    return Outcome(label, unanimous=unanimous, split=split, no_majority=no_majority)


_CODES = {0: 0, 1: 1, "poor": 2, "partial": 3, "good": 4}  # labels as codes, each distinct


def krippendorff_alpha(
    items: Sequence[Item], judges: Sequence[str], *, seed: int | None = None
) -> dict[str, Any]:
    """α across judges over the items (`agreement`), with its interval when seeded (resampling
    the items' filings: `Item.filing`, else their spans)."""
    codes = np.array(
        [[_CODES.get(item.votes.get(judge), ABSTAINED) for judge in judges] for item in items],
        dtype=np.int8,
    ).reshape(len(items), len(judges))
    names, units = uncertainty.units_of([item.filing or item.span_id for item in items])
    ordered = any(CRITERIA[item.criterion].ordered for item in items)
    table = Coincidences.of(codes, units, len(names), ordered=ordered, code_scores=_CODE_SCORES)
    totals = None
    if seed is not None:
        totals = uncertainty.Resampling(len(names), seed).totals(table.by_unit)
    return table.agreement(totals)


# --- per criterion ---


@dataclass
class CriterionScores:
    score: float | None
    n_items: int
    n_scored: int
    unanimous: int
    split: int
    no_majority: int
    abstentions: int
    per_span: SpanScores = field(repr=False)
    coincidences: Coincidences = field(repr=False)
    per_judge: dict[str, float | None] = field(default_factory=dict)
    without_judge: dict[str, float | None] = field(default_factory=dict)
    """The score recomputed from the other judges' votes (same rule; `TIE_RULE`), per judge
    left out."""
    judge_influence: dict[str, float | None] = field(default_factory=dict)
    """Per judge, the points it adds to the score beside the others (`judge_influence`)."""
    without_table: np.ndarray | None = field(default=None, repr=False)
    """Per filing, each left-out judge's score's sums, then its counts (filings × 2·judges)."""
    judge_influence_ci: dict[str, list[float] | None] = field(default_factory=dict)
    """Each influence's filing interval (`RunBootstrap`): it moves the score beyond chance only
    where the interval leaves 0 out."""
    agreement: dict[str, Any] = field(default_factory=dict)
    levels: dict[str, float] | None = None
    """The score of each level (good, partial, poor), for criteria with levels."""
    level_counts: dict[str, int] | None = None
    """How many scored items took each level, for criteria with levels."""
    # Set by the run's bootstrap (`RunBootstrap`): by filing, and by span for comparison.
    ci: list[float] | None = None
    stderr: float | None = None
    ci_span: list[float] | None = None
    n_filings: int = 0
    ci_method: str = ""
    ci_reliable: bool = False


ABSENT, ABSTAINED = -2, -1  # codes of a judge without a vote on the item, and of an abstention
_LABELS = list(_CODES)  # code -> label
_CODE_SCORES = np.array([label_score(label) for label in _LABELS])


def code_scores(levels: Mapping[str, float] | None = None) -> np.ndarray:
    """Each label code's score: 0/1 as is, good/partial/poor as `levels` sets them (default
    1/0.5/0)."""
    if levels is None:
        return _CODE_SCORES
    return np.array([levels[label] if isinstance(label, str) else label for label in _LABELS])


def score_criterion(
    items: Sequence[Item],
    judges: Sequence[str],
    *,
    aggregation: Aggregation,
    seed: int,
) -> CriterionScores:
    """The panel's score on one criterion's items (see `score_codes`), with its intervals
    (resampling the items' filings: `Item.filing`, else their spans)."""
    codes = np.full((len(items), len(judges)), ABSENT, dtype=np.int8)
    for row, item in enumerate(items):
        for column, judge in enumerate(judges):
            if judge in item.votes:
                codes[row, column] = vote_code(item.votes[judge])
    span_ids, spans = uncertainty.units_of([item.span_id for item in items])
    filing_of = {item.span_id: item.filing or item.span_id for item in items}
    filings, span_filings = uncertainty.units_of([filing_of[span] for span in span_ids])
    scores = score_codes(
        codes,
        spans,
        span_ids,
        synthetic=np.array([item.synthetic for item in items], dtype=bool),
        n_votes=np.array([len(item.votes) for item in items], dtype=np.int64),
        judges=judges,
        aggregation=aggregation,
        span_filings=span_filings,
        n_filings=len(filings),
        ordered=bool(items) and CRITERIA[items[0].criterion].ordered,
    )
    RunBootstrap([(aggregation, scores)], span_ids, span_filings, len(filings), seed=seed)
    return scores


TIE_RULE = "two judges split 1-1 on an item: the item takes the lower label"
"""How a score without one judge of three decides (as the panel does without a majority)."""


def judge_influence(without_judge: Mapping[str, float | None]) -> dict[str, float | None]:
    """Per judge, in points: the mean of the scores without each other judge, minus the score
    without this one. Every leave-one-out score drops by about the same when the judges are
    exchangeable (two judges that split take the lower label, `TIE_RULE`), so the drop itself
    says nothing of a judge; the difference does: near 0 for exchangeable judges, positive for a
    judge that lifts the score beyond the others (a lenient one), negative for a strict one.
    None where a score is missing, or with fewer than two judges."""
    result: dict[str, float | None] = {}
    for judge, without in without_judge.items():
        others = [value for name, value in without_judge.items() if name != judge]
        if without is None or not others or any(value is None for value in others):
            result[judge] = None
        else:
            result[judge] = round(sum(others) / len(others) - without, 4)
    return result


def vote_code(label: Label | None) -> int:
    return ABSTAINED if label is None else _CODES[label]


def code_label(code: int) -> Label | None:
    return _LABELS[code] if code >= 0 else None


@dataclass(frozen=True)
class Outcomes:
    """The decision rule of `aggregate`, for every row of a label-code matrix at once."""

    score: np.ndarray  # the label taken, as a score (meaningless where not scored)
    label: np.ndarray  # its code
    scored: np.ndarray
    unanimous: np.ndarray
    split: np.ndarray
    no_majority: np.ndarray

    @classmethod
    def of(
        cls, codes: np.ndarray, n_votes: np.ndarray, scores: np.ndarray = _CODE_SCORES
    ) -> Outcomes:
        """`scores`: each label code's score (`code_scores`)."""
        counts = np.stack([(codes == code).sum(axis=1) for code in range(len(_LABELS))], axis=1)
        n_valid = counts.sum(axis=1)
        scored = n_valid >= 2
        split = (counts > 0).sum(axis=1) > 1
        top = counts.max(axis=1, initial=0)
        no_majority = scored & (2 * top <= n_valid)
        # A majority label is unique (more than half); without one, the most conservative label.
        candidates = np.where(counts > 0, scores, np.inf)
        label = np.where(no_majority, candidates.argmin(axis=1), counts.argmax(axis=1))
        return cls(
            score=scores[label],
            label=label,
            scored=scored,
            unanimous=scored & ~split & (n_valid == n_votes),
            split=split,
            no_majority=no_majority,
        )


def score_codes(
    codes: np.ndarray,
    spans: np.ndarray,
    span_ids: Sequence[str],
    *,
    synthetic: np.ndarray,
    n_votes: np.ndarray,
    judges: Sequence[str],
    aggregation: Aggregation,
    span_filings: np.ndarray,
    n_filings: int,
    ordered: bool,
    levels: Mapping[str, float] | None = None,
) -> CriterionScores:
    """The panel's score on one criterion's items, with its counts, per-judge scores, scores
    without each judge and α (their intervals come from the run's `RunBootstrap`): `codes`
    holds each item's label codes (items × judges; ABSTAINED, ABSENT), `spans` each item's span
    (an index into `span_ids`), `span_filings` each span's filing (of `n_filings`); `ordered`:
    the labels are ordered (ordinal α too). Items labelled by rule (`synthetic`) count in the
    score, not in what measures the judges.

    `levels`: the scores of good/partial/poor (default 1/0.5/0); with `ordered`, the scored
    items' counts of each level are kept (`level_counts`).

    Vectorised over items: the same decision rule as `aggregate`. With the default levels every
    label scores 0, 0.5 or 1, so every sum is exact whatever its order: the numbers are those of
    scoring item by item."""
    label_scores = code_scores(levels)
    outcome = Outcomes.of(codes, n_votes, label_scores)
    per_span = SpanScores.group(spans, span_ids, outcome.score, outcome.scored)
    judged = ~synthetic
    per_judge = {}
    for column, judge in enumerate(judges):
        voted = judged & (codes[:, column] >= 0)
        scores = label_scores[np.maximum(codes[:, column], 0)]
        by_span = SpanScores.group(spans, span_ids, scores, voted)
        per_judge[judge] = pct(average(aggregation, by_span))
    without_judge = {}
    without_table = np.zeros((n_filings, 2 * len(judges)))
    position = {span_id: row for row, span_id in enumerate(span_ids)}
    for column, judge in enumerate(judges):
        others = np.delete(codes, column, axis=1)
        rest = Outcomes.of(others, (others != ABSENT).sum(axis=1), label_scores)
        by_span = SpanScores.group(spans, span_ids, rest.score, rest.scored)
        without_judge[judge] = pct(average(aggregation, by_span))
        rows = span_filings[[position[span] for span in by_span.ids]].astype(np.int64)
        for offset, values in zip((0, len(judges)), by_span.columns(aggregation), strict=True):
            without_table[:, offset + column] = np.bincount(rows, values, n_filings)
    coincidences = Coincidences.of(
        codes[judged],
        span_filings[spans[judged]],
        n_filings,
        ordered=ordered,
        code_scores=label_scores,
    )
    return CriterionScores(
        score=pct(average(aggregation, per_span)),
        n_items=len(codes),
        n_scored=int(outcome.scored.sum()),
        unanimous=int(outcome.unanimous[judged].sum()),
        split=int(outcome.split[judged].sum()),
        no_majority=int(outcome.no_majority[judged].sum()),
        abstentions=int((codes[judged] == ABSTAINED).sum()),
        per_judge=per_judge,
        without_judge=without_judge,
        judge_influence=judge_influence(without_judge),
        without_table=without_table,
        agreement=coincidences.agreement(),
        per_span=per_span,
        coincidences=coincidences,
        levels=dict(levels or LEVEL_SCORES) if ordered else None,
        level_counts=_level_counts(outcome) if ordered else None,
    )


def _level_counts(outcome: Outcomes) -> dict[str, int]:
    """How many scored items took each level (good, partial, poor)."""
    taken = np.bincount(outcome.label[outcome.scored], minlength=len(_LABELS))
    return {level: int(taken[_CODES[level]]) for level in COMPREHENSIVENESS_LEVELS}


FILING_BOOTSTRAP_T = "filing bootstrap-t (studentized)"


class RunBootstrap:
    """The bootstrap of a run's scores: every part (a judged criterion of a task) resampled by
    filing and, for comparison, by span, all parts with the same seeded draws so that their
    mean (Overall) moves as they move together; α's interval from the same filing draws.
    Sets each part's `ci`, `stderr`, `ci_span` and its agreement's intervals."""

    def __init__(
        self,
        parts: Sequence[tuple[Aggregation, CriterionScores]],
        span_ids: Sequence[str],
        span_filings: np.ndarray,
        n_filings: int,
        *,
        seed: int,
        iterations: int = uncertainty.BOOTSTRAP_ITERS,
    ) -> None:
        self.iterations, self.seed = iterations, seed
        position = {span_id: row for row, span_id in enumerate(span_ids)}
        n = len(parts)
        by_span = np.zeros((len(span_ids), 2 * n))
        self.filing_table = np.zeros((n_filings, 2 * n))  # per filing: each part's sum, count
        for column, (aggregation, scores) in enumerate(parts):
            rows = np.array([position[span] for span in scores.per_span.ids], dtype=np.int64)
            for offset, values in zip((0, n), scores.per_span.columns(aggregation), strict=True):
                by_span[:, offset + column] = np.bincount(rows, values, len(span_ids))
                self.filing_table[:, offset + column] = np.bincount(
                    span_filings[rows], values, n_filings
                )
        agreement = [scores.coincidences.by_unit for _, scores in parts]
        totals = uncertainty.Resampling(n_filings, seed, iterations).totals(
            np.hstack([self.filing_table, *agreement])
        )
        span_totals = uncertainty.Resampling(len(span_ids), seed, iterations).totals(by_span)
        self.by_span = uncertainty.ratios(span_totals[:, :n], span_totals[:, n:])
        start = 2 * n
        for column, (_, scores) in enumerate(parts):
            interval = self._interval([column])
            scores.ci, scores.stderr = interval["ci"], interval["stderr"]
            scores.n_filings, scores.ci_method = n_filings, interval["ci_method"]
            scores.ci_reliable = interval["ci_reliable"]
            scores.ci_span, _ = _pct_interval(self.by_span[:, column])
            width = scores.coincidences.by_unit.shape[1]
            scores.agreement = scores.coincidences.agreement(totals[:, start : start + width])
            start += width
        self.parts = [scores for _, scores in parts]
        for column, (_, scores) in enumerate(parts):
            scores.judge_influence_ci = self.influence([column])

    def overall(self, columns: Sequence[int]) -> dict[str, Any]:
        """The interval (by filing and by span) and standard error of the mean of some parts'
        averages (their indices in `parts`), with how the interval was made."""
        ci_span, _ = _pct_interval(uncertainty.mean_of_defined(self.by_span[:, columns]))
        return {**self._interval(columns), "ci_span": ci_span, "n_filings": len(self.filing_table)}

    def influence(self, columns: Sequence[int]) -> dict[str, list[float] | None]:
        """Each judge's influence on the mean of some parts (`judge_influence`: the mean of the
        scores without each other judge, minus the score without this one) with its studentized
        filing interval; None where a part has no score without some judge, or without
        resamples."""
        tables = [self.parts[column].without_table for column in columns]
        if not tables or any(table is None for table in tables) or not self.iterations:
            return {}
        judges = list(self.parts[columns[0]].without_judge)
        k = len(judges)
        sums = np.hstack([table[:, :k] for table in tables])
        counts = np.hstack([table[:, k:] for table in tables])
        if k < 2 or (counts.sum(axis=0) == 0).any():
            return dict.fromkeys(judges)
        resampling = uncertainty.Resampling(len(self.filing_table), self.seed, self.iterations)
        result = {}
        for judge in range(k):
            weights = np.full(k, 1 / (k - 1))
            weights[judge] = -1.0
            coefficients = np.tile(weights, len(tables)) / len(tables)
            _, ci, stderr = uncertainty.studentized_interval(sums, counts, resampling, coefficients)
            if ci is None or not stderr:  # no filing varies: nothing to tell chance from
                result[judges[judge]] = None
            else:
                result[judges[judge]] = [pct(ci[0]), pct(ci[1])]
        return result

    def _interval(self, columns: Sequence[int]) -> dict[str, Any]:
        """The filing interval of the mean of some parts' averages: the studentized filing
        bootstrap (`uncertainty.studentized_interval`), reliable from `uncertainty.MIN_FILINGS`
        filings on; none without resamples (`bootstrap_iters` 0)."""
        n_filings = len(self.filing_table)
        if not self.iterations:
            return {"ci": None, "stderr": None, "ci_method": None, "ci_reliable": None}
        n = self.filing_table.shape[1] // 2
        _, ci, stderr = uncertainty.studentized_interval(
            self.filing_table[:, list(columns)],
            self.filing_table[:, [n + column for column in columns]],
            uncertainty.Resampling(n_filings, self.seed, self.iterations),
        )
        return {
            "ci": None if ci is None else [pct(max(ci[0], 0.0)), pct(min(ci[1], 1.0))],
            "stderr": pct(stderr),
            "ci_method": FILING_BOOTSTRAP_T if ci is not None else None,
            "ci_reliable": n_filings >= uncertainty.MIN_FILINGS,
        }


def _pct_interval(replicates: np.ndarray) -> tuple[list[float] | None, float | None]:
    ci, stderr = uncertainty.interval(replicates)
    return (None if ci is None else [pct(ci[0]), pct(ci[1])]), pct(stderr)


def score_items(items: Sequence[Item], judges: Sequence[str], *, seed: int) -> dict[str, Any]:
    """Every criterion's scores (default averaging), for items of any criteria."""
    return {
        name: score_criterion(
            [item for item in items if item.criterion == name],
            judges,
            aggregation=criterion.aggregation,
            seed=seed,
        ).__dict__
        for name, criterion in CRITERIA.items()
    }
