"""The graph a filing's triples make, and its quality without a judge.

Entities are normalised by `normalise` (the filer's ticker and company name are one entity in
its own filing); a triple is an edge from its subject's key to its object's, and a normalised
triple is (subject key, relation, object key). Everything is counted per filing (the table's
`filing` column) with Arrow's group-bys, each distinct name normalised once; networkx finds the
components. The keys (a contract other tools read), per filing and overall:

- `entities`: distinct entity keys (the graph's nodes).
- `edges`: distinct normalised triples.
- `surface_forms_per_entity`: mean number of distinct surface strings (as written, stripped)
  per entity.
- `fragmented_share`: share of entities seen under more than one surface string (0–1).
- `duplicate_triples`: copies of a normalised triple in other spans of the filing than its first
  (a triple in three spans counts 2; a repeat inside one span counts 0).
- `contradictions`: pairs of distinct normalised triples with the same subject and object and
  opposite relations (the schema's `opposite_relations`), each pair once.
- `invalid_type_pairs`: types an entity is given beyond its first (one name, one kind of thing:
  ORG in one triple and COMP in another counts 1).
- `largest_component_share`: share of the entities in the largest weakly connected component.
- `cross_chunk_entities`: entities that occur in more than one span of the filing.

Overall, the counts are summed over filings, the shares and means recomputed from the sums
(weighted by entities), and `filings` counts the filings. A share or mean of no entities is None.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx
import pyarrow as pa
import pyarrow.compute as pc

from finreflect_eval.graph.normalise import RULES, entity_keys, filer_aliases

GRAPH_KEYS = (
    "entities",
    "edges",
    "surface_forms_per_entity",
    "fragmented_share",
    "duplicate_triples",
    "contradictions",
    "invalid_type_pairs",
    "largest_component_share",
    "cross_chunk_entities",
)
_TEXT = ("task", "span_id", "filing", "ticker", "company", "subject", "relation", "object")
_SEP = "\x1f"  # joins a filer and a key into one string to look aliases up


@dataclass(frozen=True)
class _Counts:
    """The integers a filing's (or a run's) `GRAPH_KEYS` come from; they add up over filings."""

    entities: int = 0
    edges: int = 0
    surface_forms: int = 0
    fragmented: int = 0
    duplicate_triples: int = 0
    contradictions: int = 0
    invalid_type_pairs: int = 0
    largest_component: int = 0
    cross_chunk_entities: int = 0

    def __add__(self, other: _Counts) -> _Counts:
        return _Counts(
            *(a + b for a, b in zip(asdict(self).values(), asdict(other).values(), strict=True))
        )

    def as_dict(self) -> dict[str, int | float | None]:
        """The `GRAPH_KEYS`, floats rounded to 4 places."""

        def share(count: int) -> float | None:
            return round(count / self.entities, 4) if self.entities else None

        return {
            "entities": self.entities,
            "edges": self.edges,
            "surface_forms_per_entity": share(self.surface_forms),
            "fragmented_share": share(self.fragmented),
            "duplicate_triples": self.duplicate_triples,
            "contradictions": self.contradictions,
            "invalid_type_pairs": self.invalid_type_pairs,
            "largest_component_share": share(self.largest_component),
            "cross_chunk_entities": self.cross_chunk_entities,
        }


def graph_metrics(
    table: pa.Table,
    opposite_relations: Iterable[tuple[str, str]],
    *,
    reference: pa.Table | None = None,
) -> dict[str, Any]:
    """The graph quality of a `TripleTable`'s triples (one task's: the rows of several tasks of
    a filing would make one graph), JSON-ready:

    `{"overall": {GRAPH_KEYS..., "filings": n}, "per_filing": {filing: {GRAPH_KEYS...}},
    "reference": reference_overlap(table, reference), "normalisation": RULES}`.

    `opposite_relations` is the schema's (`KGSchema.opposite_relations`); `reference`, the
    reference triples of the same spans (None, or no rows: `"reference"` is None)."""
    keyed = keyed_triples(table)
    # A triple with an empty subject or object names no entity there: no edge of the graph.
    keyed = keyed.filter(
        pc.and_(pc.not_equal(keyed["subject_key"], ""), pc.not_equal(keyed["object_key"], ""))
    )
    per_filing = filing_counts(keyed, opposite_relations)
    overall = sum(per_filing.values(), _Counts())
    return {
        "overall": {**overall.as_dict(), "filings": len(per_filing)},
        "per_filing": {filing: counts.as_dict() for filing, counts in per_filing.items()},
        "reference": reference_overlap(keyed, reference),
        "normalisation": list(RULES),
    }


def keyed_triples(table: pa.Table) -> pa.Table:
    """The table's triple columns with nulls as "" and text stripped of outer whitespace, plus
    `subject_key` and `object_key`: the entities' keys, the filer's names merged in its own
    filing (`filer_aliases` of each row's `ticker` and `company`)."""
    columns = {name: _text(table[name]) for name in _TEXT}
    columns["subject_type"] = _text(table["subject_type"])
    columns["object_type"] = _text(table["object_type"])
    n = table.num_rows
    names = pa.chunked_array([columns["subject"], columns["object"]])
    keys = entity_keys(names)
    filers = pa.table({"ticker": columns["ticker"], "company": columns["company"]})
    pairs = filers.group_by(["ticker", "company"]).aggregate([]).to_pylist()
    alias_from, alias_to = [], []
    for pair in pairs:
        for key, canonical in filer_aliases(pair["ticker"], pair["company"]).items():
            alias_from.append(_SEP.join((pair["ticker"], pair["company"], key)))
            alias_to.append(canonical)
    both = pa.chunked_array([columns["ticker"], columns["ticker"]])
    looked_up = pc.binary_join_element_wise(
        both, pa.chunked_array([columns["company"], columns["company"]]), keys, _SEP
    )
    where = pc.index_in(looked_up, value_set=pa.array(alias_from, pa.string()))
    keys = pc.coalesce(pc.take(pa.array(alias_to, pa.string()), where), keys)
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    columns["subject_key"] = keys.slice(0, n)
    columns["object_key"] = keys.slice(n, n)
    if "triple_index" in table.column_names:
        columns["triple_index"] = table["triple_index"].combine_chunks()
    return pa.table(columns)


def _text(column: pa.ChunkedArray) -> pa.Array:
    column = pc.fill_null(column.cast(pa.string()), "").combine_chunks()
    return pc.utf8_trim_whitespace(column)


def filing_counts(
    keyed: pa.Table, opposite_relations: Iterable[tuple[str, str]]
) -> dict[str, _Counts]:
    """Each filing's counts, in the order of the filings' names."""
    entities = _entity_counts(keyed)
    distinct = _distinct_edges(keyed)
    edges = _edge_counts(distinct)
    contradictions = _contradictions(distinct, opposite_relations)
    largest = _largest_components(keyed)
    return {
        filing: _Counts(
            entities=entities[filing]["entities"],
            edges=edges[filing]["edges"],
            surface_forms=entities[filing]["surface_forms"],
            fragmented=entities[filing]["fragmented"],
            duplicate_triples=edges[filing]["duplicates"],
            contradictions=contradictions.get(filing, 0),
            invalid_type_pairs=entities[filing]["extra_types"],
            largest_component=largest[filing],
            cross_chunk_entities=entities[filing]["cross_chunk"],
        )
        for filing in sorted(entities)
    }


def _entity_sides(keyed: pa.Table) -> pa.Table:
    """A row per entity occurrence (a triple's subject, and its object): filing, span_id, key,
    surface, type (null where empty)."""
    sides = [
        pa.table(
            {
                "filing": keyed["filing"],
                "span_id": keyed["span_id"],
                "key": keyed[f"{side}_key"],
                "surface": keyed[side],
                "type": _none_if_empty(keyed[f"{side}_type"]),
            }
        )
        for side in ("subject", "object")
    ]
    return pa.concat_tables(sides)


def _per_filing(table: pa.Table, sums: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """`{filing: {name: sum of column}}` for `sums` (name -> column), plus `count` rows."""
    aggregations = [(column, "sum") for column in sums.values()]
    grouped = table.group_by("filing").aggregate([*aggregations, ("filing", "count")])
    columns = grouped.to_pydict()
    return {
        filing: {
            "count": columns["filing_count"][i],
            **{name: columns[f"{column}_sum"][i] or 0 for name, column in sums.items()},
        }
        for i, filing in enumerate(columns["filing"])
    }


def _entity_counts(keyed: pa.Table) -> dict[str, dict[str, int]]:
    entity = (
        _entity_sides(keyed)
        .group_by(["filing", "key"])
        .aggregate(
            [
                ("surface", "count_distinct"),
                ("type", "count_distinct"),
                ("span_id", "count_distinct"),
            ]
        )
    )
    surfaces = entity["surface_count_distinct"]
    types = pc.subtract(entity["type_count_distinct"], 1)  # an empty type is not a type
    entity = pa.table(
        {
            "filing": entity["filing"],
            "surfaces": surfaces,
            "fragmented": pc.cast(pc.greater(surfaces, 1), pa.int64()),
            "extra_types": pc.max_element_wise(types, 0),
            "cross_chunk": pc.cast(pc.greater(entity["span_id_count_distinct"], 1), pa.int64()),
        }
    )
    sums = {"surface_forms": "surfaces", "fragmented": "fragmented"}
    sums |= {"extra_types": "extra_types", "cross_chunk": "cross_chunk"}
    counts = _per_filing(entity, sums)
    for values in counts.values():
        values["entities"] = values.pop("count")
    return counts


def _none_if_empty(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.if_else(pc.equal(column, ""), pa.scalar(None, pa.string()), column)


def _distinct_edges(keyed: pa.Table) -> pa.Table:
    """A row per normalised triple of each filing, with the number of spans it is in."""
    columns = ["filing", "subject_key", "relation", "object_key"]
    return keyed.group_by(columns).aggregate([("span_id", "count_distinct")])


def _edge_counts(edges: pa.Table) -> dict[str, dict[str, int]]:
    """Per filing, its `edges` (of `_distinct_edges`) and their copies in other spans."""
    extra = pc.subtract(edges["span_id_count_distinct"], 1)
    counts = _per_filing(
        pa.table({"filing": edges["filing"], "extra": extra}), {"duplicates": "extra"}
    )
    for values in counts.values():
        values["edges"] = values.pop("count")
    return counts


def _contradictions(
    edges: pa.Table, opposite_relations: Iterable[tuple[str, str]]
) -> dict[str, int]:
    """Per filing, the (subject key, object key) pairs of `edges` (of `_distinct_edges`) joined
    by both relations of an opposite pair, once per opposite pair."""
    ends = ["filing", "subject_key", "object_key"]
    counts: dict[str, int] = {}
    for first, second in opposite_relations:
        left = edges.filter(pc.equal(edges["relation"], first)).select(ends)
        right = edges.filter(pc.equal(edges["relation"], second)).select(ends)
        both = left.join(right, keys=ends, join_type="inner")
        for filing, n in _value_counts(both["filing"]).items():
            counts[filing] = counts.get(filing, 0) + n
    return counts


def _value_counts(column: pa.ChunkedArray) -> dict[str, int]:
    counted = pc.value_counts(column).to_pylist()
    return {item["values"]: item["counts"] for item in counted}


def _largest_components(keyed: pa.Table) -> dict[str, int]:
    """Per filing, the number of entities in its largest weakly connected component."""
    ends = ["filing", "subject_key", "object_key"]
    pairs = keyed.select(ends).group_by(ends).aggregate([]).sort_by("filing").to_pydict()
    rows = zip(pairs["filing"], pairs["subject_key"], pairs["object_key"], strict=True)
    largest = {}
    for filing, group in itertools.groupby(rows, key=lambda row: row[0]):
        graph = nx.Graph()  # weak components of a directed graph: those of its undirected one
        graph.add_edges_from((subject, obj) for _, subject, obj in group)
        largest[filing] = max(len(part) for part in nx.connected_components(graph))
    return largest


def reference_overlap(
    table: pa.Table, reference: pa.Table | None
) -> dict[str, dict[str, dict[str, float | int | None]]] | None:
    """Entity- and edge-level precision, recall and F1 of the table's triples against reference
    triples of the same spans, micro over filings; None without reference rows.

    `{"exact": {"entity": {...}, "edge": {...}}, "normalised": {...}}`, each
    `{"precision", "recall", "f1", "predicted", "reference", "matched"}`. An entity is a
    (filing, name) and an edge a (filing, subject, relation, object), distinct; `exact` compares
    names as written (outer whitespace stripped), `normalised` their keys (`entity_key`, the
    filer's names merged); relations are compared as written, types not at all."""
    if reference is None or reference.num_rows == 0:
        return None
    predicted = table if "subject_key" in table.column_names else keyed_triples(table)
    gold = keyed_triples(reference)
    result = {}
    for matching, (subject, obj) in {
        "exact": ("subject", "object"),
        "normalised": ("subject_key", "object_key"),
    }.items():
        result[matching] = {
            "entity": _overlap(
                _entity_set(predicted, subject, obj), _entity_set(gold, subject, obj)
            ),
            "edge": _overlap(_edge_set(predicted, subject, obj), _edge_set(gold, subject, obj)),
        }
    return result


def _entity_set(keyed: pa.Table, subject: str, obj: str) -> pa.Table:
    sides = [
        pa.table({"filing": keyed["filing"], "name": keyed[column]}) for column in (subject, obj)
    ]
    return pa.concat_tables(sides).group_by(["filing", "name"]).aggregate([])


def _edge_set(keyed: pa.Table, subject: str, obj: str) -> pa.Table:
    columns = ["filing", subject, "relation", obj]
    return keyed.select(columns).group_by(columns).aggregate([])


def _overlap(predicted: pa.Table, gold: pa.Table) -> dict[str, float | int | None]:
    matched = predicted.join(gold, keys=predicted.column_names, join_type="inner").num_rows
    precision = matched / predicted.num_rows if predicted.num_rows else None
    recall = matched / gold.num_rows if gold.num_rows else None
    f1 = None
    if precision is not None and recall is not None:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": _round(precision),
        "recall": _round(recall),
        "f1": _round(f1),
        "predicted": predicted.num_rows,
        "reference": gold.num_rows,
        "matched": matched,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def filing_graph(table: pa.Table) -> nx.MultiDiGraph:
    """The graph of a `TripleTable`'s rows (one filing's; `keyed_triples` rows too): a node per
    entity key, with its `surface_forms` and `types` (sorted lists) and the `spans` it occurs
    in; an edge per triple from its subject's key to its object's, keyed by its row number,
    with its `relation`, `span_id`, `filing`, `task`, `triple_index` and the `subject` and
    `object` as written."""
    keyed = table if "subject_key" in table.column_names else keyed_triples(table)
    rows = keyed.to_pylist()
    nodes: dict[str, dict[str, set[str]]] = {}
    for row in rows:
        for side in ("subject", "object"):
            node = nodes.setdefault(
                row[f"{side}_key"], {"surface_forms": set(), "types": set(), "spans": set()}
            )
            node["surface_forms"].add(row[side])
            if row[f"{side}_type"]:
                node["types"].add(row[f"{side}_type"])
            node["spans"].add(row["span_id"])
    graph = nx.MultiDiGraph()
    graph.add_nodes_from(
        (key, {name: sorted(values) for name, values in node.items()})
        for key, node in nodes.items()
    )
    for number, row in enumerate(rows):
        attributes = {
            name: row.get(name)
            for name in (
                "relation",
                "span_id",
                "filing",
                "task",
                "triple_index",
                "subject",
                "object",
            )
        }
        graph.add_edge(row["subject_key"], row["object_key"], key=number, **attributes)
    return graph
