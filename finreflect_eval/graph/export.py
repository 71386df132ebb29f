"""`graph export`: a run's triples as a graph other tools load, in one of `FORMATS`.

The graph is one for the whole table (every mode and filing of the run): a node per entity,
its id the entity's normalised key (`normalise.entity_key`), so one key is one node across
filings; the filer's own ticker and company name (`normalise.filer_aliases`) are aliases within
that filer's filing only, as `normalise` rules: in Apple's filing "Apple Inc." is the node
`aapl`, in another company's it is `apple`. A null or blank name is the node `""`. An edge
per triple row: multi-edges are kept, since each carries its own provenance.

Nodes: `id` (the key), `name` (the surface form seen most often; a tie goes to the smallest),
`surface_forms` (every form as written, most often seen first, then by text), `types` (every
entity type given to it, sorted; a null or empty type is left out), `filings` (sorted),
`degree` (edges in and out, a loop counted twice, as networkx counts).

Edges: `source`, `target` (node ids), `relation`, the provenance `task` (the mode),
`span_id`, `filing`, `triple_index`, the triple as written (`subject`, `subject_type`,
`object`, `object_type`; `relation` is as written), then each `verdict:<criterion>` column of
the table as `<criterion>` (the panel's verdict, its values as the table has them, null where
there is none).

The files of each format (`FILES`), and how each holds a list and a null:
- `graphml`: `graph.graphml`, a networkx MultiDiGraph (`networkx.read_graphml` reads it back);
  an edge's key is its row in the table, and `source`/`target` are its ends, not attributes.
  GraphML has no lists: `surface_forms`, `types` and `filings` are JSON arrays in a string. A
  null is an attribute left out. XML 1.0 cannot hold most control characters (U+0000-U+001F
  but tab, newline and carriage return) nor U+FFFE/U+FFFF: each becomes U+FFFD, in every
  string, ids included; and a carriage return (`\\r\\n`, `\\r`) becomes `\\n`, since an XML
  reader turns line ends in text into `\\n` unless the writer escaped them (lxml does, the
  standard library does not). Inside the JSON arrays control characters are JSON escapes and
  survive.
- `jsonl`: `nodes.jsonl` and `edges.jsonl`, an object per line (UTF-8, lists as arrays, null
  as null); every string exact.
- `parquet`: `nodes.parquet` and `edges.parquet` (lists as `list<string>`, the verdicts in
  their own Arrow type); every string exact.
- `neo4j-csv`: `nodes.csv` (`id:ID`, `name`, `surface_forms:string[]`, `types:string[]`,
  `filings:string[]`, `degree:long`, `:LABEL`) and `relationships.csv` (`:START_ID`,
  `:END_ID`, `:TYPE`, then the edge's columns: `triple_index:long`, a verdict typed by its
  Arrow type), as `neo4j-admin database import full --nodes=nodes.csv
  --relationships=relationships.csv --multiline-fields=true` reads them (the last option: a
  name may hold a newline). The header is bare; every value is in double quotes (a quote
  doubled); a null, and an empty list, is an empty field without quotes (no property). Arrays
  and labels are joined by `;`, the default array delimiter, which has no escape: a `;` inside
  an element becomes `,` there (`id` and `name` keep it). The labels are the node's types; the
  `:TYPE` is the relation as written (`RELATED` where it is empty; the `relation` property
  keeps it).

An output folder holds a marker (`MARKER`, `_util.output_folder`) listing the files written:
writing a format again replaces its own files, another format adds its files beside them, and
a file of the user's where the export would write refuses the export, naming it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.output_folder import plan_write, read_record, write_record
from finreflect_eval._util.version import __version__
from finreflect_eval.graph.normalise import entity_key, filer_aliases

FILES = {
    "graphml": ("graph.graphml",),
    "jsonl": ("nodes.jsonl", "edges.jsonl"),
    "parquet": ("nodes.parquet", "edges.parquet"),
    "neo4j-csv": ("nodes.csv", "relationships.csv"),
}
FORMATS = tuple(FILES)
MARKER = ".finreflect-graph"  # what `graph export` wrote into its folder (output_folder)
VERDICT = "verdict:"
PROVENANCE = ("relation", "task", "span_id", "filing", "triple_index")
AS_WRITTEN = ("subject", "subject_type", "object", "object_type")
LISTS = ("surface_forms", "types", "filings")
NODE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        *((name, pa.list_(pa.string())) for name in LISTS),
        ("degree", pa.int64()),
    ]
)
ARRAY_DELIMITER = ";"
EMPTY_TYPE = "RELATED"  # a relationship's `:TYPE` where the relation is empty
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def write_graph(table: pa.Table, folder: Path, fmt: str) -> list[Path]:
    """The graph of `table` (a `TripleTable`) into `folder` in format `fmt` (one of
    `FORMATS`): the files written. A file of the user's where one would go refuses the
    export, naming it, before anything is written."""
    if fmt not in FILES:
        raise FinReflectError(f"unknown graph format {fmt!r}; choose one of {', '.join(FORMATS)}")
    folder = Path(folder)
    if folder.is_symlink():
        raise FinReflectError(f"{folder} is a symbolic link; choose a folder of its own")
    if folder.exists() and not folder.is_dir():
        raise FinReflectError(f"{folder} is a file, not a folder; choose another --output")
    folder.mkdir(parents=True, exist_ok=True)
    names = FILES[fmt]
    record = read_record(folder, MARKER)
    ours = (record.files if record else None) or frozenset()
    plan_write(folder, names, ours).refuse_conflicts(
        folder, "move it away, or choose another --output"
    )
    nodes, edges = graph_tables(table)
    for name, write in zip(names, WRITERS[fmt](nodes, edges), strict=True):
        _write_atomic(folder / name, write)
    write_record(folder, MARKER, f"finreflect-eval {__version__} graph export", ours | set(names))
    return [folder / name for name in names]


# --- the graph as two Arrow tables ---


def graph_tables(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The nodes (`NODE_SCHEMA`, sorted by id) and the edges (a row per triple, in the
    table's order) of `table`."""
    rows = {
        name: table.column(name).to_pylist()
        for name in ("ticker", "company", "filing", *AS_WRITTEN)
    }
    filers: dict[tuple[str, str | None], dict[str, str]] = {}
    forms: dict[str, Counter[str]] = {}
    types: dict[str, set[str]] = {}
    filings: dict[str, set[str]] = {}
    degree: Counter[str] = Counter()
    ends: dict[str, list[str]] = {"subject": [], "object": []}
    for row in range(table.num_rows):
        filer = (rows["ticker"][row] or "", rows["company"][row])
        if filer not in filers:
            filers[filer] = filer_aliases(*filer)
        for side, found in ends.items():
            name = rows[side][row] or ""
            key = entity_key(name, filers[filer])
            found.append(key)
            forms.setdefault(key, Counter())[name] += 1
            types.setdefault(key, set()).update(filter(None, [rows[f"{side}_type"][row]]))
            filings.setdefault(key, set()).update(filter(None, [rows["filing"][row]]))
            degree[key] += 1
    ids = sorted(forms)
    ranked = [
        [form for form, _ in sorted(forms[key].items(), key=lambda seen: (-seen[1], seen[0]))]
        for key in ids
    ]
    nodes = pa.table(
        [
            ids,
            [surface[0] for surface in ranked],
            ranked,
            [sorted(types[key]) for key in ids],
            [sorted(filings[key]) for key in ids],
            [degree[key] for key in ids],
        ],
        schema=NODE_SCHEMA,
    )
    return nodes, _edges(table, ends["subject"], ends["object"])


