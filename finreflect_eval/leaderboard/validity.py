"""Does the benchmark's score track what a graph is for? Across the board's entries with both
main scores and a downstream block (the multi-hop QA track: `scoring.downstream`), Spearman's ρ
between each main score (faithfulness, precision, relevance, comprehensiveness, Overall) and
each downstream measure (evidence-edge recall, its entity-only form, path connectivity, the QA
scores per condition). Over comparable entries, one per model: each model's newest entry (by
run id, its date first; the older ones left out), and of those the largest group with the same
downstream tasks, QA settings (`DownstreamFile.qa`) and `max_hops` (the others set aside); the
report says how many of each, and which group. The interval is a seeded paired bootstrap: each
draw resamples the models and, once for every model alike, the filings (with replacement; all
the questions of a drawn filing, a question's filing its first hop's), each model's downstream
mean recomputed over the drawn questions it has (its main score kept). Said in plain words:
`undefined` under `MIN_MODELS` models, `weak` where |ρ| < 0.3 or the interval holds 0, else
`positive` or `negative`. What `finreflect-eval validity` prints and the page's validity
section shows; the row columns of the downstream block (`downstream_columns`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from finreflect_eval.leaderboard.entries import RunEntry
from finreflect_eval.records import Results
from finreflect_eval.records.downstream import (
    CONDITIONS,
    DownstreamFile,
    DownstreamScores,
    Measure,
    QuestionRecord,
)

MIN_MODELS = 5
WEAK = 0.3
DRAWS = 2000
SEED = 20240917
MAIN_SCORES = ("faithfulness", "precision", "relevance", "comprehensiveness", "overall")
MEASURES: dict[str, Callable[[DownstreamScores], Measure | None]] = {
    "evidence_recall": lambda scores: scores.evidence_recall,
    "evidence_recall_entities": lambda scores: scores.evidence_recall_entities,
    "path_connected": lambda scores: scores.path_connected,
    **{
        f"qa_{condition}": (lambda scores, c=condition: scores.qa.get(c))
        for condition in CONDITIONS
    },
}
DOWNSTREAM_COLUMNS = tuple(f"downstream_{name}" for name in MEASURES)
LABELS = {
    "faithfulness": "Faithfulness",
    "precision": "Precision",
    "relevance": "Relevance",
    "comprehensiveness": "Comprehensiveness",
    "overall": "Overall",
    "evidence_recall": "evidence recall",
    "evidence_recall_entities": "evidence recall (entities)",
    "path_connected": "path connected",
    "qa_model_graph": "QA: model graph",
    "qa_gold_path": "QA: gold path",
    "qa_hop_chunks": "QA: hop chunks",
}


def downstream_values(results: Results) -> dict[str, float | None]:
    """Per downstream measure, its value (percent) averaged over the entry's downstream tasks;
    None where no task has it."""
    values = {}
    for name, pick in MEASURES.items():
        found = [pick(scores) for scores in results.downstream.values()]
        present = [measure.value for measure in found if measure is not None]
        values[name] = round(sum(present) / len(present), 4) if present else None
    return values


def downstream_columns(results: Results) -> dict[str, float | None]:
    """The row's `downstream_*` columns (None throughout without a downstream block)."""
    values = downstream_values(results)
    return {f"downstream_{name}": value for name, value in values.items()}


def main_values(results: Results) -> dict[str, float | None]:
    """Per main score, the entry's value: each criterion averaged over its main tasks (not the
    downstream ones), and Overall."""
    main = [task for task in results.tasks if task not in results.downstream]
    values: dict[str, float | None] = {}
    for criterion in MAIN_SCORES[:-1]:
        found = [results.results.get(task, {}).get(f"{criterion},none") for task in main]
        present = [float(value) for value in found if value is not None]
        values[criterion] = sum(present) / len(present) if present else None
    values["overall"] = results.overall.score
    return values


def question_values(record: QuestionRecord) -> list[float]:
    """A question's value of each measure, in `MEASURES` order (0-1; NaN where undefined)."""
    qa = []
    for condition in CONDITIONS:
        answer = record.answers.get(condition)
        score = None if answer is None else answer.score
        qa.append(np.nan if score is None else score / 10)
    edges = [hop.edge for hop in record.evidence]
    entities = [hop.entities for hop in record.evidence]
    return [
        sum(edges) / len(edges),
        sum(entities) / len(entities),
        float(record.path.connected),
        *qa,
    ]


