"""The pipeline's stages as functions of typed values: `extract(config) -> Run`,
`judge(run, panel) -> Run`, `score(run) -> Results`; `run` chains them.

Extraction loads the data of each task and the candidate model once, runs every task's
candidate steps over groups of spans (their records are saved as each group finishes; identical
requests across tasks are served by the cache), frees it, then loads a separate multi-pass
normaliser in turn. A rerun of an unfinished run continues it. Nothing here prints: the command
line prints what these return. `simple_evaluate` and `evaluate_run` are the same pipeline for
Python callers.
"""

from __future__ import annotations

import logging
import math
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from finreflect_eval import __version__, judging, review, scoring
from finreflect_eval.data import (
    Benchmark,
    load_benchmark,
    resolve_dataset,
    select_samples,
    select_sections,
    span_list,
)
from finreflect_eval.environment import environment, seed_globals
from finreflect_eval.errors import (
    FinReflectError,
    first_invalid_field,
)
from finreflect_eval.extraction import TaskRun
from finreflect_eval.models import (
    LM,
    ModelSpec,
    check_spec,
    load_model,
)
from finreflect_eval.records import (
    DatasetInfo,
    LoadedModel,
    Manifest,
    ModelInfo,
    Results,
    RunArguments,
    SampleRecord,
    ShardInfo,
    SpanList,
    TaskManifest,
)
from finreflect_eval.redaction import redact
from finreflect_eval.resources import PACKAGE_DIR
from finreflect_eval.scoring import FailurePolicy
from finreflect_eval.sharding import Shard
from finreflect_eval.store import Run, RunStore, identity, run_id, writing
from finreflect_eval.tasks import TASK_OVERRIDES, Task, TaskIndex

logger = logging.getLogger(__name__)

# The candidate's records run, and are saved, in rounds of this many batches (with the cache,
# every answer is kept as it comes, so a killed run loses none). Replicas run a round's batches
# at once; as the rounds are the same with one replica or up to this many, so are the batches,
# and so the outputs. More replicas than this take larger rounds.
BATCHES_PER_ROUND = 8


@dataclass
class RunConfig:
    """One run of the pipeline, from the command line or Python."""

    model: ModelSpec | LM  # what to load, or a model the caller loaded (and frees)
    tasks: list[str] = field(default_factory=lambda: ["finreflect"])
    dataset: str | None = None  # overrides every task's dataset_path
    dataset_revision: str | None = None  # overrides the tasks' dataset_revision (Hub data)
    limit: int | float | None = None  # the first N spans of each task, or a fraction (0-1)
    sections: list[str] | None = None  # only the spans of these 10-K sections (item1, item7)
    samples: dict[str, list[int | str]] | None = None  # lm-eval's: spans by index or id, by task
    output_path: Path = Path("results")
    cache: Path | None = None  # the response cache file; None: no cache
    include_paths: list[Path] = field(default_factory=list)
    seed: int | None = None  # the generation seed (lm-eval's torch seed); None: the tasks'
    # lm-eval's other seeds, set before the run (lm-eval's defaults).
    random_seed: int | None = 0
    numpy_seed: int | None = 1234
    fewshot_seed: int | None = 1234
    gen_kwargs: dict[str, Any] = field(default_factory=dict)
    shard: Shard | None = None  # run only this shard of every task's spans
    # Task fields set for this run (lm-eval's --num_fewshot, --system_instruction).
    num_fewshot: int | None = None
    system_instruction: str | None = None
    # No effect (a warning): our few-shot examples are part of the prompt template, not turns.
    fewshot_as_multiturn: bool = False

    def __post_init__(self) -> None:
        for name, seed in (("random", self.random_seed), ("numpy", self.numpy_seed)):
            if seed is not None and not 0 <= seed < 2**32:  # numpy's range
                raise FinReflectError(f"--seed: the {name} seed must be in 0..2**32-1, got {seed}")
        given = self.gen_kwargs.get("seed", self.seed)
        if self.seed is not None and given != self.seed:  # which would win is a guess
            raise FinReflectError(
                f"--seed gives the generation seed {self.seed}, --gen-kwargs seed={given}: "
                "give one of them"
            )
        if self.sections is not None and not all(name.strip() for name in self.sections):
            raise FinReflectError("--sections: a section name is empty (e.g. item1,item7)")
        if self.samples is not None:
            if self.limit is not None:  # as lm-eval
                raise FinReflectError("--limit and --samples choose spans both: give one of them")
            for task, chosen in self.samples.items():
                if not isinstance(chosen, list) or not all(
                    isinstance(item, str) or (isinstance(item, int) and not isinstance(item, bool))
                    for item in chosen
                ):
                    raise FinReflectError(
                        f"--samples: task {task} must map to a list of span indices or span ids"
                    )
        limit = self.limit
        if isinstance(limit, float) and limit >= 1 and limit.is_integer():
            self.limit = int(limit)  # lm-eval's limit is a float: 2.0 is two spans
        elif limit is not None and not (0 < limit < 1 or (isinstance(limit, int) and limit >= 1)):
            raise FinReflectError(
                f"limit must be a positive count or a fraction between 0 and 1, got {limit}"
            )

    @property
    def output_dir(self) -> Path:
        """`<output_path>/<model name>`, like lm-eval (`org/name` → `org__name`); a shard's
        run goes into `shard-<i>-of-<N>/` under it."""
        model = self.model.model
        name = Path(model).name if Path(model).exists() else model.replace("/", "__")
        folder = self.output_path / name
        return folder / self.shard.name if self.shard else folder

    def default_cache(self) -> Path:
        """One cache per output path, and one per shard (shards may run on machines sharing a
        network folder, where one SQLite file must not be shared)."""
        name = f"cache-{self.shard.name}.sqlite" if self.shard else "cache.sqlite"
        return self.output_path / name