def _edges(table: pa.Table, sources: list[str], targets: list[str]) -> pa.Table:
    """The edge table: its ends, the provenance and the triple as written, the verdicts."""
    columns = {
        "source": pa.array(sources, pa.string()),
        "target": pa.array(targets, pa.string()),
        **{name: table.column(name) for name in (*PROVENANCE, *AS_WRITTEN)},
    }
    for column in table.column_names:
        if not column.startswith(VERDICT):
            continue
        name = column.removeprefix(VERDICT)
        if name in columns or not _NAME.match(name):
            raise FinReflectError(f"the verdict column {column!r} cannot be an edge attribute")
        columns[name] = table.column(column)
    return pa.table(columns)


# --- the formats: each gives a writer per file of FILES[fmt] ---

Writer = Callable[[IO[bytes]], None]


def _jsonl(nodes: pa.Table, edges: pa.Table) -> list[Writer]:
    def lines(table: pa.Table) -> Writer:
        def write(file: IO[bytes]) -> None:
            for batch in table.to_batches(max_chunksize=10_000):
                text = "".join(
                    json.dumps(row, ensure_ascii=False) + "\n" for row in batch.to_pylist()
                )
                file.write(text.encode("utf-8"))

        return write

    return [lines(nodes), lines(edges)]


def _parquet(nodes: pa.Table, edges: pa.Table) -> list[Writer]:
    return [lambda file: pq.write_table(nodes, file), lambda file: pq.write_table(edges, file)]