Setting = tuple[tuple[str, str, int], ...]
"""What makes entries' downstream parts comparable: per downstream task (sorted), its name, its
QA settings (JSON) and its `max_hops`."""


@dataclass(frozen=True)
class Entrant:
    """An entry with both main scores and a downstream block."""

    model: str
    run_id: str
    main: dict[str, float | None]
    downstream: dict[str, float | None]
    setting: Setting
    questions: dict[str, tuple[list[str], np.ndarray]]
    """Per downstream task with questions: their filings, and their values (questions ×
    measures)."""


@dataclass(frozen=True)
class Cell:
    """ρ between a main score and a downstream measure, with its interval and verdict."""

    score: str
    measure: str
    models: int
    rho: float | None
    ci: list[float] | None
    verdict: str
    words: str


def entrants(entries: Sequence[RunEntry]) -> list[Entrant]:
    """The entries with both main scores and a downstream block, in the order given."""
    found = []
    for entry in entries:
        results = entry.shown.results
        main = main_values(results)
        if not results.downstream or all(value is None for value in main.values()):
            continue
        files: dict[str, DownstreamFile] = entry.submission.downstream
        setting = []
        for task, block in sorted(results.downstream.items()):
            file = files.get(task)
            qa, hops = (file.qa, file.max_hops) if file else (block.qa_settings, block.max_hops)
            setting.append((task, json.dumps(qa.model_dump(mode="json"), sort_keys=True), hops))
        questions = {
            task: (
                [record.question.filing for record in files[task].questions],
                np.array([question_values(r) for r in files[task].questions], dtype=float),
            )
            for task in sorted(results.downstream)
            if task in files and files[task].questions
        }
        found.append(
            Entrant(
                entry.model,
                entry.run_id,
                main,
                downstream_values(results),
                tuple(setting),
                questions,
            )
        )
    return found


def newest(found: Sequence[Entrant]) -> tuple[list[Entrant], int]:
    """Each model's newest entry (the greatest run id: its date first), in the order given, and
    how many were left out as older runs of a model."""
    kept = {}
    for entrant in found:
        if entrant.model not in kept or entrant.run_id > kept[entrant.model].run_id:
            kept[entrant.model] = entrant
    chosen = [entrant for entrant in found if kept[entrant.model] is entrant]
    return chosen, len(found) - len(chosen)


def comparable(found: Sequence[Entrant]) -> tuple[list[Entrant], Setting | None]:
    """The largest group of entries with the same `Setting` (of two as large, the one with the
    newest run) and its setting; None where there is no entry."""
    if not found:
        return [], None
    sizes = Counter(entrant.setting for entrant in found)
    latest = {}
    for entrant in found:
        latest[entrant.setting] = max(latest.get(entrant.setting, ""), entrant.run_id)
    setting = max(sizes, key=lambda each: (sizes[each], latest[each]))
    return [entrant for entrant in found if entrant.setting == setting], setting


def group_words(setting: Setting) -> str:
    """The comparable group, in words."""
    tasks = []
    for task, qa, hops in setting:
        asked = json.loads(qa)
        tasks.append(
            f"{task} (QA model {asked['name']}: {asked['model']} on {asked['backend']}, prompt "
            f"{asked['prompt_sha'][:12]}, {asked['budget_tokens']} context tokens, "
            f"{asked['neighbourhood_hops']} neighbourhood hops, paths within {hops} hops)"
        )
    return f"downstream task{'s' if len(tasks) > 1 else ''} " + "; ".join(tasks)


@dataclass(frozen=True)
class Validity:
    """The board's validity check: who took part, and a cell per main score and measure."""

    models: list[dict[str, Any]]
    """Per model taking part (its newest entry, in the comparable group): model, run id, main
    scores and downstream values."""
    cells: list[Cell]
    draws: int
    seed: int
    min_models: int = MIN_MODELS
    older: int = 0
    """Entries left out as older runs of a model."""
    set_aside: int = 0
    """Models' newest entries set aside as not comparable with the group."""
    group: Setting | None = None
    """The comparable group's setting (None: no entry has both)."""

    @property
    def notes(self) -> list[str]:
        """Who was left out, and the group, in words."""
        older = f"{self.older} older run{'s' if self.older != 1 else ''} of a model"
        notes = [f"One entry per model, its newest run: {older} left out."]
        if self.group is not None:
            aside = f"{self.set_aside} entr{'ies' if self.set_aside != 1 else 'y'}"
            notes.append(
                f"Comparable entries only: {group_words(self.group)}; {aside} set aside "
                "(other downstream tasks, QA settings or max_hops)."
            )
        return notes

    def as_json(self) -> dict[str, Any]:
        group = None
        if self.group is not None:
            group = {
                task: {"qa": json.loads(qa), "max_hops": hops} for task, qa, hops in self.group
            }
        return {
            "models": self.models,
            "cells": [asdict(cell) for cell in self.cells],
            "draws": self.draws,
            "seed": self.seed,
            "min_models": self.min_models,
            "weak_below": WEAK,
            "older_runs_left_out": self.older,
            "set_aside": self.set_aside,
            "group": group,
            "notes": self.notes,
        }


