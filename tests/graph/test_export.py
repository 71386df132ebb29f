"""`graph.export`: each format read back with the library its users load it with gives exactly
the graph of a hand-made table (two filings, an entity under three surface forms, a name a
model could write to break a file, the panel's verdicts); and the output folder's rules."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import datasets
import networkx as nx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.graph import export
from finreflect_eval.graph.export import FILES, FORMATS, MARKER, graph_tables, write_graph
from finreflect_eval.graph.normalise import entity_key
from finreflect_eval.graph.table import triple_table

# Quotes, a comma, markup, CR LF, a tab, a lone CR, the array delimiter, a control character XML
# cannot hold, a Unicode line separator.
HOSTILE = 'Evil "Co", <b>&amp; Ltd\r\n\tline\rtwo;x\x01\u2028end'
TYPE = 'ORG;"X"'  # the array delimiter in a type
HOSTILE_KEY = "evil co b &amp ltd line two x end"
Z, R, A, M = "zero_shot", "reflection", "AAPL_2023", "MSFT_2023"  # the modes, the filings
FILERS = {A: ("AAPL", "Apple Inc."), M: ("MSFT", "Microsoft Corp")}
# task, span, filing, index, the triple, (faithfulness, comprehensiveness)
ROWS = [
    (Z, "s1", A, 0, ("Apple Inc.", "ORG", "Produces", "iPhone", "PRODUCT"), ("yes", "good")),
    (Z, "s1", A, 1, ("AAPL", "COMP", "Increases", "Revenue", "FIN_METRIC"), ("no", "good")),
    (Z, "s2", M, 0, (HOSTILE, TYPE, "Competes_With", "Microsoft Corp", "COMP"), (None, None)),
    (Z, "s2", M, 1, ("Microsoft", "COMP", "Increases", "revenue ", "FIN_METRIC"), ("yes", None)),
    (R, "s1", A, 0, ("Apple Inc.", "ORG", "Produces", "iPhone", "PRODUCT"), ("yes", "partial")),
    (R, "s2", M, 0, ("Microsoft", "COMP", "Competes_With", HOSTILE, "ORG"), ("no", "partial")),
    (R, "s3", A, 0, ("Apple Inc.", "ORG", "Acquires", "Apple", "ORG"), (None, "good")),
]  # fmt: skip
KEYS = {"Apple Inc.": "aapl", "AAPL": "aapl", "Apple": "aapl", "iPhone": "iphone"}
KEYS |= {"Revenue": "revenue", "revenue ": "revenue", HOSTILE: HOSTILE_KEY}
KEYS |= {"Microsoft": "msft", "Microsoft Corp": "msft"}

NODES = [
    {
        "id": "aapl",
        "name": "Apple Inc.",  # three times, before "AAPL" and "Apple" (once each, by text)
        "surface_forms": ["Apple Inc.", "AAPL", "Apple"],
        "types": ["COMP", "ORG"],
        "filings": ["AAPL_2023"],
        "degree": 5,  # the loop of the last row counts twice
    },
    {
        "id": HOSTILE_KEY,
        "name": HOSTILE,
        "surface_forms": [HOSTILE],
        "types": ["ORG", TYPE],
        "filings": ["MSFT_2023"],
        "degree": 2,
    },
    {
        "id": "iphone",
        "name": "iPhone",
        "surface_forms": ["iPhone"],
        "types": ["PRODUCT"],
        "filings": ["AAPL_2023"],
        "degree": 2,
    },
    {
        "id": "msft",
        "name": "Microsoft",
        "surface_forms": ["Microsoft", "Microsoft Corp"],
        "types": ["COMP"],
        "filings": ["MSFT_2023"],
        "degree": 3,
    },
    {
        "id": "revenue",
        "name": "Revenue",  # a tie: the smaller text
        "surface_forms": ["Revenue", "revenue "],
        "types": ["FIN_METRIC"],
        "filings": ["AAPL_2023", "MSFT_2023"],
        "degree": 2,
    },
]
EDGES = [
    {
        "source": KEYS[triple[0]],
        "target": KEYS[triple[3]],
        "relation": triple[2],
        "task": task,
        "span_id": span,
        "filing": filing,
        "triple_index": index,
        "subject": triple[0],
        "subject_type": triple[1],
        "object": triple[3],
        "object_type": triple[4],
        "faithfulness": faithfulness,
        "comprehensiveness": comprehensiveness,
    }
    for task, span, filing, index, triple, (faithfulness, comprehensiveness) in ROWS
]


def table(rows: list[tuple] = ROWS) -> pa.Table:
    triples = triple_table(
        {
            "task": task,
            "span_id": span,
            "filing": filing,
            "ticker": FILERS[filing][0],
            "company": FILERS[filing][1],
            "triple_index": index,
            **dict(
                zip(
                    ("subject", "subject_type", "relation", "object", "object_type"),
                    triple,
                    strict=True,
                )
            ),
        }
        for task, span, filing, index, triple, *_ in rows
    )
    verdicts = {
        "verdict:faithfulness": pa.array([row[5][0] for row in rows], pa.string()),
        "verdict:comprehensiveness": pa.array([row[5][1] for row in rows], pa.string()),
        "judge_notes": pa.array(["not a verdict"] * len(rows), pa.string()),  # left out
    }
    for name, values in verdicts.items():
        triples = triples.append_column(name, values)
    return triples


def test_the_keys_are_normalise_s():
    """The hand-written ids are what normalisation gives (the merge this file relies on)."""
    assert entity_key(HOSTILE) == HOSTILE_KEY
    assert {entity_key(name) for name in ("Revenue", "revenue ")} == {"revenue"}


def test_graph_tables_are_the_graph():
    nodes, edges = graph_tables(table())
    assert nodes.to_pylist() == NODES
    assert edges.to_pylist() == EDGES
    assert edges.schema.field("triple_index").type == pa.int32()


def test_jsonl_read_back_with_json(tmp_path):
    written = write_graph(table(), tmp_path, "jsonl")
    assert written == [tmp_path / "nodes.jsonl", tmp_path / "edges.jsonl"]

    def read(name: str) -> list[dict]:
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert text.endswith("\n")
        return [json.loads(line) for line in text.split("\n")[:-1]]  # an object a line

    assert read("nodes.jsonl") == NODES
    assert read("edges.jsonl") == EDGES


def test_parquet_read_back_with_pyarrow_and_datasets(tmp_path, monkeypatch):
    write_graph(table(), tmp_path, "parquet")
    nodes = pq.read_table(tmp_path / "nodes.parquet")
    edges = pq.read_table(tmp_path / "edges.parquet")
    assert nodes.to_pylist() == NODES
    assert edges.to_pylist() == EDGES
    for name in ("surface_forms", "types", "filings"):
        assert nodes.schema.field(name).type == pa.list_(pa.string())

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    for name, expected in (("nodes", NODES), ("edges", EDGES)):
        loaded = datasets.load_dataset(
            "parquet",
            data_files=str(tmp_path / f"{name}.parquet"),
            split="train",
            cache_dir=str(tmp_path / "hf-cache"),
        )
        assert loaded.to_list() == expected


def xml(text: str) -> str:
    """What GraphML keeps of a string (the module's docstring)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("\x01", "\ufffd")


def test_graphml_read_back_with_networkx(tmp_path):
    write_graph(table(), tmp_path, "graphml")
    graph = nx.read_graphml(tmp_path / "graph.graphml")
    assert isinstance(graph, nx.MultiDiGraph)

    assert list(graph.nodes) == [xml(node["id"]) for node in NODES]
    for node in NODES:
        data = graph.nodes[xml(node["id"])]
        assert data["name"] == xml(node["name"])
        assert data["degree"] == node["degree"] == graph.degree(xml(node["id"]))
        for name in ("surface_forms", "types", "filings"):  # JSON arrays: exact, \r and \x01 too
            assert json.loads(data[name]) == node[name]
        assert set(data) == {"name", "surface_forms", "types", "filings", "degree"}

    edges = sorted(graph.edges(keys=True, data=True), key=lambda edge: edge[2])
    assert [key for _, _, key, _ in edges] == list(range(len(EDGES)))  # one per triple
    for (source, target, _, data), edge in zip(edges, EDGES, strict=True):
        assert (source, target) == (xml(edge["source"]), xml(edge["target"]))
        expected = {
            name: xml(value) if isinstance(value, str) else value
            for name, value in edge.items()
            if name not in ("source", "target") and value is not None  # a null: left out
        }
        assert data == expected
    assert graph.number_of_edges("aapl", "iphone") == 2  # the multi-edge of two modes


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, encoding="utf-8", newline="") as file:
        header, *rows = list(csv.reader(file))
    for row in rows:
        assert len(row) == len(header)
    return header, rows


