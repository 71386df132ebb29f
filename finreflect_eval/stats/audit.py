"""The random audit: items drawn for people to label so that their labels may correct the
panel's scores (`human.ppi_mean`). Only a sample every item had the same chance to enter
supports that correction; the review queue (what the judges split on) does not.

The draw is systematic over the items ordered by filing, each filing's items shuffled: every
item enters with probability exactly `size / N`, and every filing gets its share of the sample
(its count, rounded up or down): stratified by filing, without rounding away anyone's chance.
"""

from __future__ import annotations

import numpy as np


def draw(filings: np.ndarray, size: int, seed: int) -> np.ndarray:
    """The positions (sorted) of `size` items drawn from items whose filings are `filings`
    (one integer per item), each with the same chance; all of them when `size` ≥ their number."""
    total = len(filings)
    if size >= total:
        return np.arange(total)
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(total), filings))  # by filing, shuffled within each
    step = total / size
    picks = np.floor(rng.uniform(0, step) + step * np.arange(size)).astype(np.int64)
    return np.sort(order[picks])


def span_share(triples: int, spans: int, size: int) -> int:
    """How many spans the audit draws beside `size` triples: the same share of the spans as of
    the triples (at least one); `size` spans where the task has no triple."""
    if not spans or not size:
        return 0
    if not triples:
        return min(spans, size)
    return max(1, min(spans, round(size * spans / triples)))


def audit_items(
    span_filings: np.ndarray, triple_counts: np.ndarray, size: int, seed: int, with_spans: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The audit of one task (`review export --audit-sample size --seed seed`): `size` of its
    triples and (`with_spans`: where comprehensiveness is judged) the same share of its spans,
    as (the drawn triples' span rows, their indices in the span, the drawn spans' rows);
    `span_filings`: each span's filing as an index, `triple_counts`: each span's triples. The
    same arguments give the same items anywhere (scoring checks a label's claim to be drawn)."""
    span_rows = np.repeat(np.arange(len(triple_counts)), triple_counts)
    starts = np.repeat(np.cumsum(triple_counts) - triple_counts, triple_counts)
    picked = draw(span_filings[span_rows], size, seed)
    spans = span_share(len(span_rows), len(triple_counts), size) if with_spans else 0
    drawn_spans = draw(span_filings, spans, seed + 1)
    return span_rows[picked], (np.arange(len(span_rows)) - starts)[picked], drawn_spans