def extract(config: RunConfig, panel: str | None = None) -> Run:
    """The extraction stage: every task's records, saved in `config.output_dir`. A run of the
    same settings that did not finish is continued: one still extracting, or (with `panel`,
    the judge panel that will score it) one that panel has no results for yet."""
    started = time.perf_counter()
    check_spec(config.model)  # the cheap checks first: no data or model loads before them
    seed_globals(config.random_seed, config.numpy_seed)  # as lm-eval, before anything runs
    index = TaskIndex(config.include_paths)
    overrides = {
        "num_fewshot": config.num_fewshot,
        "system_instruction": config.system_instruction,
    }
    tasks = [with_overrides(task, overrides) for task in index.resolve(config.tasks)]
    shots = [task.name for task in tasks if task.config.num_fewshot]
    if config.fewshot_as_multiturn and shots:
        logger.warning(
            "fewshot_as_multiturn has no effect: the few-shot examples of %s are part of the "
            "prompt template, not chat turns",
            ", ".join(shots),
        )
    for task in tasks:
        if task.config.normalizer_model is not None:
            check_spec(_spec_of(task.config.normalizer_model))
    spans = SpanSource()
    check_sample_tasks(config, tasks)
    task_runs, span_lists = [], {}
    for task in tasks:
        spec = task.config
        dataset = config.dataset or spec.dataset_path
        benchmark = spans.of_task(config, task)
        doc_ids = {span.span_id: i for i, span in enumerate(benchmark.spans)}
        span_lists[task.name] = span_list(list(doc_ids))
        if config.shard is not None:
            benchmark = benchmark.subset(config.shard.select(benchmark.spans))
        fewshot = None
        if spec.num_fewshot and spec.fewshot_split:
            source = spec.fewshot_dataset or dataset
            fewshot = spans.split(source, spec.fewshot_split, spec.num_fewshot)
            if len(fewshot.spans) < spec.num_fewshot:
                raise FinReflectError(
                    f"task {task.name}: num_fewshot {spec.num_fewshot}, but the few-shot split "
                    f"'{spec.fewshot_split}' of {source} has {len(fewshot.spans)} span(s)"
                )
            shared = {s.span_id for s in fewshot.spans} & set(doc_ids)
            if shared:
                raise FinReflectError(
                    f"task {task.name}: few-shot span {sorted(shared)[0]} is also a test span"
                )
        task_runs.append(TaskRun(task, benchmark, fewshot, _generation(config, spec), doc_ids))

    manifest = _manifest(config, task_runs, span_lists, index)
    store = RunStore(config.output_dir)
    with writing(store.folder):
        return _extract(config, store, manifest, task_runs, started, panel)


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


