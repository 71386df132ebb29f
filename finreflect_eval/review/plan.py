"""`review plan`: how many items people should label for a prediction-powered interval of a
given half-width, per task and criterion, for each way `review export --select` draws them:
uniformly, or by confidence (`stats.audit`).

The variance people's labels must pin down is that of their difference from the panel
(y − λ·ŷ): from the run's own audit labels where it has enough (a pilot), else from a stated
rate at which people and panel disagree (with λ = 1, a rate bounds that variance). Clustering
by filing inflates it: the panel's scores give the intraclass correlation ρ (from how much
their filing-clustered variance exceeds an independent one), and an audit of n items over G
filings has the design effect 1 + (n/G − 1)·ρ (`stats.human.labels_needed`).

A confidence-driven draw takes item i with a chance q_i per label (its weight's share), and a
label then weighs 1 / q_i: the per-label variance becomes Σ_i e_i / q_i / N², e_i the item's
expected (y − λ·ŷ)². Where the judges split, people and panel disagree more often: e_i is the
pilot's mean squared rectifier among the items of the same kind (split or unanimous) where the
pilot has `MIN_GROUP` of each, else the overall variance shared in proportion to
`SPLIT_FLOOR` + the item's dissent (an assumption, stated in docs/people.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.tables import markdown_table
from finreflect_eval.protocol.criteria import CRITERIA, CRITERION_NAMES
from finreflect_eval.runs.store import load_run
from finreflect_eval.scoring.compute import PanelFile, choose_panel, score_tables
from finreflect_eval.scoring.human import adjudicate, panel_items
from finreflect_eval.scoring.label_checks import audit_weights, judged, label_problems, votes_of
from finreflect_eval.stats import audit, averages, human, metrics

DEFAULT_DISAGREEMENT = 0.15
MIN_PILOT = 30  # audit labels below this say too little of the variance: the prior serves
MIN_GROUP = 10  # pilot labels of split (or unanimous) items from which their variance is taken
SPLIT_FLOOR = 0.1
"""Without a pilot that shows it, how much more often people disagree with the panel where its
judges split: in proportion to this + the share of dissenting votes (a unanimous item 0.1, a
2-1 split 0.43: 4.3 times as often)."""


@dataclass(frozen=True)
class PlanRow:
    task: str
    criterion: str
    panel: float | None
    needed: int | None
    """Random items to label (None: no number of labels reaches the half-width)."""
    needed_confidence: int | None
    """The same, drawn by confidence (`review export --select confidence`)."""
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
            label_problems(
                run.manifest, task, facts[task], task_labels, votes_of(panel, votes[task])
            )
            if task in facts
            else []
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
            weights = _item_weights(facts[task], votes[task], items)
            rows.append(
                _row(task, name, items, people, levels[name], halfwidth, disagreement, weights)
            )
    return rows


def _row(task, name, items, people, levels, halfwidth, disagreement, weights) -> PlanRow:
    scored = ~np.isnan(items.score)
    score, units = items.score[scored], items.units[scored]
    _, panel_stderr = human.panel_interval(score, units, items.n_units)
    groups = max(int(np.count_nonzero(np.bincount(units, minlength=items.n_units))), 1)
    rho = _intraclass(score, panel_stderr, groups)
    variance, lam, source, split_ratio = _rectifier(items, people, levels, disagreement)
    dissent = _dissent(items, scored)
    expected = _expected(variance, dissent, split_ratio)
    share = weights[scored] / weights[scored].sum() if len(score) else np.ones(0)
    by_confidence = float(np.sum(expected / share)) / len(score) ** 2 if len(score) else variance
    needed = [
        _needed(halfwidth, v, lam * (panel_stderr or 0.0), groups, rho)
        for v in (variance, by_confidence)
    ]
    panel = averages.pct(float(score.mean())) if len(score) else None
    return PlanRow(task, name, panel, needed[0], needed[1], int(scored.sum()), source)


def _needed(halfwidth, variance, panel_stderr, groups, rho) -> int | None:
    """Labels for the half-width, the design effect at its fixed point (it depends on n)."""
    needed = None
    for _ in range(20):
        deff = 1 + max((needed or 0) / groups - 1, 0) * rho
        new = human.labels_needed(
            halfwidth, rectifier_variance=variance, panel_stderr=panel_stderr, design_effect=deff
        )
        if new is None or new == needed:
            return new
        needed = new
    return needed


def _dissent(items, chosen: np.ndarray) -> np.ndarray:
    """The chosen items' dissent (`audit.dissent`); 0 for a rule's vote (no judge's), as a
    confidence-driven draw takes it."""
    codes = items.codes[chosen]
    ruled = (codes == metrics.ABSENT).all(axis=1)
    return np.where(ruled, 0.0, audit.dissent(codes))


def _expected(variance: float, dissent: np.ndarray, split_ratio: float | None) -> np.ndarray:
    """Each item's expected squared rectifier, averaging `variance`: split items `split_ratio`
    times the unanimous ones (the pilot's), else in proportion to SPLIT_FLOOR + dissent."""
    if split_ratio is not None:
        shape = np.where(dissent > 0, split_ratio, 1.0)
    else:
        shape = SPLIT_FLOOR + dissent
    return variance * shape / shape.mean() if len(shape) and shape.mean() > 0 else shape


def _item_weights(facts, table, items) -> np.ndarray:
    """Each item's weight in a confidence-driven draw (`label_checks.audit_weights`)."""
    triples, spans = audit_weights(facts, table)
    counts = facts.table.column("triples").combine_chunks().value_lengths().to_numpy()
    rows = np.searchsorted(facts.column("doc_id"), table.column("doc_id")[items.rows])
    is_span = table.criteria()[items.rows] == CRITERION_NAMES.index("comprehensiveness")
    flat = (np.cumsum(counts) - counts)[rows] + table.column("index")[items.rows]
    if not len(triples):  # a task without triples: its spans only
        return spans[rows]
    return np.where(is_span, spans[rows], triples[np.where(is_span, 0, flat)])


def _intraclass(score: np.ndarray, stderr: float | None, groups: int) -> float:
    """ρ of the panel's scores within filings, from their design effect (0 without one)."""
    if stderr is None or len(score) < 2 or groups < 2 or np.var(score) == 0:
        return 0.0
    deff = stderr**2 / (np.var(score, ddof=1) / len(score))
    per_group = len(score) / groups
    return float(np.clip((deff - 1) / (per_group - 1), 0, 1)) if per_group > 1 else 0.0


def _rectifier(items, people, levels, disagreement) -> tuple[float, float, str, float | None]:
    """The per-item variance of y − λ·ŷ, the λ, where they came from, and how many times
    larger it is on split items than on unanimous ones (the pilot's; None: not shown)."""
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
            squared = (y - lam * yhat - np.mean(y - lam * yhat)) ** 2
            split = _dissent(items, audited) > 0
            ratio = None
            if min(split.sum(), (~split).sum()) >= MIN_GROUP and squared[~split].mean() > 0:
                ratio = float(squared[split].mean() / squared[~split].mean())
            return variance, lam, f"{len(audited)} audit labels", ratio
    rate = DEFAULT_DISAGREEMENT if disagreement is None else disagreement
    source = f"disagreement {rate:g} (stated)" if disagreement else f"prior {rate:g}"
    return rate, 1.0, source, None


def plan_table(rows: list[PlanRow], halfwidth: float) -> str:
    """The plan as Markdown, one row per task and criterion."""
    header = [
        "Task",
        "Criterion",
        "Panel",
        "Label at random",
        "By confidence",
        "Of",
        "Variance from",
    ]
    kinds = {name: "spans" if c.per == "span" else "triples" for name, c in CRITERIA.items()}
    body = [
        [
            row.task,
            row.criterion,
            "n/a" if row.panel is None else f"{row.panel:.1f}",
            *(
                "impossible (the panel's own sampling error is wider)"
                if needed is None
                else f"{min(needed, row.of)} {kinds[row.criterion]}"
                + (" (all)" if needed >= row.of else "")
                for needed in (row.needed, row.needed_confidence)
            ),
            row.of,
            row.source,
        ]
        for row in rows
    ]
    title = (
        f"Labels for a PPI interval of ±{halfwidth:g} points (95%), drawn at random or by "
        "confidence (`review export --select confidence`):\n\n"
    )
    return title + markdown_table(header, body)
