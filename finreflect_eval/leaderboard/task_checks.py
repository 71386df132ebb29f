"""A submitted run's tasks: each a task of this leaderboard as it is now (`task_problems`), and
what its downstream files must hold before their block is recomputed (`downstream_problems`):
one file per downstream task of the run (a task of this leaderboard with a `downstream`
section), of the results' panel, answered by the task's fixed QA model with the task's
settings. The measures, the scores and who voted for them are
recomputed by scoring (`scoring.downstream`), which refuses a file that does not follow from the
samples' triples."""

from __future__ import annotations

from collections.abc import Collection

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval.downstream.qa import load_qa
from finreflect_eval.records import Manifest, Results, Submission
from finreflect_eval.records.downstream import DownstreamFile
from finreflect_eval.tasks.config import TASK_OVERRIDES, Task, TaskIndex


def task_problems(results: Results, manifest: Manifest, index: TaskIndex) -> list[str]:
    """Each task is this leaderboard's (`index`), as it is now: its version, its settings, and
    its config hash (the manifest's: the results' `task_hashes` are lm-eval's, of the samples).
    A downstream task is checked the same way (its metric_list names no judged criterion)."""
    problems = []
    for task in results.tasks:
        known = index.tasks.get(task)
        if known is None:
            problems.append(f"task '{task}' is not a task of this leaderboard")
            continue
        version = results.versions.get(task)
        if known.config.version != version:
            problems.append(
                f"task '{task}' version {version} is not the current {known.config.version}; "
                "rerun with this version of finreflect-eval"
            )
        config = results.configs.get(task, {})
        for field in TASK_OVERRIDES:  # set for the run by a flag (--num_fewshot, ...)
            if config.get(field) != getattr(known.config, field):
                problems.append(
                    f"task '{task}' ran with {field}={config.get(field)!r}, not the task's "
                    f"{getattr(known.config, field)!r}: a changed task is not this "
                    "leaderboard's; rerun without the flag"
                )
        generation = known.config.generation_kwargs.model_dump()
        if config.get("generation_kwargs") != generation:  # --gen_kwargs, --seed
            problems.append(
                f"task '{task}' ran with generation_kwargs {config.get('generation_kwargs')}, "
                f"not the task's {generation}: a changed task is not this leaderboard's; rerun "
                "without --gen_kwargs and --seed"
            )
        ran = manifest.tasks[task].hash if task in manifest.tasks else None
        if ran != known.hash:
            problems.append(
                f"task '{task}' hash {ran} differs from this leaderboard's {known.hash} (its "
                "prompts, schema or settings changed); rerun with this version's tasks"
            )
    return problems


def downstream_tasks(tasks: Collection[str], index: TaskIndex) -> list[str]:
    """The tasks of a run that this leaderboard knows as downstream tasks (a `downstream`
    section: their triples answer multi-hop questions, the panel does not judge them)."""
    return [
        task
        for task in tasks
        if task in index.tasks and index.tasks[task].config.downstream is not None
    ]


def downstream_problems(submission: Submission, index: TaskIndex) -> list[str]:
    """What is wrong with the submission's downstream files (see the module), a line each."""
    results = submission.results
    panel = results.judges.panel
    expected = downstream_tasks(results.tasks, index)
    problems = [
        f"task {task} is a downstream task, but the submission carries no downstream file of "
        f"panel '{panel}': run `finreflect-eval downstream --samples RUN --judges {panel}`, then "
        "`finreflect-eval score`, and submit the run folder"
        for task in expected
        if task not in submission.downstream
    ]
    for task, file in submission.downstream.items():
        where = f"downstream file of task {task}"
        if task not in expected:
            problems.append(f"{where}: not a downstream task of this run on this leaderboard")
            continue
        if file.task != task or file.panel != panel:
            problems.append(
                f"{where}: it holds task {file.task}, panel {file.panel} (the results' panel is "
                f"'{panel}')"
            )
            continue
        problems += _settings_problems(file, index.tasks[task], where)
    return problems


def _settings_problems(file: DownstreamFile, task: Task, where: str) -> list[str]:
    """The task's own QA model (not one given with --qa) and path length."""
    spec = task.config.downstream
    assert spec is not None  # (a downstream task)
    problems = []
    try:
        fixed = load_qa(spec.qa).settings()
    except FinReflectError as exc:
        return [f"{where}: the task's QA model cannot be read here ({first_line(exc)})"]
    if file.qa != fixed:
        problems.append(
            f"{where}: answered by QA model '{file.qa.name}' ({file.qa.model}, prompt sha256 "
            f"{file.qa.prompt_sha[:12]}), not the task's fixed '{fixed.name}' ({fixed.model}, "
            f"prompt sha256 {fixed.prompt_sha[:12]}): rerun `finreflect-eval downstream` without "
            "--qa"
        )
    if file.max_hops != spec.max_hops:
        problems.append(
            f"{where}: max_hops {file.max_hops}, not the task's {spec.max_hops}: a changed task "
            "is not this leaderboard's"
        )
    return problems
