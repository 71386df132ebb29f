"""The statistics behind the scores: majority aggregation, micro/macro averages with bootstrap
CIs, per-judge scores, Krippendorff's α, CheckRules and reference overlap. Pure functions.

Aggregation (DESIGN.md §7): an item (a triple on one criterion, or a span on comprehensiveness)
takes the label more than half of its valid votes agree on. A failed judge call is an
abstention; an item with fewer than two valid votes is unscored (and counted). Without a
majority the item takes the most conservative of its labels and is flagged. Any disagreement
between valid votes flags the item for human review.

Scores are ×100: by default (finreflect_eval.criteria) faithfulness, precision and relevance
are micro-averaged over all triples, comprehensiveness macro-averaged over spans with good = 1,
partial = 0.5, poor = 0.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from finreflect_eval.criteria import CRITERIA, LEVEL_SCORES, Aggregation, Label
from finreflect_eval.schema import CheckRulesReport

BOOTSTRAP_ITERS = 1000
CONFIDENCE = 0.95
# The same scores as an `evaluate` metric: evaluate.load(str(EVALUATE_MODULE)).
EVALUATE_MODULE = Path(__file__).parent / "hf_metric" / "finreflect_judges.py"


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


# --- averages and confidence intervals over spans ---


@dataclass(frozen=True)
class SpanScores:
    """The scored items of each span that has any, spans in the order their first item comes:
    the span's id, the sum of its items' scores and their number. Every score is 0, 0.5 or 1,
    so every sum is exact and the averages are those of the items one by one."""

    ids: list[str]
    sums: np.ndarray
    counts: np.ndarray

    @classmethod
    def group(
        cls, spans: np.ndarray, span_ids: Sequence[str], scores: np.ndarray, keep: np.ndarray
    ) -> SpanScores:
        """The kept items' scores summed by span (`spans`: each item's index into `span_ids`)."""
        sums = np.bincount(spans[keep], weights=scores[keep], minlength=len(span_ids))
        counts = np.bincount(spans[keep], minlength=len(span_ids))
        present, first = np.unique(spans[keep], return_index=True)
        order = present[np.argsort(first, kind="stable")]
        return cls([span_ids[span] for span in order.tolist()], sums[order], counts[order])

    def means(self) -> np.ndarray:
        return self.sums / self.counts


def micro_average(per_span: SpanScores) -> float | None:
    """Mean over all items, whatever span they belong to."""
    total = per_span.counts.sum()
    return float(per_span.sums.sum() / total) if total else None


def macro_average(per_span: SpanScores) -> float | None:
    """Mean over spans of each span's mean."""
    return float(np.mean(per_span.means())) if len(per_span.ids) else None


def bootstrap(
    per_span: SpanScores,
    aggregation: Aggregation,
    *,
    seed: int,
    iterations: int = BOOTSTRAP_ITERS,
) -> tuple[list[float] | None, float | None]:
    """The percentile CI and the standard error (the statistics' standard deviation) of the
    average, resampling spans with replacement (seeded); ×100."""
    if not per_span.ids:
        return None, None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(per_span.ids), size=(iterations, len(per_span.ids)))
    if aggregation == "micro":
        stats = per_span.sums[picks].sum(axis=1) / per_span.counts[picks].sum(axis=1)
    else:
        stats = per_span.means()[picks].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail])
    return [_pct(low), _pct(high)], _pct(np.std(stats, ddof=1))


