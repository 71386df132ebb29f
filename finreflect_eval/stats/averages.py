"""Averages of judged items over spans: each span's scored items summed (`SpanScores`), the
micro average over items and the macro average over spans, the mean of several criteria's
averages (Overall), all ×100 as published (`pct`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from finreflect_eval.protocol.criteria import Aggregation


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

    def columns(self, aggregation: Aggregation) -> tuple[np.ndarray, np.ndarray]:
        """Per span, what the average sums and what it divides by: the items' scores and
        their number (micro), or the span's mean and 1 (macro)."""
        if aggregation == "micro":
            return self.sums, self.counts.astype(float)
        return self.means(), np.ones(len(self.ids))


def micro_average(per_span: SpanScores) -> float | None:
    """Mean over all items, whatever span they belong to."""
    total = per_span.counts.sum()
    return float(per_span.sums.sum() / total) if total else None


def macro_average(per_span: SpanScores) -> float | None:
    """Mean over spans of each span's mean."""
    return float(np.mean(per_span.means())) if len(per_span.ids) else None


def average(aggregation: Aggregation, per_span: SpanScores) -> float | None:
    return (micro_average if aggregation == "micro" else macro_average)(per_span)


def mean_of_averages(parts: Sequence[tuple[Aggregation, SpanScores]]) -> float | None:
    """×100: the mean of the parts' averages; None when a part has none (no scored item):
    a mean over fewer criteria than asked would pass for the whole."""
    averages = [average(a, per_span) for a, per_span in parts]
    if not averages or None in averages:
        return None
    return pct(float(np.mean(averages)))


def pct(value: float | None) -> float | None:
    """×100, rounded so that the same samples give the same numbers on any machine."""
    return None if value is None else round(float(value) * 100, 4)
