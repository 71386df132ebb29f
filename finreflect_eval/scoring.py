"""Scores from a judged run: a pure function of its manifest and samples, used by `score` and by
the leaderboard to recompute a submission. Nothing here loads a model or writes a file.

The results follow lm-eval's results file: per task `<metric>,none` and `<metric>_stderr,none`
for the metrics of the task's `metric_list`; groups as the unweighted mean of their tasks. The
intervals resample filings (`finreflect_eval.uncertainty`); the items the panel split on, could
not score or had no majority for are `finreflect_eval.review`'s queue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from finreflect_eval import metrics, uncertainty
from finreflect_eval.criteria import (
    CRITERIA,
    CRITERION_NAMES,
    EXTRACTION_METRICS,
    higher_is_better,
)
from finreflect_eval.errors import FinReflectError
from finreflect_eval.hashing import text_sha256
from finreflect_eval.lm_eval_sample import task_hash
from finreflect_eval.records import (
    Agreement,
    CriterionDetail,
    Failures,
    FilingScores,
    ItemCounts,
    JudgesInfo,
    LoadedModel,
    Manifest,
    Overall,
    Percent,
    Results,
    RunSettings,
    SampleCount,
    SampleRecord,
    TaskDetails,
    Tokens,
)
from finreflect_eval.span_facts import SpanFacts
from finreflect_eval.votes import VoteTable

DEFAULT_BOOTSTRAP_SEED = 1234
NOT_AVAILABLE = "N/A"  # lm-eval's stderr for a metric without one


def choose_panel(manifest: Manifest, panel: str | None) -> str:
    """The panel to score: the one asked for, or the run's only (or latest) panel."""
    if not manifest.judging:
        raise FinReflectError(
            "the samples have no votes yet; run `finreflect-eval judge --samples DIR --judges "
            "PANEL` first"
        )
    if panel is None:
        return list(manifest.judging)[-1]
    if panel not in manifest.judging:
        raise FinReflectError(
            f"panel '{panel}' has not judged this run (judged by: {', '.join(manifest.judging)})"
        )
    return panel


def score_tables(
    manifest: Manifest,
    records: dict[str, list[SampleRecord]],
    panel: str,
    span_facts: dict[str, SpanFacts] | None = None,
    votes: dict[str, VoteTable] | None = None,
) -> tuple[dict[str, SpanFacts], dict[str, VoteTable]]:
    """What scoring reads, per task in the manifest's order: its spans' facts and the panel's
    votes; those given (the score index), the others taken from the records."""
    span_facts, votes = span_facts or {}, votes or {}
    judges = [member.name for member in manifest.judging[panel].judges]
    tasks = [task for task in manifest.tasks if task in span_facts or task in records]
    return (
        {
            task: span_facts[task]
            if task in span_facts
            else SpanFacts.from_records(records[task], [panel])
            for task in tasks
        },
        {
            task: votes[task]
            if task in votes
            else VoteTable.from_records(records[task], panel, judges)
            for task in tasks
        },
    )


# lm-eval's top-level keys of the chat template and tokenizer: what loading the model resolved.
LM_EVAL_TOP_LEVEL = set(LoadedModel.model_fields) & set(Results.model_fields)


def facts_from_records(
    records: dict[str, list[SampleRecord]], panels: Sequence[str] = ()
) -> dict[str, SpanFacts]:
    """Per task, what scoring reads of its records, with the judge calls of `panels`."""
    return {task: SpanFacts.from_records(rows, panels) for task, rows in records.items()}


def _span_positions(facts: SpanFacts, table: VoteTable) -> np.ndarray:
    """For each item of the table, the row of its span in `facts` (in `doc_id` order)."""
    return np.searchsorted(facts.column("doc_id"), table.column("doc_id"))


