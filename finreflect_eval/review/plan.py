"""`review plan`: how many random items people should label for a prediction-powered interval
of a given half-width, per task and criterion.

The variance people's labels must pin down is that of their difference from the panel
(y − λ·ŷ): from the run's own audit labels where it has enough (a pilot), else from a stated
rate at which people and panel disagree (with λ = 1, a rate bounds that variance). Clustering
by filing inflates it: the panel's scores give the intraclass correlation ρ (from how much
their filing-clustered variance exceeds an independent one), and an audit of n items over G
filings has the design effect 1 + (n/G − 1)·ρ (`stats.human.labels_needed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.tables import markdown_table
from finreflect_eval.protocol.criteria import CRITERIA
from finreflect_eval.runs.store import load_run
from finreflect_eval.scoring.compute import PanelFile, choose_panel, score_tables
from finreflect_eval.scoring.human import adjudicate, panel_items
from finreflect_eval.scoring.label_checks import judged, label_problems
from finreflect_eval.stats import human, metrics

DEFAULT_DISAGREEMENT = 0.15
MIN_PILOT = 30  # audit labels below this say too little of the variance: the prior serves


@dataclass(frozen=True)
class PlanRow:
    task: str
    criterion: str
    panel: float | None
    needed: int | None
    """Random items to label (None: no number of labels reaches the half-width)."""
    of: int
    """Items there are (triples, or spans for comprehensiveness)."""
    source: str
    """Where the variance came from: the run's audit labels, or the stated rate."""


def plan_run(
    path: Path, panel: str | PanelFile | None, halfwidth: float, disagreement: float | None
) -> list[PlanRow]:
    """Per task and judged criterion, the labels needed for a PPI interval of ± `halfwidth`
    points (0–100 scale), at 95%."""
    if not 0 < halfwidth < 100:
        raise FinReflectError(f"--halfwidth {halfwidth}: points of the 0-100 scale, above 0")
    if disagreement is not None and not 0 < disagreement <= 1:
        raise FinReflectError(f"--disagreement {disagreement}: a share between 0 and 1")
    run = load_run(path, for_scoring=True)
    panel = choose_panel(run.manifest, panel)
    facts, votes = score_tables(
        run.manifest, run.records, panel, run.span_facts, run.votes.get(panel)
    )
    labels = run.store.human_labels(run.manifest)
    for task, task_labels in labels.items():
        problems = (
            label_problems(run.manifest, task, facts[task], task_labels) if task in facts else []
        )
        if problems:
            raise FinReflectError(problems[0])
    rows = []
    for task in facts:
        levels = {m.metric: m.levels for m in run.manifest.tasks[task].metric_list}
        for name in judged(run.manifest, task):
            items = panel_items(facts[task], votes[task], name, levels[name])
            mine = [label for label in labels.get(task, []) if label.criterion == name]
            people = adjudicate(votes[task], items, mine) if mine else None
            rows.append(_row(task, name, items, people, levels[name], halfwidth, disagreement))
    return rows


def _row(task, name, items, people, levels, halfwidth, disagreement) -> PlanRow:
    scored = ~np.isnan(items.score)
    score, units = items.score[scored], items.units[scored]
    _, panel_stderr = human.panel_interval(score, units, items.n_units)
    groups = max(int(np.count_nonzero(np.bincount(units, minlength=items.n_units))), 1)
    rho = _intraclass(score, panel_stderr, groups)
    variance, lam, source = _rectifier(items, people, levels, disagreement)
    needed = None
    for _ in range(20):  # the design effect depends on n: to its fixed point
        deff = 1 + max((needed or 0) / groups - 1, 0) * rho
        new = human.labels_needed(
            halfwidth,
            rectifier_variance=variance,
            panel_stderr=lam * (panel_stderr or 0.0),
            design_effect=deff,
        )
        if new is None or new == needed:
            needed = new
            break
        needed = new
    panel = metrics.pct(float(score.mean())) if len(score) else None
    return PlanRow(task, name, panel, needed, int(scored.sum()), source)


def _intraclass(score: np.ndarray, stderr: float | None, groups: int) -> float:
    """ρ of the panel's scores within filings, from their design effect (0 without one)."""
    if stderr is None or len(score) < 2 or groups < 2 or np.var(score) == 0:
        return 0.0
    deff = stderr**2 / (np.var(score, ddof=1) / len(score))
    per_group = len(score) / groups
    return float(np.clip((deff - 1) / (per_group - 1), 0, 1)) if per_group > 1 else 0.0


def _rectifier(items, people, levels, disagreement) -> tuple[float, float, str]:
    """The per-item variance of y − λ·ŷ, the λ, and where they came from."""
    if people is not None and disagreement is None:
        audited = people.rows[people.audit & ~np.isnan(items.score[people.rows])]
        if len(audited) >= MIN_PILOT:
            codes = dict(zip(people.rows.tolist(), people.codes.tolist(), strict=True))
            y = metrics.code_scores(levels)[[codes[at] for at in audited.tolist()]]
            yhat = items.score[audited]
            pilot = human.ppi_mean(
                y, yhat, items.units[audited], yhat, items.units[audited], items.n_units
            )
            lam = pilot.lam or 0.0
            # As the PPI interval takes it: at least the variance of `UNSEEN` disagreements.
            rate = human.UNSEEN / (len(y) + 2 * human.UNSEEN)
            variance = max(float(np.var(y - lam * yhat, ddof=1)), rate * (1 - rate))
            return variance, lam, f"{len(audited)} audit labels"
    rate = DEFAULT_DISAGREEMENT if disagreement is None else disagreement
    return rate, 1.0, f"disagreement {rate:g} (stated)" if disagreement else f"prior {rate:g}"


def plan_table(rows: list[PlanRow], halfwidth: float) -> str:
    """The plan as Markdown, one row per task and criterion."""
    header = ["Task", "Criterion", "Panel", "Label at random", "Of", "Variance from"]
    kinds = {name: "spans" if c.per == "span" else "triples" for name, c in CRITERIA.items()}
    body = [
        [
            row.task,
            row.criterion,
            "n/a" if row.panel is None else f"{row.panel:.1f}",
            "impossible (the panel's own sampling error is wider)"
            if row.needed is None
            else f"{min(row.needed, row.of)} {kinds[row.criterion]}"
            + (" (all)" if row.needed >= row.of else ""),
            row.of,
            row.source,
        ]
        for row in rows
    ]
    return f"Labels for a PPI interval of ±{halfwidth:g} points (95%):\n\n" + markdown_table(
        header, body
    )
