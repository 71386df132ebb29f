"""`finreflect-eval graph export`, as a user runs it on a judged run: each format's files, each
edge with the panel's verdicts, and a file of the user's never overwritten."""

from __future__ import annotations

import json

import networkx as nx
import pyarrow.parquet as pq
import pytest
from support.runs import panel_file, scripted_run

from finreflect_eval.records import SampleRecord, read_lines


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("graph-cli")
    panel = panel_file(folder, "accepts_all", "rejects_all", "gold_labels")
    return scripted_run(folder, "cand", 4, panel).parent


def triples(run) -> int:
    return sum(len(r.triples) for r in read_lines(SampleRecord, next(run.glob("samples_*.jsonl"))))


def test_each_format_holds_every_triple_with_its_verdicts(cli, run, tmp_path):
    for fmt in ("graphml", "jsonl", "parquet", "neo4j-csv"):
        result = cli("graph", "export", str(run), "--format", fmt, "--output", str(tmp_path))
        assert result.returncode == 0, result.stderr
    edges = [json.loads(line) for line in (tmp_path / "edges.jsonl").read_text().splitlines()]
    assert len(edges) == triples(run) > 0
    assert {"faithfulness", "precision", "relevance", "span_id", "filing", "task"} <= set(edges[0])
    assert {edge["faithfulness"] for edge in edges} <= {"yes", "no", None}
    graph = nx.read_graphml(tmp_path / "graph.graphml")
    assert graph.number_of_edges() == len(edges)
    assert pq.read_table(tmp_path / "edges.parquet").num_rows == len(edges)
    header = (tmp_path / "relationships.csv").read_text().splitlines()[0]
    assert header.startswith(":START_ID,:END_ID,:TYPE,")


def test_a_users_file_is_never_overwritten(cli, run, tmp_path):
    (tmp_path / "edges.jsonl").write_text("mine\n")
    result = cli("graph", "export", str(run), "--format", "jsonl", "--output", str(tmp_path))
    assert result.returncode == 1
    assert "edges.jsonl, which finreflect-eval did not write" in result.stderr
    assert (tmp_path / "edges.jsonl").read_text() == "mine\n"
    assert not (tmp_path / "nodes.jsonl").exists()
