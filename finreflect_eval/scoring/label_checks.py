"""Whether people's labels belong to a run: each of its task, of a span it has (its id and line),
made on that span's very text (sha256), of a triple the span has, on a criterion the task
judges; and each label that claims the random audit is an item the audit drew (scoring draws it
again from `audit_sample` and `audit_seed`: a label cannot make itself part of the sample that
corrects the scores). `score` stops at the first problem; the leaderboard lists them all."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.protocol.criteria import CRITERION_NAMES, EXTRACTION_METRICS
from finreflect_eval.records import HumanLabel, Manifest
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable
from finreflect_eval.stats import audit, uncertainty

SPAN = -1  # a span's item (comprehensiveness), where a triple's index would be
VotesOf = Callable[[str], "VoteTable | None"]
"""A panel's vote table of the task, by the panel's name (None: not at hand)."""


def no_votes(panel: str) -> None:
    return None


def votes_of(panel: str, table: VoteTable) -> VotesOf:
    """One panel's vote table, by its name (the only one at hand)."""
    return lambda name: table if name == panel else None


def design_of(label: HumanLabel) -> tuple[int | None, int | None, str, str | None]:
    """What drew an audit label: its size and seed, how it chose (`uniform`, `confidence`) and
    on which panel's votes (a confidence-driven draw only)."""
    return (label.audit_sample, label.audit_seed, label.audit_select, label.audit_panel)


def audit_weights(facts: SpanFacts, table: VoteTable) -> tuple[np.ndarray, np.ndarray]:
    """A confidence-driven draw's weights (`audit.confidence_weights`) of the task's triples
    (flattened in span order) and of its spans: from the share of the panel's valid votes that
    go against their majority, a triple taking its most disputed criterion; an item with fewer
    than two valid votes counts as split half and half."""
    dissent = np.where(table.column("synthetic"), 0.0, audit.dissent(table.codes()))
    counts = facts.table.column("triples").combine_chunks().value_lengths().to_numpy()
    doc_ids, voted = facts.column("doc_id"), table.column("doc_id")
    rows = np.minimum(np.searchsorted(doc_ids, voted), max(len(doc_ids) - 1, 0))
    is_span = table.criteria() == CRITERION_NAMES.index("comprehensiveness")
    index = table.column("index")
    fits = np.zeros(len(voted), dtype=bool)
    if len(doc_ids):
        fits = (doc_ids[rows] == voted) & (is_span | (index < counts[rows]))
    if not fits.all():
        at = int(np.flatnonzero(~fits)[0])
        raise FinReflectError(
            f"a vote (span line {int(voted[at])}, item {int(index[at])}) of the panel the "
            "confidence-driven audit was drawn on has no such span or triple in the samples"
        )
    triples, spans = np.zeros(int(counts.sum())), np.zeros(len(counts))
    starts = np.cumsum(counts) - counts
    flat = starts[rows[~is_span]] + index[~is_span]
    np.maximum.at(triples, flat, dissent[~is_span])
    np.maximum.at(spans, rows[is_span], dissent[is_span])
    return audit.confidence_weights(triples), audit.confidence_weights(spans)


def judged(manifest: Manifest, task: str) -> list[str]:
    """The criteria the task's judges are asked (its metric_list, less the triples' own)."""
    return [
        m.metric for m in manifest.tasks[task].metric_list if m.metric not in EXTRACTION_METRICS
    ]


