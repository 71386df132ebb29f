"""The results' `human` block: the panel checked against people's labels (`review import`).

Per task and judged criterion: the people's labels adjudicated per item (the majority of its
annotators; a tie is left unresolved and counted), then each judge and the panel's majority
against them (`stats.human.agreement_with_people`), α with the people as one more coder, and,
from the random audit's labels, the prediction-powered (PPI++) estimate of the score people
would give, with its filing-clustered interval (`stats.human.ppi_mean`). The panel's side is
the items it scored (two valid votes or more), as its own score counts them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.protocol.criteria import CRITERIA, CRITERION_NAMES, EXTRACTION_METRICS
from finreflect_eval.records import (
    Agreement,
    CoderAgreement,
    HumanCheck,
    HumanLabel,
    Manifest,
)
from finreflect_eval.scoring.label_checks import SPAN, audit_design, label_problems, votes_of
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable
from finreflect_eval.stats import averages, human, metrics, uncertainty

PANEL = "panel"  # the panel's majority, as a coder beside the judges
# A triple criterion a task averages per span (macro) is not a mean over items: PPI estimates
# the item mean, so it says nothing of that score.
_NO_PPI = {"ppi": None, "ppi_ci": None, "ppi_stderr": None, "ppi_lambda": None}


@dataclass(frozen=True)
class Adjudicated:
    """One criterion's labelled items: their vote-table rows, people's label codes, samples."""

    rows: np.ndarray
    codes: np.ndarray
    audit: np.ndarray
    unresolved: int
    annotators: int


@dataclass(frozen=True)
class PanelItems:
    """One criterion's items as the panel decided them (the vote table's rows)."""

    rows: np.ndarray
    codes: np.ndarray
    """Items × judges; `metrics.ABSENT` where a rule, not the judge, gave the vote."""
    label: np.ndarray
    """The panel's majority label code; `metrics.ABSTAINED` where unscored."""
    score: np.ndarray
    units: np.ndarray
    """Each item's filing (an index below `n_units`)."""
    n_units: int


def human_checks(
    manifest: Manifest,
    span_facts: Mapping[str, SpanFacts],
    votes: Mapping[str, VoteTable],
    labels: Mapping[str, Sequence[HumanLabel]],
    *,
    panel: str,
    seed: int,
    iterations: int = uncertainty.BOOTSTRAP_ITERS,
) -> dict[str, dict[str, HumanCheck]]:
    """Per task with people's labels, per judged criterion they label: the check (`panel`:
    the panel `votes` are of)."""
    checks: dict[str, dict[str, HumanCheck]] = {}
    for task, task_labels in labels.items():
        if task not in span_facts or not task_labels:
            continue
        facts, table = span_facts[task], votes[task]
        task_votes = votes_of(panel, table)
        problems = label_problems(manifest, task, facts, task_labels, task_votes)
        if problems:
            raise FinReflectError(problems[0])
        design = audit_design(manifest, task, facts, task_labels, task_votes)
        confidence = any(label.audit_select == "confidence" for label in task_labels)
        _, span_units = uncertainty.units_of(facts.python_values("filing"))
        for spec in manifest.tasks[task].metric_list:
            name = spec.metric
            mine = [label for label in task_labels if label.criterion == name]
            if name in EXTRACTION_METRICS or not mine:
                continue
            items = panel_items(facts, table, name, spec.levels, span_units)
            people = adjudicate(table, items, mine)
            audit_size = None if design is None else design[0][CRITERIA[name].per == "span"]
            inclusion = (
                _item_inclusion(table, facts, items, design[1])
                if design is not None and confidence
                else None
            )
            aggregation = spec.aggregation or CRITERIA[name].aggregation
            per_item = CRITERIA[name].per == "span" or aggregation == "micro"
            checks.setdefault(task, {})[name] = _check(
                items, people, list(table.judges), name, spec.levels, seed, iterations, inclusion
            ).model_copy(update={"audit_size": audit_size} | ({} if per_item else _NO_PPI))
    return checks


def _item_inclusion(
    table: VoteTable,
    facts: SpanFacts,
    items: PanelItems,
    probability: Mapping[tuple[int, int], float],
) -> np.ndarray:
    """Each item's probability of entering the audit (0: it cannot)."""
    rows = np.searchsorted(facts.column("doc_id"), table.column("doc_id")[items.rows])
    spans = table.criteria()[items.rows] == CRITERION_NAMES.index("comprehensiveness")
    indices = np.where(spans, SPAN, table.column("index")[items.rows])
    keys = zip(rows.tolist(), indices.tolist(), strict=True)
    return np.array([probability.get(key, 0.0) for key in keys])


def panel_items(
    facts: SpanFacts,
    table: VoteTable,
    criterion: str,
    levels: Mapping[str, float] | None,
    span_units: np.ndarray | None = None,
) -> PanelItems:
    """The criterion's items with the panel's decision and each item's filing (`span_units`:
    each span's filing as an index, when the caller has them)."""
    rows = np.flatnonzero(table.criteria() == CRITERION_NAMES.index(criterion))
    codes = table.codes(rows)
    # A rule's vote (no triples: poor) is no judge's: the judges' agreement leaves it out.
    judged = np.where(table.column("synthetic")[rows][:, None], metrics.ABSENT, codes)
    scores = metrics.code_scores(levels)
    outcome = metrics.Outcomes.of(codes, np.full(len(rows), len(table.judges)), scores)
    if span_units is None:
        _, span_units = uncertainty.units_of(facts.python_values("filing"))
    spans = np.searchsorted(facts.column("doc_id"), table.column("doc_id")[rows])
    return PanelItems(
        rows=rows,
        codes=judged.astype(np.int8),
        label=np.where(outcome.scored, outcome.label, metrics.ABSTAINED),
        score=np.where(outcome.scored, outcome.score, np.nan),
        units=span_units[spans],
        n_units=int(span_units.max(initial=-1)) + 1,
    )