def overall(
    parts: Sequence[tuple[Aggregation, SpanScores]],
    span_ids: Sequence[str],
    *,
    seed: int,
    iterations: int = BOOTSTRAP_ITERS,
) -> tuple[float | None, list[float] | None, float | None]:
    """The mean of several averages (each criterion of each mode), its 95% CI and standard
    error, from one bootstrap that resamples the spans jointly for all of them (the modes run
    on the same spans), so the interval reflects how the averages move together; ×100."""
    points = [average(aggregation, per_span) for aggregation, per_span in parts]
    score = mean_of_averages(parts)
    if score is None or not span_ids:
        return None, None, None
    position = {span_id: i for i, span_id in enumerate(span_ids)}
    picks = np.random.default_rng(seed).integers(0, len(span_ids), size=(iterations, len(span_ids)))
    stats = []
    for (aggregation, per_span), point in zip(parts, points, strict=True):
        if point is None:
            continue
        sums, counts = np.zeros(len(span_ids)), np.zeros(len(span_ids))
        rows = [position[span_id] for span_id in per_span.ids]
        sums[rows], counts[rows] = per_span.sums, per_span.counts
        if aggregation == "macro":  # each span with items counts once, by its mean
            sums = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
            counts = (counts > 0).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):  # a resample without items: NaN
            stats.append(sums[picks].sum(axis=1) / counts[picks].sum(axis=1))
    mean = np.nanmean(np.vstack(stats), axis=0)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.nanpercentile(mean, [tail, 100 - tail])
    return score, [_pct(low), _pct(high)], _pct(np.nanstd(mean, ddof=1))


def average(aggregation: Aggregation, per_span: SpanScores) -> float | None:
    return (micro_average if aggregation == "micro" else macro_average)(per_span)


def mean_of_averages(parts: Sequence[tuple[Aggregation, SpanScores]]):
    """×100: the mean of the parts' averages (those defined)."""
    present = [average(a, per_span) for a, per_span in parts]
    present = [p for p in present if p is not None]
    return _pct(float(np.mean(present))) if present else None


def _pct(value: float | None) -> float | None:
    """×100, rounded so that the same samples give the same numbers on any machine."""
    return None if value is None else round(float(value) * 100, 4)


# --- agreement ---

_CODES = {0: 0, 1: 1, "poor": 2, "partial": 3, "good": 4}  # nominal: distinct codes


def krippendorff_alpha(items: Sequence[Item], judges: Sequence[str]) -> dict[str, Any]:
    """Nominal α across judges over the items; `alpha` None with the `reason` when undefined."""
    codes = np.array(
        [[_CODES.get(item.votes.get(judge), ABSTAINED) for judge in judges] for item in items],
        dtype=np.int8,
    ).reshape(len(items), len(judges))
    return _alpha(codes, judges)


def _alpha(codes: np.ndarray, judges: Sequence[str]) -> dict[str, Any]:
    """α of a matrix of label codes (items × judges; negative: no vote)."""
    import krippendorff

    result: dict[str, Any] = {"alpha": None, "reason": None, "n_items": len(codes)}
    if len(judges) < 2:
        result["reason"] = "fewer than two judges"
        return result
    data = np.where(codes >= 0, codes, np.nan).T
    try:
        alpha = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    except ValueError as exc:  # one value in the domain, or no item with two votes
        result["reason"] = str(exc)
        return result
    if np.isnan(alpha):
        result["reason"] = "no disagreement is possible (expected disagreement is 0)"
        return result
    result["alpha"] = round(float(alpha), 4)
    return result


# --- per criterion ---


@dataclass
class CriterionScores:
    score: float | None
    ci: list[float] | None
    stderr: float | None
    n_items: int
    n_scored: int
    unanimous: int
    split: int
    no_majority: int
    abstentions: int
    per_span: SpanScores = field(repr=False)
    per_judge: dict[str, float | None] = field(default_factory=dict)
    agreement: dict[str, Any] = field(default_factory=dict)


ABSENT, ABSTAINED = -2, -1  # codes of a judge without a vote on the item, and of an abstention
_LABELS = list(_CODES)  # code -> label
_CODE_SCORES = np.array([label_score(label) for label in _LABELS])


