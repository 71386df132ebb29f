"""The metrics a run reports, each defined once: what it measures, its labels, how its values
are averaged, and whether higher is better.

Four are judge criteria, voted on by the panel: faithfulness, precision and relevance per triple
(0 or 1), comprehensiveness per span (good / partial / poor, scored 1 / 0.5 / 0). The others are
computed from the triples themselves. A task's `metric_list` picks among them (and may change a
criterion's averaging); it also decides which criteria the judges are asked about.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Aggregation = Literal["micro", "macro"]
Label = int | str  # 0/1 for triple criteria, good/partial/poor for comprehensiveness


@dataclass(frozen=True)
class Criterion:
    """A question the judges answer about every triple (`per="triple"`) or every span."""

    name: str
    letter: str
    per: Literal["triple", "span"]
    labels: tuple[Label, ...]
    aggregation: Aggregation  # micro: mean over all items; macro: mean over spans' means
    higher_is_better: bool = True

    def score(self, label: Label) -> float:
        """The label as a number: 0/1 as is, good/partial/poor as 1/0.5/0."""
        return LEVEL_SCORES[label] if isinstance(label, str) else float(label)

    @property
    def ordered(self) -> bool:
        """More than two ordered labels: an ordinal α says more than the nominal one."""
        return len(self.labels) > 2

    @property
    def conservative(self) -> Label:
        """The label taken when the panel has no majority (the lowest-scoring one)."""
        return min(self.labels, key=self.score)


REASONING_WORDS = 15
"""The longest justification the protocol asks of a judge, in words, after its verdict."""

LEVEL_SCORES = {"good": 1.0, "partial": 0.5, "poor": 0.0}
COMPREHENSIVENESS_LEVELS = ("good", "partial", "poor")


def level_shares(counts: Mapping[str, int] | None) -> dict[str, float] | None:
    """The share, in %, of the spans at each comprehensiveness level (good, partial, poor) among
    `counts` (the spans at each); None where none is counted."""
    total = sum((counts or {}).values())
    if not total:
        return None
    return {level: 100 * counts.get(level, 0) / total for level in COMPREHENSIVENESS_LEVELS}


CRITERIA: dict[str, Criterion] = {
    criterion.name: criterion
    for criterion in (
        Criterion("faithfulness", "F", "triple", (0, 1), "micro"),
        Criterion("precision", "P", "triple", (0, 1), "micro"),
        Criterion("relevance", "R", "triple", (0, 1), "micro"),
        Criterion("comprehensiveness", "C", "span", COMPREHENSIVENESS_LEVELS, "macro"),
    )
}
CRITERION_NAMES = tuple(CRITERIA)
TRIPLE_CRITERIA = tuple(name for name, c in CRITERIA.items() if c.per == "triple")
CriterionName = Literal["faithfulness", "precision", "relevance", "comprehensiveness"]


@dataclass(frozen=True)
class ExtractionMetric:
    """A metric computed from the extracted triples, without judges."""

    name: str
    description: str
    higher_is_better: bool | None  # None: neither (a count, not a quality)


EXTRACTION_METRICS: dict[str, ExtractionMetric] = {
    metric.name: metric
    for metric in (
        ExtractionMetric("check_rules", "share of triples passing all four CheckRules", True),
        ExtractionMetric("triples_per_span", "triples extracted per span", None),
        ExtractionMetric(
            "reference_precision", "share of triples matching a reference triple", True
        ),
        ExtractionMetric("reference_recall", "share of reference triples extracted", True),
    )
}
METRIC_NAMES = (*CRITERIA, *EXTRACTION_METRICS)


def higher_is_better(metric: str) -> bool | None:
    if metric in CRITERIA:
        return CRITERIA[metric].higher_is_better
    return EXTRACTION_METRICS[metric].higher_is_better
