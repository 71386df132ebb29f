"""Adapter for rows in the layout of `domyn/FinReflectKG-EvalBench`: one triple per row, with its
chunk and its reference labels. Rows are grouped into spans by (ticker, year, source file, page,
chunk); optional columns (entity/target types, reasoning) are used when present."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.chunking import FRONT_MATTER, TokenCounter, token_counter
from finreflect_eval.chunking.blocks import parse_item
from finreflect_eval.data._records import (
    Benchmark,
    Judgment,
    ReferenceTriple,
    Span,
)
from finreflect_eval.protocol.criteria import TRIPLE_CRITERIA
from finreflect_eval.protocol.schema import load_schema

REQUIRED_COLUMNS = (
    "ticker",
    "year",
    "source_file",
    "page_id",
    "chunk_id",
    "triplet_id",
    "entity",
    "relationship",
    "target",
    "chunk_text",
)
ANNOTATOR = "FinReflectKG-EvalBench"
_TRUE = {"1", "1.0", "true", "yes", "y"}
_FALSE = {"0", "0.0", "false", "no", "n"}


def is_evalbench(columns: Iterable[str]) -> bool:
    return {"chunk_text", "entity", "relationship", "target", "triplet_id"} <= set(columns)


def first_chunks(rows: Iterable[Mapping[str, Any]], limit: int) -> Iterator[Mapping[str, Any]]:
    """The rows of the first `limit` chunks, reading no further: the rows of one chunk are
    assumed to be contiguous, as in the published files."""
    seen: set[tuple] = set()
    for row in rows:
        key = tuple(row.get(c) for c in ("ticker", "year", "source_file", "page_id", "chunk_id"))
        if key not in seen:
            if len(seen) == limit:
                return
            seen.add(key)
        yield row


def evalbench_to_benchmark(
    rows: Iterable[Mapping[str, Any]], *, dataset: str, split: str, revision: str | None = None
) -> Benchmark:
    """Group EvalBench rows into spans, reference triples and reference judgments."""
    schema = load_schema()
    count_tokens = token_counter()
    grouped: dict[tuple[str, ...], list[tuple[int, Mapping[str, Any]]]] = {}
    triple_rows: dict[str, int] = {}
    for index, row in enumerate(rows):
        for column in REQUIRED_COLUMNS:
            if row.get(column) is None or str(row[column]).strip() == "":
                raise FinReflectError(f"{dataset} row {index}: missing required field '{column}'")
        try:
            year = int(float(row["year"]))
        except (TypeError, ValueError):
            raise FinReflectError(f"{dataset} row {index}: field 'year' is not a year") from None
        ticker = str(row["ticker"]).strip().upper()
        key = (ticker, str(year), *(str(row[c]) for c in ("source_file", "page_id", "chunk_id")))
        grouped.setdefault(key, []).append((index, row))
        triple_id = str(row["triplet_id"])
        if triple_id in triple_rows:
            raise FinReflectError(
                f"{dataset} row {index}: field 'triplet_id': '{triple_id}' repeats row "
                f"{triple_rows[triple_id]}"
            )
        triple_rows[triple_id] = index

    spans: list[Span] = []
    triples: list[ReferenceTriple] = []
    judgments: list[Judgment] = []
    for (ticker, year, *_), span_id, members in zip(
        grouped, _span_ids(grouped), grouped.values(), strict=True
    ):
        first_index, first_row = members[0]
        span = _span(span_id, ticker, int(year), first_row, count_tokens)
        spans.append(span)
        for index, row in members:
            if row["chunk_text"] != span.text:
                raise FinReflectError(
                    f"{dataset} row {index}: field 'chunk_text' differs from row {first_index} "
                    f"of the same chunk ({span_id})"
                )
            relation = str(row["relationship"])
            triple = ReferenceTriple(
                span_id=span_id,
                triple_id=str(row["triplet_id"]),
                subject=str(row["entity"]),
                subject_type=str(row.get("entity_type") or ""),
                relation=schema.canonical_relation(relation) or relation,
                object=str(row["target"]),
                object_type=str(row.get("target_type") or ""),
                source=ANNOTATOR,
            )
            triples.append(triple)
            for criterion in TRIPLE_CRITERIA:
                label = _binary_label(row.get(f"is_{criterion}"), index, criterion, dataset)
                if label is not None:
                    judgments.append(
                        Judgment(
                            span_id=span_id,
                            triple_id=triple.triple_id,
                            criterion=criterion,
                            label=label,
                            annotator=ANNOTATOR,
                            **triple.triple.model_dump(),
                        )
                    )
    return Benchmark(
        dataset=dataset,
        split=split,
        spans=infer_sections(spans),
        reference_triples=triples,
        judgments=judgments,
        revision=revision,
    )


def infer_sections(spans: list[Span]) -> list[Span]:
    """Spans whose rows name no section get the 10-K Item they are in: in each filing, in page
    and chunk order, the last Item heading that began a chunk (before the first: "Front
    matter"). Spans with a section keep it."""
    by_filing: dict[tuple[str, int, str], list[Span]] = {}
    for span in spans:
        if not span.section:
            by_filing.setdefault((span.ticker, span.fiscal_year, span.source_file), []).append(span)
    sections: dict[str, str] = {}
    for members in by_filing.values():
        current = FRONT_MATTER
        for span in sorted(members, key=lambda s: (_number(s.page_id), s.chunk_index)):
            for line in span.text.splitlines()[:3]:
                item = parse_item(line.strip().strip("#*_ ").strip())
                if item:
                    current = item[0]
                    break
            sections[span.span_id] = current
    return [
        span.model_copy(update={"section": sections[span.span_id]}) if not span.section else span
        for span in spans
    ]


def _number(text: str) -> int:
    digits = "".join(ch for ch in text if ch.isdigit())
    return int(digits) if digits else 0


def _span_ids(keys: Iterable[tuple[str, ...]]) -> list[str]:
    """`TICKER_YEAR_PAGE_CHUNK`; two filings of one company-year may share page and chunk ids,
    so those get a short hash of their source file appended."""
    keys = list(keys)
    base = [f"{ticker}_{year}_{page}_{chunk}" for ticker, year, _, page, chunk in keys]
    shared = {span_id for span_id, n in Counter(base).items() if n > 1}
    return [
        f"{span_id}_{text_sha256(key[2])[:8]}" if span_id in shared else span_id
        for span_id, key in zip(base, keys, strict=True)
    ]


def _span(
    span_id: str, ticker: str, year: int, row: Mapping[str, Any], count_tokens: TokenCounter
) -> Span:
    chunk_id, text = str(row["chunk_id"]), str(row["chunk_text"])
    digits = "".join(ch for ch in chunk_id if ch.isdigit())
    return Span(
        span_id=span_id,
        ticker=ticker,
        company=str(row.get("company") or ticker),
        fiscal_year=year,
        source_file=str(row["source_file"]),
        section=str(row.get("section") or ""),
        page_id=str(row["page_id"]),
        chunk_index=int(digits) if digits else 0,
        text=text,
        n_tokens=count_tokens(text),
        sha256=text_sha256(text),
    )


def _binary_label(value: Any, index: int, criterion: str, dataset: str) -> str | None:
    if value is None:
        return None  # this row was not labelled on this criterion
    text = str(value).strip().lower()
    if text in _TRUE:
        return "1"
    if text in _FALSE:
        return "0"
    raise FinReflectError(f"{dataset} row {index}: field 'is_{criterion}' is not 0/1: {value!r}")
