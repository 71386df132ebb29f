"""Scores from a judged run: a pure function of its manifest and samples, used by `score` and by
the leaderboard to recompute a submission. Nothing here loads a model or writes a file.

Scoring reads typed tables (each task's `SpanFacts`, the panel's `VoteTable`s) and the manifest,
and makes the results one block at a time: each block is a step, a function of those tables
(`compute_results` lists them). The results follow lm-eval's results file: per task
`<metric>,none` and `<metric>_stderr,none` for the metrics of the task's `metric_list`; groups
as the unweighted mean of their tasks. The intervals resample filings
(`finreflect_eval.stats.uncertainty`); the items the panel split on, could not score or had no
majority for are `finreflect_eval.review.queue`'s queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.records import HumanLabel, Manifest, Prices, Results, SampleRecord
from finreflect_eval.records.downstream import DownstreamFile
from finreflect_eval.scoring.cost import cost_block
from finreflect_eval.scoring.downstream import downstream_block
from finreflect_eval.scoring.graph import graph_block
from finreflect_eval.scoring.groups import group_rows
from finreflect_eval.scoring.human import human_checks
from finreflect_eval.scoring.judged import (
    agreement_of,
    always_agree,
    bootstrap_seed,
    filings_of,
    overall_of,
    score_judged,
)
from finreflect_eval.scoring.run_info import judges_info, run_header, run_settings
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.task_blocks import task_bookkeeping, task_details, task_rows
from finreflect_eval.scoring.votes import VoteTable
from finreflect_eval.scoring.worth import worth_block
from finreflect_eval.stats import uncertainty


@dataclass(frozen=True)
class PanelFile:
    """A panel file given where a run's panel is asked for (`--judges FILE.yaml`): the run
    records its panel by the file's `panel` name, judged by the file's judges."""

    path: str
    panel: str
    judges: tuple[str, ...]


def choose_panel(manifest: Manifest, panel: str | PanelFile | None) -> str:
    """The panel to score: the one asked for (by name, or by its file: where the run records
    a panel of that name, its judges must be the file's, else it is another panel), or the
    run's only (or latest) panel."""
    if not manifest.judging:
        raise FinReflectError(
            "the samples have no votes yet; run `finreflect-eval judge --samples DIR --judges "
            "PANEL` first"
        )
    if panel is None:
        return list(manifest.judging)[-1]
    if isinstance(panel, PanelFile):
        recorded = manifest.judging.get(panel.panel)
        judges = [member.name for member in recorded.judges] if recorded else []
        if recorded is not None and set(panel.judges) != set(judges):
            raise FinReflectError(
                f"{panel.path}: panel '{panel.panel}' judged this run with the judges "
                f"{', '.join(judges)}; this file has {', '.join(panel.judges)}"
            )
        panel = panel.panel
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


def facts_from_records(
    records: dict[str, list[SampleRecord]], panels: Sequence[str] = ()
) -> dict[str, SpanFacts]:
    """Per task, what scoring reads of its records, with the judge calls of `panels`."""
    return {task: SpanFacts.from_records(rows, panels) for task, rows in records.items()}


def compute_results(
    manifest: Manifest,
    panel: str,
    span_facts: dict[str, SpanFacts],
    votes: dict[str, VoteTable],
    bootstrap_iters: int = uncertainty.BOOTSTRAP_ITERS,
    human_labels: Mapping[str, Sequence[HumanLabel]] | None = None,
    graphs: Mapping[str, dict] | None = None,
    prices: Prices | None = None,
    downstream: Mapping[str, DownstreamFile] | None = None,
) -> Results:
    """The results file of a judged run, for one panel (what it reads: see `score_tables`), one
    step per block; its intervals from `bootstrap_iters` resamples (0: none, as lm-eval). With
    people's labels (`review import`), the panel checked against them (`human`); `graphs`: each
    task's graph as the score index keeps it (`graph`; computed where not given); `prices`:
    the price table the `cost` block's money comes from (None: no money); `downstream`: the
    downstream stage's files of this panel, by task (`downstream`)."""
    judged = score_judged(manifest, panel, span_facts, votes, bootstrap_iters)
    human = human_checks(
        manifest,
        span_facts,
        votes,
        human_labels or {},
        panel=panel,
        seed=bootstrap_seed(manifest),
        iterations=bootstrap_iters,
    )
    tasks = task_rows(manifest, span_facts, judged)
    groups = group_rows(manifest, tasks, judged)
    config = run_settings(manifest, panel, bootstrap_iters)
    config.prices = prices
    return Results(
        results=groups | tasks,  # lm-eval's order: a group's row before its tasks'
        groups=groups,
        **task_bookkeeping(manifest, span_facts),
        config=config,
        **run_header(manifest, panel),
        details=task_details(manifest, panel, span_facts, votes, judged),
        overall=overall_of(judged),
        agreement=agreement_of(judged),
        filings=filings_of(judged),
        graph=graph_block(manifest, panel, span_facts, graphs),
        human=human,
        judges_worth=worth_block(
            manifest,
            span_facts,
            votes,
            human_labels or {},
            seed=bootstrap_seed(manifest),
            iterations=bootstrap_iters,
        ),
        downstream=downstream_block(
            manifest,
            span_facts,
            downstream or {},
            seed=bootstrap_seed(manifest),
            iterations=bootstrap_iters,
        ),
        cost=cost_block(manifest, panel, span_facts, prices),
        judges=judges_info(manifest, panel, always_agree(judged)),
        dataset=manifest.dataset,
        finreflect_eval_version=manifest.finreflect_eval_version,
    )
