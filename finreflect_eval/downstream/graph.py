"""The deterministic measures of a question against a model's graph: its gold hops found in their
chunks' triples (evidence-edge recall), its start and end connected (path connectivity), and
the subgraph a QA model is shown. Entities are compared by `graph.normalise` keys, relations
case- and separator-blind; no judge, no similarity."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx
import pyarrow as pa

from finreflect_eval.chunking import TokenCounter
from finreflect_eval.graph.metrics import filing_graph
from finreflect_eval.graph.normalise import entity_key, filer_aliases
from finreflect_eval.graph.table import triple_table
from finreflect_eval.records import SampleRecord
from finreflect_eval.records.downstream import (
    ContextTriple,
    HopMatch,
    PathFound,
    Question,
    QuestionRecord,
)

_SEPARATORS = re.compile(r"[\s_-]+")
MIN_SEED_CHARS = 3  # a shorter key found in a question's words is too often a word of it
MAX_SEED_WORDS = 12  # longer than any entity CheckRules passes (5 words), with room


def relation_key(relation: str | None) -> str:
    """`Partners_With`, `partners with` and `PARTNERS-WITH` are one relation."""
    return _SEPARATORS.sub("_", (relation or "").strip()).casefold()


@dataclass
class ModelGraph:
    """A task's triples (a `graph.table` TripleTable) as one graph over all its filings, the
    filer keyed by its ticker in its own filing (`graph.normalise`)."""

    table: pa.Table

    @classmethod
    def of_records(cls, records: Iterable[SampleRecord]) -> ModelGraph:
        rows = (
            {
                "task": record.task,
                "span_id": record.span_id,
                "filing": f"{record.ticker}_{record.doc.get('fiscal_year', '')}",
                "ticker": record.ticker,
                "company": record.doc.get("company"),
                "triple_index": index,
                **triple.model_dump(),
            }
            for record in records
            for index, triple in enumerate(record.triples)
        )
        return cls(triple_table(rows))

    @cached_property
    def graph(self) -> nx.MultiDiGraph:
        return filing_graph(self.table)

    @cached_property
    def incident(self) -> dict[str, list[tuple[str, int, dict]]]:
        """Each entity's triples, either way round: (the other entity, the edge's key, its
        data), built once (networkx's views cost more than the walks they serve)."""
        found: dict[str, list[tuple[str, int, dict]]] = {node: [] for node in self.graph}
        for u, v, key, data in self.graph.edges(keys=True, data=True):
            found[u].append((v, key, data))
            if v != u:
                found[v].append((u, key, data))
        return found

    @cached_property
    def neighbours(self) -> dict[str, tuple[str, ...]]:
        """Each entity's neighbours, direction ignored, sorted (paths are found the same
        whatever order the triples came in)."""
        return {
            node: tuple(sorted({other for other, _, _ in edges}))
            for node, edges in self.incident.items()
        }

    @cached_property
    def _companies(self) -> dict[str, str | None]:
        spans = self.table.column("span_id").to_pylist()
        return dict(zip(spans, self.table.column("company").to_pylist(), strict=True))

    @cached_property
    def _edges_by_span(self) -> dict[str, list[tuple[str, str, str]]]:
        edges: dict[str, list[tuple[str, str, str]]] = {}
        for u, v, data in self.graph.edges(data=True):
            edges.setdefault(data["span_id"], []).append((u, relation_key(data["relation"]), v))
        return edges

    def aliases(self, ticker: str, span_id: str) -> dict[str, str]:
        """The filer's names in the span's filing (`filer_aliases`)."""
        return filer_aliases(ticker, self._companies.get(span_id))

    def span_edges(self, span_id: str) -> list[tuple[str, str, str]]:
        """The span's triples as (subject key, relation key, object key)."""
        return self._edges_by_span.get(span_id, [])


def evidence(question: Question, graph: ModelGraph) -> list[HopMatch]:
    """Per gold hop: whether its chunk's triples hold it, with its relation (`edge`) and
    whatever the relation (`entities`); head and tail in the hop's order."""
    matches = []
    for hop in question.hops:
        aliases = graph.aliases(hop.ticker, hop.span_id)
        head, tail = entity_key(hop.head, aliases), entity_key(hop.tail, aliases)
        relations = [r for u, r, v in graph.span_edges(hop.span_id) if (u, v) == (head, tail)]
        matches.append(
            HopMatch(edge=relation_key(hop.relation) in relations, entities=bool(relations))
        )
    return matches


def endpoints(question: Question, graph: ModelGraph) -> tuple[str, str]:
    """The keys of the question's start and end, the filers of all its hops merged in."""
    aliases: dict[str, str] = {}
    for hop in question.hops:
        aliases |= graph.aliases(hop.ticker, hop.span_id)
    return entity_key(question.start, aliases), entity_key(question.end, aliases)


def path(question: Question, graph: ModelGraph, max_hops: int) -> PathFound:
    """The shortest path between the question's start and end, direction ignored, of at most
    `max_hops` edges (breadth-first from both ends; of equal paths, the first in key order)."""
    start, end = endpoints(question, graph)
    found = shortest_path(graph.neighbours, start, end, max_hops)
    if found is None:
        return PathFound(connected=False, length=None, nodes=[])
    return PathFound(connected=True, length=len(found) - 1, nodes=found)


def shortest_path(
    neighbours: Mapping[str, Sequence[str]], start: str, end: str, max_hops: int
) -> list[str] | None:
    """A shortest path of at most `max_hops` edges, or None: each step grows the smaller of
    the two searches (a hub's neighbourhood is searched only when it must be)."""
    if start not in neighbours or end not in neighbours:
        return None
    if start == end:
        return [start]
    parents: tuple[dict[str, str | None], dict[str, str | None]] = ({start: None}, {end: None})
    fronts = ([start], [end])
    for _ in range(max_hops):
        side = 0 if len(fronts[0]) <= len(fronts[1]) else 1
        grown = []
        for node in fronts[side]:
            for nearby in neighbours[node]:
                if nearby in parents[side]:
                    continue
                parents[side][nearby] = node
                if nearby in parents[1 - side]:
                    return _joined(parents, nearby)
                grown.append(nearby)
        if not grown:
            return None
        fronts = (grown, fronts[1]) if side == 0 else (fronts[0], grown)
    return None


def _joined(parents: tuple[dict, dict], meeting: str) -> list[str]:
    way = [meeting]
    while parents[0][way[0]] is not None:
        way.insert(0, parents[0][way[0]])
    while parents[1][way[-1]] is not None:
        way.append(parents[1][way[-1]])
    return way


def seeds(question: Question, graph: ModelGraph) -> list[str]:
    """Where retrieval starts: the question's start and end, and every entity of the graph
    whose key is a run of whole words of the question's text (at least `MIN_SEED_CHARS`, at
    most `MAX_SEED_WORDS` words), in the order the question names them."""
    nodes = graph.neighbours
    found = [key for key in endpoints(question, graph) if key in nodes]
    words = entity_key(question.question).split()
    for first in range(len(words)):
        for last in range(first + 1, min(len(words), first + MAX_SEED_WORDS) + 1):
            key = " ".join(words[first:last])
            if len(key) >= MIN_SEED_CHARS and not key.isdigit() and key in nodes:
                found.append(key)
    return list(dict.fromkeys(found))


def subgraph(
    question: Question,
    graph: ModelGraph,
    hops: int,
    budget: int,
    count_tokens: TokenCounter,
) -> list[ContextTriple]:
    """The triples among the entities within `hops` edges of the seeds (`seeds`; direction
    ignored), nearest first (by the farther entity's distance, then the nearer's, then in span
    and triple order), each written once, as many as fit in `budget` tokens rendered. It walks
    out one distance at a time and stops when the budget is full, so a hub's neighbourhood is
    walked only when the nearer triples did not fill it."""
    reached = dict.fromkeys(seeds(question, graph), 0)
    layers = [list(reached)]
    chosen: list[ContextTriple] = []
    lines: set[str] = set()
    used = 0
    for far in range(hops + 1):
        if far:
            layer = [n for u in layers[-1] for n in graph.neighbours[u] if n not in reached]
            layers.append(list(dict.fromkeys(layer)))
            reached |= dict.fromkeys(layers[-1], far)
        for near in range(far + 1):
            found = {
                key: data
                for node in layers[near]
                for other, key, data in graph.incident[node]
                if reached.get(other) == far
            }
            for data in sorted(found.values(), key=lambda d: (d["span_id"], d["triple_index"])):
                triple = ContextTriple(
                    subject=data["subject"],
                    relation=data["relation"] or "",
                    object=data["object"],
                    span_id=data["span_id"],
                )
                line = render_triple(triple)
                if line in lines:
                    continue
                cost = count_tokens(line + "\n")
                if used + cost > budget:
                    return chosen
                lines.add(line)
                used += cost
                chosen.append(triple)
    return chosen


def render_triple(triple: ContextTriple | Mapping) -> str:
    get = triple.get if isinstance(triple, Mapping) else triple.__getattribute__
    return f"{get('subject')} -[{get('relation')}]-> {get('object')}"


def measure(
    question: Question,
    task: str,
    graph: ModelGraph,
    max_hops: int,
    qa: Any,
    count_tokens: TokenCounter,
    shown: bool = True,
) -> QuestionRecord:
    """What the graph holds of the question, and (`shown`) the subgraph the QA model is shown
    (`qa` needs `neighbourhood_hops` and `budget_tokens`)."""
    return QuestionRecord(
        task=task,
        question=question,
        evidence=evidence(question, graph),
        path=path(question, graph, max_hops),
        subgraph=subgraph(question, graph, qa.neighbourhood_hops, qa.budget_tokens, count_tokens)
        if shown
        else [],
    )
