"""The human-review queue (DESIGN.md §7): every item the panel split on, could not score, or had
no majority for, with each judge's vote, written per task as JSONL and CSV.

The queue references its spans instead of repeating them: each item names its span (`span_id`,
and `doc_id`, the span's line in `samples_<task>_<run>.jsonl`), and each flagged span's text is
written once: in `review_spans_<task>_<run>_<panel>.jsonl` (`ReviewSpan`), and in the CSV on the
first row of the span's items (see `ReviewItem` for the files).

A split-heavy run at the benchmark's size queues hundreds of thousands of items, so the files are
built from the score index's Arrow columns, a chunk of items at a time, never item by item; the
bytes are those pydantic (`ReviewItem`, `ReviewSpan`) and `csv.writer` write (the tests compare).
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from finreflect_eval._util.version import __version__
from finreflect_eval.protocol.criteria import CRITERION_NAMES, TRIPLE_CRITERIA
from finreflect_eval.records import FORMAT_VERSION, Manifest, Results
from finreflect_eval.runs.store import RunStore, write_atomic
from finreflect_eval.scoring.span_facts import TRIPLE_FIELDS, SpanFacts
from finreflect_eval.scoring.votes import VoteTable
from finreflect_eval.stats import metrics

# Why an item is queued, as flag bits (an item may have several); `reason` names them in order.
REASONS = ("split", "unscored", "no majority")
# A CSV cell a spreadsheet would run as a formula starts with one of these (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CHUNK = 16_384  # items turned into text at a time (bounds the memory the text takes)
MAX_STAMP_BYTES = 1 << 16  # a stamp names three files and the judges

_TEXT = pa.large_string()  # every text column (a chunk of long span texts may pass 2 GB)
_VOTE_COLUMNS = ("code", "reasoning", "warning", "synthetic")  # a judge's, as the vote table's


@dataclass
class ReviewQueue:
    """One task's review queue, as columns."""

    task: str
    judges: list[str]
    items: pa.RecordBatch
    """One row per item, grouped by span in `doc_id` order: `span` (its row in `spans`),
    `first` (the first of its span's items), `criterion` (code: `CRITERION_NAMES`),
    `triple_index` and `triple:<field>` (null for a span's item), `label` (code, as
    `metrics.code_label`; `metrics.ABSTAINED` when unscored), `reason` (flag bits of
    `REASONS`), and per judge `code:`, `reasoning:`, `warning:`, `synthetic:<judge>`."""
    spans: pa.RecordBatch
    """One row per span with a queued item, in `doc_id` order: `span_id`, `doc_id`, `text`."""

    def __len__(self) -> int:
        return self.items.num_rows


def review_queue(
    span_facts: dict[str, SpanFacts], votes: dict[str, VoteTable]
) -> dict[str, ReviewQueue]:
    """Per task: the items the panel split on, could not score, or had no majority for, with
    each judge's vote (what it reads: see `scoring.score_tables`)."""
    queue: dict[str, ReviewQueue] = {}
    for task, facts in span_facts.items():
        table = votes[task]
        outcome = metrics.Outcomes.of(
            table.codes(), np.full(table.table.num_rows, len(table.judges))
        )
        flags = (outcome.split, ~outcome.scored, outcome.no_majority)  # as REASONS
        reason = sum(flag.astype(np.int8) << bit for bit, flag in enumerate(flags))
        flagged = np.flatnonzero(reason)
        # Each item's span (its row in `facts`, as scoring finds it); the items of a span kept
        # together (the vote table has them in order already).
        positions = np.searchsorted(facts.column("doc_id"), table.column("doc_id")[flagged])
        order = np.argsort(positions, kind="stable")
        flagged, positions = flagged[order], positions[order]
        spans, span = np.unique(positions, return_inverse=True)
        criteria = table.criteria()[flagged]
        per_triple = np.isin(criteria, [CRITERION_NAMES.index(name) for name in TRIPLE_CRITERIA])
        indices = table.column("index")[flagged]
        items = {
            "span": pa.array(span, pa.int64()),
            "first": pa.array(np.diff(span, prepend=-1) != 0),
            "criterion": pa.array(criteria, pa.int8()),
            "triple_index": pa.array(indices, pa.int32(), mask=~per_triple),
            **_triples(facts, positions, indices, per_triple),
            "label": pa.array(
                np.where(outcome.scored[flagged], outcome.label[flagged], metrics.ABSTAINED),
                pa.int8(),
            ),
            "reason": pa.array(reason[flagged], pa.int8()),
        }
        columns = [f"{key}:{judge}" for judge in table.judges for key in _VOTE_COLUMNS]
        taken = table.table.select(columns).take(flagged)
        items |= {name: taken.column(name).combine_chunks() for name in columns}
        of_spans = facts.table.select(["span_id", "doc_id", "text"]).take(spans)
        of_spans = {name: of_spans.column(name).combine_chunks() for name in of_spans.column_names}
        queue[task] = ReviewQueue(
            task, list(table.judges), pa.record_batch(items), pa.record_batch(of_spans)
        )
    return queue