def test_neo4j_csv_follows_the_import_header_rules(tmp_path):
    write_graph(table(), tmp_path, "neo4j-csv")
    header, nodes = read_csv(tmp_path / "nodes.csv")
    assert header == [
        "id:ID",
        "name",
        "surface_forms:string[]",
        "types:string[]",
        "filings:string[]",
        "degree:long",
        ":LABEL",
    ]
    assert sum(name.endswith(":ID") for name in header) == 1
    ids = [row[0] for row in nodes]
    assert len(set(ids)) == len(ids)

    def array(node: dict, name: str) -> list[str]:  # no escape for ";": it becomes ","
        return [value.replace(";", ",") for value in node[name]]

    for row, node in zip(nodes, NODES, strict=True):
        values = dict(zip(header, row, strict=True))
        assert values["id:ID"] == node["id"]
        assert values["name"] == node["name"]  # quotes, commas, CR LF and \x01 as written
        for name in ("surface_forms", "types", "filings"):
            assert values[f"{name}:string[]"].split(";") == array(node, name)
        assert int(values["degree:long"]) == node["degree"]
        assert values[":LABEL"].split(";") == array(node, "types")

    header, relationships = read_csv(tmp_path / "relationships.csv")
    assert header[:3] == [":START_ID", ":END_ID", ":TYPE"]
    properties = ["relation", "task", "span_id", "filing", "triple_index:long"]
    properties += ["subject", "subject_type", "object", "object_type"]
    assert header[3:] == [*properties, "faithfulness", "comprehensiveness"]
    for row, edge in zip(relationships, EDGES, strict=True):
        values = dict(zip(header, row, strict=True))
        assert values[":START_ID"] in ids and values[":END_ID"] in ids
        assert [values[":START_ID"], values[":END_ID"]] == [edge["source"], edge["target"]]
        assert values[":TYPE"] == values["relation"] == edge["relation"]
        assert int(values["triple_index:long"]) == edge["triple_index"]
        for name in ("task", "span_id", "filing", "subject", "subject_type", "object"):
            assert values[name] == edge[name]
        for name in ("faithfulness", "comprehensiveness"):
            assert values[name] == (edge[name] or "")
    assert len(relationships) == len(EDGES)

    # A null is an empty field without quotes (no property), every value is quoted.
    lines = (tmp_path / "relationships.csv").read_text(encoding="utf-8").split("\n")
    assert sum(line.endswith('",,') for line in lines) == 1  # the hostile row: two nulls
    assert sum(line.endswith('"yes",') for line in lines) == 1  # faithful, not rated
    assert sum(line.endswith('"ORG",,"good"') for line in lines) == 1  # rated, not judged


