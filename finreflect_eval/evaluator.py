"""Runs the pipeline stages over tasks and writes each stage's files.

`extract`: load the data of each task, load the candidate model once and run every task's
candidate steps (identical requests across tasks are served by the cache), free it, then load
any separate multi-pass normaliser in turn; write `samples_<task>_<date>.jsonl` and a manifest.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from finreflect_eval import __version__, judging, metrics
from finreflect_eval.data import TRIPLE_CRITERIA, Benchmark, load_benchmark, markdown_table
from finreflect_eval.errors import FinReflectError, first_invalid_field
from finreflect_eval.extraction import TaskRun
from finreflect_eval.models import ModelSpec, load_model
from finreflect_eval.resources import PACKAGE_DIR, spreadsheet_safe, timestamp, write_atomic
from finreflect_eval.samples import SampleRecord, SavedRun
from finreflect_eval.sharding import Shard, load_runs, span_list
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
    shard: Shard | None = None  # run only this shard of every task's spans

    @property
    def output_dir(self) -> Path:
        """`<output_path>/<model name>`, like lm-eval (`org/name` → `org__name`); a shard's
        run goes into `shard-<i>-of-<N>/` under it."""
        model = self.model.model
        name = Path(model).name if Path(model).exists() else model.replace("/", "__")
        folder = self.output_path / name
        return folder / self.shard.name if self.shard else folder

    @property
    def cache_path(self) -> Path | None:
        """The response cache; by default one per output path, and one per shard (shards may
        run on different machines sharing a network folder, where SQLite must not be shared)."""
        if self.cache is None:
            return None
        if self.cache != DEFAULT_CACHE:
            return Path(self.cache)
        name = f"cache-{self.shard.name}.sqlite" if self.shard else "cache.sqlite"
        return self.output_path / name


def extract(config: RunConfig) -> Path:
    """Run the extraction stage; returns the manifest naming the samples it wrote."""
    started = time.perf_counter()
    index = TaskIndex(config.include_paths)
    tasks = index.resolve(config.tasks)
    data: dict[tuple, Benchmark] = {}

    def split(dataset: str, name: str, revision: str | None, limit: int | None) -> Benchmark:
        key = (dataset, name, revision, limit)
        if key not in data:
            data[key] = load_benchmark(dataset, split=name, revision=revision, limit=limit)
        return data[key]

    runs, span_lists = [], {}
    for task in tasks:
        spec = task.config
        dataset = config.dataset or spec.dataset_path
        benchmark = split(dataset, spec.test_split, spec.dataset_revision, config.limit)
        span_lists[task.name] = span_list([span.span_id for span in benchmark.spans])
        if config.shard is not None:
            benchmark = benchmark.subset(config.shard.select(benchmark.spans))
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

    groups = {
        name: [task.name for task in index.resolve([name])]
        for name in config.tasks
        if name in index.groups
    }
    total = time.perf_counter() - started
    return write_extraction(config, runs, seconds, span_lists, groups, total)


def write_extraction(
    config: RunConfig,
    runs: list[TaskRun],
    seconds: dict[str, float],
    span_lists: dict[str, dict[str, Any]],
    groups: dict[str, list[str]],
    total: float,
) -> Path:
    out = config.output_dir
    out.mkdir(parents=True, exist_ok=True)
    date = timestamp()
    samples = {run.task.name: f"samples_{run.task.name}_{date}.jsonl" for run in runs}
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
                "span_list": span_lists[run.task.name],
                "fewshot": [example["span"].span_id for example in run.fewshot],
            }
            for run in runs
        },
        "groups": groups,
        "seed": config.seed,
        "shard": None if config.shard is None else asdict(config.shard),
        "dataset": _dataset_info(runs[0].benchmark, config.limit),
        "cache": str(config.cache_path) if config.cache_path else None,
        "finreflect_eval_version": __version__,
        "git_hash": _git_hash(),
        "total_seconds": round(total, 3),
    }
    SavedRun(out, manifest, {run.task.name: run.records for run in runs}).save()
    print(summary_table(runs, seconds))
    return out / f"manifest_{date}.json"


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


# --- judge, score, run ---

DEFAULT_BOOTSTRAP_SEED = 1234


def judge(
    samples: Path | list[Path],
    panel: str | None,
    *,
    cache: str | None = DEFAULT_CACHE,
    include_paths: list[Path] | None = None,
    endpoints: dict[str, str] | None = None,
) -> SavedRun:
    """Run the judge stage on a saved extraction (a run folder or manifest file, or several
    shards' folders, merged first). `panel` None takes the tasks' `judges` field; `endpoints`
    serves named judges at OpenAI-compatible URLs; DEFAULT_CACHE is the cache the extraction
    used by default."""
    run = load_runs(samples if isinstance(samples, list) else [samples])
    if panel is None:
        index = TaskIndex(include_paths)
        named = {index.tasks[t].config.judges for t in run.records if t in index.tasks}
        if len(named) != 1:
            raise FinReflectError(f"cannot choose a judge panel from the tasks ({sorted(named)}):"
                                  " choose one with --judges")  # fmt: skip
        panel = named.pop()
    if cache == DEFAULT_CACHE:
        shard = run.manifest.get("shard")
        cache_path: Path | None = (
            run.folder.parent.parent / f"cache-{Shard(**shard).name}.sqlite"
            if shard
            else run.folder.parent / "cache.sqlite"
        )
    else:
        cache_path = None if cache is None else Path(cache)
    judges = judging.load_panel(panel)
    if endpoints:
        judges = judges.at_endpoints(endpoints)
    return judging.judge(run, judges, cache_path=cache_path, include_paths=include_paths)


def score(samples: Path | list[Path] | SavedRun) -> dict[str, Any]:
    """Recompute every number from the samples of a judged run (or of several judged shards,
    merged first); write `results_<date>.json` and the review queues, print the summary table,
    and return the results."""
    if isinstance(samples, SavedRun):
        run = samples
    else:
        run = load_runs(samples if isinstance(samples, list) else [samples])
    results = compute_results(run)
    path = run.folder / f"results_{run.date}.json"
    write_atomic(path, json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    for task, records in run.records.items():
        write_review_queue(run.folder / f"review_{task}", records, judges=_judges_of(run))
    print(results_table(results))
    print(f"results, samples and review queues in {run.folder}")
    return results


def compute_results(run: SavedRun) -> dict[str, Any]:
    """The results file's content: a pure function of the manifest and the samples."""
    manifest = run.manifest
    judged = manifest.get("judging")
    if not judged:
        raise FinReflectError(
            f"{run.folder}: the samples have no votes yet; run `finreflect-eval judge --samples "
            f"{run.folder} --judges PANEL` first"
        )
    judges = _judges_of(run)
    seed = DEFAULT_BOOTSTRAP_SEED if manifest.get("seed") is None else manifest["seed"]
    results, agreement, per_judge = {}, {}, {}
    for task, records in run.records.items():
        info = manifest["tasks"][task]
        criteria = metrics.score_items(metrics.items_of(records, judges), judges, seed=seed)
        entry: dict[str, Any] = {"alias": task, "mode": info["mode"]}
        for criterion, scores in criteria.items():
            entry[criterion] = scores["score"]
            entry[f"{criterion}_ci"] = scores["ci"]
        entry.update(metrics.extraction_metrics(records))
        entry["items"] = {
            criterion: {key: scores[key] for key in
                        ("n_items", "n_scored", "unanimous", "split", "no_majority", "abstentions")}
            for criterion, scores in criteria.items()
        }  # fmt: skip
        entry["judge_failures"] = sum(call.error is not None for r in records
                                      for call in r.judge_calls)  # fmt: skip
        entry["tokens"] = {
            "extract": _tokens(step for r in records for step in r.steps),
            "judge": _tokens(call for r in records for call in r.judge_calls),
        }
        entry["seconds"] = {"extract": info["seconds"]}
        results[task] = entry
        agreement[task] = {c: scores["agreement"] for c, scores in criteria.items()}
        per_judge[task] = {
            judge: {c: scores["per_judge"][judge] for c, scores in criteria.items()}
            for judge in judges
        }
    groups = {}
    for group, members in manifest.get("groups", {}).items():
        scored = [results[t] for t in members if t in results]
        groups[group] = {"alias": group, "tasks": members}
        for criterion in metrics.AGGREGATION:  # an unweighted mean over the group's modes
            values = [r[criterion] for r in scored if r[criterion] is not None]
            groups[group][criterion] = round(sum(values) / len(values), 4) if values else None
    judge_seconds = sum(judged["seconds"].values())
    return {
        "results": results,
        "groups": groups,
        "configs": {task: {"mode": info["mode"], "generation_kwargs": info["generation_kwargs"],
                           "fewshot": info["fewshot"]} for task, info in manifest["tasks"].items()},
        "versions": {task: info["version"] for task, info in manifest["tasks"].items()},
        "n-samples": {task: {"original": len(records), "effective": len(records)}
                      for task, records in run.records.items()},
        "config": {
            "model": manifest["model"],
            "backend": manifest["backend"],
            "model_args": manifest["model_args"],
            "limit": manifest["dataset"]["limit"],
            "seed": manifest.get("seed"),
            "shard": None if not manifest.get("shard") else str(Shard(**manifest["shard"])),
            "bootstrap_seed": seed,
            "bootstrap_iters": metrics.BOOTSTRAP_ITERS,
            "judges": judged["panel"],
        },
        "git_hash": manifest["git_hash"],
        "date": run.date,
        "task_hashes": {task: info["hash"] for task, info in manifest["tasks"].items()},
        "total_evaluation_time_seconds": round(manifest["total_seconds"] + judge_seconds, 3),
        "agreement": agreement,
        "judges": {
            "panel": judged["panel"],
            "official": judged["official"],
            "members": judged["judges"],
            "per_judge": per_judge,
            "seconds": judged["seconds"],
        },
        "dataset": manifest["dataset"],
        "finreflect_eval_version": manifest["finreflect_eval_version"],
        "samples": {task: info["samples"] for task, info in manifest["tasks"].items()},
    }  # fmt: skip


def _judges_of(run: SavedRun) -> list[str]:
    return [spec["name"] for spec in run.manifest["judging"]["judges"]]


def _tokens(calls: Any) -> dict[str, int]:
    calls = list(calls)
    return {
        "prompt": sum(c.prompt_tokens for c in calls),
        "completion": sum(c.completion_tokens for c in calls),
    }


def write_review_queue(stem: Path, records: list[SampleRecord], judges: list[str]) -> int:
    """Items the panel split on, could not score, or had no majority for, with each judge's
    verdict, reasoning and warning: `<stem>.jsonl` and `<stem>.csv`. Returns the row count."""
    rows = []
    for record in records:
        for item in metrics.items_of([record], judges):
            outcome = metrics.aggregate(item.votes)
            reasons = [name for name, flagged in (("split", outcome.split),
                       ("unscored", not outcome.scored), ("no majority", outcome.no_majority))
                       if flagged]  # fmt: skip
            if not reasons:
                continue
            triple = (
                record.triples[item.index].as_tuple() if item.criterion in TRIPLE_CRITERIA else None
            )
            votes = record.votes[item.criterion]
            rows.append({
                "task": record.task,
                "span_id": record.span_id,
                "criterion": item.criterion,
                "triple_index": item.index if triple else None,
                "triple": list(triple) if triple else None,
                "label": outcome.label,
                "reason": ", ".join(reasons),
                "votes": {judge: votes[judge][item.index].model_dump() for judge in judges},
                "span_text": record.text,
            })  # fmt: skip
    write_atomic(
        stem.with_suffix(".jsonl"),
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows),
    )
    fields = ("verdict", "reasoning", "warning")
    columns = ["task", "span_id", "criterion", "triple_index", "triple", "label", "reason"]
    columns += [f"{j}_{key}" for j in judges for key in fields]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, [*columns, "span_text"])
    writer.writeheader()
    for row in rows:
        flat = {key: row[key] for key in columns[:7]}
        flat["triple"] = " | ".join(row["triple"]) if row["triple"] else ""
        for judge, vote in row["votes"].items():
            flat.update({f"{judge}_{key}": vote[key] for key in fields})
        flat["span_text"] = row["span_text"]
        writer.writerow({key: spreadsheet_safe(value) for key, value in flat.items()})
    write_atomic(stem.with_suffix(".csv"), buffer.getvalue())
    return len(rows)


