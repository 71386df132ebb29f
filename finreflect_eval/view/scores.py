"""What the report's Scores and Settings tabs show of a run's results (or two runs' side by
side): scores with their intervals as SVG bars, per-judge scores, α, leave-one-judge-out, the
differences of two runs with paired intervals, and every setting; values formatted for the page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from finreflect_eval.protocol.criteria import CRITERIA, EXTRACTION_METRICS, level_shares
from finreflect_eval.records import CriterionDetail
from finreflect_eval.stats import uncertainty
from finreflect_eval.view.people import human_context
from finreflect_eval.view.source import ViewRun
from finreflect_eval.view.spans import dumps

# What the report shows of a results file elsewhere, left out of its settings.
SHOWN_ELSEWHERE = {
    "results",
    "details",
    "overall",
    "agreement",
    "filings",
    "higher_is_better",
    "human",
    "cost",  # the Cost tab
}


def number(value: Any, digits: int = 1) -> str:
    if value is None or isinstance(value, str):
        return "—" if value is None else value
    return f"{value:.{digits}f}".replace("-", "−")


def signed(value: Any, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value:+.{digits}f}".replace("-", "−")


def interval_text(ci: Sequence[float] | None, digits: int = 1) -> str:
    if not ci:
        return "—"
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]".replace("-", "−")


# chart geometry: 0..100 over PLOT_WIDTH, after the labels
CHART_WIDTH, LABEL_WIDTH, PLOT_WIDTH, ROW = 640, 150, 420, 26


def _x(value: float) -> float:
    return round(LABEL_WIDTH + PLOT_WIDTH * min(max(value, 0.0), 100.0) / 100.0, 2)


def chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """An interval chart: per row (`label`, `score`, `ci`, `ci_span`, `kind`) a point with the
    filing interval (thick) and the span interval (thin), on a 0–100 axis."""
    marks = []
    for position, row in enumerate(rows):
        y = 24 + position * ROW
        score = row["score"]
        mark = {
            "y": y,
            "label": row["label"],
            "kind": row.get("kind", "a"),
            "score": score,
            "x": None if score is None else _x(score),
            "text": number(score),
        }
        for key in ("ci", "ci_span"):
            ci = row.get(key)
            mark[key] = (_x(ci[0]), _x(ci[1])) if ci else None
        marks.append(mark)
    ticks = [{"x": _x(v), "v": v} for v in (0, 25, 50, 75, 100)]
    height = 24 + len(rows) * ROW
    return {
        "width": CHART_WIDTH,
        "height": height,
        "rows": marks,
        "ticks": ticks,
        "bottom": height - 12,
        "value_x": LABEL_WIDTH + PLOT_WIDTH + 12,
    }


def level_text(detail: CriterionDetail) -> dict[str, str] | None:
    """For comprehensiveness: the shares of the scored spans at each level, and the score each
    level counts for (`good 40% · partial 35% · poor 25%`, `good 1 · partial 0.5 · poor 0`)."""
    shares = level_shares(detail.level_counts)
    if shares is None or not detail.levels:
        return None
    return {
        "shares": " · ".join(f"{level} {share:.0f}%" for level, share in shares.items()),
        "scores": " · ".join(f"{level} {score:g}" for level, score in detail.levels.items()),
    }


def run_context(run: ViewRun, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """What the template shows of one run: its scores per task and criterion, agreement,
    extraction metrics, the check against people where it has one, and settings."""
    results = run.results
    shown = []
    for info in tasks:
        task = info["name"]
        details = results.details.get(task)
        if details is None:
            continue
        row_scores = results.results.get(task, {})
        criteria = []
        for name in run.criteria(task):
            detail = details.criteria[name]
            score = row_scores.get(f"{name},none")
            agreement = results.agreement.get(task, {}).get(name)
            criteria.append(
                {
                    "name": name,
                    "letter": CRITERIA[name].letter,
                    "aggregation": detail.aggregation,
                    "score": score,
                    "ci": detail.ci,
                    "ci_span": detail.ci_span,
                    "ci_unreliable": detail.ci_reliable is False,
                    "per_judge": detail.per_judge,
                    "shift": {
                        judge: None if value is None or score is None else value - score
                        for judge, value in detail.without_judge.items()
                    },
                    "without_judge": detail.without_judge,
                    "counts": detail.items,
                    "agreement": agreement,
                    "levels": level_text(detail),
                    "human": results.human.get(task, {}).get(name),
                    "worth": results.judges_worth.get(task, {}).get(name),
                }
            )
        extraction = [
            (metric, row_scores.get(f"{metric},none"), EXTRACTION_METRICS[metric].description)
            for metric in details.metrics
            if metric in EXTRACTION_METRICS
        ]
        shown.append(
            {
                "name": task,
                "dir": task,
                "mode": details.mode,
                "criteria": criteria,
                "chart": chart(
                    [
                        {"label": c["name"], **{k: c[k] for k in ("score", "ci", "ci_span")}}
                        for c in criteria
                    ]
                ),
                "extraction": extraction,
                "details": details,
                "overall": results.overall.tasks.get(task),
                "human": human_context(results, task, run.criteria(task), run.judges),
            }
        )
    settings = results.model_dump(mode="json", by_alias=True, exclude=SHOWN_ELSEWHERE)
    return {
        "label": run.label,
        "model": results.config.model_name,
        "panel": run.panel,
        "official": results.judges.official,
        "panel_note": results.judges.note(),
        "always_agree": results.judges.always_agree,
        "run": results.run,
        "judges": run.judges,
        "datasets": task_datasets(run, [task["name"] for task in shown]),
        "all_failed": _all_failed(run, [task["name"] for task in shown]),
        "overall": results.overall,
        "tasks": shown,
        "settings": settings,
    }


def task_datasets(run: ViewRun, tasks: Sequence[str]) -> list[dict[str, Any]]:
    """The datasets the tasks read (`info`), each once with its tasks, in task order: one for
    most runs; tasks on other datasets, or other versions of one, show each."""
    groups: dict[str, dict[str, Any]] = {}
    for task in tasks:
        entry = run.manifest.tasks.get(task)
        info = entry.dataset if entry else run.results.dataset
        groups.setdefault(info.model_dump_json(), {"info": info, "tasks": []})["tasks"].append(task)
    return list(groups.values()) or [{"info": run.results.dataset, "tasks": []}]


def _all_failed(run: ViewRun, tasks: Sequence[str]) -> dict[str, Any] | None:
    """Where no extraction of the tasks succeeded: how many there were and the first error
    recorded (its scores judge empty outputs); else None."""
    details = [run.results.details[task] for task in tasks]
    spans = sum(detail.n_spans for detail in details)
    if not spans or sum(detail.failed_extractions for detail in details) < spans:
        return None
    first = next((detail.failures.first for detail in details if detail.failures.first), "")
    return {"spans": spans, "first": first}


def compare_context(runs: Sequence[ViewRun], tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Per task and criterion, both runs' scores and B − A with its paired interval (on the
    same filings: `uncertainty.compare`), α of both; and the settings that differ."""
    a, b = runs
    shown = []
    for info in tasks:
        task = info["name"]
        rows, chart_rows = [], []
        for name in info["criteria"]:
            scores = [run.results.results.get(task, {}).get(f"{name},none") for run in runs]
            details = [run.results.details[task].criteria.get(name) for run in runs]
            difference, ci = _paired(runs, task, name, scores)
            rows.append(
                {
                    "name": name,
                    "scores": scores,
                    "cis": [d.ci if d else None for d in details],
                    "difference": difference,
                    "difference_ci": ci,
                    "alphas": [run.results.agreement.get(task, {}).get(name) for run in runs],
                }
            )
            for kind, score, detail in zip(("a", "b"), scores, details, strict=True):
                chart_rows.append(
                    {
                        "label": f"{name} ({kind.upper()})",
                        "score": score,
                        "ci": detail.ci if detail else None,
                        "ci_span": detail.ci_span if detail else None,
                        "kind": kind,
                    }
                )
        shown.append({"name": task, "rows": rows, "chart": chart(chart_rows)})
    flat = [
        _flatten(run.results.model_dump(mode="json", by_alias=True, exclude=SHOWN_ELSEWHERE))
        for run in runs
    ]
    differing = [
        (key, flat[0].get(key), flat[1].get(key))
        for key in sorted(flat[0].keys() | flat[1].keys())
        if flat[0].get(key) != flat[1].get(key)
    ]
    same_tasks = set(a.tasks) == set(b.tasks)
    return {"tasks": shown, "settings": differing, "same_tasks": same_tasks}


def _paired(
    runs: Sequence[ViewRun], task: str, criterion: str, scores: list
) -> tuple[float | None, list[float] | None]:
    if any(score is None for score in scores):
        return None, None
    parts = []
    for run, score in zip(runs, scores, strict=True):
        filings = run.results.filings
        if filings is None or criterion not in filings.sums.get(task, {}):
            return scores[1] - scores[0], None
        sums = np.asarray(filings.sums[task][criterion], dtype=float).reshape(-1, 1)
        counts = np.asarray(filings.counts[task][criterion], dtype=float).reshape(-1, 1)
        parts.append((score, list(filings.ids), sums, counts))
    comparison = uncertainty.compare(parts)
    difference, ci = comparison.difference(1, 0)
    return round(difference, 4), None if ci is None else [round(ci[0], 4), round(ci[1], 4)]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: dumps(value) if isinstance(value, (list, dict)) else value}


# --- the folder ---