def compute_results(
    manifest: Manifest,
    panel: str,
    span_facts: dict[str, SpanFacts],
    votes: dict[str, VoteTable],
) -> Results:
    """The results file of a judged run, for one panel (what it reads: see `score_tables`)."""
    judging = manifest.judging[panel]
    judges = [member.name for member in judging.judges]
    seed = DEFAULT_BOOTSTRAP_SEED if manifest.seed is None else manifest.seed
    every_span: dict[str, str] = {}  # the span ids of all tasks, each once, in order: filing
    for facts in span_facts.values():
        spans = zip(facts.python_values("span_id"), facts.python_values("filing"), strict=True)
        every_span.update(spans)
    filing_ids, span_filings = uncertainty.units_of(list(every_span.values()))
    position = {span_id: row for row, span_id in enumerate(every_span)}
    scored: dict[str, dict[str, tuple[str, metrics.CriterionScores]]] = {}
    for task, facts in span_facts.items():
        wanted = {m.metric: m.aggregation for m in manifest.tasks[task].metric_list}
        table = votes[task]
        item_criteria, positions = table.criteria(), _span_positions(facts, table)
        span_ids = facts.python_values("span_id")
        filings = span_filings[[position[span_id] for span_id in span_ids]]
        scored[task] = {}
        for name, aggregation in wanted.items():
            if name in EXTRACTION_METRICS:
                continue
            aggregation = aggregation or CRITERIA[name].aggregation
            mine = np.flatnonzero(item_criteria == CRITERION_NAMES.index(name))
            scored[task][name] = (
                aggregation,
                metrics.score_codes(
                    table.codes(mine),
                    positions[mine],
                    span_ids,
                    synthetic=table.column("synthetic")[mine],
                    n_votes=np.full(len(mine), len(judges)),
                    judges=judges,
                    aggregation=aggregation,
                    span_filings=filings,
                    n_filings=len(filing_ids),
                    ordered=CRITERIA[name].ordered,
                ),
            )
    columns = [(task, name) for task, criteria in scored.items() for name in criteria]
    bootstrap = metrics.RunBootstrap(
        [scored[task][name] for task, name in columns],
        list(every_span),
        span_filings,
        len(filing_ids),
        seed=seed,
    )
    results, details, agreement, metric_names, parts = {}, {}, {}, {}, {}
    for task, facts in span_facts.items():
        info = manifest.tasks[task]
        wanted = [m.metric for m in info.metric_list]
        extraction = facts.extraction_metrics()
        entry: dict[str, Any] = {"name": task, "alias": task, "sample_len": len(facts)}
        criteria = scored[task]
        for name in wanted:
            if name in EXTRACTION_METRICS:
                entry[f"{name},none"] = extraction[name]
                entry[f"{name}_stderr,none"] = NOT_AVAILABLE
                continue
            scores = criteria[name][1]
            entry[f"{name},none"] = scores.score
            entry[f"{name}_stderr,none"] = NOT_AVAILABLE if scores.stderr is None else scores.stderr
        results[task] = entry
        metric_names[task] = wanted
        parts[task] = [(aggregation, s.per_span) for aggregation, s in criteria.values()]
        agreement[task] = {name: Agreement(**s.agreement) for name, (_, s) in criteria.items()}
        details[task] = TaskDetails(
            mode=info.mode,
            metrics=wanted,
            criteria={
                name: CriterionDetail(
                    aggregation=aggregation,
                    ci=s.ci,
                    ci_span=s.ci_span,
                    items=ItemCounts(
                        n_items=s.n_items,
                        n_scored=s.n_scored,
                        unanimous=s.unanimous,
                        split=s.split,
                        no_majority=s.no_majority,
                        abstentions=s.abstentions,
                    ),
                    per_judge=s.per_judge,
                    without_judge=s.without_judge,
                )
                for name, (aggregation, s) in criteria.items()
            },
            n_spans=extraction["n_spans"],
            n_triples=extraction["n_triples"],
            check_rules_detail=extraction["check_rules_detail"],
            failed_extractions=extraction["failed_extractions"],
            judge_failures=facts.total(f"judge_errors:{panel}"),
            failures=failures_of(facts, panel),
            tokens={
                "extract": Tokens(
                    prompt=facts.total("extract_prompt_tokens"),
                    completion=facts.total("extract_completion_tokens"),
                ),
                "judge": Tokens(
                    prompt=facts.total(f"judge_prompt_tokens:{panel}"),
                    completion=facts.total(f"judge_completion_tokens:{panel}"),
                ),
            },
            seconds={"extract": info.seconds},
        )
    groups = {}
    for group, members in manifest.groups.items():
        members = [t for t in members if t in results]
        mine = [i for i, (task, _) in enumerate(columns) if task in members]
        groups[group] = _group_entry(group, members, results, metric_names) | _overall_metric(
            metrics.mean_of_averages([p for t in members for p in parts[t]]),
            bootstrap.overall(mine)["stderr"],
        )
    overall = Overall(
        score=metrics.mean_of_averages([p for ps in parts.values() for p in ps]),
        **bootstrap.overall(range(len(columns))),
        tasks={task: metrics.mean_of_averages(ps) for task, ps in parts.items()},
        without_judge={
            judge: _mean([scored[task][name][1].without_judge[judge] for task, name in columns])
            for judge in judges
        },
    )
    filings = FilingScores(
        ids=filing_ids,
        sums={task: {} for task in scored},
        counts={task: {} for task in scored},
    )
    for column, (task, name) in enumerate(columns):
        for kind, offset in (("sums", 0), ("counts", len(columns))):
            values = bootstrap.filing_table[:, offset + column]
            getattr(filings, kind)[task][name] = [round(float(v), 6) for v in values]
    model = manifest.model
    loaded = model.loaded or LoadedModel()
    given = manifest.arguments
    environment = manifest.environment
    date = _unix_time(manifest.run)
    seconds = round(manifest.seconds + sum(judging.seconds.values()), 3)
    instruction = given.system_instruction
    return Results(
        results=groups | results,  # lm-eval's order: a group's row before its tasks'
        groups=groups,
        group_subtasks={**manifest.groups, **{task: [] for task in results}},
        configs={task: manifest.tasks[task].config for task in results},
        versions={
            **{task: manifest.tasks[task].version for task in results},
            **{group: manifest.group_versions.get(group) for group in groups},
        },
        n_shot=_n_shot(manifest, list(results)),
        higher_is_better={
            **{task: {m: higher_is_better(m) for m in metric_names[task]} for task in results},
            **{
                group: {m: higher_is_better(m) for m in _union(metric_names, members)}
                | {"overall": True}
                for group, members in manifest.groups.items()
            },
        },
        n_samples={
            task: SampleCount(original=manifest.tasks[task].dataset.size, effective=len(facts))
            for task, facts in span_facts.items()
        },
        config=RunSettings(
            model=model.backend,
            model_args=model.args,
            model_name=model.name,
            model_num_parameters=loaded.num_parameters,
            model_revision=model.args.get("revision"),
            model_sha=model.sha,
            model_dtype=loaded.dtype or model.args.get("dtype"),
            batch_size=model.args.get("batch_size"),
            batch_sizes=loaded.batch_sizes,
            data_parallel_size=loaded.data_parallel_size,
            replicas=loaded.replicas,
            device=loaded.device or model.args.get("device"),
            device_map=loaded.device_map,
            attn_implementation=loaded.attn_implementation,
            use_cache=manifest.cache,
            # A manifest written before `arguments` holds the count only.
            limit=manifest.dataset.limit if given.limit is None else given.limit,
            limit_spans=manifest.dataset.limit,
            sections=given.sections,
            samples=given.samples,
            gen_kwargs=given.gen_kwargs,
            random_seed=given.random_seed,
            numpy_seed=given.numpy_seed,
            torch_seed=_generation_seed(manifest),
            fewshot_seed=given.fewshot_seed,
            seed=manifest.seed,
            shard=None
            if manifest.shard is None
            else f"{manifest.shard.index}/{manifest.shard.count}",
            bootstrap_iters=uncertainty.BOOTSTRAP_ITERS,
            bootstrap_seed=seed,
            judges=panel,
        ),
        model_name=model.name,
        model_name_sanitized=model.name.replace("/", "__"),
        model_source=model.backend,
        git_hash=manifest.git_hash,
        date=date,
        pretty_env_info=environment and environment.pretty(),
        transformers_version=environment and environment.packages.get("transformers"),
        system_instruction=instruction,
        system_instruction_sha=instruction and text_sha256(instruction),
        fewshot_as_multiturn=given.fewshot_as_multiturn,
        **loaded.model_dump(include=LM_EVAL_TOP_LEVEL),
        environment=environment,
        run=manifest.run,
        # lm-eval's: of the samples (the task's config hash is the manifest's).
        task_hashes={
            task: task_hash(span_facts[task].python_values("lm_eval_hashes")) for task in results
        },
        total_evaluation_time_seconds=str(seconds),
        details=details,
        overall=overall,
        agreement=agreement,
        filings=filings,
        judges=JudgesInfo(
            panel=panel, official=judging.official, members=judging.judges, seconds=judging.seconds
        ),
        dataset=manifest.dataset,
        finreflect_eval_version=manifest.finreflect_eval_version,
        samples={task: manifest.tasks[task].samples for task in results},
    )