def _with_ci(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")


def results_table(results: dict[str, Any]) -> str:
    """The Markdown summary of a results file: one row per task (extraction mode)."""
    short = metrics.LETTERS
    rows = []
    for task, entry in results["results"].items():
        alphas = "/".join(
            "—" if a["alpha"] is None else f"{a['alpha']:.2f}"
            for a in results["agreement"][task].values()
        )
        rows.append([
            task, entry["mode"], entry["n_spans"],
            *(_with_ci(entry[c], entry[f"{c}_ci"]) for c in short),
            alphas,
            "—" if entry["triples_per_span"] is None else f"{entry['triples_per_span']:.1f}",
            "—" if entry["check_rules"] is None else f"{entry['check_rules']:.1f}",
        ])  # fmt: skip
    header = ["task", "mode", "spans", *short.values(), "α F/P/R/C", "triples/span", "CheckRules"]
    panel = results["judges"]["panel"]
    note = "" if results["judges"]["official"] else f" (panel '{panel}' is not official)"
    return f"\njudges: {panel}{note}\n" + markdown_table(header, rows) + "\n"


def run(
    config: RunConfig, panel: str | None, endpoints: dict[str, str] | None = None
) -> dict[str, Any]:
    """extract → judge → score, each stage reading the files of the one before."""
    manifest = extract(config)
    judged = judge(
        manifest,
        panel,
        cache=_cache_arg(config),
        include_paths=config.include_paths,
        endpoints=endpoints,
    )
    return score(judged)


def _cache_arg(config: RunConfig) -> str | None:
    return None if config.cache_path is None else str(config.cache_path)