def _triples(
    facts: SpanFacts, positions: np.ndarray, indices: np.ndarray, per_triple: np.ndarray
) -> dict[str, pa.Array]:
    """The `triple:<field>` columns: each per-triple item's triple, null for a span's item."""
    triples = facts.table.column("triples").combine_chunks()
    offsets = triples.offsets.to_numpy()
    rows, wanted = positions[per_triple], indices[per_triple]
    if np.any(wanted >= offsets[rows + 1] - offsets[rows]):
        facts.triples(rows, wanted)  # raises the one-line error naming the span
    at = pa.array(np.where(per_triple, offsets[positions] + indices, 0), mask=~per_triple)
    return {f"triple:{name}": triples.values.field(name).take(at) for name in TRIPLE_FIELDS}


# --- the files ---


def review_jsonl(queue: ReviewQueue) -> Iterator[bytes]:
    """`review_<task>_<run>_<panel>.jsonl`: one `ReviewItem` per line (as UTF-8, a chunk of
    lines at a time)."""
    head = f'{{"format_version":{FORMAT_VERSION},"task":{_json(queue.task)},"span_id":'
    span_ids, doc_ids = json_strings(queue.spans["span_id"]), _strings(queue.spans["doc_id"])
    for items in _chunks(queue.items):
        span = items["span"]
        parts: list[Any] = [head, span_ids.take(span), ',"doc_id":', doc_ids.take(span)]
        parts += [',"criterion":', _lookup(items["criterion"], lambda c: _json(CRITERION_NAMES[c]))]
        parts += [',"triple_index":', _fill(_strings(items["triple_index"]), "null")]
        fields = [json_strings(items[f"triple:{name}"]) for name in TRIPLE_FIELDS]
        triple = _join("[", _join(*fields, separator=","), "]")
        parts += [',"triple":', _fill(triple, "null")]
        parts += [',"label":', _lookup(items["label"], _json_label)]
        parts += [',"reason":', _lookup(items["reason"], lambda bits: _json(_reason(bits)))]
        parts.append(',"votes":{')
        for number, judge in enumerate(queue.judges):
            parts += ["," if number else "", _json(judge), ':{"verdict":']
            parts += [_lookup(items[f"code:{judge}"], _json_label), ',"reasoning":']
            parts += [json_strings(items[f"reasoning:{judge}"]), ',"warning":']
            parts += [json_strings(items[f"warning:{judge}"]), ',"synthetic":']
            parts += [_lookup(items[f"synthetic:{judge}"], lambda s: _json(bool(s))), "}"]
        parts.append("}}\n")
        yield _text(_join(*parts))


def review_spans_jsonl(queue: ReviewQueue) -> Iterator[bytes]:
    """`review_spans_<task>_<run>_<panel>.jsonl`: one `ReviewSpan` per line (each span with a
    queued item, once), as `review_jsonl`."""
    for spans in _chunks(queue.spans):
        line = _join(
            f'{{"format_version":{FORMAT_VERSION},"task":{_json(queue.task)},"span_id":',
            json_strings(spans["span_id"]),
            ',"doc_id":',
            _strings(spans["doc_id"]),
            ',"text":',
            json_strings(spans["text"]),
            "}\n",
        )
        yield _text(line)


