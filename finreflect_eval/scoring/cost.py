"""The results' `cost` block: what each task's model calls used, summed from the spans' facts
(`SpanFacts`' `usage` columns, themselves sums of the samples' calls), and priced with the
run's price table where one is given."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from finreflect_eval.records import Manifest
from finreflect_eval.records.cost import (
    JudgeUsage,
    Prices,
    StageUsage,
    TaskCost,
    Usage,
    UsageRate,
)
from finreflect_eval.scoring.span_facts import USAGE_COUNTS, SpanFacts

_SUMMED = (*USAGE_COUNTS, "seconds")


def cost_block(
    manifest: Manifest,
    panel: str,
    span_facts: Mapping[str, SpanFacts],
    prices: Prices | None = None,
) -> dict[str, TaskCost]:
    """Per task, its cost: the extraction's calls (a separate normaliser's apart) and each
    judge's of `panel`, per criterion; money where `prices` names the model."""
    judges = {member.name: member.model for member in manifest.judging[panel].judges}
    block = {}
    for task, facts in span_facts.items():
        steps = _flat(facts, "usage")
        normaliser = (manifest.tasks[task].config.get("normalizer_model") or {}).get("model")
        normalising = pc.equal(steps["step"], "normalize")
        if normaliser is not None:  # its calls are another model's, at its prices
            normalizer = _priced(
                StageUsage(model=normaliser, **_sums(steps.filter(normalising))), prices
            )
            steps = steps.filter(pc.invert(normalising))
        extraction = _priced(StageUsage(model=manifest.model.name, **_sums(steps)), prices)
        by_criterion = _flat(facts, f"judge_usage:{panel}")
        judging = {}
        for judge, model in judges.items():
            mine = by_criterion.filter(pc.equal(by_criterion["judge"], judge))
            criteria = {
                name: _priced(
                    Usage(**_sums(mine.filter(pc.equal(mine["criterion"], name)))), prices, model
                )
                for name in sorted(set(mine["criterion"].to_pylist()))
            }
            judging[judge] = _priced(
                JudgeUsage(model=model, criteria=criteria, **_sums(mine)), prices
            )
        parts = [extraction, *judging.values()]
        if normaliser is not None:
            parts.append(normalizer)
        total = total_usage(parts)
        triples = facts.extraction_metrics()["n_triples"]
        block[task] = TaskCost(
            extraction=extraction,
            normalizer=normalizer if normaliser is not None else None,
            judging=judging,
            total=total,
            triples=triples,
            per_1k_triples=_per_1k(total, triples),
            currency=None if prices is None else prices.currency,
            unpriced=sorted({part.model for part in parts if part.calls and part.money is None})
            if prices is not None
            else [],
        )
    return block


def _flat(facts: SpanFacts, column: str) -> pa.Table:
    """The per-span usage rows of `column`, as one table."""
    rows = facts.table.column(column).combine_chunks().flatten()
    return pa.Table.from_struct_array(rows)


def _sums(rows: pa.Table) -> dict:
    """The rows' figures added up: a figure unknown in one row (null) is unknown in the sum,
    but device seconds (only in-process models have them: the sum of those known)."""
    sums = {name: _known_sum(rows[name]) for name in _SUMMED}
    if sums["seconds"] is not None:
        sums["seconds"] = round(sums["seconds"], 3)
    device = pc.sum(rows["device_seconds"], min_count=1).as_py()
    sums["device_seconds"] = None if device is None else round(device, 3)
    return sums


def _known_sum(column: pa.ChunkedArray) -> float | int | None:
    if not len(column):
        return 0
    return pc.sum(column, skip_nulls=False).as_py()


def _priced(usage: Usage, prices: Prices | None, model: str | None = None) -> Usage:
    """`usage` with its money, where the table prices the model (`model`, else its own)."""
    price = prices and prices.models.get(model or usage.model)
    if price is not None:
        usage.money = round(price.money(usage), 6)
    elif prices is not None and not usage.calls:
        usage.money = 0.0  # nothing answered: nothing spent, whatever the model's price
    return usage


def total_usage(parts: Iterable[Usage]) -> Usage:
    """The parts added up; a figure (money among them) only where every part knows it."""
    parts = list(parts)
    devices = [part.device_seconds for part in parts if part.device_seconds is not None]

    def known(name: str, digits: int | None = None) -> float | int | None:
        values = [getattr(part, name) for part in parts]
        if None in values:
            return None
        return sum(values) if digits is None else round(sum(values), digits)

    return Usage(
        **{name: known(name) for name in USAGE_COUNTS},
        seconds=known("seconds", 3),
        device_seconds=round(sum(devices), 3) if devices else None,
        money=known("money", 6),
    )


def _per_1k(total: Usage, triples: int) -> UsageRate | None:
    if not triples:
        return None
    scale = 1000 / triples

    def scaled(value: float | None, digits: int) -> float | None:
        return None if value is None else round(value * scale, digits)

    return UsageRate(
        **{name: scaled(getattr(total, name), 2) for name in USAGE_COUNTS},
        seconds=scaled(total.seconds, 3),
        device_seconds=scaled(total.device_seconds, 3),
        money=scaled(total.money, 6),
    )
