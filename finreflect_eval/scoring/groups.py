"""The groups' rows of the results, as lm-eval writes them: each metric the unweighted mean over
the group's tasks. The tasks of a group share their spans and filings, so their errors move
together and lm-eval's pooled standard error (as if the tasks were independent) is too small:
a judged criterion's stderr, and the group's overall score, come from the run's one filing
bootstrap, resampling the filings for all the group's tasks together (`GROUP_STDERR`)."""

from __future__ import annotations

import math
from typing import Any

from finreflect_eval.protocol.criteria import CRITERIA
from finreflect_eval.records import Manifest, Percent
from finreflect_eval.scoring.judged import JudgedScores
from finreflect_eval.scoring.task_blocks import NOT_AVAILABLE, metrics_of
from finreflect_eval.stats import averages

GROUP_STDERR = (
    "judged criteria and overall: one filing bootstrap over all the group's tasks together; "
    "other metrics: lm-eval's pooled formula (independent tasks)"
)


def group_rows(
    manifest: Manifest, rows: dict[str, dict[str, Any]], judged: JudgedScores
) -> dict[str, dict[str, Any]]:
    """lm-eval's row of each group, from its tasks' rows (`task_rows`): their metrics' means
    and the group's `overall,none`."""
    groups = {}
    for group, members in manifest.groups.items():
        members = [t for t in members if t in rows]
        mine = [i for i, (task, _) in enumerate(judged.columns) if task in members]
        score = averages.mean_of_averages(judged.parts(members))
        stderr = judged.bootstrap.overall(mine)["stderr"] if score is not None else None
        groups[group] = _group_entry(manifest, group, members, rows, judged) | _overall_metric(
            score, stderr
        )
    return groups


def _group_entry(
    manifest: Manifest,
    group: str,
    members: list[str],
    rows: dict[str, dict[str, Any]],
    judged: JudgedScores,
) -> dict[str, Any]:
    """A group's row as lm-eval writes it: each metric the unweighted mean over the tasks that
    have it; a judged criterion's stderr from the joint filing bootstrap, another metric's that
    of an unweighted mean of independent estimates (N/A where a task's is); `sample_len` the
    tasks' spans and `sample_count` per metric."""
    entry: dict[str, Any] = {"name": group, "alias": group}
    entry["sample_len"] = sum(rows[t]["sample_len"] for t in members)
    counts = {}
    for metric in metrics_of(manifest, members):
        having = [t for t in members if rows[t].get(f"{metric},none") is not None]
        values = [rows[t][f"{metric},none"] for t in having]
        entry[f"{metric},none"] = round(sum(values) / len(values), 4) if values else None
        entry[f"{metric}_stderr,none"] = _stderr(metric, having, rows, judged)
        counts[f"{metric},none"] = sum(rows[t]["sample_len"] for t in having)
    entry["sample_count"] = counts
    return entry


def _stderr(
    metric: str, tasks: list[str], rows: dict[str, dict[str, Any]], judged: JudgedScores
) -> float | str:
    columns = [
        i for i, (task, name) in enumerate(judged.columns) if name == metric and task in tasks
    ]
    if metric in CRITERIA:
        stderr = judged.bootstrap.overall(columns)["stderr"] if columns else None
        return NOT_AVAILABLE if stderr is None else stderr
    errors = [rows[t].get(f"{metric}_stderr,none") for t in tasks]
    if not errors or not all(isinstance(e, int | float) for e in errors):
        return NOT_AVAILABLE
    return round(math.sqrt(sum(e * e for e in errors)) / len(errors), 4)


def _overall_metric(score: Percent, stderr: float | None) -> dict:
    """A group's overall score (the mean of its tasks' judged criteria, bootstrapped jointly
    over their filings) as a metric of its row."""
    stderr = NOT_AVAILABLE if stderr is None else stderr
    return {"overall,none": score, "overall_stderr,none": stderr}
