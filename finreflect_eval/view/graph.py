"""The report's Graph tab: per task, the results' `graph` block (the graph the run's triples make,
its grounding, its overlap with the reference triples, the cascade and the normalisation rules),
and a picture of one filing's graph at a time, which `report-graph.js` draws from a data script
per filing (`data/<task>/graph-<run>-<n>.js`, calling `FRV.graph(task, run, n, drawing)`).

A drawing is computed here, deterministic: networkx's spring layout with a fixed seed
(LAYOUT_SEED) on at most MAX_ENTITIES entities, those of highest degree (distinct normalised
triples an entity is in), and the edges among them (at most MAX_EDGES: the contradicting ones
first, then those in most triples). Each entity has its most frequent surface form as label
(ties: the first in code-point order), its degree, its surface forms and types, whether it is
fragmented (more than one surface form) and its place (0-1 on each axis); each edge, a distinct
normalised triple, its relation, its triples and whether it contradicts another (the same
subject and object with the opposite relation: the schema's `opposite_relations`). The filing's
fragmented entities and contradictions come in words too (at most MAX_LISTED of each), so that
nothing is told by colour alone, with the filing's figures of the results' graph block.
Entities and counts follow `graph.metrics`, as the results do.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
import pyarrow as pa

from finreflect_eval.graph.metrics import GRAPH_KEYS, keyed_triples
from finreflect_eval.graph.table import TRIPLE_COLUMNS, TRIPLE_FIELDS
from finreflect_eval.protocol.schema import load_schema
from finreflect_eval.records import GraphQuality, GraphScores, SampleRecord
from finreflect_eval.scoring.span_facts import filing_of
from finreflect_eval.view.source import ViewRun
from finreflect_eval.view.spans import dumps

MAX_ENTITIES = 40
MAX_EDGES = 160
MAX_LISTED = 25
MAX_FORMS = 8  # surface forms kept per entity (its title and the list)
LAYOUT_SEED = 20250
LAYOUT_ITERATIONS = 50

# The block's keys as the page names them, with what each counts.
QUALITY = {
    "entities": ("entities", "distinct entities after normalisation: the graph's nodes"),
    "edges": ("edges", "distinct normalised triples"),
    "surface_forms_per_entity": (
        "surface forms per entity",
        "mean distinct spellings of an entity, as written",
    ),
    "fragmented_share": ("fragmented", "entities seen under more than one surface form"),
    "duplicate_triples": (
        "duplicate triples",
        "copies of a normalised triple in other spans of its filing than its first",
    ),
    "contradictions": (
        "contradictions",
        "pairs of triples with the same subject and object and opposite relations",
    ),
    "invalid_type_pairs": ("type conflicts", "types an entity is given beyond its first"),
    "largest_component_share": (
        "largest component",
        "entities in the largest connected part of a filing's graph",
    ),
    "cross_chunk_entities": ("cross-chunk entities", "entities in more than one span of a filing"),
}
SHARES = ("fragmented_share", "largest_component_share")


class TripleCollector:
    """One run's triples of a task, gathered as the report reads its records (a TripleTable)."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.columns: dict[str, list] = {name: [] for name in TRIPLE_COLUMNS}

    def add(self, record: SampleRecord) -> None:
        if not record.triples:
            return
        company = record.doc.get("company")
        span = {
            "task": self.task,
            "span_id": record.span_id,
            "filing": filing_of(record),
            "ticker": record.ticker,
            "company": None if company is None else str(company),
        }
        for index, triple in enumerate(record.triples):
            for name, value in span.items():
                self.columns[name].append(value)
            self.columns["triple_index"].append(index)
            for name in TRIPLE_FIELDS:
                self.columns[name].append(getattr(triple, name))

    def table(self) -> pa.Table:
        return pa.table(
            {name: pa.array(values, TRIPLE_COLUMNS[name]) for name, values in self.columns.items()}
        )


def task_graphs(
    folder: Path, task: str, runs: Sequence[ViewRun], collectors: Sequence[TripleCollector]
) -> list[dict[str, Any] | None]:
    """Per run, what its Graph tab shows of the task (`graph_context`; None: no triples), its
    filings' drawings written into the task's data folder."""
    shown = []
    for number, (run, collected) in enumerate(zip(runs, collectors, strict=True)):
        table = collected.table()
        block = run.results.graph.get(task)
        per_filing = block.per_filing if block is not None else {}
        opposite = opposite_relations(run, task)
        filings = write_graphs(folder, task, number, table, opposite, per_filing)
        shown.append(graph_context(run, task, filings, number))
    return shown


