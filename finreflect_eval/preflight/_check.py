"""`run --check`: everything a run needs, checked before any weight is downloaded or any model
runs: its tasks, its data (and version), every model it loads (exists, accessible, already
cached or what it downloads), the disk those downloads need, the endpoints it calls and its
output folder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval._util.version import __version__
from finreflect_eval.data import (
    SAMPLE,
    Benchmark,
    commits_remembered,
    load_benchmark,
    resolve_dataset,
)
from finreflect_eval.downstream.qa import load_qa, validate_qa
from finreflect_eval.models import ModelSpec, get_backend
from finreflect_eval.pipeline.evaluator import tasks_of_run
from finreflect_eval.pipeline.judging import JudgeSpec, Panel
from finreflect_eval.pipeline.run_config import RunConfig, folder_problem, with_overrides
from finreflect_eval.pipeline.span_source import SpanSource, check_sample_tasks
from finreflect_eval.preflight._models import (
    HUB_TIMEOUT,
    Hub,
    ModelCheck,
    check_endpoint,
    check_model,
    disk_problem,
)
from finreflect_eval.preflight._plan import TaskData, render_judging_plan, render_plan
from finreflect_eval.runs.store import Run
from finreflect_eval.tasks.config import Task, TaskIndex, validate_task


@dataclass
class Preflight:
    """The check's answer: the needs not met (one line each, naming what to do), and the plan
    of the run (Markdown), printed when every need is met."""

    unmet: list[str]
    plan: str


def check_run(config: RunConfig, panel: Panel | None = None) -> Preflight:
    """Check what the run of `config`, judged by `panel` (None: extraction only), needs; run no
    model, download no weight and write nothing. Offline (HF_HUB_OFFLINE=1, or the Hub found
    unreachable), what only the Hub could confirm is a need unless the local cache has it."""
    unmet: list[str] = []
    hub = Hub()
    tasks = _tasks(config, unmet)
    try:
        check_sample_tasks(config, tasks)
    except FinReflectError as exc:
        unmet.append(str(exc))
    source = SpanSource()
    with commits_remembered(hub.dataset_commits):  # each task's data loads at the one commit
        data = [_task_data(config, task, hub, source, unmet) for task in tasks]
    models = _models(_run_models(config, tasks), panel, hub)
    unmet += _model_needs(models, panel)
    unmet += config.output_problems()
    plan = render_plan(config, data, models, panel, hub.offline)
    return Preflight(list(dict.fromkeys(unmet)), plan)


def check_judging(
    run: Run, panel: Panel, include_paths: list[Path], cache: Path | None, cascade: bool
) -> Preflight:
    """`judge --check`: what judging the saved `run` by `panel` needs (its tasks known here,
    the judges' models and endpoints, the disk, the run folder and `cache`'s folder writable),
    checked as `check_run` checks a run's judging; the plan of the judges' calls."""
    unmet: list[str] = []
    try:
        tasks = tasks_of_run(run, include_paths)
    except FinReflectError as exc:
        unmet.append(f"tasks: {exc}")
        tasks = {}
    hub = Hub()
    models = _models([], panel, hub)
    unmet += _model_needs(models, panel)
    folders = [(run.folder, "run folder", "--samples")]
    folders += [(cache.parent, "cache's folder", "--cache")] if cache else []
    unmet += [p for f in folders if (p := folder_problem(*f))]
    spans = {name: (len(run.records[name]), _with_triples(run, name)) for name in tasks}
    plan = render_judging_plan(run.folder, tasks, spans, models, panel, cascade, hub.offline)
    return Preflight(list(dict.fromkeys(unmet)), plan)


def _with_triples(run: Run, task: str) -> int:
    """The spans of the task with triples: only they get judge calls."""
    return sum(1 for record in run.records[task] if record.triples)


def _model_needs(models: list[ModelCheck], panel: Panel | None) -> list[str]:
    """The models' needs, the disk their downloads need, and the panel's size."""
    needs = [problem for check in models for problem in check.problems]
    disk = disk_problem(models)
    needs += [disk] if disk else []
    return needs + ([panel.size_problem()] if panel and panel.size_problem() else [])


def _tasks(config: RunConfig, unmet: list[str]) -> list[Task]:
    """The tasks, resolved and validated as `tasks validate` does (prompts render)."""
    overrides = {"num_fewshot": config.num_fewshot, "system_instruction": config.system_instruction}
    try:
        tasks = [
            with_overrides(task, overrides)
            for task in TaskIndex(config.include_paths).resolve(config.tasks)
        ]
        span = load_benchmark(SAMPLE, split="test", limit=1).spans[0]
        dev = load_benchmark(SAMPLE, split="dev", limit=1)
        fewshot = [{"span": s, "triples": dev.reference_triples} for s in dev.spans]
        for task in tasks:
            validate_task(task, span, fewshot)
            validate_qa(task)
    except FinReflectError as exc:
        unmet.append(f"tasks: {exc}")
        return []
    return tasks


def _task_data(
    config: RunConfig,
    task: Task,
    hub: Hub,
    source: SpanSource,
    unmet: list[str],
) -> TaskData:
    """The task's spans as `evaluator.extract` chooses them (`SpanSource`; then the shard), the
    data's version, and its few-shot split."""
    spec = task.config
    dataset = config.dataset or spec.dataset_path
    own = dataset == spec.dataset_path
    revision = config.dataset_revision or (spec.dataset_revision if own else None)
    version = _version(dataset, revision, hub, unmet)
    if hub.unreachable and _on_hub(dataset):  # loading it would only retry, for a minute
        benchmark = None
        _add_once(
            unmet, f"dataset {dataset}: {hub.offline}: its commit and spans cannot be checked"
        )
    else:
        # The whole split when the task takes a slice of it (official-v1 does), as the run
        # does: for the Hub's EvalBench data, a download (data, not weights) the run reuses.
        benchmark = _load(unmet, lambda: source.of_task(config, task))
    spans = None
    if benchmark is not None:
        chosen = config.shard.select(benchmark.spans) if config.shard else benchmark.spans
        spans = len(chosen)
    if spec.num_fewshot and spec.fewshot_split:
        shots = spec.fewshot_dataset or dataset
        fewshot = _load(unmet, lambda: source.split(shots, spec.fewshot_split, spec.num_fewshot))
        if fewshot is not None and len(fewshot.spans) < spec.num_fewshot:
            unmet.append(
                f"task {task.name}: num_fewshot {spec.num_fewshot}, but the few-shot split "
                f"'{spec.fewshot_split}' of {shots} has {len(fewshot.spans)} span(s)"
            )
    return TaskData(task, dataset, version, spans)


