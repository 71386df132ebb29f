"""A split's official slice: a deterministic, stratified selection of its spans.

Spans are grouped by company and 10-K section; in each group the `per_stratum` spans whose ids
hash lowest (sha256 of `salt:span_id`) are kept, in dataset order. The hash depends only on the
span id, so the same data (the same revision) gives the same slice on any machine, and a span's
selection does not depend on which other spans exist in other strata.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from finreflect_eval.data._records import Span
from finreflect_eval.records import SliceSpec


def stratum(span: Span) -> tuple[str, str]:
    return (span.ticker, span.section)


def select_slice(spans: Sequence[Span], spec: SliceSpec) -> list[Span]:
    """The slice's spans, in the order of `spans`."""
    groups: dict[tuple[str, str], list[Span]] = {}
    for span in spans:
        groups.setdefault(stratum(span), []).append(span)
    kept: set[str] = set()
    for members in groups.values():
        ranked = sorted(members, key=lambda span: _rank(spec.salt, span.span_id))
        kept.update(span.span_id for span in ranked[: spec.per_stratum])
    return [span for span in spans if span.span_id in kept]


def _rank(salt: str, span_id: str) -> str:
    return hashlib.sha256(f"{salt}:{span_id}".encode()).hexdigest()


def span_list(span_ids: list[str]) -> dict[str, int | str]:
    """What identifies a list of spans (a task's, before sharding; a slice's): its length and a
    hash of the ids in order."""
    digest = hashlib.sha256("\n".join(span_ids).encode("utf-8")).hexdigest()
    return {"count": len(span_ids), "sha256": digest}