def audit_drawn(
    manifest: Manifest,
    task: str,
    facts: SpanFacts,
    design: tuple[int | None, int | None, str, str | None],
    votes: VotesOf = no_votes,
) -> tuple[set[tuple[int, int]], tuple[int, int], dict[tuple[int, int], float]]:
    """The items `review export --audit-sample sample --seed seed [--select confidence]` drew
    from the task (`design`: `design_of`), as (span row, triple index or `SPAN`), how many
    triples and spans that is, and each item's probability of being drawn."""
    sample, seed, select, panel = design
    if sample is None or seed is None:
        raise FinReflectError(f"human labels of {task}: an audit label without its sample and seed")
    _, filings = uncertainty.units_of(facts.python_values("filing"))
    counts = facts.table.column("triples").combine_chunks().value_lengths().to_numpy()
    with_spans = "comprehensiveness" in judged(manifest, task)
    weights = None
    if select == "confidence":
        table = votes(panel) if panel else None
        if table is None:
            raise FinReflectError(
                f"human labels of {task}: a confidence-driven audit drawn on panel {panel}'s "
                f"votes; score with that panel (--judges {panel}) to check and use it"
            )
        weights = audit_weights(facts, table)
    rows, indices, spans = audit.audit_items(filings, counts, sample, seed, with_spans, weights)
    drawn = set(zip(rows.tolist(), indices.tolist(), strict=True))
    drawn |= {(row, SPAN) for row in spans.tolist()}
    probability = _inclusion(counts, sample, weights, with_spans)
    return drawn, (len(rows), len(spans)), probability


def _inclusion(
    counts: np.ndarray,
    sample: int,
    weights: tuple[np.ndarray, np.ndarray] | None,
    with_spans: bool,
) -> dict[tuple[int, int], float]:
    """Each item's probability of entering the audit, (span row, triple index or `SPAN`)."""
    total = int(counts.sum())
    triple_weights, span_weights = weights or (np.ones(total), np.ones(len(counts)))
    triples = audit.inclusion(triple_weights, min(sample, total))
    spans_drawn = audit.span_share(total, len(counts), sample) if with_spans else 0
    spans = audit.inclusion(span_weights, spans_drawn) if spans_drawn else np.zeros(len(counts))
    rows = np.repeat(np.arange(len(counts)), counts)
    index = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    probability = dict(
        zip(zip(rows.tolist(), index.tolist(), strict=True), triples.tolist(), strict=True)
    )
    probability |= {(row, SPAN): float(p) for row, p in enumerate(spans.tolist())}
    return probability


def label_problems(
    manifest: Manifest,
    task: str,
    facts: SpanFacts,
    labels: Sequence[HumanLabel],
    votes: VotesOf = no_votes,
) -> list[str]:
    """Each label's problem (see the module's docstring), a line each naming the label
    (`votes`: the panels' vote tables a confidence-driven audit was drawn on)."""
    row_of = {span_id: row for row, span_id in enumerate(facts.python_values("span_id"))}
    doc_ids, texts = facts.column("doc_id"), facts.table.column("text")
    counts = facts.table.column("triples").combine_chunks().value_lengths().to_numpy()
    criteria = judged(manifest, task)
    designs = {design_of(label) for label in labels if label.sample == "audit"}
    problems = []
    if len(designs) > 1:
        problems.append(
            f"human labels of {task}: audits of {len(designs)} draws (audit_sample, audit_seed, "
            f"select, panel: {', '.join(map(str, sorted(designs, key=str)))}); one audit per "
            "task: export once, label it"
        )
    drawn: set[tuple[int, int]] = set()
    if designs:
        try:
            drawn = audit_drawn(manifest, task, facts, next(iter(designs)), votes)[0]
        except FinReflectError as error:
            return [*problems, str(error)]
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
                        f"audit_seed {label.audit_seed}, {label.audit_select}) did not draw it"
                    )
        if problem:
            problems.append(f"{where}: {problem}")
    return problems


def audit_design(
    manifest: Manifest,
    task: str,
    facts: SpanFacts,
    labels: Sequence[HumanLabel],
    votes: VotesOf = no_votes,
) -> tuple[tuple[int, int], dict[tuple[int, int], float]] | None:
    """Triples and spans the task's audit drew, and each item's probability of being drawn
    (None without one audit's labels)."""
    designs = {design_of(label) for label in labels if label.sample == "audit"}
    if len(designs) != 1:
        return None
    _, sizes, probability = audit_drawn(manifest, task, facts, designs.pop(), votes)
    return sizes, probability
