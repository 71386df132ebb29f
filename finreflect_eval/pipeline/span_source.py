"""Which spans a run reads: each split loaded once (`SpanSource`), then each task's spans as the
run chooses them (the task's slice, `--sections`, then `--samples` or `--limit`), and the check
that `--samples` names only tasks of the run. `extract` and `run --check` share them, so they
count the same spans."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import (
    Benchmark,
    load_benchmark,
    resolve_dataset,
    select_samples,
    select_sections,
)
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.tasks.config import Task


def check_sample_tasks(config: RunConfig, tasks: list[Task]) -> None:
    """`--samples` names only tasks of the run."""
    unknown = sorted(set(config.samples or {}) - {task.name for task in tasks})
    if unknown:
        raise FinReflectError(f"--samples names task '{unknown[0]}', which this run does not run")


class SpanSource:
    """The splits of a run, each loaded once, and each task's spans as the run chooses them:
    the task's slice, then `--sections`, then `--samples` or `--limit` (`run --check` counts
    them the same way)."""

    def __init__(self) -> None:
        self.loaded: dict[tuple, Benchmark] = {}

    def split(
        self,
        dataset: str,
        name: str,
        limit: int | float | None,
        spec: Any = None,
        revision: str | None = None,
    ) -> Benchmark:
        """A split at `revision` (for the Hub); the task's revision, config and slice apply to
        its own data (`--dataset` may point elsewhere: then only the slice applies)."""
        own = spec is not None and dataset == spec.dataset_path
        revision = revision or (spec.dataset_revision if own else None)
        config_name = spec.dataset_name if own else None
        chosen = spec.slice if spec is not None else None
        key = (dataset, name, revision, config_name, chosen and chosen.model_dump_json(), limit)
        if key not in self.loaded:
            benchmark = load_benchmark(
                dataset,
                split=name,
                revision=revision,
                config=config_name,
                slice=chosen,
                limit=None if isinstance(limit, float) else limit,
            )
            if isinstance(limit, float):  # a fraction of the spans, rounded up (as lm-eval)
                benchmark = benchmark.limited(math.ceil(len(benchmark.spans) * limit))
            self.loaded[key] = benchmark
        return self.loaded[key]

    def of_task(self, config: RunConfig, task: Task) -> Benchmark:
        """The task's spans in this run (before `--shard`)."""
        spec = task.config
        dataset = config.dataset or spec.dataset_path
        revision = config.dataset_revision
        if revision and Path(resolve_dataset(dataset)).exists():  # it would change nothing
            raise FinReflectError(
                f"--dataset-revision is for data on the Hub; task {task.name} reads {dataset}, "
                "which is local"
            )
        if config.sections or config.samples is not None:
            whole = self.split(dataset, spec.test_split, None, spec, revision)
            return _chosen(config, task.name, whole)
        return self.split(dataset, spec.test_split, config.limit, spec, revision)


def _chosen(config: RunConfig, task: str, benchmark: Benchmark) -> Benchmark:
    """The task's spans that `--sections`, then `--samples` (or `--limit`) choose."""
    spans = benchmark.spans
    where = f"task {task}"
    if config.sections:
        spans = select_sections(spans, config.sections, where=where)
    if config.samples is not None and task in config.samples:
        spans = select_samples(spans, config.samples[task], where=where)
    limit = config.limit
    if isinstance(limit, float):  # a fraction of the chosen spans, rounded up (as lm-eval)
        limit = math.ceil(len(spans) * limit)
    return benchmark.subset(spans[:limit] if limit is not None else spans)