def opposite_relations(run: ViewRun, task: str) -> list[tuple[str, str]]:
    """The pairs the results counted as contradictions (the bundled schema's where they
    have no graph block)."""
    block = run.results.graph.get(task)
    if block is not None:
        return [(first, second) for first, second in block.opposite_relations]
    return list(load_schema().opposite_relations)


def write_graphs(
    folder: Path,
    task: str,
    run_number: int,
    table: pa.Table,
    opposite: Sequence[tuple[str, str]],
    per_filing: Mapping[str, GraphQuality] | None = None,
) -> list[dict[str, Any]]:
    """Write a drawing per filing of the table's triples into `folder` (`graph-<run>-<n>.js`,
    filings in name order), each with the filing's figures of the results' graph block where
    it has them (`per_filing`: `quality`, a [label, value] pair per key); returns what the
    picker lists of each."""
    filings = []
    for number, (name, filing) in enumerate(sorted(_filings(table).items())):
        drawing = filing_drawing(name, filing, opposite)
        quality = (per_filing or {}).get(name)
        if quality is not None:
            values = quality.model_dump()
            drawing["quality"] = [[QUALITY[k][0], _value(k, values[k])] for k in GRAPH_KEYS]
        text = f"FRV.graph({dumps(task)},{run_number},{number},{dumps(drawing)});\n"
        (folder / f"graph-{run_number}-{number}.js").write_text(text, encoding="utf-8")
        filings.append(
            {
                "number": number,
                "name": name,
                "entities": drawing["entities"],
                "edges": drawing["edges"],
                "fragmented": drawing["n_fragmented"],
                "contradictions": drawing["n_contradictions"],
            }
        )
    return filings


class GraphParts:
    """What a drawing is made of (a filing's graph, or a question's path or subgraph): per
    entity key its surface forms (with their occurrences) and types; per distinct normalised
    triple, its triples."""

    def __init__(self) -> None:
        self.forms: dict[str, Counter[str]] = defaultdict(Counter)
        self.types: dict[str, set[str]] = defaultdict(set)
        self.edges: Counter[tuple[str, str, str]] = Counter()

    def add(
        self,
        subject: tuple[str, str, str | None],
        relation: str,
        obj: tuple[str, str, str | None],
    ) -> tuple[str, str, str]:
        """A triple, each entity as (key, surface form, type); returns its edge."""
        for key, surface, kind in (subject, obj):
            self.forms[key][surface] += 1
            if kind:
                self.types[key].add(kind)
        edge = (subject[0], relation, obj[0])
        self.edges[edge] += 1
        return edge


_ROW = (  # the columns `_filings` reads, in its order
    "filing",
    "subject",
    "subject_type",
    "subject_key",
    "relation",
    "object",
    "object_type",
    "object_key",
)


def _filings(table: pa.Table) -> dict[str, GraphParts]:
    """The table's triples per filing, keyed as `graph.metrics` keys them."""
    if table.num_rows == 0:
        return {}
    keyed = keyed_triples(table).to_pydict()
    filings: dict[str, GraphParts] = defaultdict(GraphParts)
    for row in zip(*(keyed[name] for name in _ROW), strict=True):
        filing, subject, subject_type, subject_key, relation, obj, object_type, object_key = row
        filings[filing].add(
            (subject_key, subject, subject_type), relation, (object_key, obj, object_type)
        )
    return filings


def filing_drawing(
    name: str,
    filing: GraphParts,
    opposite: Iterable[tuple[str, str]],
    marked: Mapping[tuple[str, str, str], int] | None = None,
) -> dict[str, Any]:
    """A filing's drawing (see the module's docstring), JSON-ready. With `marked` (an edge's
    kind, a small number the page styles: the downstream tab's gold hops), each link has its
    kind last (0: unmarked), and marked edges and their entities are shown first."""
    opposite = list(opposite)
    contradicting, contradictions = _contradictions(filing, opposite)
    marks = marked or {}
    degree: Counter[str] = Counter()
    for subject, _, obj in filing.edges:
        degree[subject] += 1
        degree[obj] += 1
    kept = {key for edge, kind in marks.items() if kind for key in (edge[0], edge[2])}
    shown = sorted(filing.forms, key=lambda key: (key not in kept, -degree[key], key))
    shown = shown[:MAX_ENTITIES]
    place = {key: number for number, key in enumerate(shown)}
    among = [edge for edge in filing.edges if edge[0] in place and edge[2] in place]
    among.sort(
        key=lambda edge: (
            edge not in contradicting and not marks.get(edge),
            -filing.edges[edge],
            edge,
        )
    )
    edges = among[:MAX_EDGES]
    positions = _layout(len(shown), [(place[s], place[o]) for s, _, o in edges])
    fragmented = sorted(key for key, forms in filing.forms.items() if len(forms) > 1)
    named = {*shown, *fragmented[:MAX_LISTED]}
    named |= {key for s, _, _, o in contradictions[:MAX_LISTED] for key in (s, o)}
    labels = {key: _label(filing.forms[key]) for key in named}
    return {
        "filing": name,
        "entities": len(filing.forms),
        "edges": len(filing.edges),
        "edges_among": len(among),
        "nodes": [
            [
                labels[key],
                *positions[number],
                degree[key],
                int(len(filing.forms[key]) > 1),
                _forms(filing.forms[key]),
                sorted(filing.types[key]),
            ]
            for number, key in enumerate(shown)
        ],
        "links": [
            [
                place[s],
                place[o],
                relation,
                int((s, relation, o) in contradicting),
                filing.edges[(s, relation, o)],
                *([marks.get((s, relation, o), 0)] if marked is not None else []),
            ]
            for s, relation, o in edges
        ],
        "n_fragmented": len(fragmented),
        "fragmented": [[labels[key], _forms(filing.forms[key])] for key in fragmented[:MAX_LISTED]],
        "n_contradictions": len(contradictions),
        "contradictions": [
            [labels[s], first, second, labels[o]]
            for s, first, second, o in contradictions[:MAX_LISTED]
        ],
    }


