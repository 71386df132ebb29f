"""How far the leaderboard's order can be trusted: paired comparisons of the entries scored on
the same spans, each entry's rank range, its ties, and the ranking's stability when one judge is
left out.

Entries are compared within a *comparison group*: the same section, the same dataset (content
fingerprint, split and slice: runs on it share their spans and filings) and the same judged parts
(every (task, criterion) pair of Overall); community and smoke entries also need a panel of the
same name (any panel may be submitted there, and two panels' scores measure different things).
Within a group the entries are compared pairwise on the filings they share, so what the
entries share (hard filings, easy ones) cancels in each difference: the interval of a difference
is far narrower than the two intervals side by side. The intervals of all the group's pairs are
simultaneous (`uncertainty.Comparison`: filing-clustered standard errors, a t multiplier with
G-1 degrees of freedom, Bonferroni over the pairs): two entries are *tied* when the interval of
their difference contains 0, and across the whole group the chance of showing any separation
between entries that are truly equal is at most 5%. Nothing is drawn at random, so no seed can
change a call. An entry's rank range runs from 1 + the entries surely better to the number of
entries not surely worse (as LMArena ranks models).

Everything here is recomputed from the stored entries' `results.filings` and `results.overall`,
which verification recomputes from the submitted votes: nothing on the page can be forged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from finreflect_eval.records import Results
from finreflect_eval.stats import uncertainty


@dataclass(frozen=True)
class Contender:
    """What an entry brings to a comparison (from its verified results)."""

    key: str  # the entry's run id
    model: str
    score: float | None  # Overall, ×100
    group: tuple  # entries compared with each other share it
    panel: str
    judges: tuple[str, ...]
    without_judge: dict[str, float | None]  # Overall without each judge, ×100
    filings: list[str]
    sums: np.ndarray  # filings × parts
    counts: np.ndarray

    @classmethod
    def of(cls, key: str, section: str, results: Results) -> Contender:
        filings = results.filings
        parts = (
            sorted((task, c) for task, per_task in filings.sums.items() for c in per_task)
            if filings
            else []
        )
        dataset = results.dataset
        group: tuple = (
            section,
            dataset.fingerprint,
            dataset.split,
            dataset.slice.name if dataset.slice else None,
            dataset.slice.model_dump_json() if dataset.slice else None,
            tuple(parts),
        )
        if section != "official":
            group += (results.judges.panel,)

        def table(kind: str) -> np.ndarray:
            if not filings:
                return np.zeros((0, 0))
            columns = [getattr(filings, kind)[task][c] for task, c in parts]
            return np.array(columns, dtype=float).T.reshape(len(filings.ids), len(parts))

        return cls(
            key=key,
            model=results.config.model_name,
            score=results.overall.score,
            group=group,
            panel=results.judges.panel,
            judges=tuple(member.name for member in results.judges.members),
            without_judge=dict(results.overall.without_judge),
            filings=list(filings.ids) if filings else [],
            sums=table("sums"),
            counts=table("counts"),
        )

    @property
    def comparable(self) -> bool:
        """Has a score and per-filing sums to resample."""
        return self.score is not None and len(self.filings) > 0 and self.sums.shape[1] > 0


@dataclass
class Standing:
    """An entry's place among the entries it is compared with."""

    place: int | None = None
    """1 + the entries of its group before it by Overall (ties in Overall by model name)."""
    rank_range: list[int] | None = None
    """[best, worst]: 1 + the entries surely better, the entries not surely worse."""
    tied_with: list[str] = field(default_factory=list)
    """The run ids of the entries whose difference interval with this one contains 0."""
    next_difference: float | None = None
    """Its Overall minus the next entry's (×100), and the difference's simultaneous 95% interval
    (`uncertainty.Comparison`)."""
    next_difference_ci: list[float] | None = None
    group_size: int = 1
    stability: dict[str, float | None] = field(default_factory=dict)
    """Per judge of its panel: Kendall's τ between the ranking by Overall and the ranking by
    Overall without that judge, over the entries of its group with its panel (empty: fewer than
    two such entries)."""


def standings(contenders: Sequence[Contender]) -> dict[str, Standing]:
    """Each contender's standing (by key) within its comparison group."""
    groups: dict[tuple, list[Contender]] = {}
    for contender in contenders:
        groups.setdefault(contender.group, []).append(contender)
    result = {}
    for members in groups.values():
        result.update(_group_standings(members))
    return result


def order(members: Sequence[Contender]) -> list[Contender]:
    """By Overall, highest first (no score last), then by model name."""
    return sorted(
        members,
        key=lambda c: (c.score is None, -(c.score or 0.0), c.model, c.key),
    )


def _group_standings(members: Sequence[Contender]) -> dict[str, Standing]:
    ranked = [c for c in order(members) if c.comparable]
    result = {c.key: Standing(group_size=len(members)) for c in members}
    if not ranked:
        return result
    comparison = uncertainty.compare([(c.score, c.filings, c.sums, c.counts) for c in ranked])
    for a, (contender, (best, worst)) in enumerate(
        zip(ranked, comparison.rank_ranges(), strict=True)
    ):
        standing = result[contender.key]
        standing.place = a + 1
        standing.rank_range = [best, worst]
        standing.tied_with = [
            other.key for b, other in enumerate(ranked) if b != a and comparison.tied(a, b)
        ]
        if a + 1 < len(ranked):
            _, ci = comparison.difference(a, a + 1)
            below = ranked[a + 1]
            standing.next_difference = round(contender.score - below.score, 2)
            standing.next_difference_ci = None if ci is None else [round(ci[0], 2), round(ci[1], 2)]
    panels: dict[tuple[str, tuple[str, ...]], list[Contender]] = {}
    for contender in ranked:
        panels.setdefault((contender.panel, contender.judges), []).append(contender)
    for (_, judges), same in panels.items():
        if len(same) < 2:
            continue
        stability = leave_one_judge_out(same, judges)
        for contender in same:
            result[contender.key].stability = stability
    return result


def leave_one_judge_out(
    contenders: Sequence[Contender], judges: Sequence[str]
) -> dict[str, float | None]:
    """Per judge: Kendall's τ-b between the entries' Overall and their Overall without that
    judge (None where undefined: a score missing, or either ranking constant)."""
    full = [c.score for c in contenders]
    stability: dict[str, float | None] = {}
    for judge in judges:
        without = [c.without_judge.get(judge) for c in contenders]
        if any(value is None for value in (*full, *without)):
            stability[judge] = None
            continue
        tau = uncertainty.kendall_tau(full, without)
        stability[judge] = None if tau is None else round(tau, 4)
    return stability


AUDIT_FAILED = "audit failed"  # a section of its own for comparing: no place among the ranked


def describe_group(group: tuple) -> str:
    """A comparison group in words: its dataset, tasks (and panel, outside the official
    section)."""
    _, fingerprint, split, slice_name, _, parts, *panel = group
    dataset = f"dataset {fingerprint[:8]} ({split}" + (
        f", slice {slice_name})" if slice_name else ")"
    )
    tasks = ", ".join(sorted({task for task, _ in parts})) or "none"
    failed = "; audit failed, not ranked" if group[0] == AUDIT_FAILED else ""
    return f"{dataset}; tasks {tasks}" + (f"; panel {panel[0]}" if panel else "") + failed
