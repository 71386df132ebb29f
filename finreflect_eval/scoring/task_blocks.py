"""The blocks of the results with one entry per task: lm-eval's metric row (`results`), our
`details`, and lm-eval's bookkeeping of tasks and groups (configs, versions, n-shot, ...)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict

from finreflect_eval.protocol.criteria import EXTRACTION_METRICS, Aggregation, higher_is_better
from finreflect_eval.records import (
    CriterionDetail,
    ItemCounts,
    Manifest,
    SampleCount,
    TaskDetails,
    Tokens,
)
from finreflect_eval.records.lm_eval import task_hash
from finreflect_eval.scoring.failures import failures_of
from finreflect_eval.scoring.judge_protocol import judge_protocol_of
from finreflect_eval.scoring.judged import JudgedScores
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable
from finreflect_eval.stats import metrics

NOT_AVAILABLE = "N/A"  # lm-eval's stderr for a metric without one


def task_metrics(manifest: Manifest, task: str) -> list[str]:
    """The metrics a task reports: its metric_list."""
    return [m.metric for m in manifest.tasks[task].metric_list]


def metrics_of(manifest: Manifest, tasks: Iterable[str]) -> list[str]:
    """The metrics the tasks report, each once, in order."""
    seen: dict[str, None] = {}
    for task in tasks:
        seen.update(dict.fromkeys(task_metrics(manifest, task)))
    return list(seen)


def task_rows(
    manifest: Manifest, span_facts: dict[str, SpanFacts], judged: JudgedScores
) -> dict[str, dict[str, Any]]:
    """lm-eval's row of each task: `name`, `alias`, `sample_len`, and each metric of its
    metric_list as `<metric>,none` with its `<metric>_stderr,none` (N/A where there is none)."""
    rows = {}
    for task, facts in span_facts.items():
        extraction = facts.extraction_metrics()
        row: dict[str, Any] = {"name": task, "alias": task, "sample_len": len(facts)}
        for name in task_metrics(manifest, task):
            if name in EXTRACTION_METRICS:
                row[f"{name},none"] = extraction[name]
                row[f"{name}_stderr,none"] = NOT_AVAILABLE
                continue
            scores = judged.criteria[task][name][1]
            row[f"{name},none"] = scores.score
            row[f"{name}_stderr,none"] = NOT_AVAILABLE if scores.stderr is None else scores.stderr
        rows[task] = row
    return rows


def task_details(
    manifest: Manifest,
    panel: str,
    span_facts: dict[str, SpanFacts],
    votes: dict[str, VoteTable],
    judged: JudgedScores,
) -> dict[str, TaskDetails]:
    """Per task, what its lm-eval row does not hold: each judged criterion's intervals and item
    counts, the extraction's counts, failed calls, tokens, time, and how each judge kept the
    judge protocol."""
    details = {}
    for task, facts in span_facts.items():
        info = manifest.tasks[task]
        extraction = facts.extraction_metrics()
        details[task] = TaskDetails(
            mode=info.mode,
            metrics=task_metrics(manifest, task),
            criteria={
                name: _criterion_detail(*scored) for name, scored in judged.criteria[task].items()
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
            judge_protocol=judge_protocol_of(facts, votes[task], panel),
        )
    return details


def _criterion_detail(aggregation: Aggregation, scores: metrics.CriterionScores) -> CriterionDetail:
    return CriterionDetail(
        aggregation=aggregation,
        ci=scores.ci,
        ci_span=scores.ci_span,
        items=ItemCounts(
            n_items=scores.n_items,
            n_scored=scores.n_scored,
            unanimous=scores.unanimous,
            split=scores.split,
            no_majority=scores.no_majority,
            abstentions=scores.abstentions,
        ),
        per_judge=scores.per_judge,
        without_judge=scores.without_judge,
        judge_influence=scores.judge_influence,
        judge_influence_ci=scores.judge_influence_ci,
        n_filings=scores.n_filings,
        ci_method=scores.ci_method,
        ci_reliable=scores.ci_reliable,
        levels=scores.levels,
        level_counts=scores.level_counts,
    )


class TaskBookkeeping(TypedDict):
    """lm-eval's fields of the results about the tasks and groups themselves."""

    group_subtasks: dict[str, list[str]]
    configs: dict[str, dict[str, Any]]
    versions: dict[str, Any]
    n_shot: dict[str, int]
    higher_is_better: dict[str, dict[str, bool | None]]
    n_samples: dict[str, SampleCount]
    task_hashes: dict[str, str]
    samples: dict[str, str]


def task_bookkeeping(manifest: Manifest, span_facts: dict[str, SpanFacts]) -> TaskBookkeeping:
    """lm-eval's bookkeeping of the tasks scored and of every group: subtasks, configs,
    versions, few-shot counts, which way each metric is better, sample counts, the hash of each
    task's samples, and our samples file of each task."""
    tasks = list(span_facts)
    groups = manifest.groups
    return TaskBookkeeping(
        group_subtasks={**groups, **{task: [] for task in tasks}},
        configs={task: manifest.tasks[task].config for task in tasks},
        versions={
            **{task: manifest.tasks[task].version for task in tasks},
            **{group: manifest.group_versions.get(group) for group in groups},
        },
        n_shot=_n_shot(manifest, tasks),
        higher_is_better={
            **{task: _which_is_better(task_metrics(manifest, task)) for task in tasks},
            **{
                group: _which_is_better(metrics_of(manifest, [t for t in members if t in tasks]))
                | {"overall": True}
                for group, members in groups.items()
            },
        },
        n_samples={
            task: SampleCount(original=manifest.tasks[task].dataset.size, effective=len(facts))
            for task, facts in span_facts.items()
        },
        # lm-eval's: of the samples (the task's config hash is the manifest's).
        task_hashes={
            task: task_hash(facts.python_values("lm_eval_hashes"))
            for task, facts in span_facts.items()
        },
        samples={task: manifest.tasks[task].samples for task in tasks},
    )


def _which_is_better(names: list[str]) -> dict[str, bool | None]:
    return {name: higher_is_better(name) for name in names}


def _n_shot(manifest: Manifest, tasks: list[str]) -> dict[str, int]:
    """Few-shot examples per task, and per group where its tasks agree (as lm-eval)."""
    shots = {task: len(manifest.tasks[task].fewshot) for task in tasks}
    for group, members in manifest.groups.items():
        values = {shots[t] for t in members if t in shots}
        if len(values) == 1:
            shots[group] = values.pop()
    return shots