def _contradictions(
    filing: GraphParts, opposite: list[tuple[str, str]]
) -> tuple[set[tuple[str, str, str]], list[tuple[str, str, str, str]]]:
    """The edges that contradict another, and each contradiction (subject key, relation, its
    opposite, object key) once per opposite pair, as `graph.metrics` counts them."""
    relations: dict[tuple[str, str], set[str]] = defaultdict(set)
    for subject, relation, obj in filing.edges:
        relations[(subject, obj)].add(relation)
    contradicting, contradictions = set(), []
    for (subject, obj), found in sorted(relations.items()):
        for first, second in opposite:
            if first in found and second in found:
                contradictions.append((subject, first, second, obj))
                contradicting |= {(subject, first, obj), (subject, second, obj)}
    return contradicting, contradictions


def _label(forms: Counter[str]) -> str:
    """The most frequent surface form (ties: the first in code-point order)."""
    return min(forms.items(), key=lambda item: (-item[1], item[0]))[0]


def _forms(forms: Counter[str]) -> list[str]:
    return [form for form, _ in sorted(forms.items(), key=lambda i: (-i[1], i[0]))][:MAX_FORMS]


def _layout(n_nodes: int, edges: list[tuple[int, int]]) -> list[tuple[float, float]]:
    """Each node's place, 0-1 on each axis: the spring layout with the fixed seed."""
    if n_nodes == 0:
        return []
    graph = nx.Graph()
    graph.add_nodes_from(range(n_nodes))
    graph.add_edges_from((s, o) for s, o in edges if s != o)
    found = nx.spring_layout(graph, seed=LAYOUT_SEED, iterations=LAYOUT_ITERATIONS)
    points = [(float(found[n][0]), float(found[n][1])) for n in range(n_nodes)]
    scaled = []
    for axis in (0, 1):
        values = [point[axis] for point in points]
        low, high = min(values), max(values)
        scaled.append(
            [0.5 if high - low < 1e-9 else round((v - low) / (high - low), 3) for v in values]
        )
    return list(zip(*scaled, strict=True))


def graph_context(
    run: ViewRun, task: str, filings: list[dict[str, Any]], run_number: int
) -> dict[str, Any] | None:
    """What the Graph tab shows of a run's task: its results' graph block, formatted, and its
    filings for the picture's picker; None where the task has no triples."""
    block: GraphScores | None = run.results.graph.get(task)
    if not filings and (block is None or block.overall.entities == 0):
        return None
    context: dict[str, Any] = {
        "name": task,
        "mode": run.results.details[task].mode,
        "run": run_number,
        "filings": filings,
        "block": block,
    }
    if block is None:
        return context
    overall = block.overall.model_dump()
    context["quality"] = [
        (key, label, _value(key, overall[key]), description)
        for key, (label, description) in QUALITY.items()
    ]
    grounding = block.grounding
    context["grounded_share"] = (
        _percent(grounding.grounded / grounding.checked) if grounding.checked else "—"
    )
    context["reference"] = [
        (matching, level, scores)
        for matching, levels in (block.reference or {}).items()
        for level, scores in levels.items()
    ]
    return context


def _value(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key in SHARES:
        return _percent(value)
    if key == "surface_forms_per_entity":
        return f"{value:.2f}"
    return f"{value:,}"


def _percent(share: float) -> str:
    return f"{100 * share:.1f}%"
