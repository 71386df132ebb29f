"""The random audit: items drawn for people to label so that their labels may correct the
panel's scores (`human.ppi_mean`). Only a sample every item had the same chance to enter
supports that correction; the review queue (what the judges split on) does not.

The draw is systematic over the items ordered by filing, each filing's items shuffled: every
item enters with probability exactly `size / N`, and every filing gets its share of the sample
(its count, rounded up or down): stratified by filing, without rounding away anyone's chance.

A confidence-driven audit (`review export --select confidence`) draws the same way with unequal
probabilities, known exactly (`inclusion`): half the sample spread evenly, half in proportion to
how much the panel's judges disagreed on the item, so the items people and panel most likely
disagree on are labeled more often, and the estimates weigh each label by 1 / its probability
(Gligorić et al., "Can Unconfident LLM Annotations Be Used for Confident Conclusions?", NAACL
2025; Zrnic and Candès, "Active Statistical Inference", ICML 2024).
"""

from __future__ import annotations

import numpy as np

from finreflect_eval._util.errors import FinReflectError

SELECTS = ("uniform", "confidence")  # how an audit chooses its items (`review export --select`)
UNIFORM_SHARE = 0.5
"""Of a confidence-driven audit, the share spread evenly over the items: every item keeps at
least half the chance a uniform audit gives it, so the variance can grow at most twofold where
the panel's disagreement says nothing of its errors."""


def draw(
    filings: np.ndarray, size: int, seed: int, weights: np.ndarray | None = None
) -> np.ndarray:
    """The positions (sorted) of `size` items drawn from items whose filings are `filings`
    (one integer per item), each with the same chance, or with `inclusion(weights, size)`; all
    of them when `size` ≥ their number."""
    total = len(filings)
    if size <= 0:
        return np.arange(0)
    if size >= total:
        return np.arange(total)
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(total), filings))  # by filing, shuffled within each
    if weights is None:
        step = total / size
        picks = np.floor(rng.uniform(0, step) + step * np.arange(size)).astype(np.int64)
        return np.sort(order[picks])
    # Systematic with unequal probabilities: the items laid end to end, each as long as its
    # probability (they sum to `size`), and a pick every 1 from a random start.
    ends = np.cumsum(inclusion(weights, size)[order])
    picks = rng.uniform(0, 1) + np.arange(size)
    return np.sort(order[np.minimum(np.searchsorted(ends, picks, side="right"), total - 1)])


def inclusion(weights: np.ndarray, size: int) -> np.ndarray:
    """Each item's probability of entering a draw of `size` made in proportion to `weights`
    (capped at 1: an item that would take more than its share is taken for sure, and the rest
    shares what is left)."""
    weights = np.asarray(weights, dtype=float)
    if size > (weights > 0).sum():
        raise FinReflectError(f"a draw of {size} items from {(weights > 0).sum()} with a chance")
    probability = np.zeros(len(weights))
    sure = np.zeros(len(weights), dtype=bool)
    while True:
        rest = size - sure.sum()
        share = np.where(sure, 0.0, weights)
        probability = np.where(sure, 1.0, rest * share / share.sum() if share.sum() else 0.0)
        over = ~sure & (probability >= 1)
        if not over.any():
            return probability
        sure |= over


def dissent(codes: np.ndarray) -> np.ndarray:
    """Per item (a row of label codes, negative: no vote), the share of its valid votes against
    their most common label; 0.5 with fewer than two (no majority can be told)."""
    valid = (codes >= 0).sum(axis=1)
    top = np.max(
        [(codes == code).sum(axis=1) for code in range(max(int(codes.max(initial=0)) + 1, 1))],
        axis=0,
    )
    return np.where(valid >= 2, 1 - top / np.maximum(valid, 1), 0.5)


def confidence_weights(dissent: np.ndarray) -> np.ndarray:
    """An item's weight in a confidence-driven draw: `UNIFORM_SHARE` spread evenly, the rest in
    proportion to `dissent` (the share of the panel's votes against its majority); even where
    the panel never disagreed."""
    dissent = np.asarray(dissent, dtype=float)
    even = np.full(len(dissent), 1 / max(len(dissent), 1))
    if not dissent.sum():
        return even
    return UNIFORM_SHARE * even + (1 - UNIFORM_SHARE) * dissent / dissent.sum()


def span_share(triples: int, spans: int, size: int) -> int:
    """How many spans the audit draws beside `size` triples: the same share of the spans as of
    the triples (at least one); `size` spans where the task has no triple."""
    if not spans or not size:
        return 0
    if not triples:
        return min(spans, size)
    return max(1, min(spans, round(size * spans / triples)))


def audit_items(
    span_filings: np.ndarray,
    triple_counts: np.ndarray,
    size: int,
    seed: int,
    with_spans: bool,
    weights: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The audit of one task (`review export --audit-sample size --seed seed`): `size` of its
    triples and (`with_spans`: where comprehensiveness is judged) the same share of its spans,
    as (the drawn triples' span rows, their indices in the span, the drawn spans' rows);
    `span_filings`: each span's filing as an index, `triple_counts`: each span's triples. The
    same arguments give the same items anywhere (scoring checks a label's claim to be drawn).
    `weights`: the triples' and the spans' (`confidence_weights`), for a draw with unequal
    probabilities; None: uniform."""
    span_rows = np.repeat(np.arange(len(triple_counts)), triple_counts)
    starts = np.repeat(np.cumsum(triple_counts) - triple_counts, triple_counts)
    triple_weights, span_weights = weights or (None, None)
    picked = draw(span_filings[span_rows], size, seed, triple_weights)
    spans = span_share(len(span_rows), len(triple_counts), size) if with_spans else 0
    drawn_spans = draw(span_filings, spans, seed + 1, span_weights)
    return span_rows[picked], (np.arange(len(span_rows)) - starts)[picked], drawn_spans