def _load(unmet: list[str], load: Callable[[], Benchmark]) -> Benchmark | None:
    """What `load` gives, or None with its error as a need (once: tasks share their data)."""
    try:
        return load()
    except FinReflectError as exc:  # it names the dataset
        _add_once(unmet, str(exc))
        return None


def _on_hub(dataset: str) -> bool:
    """Whether `dataset` names Hub data (not the sample, not a local path)."""
    if dataset == SAMPLE:
        return False
    try:
        return not Path(resolve_dataset(dataset)).exists()
    except FinReflectError:  # no such path: loading it says so
        return False


def _add_once(unmet: list[str], need: str) -> None:
    """A need, said once (tasks share their data)."""
    if need not in unmet:
        unmet.append(need)


def _version(dataset: str, revision: str | None, hub: Hub, unmet: list[str]) -> str:
    """The data's version: the commit a Hub revision is at (the Hub says), or where it is."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if dataset == SAMPLE:
        return f"bundled with finreflect-eval {__version__}"
    try:
        if Path(resolve_dataset(dataset)).exists():
            return "local"
        if (dataset, revision) not in hub.dataset_commits:  # tasks share their data
            info = hub.ask(hub.api.dataset_info, dataset, revision=revision, timeout=HUB_TIMEOUT)
            if info is not None:
                hub.dataset_commits[dataset, revision] = info.sha
    except FinReflectError:
        return ""  # no such path: loading it says so
    except GatedRepoError:
        page = f"https://huggingface.co/datasets/{dataset}"
        unmet.append(f"dataset {dataset}: gated: accept its terms at {page} and set HF_TOKEN")
        return ""
    except RepositoryNotFoundError:
        unmet.append(f"dataset {dataset}: not found on the Hub, or private: check --dataset")
        return ""
    except RevisionNotFoundError:
        unmet.append(f"dataset {dataset}: no revision '{revision}' on the Hub")
        return ""
    except HfHubHTTPError as exc:
        unmet.append(f"dataset {dataset}: the Hub answered {first_line(exc)}")
        return ""
    at, sha = revision or "main", hub.dataset_commits.get((dataset, revision))
    return f"{at}, unconfirmed: {hub.offline}" if sha is None else f"{at} = {sha}"


def _run_models(config: RunConfig, tasks: list[Task]) -> list[tuple[str, ModelSpec]]:
    """The models a run loads besides the judges, by role: the candidate, the tasks'
    normalisers, and the downstream tasks' QA model."""
    roles = []
    if isinstance(config.model, ModelSpec):  # a model the caller loaded needs nothing
        roles.append(("candidate", config.model))
    for task in tasks:
        ref = task.config.normalizer_model
        if ref is not None:
            roles.append(
                (f"normaliser of {task.name}", ModelSpec(ref.model, ref.backend, ref.model_args))
            )
    qa_names = {config.qa or t.config.downstream.qa for t in tasks if t.config.downstream}
    for name in sorted(qa_names):
        try:
            qa = load_qa(name)
        except FinReflectError:  # the tasks' check says why (`validate_qa`)
            continue
        roles.append((f"QA model {qa.name}", qa.model_spec))
    return roles


def _models(roles: list[tuple[str, ModelSpec]], panel: Panel | None, hub: Hub) -> list[ModelCheck]:
    """Every model of `roles` and of the panel, once each (judges sharing a model share a
    row)."""
    wanted: dict[str, tuple[list[str], ModelSpec, JudgeSpec | None]] = {}

    def add(role: str, spec: ModelSpec, note: JudgeSpec | None = None) -> None:
        key = repr((spec.model, spec.backend, sorted(spec.args.items(), key=str)))
        wanted.setdefault(key, ([], spec, note))[0].append(role)

    for role, spec in roles:
        add(role, spec)
    for judge in panel.judges if panel else []:
        if isinstance(judge.source, ModelSpec):
            add(f"judge {judge.name}", judge.model_spec, judge)
    checks = []
    for roles_of, spec, note in wanted.values():
        role = ", ".join(roles_of)
        try:
            remote = get_backend(spec.backend).remote
        except FinReflectError:
            remote = False  # check_model names the unknown backend
        checks.append(check_endpoint(role, spec) if remote else check_model(role, spec, hub, note))
    return checks
