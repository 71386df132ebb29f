"""The pipeline's stages as functions of typed values: `extract(config) -> Run`,
`judge(run, panel) -> Run`, `downstream(run, panel)` (the tasks with multi-hop questions),
`score(run) -> Results`; `run` chains them.

Extraction loads the data of each task and the candidate model once, runs every task's
candidate steps over groups of spans (their records are saved as each group finishes; identical
requests across tasks are served by the cache), frees it, then loads a separate multi-pass
normaliser in turn. A rerun of an unfinished run continues it. Nothing here prints: the command
line prints what these return. `simple_evaluate` and `evaluate_run` are the same pipeline for
Python callers.

The run's configuration is `run_config.RunConfig`; the spans it reads come from
`span_source.SpanSource`, and its record from `manifest.build_manifest`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import span_list
from finreflect_eval.models import LM, ModelSpec, check_spec, load_model, probe_endpoint
from finreflect_eval.models.replicas import start_ray_early
from finreflect_eval.pipeline import judging
from finreflect_eval.pipeline.downstream import run_downstream
from finreflect_eval.pipeline.environment import seed_globals
from finreflect_eval.pipeline.extraction import TaskRun
from finreflect_eval.pipeline.manifest import build_manifest, loaded_model
from finreflect_eval.pipeline.run_config import RunConfig, generation_kwargs, with_overrides
from finreflect_eval.pipeline.sharding import Shard
from finreflect_eval.pipeline.span_source import SpanSource, check_sample_tasks
from finreflect_eval.records import Manifest, Prices, Results, SampleRecord
from finreflect_eval.review import queue as review
from finreflect_eval.runs.store import Run, RunStore, identity, writing
from finreflect_eval.scoring import compute as scoring
from finreflect_eval.scoring.failures import FailurePolicy, failures_of
from finreflect_eval.stats.uncertainty import BOOTSTRAP_ITERS
from finreflect_eval.tasks.config import TASK_OVERRIDES, Task, TaskIndex

logger = logging.getLogger(__name__)

# The candidate's records run, and are saved, in rounds of this many batches (with the cache,
# every answer is kept as it comes, so a killed run loses none). Replicas run a round's batches
# at once; as the rounds are the same with one replica or up to this many, so are the batches,
# and so the outputs. More replicas than this take larger rounds.
BATCHES_PER_ROUND = 8


def extract(config: RunConfig, panel: str | None = None) -> Run:
    """The extraction stage: every task's records, saved in `config.output_dir`. A run of the
    same settings that did not finish is continued: one still extracting, or (with `panel`,
    the judge panel that will score it) one that panel has no results for yet."""
    started = time.perf_counter()
    check_spec(config.model)  # the cheap checks first: no data or model loads before them
    start_ray_early(config.model)  # replicas on Ray: it starts while the data loads
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
        task_runs.append(
            TaskRun(task, benchmark, fewshot, generation_kwargs(config, spec), doc_ids)
        )

    manifest = build_manifest(config, task_runs, span_lists, index)
    store = RunStore(config.output_dir)
    with writing(store.folder):
        return _extract(config, store, manifest, task_runs, started, panel)


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
        run.manifest.model.loaded = loaded_model(run.manifest.model.loaded, lm)
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


# --- judge, score, run ---


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
    skip_ungrounded: bool = False,
) -> Run:
    """The judge stage: the panel's votes added to the run's samples (saved); with
    `skip_ungrounded`, through the grounding cascade (`pipeline.cascade`)."""
    tasks = tasks_of_run(run, include_paths)
    return judging.judge(run, panel, cache_path=cache, tasks=tasks, skip_ungrounded=skip_ungrounded)


def downstream(
    run: Run,
    panel: judging.Panel,
    *,
    cache: Path | None,
    include_paths: list[Path] | None = None,
    qa: str | None = None,
) -> None:
    """The downstream stage (`pipeline.downstream`) for the run's tasks that have one: their
    questions measured against the run's graph, answered by the QA model (`qa`: in place of
    the tasks' own) and scored with `panel`; nothing for a run without such tasks."""
    run_downstream(run, panel, tasks_of_run(run, include_paths), cache_path=cache, qa_name=qa)