def _extract(
    config: RunConfig,
    store: RunStore,
    manifest: Manifest,
    task_runs: list[TaskRun],
    started: float,
    panel: str | None,
) -> Run:
    run = store.unfinished(identity(manifest), panel)
    if run is not None and run.manifest.status == "extracted":
        logger.info(
            "continuing run %s in %s: extracted, not yet scored", run.manifest.run, store.folder
        )
        return run
    separate = [t for t in task_runs if t.task.config.normalizer_model is not None]
    waiting: dict[str, list[SampleRecord]] = {t.task.name: [] for t in separate}
    # The model loads before any file is written, and a new run's files are written with its
    # first records: a run refused at loading, or by a dead endpoint, leaves nothing behind.
    with load_model(config.model, cache_path=config.cache) as lm:
        if run is None:
            run = store.start(manifest)
        else:
            logger.info("continuing unfinished run %s in %s", run.manifest.run, store.folder)
            # Spans whose calls failed in transport are asked again (their calls were not cached).
            for task, records in run.records.items():
                run.records[task] = [r for r in records if not _transport_failed(r)]
            # The same run may go on with other replica args (fewer replicas after a node is
            # lost): the record says what ran last, as its `loaded` does.
            run.manifest.model.args = manifest.model.args
            store.save(run)
        if run.manifest.model.sha not in (None, lm.commit):  # the revision moved on the Hub
            raise FinReflectError(
                f"{config.model.model} is at commit {lm.commit} now, but this unfinished run "
                f"began at {run.manifest.model.sha}: pin that commit (@{run.manifest.model.sha}"
                ") to continue it, or start a new run in another --output-path"
            )
        run.manifest.model.sha = lm.commit
        for task_run in task_runs:
            clock = time.perf_counter()
            name = task_run.task.name
            round_size = lm.batch_size * max(BATCHES_PER_ROUND, lm.data_parallel_size)
            for records in _pending(run, task_run, round_size):
                task_run.run("candidate", lm, records, shared=name not in waiting)
                if name in waiting:  # finished by the normaliser, after the candidate is freed
                    waiting[name].extend(records)
                else:
                    store.append(run, name, records)
            run.manifest.tasks[name].seconds += time.perf_counter() - clock
        run.manifest.model.loaded = _loaded(run.manifest.model.loaded, lm)
    for task_run in separate:
        clock = time.perf_counter()
        name = task_run.task.name
        spec = _spec_of(task_run.task.config.normalizer_model)
        with load_model(spec, cache_path=config.cache) as second:
            task_run.run("normalizer", second, waiting[name], shared=False)
        store.append(run, name, waiting[name])
        run.manifest.tasks[name].seconds += time.perf_counter() - clock
    for info in run.manifest.tasks.values():
        info.seconds = round(info.seconds, 3)
    # A span failed in transport leaves the run unfinished: the same command continues it.
    failed = any(_transport_failed(r) for records in run.records.values() for r in records)
    run.manifest.status = "extracting" if failed else "extracted"
    run.manifest.seconds = round(run.manifest.seconds + time.perf_counter() - started, 3)
    store.finish(run)
    return run


def _model_info(model: ModelSpec | LM) -> ModelInfo:
    if isinstance(model, LM):  # loaded by the caller: what identifies its outputs
        identity = model.identity()
        args = {
            k: v for k, v in identity.items() if k not in ("backend", "model") and v is not None
        }
        return ModelInfo(name=model.model, backend=model.backend, args=redact(args))
    return ModelInfo(name=model.model, backend=model.backend, args=redact(model.args))


