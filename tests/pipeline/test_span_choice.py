"""Choosing spans for a run on one's own data: `--sections` (10-K items), lm-eval's `--samples`
(spans by index or id, per task) and `--limit` (lm-eval's meaning: the first N), each recorded
in the run's files."""

import json

from support.runs import candidate_file, panel_file

from finreflect_eval.api.evaluate import simple_evaluate
from finreflect_eval.data import load_benchmark, section_slug

TASK = "finreflect_smoke_single_pass"


def sample_spans() -> list:
    return load_benchmark("sample", split="test").spans


def extract(cli, tmp_path, *options: str, env=None):
    model_args = f"responses={candidate_file(tmp_path)}"
    return cli(
        *("extract", "--model", "candidate", "--backend", "scripted", "--model-args", model_args),
        *("--tasks", TASK, "--dataset", "sample", "--output-path", str(tmp_path / "out")),
        *options,
        env=env,
    )


def manifest_and_ids(tmp_path) -> tuple[dict, list[str]]:
    folder = tmp_path / "out" / "candidate"
    (manifest,) = folder.glob("manifest_*.json")
    (samples,) = folder.glob(f"samples_{TASK}_*.jsonl")
    ids = [json.loads(line)["span_id"] for line in samples.read_text().splitlines()]
    return json.loads(manifest.read_text()), ids


def test_sections_then_limit_take_the_first_spans_of_those_sections(cli, tmp_path):
    wanted = [s.span_id for s in sample_spans() if section_slug(s.section) in ("item1", "item7")]
    assert len(wanted) > 2
    result = extract(cli, tmp_path, "--sections", "item1,Item 7", "--limit", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    manifest, ids = manifest_and_ids(tmp_path)
    assert ids == wanted[:2]
    dataset = manifest["tasks"][TASK]["dataset"]
    assert dataset["sections"] == ["item1", "Item 7"] and dataset["limit"] == 2
    assert manifest["arguments"]["sections"] == ["item1", "Item 7"]


def test_samples_by_index_and_by_id_in_dataset_order(cli, tmp_path):
    spans = sample_spans()
    chosen = {TASK: [spans[5].span_id, 0]}
    result = extract(cli, tmp_path, "--samples", json.dumps(chosen))
    assert result.returncode == 0, result.stderr[-2000:]
    manifest, ids = manifest_and_ids(tmp_path)
    assert ids == [spans[0].span_id, spans[5].span_id]
    assert manifest["tasks"][TASK]["dataset"]["samples"] == ids
    assert manifest["arguments"]["samples"] == chosen
    assert manifest["tasks"][TASK]["span_list"]["count"] == 2


def test_samples_from_a_file_and_bad_choices_are_one_line(cli, tmp_path):
    spans = sample_spans()
    listed = tmp_path / "samples.json"
    listed.write_text(json.dumps({TASK: [3]}))
    assert extract(cli, tmp_path, "--samples", str(listed)).returncode == 0
    assert manifest_and_ids(tmp_path)[1] == [spans[3].span_id]
    cases = {
        ("--samples", json.dumps({TASK: [0]}), "--limit", "2"): "--limit and --samples",
        ("--samples", json.dumps({TASK: [999]})): "index 999, which is not one of its 24",
        ("--samples", json.dumps({"other_task": [0]})): "task 'other_task', which this run",
        ("--samples", json.dumps({TASK: [1, spans[1].span_id]})): "twice",
        ("--samples", "[1, 2]"): "must map each task to a list",
        ("--samples", str(tmp_path / "none.json")): "nor a readable file",
        ("--sections", "item99"): "no span of section 'item99' (--sections); its sections: ",
        ("--samples", json.dumps({TASK: []})): "--samples gives it no span",
        ("--dataset-revision", "abc123"): "--dataset-revision is for data on the Hub; task",
        ("--sections", "7"): "--sections takes 10-K items (item1, item7, ...) or front, not '7'",
    }
    for options, message in cases.items():
        result = extract(cli, tmp_path / "bad", *options)
        assert result.returncode != 0, options
        assert message in result.stderr.strip().splitlines()[-1], (options, result.stderr)
        assert "Traceback" not in result.stderr


def test_simple_evaluate_takes_lm_evals_samples_and_sections(tmp_path):
    spans = sample_spans()
    item7 = [s.span_id for s in spans if section_slug(s.section) == "item7"]
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    results = simple_evaluate(
        "candidate",
        f"responses={candidate_file(tmp_path)}",
        [TASK],
        samples={TASK: [1, 0]},
        sections=["item7"],
        backend="scripted",
        dataset="sample",
        judges=panel,
        output_path=tmp_path / "out",
    )
    assert [r["span_id"] for r in results["samples"][TASK]] == item7[:2]
    assert results["dataset"]["sections"] == ["item7"]
    assert results["dataset"]["samples"] == item7[:2]


def test_run_check_counts_the_spans_the_run_would_choose(cli, tmp_path, env):
    item7 = [s for s in sample_spans() if section_slug(s.section) == "item7"]
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    result = cli(
        *("run", "--model", "candidate", "--backend", "scripted", "--tasks", TASK),
        *("--model-args", f"responses={candidate_file(tmp_path)}", "--judges", str(panel)),
        *("--dataset", "sample", "--sections", "item7", "--check"),
        *("--output-path", str(tmp_path / "out")),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    row = next(line for line in result.stdout.splitlines() if line.startswith(f"| {TASK} "))
    assert row.split("|")[5].strip() == str(len(item7))
    assert not (tmp_path / "out").exists()


def test_submit_refuses_a_run_on_chosen_spans_saying_why(cli, tmp_path, env):
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    result = cli(
        *("run", "--model", "candidate", "--backend", "scripted", "--tasks", TASK),
        *("--model-args", f"responses={candidate_file(tmp_path)}", "--judges", str(panel)),
        *("--dataset", "sample", "--sections", "item7", "--samples", json.dumps({TASK: [0]})),
        *("--output-path", str(tmp_path / "out")),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    board = tmp_path / "board"
    refused = cli("submit", str(tmp_path / "out" / "candidate"), "--leaderboard", str(board))
    assert refused.returncode == 1
    assert "sections item7 (--sections) is not a complete run" in refused.stderr
    assert f"chosen spans (1 of {TASK}; --samples) is not a complete run" in refused.stderr
