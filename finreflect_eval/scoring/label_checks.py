"""Whether people's labels belong to a run: each of its task, of a span it has (its id and line),
made on that span's very text (sha256), of a triple the span has, on a criterion the task
judges; and each label that claims the random audit is an item the audit drew (scoring draws it
again from `audit_sample` and `audit_seed`: a label cannot make itself part of the sample that
corrects the scores). `score` stops at the first problem; the leaderboard lists them all."""

from __future__ import annotations

from collections.abc import Sequence

from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.protocol.criteria import EXTRACTION_METRICS
from finreflect_eval.records import HumanLabel, Manifest
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.stats import audit, uncertainty

SPAN = -1  # a span's item (comprehensiveness), where a triple's index would be


def judged(manifest: Manifest, task: str) -> list[str]:
    """The criteria the task's judges are asked (its metric_list, less the triples' own)."""
    return [
        m.metric for m in manifest.tasks[task].metric_list if m.metric not in EXTRACTION_METRICS
    ]


def audit_drawn(
    manifest: Manifest, task: str, facts: SpanFacts, sample: int, seed: int
) -> tuple[set[tuple[int, int]], tuple[int, int]]:
    """The items `review export --audit-sample sample --seed seed` drew from the task, as (span
    row, triple index or `SPAN`), and how many triples and spans that is."""
    _, filings = uncertainty.units_of(facts.python_values("filing"))
    counts = facts.table.column("triples").combine_chunks().value_lengths().to_numpy()
    with_spans = "comprehensiveness" in judged(manifest, task)
    rows, indices, spans = audit.audit_items(filings, counts, sample, seed, with_spans)
    drawn = set(zip(rows.tolist(), indices.tolist(), strict=True))
    drawn |= {(row, SPAN) for row in spans.tolist()}
    return drawn, (len(rows), len(spans))


def label_problems(
    manifest: Manifest, task: str, facts: SpanFacts, labels: Sequence[HumanLabel]
) -> list[str]:
    """Each label's problem (see the module's docstring), a line each naming the label."""
    row_of = {span_id: row for row, span_id in enumerate(facts.python_values("span_id"))}
    doc_ids, texts = facts.column("doc_id"), facts.table.column("text")
    counts = facts.table.column("triples").combine_chunks().value_lengths().to_numpy()
    criteria, designs = (
        judged(manifest, task),
        {(label.audit_sample, label.audit_seed) for label in labels if label.sample == "audit"},
    )
    problems = []
    if len(designs) > 1:
        problems.append(
            f"human labels of {task}: audits of {len(designs)} draws (audit_sample, audit_seed: "
            f"{', '.join(map(str, sorted(designs)))}); one audit per task: export once, label it"
        )
    drawn = audit_drawn(manifest, task, facts, *next(iter(designs)))[0] if designs else set()
    hashes: dict[int, str] = {}
    for label in labels:
        where = f"human label of span {label.span_id} ({task}, {label.criterion})"
        row = row_of.get(label.span_id)
        problem = None
        if label.run != manifest.run or label.task != task:
            problem = f"made for run {label.run}, task {label.task}"
        elif row is None or int(doc_ids[row]) != label.doc_id:
            problem = "the run has no such span"
        elif label.criterion not in criteria:
            problem = f"the task does not judge {label.criterion}"
        elif label.triple_index is not None and label.triple_index >= counts[row]:
            problem = f"the span has no triple {label.triple_index}"
        else:
            if row not in hashes:
                hashes[row] = text_sha256(texts[row].as_py())
            if hashes[row] != label.span_sha256:
                problem = "made on other text than the run's span (sha256)"
            elif label.sample == "audit" and len(designs) == 1:
                index = SPAN if label.triple_index is None else label.triple_index
                if (row, index) not in drawn:
                    problem = (
                        f"marked audit, but the audit (audit_sample {label.audit_sample}, "
                        f"audit_seed {label.audit_seed}) did not draw it"
                    )
        if problem:
            problems.append(f"{where}: {problem}")
    return problems


def audit_counts(
    manifest: Manifest, task: str, facts: SpanFacts, labels: Sequence[HumanLabel]
) -> tuple[int, int] | None:
    """Triples and spans the task's audit drew (None without one audit's labels)."""
    designs = {
        (label.audit_sample, label.audit_seed) for label in labels if label.sample == "audit"
    }
    if len(designs) != 1:
        return None
    return audit_drawn(manifest, task, facts, *designs.pop())[1]