def _loaded(before: LoadedModel | None, lm: LM) -> LoadedModel:
    """What loading `lm` resolved; the batch sizes of an earlier part of the run stay first."""
    loaded = LoadedModel(**lm.resolved())
    if before is not None:
        earlier = [size for size in before.batch_sizes if size not in loaded.batch_sizes]
        loaded.batch_sizes = earlier + loaded.batch_sizes
    return loaded


def _spec_of(model: Any) -> ModelSpec:
    return ModelSpec(model.model, model.backend, dict(model.model_args))


def _transport_failed(record: SampleRecord) -> bool:
    return any(step.transport_failed for step in record.steps)


def _pending(run: Run, task_run: TaskRun, size: int):
    """The task's records not yet saved, in groups of `size` (each saved when done)."""
    done = {record.span_id for record in run.records[task_run.task.name]}
    todo = [record for record in task_run.new_records() if record.span_id not in done]
    for start in range(0, len(todo), max(size, 1)):
        yield todo[start : start + size]


def _generation(config: RunConfig, spec: Any) -> Any:
    overrides = dict(config.gen_kwargs)
    if config.seed is not None:
        overrides["seed"] = config.seed
    accepted = sorted(type(spec.generation_kwargs).model_fields)
    unknown = sorted(set(overrides) - set(accepted))
    if unknown:  # one line naming what is accepted, not pydantic's "extra inputs" wording
        raise FinReflectError(
            f"--gen-kwargs: unknown key '{unknown[0]}'; accepted: {', '.join(accepted)}"
        )
    try:
        return spec.generation_kwargs.model_validate(
            {**spec.generation_kwargs.model_dump(), **overrides}
        )
    except ValidationError as exc:
        raise FinReflectError(f"--gen-kwargs/--seed: {first_invalid_field(exc)}") from exc


def _manifest(
    config: RunConfig,
    task_runs: list[TaskRun],
    span_lists: dict[str, dict[str, Any]],
    index: TaskIndex,
) -> Manifest:
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
        dataset=_dataset_info(config, task_runs[0], span_lists),
        cache=_cache_record(config),
        finreflect_eval_version=__version__,
        git_hash=_git_hash(),
    )


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


def _span_limit(config: RunConfig, span_list: dict[str, Any]) -> int | None:
    """`--limit` as the count of spans it kept (a fraction is recorded as its count)."""
    return span_list["count"] if isinstance(config.limit, float) else config.limit


def with_overrides(task: Task, overrides: dict[str, Any]) -> Task:
    """The task with these fields set (None: as the task says)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    if not changes:
        return task
    try:
        config = type(task.config).model_validate(
            {**task.config.model_dump(by_alias=True), **changes}
        )
    except ValidationError as exc:
        raise FinReflectError(f"task {task.name}: {first_invalid_field(exc)}") from exc
    return Task(config, task.path)


def _config_name(config: RunConfig, spec: Any) -> str | None:
    dataset = config.dataset or spec.dataset_path
    return spec.dataset_name if dataset == spec.dataset_path else None


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


def _cache_record(config: RunConfig) -> str | None:
    """The cache as the manifest records it: relative to the run folder (`../cache.sqlite`)
    when it lies in the output path, as by default; else its absolute path."""
    if config.cache is None:
        return None
    cache, output = config.cache.resolve(), config.output_path.resolve()
    if cache.is_relative_to(output):
        return os.path.relpath(cache, config.output_dir.resolve())
    return str(cache)


def default_cache(run: Run) -> Path:
    """The cache a saved run's judging uses unless told otherwise: the extraction's, where it
    lies in the run's output path. A run folder is input: a cache it names elsewhere (an
    absolute path, `../../..`) is not written to; the output path's own is used instead."""
    output = run.folder.parent
    name = "cache.sqlite"
    if run.manifest.shard is not None:  # `OUTPUT_PATH/MODEL/shard-i-of-N` → OUTPUT_PATH
        output = output.parent
        name = f"cache-{Shard(run.manifest.shard.index, run.manifest.shard.count).name}.sqlite"
    recorded = run.manifest.cache
    if recorded:
        cache = (run.folder / recorded).resolve()
        if cache.is_relative_to(output.resolve()):
            return cache
        logger.warning(
            "the run's cache %s is outside its output path: judging uses %s (give --cache to "
            "use another)",
            recorded,
            output / name,
        )
    return output / name


