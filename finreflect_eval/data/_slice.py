"""Choosing a split's spans: the official slice (a deterministic, stratified selection), and a
user's choice of sections (`--sections`) or spans (lm-eval's `--samples`).

Spans are grouped by company and 10-K section; in each group the `per_stratum` spans whose ids
hash lowest (sha256 of `salt:span_id`) are kept, in dataset order. The hash depends only on the
span id, so the same data (the same revision) gives the same slice on any machine, and a span's
selection does not depend on which other spans exist in other strata.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from finreflect_eval._util.errors import FinReflectError
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


def section_slug(section: str) -> str:
    """`Item 1A` → `item1a`; the text before the first Item → `front`."""
    slug = "".join(ch for ch in section.lower() if ch.isalnum())
    return slug if slug.startswith("item") else "front"


def select_sections(spans: Sequence[Span], sections: Sequence[str], *, where: str) -> list[Span]:
    """The spans of these sections (`item1`, `item7`, `front`: `section_slug`'s names, any
    case), in dataset order; a name that matches no span is an error listing the ones there."""
    present = {section_slug(span.section) for span in spans}
    wanted = set()
    for name in sections:
        slug = "".join(ch for ch in name.lower() if ch.isalnum())
        if slug != "front" and not slug.startswith("item"):  # `7` or `mda` would read as front
            raise FinReflectError(
                f"{where}: --sections takes 10-K items (item1, item7, ...) or front, not "
                f"{name!r}; its sections: {', '.join(sorted(present))}"
            )
        wanted.add(slug)
    unknown = sorted(wanted - present)
    if unknown:
        raise FinReflectError(
            f"{where}: no span of section '{unknown[0]}' (--sections); its sections: "
            f"{', '.join(sorted(present))}"
        )
    return [span for span in spans if section_slug(span.section) in wanted]


def select_samples(spans: Sequence[Span], chosen: Sequence[int | str], *, where: str) -> list[Span]:
    """lm-eval's `--samples` for one task: spans by index in the task's span list (after its
    slice and `--sections`) or by span id, in dataset order; an unknown one, or one given
    twice, is an error naming it."""
    if not chosen:
        raise FinReflectError(f"{where}: --samples gives it no span (leave the task out)")
    ids = [span.span_id for span in spans]
    position = {span_id: index for index, span_id in enumerate(ids)}
    picked: set[int] = set()
    for item in chosen:
        index = item if isinstance(item, int) else position.get(item)
        if index is None or not 0 <= index < len(ids):
            what = "span" if isinstance(item, str) else "index"
            raise FinReflectError(
                f"{where}: --samples names {what} {item!r}, which is not one of its "
                f"{len(ids)} spans"
            )
        if index in picked:
            raise FinReflectError(f"{where}: --samples names span {ids[index]} twice")
        picked.add(index)
    return [span for index, span in enumerate(spans) if index in picked]
