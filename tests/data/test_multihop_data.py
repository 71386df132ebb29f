"""Multi-hop QA rows (FinReflectKG-MultiHop's layout) as a benchmark: the hop chunks as spans,
the hops as reference triples, the questions; broken rows refused in one line; distractors as
spans; and the same data from the (loopback) Hub, its commit recorded by a run."""

import copy
import io
import json
import re

import pandas as pd
import pytest
import yaml
from support.hub_server import hub_server
from support.multihop import qa_file, questions, task_folder
from support.runs import TESTS

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import multihop_to_benchmark
from finreflect_eval.records import Results

DATASET = "domyn/FinMultiHopQA"


def test_the_sample_questions_load_as_spans_hops_and_questions():
    benchmark = multihop_to_benchmark(questions(), dataset="qa", split="test")
    hops = [hop for q in questions() for hop in q["hops"]]
    chunks = {(h["source_file"], h["page_id"], h["chunk_id"]) for h in hops}
    assert len(benchmark.spans) == len(chunks) == 13  # two questions share AMT's page 130 chunk
    assert len(benchmark.reference_triples) == len(hops) == 16
    assert {t.source for t in benchmark.reference_triples} == {"FinReflectKG-MultiHop"}
    kinds = [q.kind for q in benchmark.questions]
    assert (kinds.count("quantitative"), kinds.count("qualitative")) == (4, 3)
    duk = next(q for q in benchmark.questions if q.hops[0].ticker == "DUK")
    assert (duk.start, duk.end, len(duk.hops)) == ("DUK", "NEE", 3)
    assert [h.span_id for h in duk.hops][-1] == "SO_2023_page_240_chunk_3"
    # the same rows give the same questions and fingerprint; another answer another fingerprint
    again = multihop_to_benchmark(questions(), dataset="qa", split="test")
    assert again.fingerprint == benchmark.fingerprint
    changed = copy.deepcopy(questions())
    changed[0]["answer"] += " Restated."
    assert multihop_to_benchmark(changed, dataset="qa", split="test").fingerprint != (
        benchmark.fingerprint
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda row: row.pop("hops"), "row 0: field 'hops' is not a list of hops"),
        (lambda row: row["hops"][1].pop("chunk_text"), "row 0 hops[1]: missing required field"),
        (lambda row: row["hops"][0].pop("tail"), "row 0 hops[0]: missing required field 'tail'"),
        (lambda row: row.update(answer=" "), "row 0: missing required field 'answer'"),
    ],
)
def test_a_broken_row_is_one_line_naming_it(change, message):
    rows = copy.deepcopy(questions())
    change(rows[0])
    with pytest.raises(FinReflectError, match=re.escape(message)):
        multihop_to_benchmark(rows, dataset="qa", split="test")


def test_one_chunk_with_two_texts_is_refused():
    rows = copy.deepcopy(questions())
    rows[1]["hops"][0]["chunk_text"] += " (edited)"  # rows 0 and 1 share this chunk
    with pytest.raises(FinReflectError, match="row 1 hops\\[0\\]: field 'chunk_text' differs"):
        multihop_to_benchmark(rows, dataset="qa", split="test")


def test_distractors_are_spans_without_reference_triples():
    rows = copy.deepcopy(questions())
    rows[0]["distractors"] = [
        {
            "source_file": "AMT_10k_2024.pdf",
            "page_id": "page_12",
            "chunk_id": "chunk_1",
            "chunk_text": "Our towers lease space to wireless carriers.",
        }
    ]
    benchmark = multihop_to_benchmark(rows, dataset="qa", split="test")
    assert len(benchmark.spans) == 14
    assert "AMT_2024_page_12_chunk_1" in {s.span_id for s in benchmark.spans}
    assert not benchmark.triples_by_span()["AMT_2024_page_12_chunk_1"]


def test_a_run_reads_the_questions_from_the_hub_and_records_the_commit(cli, tmp_path):
    """The downstream task on `domyn/FinMultiHopQA` as the loopback Hub serves it (parquet of
    the sample rows): the run records the commit, and its downstream block is there."""
    frame = pd.DataFrame(questions())
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    readme = (
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n"
        "    path: data/test-*\n---\n\nMulti-hop questions, for a test.\n"
    )
    files = {"README.md": readme.encode(), "data/test-00000-of-00001.parquet": buffer.getvalue()}
    tasks = task_folder(tmp_path / "tasks", qa=qa_file(tmp_path / "qa"))
    config = yaml.safe_load((tasks / "mh_test.yaml").read_text()) | {"dataset_path": DATASET}
    (tasks / "mh_test.yaml").write_text(yaml.safe_dump(config))
    with hub_server() as hub:
        commit = hub.add_commit(DATASET, files)
        environment = {
            "PYTHONPATH": str(TESTS),
            "HF_ENDPOINT": hub.url,
            "HF_HUB_OFFLINE": "0",
            "HF_DATASETS_OFFLINE": "0",
            "HF_HOME": str(tmp_path / "hf-home"),
        }
        result = cli(
            *("run", "--model", "candidate", "--backend", "scripted"),
            *("--model-args", "responses=support.multihop:extracts_share_100"),
            *("--tasks", "mh_test", "--include-path", str(tasks)),
            *("--judges", str(panel(tmp_path)), "--output-path", str(tmp_path / "out")),
            env=environment,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    [path] = (tmp_path / "out" / "candidate").glob("results_*.json")
    results = Results.model_validate_json(path.read_text())
    assert (results.dataset.id, results.dataset.revision) == (DATASET, commit)
    block = results.downstream["mh_test"]
    assert block.questions == 7
    # Every gold hop extracted, but two relations are outside the schema (SPG's Capitalizes,
    # NEE's Guarantees): no extraction holds them, so they count as missing on the strict
    # measure, not on the one blind to relations.
    assert block.evidence_recall.value == pytest.approx(100 * (5 + 1 / 2 + 2 / 3) / 7, abs=1e-3)
    assert block.evidence_recall_entities.value == 100.0


def panel(folder):
    judges = [
        {
            "name": f"judge-{i}",
            "model": f"scripted-{i}",
            "backend": "scripted",
            "model_args": {"responses": "support.multihop:judge"},
        }
        for i in range(3)
    ]
    path = folder / "panel.json"
    path.write_text(json.dumps({"panel": "scripted-test", "judges": judges}))
    return path