def _graphml(nodes: pa.Table, edges: pa.Table) -> list[Writer]:
    import networkx as nx  # only this format needs it

    graph = nx.MultiDiGraph()
    for node in nodes.to_pylist():
        attributes = {
            "name": _xml(node["name"]),
            **{name: _xml(json.dumps(node[name], ensure_ascii=False)) for name in LISTS},
            "degree": node["degree"],
        }
        graph.add_node(_xml(node["id"]), **attributes)
    for key, edge in enumerate(edges.to_pylist()):
        attributes = {
            name: _graphml_value(value)
            for name, value in edge.items()
            if name not in ("source", "target") and value is not None
        }
        graph.add_edge(_xml(edge["source"]), _xml(edge["target"]), key=key, **attributes)
    return [lambda file: nx.write_graphml(graph, file)]


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    """`text` as XML 1.0 can hold it and a reader gives it back (the module's docstring)."""
    return _NOT_XML.sub("\ufffd", text.replace("\r\n", "\n").replace("\r", "\n"))


def _graphml_value(value: Any) -> Any:
    """A GraphML-typed attribute value: a bool, number or string as it is (a string made
    XML's), anything else as JSON text."""
    if isinstance(value, (bool, int, float)):
        return value
    return _xml(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def _neo4j_csv(nodes: pa.Table, edges: pa.Table) -> list[Writer]:
    node_header = ["id:ID", "name", *(f"{name}:string[]" for name in LISTS), "degree:long"]
    node_header.append(":LABEL")
    properties = [name for name in edges.column_names if name not in ("source", "target")]
    relationship_header = [":START_ID", ":END_ID", ":TYPE"]
    relationship_header += [_neo4j_name(name, edges.schema.field(name).type) for name in properties]

    def node_rows() -> Iterator[list[Any]]:
        for node in nodes.to_pylist():
            arrays = [_neo4j_array(node[name]) for name in LISTS]
            yield [node["id"], node["name"], *arrays, node["degree"], arrays[1]]

    def relationship_rows() -> Iterator[list[Any]]:
        for edge in edges.to_pylist():
            kind = edge["relation"] or EMPTY_TYPE
            yield [edge["source"], edge["target"], kind, *(edge[name] for name in properties)]

    return [_csv(node_header, node_rows), _csv(relationship_header, relationship_rows)]


def _neo4j_name(name: str, kind: pa.DataType) -> str:
    """`name:type` in a neo4j-admin header (a string needs no type)."""
    if pa.types.is_boolean(kind):
        return f"{name}:boolean"
    if pa.types.is_integer(kind):
        return f"{name}:long"
    if pa.types.is_floating(kind):
        return f"{name}:double"
    return name


def _neo4j_array(values: list[str]) -> str | None:
    """A `string[]` field: the elements joined by `;` (one in an element becomes `,`), None
    for no element."""
    if not values:
        return None
    return ARRAY_DELIMITER.join(value.replace(ARRAY_DELIMITER, ",") for value in values)


def _csv(header: list[str], rows: Callable[[], Iterator[list[Any]]]) -> Writer:
    def write(file: IO[bytes]) -> None:
        file.write((",".join(header) + "\n").encode("utf-8"))  # names of ours: no quotes
        for row in rows():
            file.write((",".join(_csv_field(value) for value in row) + "\n").encode("utf-8"))

    return write


def _csv_field(value: Any) -> str:
    """A CSV field: None empty and unquoted (neo4j-admin sets no property), every other value
    in double quotes with a quote doubled (bools as `true`/`false`, others as JSON would)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False)
    return '"' + text.replace('"', '""') + '"'


WRITERS: dict[str, Callable[[pa.Table, pa.Table], list[Writer]]] = {
    "graphml": _graphml,
    "jsonl": _jsonl,
    "parquet": _parquet,
    "neo4j-csv": _neo4j_csv,
}


def _write_atomic(path: Path, write: Writer) -> None:
    """`write` into a new file beside `path` (0666 less the umask, as `open` makes it), then
    renamed over it: a killed export leaves the old file whole."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "xb") as file:
            write(file)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
