"""The panel's scores: every judged criterion of every task scored from its vote table, all
bootstrapped together over the run's filings; and the blocks of the results that read only them
(`overall`, `agreement`, `filings`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from finreflect_eval.protocol.criteria import (
    CRITERIA,
    CRITERION_NAMES,
    EXTRACTION_METRICS,
    Aggregation,
)
from finreflect_eval.records import Agreement, FilingScores, Manifest, Overall
from finreflect_eval.records.manifest import TaskManifest
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable
from finreflect_eval.stats import averages, metrics, uncertainty

DEFAULT_BOOTSTRAP_SEED = 1234

Scored = tuple[Aggregation, metrics.CriterionScores]  # a criterion's aggregation and its scores


@dataclass(frozen=True)
class JudgedScores:
    """Every task's judged criteria, scored, with their intervals: one bootstrap resampled the
    run's filings for all of them."""

    judges: list[str]
    criteria: dict[str, dict[str, Scored]]
    """Per task (all, in order), per judged criterion of its metric_list."""
    columns: list[tuple[str, str]]
    """(task, criterion) of every score, in the bootstrap's order."""
    filing_ids: list[str]
    bootstrap: metrics.RunBootstrap

    def parts(self, tasks: Iterable[str]) -> list[tuple[Aggregation, averages.SpanScores]]:
        """The tasks' judged criteria, as `averages.mean_of_averages` averages them."""
        return [
            (aggregation, scores.per_span)
            for task in tasks
            for aggregation, scores in self.criteria[task].values()
        ]


def bootstrap_seed(manifest: Manifest) -> int:
    return DEFAULT_BOOTSTRAP_SEED if manifest.seed is None else manifest.seed


def score_judged(
    manifest: Manifest,
    panel: str,
    span_facts: dict[str, SpanFacts],
    votes: dict[str, VoteTable],
    bootstrap_iters: int = uncertainty.BOOTSTRAP_ITERS,
) -> JudgedScores:
    """The panel's scores of every task's judged criteria, with their intervals (from
    `bootstrap_iters` resamples; 0: none)."""
    judges = [member.name for member in manifest.judging[panel].judges]
    # The span ids of the judged tasks, each once, in order: filing. A task the panel judges on
    # nothing (a downstream task) brings no filing: one without a judged item would count as
    # a unit of the intervals and lend them degrees of freedom they do not have.
    judged = [t for t in span_facts if _judged_criteria(manifest.tasks[t])]
    every_span: dict[str, str] = {}
    for task in judged:
        facts = span_facts[task]
        spans = zip(facts.python_values("span_id"), facts.python_values("filing"), strict=True)
        every_span.update(spans)
    filing_ids, span_filings = uncertainty.units_of(list(every_span.values()))
    position = {span_id: row for row, span_id in enumerate(every_span)}
    criteria = {}
    for task, facts in span_facts.items():
        if task not in judged:
            criteria[task] = {}
            continue
        filings = span_filings[[position[span_id] for span_id in facts.python_values("span_id")]]
        criteria[task] = _score_task(
            manifest.tasks[task], facts, votes[task], judges, filings, len(filing_ids)
        )
    columns = [(task, name) for task, scored in criteria.items() for name in scored]
    bootstrap = metrics.RunBootstrap(
        [criteria[task][name] for task, name in columns],
        list(every_span),
        span_filings,
        len(filing_ids),
        seed=bootstrap_seed(manifest),
        iterations=bootstrap_iters,
    )
    return JudgedScores(judges, criteria, columns, filing_ids, bootstrap)


def _judged_criteria(info: TaskManifest) -> list[str]:
    return [m.metric for m in info.metric_list if m.metric not in EXTRACTION_METRICS]


def _score_task(
    info: TaskManifest,
    facts: SpanFacts,
    table: VoteTable,
    judges: list[str],
    filings: np.ndarray,
    n_filings: int,
) -> dict[str, Scored]:
    """A task's judged criteria scored from its votes (`filings`: each of its spans' filing);
    their intervals are the run's bootstrap's."""
    wanted = {m.metric: m for m in info.metric_list}
    item_criteria, positions = table.criteria(), _span_positions(facts, table)
    span_ids = facts.python_values("span_id")
    scored = {}
    for name, spec in wanted.items():
        if name in EXTRACTION_METRICS:
            continue
        aggregation = spec.aggregation or CRITERIA[name].aggregation
        mine = np.flatnonzero(item_criteria == CRITERION_NAMES.index(name))
        scored[name] = (
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
                n_filings=n_filings,
                ordered=CRITERIA[name].ordered,
                levels=spec.levels,
            ),
        )
    return scored


def _span_positions(facts: SpanFacts, table: VoteTable) -> np.ndarray:
    """For each item of the table, the row of its span in `facts` (in `doc_id` order)."""
    return np.searchsorted(facts.column("doc_id"), table.column("doc_id"))


def overall_of(judged: JudgedScores) -> Overall:
    """The run's one number: the mean of every task's judged criteria, its intervals, per task,
    and without each judge."""
    without_judge = {
        judge: _mean(
            [judged.criteria[task][name][1].without_judge[judge] for task, name in judged.columns]
        )
        for judge in judged.judges
    }
    score = averages.mean_of_averages(judged.parts(judged.criteria))
    intervals = judged.bootstrap.overall(range(len(judged.columns)))
    if score is None:  # (the replicates would average the criteria that have a score)
        intervals.update(ci=None, stderr=None, ci_span=None)
    return Overall(
        score=score,
        **intervals,
        tasks={task: averages.mean_of_averages(judged.parts([task])) for task in judged.criteria},
        without_judge=without_judge,
        judge_influence=metrics.judge_influence(without_judge),
        judge_influence_ci=judged.bootstrap.influence(range(len(judged.columns))),
        unscored=[
            f"{name} of {task}"
            for task, name in judged.columns
            if judged.criteria[task][name][1].score is None
        ],
    )


def always_agree(judged: JudgedScores) -> bool:
    """Whether two judges or more gave some items a label, and never disagreed on any."""
    scores = [scores for criteria in judged.criteria.values() for _, scores in criteria.values()]
    judged_items = sum(s.n_scored for s in scores)
    return len(judged.judges) > 1 and judged_items > 0 and not any(s.split for s in scores)


def agreement_of(judged: JudgedScores) -> dict[str, dict[str, Agreement]]:
    """Per task and judged criterion: the panel's α, with its interval."""
    return {
        task: {name: Agreement(**scores.agreement) for name, (_, scores) in criteria.items()}
        for task, criteria in judged.criteria.items()
    }


def filings_of(judged: JudgedScores) -> FilingScores:
    """Per filing, each task's judged criteria as the sums and counts their averages divide
    (what the leaderboard resamples to compare runs)."""
    columns = judged.columns
    filings = FilingScores(
        ids=judged.filing_ids,
        sums={task: {} for task in judged.criteria},
        counts={task: {} for task in judged.criteria},
    )
    for column, (task, name) in enumerate(columns):
        for kind, offset in (("sums", 0), ("counts", len(columns))):
            values = judged.bootstrap.filing_table[:, offset + column]
            getattr(filings, kind)[task][name] = [round(float(v), 6) for v in values]
    return filings


def _mean(values: list[float | None]) -> float | None:
    """The mean, None when any value is (as `averages.mean_of_averages`)."""
    if not values or None in values:
        return None
    return round(sum(values) / len(values), 4)
