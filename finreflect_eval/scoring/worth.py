"""The results' `judges_worth` block: per task and judged criterion, what the panel's votes are
worth (`stats.worth`): against the other judges always, against people where they labeled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from finreflect_eval.protocol.criteria import EXTRACTION_METRICS
from finreflect_eval.records import HumanLabel, Manifest
from finreflect_eval.records.worth import (
    CoderAgreement,
    ErrorPair,
    JudgesWorth,
    PeopleWorth,
    Worth,
)
from finreflect_eval.scoring.human import Adjudicated, PanelItems, adjudicate, panel_items
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable
from finreflect_eval.stats import human, uncertainty, worth

MAJORITY = "majority"


def worth_block(
    manifest: Manifest,
    span_facts: Mapping[str, SpanFacts],
    votes: Mapping[str, VoteTable],
    labels: Mapping[str, Sequence[HumanLabel]],
    *,
    seed: int,
    iterations: int = uncertainty.BOOTSTRAP_ITERS,
) -> dict[str, dict[str, JudgesWorth]]:
    """Per task, per judged criterion of its metric_list (with two judges or more)."""
    block: dict[str, dict[str, JudgesWorth]] = {}
    for task, facts in span_facts.items():
        table = votes[task]
        judges = list(table.judges)
        if len(judges) < 2:
            continue
        _, span_units = uncertainty.units_of(facts.python_values("filing"))
        for spec in manifest.tasks[task].metric_list:
            if spec.metric in EXTRACTION_METRICS:
                continue
            items = panel_items(facts, table, spec.metric, spec.levels, span_units)
            mine = [label for label in labels.get(task, []) if label.criterion == spec.metric]
            people = adjudicate(table, items, mine) if mine else None
            block.setdefault(task, {})[spec.metric] = JudgesWorth(
                panel=_against_panel(items, judges, seed, iterations),
                people=_against_people(items, people, judges, seed, iterations)
                if people is not None and len(people.rows)
                else None,
            )
    return block


def _against_panel(items: PanelItems, judges: list[str], seed: int, iterations: int) -> Worth:
    codes = items.codes.astype(np.int64)
    agreement = {
        judge: _agreement(
            codes[:, [j]], worth.others_majority(codes, (j,)), items, seed, iterations
        )
        for j, judge in enumerate(judges)
    }
    errors = worth.error_correlation(
        codes,
        lambda i, j: worth.others_majority(codes, (i, j)),
        items.units,
        items.n_units,
        seed=seed,
        iterations=iterations,
    )
    n_items = int((worth.others_majority(codes, ()) >= 0).sum())
    return Worth(**_errors(errors, judges), n_items=n_items, judges=agreement)


def _against_people(
    items: PanelItems, people: Adjudicated, judges: list[str], seed: int, iterations: int
) -> PeopleWorth:
    """On the audit's labels where there are any (as the human check's agreement)."""
    chosen = people.audit if people.audit.any() else np.ones(len(people.rows), bool)
    on = people.rows[chosen]
    codes = items.codes[on].astype(np.int64)
    truth = people.codes[chosen]
    units = items.units[on]
    coded = np.column_stack([codes, items.label[on]])
    agreement = human.agreement_with_people(
        coded,
        truth,
        units,
        items.n_units,
        coders=[*judges, MAJORITY],
        seed=seed,
        iterations=iterations,
    )
    errors = worth.error_correlation(
        codes, lambda i, j: truth, units, items.n_units, seed=seed, iterations=iterations
    )
    ranked = [j for j in judges if agreement[j]["accuracy"] is not None]
    best = max(
        ranked,
        key=lambda j: (agreement[j]["accuracy"], agreement[j]["kappa"] or -1.0),
        default=None,
    )
    difference, ci = None, None
    if best is not None:
        pair = coded[:, [judges.index(best), len(judges)]]
        difference, ci = worth.accuracy_difference(
            pair == truth[:, None],
            pair >= 0,
            units,
            items.n_units,
            seed=seed,
            iterations=iterations,
        )
    return PeopleWorth(
        **_errors(errors, judges),
        n_items=len(on),
        judges={judge: CoderAgreement(**agreement[judge]) for judge in judges},
        agreement_on="audit" if people.audit.any() else "flagged",
        majority=CoderAgreement(**agreement[MAJORITY]),
        best_judge=best,
        best_minus_majority=difference,
        best_minus_majority_ci=ci,
        best_as_good=None if ci is None else ci[1] >= 0,
    )


def _agreement(
    codes: np.ndarray, reference: np.ndarray, items: PanelItems, seed: int, iterations: int
) -> CoderAgreement:
    """One judge's column against a reference (negative: none, left out)."""
    values = human.agreement_with_people(
        codes,
        reference,
        items.units,
        items.n_units,
        coders=["judge"],
        seed=seed,
        iterations=iterations,
    )
    return CoderAgreement(**values["judge"])


def _errors(errors: worth.ErrorCorrelation, judges: list[str]) -> dict:
    return {
        "error_correlation": [
            ErrorPair(judges=[judges[i], judges[j]], n=n, correlation=r)
            for i, j, n, r in errors.pairs
        ],
        "mean_error_correlation": errors.mean,
        "mean_error_correlation_ci": errors.mean_ci,
        "effective_judges": errors.effective,
        "effective_judges_ci": errors.effective_ci,
    }