@dataclass(frozen=True)
class FailurePolicy:
    """When failed model calls stop a run instead of being scored: a span whose extraction
    failed in transport (the server, not the model: retried on a rerun, never cached), a judge
    call that failed in transport, more than `max_invalid_share` of a task's spans whose output
    stayed invalid after retries (the model's failure: up to the share, those spans count with
    no triples), or a judge with more than `max_judge_failure_share` of its calls on a task
    failed or invalid after retries (up to the share, its failed calls are abstentions; beyond
    it, the panel is in effect two judges, or one). `allow_failures` scores anyway, and the
    results say so."""

    max_invalid_share: float = 0.2
    max_judge_failure_share: float = 0.2
    allow_failures: bool = False

    def problems(self, span_facts: dict[str, SpanFacts], panel: str | None = None) -> list[str]:
        """One line per task that fails the policy."""
        lines = []
        for task, facts in span_facts.items():
            failed = failures_of(facts, panel)
            counts = []
            if failed.transport_spans:
                counts.append(f"{failed.transport_spans} span(s) failed in transport")
            if failed.invalid_spans > self.max_invalid_share * len(facts):
                counts.append(
                    f"{failed.invalid_spans} of {len(facts)} spans gave invalid output "
                    f"(more than {self.max_invalid_share * 100:g}%)"
                )
            if failed.judge_transport_calls:
                counts.append(f"{failed.judge_transport_calls} judge call(s) failed in transport")
            for judge, n_failed in failed.judge_failed_calls.items():
                if n_failed > self.max_judge_failure_share * failed.judge_calls_each:
                    counts.append(
                        f"judge {judge} failed {n_failed} of its {failed.judge_calls_each} "
                        f"calls (more than --max-judge-failure-share "
                        f"{self.max_judge_failure_share * 100:g}%)"
                    )
            if counts:
                first = f" (first: {failed.first})" if failed.first else ""
                lines.append(f"task {task}: {', '.join(counts)}{first}")
        return lines

    def check(
        self, span_facts: dict[str, SpanFacts], folder: Path, panel: str | None = None
    ) -> None:
        """A one-line error when a run's spans fail the policy (unless failures are allowed);
        `folder` holds its samples."""
        problems = self.problems(span_facts, panel)
        if problems and not self.allow_failures:
            more = f" (and {len(problems) - 1} more task(s))" if len(problems) > 1 else ""
            raise FinReflectError(
                f"{problems[0]}{more}; no results written — rerun the same command to retry "
                f"failed calls (samples are in {folder}), or score with --allow-failures"
            )


