"""The report's Cost tab: per task, the results' `cost` block as a table (the extraction, each
judge with a row per criterion, the total and the total per 1,000 triples), every figure as the
results hold it, with what the block leaves unknown shown as "—" and why in words: answers all
from the run's cache (nothing new spent), models without a price, no price table at all."""

from __future__ import annotations

from typing import Any

from finreflect_eval.records import Results, TaskCost, Usage
from finreflect_eval.records.cost import UsageRate, figure_text
from finreflect_eval.view.source import ViewRun

# The table's columns: a Usage's field, its header, and what it counts (the header's title).
COLUMNS = (
    ("calls", "calls", "calls answered by the model (each with its retries of an invalid output)"),
    ("cache_hits", "from cache", "calls answered from the run's response cache: nothing spent"),
    ("prompt_tokens", "prompt tokens", "tokens read, cached ones included"),
    (
        "cached_prompt_tokens",
        "of them cached",
        "prompt tokens the backend did not compute again (prefix reuse, a server's prompt cache)",
    ),
    ("completion_tokens", "completion tokens", "tokens written"),
    ("reasoning_tokens", "of them thinking", "tokens a reasoning model wrote thinking"),
    ("seconds", "seconds", "wall seconds the model spent on the calls"),
    (
        "device_seconds",
        "device seconds",
        "seconds × the devices an in-process model held (— : only servers answered)",
    ),
    ("money", "money", "from the price table (— : no price for a model that answered)"),
)


def cost_contexts(run: ViewRun, tasks: list[str]) -> list[dict[str, Any]]:
    """What the Cost tab shows of each of the run's `tasks` (`cost_context`)."""
    return [cost_context(run.results, task) for task in tasks if task in run.results.details]


def cost_context(results: Results, task: str) -> dict[str, Any]:
    """A task's table (`rows`: each a `kind`, a `label`, the `judge` of a criterion's row, a
    `model` and its `cells`, (key, value, text) per column) and its `notes`; `block` None where
    the results have no cost block."""
    cost: TaskCost | None = results.cost.get(task)
    context: dict[str, Any] = {"name": task, "mode": results.details[task].mode, "block": cost}
    if cost is None:
        return context
    currency = cost.currency
    rows = [_row("stage", "extraction", cost.extraction, currency, cost.extraction.model)]
    if cost.normalizer is not None:
        rows.append(_row("stage", "normalizer", cost.normalizer, currency, cost.normalizer.model))
    for judge, usage in cost.judging.items():
        rows.append(_row("judge", judge, usage, currency, usage.model))
        rows += [
            _row("criterion", name, share, currency, judge=judge)
            for name, share in usage.criteria.items()
        ]
    rows.append(_row("total", "total", cost.total, currency))
    if cost.per_1k_triples is not None:
        rows.append(_row("rate", "per 1k triples", cost.per_1k_triples, currency))
    context |= {"rows": rows, "notes": _notes(cost)}
    return context


def _row(
    kind: str,
    label: str,
    usage: Usage | UsageRate,
    currency: str | None,
    model: str = "",
    judge: str = "",
) -> dict[str, Any]:
    rate = isinstance(usage, UsageRate)
    cells = []
    for key, _, _ in COLUMNS:
        value = getattr(usage, key)
        cells.append((key, value, figure_text(key, value, currency, rate)))
    return {"kind": kind, "label": label, "judge": judge, "model": model, "cells": cells}


def _notes(cost: TaskCost) -> list[str]:
    """What the table leaves unsaid: answers all from the cache, models without a price, no
    price table, no triples to count per."""
    notes = []
    total = cost.total
    if total.cache_hits and not total.calls:
        notes.append(
            f"All {total.cache_hits:,} calls were answered from the run's response cache: "
            "nothing new spent."
        )
    elif total.cache_hits:
        notes.append(
            f"{total.cache_hits:,} of {total.calls + total.cache_hits:,} calls were answered "
            "from the run's response cache: nothing spent on them."
        )
    if cost.unpriced:
        notes.append(f"No price for {', '.join(cost.unpriced)} in the price table: no total money.")
    if cost.currency is None:  # scored without a price table
        notes.append("No price table (--prices FILE): no money counted.")
    if cost.per_1k_triples is None:
        notes.append("No triples: nothing to count per 1,000 triples.")
    return notes
