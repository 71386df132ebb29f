"""Runs the pipeline stages over tasks and writes each stage's files.

`extract`: load the data of each task, load the candidate model once and run every task's
candidate steps (identical requests across tasks are served by the cache), free it, then load
any separate multi-pass normaliser in turn; write `samples_<task>_<date>.jsonl` and a manifest.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from finreflect_eval import __version__
from finreflect_eval.data import Benchmark, load_benchmark, markdown_table
from finreflect_eval.errors import FinReflectError, first_invalid_field
from finreflect_eval.extraction import TaskRun
from finreflect_eval.models import ModelSpec, load_model
from finreflect_eval.resources import PACKAGE_DIR
from finreflect_eval.tasks import TaskIndex

logger = logging.getLogger(__name__)

DEFAULT_CACHE = "default"  # the cache file under the output folder


@dataclass
class RunConfig:
    """One run of the pipeline, from the command line or Python."""

    model: ModelSpec
    tasks: list[str] = field(default_factory=lambda: ["finreflect"])
    dataset: str | None = None  # overrides every task's dataset_path
    limit: int | None = None
    output_path: Path = Path("results")
    cache: str | None = DEFAULT_CACHE  # a path, DEFAULT_CACHE, or None for no cache
    include_paths: list[Path] = field(default_factory=list)
    seed: int | None = None
    gen_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def output_dir(self) -> Path:
        """`<output_path>/<model name>`, like lm-eval (`org/name` → `org__name`)."""
        model = self.model.model
        name = Path(model).name if Path(model).exists() else model.replace("/", "__")
        return self.output_path / name

    @property
    def cache_path(self) -> Path | None:
        if self.cache is None:
            return None
        return (
            self.output_path / "cache.sqlite" if self.cache == DEFAULT_CACHE else Path(self.cache)
        )


def extract(config: RunConfig) -> Path:
    """Run the extraction stage; returns the folder holding the samples and manifest."""
    started = time.perf_counter()
    tasks = TaskIndex(config.include_paths).resolve(config.tasks)
    data: dict[tuple, Benchmark] = {}

    def split(dataset: str, name: str, revision: str | None, limit: int | None) -> Benchmark:
        key = (dataset, name, revision, limit)
        if key not in data:
            data[key] = load_benchmark(dataset, split=name, revision=revision, limit=limit)
        return data[key]

    runs = []
    for task in tasks:
        spec = task.config
        dataset = config.dataset or spec.dataset_path
        benchmark = split(dataset, spec.test_split, spec.dataset_revision, config.limit)
        fewshot = None
        if spec.num_fewshot and spec.fewshot_split:
            source = spec.fewshot_dataset or dataset
            revision = spec.dataset_revision if source == dataset else None
            fewshot = split(source, spec.fewshot_split, revision, spec.num_fewshot)
            shared = {s.span_id for s in fewshot.spans} & {s.span_id for s in benchmark.spans}
            if shared:
                raise FinReflectError(
                    f"task {task.name}: few-shot span {sorted(shared)[0]} is also a test span"
                )
        overrides = dict(config.gen_kwargs)
        if config.seed is not None:
            overrides["seed"] = config.seed
        try:
            generation = spec.generation_kwargs.model_validate(
                {**spec.generation_kwargs.model_dump(), **overrides}
            )
        except ValidationError as exc:
            raise FinReflectError(f"--gen-kwargs/--seed: {first_invalid_field(exc)}") from exc
        runs.append(TaskRun(task, benchmark, fewshot, generation))

    seconds: dict[str, float] = {}
    with load_model(config.model, cache_path=config.cache_path) as lm:
        for run in runs:
            clock = time.perf_counter()
            run.extract(lm)
            mode = run.task.config.mode
            if mode == "multi_pass" and run.task.config.normalizer_model is None:
                run.normalize(lm)
            if mode == "reflection":
                run.reflect(lm)
            seconds[run.task.name] = time.perf_counter() - clock
    for run in runs:  # a separate normaliser is loaded only once the candidate is freed
        ref = run.task.config.normalizer_model
        if run.task.config.mode == "multi_pass" and ref is not None:
            clock = time.perf_counter()
            with load_model(
                ModelSpec(ref.model, ref.backend, dict(ref.model_args)),
                cache_path=config.cache_path,
            ) as normalizer:
                run.normalize(normalizer)
            seconds[run.task.name] += time.perf_counter() - clock

    return write_extraction(config, runs, seconds, time.perf_counter() - started)


def write_extraction(
    config: RunConfig, runs: list[TaskRun], seconds: dict[str, float], total: float
) -> Path:
    out = config.output_dir
    out.mkdir(parents=True, exist_ok=True)
    date = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%S")
    samples = {}
    for run in runs:
        path = out / f"samples_{run.task.name}_{date}.jsonl"
        with path.open("w", encoding="utf-8") as file:
            for record in run.records:
                file.write(record.model_dump_json() + "\n")
        samples[run.task.name] = path.name
    manifest = {
        "stage": "extract",
        "date": date,
        "model": config.model.model,
        "backend": config.model.backend,
        "model_args": config.model.args,
        "tasks": {
            run.task.name: {
                "mode": run.task.config.mode,
                "version": run.task.config.version,
                "hash": run.task.hash,
                "generation_kwargs": run.generation.model_dump(),
                "samples": samples[run.task.name],
                "seconds": round(seconds[run.task.name], 3),
                "dataset": _dataset_info(run.benchmark, config.limit),
                "fewshot": [example["span"].span_id for example in run.fewshot],
            }
            for run in runs
        },
        "dataset": _dataset_info(runs[0].benchmark, config.limit),
        "cache": str(config.cache_path) if config.cache_path else None,
        "finreflect_eval_version": __version__,
        "git_hash": _git_hash(),
        "total_seconds": round(total, 3),
    }
    (out / f"manifest_{date}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(summary_table(runs, seconds))
    return out


def _dataset_info(benchmark: Benchmark, limit: int | None) -> dict[str, Any]:
    return {
        "id": benchmark.dataset,
        "split": benchmark.split,
        "revision": benchmark.revision,
        "fingerprint": benchmark.fingerprint,
        "limit": limit,
    }


def summary_table(runs: list[TaskRun], seconds: dict[str, float]) -> str:
    rows = []
    for run in runs:
        records = run.records
        n = len(records)
        rows.append(
            [
                run.task.name,
                run.task.config.mode,
                n,
                sum(r.failed for r in records),
                f"{sum(len(r.triples) for r in records) / max(n, 1):.1f}",
                f"{sum(r.iterations for r in records) / max(n, 1):.1f}",
                sum(r.prompt_tokens + r.completion_tokens for r in records),
                f"{seconds[run.task.name] / max(n, 1):.1f}",
            ]
        )
    header = ["task", "mode", "spans", "failed", "triples/span", "iterations", "tokens", "s/span"]
    return "\n" + markdown_table(header, rows) + "\n"


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