def score_criterion(
    items: Sequence[Item],
    judges: Sequence[str],
    *,
    aggregation: Aggregation,
    seed: int,
) -> CriterionScores:
    """The panel's score on one criterion's items (see `score_codes`)."""
    codes = np.full((len(items), len(judges)), ABSENT, dtype=np.int8)
    for row, item in enumerate(items):
        for column, judge in enumerate(judges):
            if judge in item.votes:
                codes[row, column] = vote_code(item.votes[judge])
    position: dict[str, int] = {}
    spans = np.array([position.setdefault(item.span_id, len(position)) for item in items])
    return score_codes(
        codes,
        spans.astype(np.int64),
        list(position),
        synthetic=np.array([item.synthetic for item in items], dtype=bool),
        n_votes=np.array([len(item.votes) for item in items], dtype=np.int64),
        judges=judges,
        aggregation=aggregation,
        seed=seed,
    )


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
    def of(cls, codes: np.ndarray, n_votes: np.ndarray) -> Outcomes:
        counts = np.stack([(codes == code).sum(axis=1) for code in range(len(_LABELS))], axis=1)
        n_valid = counts.sum(axis=1)
        scored = n_valid >= 2
        split = (counts > 0).sum(axis=1) > 1
        top = counts.max(axis=1, initial=0)
        no_majority = scored & (2 * top <= n_valid)
        # A majority label is unique (more than half); without one, the most conservative label.
        candidates = np.where(counts > 0, _CODE_SCORES, np.inf)
        label = np.where(no_majority, candidates.argmin(axis=1), counts.argmax(axis=1))
        return cls(
            score=_CODE_SCORES[label],
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
    seed: int,
) -> CriterionScores:
    """The panel's score on one criterion's items, with its CI, counts, per-judge scores and
    α: `codes` holds each item's label codes (items × judges; ABSTAINED, ABSENT), `spans` each
    item's span (an index into `span_ids`). Items labelled by rule (`synthetic`) count in the
    score, not in what measures the judges.

    Vectorised over items: the same decision rule as `aggregate`. Every label scores 0, 0.5 or
    1, so every sum is exact whatever its order: the numbers are those of scoring item by item."""
    outcome = Outcomes.of(codes, n_votes)
    per_span = SpanScores.group(spans, span_ids, outcome.score, outcome.scored)
    judged = ~synthetic
    per_judge = {}
    for column, judge in enumerate(judges):
        voted = judged & (codes[:, column] >= 0)
        scores = _CODE_SCORES[np.maximum(codes[:, column], 0)]
        by_span = SpanScores.group(spans, span_ids, scores, voted)
        per_judge[judge] = _pct(average(aggregation, by_span))
    ci, stderr = bootstrap(per_span, aggregation, seed=seed)
    return CriterionScores(
        score=_pct(average(aggregation, per_span)),
        ci=ci,
        stderr=stderr,
        n_items=len(codes),
        n_scored=int(outcome.scored.sum()),
        unanimous=int(outcome.unanimous[judged].sum()),
        split=int(outcome.split[judged].sum()),
        no_majority=int(outcome.no_majority[judged].sum()),
        abstentions=int((codes[judged] == ABSTAINED).sum()),
        per_judge=per_judge,
        agreement=_alpha(codes[judged], judges),
        per_span=per_span,
    )


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


# --- extraction-side metrics ---


_NOT_WORD = re.compile(r"[^\w$%.]+")


@lru_cache(maxsize=1 << 16)  # entity names repeat across a filing's triples
def _normalise(text: str) -> str:
    """Lower case, every run of other characters than word ones, `$`, `%` and `.` one space,
    no spaces or dots at either end."""
    return _NOT_WORD.sub(" ", text.lower()).strip(" .")


def triple_key(triple: Any) -> tuple[str, str, str]:
    """What makes two triples the same fact for reference overlap."""
    return (_normalise(triple.subject), triple.relation.lower(), _normalise(triple.object))


def extraction_metrics(
    n_spans: int,
    n_triples: int,
    rules: CheckRulesReport,
    overlap: tuple[int, int, int],
    failed: int,
) -> dict[str, Any]:
    """Metrics of the extracted triples themselves, from their counts over a task's spans:
    CheckRules passes, and the (predicted, reference, matched) distinct normalised (subject,
    relation, object) keys, for micro precision and recall against the reference triples."""
    predicted, reference, matched = overlap
    return {
        "n_spans": n_spans,
        "n_triples": n_triples,
        "triples_per_span": round(n_triples / n_spans, 4) if n_spans else None,
        "check_rules": _pct(rules.all_rules),
        "check_rules_detail": {
            key: _pct(value) for key, value in rules.as_dict().items() if key != "n_triples"
        },
        "reference_precision": _pct(matched / predicted) if predicted else None,
        "reference_recall": _pct(matched / reference) if reference else None,
        "failed_extractions": failed,
    }
