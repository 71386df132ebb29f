"""Samples carry lm-eval 0.4.13's logged-sample fields beside ours: every key its evaluator
writes, the three hashes computed as it computes them, `task_hashes` in the results as its
evaluation tracker computes them from the samples, and per-sample metric values that the
results' numbers follow from."""

import ast
import inspect
import json
from pathlib import Path

import pytest
from conftest import require
from support.runs import panel_file

from finreflect_eval.models import ModelSpec
from finreflect_eval.pipeline.evaluator import evaluate
from finreflect_eval.pipeline.judging import load_panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.records import Vote
from finreflect_eval.records.samples import item_scores
from finreflect_eval.scoring.failures import FailurePolicy

lm_eval_utils = require("lm_eval.utils", "[dev] extra")
TASKS = ("finreflect_single_pass", "finreflect_reflection")
PANEL = "scripted-test"


def logged_sample_keys() -> list[str]:
    """The keys of the sample dict lm-eval's evaluator logs (`example = {...}` in
    `lm_eval.evaluator`), read from its source."""
    import lm_eval.evaluator

    tree = ast.parse(inspect.getsource(lm_eval.evaluator))
    (literal,) = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and [getattr(target, "id", None) for target in node.targets] == ["example"]
        and isinstance(node.value, ast.Dict)
    ]
    return [key.value for key in literal.keys]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[dict, dict[str, list[dict]]]:
    """A judged run of two modes (one request per span, and several) on six spans: a candidate
    answering with each span's reference triples (9 or 10: micro and macro averages differ) and
    a panel that splits now and then. Returns the results and each task's sample lines."""
    folder = tmp_path_factory.mktemp("lm_eval_samples")
    candidate = {"responses": "support.scripted_judges:reference_triples"}
    config = RunConfig(
        model=ModelSpec("candidate", "scripted", candidate),
        tasks=list(TASKS),
        dataset="sample",
        limit=6,
        output_path=folder / "out",
        cache=None,
    )
    panel = load_panel(panel_file(folder, "accepts_all", "broken_now_and_then", "rejects_all"))
    run, results = evaluate(config, panel, FailurePolicy(max_judge_failure_share=0.5))
    samples = {
        task: [json.loads(line) for line in run.store.samples_path(run.manifest, task).open()]
        for task in TASKS
    }
    path = run.store.results_path(results.run, results.judges.panel)
    return json.loads(path.read_text()), samples


def test_the_logged_sample_keys_are_lm_eval_0_4_13s():
    assert logged_sample_keys() == [
        *("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter"),
        *("metrics", "doc_hash", "prompt_hash", "target_hash"),
    ]


def test_every_sample_has_every_key_lm_eval_logs_in_its_shape(run):
    _, samples = run
    for task, lines in samples.items():
        assert len(lines) == 6, task
        for sample in lines:
            assert set(logged_sample_keys()) <= set(sample), sorted(sample)
            assert sample["doc"]["span_id"] == sample["span_id"] and sample["doc"]["text"]
            assert "text" not in sample  # the span's text is written once, in `doc`
            assert isinstance(sample["target"], str) and sample["filter"] == "none"
            # One list of outputs per request (lm-eval's nested shape), one per step here.
            assert len(sample["resps"]) == len(sample["arguments"]) == len(sample["steps"])
            assert all(isinstance(out, str) for outs in sample["resps"] for out in outs)
            (answer,) = sample["filtered_resps"]
            assert json.loads(answer) == {"triples": sample["triples"]}
            assert json.loads(sample["target"]) == {"triples": sample["reference"]}
    assert all(len(sample["resps"]) == 2 for sample in samples[TASKS[1]])  # extract, critic


def test_the_hashes_are_those_lm_eval_computes(run):
    hash_string = lm_eval_utils.hash_string
    _, samples = run
    for lines in samples.values():
        for sample in lines:
            doc = json.dumps(
                sample["doc"],
                indent=2,
                default=lm_eval_utils.handle_non_serializable,
                ensure_ascii=False,
            )
            assert sample["doc_hash"] == hash_string(doc)
            # The first request's prompt, as lm-eval's chat API models pass it (JsonChatStr).
            messages = sample["arguments"]["gen_args_0"]["arg_0"]
            assert sample["prompt_hash"] == hash_string(json.dumps(messages, ensure_ascii=False))
            assert sample["target_hash"] == hash_string(str(sample["target"]))


