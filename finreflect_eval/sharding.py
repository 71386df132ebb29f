"""Shards: one model's run split across GPUs or machines, then merged back into one run.

vLLM runs one model per process (it refuses `data_parallel_size > 1` in one process), so a model
runs data-parallel as N processes: `--shard i/N` takes every N-th span of each task, starting at
the i-th (in dataset order), so the shards are balanced, disjoint and together the whole split.
Each shard writes its own folder and cache; `merge` puts the records back in dataset order and
refuses overlaps and gaps, so the merged run scores exactly like an unsharded one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from finreflect_eval.errors import FinReflectError
from finreflect_eval.samples import SavedRun

T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0-based)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`"i/N"`, as given to `--shard`."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not match or not int(match[1]) < int(match[2]):
            raise FinReflectError(f"--shard must be i/N with 0 <= i < N, got '{text}'")
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def name(self) -> str:
        """The shard's folder and cache name."""
        return f"shard-{self.index}-of-{self.count}"

    def select(self, items: list[T]) -> list[T]:
        return items[self.index :: self.count]


def span_list(span_ids: list[str]) -> dict[str, Any]:
    """What identifies a task's whole (unsharded) span list: its length and a hash of the ids
    in order. Every shard records it; the merge must rebuild exactly this list."""
    digest = hashlib.sha256("\n".join(span_ids).encode("utf-8")).hexdigest()
    return {"count": len(span_ids), "sha256": digest}


def load_runs(paths: list[Path]) -> SavedRun:
    """One run from a run folder (or manifest), or the merge of several shards' runs, saved
    into their common parent folder."""
    runs = [SavedRun.load(path) for path in paths]
    if len(runs) == 1:
        return runs[0]
    merged = merge(runs)
    merged.save()
    return merged


def merge(runs: list[SavedRun]) -> SavedRun:
    """The shards' records interleaved back into dataset order, in one run in their common
    parent folder. Refuses shards of different runs, a shard given twice, and missing shards."""
    shards = {}
    for run in runs:
        shard = run.manifest.get("shard")
        if shard is None:
            raise FinReflectError(f"{run.folder} is not a shard (it was run without --shard)")
        position = Shard(shard["index"], shard["count"])
        if position in shards:
            raise FinReflectError(f"shard {position} is given twice ({run.folder})")
        shards[position] = run
    count = next(iter(shards)).count
    first = shards[next(iter(shards))]
    for position, run in shards.items():
        if position.count != count:
            raise FinReflectError(f"{run.folder} is shard {position}, not one of {count}")
        for key in ("model", "backend", "model_args", "seed", "dataset"):
            if run.manifest.get(key) != first.manifest.get(key):
                raise FinReflectError(
                    f"{run.folder} and {first.folder} are shards of different runs "
                    f"(their {key} differ)"
                )
        if set(run.manifest["tasks"]) != set(first.manifest["tasks"]):
            raise FinReflectError(f"{run.folder} and {first.folder} ran different tasks")
    missing = [Shard(index, count) for index in range(count) if Shard(index, count) not in shards]
    if missing:
        given = ", ".join(str(position) for position in sorted(shards, key=lambda s: s.index))
        raise FinReflectError(
            f"shard {missing[0]} is missing (given: {given}); pass every shard's folder"
        )
    ordered = [shards[Shard(index, count)] for index in range(count)]
    judged = _same_judging(ordered)
    manifest = {**first.manifest, "shard": None, "cache": None, "tasks": {}}
    manifest["total_seconds"] = round(sum(r.manifest["total_seconds"] for r in ordered), 3)
    records = {}
    for task, info in first.manifest["tasks"].items():
        records[task] = _interleave(task, [run.records[task] for run in ordered])
        expected = info["span_list"]
        if span_list([r.span_id for r in records[task]]) != expected:
            raise FinReflectError(
                f"task {task}: the shards' spans are not the {expected['count']} spans they "
                "were cut from (were they run on different data or with a different --limit?)"
            )
        seconds = sum(run.manifest["tasks"][task]["seconds"] for run in ordered)
        manifest["tasks"][task] = {**info, "seconds": round(seconds, 3)}
    if judged is not None:
        manifest["judging"] = {
            **judged,
            "seconds": {
                judge: round(sum(r.manifest["judging"]["seconds"][judge] for r in ordered), 3)
                for judge in judged["seconds"]
            },
        }
    folder = Path(_common_parent([run.folder for run in ordered]))
    return SavedRun(folder, manifest, records)


def _interleave(task: str, shard_records: list[list[Any]]) -> list[Any]:
    """Shard i holds positions i, i+N, i+2N, ... of the task's span list."""
    count = len(shard_records)
    total = sum(len(records) for records in shard_records)
    merged = []
    for position in range(total):
        records = shard_records[position % count]
        if position // count >= len(records):
            raise FinReflectError(f"task {task}: shard {position % count}/{count} is incomplete")
        merged.append(records[position // count])
    seen: dict[str, int] = {}
    for position, record in enumerate(merged):
        if record.span_id in seen:
            raise FinReflectError(
                f"task {task}: span {record.span_id} is in shard {seen[record.span_id] % count}"
                f"/{count} and in shard {position % count}/{count}"
            )
        seen[record.span_id] = position
    return merged


def _same_judging(runs: list[SavedRun]) -> dict[str, Any] | None:
    """The shards' judging block, which must be the same panel for all (or none judged)."""
    panels = [run.manifest.get("judging") for run in runs]
    if all(panel is None for panel in panels):
        return None
    for run, panel in zip(runs, panels, strict=True):
        if panel is None or {**panel, "seconds": None} != {**panels[0], "seconds": None}:
            raise FinReflectError(
                f"{run.folder} was not judged by the same panel as the other shards; judge "
                "all shards together (judge --samples SHARD...) or each with one panel"
            )
    return panels[0]


def _common_parent(folders: list[Path]) -> str:
    import os

    return os.path.commonpath([str(folder.resolve().parent) for folder in folders])