def test_an_empty_table_gives_empty_files(tmp_path):
    for fmt in FORMATS:
        write_graph(table([]), tmp_path / fmt, fmt)
    assert pq.read_table(tmp_path / "parquet" / "nodes.parquet").num_rows == 0
    assert (tmp_path / "jsonl" / "edges.jsonl").read_text() == ""
    assert nx.read_graphml(tmp_path / "graphml" / "graph.graphml").number_of_nodes() == 0
    assert len(read_csv(tmp_path / "neo4j-csv" / "relationships.csv")[1]) == 0


# --- the output folder ---


def marker(folder: Path) -> list[str]:
    return json.loads((folder / MARKER).read_text())["files"]


def test_a_users_file_is_refused_and_left_as_it_is(tmp_path):
    (tmp_path / "edges.jsonl").write_text("mine\n")
    with pytest.raises(FinReflectError) as error:
        write_graph(table(), tmp_path, "jsonl")
    message = str(error.value)
    assert "\n" not in message and "edges.jsonl" in message and "did not write" in message
    assert (tmp_path / "edges.jsonl").read_text() == "mine\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["edges.jsonl"]  # nothing else

    write_graph(table(), tmp_path, "parquet")  # another format's files do not need it
    assert (tmp_path / "edges.jsonl").read_text() == "mine\n"


def test_writing_again_replaces_only_its_own_files(tmp_path):
    (tmp_path / "notes.txt").write_text("the user's\n")
    write_graph(table(), tmp_path, "neo4j-csv")
    write_graph(table(ROWS[:1]), tmp_path, "neo4j-csv")
    assert len(read_csv(tmp_path / "relationships.csv")[1]) == 1
    assert len(read_csv(tmp_path / "nodes.csv")[1]) == 2
    assert (tmp_path / "notes.txt").read_text() == "the user's\n"
    assert marker(tmp_path) == ["nodes.csv", "relationships.csv"]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [MARKER, "nodes.csv", "notes.txt", "relationships.csv"]
    )  # no temporary file left


def test_two_formats_share_a_folder(tmp_path):
    write_graph(table(), tmp_path, "jsonl")
    before = (tmp_path / "edges.jsonl").read_bytes()
    write_graph(table(), tmp_path, "graphml")
    write_graph(table(ROWS[:2]), tmp_path, "graphml")  # again: the JSONL stays
    assert marker(tmp_path) == sorted([*FILES["jsonl"], *FILES["graphml"]])
    assert (tmp_path / "edges.jsonl").read_bytes() == before
    assert nx.read_graphml(tmp_path / "graph.graphml").number_of_edges() == 2


def test_bad_arguments_are_one_line(tmp_path):
    with pytest.raises(FinReflectError, match="unknown graph format 'csv'; choose one of graphml"):
        write_graph(table(), tmp_path, "csv")
    (tmp_path / "file").write_text("")
    with pytest.raises(FinReflectError, match="is a file, not a folder"):
        write_graph(table(), tmp_path / "file", "jsonl")
    clash = table().append_column("verdict:source", pa.array(["yes"] * len(ROWS)))
    with pytest.raises(FinReflectError, match="'verdict:source' cannot be an edge attribute"):
        write_graph(clash, tmp_path / "out", "jsonl")


def test_a_write_that_fails_leaves_the_old_file_whole(tmp_path, monkeypatch):
    write_graph(table(), tmp_path, "parquet")
    before = (tmp_path / "nodes.parquet").read_bytes()

    def broken(_table, file):
        file.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(export.pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        write_graph(table(ROWS[:1]), tmp_path, "parquet")
    assert (tmp_path / "nodes.parquet").read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [MARKER, *FILES["parquet"]]
    )  # no temporary file left
