"""What scoring reads of one task's records, as columns: one row per span.

At the benchmark's size a task's records hold hundreds of thousands of triples; turning them into
objects costs seconds on every `score`. Scoring needs only a few facts per span: counts (triples,
CheckRules passes, reference overlap), failures, tokens, and, for the review queue, the span's
text and triples. They are computed once from the records when the judge stage saves the run
(the score index keeps them as an Arrow table) and read back in a moment; from records they are
computed the same way, so both give the same numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.tables import arrow_bytes, read_arrow
from finreflect_eval.graph.grounding import ground_spans
from finreflect_eval.protocol.criteria import REASONING_WORDS
from finreflect_eval.protocol.schema import CHECK_RULES, CheckRulesReport, Triple, count_rule_passes
from finreflect_eval.records import ModelCall, SampleRecord
from finreflect_eval.records.lm_eval import sample_hashes
from finreflect_eval.stats import extraction

TRIPLE_FIELDS = tuple(Triple.model_fields)
RULE_COUNTS = (*CHECK_RULES, "all_rules")
# What the model calls of a span used, summed by step (extraction) or judge and criterion.
USAGE_COUNTS = (
    "calls", "cache_hits", "cache_hit_tokens", "prompt_tokens", "cached_prompt_tokens",
    "completion_tokens", "reasoning_tokens",
)  # fmt: skip
_USAGE_FIELDS = [
    *((name, pa.int64()) for name in USAGE_COUNTS),
    ("seconds", pa.float64()),
    ("device_seconds", pa.float64()),  # null: no in-process model answered
]
_SPAN_COLUMNS = {
    "doc_id": pa.int64(),
    "span_id": pa.string(),
    "filing": pa.string(),  # ticker and fiscal year: the unit the bootstrap resamples
    "ticker": pa.string(),  # the filer, as the graph names it (`graph.normalise.filer_aliases`)
    "company": pa.string(),
    "text": pa.large_string(),
    "triples": pa.large_list(pa.struct([(name, pa.string()) for name in TRIPLE_FIELDS])),
    "rule_checks": pa.int64(),
    **{f"passed:{rule}": pa.int64() for rule in RULE_COUNTS},
    "reference_predicted": pa.int64(),
    "reference_gold": pa.int64(),
    "reference_matched": pa.int64(),
    "reference": pa.large_list(pa.struct([(name, pa.string()) for name in TRIPLE_FIELDS])),
    "grounding_checked": pa.int64(),  # triples holding a number, amount or date (`graph.grounding`)
    "grounding_grounded": pa.int64(),  # ... all of which the span's text holds
    "failed": pa.bool_(),
    "transport_failed": pa.bool_(),
    "failures": pa.list_(pa.string()),
    "extract_prompt_tokens": pa.int64(),
    "extract_completion_tokens": pa.int64(),
    "usage": pa.list_(pa.struct([("step", pa.string()), *_USAGE_FIELDS])),
    "lm_eval_hashes": pa.string(),  # what lm-eval joins of a sample to hash its task
}
_PANEL_COLUMNS = {
    "judge_calls_each": pa.int64(),  # calls each judge answered (all answer the same)
    "judge_errors": pa.int64(),
    "judge_failed": pa.list_(pa.string()),  # the judge of each failed or invalid call
    "judge_transport_failures": pa.list_(pa.string()),
    "judge_answered": pa.list_(pa.string()),  # the judge of each answered call
    "judge_reasoning_first": pa.list_(pa.string()),  # ... of each answer reasoning first
    "judge_long_reasoning": pa.list_(pa.string()),  # ... of each vote reasoning at length
    "judge_prompt_tokens": pa.int64(),
    "judge_completion_tokens": pa.int64(),
    "judge_usage": pa.list_(
        pa.struct([("judge", pa.string()), ("criterion", pa.string()), *_USAGE_FIELDS])
    ),
}


def filing_of(record: SampleRecord) -> str:
    """The span's filing, `<ticker>_<fiscal year>` (its ticker alone where its row has no
    year: a record written before rows were kept)."""
    year = record.doc.get("fiscal_year")
    return record.ticker if year is None else f"{record.ticker}_{year}"


def _reasoning_first(answer: str | None) -> bool:
    """Whether a judge's answer, as written, puts any reasoning before its verdict: each part of
    the text before a `"reasoning"` key must hold the `"verdict"` key of its own object. (A
    key inside a string is escaped, `\\"verdict\\"`, so it is never taken for one.)"""
    if not answer:
        return False
    before = answer.split('"reasoning"')[:-1]
    return not all('"verdict"' in part for part in before)


def _long_reasoning(record: SampleRecord, panel: str) -> list[str]:
    """The judge of each of the panel's votes on the span whose reasoning, decoded, has more
    words than the protocol's `REASONING_WORDS` (split on whitespace); counted once here, when
    the judge stage saves the run, so that `score` reads the count."""
    return [
        judge
        for by_judge in record.votes.get(panel, {}).values()
        for judge, cast in by_judge.items()
        for vote in cast
        if vote.verdict is not None
        and not vote.synthetic
        and len(vote.reasoning) > 2 * REASONING_WORDS  # (shorter cannot hold more words)
        and len(vote.reasoning.split()) > REASONING_WORDS
    ]


def usage_rows(calls: Sequence[ModelCall], **key: Callable[[ModelCall], str]) -> list[dict]:
    """What `calls` used, summed per value of `key` (one row each, with the key's name): a
    call from the cache counts as a hit and nothing else; a figure one call does not know
    (None) leaves its sum unknown, but device seconds, which only in-process models have."""
    rows: dict[tuple, dict] = {}
    for call in calls:
        values = tuple(get(call) for get in key.values())
        row = rows.setdefault(values, dict(zip(key, values, strict=True)) | _no_usage())
        if call.cached:
            row["cache_hits"] += 1
            row["cache_hit_tokens"] += call.prompt_tokens + call.completion_tokens
            continue
        row["calls"] += 1
        for name in (
            "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens",
            "seconds",
        ):  # fmt: skip
            value = getattr(call, name)
            row[name] = None if value is None or row[name] is None else row[name] + value
        if call.device_seconds is not None:
            row["device_seconds"] = (row["device_seconds"] or 0.0) + call.device_seconds
    return list(rows.values())


def _no_usage() -> dict:
    return dict.fromkeys(USAGE_COUNTS, 0) | {"seconds": 0.0, "device_seconds": None}


def _columns(panels: Sequence[str]) -> dict[str, pa.DataType]:
    """The table's columns: the spans', then each panel's judge calls' as `<fact>:<panel>`."""
    by_panel = {f"{n}:{p}": kind for p in panels for n, kind in _PANEL_COLUMNS.items()}
    return _SPAN_COLUMNS | by_panel


@dataclass
class SpanFacts:
    """The spans of one task in `doc_id` order (see the module's docstring); the judge calls'
    facts per panel, in columns named `<fact>:<panel>`."""

    table: pa.Table

    @classmethod
    def from_records(cls, records: Sequence[SampleRecord], panels: Sequence[str]) -> SpanFacts:
        rows = sorted(records, key=lambda r: r.doc_id)
        grounded = ground_spans(
            [(r.text, [(t.subject, t.object) for t in r.triples]) for r in rows]
        )
        types = _columns(panels)
        columns: dict[str, list] = {name: [] for name in types}
        for record, checks in zip(rows, grounded, strict=True):
            mine = {extraction.triple_key(t) for t in record.triples}
            gold = {extraction.triple_key(t) for t in record.reference}
            passed = count_rule_passes(record.rule_checks)
            facts = {
                "doc_id": record.doc_id,
                "span_id": record.span_id,
                "filing": filing_of(record),
                "ticker": record.ticker,
                "company": record.doc.get("company"),
                "text": record.text,
                "triples": [t.model_dump() for t in record.triples],
                "rule_checks": len(record.rule_checks),
                **{f"passed:{rule}": count for rule, count in passed.items()},
                "reference_predicted": len(mine),
                "reference_gold": len(gold),
                "reference_matched": len(mine & gold),
                "reference": [t.model_dump() for t in record.reference],
                "grounding_checked": sum(check is not None for check in checks),
                "grounding_grounded": sum(check is True for check in checks),
                "failed": record.failed,
                "transport_failed": any(step.transport_failed for step in record.steps),
                "failures": record.failures,
                "extract_prompt_tokens": sum(step.prompt_tokens for step in record.steps),
                "extract_completion_tokens": sum(step.completion_tokens for step in record.steps),
                "usage": usage_rows(record.steps, step=lambda call: call.step),
                "lm_eval_hashes": sample_hashes(record),
            }
            for panel in panels:
                calls = record.judge_calls.get(panel, [])
                facts |= {
                    f"judge_calls_each:{panel}": max(
                        Counter(c.model for c in calls).values(), default=0
                    ),
                    f"judge_errors:{panel}": sum(call.error is not None for call in calls),
                    f"judge_failed:{panel}": [c.model for c in calls if c.error is not None],
                    f"judge_transport_failures:{panel}": [
                        f"judge {c.model} {c.step}: {c.error}" for c in calls if c.transport_failed
                    ],
                    f"judge_answered:{panel}": [c.model for c in calls if c.text is not None],
                    f"judge_reasoning_first:{panel}": [
                        c.model for c in calls if _reasoning_first(c.text)
                    ],
                    f"judge_long_reasoning:{panel}": _long_reasoning(record, panel),
                    f"judge_prompt_tokens:{panel}": sum(call.prompt_tokens for call in calls),
                    f"judge_completion_tokens:{panel}": sum(
                        call.completion_tokens for call in calls
                    ),
                    f"judge_usage:{panel}": usage_rows(
                        calls,
                        judge=lambda call: call.model or "",
                        criterion=lambda call: call.step.removeprefix("judge:"),
                    ),
                }
            for name, value in facts.items():
                columns[name].append(value)
        arrays = {name: pa.array(values, types[name]) for name, values in columns.items()}
        return cls(pa.table(arrays))

    @classmethod
    def read(cls, path: Path, panels: Sequence[str]) -> SpanFacts:
        """The table of a file with the facts of (at least) `panels`."""
        return cls(
            read_arrow(path, "span table", list(_columns(panels)), f"panels {', '.join(panels)}")
        )

    def to_bytes(self) -> bytes:
        return arrow_bytes(self.table)

    def __len__(self) -> int:
        return self.table.num_rows

    def column(self, name: str) -> np.ndarray:
        return self.table.column(name).to_numpy()

    def python_values(self, name: str) -> list:
        return self.table.column(name).to_pylist()

    def total(self, name: str) -> int:
        return int(self.column(name).sum())

    def extraction_metrics(self) -> dict[str, Any]:
        """The task's `extraction.extraction_metrics`."""
        rules = CheckRulesReport.of_counts(
            self.total("rule_checks"), {rule: self.total(f"passed:{rule}") for rule in RULE_COUNTS}
        )
        overlap = tuple(self.total(f"reference_{n}") for n in ("predicted", "gold", "matched"))
        n_triples = int(pc.sum(pc.list_value_length(self.table.column("triples"))).as_py() or 0)
        return extraction.extraction_metrics(
            len(self), n_triples, rules, overlap, failed=self.total("failed")
        )

    def triples(self, rows: np.ndarray, indices: np.ndarray) -> list[list[str]]:
        """The triple at `indices[i]` of the span at `rows[i]`, as its five strings; a vote on
        a triple its span does not have (edited samples) is a one-line error."""
        triples = self.table.column("triples").combine_chunks()
        offsets = triples.offsets.to_numpy()
        beyond = np.flatnonzero(indices >= offsets[rows + 1] - offsets[rows])
        if len(beyond):
            row, index = rows[beyond[0]], indices[beyond[0]]
            span_id, n_triples = self.python_values("span_id")[row], offsets[row + 1] - offsets[row]
            raise FinReflectError(
                f"span {span_id}: a vote on triple {index}, but the span has {n_triples} triples "
                "(were the samples edited?)"
            )
        flat = triples.flatten().take(pa.array(offsets[rows] + indices))
        fields = [flat.field(name).to_pylist() for name in TRIPLE_FIELDS]
        return [list(values) for values in zip(*fields, strict=True)]