def failures_of(facts: SpanFacts, panel: str | None) -> Failures:
    """A task's failed calls: extraction spans failed in transport or with invalid output after
    retries, judge calls of `panel` failed in transport, and each judge's failed calls."""
    transport = facts.column("transport_failed")
    invalid = facts.column("failed") & ~transport
    failures = facts.table.column("failures")
    rows = [*np.flatnonzero(transport).tolist(), *np.flatnonzero(invalid).tolist()]
    messages = [message for row in rows for message in failures[row].as_py()]
    judge_calls = [] if panel is None else facts.python_values(f"judge_transport_failures:{panel}")
    messages += [message for calls in judge_calls for message in calls]
    failed_by: dict[str, int] = {}
    calls_each = 0
    if panel is not None:
        judges = facts.table.column(f"judge_failed:{panel}").combine_chunks().flatten()
        failed_by = {
            str(item["values"]): int(item["counts"]) for item in pc.value_counts(judges).to_pylist()
        }
        calls_each = facts.total(f"judge_calls_each:{panel}")
    return Failures(
        transport_spans=int(transport.sum()),
        invalid_spans=int(invalid.sum()),
        judge_transport_calls=sum(len(calls) for calls in judge_calls),
        judge_calls_each=calls_each,
        judge_failed_calls=dict(sorted(failed_by.items())),
        first=messages[0] if messages else "",
    )