def test_task_hashes_are_what_lm_evals_evaluation_tracker_computes(run, tmp_path):
    from lm_eval.loggers import EvaluationTracker

    results, samples = run
    tracker = EvaluationTracker(output_path=str(tmp_path / "lm_eval.json"))
    ordered = {task: sorted(lines, key=lambda s: s["doc_id"]) for task, lines in samples.items()}
    tracker.save_results_aggregated(results={}, samples=ordered)
    (written,) = tmp_path.glob("lm_eval_*.json")
    expected = json.loads(written.read_text())["task_hashes"]
    assert set(expected) == set(TASKS)
    assert results["task_hashes"] == expected


def test_per_sample_metrics_are_what_the_results_follow_from(run):
    results, samples = run
    compared, told_apart = 0, False
    for task, lines in samples.items():
        entry, details = results["results"][task], results["details"][task]
        metrics = [sample["metrics"] for sample in lines]
        assert set(metrics[0]["panels"]) == {PANEL}
        per_span = [m["triples_per_span"] for m in metrics]
        assert len(set(per_span)) > 1  # spans of different sizes: micro and macro differ
        assert entry["triples_per_span,none"] == pytest.approx(sum(per_span) / len(lines))
        rules = [value for m in metrics for value in m["check_rules"]]
        assert len(rules) == sum(per_span)
        assert entry["check_rules,none"] == pytest.approx(100 * sum(rules) / len(rules))
        for criterion, detail in details["criteria"].items():
            items = [m["panels"][PANEL][criterion] for m in metrics]
            scored = [[value for value in span if value is not None] for span in items]
            flat = [value for span in scored for value in span]
            means = [sum(span) / len(span) for span in scored if span]
            micro, macro = 100 * sum(flat) / len(flat), 100 * sum(means) / len(means)
            # micro: the mean over every scored item; macro: over spans of each span's mean
            expected = micro if detail["aggregation"] == "micro" else macro
            told_apart |= abs(micro - macro) > 0.1
            assert entry[f"{criterion},none"] == pytest.approx(expected, abs=1e-4), criterion
            assert detail["items"]["n_scored"] == sum(len(span) for span in scored)
            compared += 1
    assert compared == 2 * 4 and told_apart
    # The panel split somewhere: item values other than 1 occur, so the relation is tested.
    values = {
        value
        for lines in samples.values()
        for sample in lines
        for items in sample["metrics"]["panels"][PANEL].values()
        for value in items
    }
    assert values - {1.0}


def test_the_samples_load_with_datasets_as_a_table(run, tmp_path):
    """The Hub log makes each task's samples a config: their columns must have one type."""
    datasets = require("datasets", "[hf] extra")
    _, samples = run
    path = Path(tmp_path / "samples.jsonl")
    path.write_text("".join(json.dumps(line) + "\n" for line in samples[TASKS[1]]))
    table = datasets.load_dataset("json", data_files=str(path), split="train")
    assert table.num_rows == 6 and "target_hash" in table.column_names


def test_item_scores_take_the_panels_rule_item_by_item():
    """Majority, the most conservative label without one, unscored under two valid votes, and a
    judge with fewer votes absent from the items beyond them."""
    votes = {
        "a": [Vote(verdict=v) for v in (1, 1, None, 1)],
        "b": [Vote(verdict=v) for v in (1, None, None, 0)],
        "c": [Vote(verdict=v) for v in (0, 0, 1)],
    }
    assert item_scores(votes) == [1.0, 0.0, None, 0.0]
    levels = {"a": [Vote(verdict="good")], "b": [Vote(verdict="partial")], "c": []}
    assert item_scores(levels) == [0.5] and item_scores({}) == []
