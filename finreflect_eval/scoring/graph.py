"""The results' `graph` block: each task's triples as a graph (`graph.metrics`) with its overlap
with the reference triples, the grounding checks the score index counted, and what the
grounding cascade saved; and the triples with the panel's verdicts, for `graph export`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from finreflect_eval.graph.metrics import graph_metrics
from finreflect_eval.graph.normalise import RULES
from finreflect_eval.graph.table import TRIPLE_COLUMNS, TRIPLE_FIELDS
from finreflect_eval.protocol.criteria import CRITERION_NAMES, TRIPLE_CRITERIA
from finreflect_eval.protocol.schema import load_schema
from finreflect_eval.records import GraphScores, Grounding, Manifest
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable
from finreflect_eval.stats import metrics

_SPAN_LEVEL = ("span_id", "filing", "ticker", "company")
GRAPH_VERSION = 1  # of how the graph is measured: bump when a count changes, and the score
# index's graphs are measured again


def triple_table(task: str, facts: SpanFacts, column: str = "triples") -> pa.Table:
    """A task's triples (or its `reference` triples) as a `graph.table` TripleTable."""
    lists = facts.table.column(column).combine_chunks()
    spans = pc.list_parent_indices(lists)
    flat = lists.flatten()
    starts = lists.offsets.to_numpy()[:-1]
    index = np.arange(len(flat)) - starts[spans.to_numpy()] if len(flat) else np.array([], int)
    columns = {name: facts.table.column(name).combine_chunks().take(spans) for name in _SPAN_LEVEL}
    columns |= {name: flat.field(name) for name in TRIPLE_FIELDS}
    columns["task"] = pa.array(np.full(len(flat), task, dtype=object), pa.string())
    columns["triple_index"] = pa.array(index, pa.int32())
    return pa.table({name: columns[name].cast(kind) for name, kind in TRIPLE_COLUMNS.items()})


def task_graph(task: str, facts: SpanFacts) -> dict:
    """A task's graph (`graph.metrics.graph_metrics`, the bundled schema's opposite relations
    counting as contradictions), JSON-ready: what the score index keeps (`graph_block`)."""
    opposite = load_schema().opposite_relations
    reference = triple_table(task, facts, "reference")
    computed = graph_metrics(
        triple_table(task, facts), opposite, reference=reference if len(reference) else None
    )
    return computed | {
        "opposite_relations": [list(pair) for pair in opposite],
        "version": GRAPH_VERSION,
    }


def graph_block(
    manifest: Manifest,
    panel: str,
    span_facts: Mapping[str, SpanFacts],
    computed: Mapping[str, dict] | None = None,
) -> dict[str, GraphScores]:
    """Per task, its graph: `computed` (the score index's `task_graph`, made when the judge stage
    saved the run) where it was made by today's rules, else computed now; the grounding counts
    of its spans, and what the cascade saved."""
    cascade = manifest.judging[panel].cascade if panel in manifest.judging else None
    current = {
        "opposite_relations": [list(pair) for pair in load_schema().opposite_relations],
        "normalisation": list(RULES),
        "version": GRAPH_VERSION,
    }
    block = {}
    for task, facts in span_facts.items():
        graph = (computed or {}).get(task)
        if not graph or any(graph.get(key) != value for key, value in current.items()):
            graph = task_graph(task, facts)
        checked, grounded = facts.total("grounding_checked"), facts.total("grounding_grounded")
        block[task] = GraphScores(
            **{key: value for key, value in graph.items() if key != "version"},
            grounding=Grounding(checked=checked, grounded=grounded, ungrounded=checked - grounded),
            cascade=None if cascade is None else cascade.get(task),
        )
    return block


def verdict_columns(table: pa.Table, facts: SpanFacts, votes: VoteTable) -> pa.Table:
    """The TripleTable with the panel's verdict on each triple, per triple criterion judged:
    `verdict:<criterion>` ("yes", "no", or null where unscored)."""
    doc_ids = facts.column("doc_id")
    spans = pc.list_parent_indices(facts.table.column("triples").combine_chunks()).to_numpy()
    wanted = doc_ids[spans].astype(np.int64) * (1 << 20) + table.column("triple_index").to_numpy()
    for name in TRIPLE_CRITERIA:
        rows = np.flatnonzero(votes.criteria() == CRITERION_NAMES.index(name))
        if not len(rows):
            continue
        outcome = metrics.Outcomes.of(votes.codes(rows), np.full(len(rows), len(votes.judges)))
        keys = (
            votes.column("doc_id")[rows].astype(np.int64) * (1 << 20) + votes.column("index")[rows]
        )
        order = np.argsort(keys)
        place = np.minimum(np.searchsorted(keys[order], wanted), len(keys) - 1)
        found = keys[order][place] == wanted
        label = outcome.label[order][place]
        scored = found & outcome.scored[order][place]
        verdict = np.where(label == 1, "yes", "no").astype(object)
        table = table.append_column(f"verdict:{name}", pa.array(verdict, pa.string(), mask=~scored))
    return table
