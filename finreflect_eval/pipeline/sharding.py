"""Shards: one model's run split across GPUs or machines, then merged back into one run.

For runs without Ray (`data_parallel_size` runs replicas on Ray: `models.replicas`), or under a
batch scheduler, a model runs data-parallel as N processes: `--shard i/N` takes every N-th span
of each task, starting at
the i-th (in dataset order), so the shards are balanced, disjoint and together the whole split.
Each shard writes its own folder and cache; `merge` puts the records back in dataset order (by
their `doc_id`) and refuses overlaps and gaps, so the merged run scores exactly like an
unsharded one.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import span_list
from finreflect_eval.runs.store import Run, RunStore, load_run

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


def load_runs(paths: list[Path], *, for_scoring: bool = False) -> Run:
    """One run from a run folder (or manifest), or the merge of several shards' runs, saved
    into their common parent folder (`for_scoring`: see `RunStore.load`)."""
    if len(paths) == 1:
        return load_run(paths[0], for_scoring=for_scoring)
    runs = [load_run(path) for path in paths]
    merged = merge(runs)
    merged.store.save(merged)
    return merged


def merge(runs: list[Run]) -> Run:
    """The shards' records back in dataset order, in one run in their common parent folder.
    Refuses shards of different runs, a shard given twice, missing shards and unfinished ones."""
    shards: dict[Shard, Run] = {}
    for run in runs:
        info = run.manifest.shard
        if info is None:
            raise FinReflectError(f"{run.folder} is not a shard (it was run without --shard)")
        position = Shard(info.index, info.count)
        if position in shards:
            raise FinReflectError(f"shard {position} is given twice ({run.folder})")
        if run.manifest.status != "extracted":
            raise FinReflectError(f"shard {position} ({run.folder}) has not finished extracting")
        shards[position] = run
    first = runs[0]
    count = first.manifest.shard.count
    for position, run in shards.items():
        if position.count != count:
            raise FinReflectError(f"{run.folder} is shard {position}, not one of {count}")
        for key in ("model", "seed", "dataset"):
            if getattr(run.manifest, key) != getattr(first.manifest, key):
                raise FinReflectError(
                    f"{run.folder} and {first.folder} are shards of different runs "
                    f"(their {key} differ)"
                )
        if set(run.manifest.tasks) != set(first.manifest.tasks):
            raise FinReflectError(f"{run.folder} and {first.folder} ran different tasks")
    missing = [Shard(index, count) for index in range(count) if Shard(index, count) not in shards]
    if missing:
        given = ", ".join(str(position) for position in sorted(shards, key=lambda s: s.index))
        raise FinReflectError(
            f"shard {missing[0]} is missing (given: {given}); pass every shard's folder"
        )
    ordered = [shards[Shard(index, count)] for index in range(count)]
    manifest = first.manifest.model_copy(deep=True)
    manifest.shard, manifest.cache = None, None
    manifest.seconds = round(sum(run.manifest.seconds for run in ordered), 3)
    manifest.judging = _same_judging(ordered)
    records = {}
    for task, info in manifest.tasks.items():
        records[task] = _in_dataset_order(task, [run.records[task] for run in ordered], count)
        if span_list([r.span_id for r in records[task]]) != info.span_list.model_dump():
            raise FinReflectError(
                f"task {task}: the shards' spans are not the {info.span_list.count} spans they "
                "were cut from (were they run on different data or with a different --limit?)"
            )
        info.seconds = round(sum(run.manifest.tasks[task].seconds for run in ordered), 3)
    folder = Path(os.path.commonpath([str(run.folder.resolve().parent) for run in ordered]))
    return Run(RunStore(folder), manifest, records)


def _in_dataset_order(task: str, shard_records: list[list[Any]], count: int) -> list[Any]:
    merged = sorted((r for records in shard_records for r in records), key=lambda r: r.doc_id)
    for before, record in itertools.pairwise(merged):
        if record.doc_id == before.doc_id:
            raise FinReflectError(
                f"task {task}: span {record.span_id} is in shard {before.doc_id % count}/{count}"
                " more than once, or in two shards"
            )
    return merged


def _same_judging(runs: list[Run]) -> dict[str, Any]:
    """The shards' panels, which must be the same for all (seconds added up)."""
    panels = [run.manifest.judging for run in runs]
    for run, judged in zip(runs, panels, strict=True):
        if set(judged) != set(panels[0]) or any(
            judged[name].model_copy(update={"seconds": {}})
            != panels[0][name].model_copy(update={"seconds": {}})
            for name in judged
        ):
            raise FinReflectError(
                f"{run.folder} was not judged by the same panels as the other shards; judge "
                "all shards together (judge --samples SHARD...) or each with the same panel"
            )
    return {
        name: judging.model_copy(
            update={
                "seconds": {
                    judge: round(sum(p[name].seconds[judge] for p in panels), 3)
                    for judge in judging.seconds
                }
            }
        )
        for name, judging in panels[0].items()
    }