def review_csv(queue: ReviewQueue) -> Iterator[bytes]:
    """`review_<task>_<run>_<panel>.csv`: one row per item, as `ReviewItem` (the triple's five
    strings joined by " | "; each judge's verdict, reasoning and warning in columns), the span's
    text (the last column) on the first row of its items only; every cell a spreadsheet would
    run as a formula quoted (`spreadsheet_safe`). The line ending is "\\r\\n" (csv's). As
    `review_jsonl`, the header first."""
    fields = ("verdict", "reasoning", "warning")
    columns = ["task", "span_id", "doc_id", "criterion", "triple_index", "triple", "label"]
    columns += ["reason", *(f"{judge}_{key}" for judge in queue.judges for key in fields)]
    task = _cell(queue.task)
    span_ids, texts = csv_cells(queue.spans["span_id"]), csv_cells(queue.spans["text"])
    doc_ids = _strings(queue.spans["doc_id"])
    yield _csv_line([*columns, "span_text"]).encode()
    for items in _chunks(queue.items):
        span = items["span"]
        cells: list[Any] = [task, span_ids.take(span), doc_ids.take(span)]
        cells.append(_lookup(items["criterion"], lambda c: _cell(CRITERION_NAMES[c])))
        cells.append(_fill(_strings(items["triple_index"]), ""))
        triple = _join(*(items[f"triple:{name}"] for name in TRIPLE_FIELDS), separator=" | ")
        cells.append(_fill(csv_cells(triple), ""))
        cells.append(_lookup(items["label"], lambda code: _cell(metrics.code_label(code))))
        cells.append(_lookup(items["reason"], lambda bits: _cell(_reason(bits))))
        for judge in queue.judges:
            cells.append(_lookup(items[f"code:{judge}"], lambda c: _cell(metrics.code_label(c))))
            cells.append(csv_cells(items[f"reasoning:{judge}"]))
            cells.append(csv_cells(items[f"warning:{judge}"]))
        first = pc.invert(items["first"]).to_numpy(zero_copy_only=False)
        cells.append(_fill(texts.take(pa.array(span.to_numpy(), mask=first)), ""))
        yield _text(_join(_join(*cells, separator=","), "\r\n"))


def spreadsheet_safe(value: object) -> object:
    """A CSV text cell that a spreadsheet would run as a formula, quoted (CSV injection)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


# --- columns of text ---


def json_strings(values: pa.Array) -> pa.Array:
    """Each string as JSON, as pydantic (and `json` without ASCII escapes) writes it: `"` and
    `\\` escaped, control characters as `\\n`-style or `\\u00XX` escapes (null stays null)."""
    values = values.cast(_TEXT)
    escaped = pc.replace_substring(pc.replace_substring(values, "\\", "\\\\"), '"', '\\"')
    quoted = _join('"', escaped, '"')
    control = pc.fill_null(pc.match_substring_regex(values, r"[\x00-\x1f]"), False)
    rows = np.flatnonzero(control.to_numpy(zero_copy_only=False))
    if not len(rows):
        return quoted
    encoded = pa.array([_json(value) for value in values.take(rows).to_pylist()], _TEXT)
    return pc.replace_with_mask(quoted, control, encoded)


def csv_cells(values: pa.Array) -> pa.Array:
    """Each string as `csv.writer` writes it as `spreadsheet_safe(value)` (one of several cells
    of a row): quoted, inner quotes doubled, where it holds a comma, a quote or a line break
    (null stays null)."""
    values = values.cast(_TEXT)
    first = pc.utf8_slice_codeunits(values, 0, 1)
    formula = pc.fill_null(pc.is_in(first, value_set=pa.array(FORMULA_STARTS, _TEXT)), False)
    values = pc.if_else(formula, _join("'", values), values)
    quote = pc.fill_null(pc.match_substring_regex(values, '[,"\r\n]'), False)
    return pc.if_else(quote, _join('"', pc.replace_substring(values, '"', '""'), '"'), values)


def _join(*parts: Any, separator: str = "") -> pa.Array:
    """The parts (text columns, or one text for every row) joined row by row."""
    texts = [
        pa.scalar(part, _TEXT) if isinstance(part, str) else part.cast(_TEXT) for part in parts
    ]
    return pc.binary_join_element_wise(*texts, pa.scalar(separator, _TEXT))


def _lookup(codes: pa.Array, text_of: Callable[[Any], str]) -> pa.Array:
    """Each code's text (few distinct codes: each made once)."""
    values = codes.to_numpy(zero_copy_only=False)
    present = np.unique(values)
    texts = pa.array([text_of(code) for code in present.tolist()], _TEXT)
    return texts.take(np.searchsorted(present, values))