def validity(entries: Sequence[RunEntry], draws: int = DRAWS, seed: int = SEED) -> Validity:
    """Spearman's ρ of every main score against every downstream measure over the comparable
    entries with both, one per model, each with its bootstrap interval and verdict (see the
    module)."""
    everyone, older = newest(entrants(entries))
    found, setting = comparable(everyone)
    cells = []
    booted: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    for score in MAIN_SCORES:
        for column, measure in enumerate(MEASURES):
            chosen = tuple(
                i
                for i, entrant in enumerate(found)
                if entrant.main[score] is not None and entrant.downstream[measure] is not None
            )
            x = [found[i].main[score] for i in chosen]
            y = [found[i].downstream[measure] for i in chosen]
            rho, ci = None, None
            if len(chosen) >= MIN_MODELS:
                rho = _rho(x, y)
                if rho is not None:
                    if chosen not in booted:
                        booted[chosen] = bootstrap([found[i] for i in chosen], draws, seed)
                    picks, down = booted[chosen]
                    ci = _interval(np.array(x)[picks], down[:, :, column])
            same = [name for name, side in ((score, x), (measure, y)) if len(set(side)) < 2]
            cells.append(_cell(score, measure, len(chosen), rho, ci, same))
    models = [
        {"model": e.model, "run_id": e.run_id, "main": e.main, "downstream": e.downstream}
        for e in found
    ]
    aside = len(everyone) - len(found)
    return Validity(models, cells, draws, seed, MIN_MODELS, older, aside, setting)


