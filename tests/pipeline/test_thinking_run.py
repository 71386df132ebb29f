"""A run whose candidate thinks (a tiny Qwen3 with Qwen3's thinking switch, on the hf backend):
the samples keep each thought beside its answer, the triples come from the answer alone, the
cost counts the thinking tokens apart, the results and the summary say how the model thought,
and the report's span page carries the thought (escaped as text). A thought that never ends is
an invalid extraction with its own reason, counted against the failure budget."""

import json
from pathlib import Path

import pytest
import yaml
from conftest import require
from support.tiny_model import THOUGHT

from finreflect_eval.cli import main
from finreflect_eval.records import SampleRecord
from finreflect_eval.view.spans import span_part

require("outlines", "[hf] extra")
pytestmark = pytest.mark.slow

TASK = "finreflect_smoke_single_pass"


@pytest.fixture(scope="module")
def thinker_dir(tmp_path_factory):
    from support.tiny_model import build_tiny_qwen3_thinker

    return build_tiny_qwen3_thinker(tmp_path_factory.mktemp("tiny-qwen3-thinker"))


def panel(folder: Path) -> str:
    judge = {"model": "recorder", "backend": "scripted"}
    judge["model_args"] = {"responses": "support.recording:judge"}
    judges = [{"name": f"judge-{i}", **judge} for i in range(3)]
    path = folder / "panel.yaml"
    path.write_text(yaml.safe_dump({"panel": "scripted", "judges": judges}))
    return str(path)


def run(thinker_dir, out: Path, max_gen_toks: int, *more: str) -> int:
    return main(
        [
            *("run", "--model", str(thinker_dir), "--backend", "hf", "--device", "cpu"),
            *("--model-args", "think=on,max_retries=0", "--tasks", TASK),
            *(
                "--dataset",
                "sample",
                "--limit",
                "2",
                "--gen_kwargs",
                f"max_gen_toks={max_gen_toks}",
            ),
            *("--judges", panel(out.parent), "--no-cache", "--output-path", str(out), *more),
        ]
    )


def records(out: Path) -> list[SampleRecord]:
    (path,) = out.rglob(f"samples_{TASK}_*.jsonl")
    return [SampleRecord.model_validate_json(line) for line in path.read_text().splitlines()]


def test_a_thinking_candidate_is_recorded_and_costed(thinker_dir, tmp_path, capsys):
    assert run(thinker_dir, tmp_path / "out", 400) == 0
    printed = capsys.readouterr().out
    settings = next(line for line in printed.splitlines() if "gen_kwargs:" in line)
    assert settings.endswith("batch_size: None (8), think: on")  # and how it thought
    spans = records(tmp_path / "out")
    for record in spans:
        [step] = record.steps
        assert step.thinking == " ".join(THOUGHT) and "<think>" not in step.text
        assert step.reasoning_tokens == len(THOUGHT) + 2 < step.completion_tokens
        assert json.loads(step.text)["triples"] == [t.model_dump() for t in record.triples]
        part = json.loads(span_part(record, "scripted", ["judge-0"], ["faithfulness"]).json)
        assert part["k"] == [["extract", " ".join(THOUGHT)]]  # the page's thought
    (results_path,) = (tmp_path / "out").rglob("results_*.json")
    results = json.loads(results_path.read_text())
    assert results["config"]["think"] == "on" and results["config"]["think_default"] is False
    extraction = results["cost"][TASK]["extraction"]
    assert extraction["reasoning_tokens"] == sum(r.steps[0].reasoning_tokens for r in spans)
    assert extraction["reasoning_tokens"] < extraction["completion_tokens"]


def test_a_thought_that_never_ends_is_an_invalid_extraction(thinker_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(thinker_dir, out, 20) != 0  # every extraction invalid: over the failure budget
    assert "thinking did not end within 20 tokens" in capsys.readouterr().err
    assert run(thinker_dir, out, 20, "--max-invalid-share", "1") == 0
    for record in records(out):
        assert record.failed and record.triples == []
        assert record.failures == ["extract: thinking did not end within 20 tokens"]
        assert record.steps[0].thinking == " ".join(THOUGHT[:19])