def _strings(numbers: pa.Array) -> pa.Array:
    return numbers.cast(_TEXT)


def _fill(values: pa.Array, text: str) -> pa.Array:
    """`text` where `values` is null."""
    return pc.fill_null(values, pa.scalar(text, _TEXT))


def _text(lines: pa.Array) -> bytes:
    """A text column's rows, one after the other, as UTF-8."""
    if not len(lines):
        return b""
    _, offsets, data = lines.buffers()
    ends = np.frombuffer(offsets, np.int64)[[lines.offset, lines.offset + len(lines)]]
    return data[int(ends[0]) : int(ends[1])].to_pybytes()


def _chunks(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    for start in range(0, batch.num_rows, CHUNK):
        yield batch.slice(start, CHUNK)


def _reason(bits: int) -> str:
    return ", ".join(name for bit, name in enumerate(REASONS) if bits >> bit & 1)


def _json_label(code: int) -> str:
    return _json(metrics.code_label(code))


def _cell(value: object) -> str:
    """One cell as csv.writer writes it among others (no line ending)."""
    return _csv_line(["", spreadsheet_safe(value)])[1:-2]


def _csv_line(row: Sequence[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(row)
    return buffer.getvalue()


# As pydantic writes JSON; one encoder, not one per call (json.dumps makes one each time).
_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def update_queues(
    store: RunStore,
    manifest: Manifest,
    results: Results,
    span_facts: dict[str, SpanFacts],
    votes: dict[str, VoteTable],
) -> None:
    """Each task's review queue beside its results: `ReviewItem`s as JSONL and CSV, and their
    spans' text as `ReviewSpan`s; built and written unless this package's version wrote them
    here, from these samples and judges, and they have not changed since (`_stamp_of`):
    scoring a run again leaves them alone."""
    panel = results.judges.panel
    for task in span_facts:
        files = {
            store.review_path(results.run, task, panel, ".jsonl"): review_jsonl,
            store.review_spans_path(results.run, task, panel): review_spans_jsonl,
            store.review_path(results.run, task, panel, ".csv"): review_csv,
        }
        stamp = store.queue_stamp(manifest, task, panel)
        judges = list(votes[task].judges)
        written = _stamp_of(files, judges)
        if written is not None and written == _read_stamp(stamp):
            continue
        queue = review_queue({task: span_facts[task]}, {task: votes[task]})[task]
        for path, lines in files.items():
            write_atomic(path, lines(queue))
        stamp.parent.mkdir(exist_ok=True)
        write_atomic(stamp, json.dumps(_stamp_of(files, judges)))


def _stamp_of(files: dict[Path, Any], judges: list[str]) -> dict[str, Any] | None:
    """What wrote the review files (this package's version, for these judges) and each file as
    this machine's file system holds it: size, times and inode. The change time is the one a
    copy cannot carry (`cp -a`, `tar` and `rsync` keep the modification time): a run folder
    from elsewhere, stamp and all, gets its queue written here. None while a file is missing."""
    stamp: dict[str, Any] = {"version": __version__, "judges": judges}
    for path in files:
        try:
            held = path.lstat()
        except FileNotFoundError:
            return None
        facts = (held.st_size, held.st_mtime_ns, held.st_ctime_ns, held.st_ino, held.st_dev)
        stamp[path.name] = list(facts)
    return stamp


def _read_stamp(path: Path) -> Any:
    """A stamp as written, or None: missing, or not a regular file of at most MAX_STAMP_BYTES
    holding JSON (a folder is untrusted input: a link, a pipe, a device)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                return None
            return json.loads(file.read(MAX_STAMP_BYTES + 1))
        except (OSError, ValueError, RecursionError):
            return None
