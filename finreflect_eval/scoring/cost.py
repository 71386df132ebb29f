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
    """Per task, its cost: the extraction's calls and each judge's of `panel`, per criterion;
    money where `prices` names the model."""
    judges = {member.name: member.model for member in manifest.judging[panel].judges}
    block = {}
    for task, facts in span_facts.items():
        extraction = _priced(
            StageUsage(model=manifest.model.name, **_sums(_flat(facts, "usage"))), prices
        )
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
        total = _total(parts)
        triples = facts.extraction_metrics()["n_triples"]
        block[task] = TaskCost(
            extraction=extraction,
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
    sums = {name: pc.sum(rows[name]).as_py() or 0 for name in _SUMMED}
    sums["seconds"] = round(float(sums["seconds"]), 3)
    device = pc.sum(rows["device_seconds"], min_count=1).as_py()
    sums["device_seconds"] = None if device is None else round(device, 3)
    return sums


def _priced(usage: Usage, prices: Prices | None, model: str | None = None) -> Usage:
    """`usage` with its money, where the table prices the model (`model`, else its own)."""
    price = prices and prices.models.get(model or usage.model)
    if price is not None:
        usage.money = round(price.money(usage), 6)
    elif prices is not None and not usage.calls:
        usage.money = 0.0  # nothing answered: nothing spent, whatever the model's price
    return usage


def _total(parts: Iterable[Usage]) -> Usage:
    """The parts added up; money only where every part has its money."""
    parts = list(parts)
    devices = [part.device_seconds for part in parts if part.device_seconds is not None]
    money = [part.money for part in parts]
    return Usage(
        **{name: sum(getattr(part, name) for part in parts) for name in USAGE_COUNTS},
        seconds=round(sum(part.seconds for part in parts), 3),
        device_seconds=round(sum(devices), 3) if devices else None,
        money=None if None in money else round(sum(money), 6),
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
