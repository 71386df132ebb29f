"""The `judges_worth` block of the results: what a panel's votes are worth
(`finreflect_eval.stats.worth`), against the other judges always and against people where
they labeled."""

from __future__ import annotations

from finreflect_eval.records.base import Record


class CoderAgreement(Record):
    """One coder (a judge, or the panel's majority) against reference labels (people's
    adjudicated ones, or the other judges' majority)."""

    n: int
    """Items both labelled."""
    accuracy: float | None
    accuracy_ci: list[float] | None
    kappa: float | None
    """Cohen's kappa; None where chance agreement is certain (one label only)."""
    kappa_ci: list[float] | None
    confusion: dict[str, dict[str, int]]
    """Reference label → the coder's label (`abstained` where it gave none) → items."""


class ErrorPair(Record):
    judges: list[str]
    n: int
    """Items both judges and the reference labeled."""
    correlation: float | None
    """The phi correlation of their errors; None where one never errs (or always does)."""


class Worth(Record):
    """The panel's judges against one reference."""

    n_items: int
    """Items with a reference label."""
    error_correlation: list[ErrorPair]
    mean_error_correlation: float | None
    mean_error_correlation_ci: list[float] | None
    effective_judges: float | None
    """Kish's effective number of judges, k / (1 + (k − 1)·r̄): k for independent errors, 1 for
    errors that always coincide; capped at k (errors that go against each other)."""
    effective_judges_ci: list[float] | None
    judges: dict[str, CoderAgreement]
    """Each judge alone against the reference."""


class PeopleWorth(Worth):
    """Against people's adjudicated labels (the audit's where it has any)."""

    agreement_on: str
    """`audit` or `flagged`, as the human check's."""
    majority: CoderAgreement
    """The panel's majority against people."""
    best_judge: str | None
    """The judge that agrees with people best (accuracy, then κ)."""
    best_minus_majority: float | None
    """Its accuracy minus the majority's, in points, each on the items it labeled. (The best is
    picked on the same labels: the difference leans its way.)"""
    best_minus_majority_ci: list[float] | None
    best_as_good: bool | None
    """The interval reaches 0 or above: the best judge alone agrees with people as well as the
    panel (the panel's two other judges add nothing the labels can show)."""


class JudgesWorth(Record):
    panel: Worth
    """Against the panel: each judge against the strict majority of the others, each pair's
    errors against the majority of the judges outside it (with three judges, the third). A
    diagnostic: an error every judge makes is invisible here, and the third judge's own errors
    read as shared; only `people` measures errors against the truth."""
    people: PeopleWorth | None = None
    """Against people, where they labeled the criterion."""