def _rho(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's ρ; None where either side is the same for every model."""
    if len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return round(float(stats.spearmanr(x, y).statistic), 4)


def bootstrap(chosen: list[Entrant], draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The paired bootstrap: the models drawn (draws × models, indices into `chosen`) and, per
    drawn model, its downstream values over the draw's filings (draws × models × measures,
    percent). One generator seeded with `seed` draws the models, `integers(0, models, (draws,
    models))`, then the filings (all the models' filings, sorted), `integers(0, filings, (draws,
    filings))`, the same filings for every model; a model's value in a draw is, per task, the
    mean of its defined values over the drawn filings' questions (a filing drawn twice counts
    twice), averaged over its tasks, rounded to 9 decimals (equal means tie)."""
    rng = np.random.default_rng(seed)
    n = len(chosen)
    picks = rng.integers(0, n, size=(draws, n))
    filings = sorted({f for e in chosen for names, _ in e.questions.values() for f in names})
    tasks = sorted({task for entrant in chosen for task in entrant.questions})
    means = np.full((draws, n, len(MEASURES)), np.nan)
    if filings:
        drawn = rng.integers(0, len(filings), size=(draws, len(filings)))
        sums, counts = _per_filing(chosen, filings, tasks)
        counts, which = np.unique(counts, axis=1, return_inverse=True)  # (most columns alike)
        both = np.concatenate([sums, counts], axis=1)
        for start in range(0, draws, 256):  # (bounded memory)
            rows = drawn[start : start + 256]
            offsets = rows + len(filings) * np.arange(len(rows))[:, None]
            weights = np.bincount(offsets.ravel(), minlength=rows.size).reshape(rows.shape)
            product = weights.astype(float) @ both
            total, defined = product[:, : sums.shape[1]], product[:, sums.shape[1] :][:, which]
            task_means = np.divide(
                total, defined, out=np.full(total.shape, np.nan), where=defined > 0
            ).reshape(len(rows), n, len(tasks), len(MEASURES))
            means[start : start + len(rows)] = 100 * _nanmean(task_means, axis=2)
    down = np.take_along_axis(np.round(means, 9), picks[:, :, None], axis=1)
    return picks, down


def _per_filing(
    chosen: list[Entrant], filings: list[str], tasks: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Per filing (rows), the sum and the count of each model's defined values of each task's
    questions on it (columns: models × tasks × measures)."""
    shape = (len(filings), len(chosen), len(tasks), len(MEASURES))
    sums, counts = np.zeros(shape), np.zeros(shape)
    for i, entrant in enumerate(chosen):
        for j, task in enumerate(tasks):
            if task not in entrant.questions:
                continue
            names, values = entrant.questions[task]
            where = np.searchsorted(filings, names)
            defined = ~np.isnan(values)
            for m in range(len(MEASURES)):
                ok = defined[:, m]
                sums[:, i, j, m] = np.bincount(
                    where[ok], weights=values[ok, m], minlength=len(filings)
                )
                counts[:, i, j, m] = np.bincount(where[ok], minlength=len(filings))
    return sums.reshape(len(filings), -1), counts.reshape(len(filings), -1)


def _nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    """The mean of the defined values (NaN where none is), without numpy's warning."""
    defined = ~np.isnan(values)
    counts = defined.sum(axis=axis)
    sums = np.where(defined, values, 0.0).sum(axis=axis)
    return np.divide(sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0)


def _interval(x: np.ndarray, y: np.ndarray) -> list[float] | None:
    """The 95% percentile interval of ρ over the draws (rows) that rank both sides; None where
    under half of them do."""
    valid = ~np.isnan(y).any(axis=1)
    x, y = x[valid], y[valid]
    rx, ry = stats.rankdata(x, axis=1), stats.rankdata(y, axis=1)  # Spearman: ranks' Pearson
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    spread = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    rhos = (rx * ry).sum(axis=1)[spread > 0] / spread[spread > 0]
    if len(rhos) < len(valid) / 2:
        return None
    low, high = np.percentile(np.clip(rhos, -1.0, 1.0), [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def _cell(
    score: str,
    measure: str,
    models: int,
    rho: float | None,
    ci: list[float] | None,
    same: Sequence[str] = (),
) -> Cell:
    """The cell and its verdict in words (`same`: the sides equal for every model)."""
    pair = f"{LABELS[score]} and {LABELS[measure]}"
    if models < MIN_MODELS:
        words = f"undefined: {models} models have both {pair} (at least {MIN_MODELS} needed)"
        return Cell(score, measure, models, None, None, "undefined", words)
    if rho is None:  # (no rank order on a side that never changes)
        which = " and ".join(LABELS[name] for name in same)
        verb = "are" if len(same) > 1 else "is"
        words = f"undefined: {which} {verb} the same for all {models} models (no ranking)"
        return Cell(score, measure, models, None, None, "undefined", words)
    said = f"ρ {rho:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "") + f", {models} models"
    why = [f"|ρ| under {WEAK}"] if abs(rho) < WEAK else []
    if ci is None:
        why.append("no interval (the draws do not vary)")
    elif ci[0] <= 0 <= ci[1]:
        why.append("its interval contains 0")
    if why:
        words = (
            f"weak ({said}; {', '.join(why)}): {LABELS[score]} says little about {LABELS[measure]}"
        )
        return Cell(score, measure, models, rho, ci, "weak", words)
    verdict = "positive" if rho > 0 else "negative"
    better = "better" if rho > 0 else "worse"
    words = (
        f"{verdict} ({said}): models scoring higher on {LABELS[score]} do {better} on "
        f"{LABELS[measure]}"
    )
    return Cell(score, measure, models, rho, ci, verdict, words)


def markdown(report: Validity) -> str:
    """The report as a Markdown table (what `finreflect-eval validity` prints)."""
    lines = [
        f"Validity: Spearman's ρ over {len(report.models)} models with main scores and a "
        f"downstream block (95% interval: {report.draws} paired draws, each resampling the "
        "models and, the same for every model, the filings with all their questions, seed "
        f"{report.seed}; under {report.min_models} models: undefined)",
        *report.notes,
        "",
        "| main score | downstream measure | models | ρ | 95% interval | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for cell in report.cells:
        rho = "—" if cell.rho is None else f"{cell.rho:+.2f}"
        ci = "—" if cell.ci is None else f"[{cell.ci[0]:+.2f}, {cell.ci[1]:+.2f}]"
        words = cell.words.replace("|", "\\|")  # (|ρ|)
        lines.append(
            f"| {LABELS[cell.score]} | {LABELS[cell.measure]} | {cell.models} | {rho} | {ci} | "
            f"{words} |"
        )
    return "\n".join(lines) + "\n"