def tasks_of_run(run: Run, include_paths: list[Path] | None = None) -> dict[str, Task]:
    """The saved run's tasks, by name, with the overrides it ran with."""
    index = TaskIndex(include_paths)
    unknown = [name for name in run.manifest.tasks if name not in index.tasks]
    if unknown:
        raise FinReflectError(
            f"task '{unknown[0]}' of {run.folder} is unknown here (missing --include-path?)"
        )
    return {
        name: with_overrides(index.tasks[name], {k: info.config.get(k) for k in TASK_OVERRIDES})
        for name, info in run.manifest.tasks.items()
    }


def check_extraction(run: Run, policy: FailurePolicy) -> None:
    """A one-line error when the extraction failed (see FailurePolicy): judge nothing yet."""
    if not policy.allow_failures:
        policy.check(scoring.facts_from_records(run.records), run.folder)


def check_judging(run: Run, panel: str) -> None:
    """A one-line error when judge calls failed in transport (their votes are missing)."""
    span_facts, _ = scoring.score_tables(run.manifest, run.records, panel, run.span_facts)
    lost = {task: failures_of(facts, panel) for task, facts in span_facts.items()}
    lost = {task: f for task, f in lost.items() if f.judge_transport_calls}
    if lost:
        task, failed = next(iter(lost.items()))
        raise FinReflectError(
            f"task {task}: {failed.judge_transport_calls} judge call(s) of panel '{panel}' failed "
            f"in transport (first: {failed.first}); rerun the same command to retry them"
        )


def score(
    run: Run,
    panel: str | None = None,
    policy: FailurePolicy | None = None,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
    prices: Prices | None = None,
) -> Results:
    """Every number recomputed from the samples of a judged run (one panel's votes), written as
    `results_<run>_<panel>.json` with the review queues; refused (nothing written) when the run
    fails the failure policy. The intervals take `bootstrap_iters` resamples (0: none); the
    cost block's money comes from `prices`."""
    policy = policy or FailurePolicy()
    panel = scoring.choose_panel(run.manifest, judging.panel_choice(panel))
    span_facts, votes = scoring.score_tables(
        run.manifest, run.records, panel, run.span_facts, run.votes.get(panel)
    )
    policy.check(span_facts, run.folder, panel)
    labels = run.store.human_labels(run.manifest)
    downstream = run.store.downstream(run.manifest, panel)
    results = scoring.compute_results(
        run.manifest,
        panel,
        span_facts,
        votes,
        bootstrap_iters,
        human_labels=labels,
        graphs=run.graphs,
        prices=prices,
        downstream=downstream,
    )
    if policy.allow_failures and policy.problems(span_facts, panel):
        results.config.allow_failures = True
    run.store.write_results(results)
    review.update_queues(run.store, run.manifest, results, span_facts, votes)
    return results


def evaluate(
    config: RunConfig, panel: judging.Panel, policy: FailurePolicy | None = None
) -> tuple[Run, Results]:
    """extract → judge → score (the `run` command); stops with a one-line error after a stage
    whose calls failed (see FailurePolicy), before spending more model time."""
    policy = policy or FailurePolicy()
    check_before_calls(config, panel)
    with writing(config.output_dir):
        extracted = extract(config, panel.panel)
        check_extraction(extracted, policy)
        judged = judge(
            extracted,
            panel,
            cache=config.cache,
            include_paths=config.include_paths,
            skip_ungrounded=config.skip_judging_ungrounded,
        )
        downstream(
            judged, panel, cache=config.cache, include_paths=config.include_paths, qa=config.qa
        )
        return judged, score(judged, panel.panel, policy, config.bootstrap_iters, config.prices)


def check_before_calls(config: RunConfig, panel: judging.Panel) -> None:
    """What `run` can know before its first model call, checked then (a judge's mistake must
    not surface after hours of extraction): the panel (`Panel.check`), that the output folders
    can be written, and that every judge behind an endpoint answers now."""
    check_spec(config.model)  # the candidate's args and local path first: no wait before them
    panel.check()
    problems = config.output_problems()
    if problems:
        raise FinReflectError(problems[0])
    for judge in panel.judges:
        if judge.remote and not isinstance(judge.source, LM):
            try:
                answer = probe_endpoint(judge.model_spec)
            except FinReflectError as exc:
                raise FinReflectError(f"{panel.described}, judge {judge.name}: {exc}") from None
            if answer is not None and answer.error:
                raise FinReflectError(
                    f"{panel.described}, judge {judge.name}: {answer.error}; start its server "
                    "(or fix base_url), or extract now and judge later: `finreflect-eval extract`"
                    ", then `finreflect-eval judge`"
                )


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