def adjudicate(table: VoteTable, items: PanelItems, labels: Sequence[HumanLabel]) -> Adjudicated:
    """People's labels of one criterion, one per item: the label more than half its annotators
    gave (`stats.human.majority`); an item without one is left out and counted. A label of an
    item the panel has no vote on (edited samples) is a one-line error."""
    positions = _item_positions(table, items, labels)
    by_item: dict[int, list[HumanLabel]] = {}
    for label, at in zip(labels, positions.tolist(), strict=True):
        if at < 0:
            raise FinReflectError(
                f"human label of span {label.span_id} ({label.criterion}, triple "
                f"{label.triple_index}): the panel has no vote on that item"
            )
        by_item.setdefault(at, []).append(label)
    rows, codes, audit, unresolved = [], [], [], 0
    for at, item_labels in sorted(by_item.items()):
        decided = human.majority([metrics.vote_code(label.label) for label in item_labels])
        if decided is None:
            unresolved += 1
            continue
        rows.append(at)
        codes.append(decided)
        audit.append(any(label.sample == "audit" for label in item_labels))
    return Adjudicated(
        rows=np.array(rows, dtype=np.int64),
        codes=np.array(codes, dtype=np.int64),
        audit=np.array(audit, dtype=bool),
        unresolved=unresolved,
        annotators=len({label.annotator for label in labels}),
    )


def _item_positions(
    table: VoteTable, items: PanelItems, labels: Sequence[HumanLabel]
) -> np.ndarray:
    """Each label's item (its place in `items`), -1 where the panel has none."""
    doc_ids, indices = table.column("doc_id")[items.rows], table.column("index")[items.rows]
    wanted_doc = np.array([label.doc_id for label in labels], dtype=np.int64)
    wanted_index = np.array([label.triple_index or 0 for label in labels], dtype=np.int64)
    width = int(max(indices.max(initial=0), wanted_index.max(initial=0))) + 1
    keys = doc_ids.astype(np.int64) * width + indices
    wanted = wanted_doc * width + wanted_index
    if not len(keys):
        return np.full(len(labels), -1)
    order = np.argsort(keys, kind="stable")
    place = np.minimum(np.searchsorted(keys[order], wanted), len(keys) - 1)
    return np.where(keys[order][place] == wanted, order[place], -1)


def _check(
    items: PanelItems,
    people: Adjudicated,
    judges: list[str],
    criterion: str,
    levels: Mapping[str, float] | None,
    seed: int,
    iterations: int,
    inclusion: np.ndarray | None = None,
) -> HumanCheck:
    """`inclusion`: each item's probability of entering a confidence-driven audit (None: the
    audit drew uniformly)."""
    scores = metrics.code_scores(levels)
    scored = ~np.isnan(items.score)
    audited = people.rows[people.audit & scored[people.rows]]
    human_score = dict(zip(people.rows.tolist(), scores[people.codes].tolist(), strict=True))
    ppi = human.ppi_mean(
        np.array([human_score[at] for at in audited.tolist()]),
        items.score[audited],
        items.units[audited],
        items.score[scored],
        items.units[scored],
        items.n_units,
        inclusion=None if inclusion is None else inclusion[audited],
        seed=seed,
        iterations=iterations,
    )
    # Agreement on the audit where it has labels: the flagged items are the hard ones.
    chosen = people.audit if people.audit.any() else np.ones(len(people.rows), bool)
    on = people.rows[chosen]
    codes = np.column_stack([items.codes[on], items.label[on]])
    units = items.units[on]
    agreement = human.agreement_with_people(
        codes,
        people.codes[chosen],
        units,
        items.n_units,
        coders=[*judges, PANEL],
        seed=seed,
        iterations=iterations,
    )
    alpha = human.alpha_with_people(
        items.codes[on],
        people.codes[chosen],
        units,
        items.n_units,
        ordered=CRITERIA[criterion].ordered,
        code_scores=scores,
        seed=seed if iterations else None,
        iterations=iterations,
    )
    return HumanCheck(
        labels=len(people.rows),
        audit_labels=int(people.audit.sum()),
        audit_size=None,  # (the caller's: how many the audit drew)
        unresolved=people.unresolved,
        annotators=people.annotators,
        panel=averages.pct(ppi.panel),
        ppi=averages.pct(ppi.estimate) if len(audited) else None,
        ppi_ci=_within_scale(ppi.ci) if len(audited) else None,
        ppi_stderr=averages.pct(ppi.stderr) if ppi.stderr is not None and len(audited) else None,
        ppi_lambda=None if ppi.lam is None or not len(audited) else round(ppi.lam, 4),
        agreement_on="audit" if people.audit.any() else "flagged",
        panel_agreement=CoderAgreement(**agreement.pop(PANEL)),
        judges={judge: CoderAgreement(**values) for judge, values in agreement.items()},
        alpha_with_people=Agreement(**alpha),
    )


def _within_scale(ci: list[float] | None) -> list[float] | None:
    """An interval on the 0–100 scale, cut to it (a mean of labels lies there: cutting keeps
    every interval that covered it)."""
    if ci is None:
        return None
    return [averages.pct(min(max(end, 0.0), 1.0)) for end in ci]
