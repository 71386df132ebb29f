"""The manifest of a run (`manifest.json`): what ran and how, written before its first record.
`build_manifest` records the model, each task (its settings with this run's overrides, its data
and the spans chosen), the run's arguments, the machine's environment, the cache, the package's
version and git commit; `loaded_model`, what loading the model resolved."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from finreflect_eval._util.redaction import redact
from finreflect_eval._util.resources import PACKAGE_DIR
from finreflect_eval._util.version import __version__
from finreflect_eval.models import LM, ModelSpec
from finreflect_eval.pipeline.environment import environment
from finreflect_eval.pipeline.extraction import TaskRun
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.records import (
    DatasetInfo,
    LoadedModel,
    Manifest,
    ModelInfo,
    RunArguments,
    ShardInfo,
    SpanList,
    TaskManifest,
)
from finreflect_eval.runs.store import run_id
from finreflect_eval.tasks.config import TaskIndex


def build_manifest(
    config: RunConfig,
    task_runs: list[TaskRun],
    span_lists: dict[str, dict[str, Any]],
    index: TaskIndex,
) -> Manifest:
    """The run's manifest: `span_lists` holds each task's chosen spans (before `--shard`),
    `index` the groups that `config.tasks` may name."""
    run = run_id()
    groups = {
        name: [task.name for task in index.resolve([name])]
        for name in config.tasks
        if name in index.groups
    }
    return Manifest(
        run=run,
        model=_model_info(config.model),
        tasks={
            t.task.name: TaskManifest(
                mode=t.task.config.mode,
                version=t.task.config.version,
                hash=t.task.hash,
                # What the requests used: the task's settings with this run's overrides.
                config=t.task.recorded_config() | {"generation_kwargs": t.generation.model_dump()},
                generation_kwargs=t.generation.model_dump(),
                metric_list=t.task.config.metric_list,
                samples=f"samples_{t.task.name}_{run}.jsonl",
                dataset=_dataset_info(config, t, span_lists),
                span_list=SpanList(**span_lists[t.task.name]),
                fewshot=[example["span"].span_id for example in t.fewshot],
            )
            for t in task_runs
        },
        groups=groups,
        group_versions={name: index.groups[name].metadata.get("version") for name in groups},
        seed=config.seed,
        arguments=RunArguments(
            limit=config.limit,
            dataset_revision=config.dataset_revision,
            sections=config.sections,
            samples=config.samples,
            gen_kwargs=redact(config.gen_kwargs),
            random_seed=config.random_seed,
            numpy_seed=config.numpy_seed,
            fewshot_seed=config.fewshot_seed,
            num_fewshot=config.num_fewshot,
            system_instruction=config.system_instruction,
            fewshot_as_multiturn=config.fewshot_as_multiturn,
        ),
        environment=environment(),
        shard=None if config.shard is None else ShardInfo(**vars(config.shard)),
        dataset=_dataset_info(config, _main_task(task_runs), span_lists),
        cache=_cache_record(config),
        finreflect_eval_version=__version__,
        git_hash=_git_hash(),
    )


def _main_task(task_runs: list[TaskRun]) -> TaskRun:
    """The task whose data is the run's: the first judged one, not a downstream task (whose
    data is its questions' chunks), whatever order the tasks were named in."""
    main = [t for t in task_runs if t.task.config.downstream is None]
    return (main or task_runs)[0]


def _dataset_info(
    config: RunConfig, task_run: TaskRun, span_lists: dict[str, dict[str, Any]]
) -> DatasetInfo:
    """What the run's files say of a task's data, with how its spans were chosen."""
    name = task_run.task.name
    info = task_run.benchmark.info(
        _span_limit(config, span_lists[name]), _config_name(config, task_run.task.config)
    )
    chosen = config.samples.get(name) if config.samples else None
    return info.model_copy(
        update={
            "sections": config.sections,
            "samples": None if chosen is None else list(task_run.doc_ids),
        }
    )


def _span_limit(config: RunConfig, span_list: dict[str, Any]) -> int | None:
    """`--limit` as the count of spans it kept (a fraction is recorded as its count)."""
    return span_list["count"] if isinstance(config.limit, float) else config.limit


def _config_name(config: RunConfig, spec: Any) -> str | None:
    dataset = config.dataset or spec.dataset_path
    return spec.dataset_name if dataset == spec.dataset_path else None


def _model_info(model: ModelSpec | LM) -> ModelInfo:
    if isinstance(model, LM):  # loaded by the caller: what identifies its outputs
        identity = model.identity()
        args = {
            k: v for k, v in identity.items() if k not in ("backend", "model") and v is not None
        }
        return ModelInfo(name=model.model, backend=model.backend, args=redact(args))
    return ModelInfo(name=model.model, backend=model.backend, args=redact(model.args))


def loaded_model(before: LoadedModel | None, lm: LM) -> LoadedModel:
    """What loading `lm` resolved; the batch sizes of an earlier part of the run stay first."""
    loaded = LoadedModel(**lm.resolved())
    if before is not None:
        earlier = [size for size in before.batch_sizes if size not in loaded.batch_sizes]
        loaded.batch_sizes = earlier + loaded.batch_sizes
    return loaded


def _cache_record(config: RunConfig) -> str | None:
    """The cache as the manifest records it: relative to the run folder (`../cache.sqlite`)
    when it lies in the output path, as by default; else its absolute path."""
    if config.cache is None:
        return None
    cache, output = config.cache.resolve(), config.output_path.resolve()
    if cache.is_relative_to(output):
        return os.path.relpath(cache, config.output_dir.resolve())
    return str(cache)


def _git_hash() -> str | None:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=PACKAGE_DIR,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None
