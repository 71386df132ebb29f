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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from finreflect_eval.criteria import CRITERIA, LEVEL_SCORES, Aggregation, Label
from finreflect_eval.schema import summarize_rule_checks

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


def _per_span(scores: Iterable[tuple[str, float]]) -> dict[str, list[float]]:
    spans: dict[str, list[float]] = {}
    for span_id, score in scores:
        spans.setdefault(span_id, []).append(score)
    return spans


def micro_average(per_span: Mapping[str, Sequence[float]]) -> float | None:
    """Mean over all items, whatever span they belong to."""
    values = [v for scores in per_span.values() for v in scores]
    return float(np.mean(values)) if values else None


def macro_average(per_span: Mapping[str, Sequence[float]]) -> float | None:
    """Mean over spans of each span's mean."""
    means = [np.mean(scores) for scores in per_span.values() if len(scores)]
    return float(np.mean(means)) if means else None


def bootstrap(
    per_span: Mapping[str, Sequence[float]],
    aggregation: Aggregation,
    *,
    seed: int,
    iterations: int = BOOTSTRAP_ITERS,
) -> tuple[list[float] | None, float | None]:
    """The percentile CI and the standard error (the statistics' standard deviation) of the
    average, resampling spans with replacement (seeded); ×100."""
    groups = [np.asarray(s, dtype=float) for s in per_span.values() if len(s)]
    if not groups:
        return None, None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(groups), size=(iterations, len(groups)))
    if aggregation == "micro":
        sums = np.array([g.sum() for g in groups])[picks].sum(axis=1)
        counts = np.array([len(g) for g in groups])[picks].sum(axis=1)
        stats = sums / counts
    else:
        stats = np.array([g.mean() for g in groups])[picks].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail])
    return [_pct(low), _pct(high)], _pct(np.std(stats, ddof=1))


def overall(
    parts: Sequence[tuple[Aggregation, Mapping[str, Sequence[float]]]],
    span_ids: Sequence[str],
    *,
    seed: int,
    iterations: int = BOOTSTRAP_ITERS,
) -> tuple[float | None, list[float] | None]:
    """The mean of several averages (each criterion of each mode) and its 95% CI, from one
    bootstrap that resamples the spans jointly for all of them (the modes run on the same
    spans), so the interval reflects how the averages move together; ×100."""
    points = [average(aggregation, per_span) for aggregation, per_span in parts]
    score = mean_of_averages(parts)
    if score is None or not span_ids:
        return None, None
    position = {span_id: i for i, span_id in enumerate(span_ids)}
    picks = np.random.default_rng(seed).integers(0, len(span_ids), size=(iterations, len(span_ids)))
    stats = []
    for (aggregation, per_span), point in zip(parts, points, strict=True):
        if point is None:
            continue
        sums, counts = np.zeros(len(span_ids)), np.zeros(len(span_ids))
        for span_id, values in per_span.items():
            sums[position[span_id]], counts[position[span_id]] = sum(values), len(values)
        if aggregation == "macro":  # each span with items counts once, by its mean
            sums = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
            counts = (counts > 0).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):  # a resample without items: NaN
            stats.append(sums[picks].sum(axis=1) / counts[picks].sum(axis=1))
    mean = np.nanmean(np.vstack(stats), axis=0)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.nanpercentile(mean, [tail, 100 - tail])
    return score, [_pct(low), _pct(high)]


def average(aggregation: Aggregation, per_span: Mapping[str, Sequence[float]]) -> float | None:
    return (micro_average if aggregation == "micro" else macro_average)(per_span)


def mean_of_averages(parts: Sequence[tuple[Aggregation, Mapping[str, Sequence[float]]]]):
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
    import krippendorff

    result: dict[str, Any] = {"alpha": None, "reason": None, "n_items": len(items)}
    if len(judges) < 2:
        result["reason"] = "fewer than two judges"
        return result
    data = np.full((len(judges), len(items)), np.nan)
    for column, item in enumerate(items):
        for row, judge in enumerate(judges):
            label = item.votes.get(judge)
            if label is not None:
                data[row, column] = _CODES[label]
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
    per_judge: dict[str, float | None] = field(default_factory=dict)
    agreement: dict[str, Any] = field(default_factory=dict)
    per_span: dict[str, list[float]] = field(default_factory=dict, repr=False)


def score_criterion(
    items: Sequence[Item],
    judges: Sequence[str],
    *,
    aggregation: Aggregation,
    seed: int,
) -> CriterionScores:
    """The panel's score on one criterion's items, with its CI, counts, per-judge scores and
    α. Items labelled by rule count in the score, not in what measures the judges."""
    outcomes = [aggregate(item.votes) for item in items]
    scored = zip(items, outcomes, strict=True)
    per_span = _per_span((item.span_id, o.score) for item, o in scored if o.scored)
    judged = [(item, o) for item, o in zip(items, outcomes, strict=True) if not item.synthetic]
    per_judge = {
        judge: _pct(
            average(
                aggregation,
                _per_span(
                    (item.span_id, label_score(item.votes[judge]))
                    for item, _ in judged
                    if item.votes.get(judge) is not None
                ),
            )
        )
        for judge in judges
    }
    ci, stderr = bootstrap(per_span, aggregation, seed=seed)
    return CriterionScores(
        score=_pct(average(aggregation, per_span)),
        ci=ci,
        stderr=stderr,
        n_items=len(items),
        n_scored=sum(o.scored for o in outcomes),
        unanimous=sum(o.unanimous for _, o in judged),
        split=sum(o.split for _, o in judged),
        no_majority=sum(o.no_majority for _, o in judged),
        abstentions=sum(v is None for item, _ in judged for v in item.votes.values()),
        per_judge=per_judge,
        agreement=krippendorff_alpha([item for item, _ in judged], judges),
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


def _normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w$%.]+", " ", text.lower()).split()).strip(" .")


def _key(triple: Any) -> tuple[str, str, str]:
    return (_normalise(triple.subject), triple.relation.lower(), _normalise(triple.object))


def reference_overlap(records: Sequence[Any]) -> dict[str, float | None]:
    """Precision and recall (×100, micro over spans) of normalised (subject, relation, object)
    against the reference triples; None where there is nothing to divide by."""
    predicted = matched = reference = 0
    for record in records:
        mine = {_key(t) for t in record.triples}
        gold = {_key(t) for t in record.reference}
        predicted, reference = predicted + len(mine), reference + len(gold)
        matched += len(mine & gold)
    return {
        "reference_precision": _pct(matched / predicted) if predicted else None,
        "reference_recall": _pct(matched / reference) if reference else None,
    }


def extraction_metrics(records: Sequence[Any]) -> dict[str, Any]:
    """Metrics of the extracted triples themselves (records with `triples`, `reference`,
    `rule_checks` and `failed`)."""
    rules = summarize_rule_checks([check for r in records for check in r.rule_checks])
    n = len(records)
    return {
        "n_spans": n,
        "n_triples": sum(len(r.triples) for r in records),
        "triples_per_span": round(sum(len(r.triples) for r in records) / n, 4) if n else None,
        "check_rules": _pct(rules.all_rules),
        "check_rules_detail": {
            key: _pct(value) for key, value in rules.as_dict().items() if key != "n_triples"
        },
        **reference_overlap(records),
        "failed_extractions": sum(r.failed for r in records),
    }