def _group_entry(
    group: str, members: list[str], results: dict[str, Any], metric_names: dict[str, list[str]]
) -> dict[str, Any]:
    """A group's row as lm-eval writes it: each metric the unweighted mean over the tasks that
    have it, its stderr that of an unweighted mean of independent estimates (N/A where a
    task's is), `sample_len` the tasks' spans and `sample_count` per metric."""
    entry: dict[str, Any] = {"name": group, "alias": group}
    entry["sample_len"] = sum(results[t]["sample_len"] for t in members)
    counts = {}
    for metric in _union(metric_names, members):
        having = [t for t in members if results[t].get(f"{metric},none") is not None]
        values = [results[t][f"{metric},none"] for t in having]
        errors = [results[t].get(f"{metric}_stderr,none") for t in having]
        entry[f"{metric},none"] = round(sum(values) / len(values), 4) if values else None
        numeric = values and all(isinstance(e, int | float) for e in errors)
        entry[f"{metric}_stderr,none"] = (
            round(math.sqrt(sum(e * e for e in errors)) / len(errors), 4)
            if numeric
            else NOT_AVAILABLE
        )
        counts[f"{metric},none"] = sum(results[t]["sample_len"] for t in having)
    entry["sample_count"] = counts
    return entry


def _overall_metric(score: Percent, stderr: float | None) -> dict:
    """A group's overall score (the mean of its tasks' judged criteria, bootstrapped jointly
    over their filings) as a metric of its row."""
    stderr = NOT_AVAILABLE if stderr is None else stderr
    return {"overall,none": score, "overall_stderr,none": stderr}


def _mean(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return round(sum(present) / len(present), 4) if present else None


def _n_shot(manifest: Manifest, tasks: list[str]) -> dict[str, int]:
    """Few-shot examples per task, and per group where its tasks agree (as lm-eval)."""
    shots = {task: len(manifest.tasks[task].fewshot) for task in tasks}
    for group, members in manifest.groups.items():
        values = {shots[t] for t in members if t in shots}
        if len(values) == 1:
            shots[group] = values.pop()
    return shots


def _generation_seed(manifest: Manifest) -> int | None:
    """lm-eval's torch seed: `--seed`, else the tasks' generation seed where they share one."""
    if manifest.seed is not None:
        return manifest.seed
    seeds = {task.generation_kwargs.get("seed") for task in manifest.tasks.values()}
    return seeds.pop() if len(seeds) == 1 else None


def _union(metric_names: dict[str, list[str]], tasks: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for task in tasks:
        seen.update(dict.fromkeys(metric_names.get(task, [])))
    return list(seen)


def _unix_time(run: str) -> float:
    moment = datetime.strptime(run[:19], "%Y-%m-%dT%H-%M-%S").replace(tzinfo=timezone.utc)
    return moment.timestamp()
