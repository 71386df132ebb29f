"""Adapter for multi-hop QA rows in the layout of FinReflectKG-MultiHop's generation outputs: a
question, its gold answer and its KG path, each hop with the 10-K chunk it was read from
(`hops[]`: source_file, page_id, chunk_id, chunk_text, head, relationship, tail). The chunks
become the spans to extract from (one span per distinct chunk, with optional `distractors` of
the same filings), the hops their reference triples, and the rows `Question`s."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.chunking import token_counter
from finreflect_eval.data._evalbench import _span, _span_ids, infer_sections
from finreflect_eval.data._records import Benchmark, ReferenceTriple, Span
from finreflect_eval.graph.normalise import entity_key
from finreflect_eval.records.downstream import GoldHop, Question

ANNOTATOR = "FinReflectKG-MultiHop"
_HOP_FIELDS = ("source_file", "page_id", "chunk_id", "chunk_text", "head", "relationship", "tail")
_FILE_YEAR = re.compile(r"^([A-Za-z.]+)_10k_(\d{4})", re.IGNORECASE)


def is_multihop(columns: Iterable[str]) -> bool:
    return {"question", "answer", "hops"} <= set(columns)


def multihop_to_benchmark(
    rows: Iterable[Mapping[str, Any]], *, dataset: str, split: str, revision: str | None = None
) -> Benchmark:
    """The spans (each row's hop chunks and distractors, each chunk once, in the order first
    met), reference triples (the hops) and questions."""
    chunks: dict[tuple[str, ...], dict[str, Any]] = {}
    raw: list[tuple[int, Mapping[str, Any], list[tuple[str, ...]]]] = []
    for index, row in enumerate(rows):
        where = f"{dataset} row {index}"
        for column in ("question", "answer"):
            if not str(row.get(column) or "").strip():
                raise FinReflectError(f"{where}: missing required field '{column}'")
        hops = row.get("hops")
        if not isinstance(hops, list) or not hops:
            raise FinReflectError(f"{where}: field 'hops' is not a list of hops")
        keys = [_chunk_key(hop, f"{where} hops[{n}]", chunks) for n, hop in enumerate(hops)]
        for n, extra in enumerate(row.get("distractors") or []):
            _chunk_key(extra, f"{where} distractors[{n}]", chunks)
        raw.append((index, row, keys))

    count_tokens = token_counter()
    span_ids = dict(zip(chunks, _span_ids(chunks), strict=True))
    spans = [
        _span(span_ids[key], key[0], int(key[1]), chunk, count_tokens)
        for key, chunk in chunks.items()
    ]
    questions: list[Question] = []
    seen: set[str] = set()
    for index, row, keys in raw:
        question = _question(index, row, keys, span_ids, dataset)
        if question.question_id in seen:
            continue  # the same question twice (two files of the same pool)
        seen.add(question.question_id)
        questions.append(question)
    triples = [
        ReferenceTriple(
            span_id=hop.span_id,
            triple_id=f"{question.question_id}_{n}",
            subject=hop.head,
            subject_type=hop.head_type,
            relation=hop.relation,
            object=hop.tail,
            object_type=hop.tail_type,
            source=ANNOTATOR,
        )
        for question in questions
        for n, hop in enumerate(question.hops)
    ]
    return Benchmark(
        dataset=dataset,
        split=split,
        spans=infer_sections(spans),
        reference_triples=triples,
        revision=revision,
        questions=questions,
    )


def questions_within(questions: list[Question], spans: Iterable[Span]) -> list[Question]:
    """The questions every hop chunk of which is among `spans` (a run limited to some spans
    asks only those)."""
    have = {span.span_id for span in spans}
    return [q for q in questions if all(hop.span_id in have for hop in q.hops)]


def _chunk_key(hop: Any, where: str, chunks: dict[tuple[str, ...], dict[str, Any]]) -> tuple:
    if not isinstance(hop, Mapping):
        raise FinReflectError(f"{where}: not an object")
    needed = ("source_file", "page_id", "chunk_id", "chunk_text")
    for field in needed:
        if not str(hop.get(field) or "").strip():
            raise FinReflectError(f"{where}: missing required field '{field}'")
    ticker, year = _filer(hop, where)
    key = (ticker, str(year), *(str(hop[f]) for f in ("source_file", "page_id", "chunk_id")))
    known = chunks.setdefault(key, dict(hop))
    if known["chunk_text"] != hop["chunk_text"]:
        raise FinReflectError(f"{where}: field 'chunk_text' differs from the same chunk's before")
    return key


def _filer(hop: Mapping[str, Any], where: str) -> tuple[str, int]:
    """The hop's ticker and year: its own fields, else read from `source_file`
    (`AMT_10k_2024.pdf`)."""
    found = _FILE_YEAR.match(str(hop.get("source_file", "")))
    ticker = str(hop.get("ticker") or (found.group(1) if found else "")).strip().upper()
    year = hop.get("year") or (found.group(2) if found else None)
    try:
        year = int(year)
    except (TypeError, ValueError):
        year = None
    if not ticker or year is None:
        raise FinReflectError(
            f"{where}: no ticker and year (fields, or a source_file TICKER_10k_YEAR)"
        )
    return ticker, year


def _question(
    index: int,
    row: Mapping[str, Any],
    keys: list[tuple[str, ...]],
    span_ids: Mapping[tuple[str, ...], str],
    dataset: str,
) -> Question:
    where = f"{dataset} row {index}"
    hops = []
    for n, (hop, key) in enumerate(zip(row["hops"], keys, strict=True)):
        missing = [f for f in _HOP_FIELDS if not str(hop.get(f) or "").strip()]
        if missing:
            raise FinReflectError(f"{where} hops[{n}]: missing required field '{missing[0]}'")
        hops.append(
            GoldHop(
                span_id=span_ids[key],
                filing=f"{key[0]}_{key[1]}",
                ticker=key[0],
                head=str(hop["head"]),
                head_type=str(hop.get("head_type") or ""),
                relation=str(hop["relationship"]),
                tail=str(hop["tail"]),
                tail_type=str(hop.get("tail_type") or ""),
            )
        )
    entities = row.get("entities") or {}
    start = str(entities.get("start") or hops[0].head)
    end = str(entities.get("end") or hops[-1].head)
    if entity_key(start) == entity_key(end):
        # A company against itself (another year, another page): the entity the hops meet at.
        end = str(entities.get("intermediate") or entities.get("node_2") or hops[0].tail)
    origin = dict(row.get("origin") or {})
    text = str(row["question"]).strip()
    return Question(
        question_id=f"mh_{text_sha256(text)[:12]}",
        question=text,
        answer=str(row["answer"]).strip(),
        kind=_kind(row, origin),
        start=start,
        end=end,
        hops=hops,
        origin=origin,
    )


def _kind(row: Mapping[str, Any], origin: Mapping[str, Any]) -> str:
    """`kind` (or `mode`/`qa_type`) as the row gives it; else from the generation output's
    folder (`outputs/quantitative/...`); else qualitative (scored by the judges)."""
    for field in ("kind", "mode", "qa_type", "question_type"):
        value = str(row.get(field) or "").strip().lower()
        if value in ("quantitative", "qualitative"):
            return value
    return "quantitative" if "/quantitative/" in f"/{origin.get('path', '')}" else "qualitative"
