"""Scripted runs: panels of scripted judges, a scripted candidate, and whole runs made with
them through the Python API (fast, no model weights)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from finreflect_eval.data import load_benchmark
from finreflect_eval.models import ModelSpec
from finreflect_eval.pipeline.evaluator import evaluate
from finreflect_eval.pipeline.judging import Panel, load_panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.scoring.failures import FailurePolicy
from finreflect_eval.tasks.config import TaskIndex

TESTS = Path(__file__).resolve().parents[1]
TRIPLES = {
    "triples": [
        {
            "subject": "AAPL",
            "subject_type": "ORG",
            "relation": "Produces",
            "object": "iPhone",
            "object_type": "PRODUCT",
        },
        {
            "subject": "AAPL",
            "subject_type": "ORG",
            "relation": "Operates_In",
            "object": "China",
            "object_type": "GPE",
        },
    ]
}


def panel_file(folder: Path, *responders: str, batch_size: int = 8, name: str = "scripted-test"):
    """A panel of scripted judges `judge-0`, `judge-1`, ... answering with the functions of
    `support.scripted_judges` named by `responders`."""
    judges = [
        {
            "name": f"judge-{number}",
            "model": "scripted",
            "backend": "scripted",
            "model_args": {
                "responses": f"support.scripted_judges:{responder}",
                "batch_size": batch_size,
            },
        }
        for number, responder in enumerate(responders)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "panel.yaml"
    path.write_text(yaml.safe_dump({"panel": name, "judges": judges}))
    return path


def candidate_file(folder: Path, answer: dict | list[dict] | None = None) -> Path:
    """Scripted candidate outputs: every request answered with `answer` (default TRIPLES), or
    with a list of answers, in order (the last one repeats)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "candidate.json"
    answers = answer if isinstance(answer, list) else [answer or TRIPLES]
    path.write_text(json.dumps([json.dumps(each) for each in answers]))
    return path


def run_args(folder: Path, panel: Path, *tasks: str, limit: int = 3) -> list[str]:
    """`finreflect-eval run` with a scripted candidate on the sample."""
    model_args = f"responses={candidate_file(folder)}"
    return [
        *("run", "--model", "candidate", "--backend", "scripted", "--model-args", model_args),
        *("--tasks", *tasks, "--dataset", "sample", "--limit", str(limit)),
        *("--judges", str(panel), "--output-path", str(folder / "out")),
    ]


def scripted_run(
    folder: Path,
    model: str,
    limit: int | None,
    panel: Path | Panel,
    tasks: tuple[str, ...] = ("finreflect_smoke_single_pass",),
    dataset: str = "sample",
    answer: dict | list[dict] | None = None,
    policy: FailurePolicy | None = None,
    skip_judging_ungrounded: bool = False,
) -> Path:
    """A whole scored run through the Python API (the candidate answers every span with
    `answer`, default TRIPLES, or each in turn with a list of answers); returns its results
    file."""
    folder.mkdir(parents=True, exist_ok=True)
    config = RunConfig(
        model=ModelSpec(model, "scripted", {"responses": str(candidate_file(folder, answer))}),
        tasks=list(tasks),
        dataset=dataset,
        limit=limit,
        output_path=folder / "out",
        cache=folder / "out" / "cache.sqlite",
        skip_judging_ungrounded=skip_judging_ungrounded,
    )
    panel = panel if isinstance(panel, Panel) else load_panel(panel)
    run, results = evaluate(config, panel, policy)
    return run.store.results_path(results.run, results.judges.panel)


def audit_with(folder: Path, responder: str, limit: int = 3):
    """A judge audit of one scripted judge on the sample's first spans."""
    from finreflect_eval.pipeline.audit import run_audit

    panel = load_panel(panel_file(folder, responder))
    task = TaskIndex().tasks["finreflect_single_pass"]
    return run_audit(panel, task, load_benchmark("sample", limit=limit), limit=limit)


def multi_pass_with_normalizer(folder: Path, model: str, responses: Path) -> Path:
    """A task folder under `folder` with `mp_two_models`: the bundled multi-pass task whose
    `normalizer_model` is the scripted `model`, answering from the `responses` file."""
    from finreflect_eval._util.resources import tasks_dir

    tasks = folder / "tasks"
    tasks.mkdir()
    (tasks / "mp.yaml").write_text(
        f"include: {tasks_dir() / 'finreflect' / 'finreflect_multi_pass.yaml'}\n"
        "task: mp_two_models\n"
        "normalizer_model:\n"
        f"  model: {model}\n"
        "  backend: scripted\n"
        f"  model_args: {{responses: {responses}}}\n"
    )
    return tasks