def judge(
    run: Run,
    panel: judging.Panel,
    *,
    cache: Path | None,
    include_paths: list[Path] | None = None,
) -> Run:
    """The judge stage: the panel's votes added to the run's samples (saved)."""
    index = TaskIndex(include_paths)
    unknown = [name for name in run.manifest.tasks if name not in index.tasks]
    if unknown:
        raise FinReflectError(
            f"task '{unknown[0]}' of {run.folder} is unknown here (missing --include-path?)"
        )
    tasks = {
        name: with_overrides(index.tasks[name], {k: info.config.get(k) for k in TASK_OVERRIDES})
        for name, info in run.manifest.tasks.items()
    }
    return judging.judge(run, panel, cache_path=cache, tasks=tasks)


def check_extraction(run: Run, policy: FailurePolicy) -> None:
    """A one-line error when the extraction failed (see FailurePolicy): judge nothing yet."""
    if not policy.allow_failures:
        policy.check(scoring.facts_from_records(run.records), run.folder)


def check_judging(run: Run, panel: str) -> None:
    """A one-line error when judge calls failed in transport (their votes are missing)."""
    span_facts, _ = scoring.score_tables(run.manifest, run.records, panel, run.span_facts)
    lost = {task: scoring.failures_of(facts, panel) for task, facts in span_facts.items()}
    lost = {task: f for task, f in lost.items() if f.judge_transport_calls}
    if lost:
        task, failed = next(iter(lost.items()))
        raise FinReflectError(
            f"task {task}: {failed.judge_transport_calls} judge call(s) of panel '{panel}' failed "
            f"in transport (first: {failed.first}); rerun the same command to retry them"
        )


def score(run: Run, panel: str | None = None, policy: FailurePolicy | None = None) -> Results:
    """Every number recomputed from the samples of a judged run (one panel's votes), written as
    `results_<run>_<panel>.json` with the review queues; refused (nothing written) when the run
    fails the failure policy."""
    policy = policy or FailurePolicy()
    panel = scoring.choose_panel(run.manifest, panel)
    span_facts, votes = scoring.score_tables(
        run.manifest, run.records, panel, run.span_facts, run.votes.get(panel)
    )
    policy.check(span_facts, run.folder, panel)
    results = scoring.compute_results(run.manifest, panel, span_facts, votes)
    if policy.allow_failures and policy.problems(span_facts, panel):
        results.config.allow_failures = True
    queue = review.review_queue(span_facts, votes)
    run.store.write_results(results, queue)
    return results


def evaluate(
    config: RunConfig, panel: judging.Panel, policy: FailurePolicy | None = None
) -> tuple[Run, Results]:
    """extract → judge → score (the `run` command); stops with a one-line error after a stage
    whose calls failed (see FailurePolicy), before spending more model time."""
    policy = policy or FailurePolicy()
    panel.check_models()  # a judge's mistake must not surface after the extraction
    with writing(config.output_dir):
        extracted = extract(config, panel.panel)
        check_extraction(extracted, policy)
        judged = judge(extracted, panel, cache=config.cache, include_paths=config.include_paths)
        return judged, score(judged, panel.panel, policy)


def choose_panel(judges: str | Path | None, tasks: list[str], include_paths: list[Path]) -> str:
    """The judge panel to use: `judges`, else the one every task names in its `judges` field."""
    if judges is not None:
        return str(judges)
    named = {task.config.judges for task in TaskIndex(include_paths).resolve(tasks)}
    if len(named) != 1:
        raise FinReflectError(
            f"cannot choose a judge panel from the tasks ({', '.join(sorted(named))}): "
            "choose one with --judges"
        )
    return named.pop()
