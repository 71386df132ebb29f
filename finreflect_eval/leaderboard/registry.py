"""The datasets a leaderboard ranks runs on (`<leaderboard>/datasets.json`), which of them a
run's data is, and the maintainer's pin of an official data version.

An official entry accepts a run on any commit of its dataset id: the run records the commit it
read and the content's fingerprint, its *data version*. Runs are compared only on one data
version, and ranked only on the one a maintainer pins (`finreflect-eval leaderboard
pin-dataset`, which records the commit, its fingerprint and each slice's span list): until one
is, each version's entries are shown and compared, never ranked; once one is, it is the
official ranking and the others are shown apart, unranked. A
run whose content is a recorded version's (the same fingerprint) is that version, wherever it
loaded the data from (a local copy, say).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from finreflect_eval._util.errors import FinReflectError, Refusal, first_invalid_field
from finreflect_eval.data import Benchmark, load_benchmark, select_slice, span_list
from finreflect_eval.records import DatasetInfo, SliceSpec, read_json
from finreflect_eval.runs.store import write_atomic
from finreflect_eval.tasks.config import TaskIndex

COMMIT = re.compile(r"[0-9a-f]{40}")


class RegisteredDataset(BaseModel):
    """One entry of `<leaderboard>/datasets.json`: a dataset (and slice) this leaderboard ranks
    runs on, and which section its entries go to."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    section: Literal["official", "smoke"]
    """`official`: ranked (with an official panel); `smoke`: shown apart, never ranked."""
    id: str
    config: str | None = None
    revision: str | None = None
    """The commit that `fingerprint`, `spans` and `span_list_sha256` are of, where known."""
    pinned: str | None = None
    """The commit of the official data version (`pin-dataset` sets it, and `revision`, and the
    data's fingerprint and span list). None: no version is pinned yet; an official entry then
    takes a run on any commit of its id, and no data version is ranked."""
    split: str = "test"
    slice: SliceSpec | None = None
    fingerprint: str | None
    """The data's fingerprint, where recorded (`finreflect-eval dataset info` prints it)."""
    spans: int | None = None
    """Spans in the slice, where known."""
    span_list_sha256: str | None = None
    """The slice's span list (`dataset info`), where known."""
    tasks: list[str]
    """The tasks whose runs on this dataset count."""

    @model_validator(mode="after")
    def _pin_is_recorded(self) -> RegisteredDataset:
        if self.pinned is not None and (self.revision != self.pinned or not self.fingerprint):
            raise ValueError("a pinned entry records its commit as `revision` and a fingerprint")
        return self


def is_commit(revision: str | None) -> bool:
    """A full commit sha: the one name of a data version that never moves (a branch does)."""
    return revision is not None and COMMIT.fullmatch(revision) is not None


def registered_datasets(leaderboard: Path) -> list[RegisteredDataset]:
    registry = leaderboard / "datasets.json"
    data = read_json(registry) if registry.exists() else []
    try:
        return [RegisteredDataset.model_validate(entry) for entry in data]
    except (ValidationError, TypeError) as exc:
        detail = first_invalid_field(exc) if isinstance(exc, ValidationError) else str(exc)
        raise FinReflectError(f"{registry}: {detail}") from exc


def match_dataset(dataset: DatasetInfo, entries: list[RegisteredDataset]) -> RegisteredDataset:
    """The entry a run's data is, for the same split and slice: any commit of an official
    dataset id (the run must name the commit; on the recorded commit, the recorded content), or
    else the entry whose recorded content (fingerprint) it has. A FinReflectError says why
    none is, in a refusal's words."""
    same = [e for e in entries if e.slice == dataset.slice and e.split == dataset.split]
    for entry in same:
        if entry.section != "official" or entry.id != dataset.id:
            continue
        if entry.config not in (None, dataset.config):
            continue
        if dataset.revision is None:  # read offline, or with the Hub out of reach
            raise FinReflectError(
                f"the run names no commit of '{entry.id}' (it read the data offline, or the Hub "
                "was out of reach): rerun online (HF_HUB_OFFLINE unset), so that the commit it "
                "reads is recorded; the cache answers the model calls again"
            )
        if not is_commit(dataset.revision):
            raise FinReflectError(
                f"the run names revision {dataset.revision!r} of '{entry.id}', not a commit: "
                "rerun with this version of finreflect-eval, which records the commit it read"
            )
        if dataset.revision == entry.revision and dataset.fingerprint != entry.fingerprint:
            kind = "pinned" if entry.pinned else "recorded"
            raise FinReflectError(
                f"the run's data at commit {entry.revision[:10]} of '{entry.id}' has fingerprint "
                f"{dataset.fingerprint}, not the {kind} {entry.fingerprint} (another version of "
                "finreflect-eval read it, or the samples were edited): rerun with this version"
            )
        return entry
    for entry in same:
        if entry.fingerprint is not None and entry.fingerprint == dataset.fingerprint:
            return entry
    slice_name = dataset.slice.name if dataset.slice else "every span"
    raise FinReflectError(
        f"dataset {dataset.id!r} (split {dataset.split}, {slice_name}, fingerprint "
        f"{dataset.fingerprint}) is not a dataset of this leaderboard (datasets.json): run on "
        "one it lists"
    )


def is_pinned(dataset: DatasetInfo, entry: RegisteredDataset) -> bool | None:
    """Whether a run on `entry` is on its pinned data version (the same content); None: no
    version of it is pinned."""
    return None if entry.pinned is None else dataset.fingerprint == entry.fingerprint


def registered_dataset(dataset: DatasetInfo, leaderboard: Path) -> RegisteredDataset:
    """The entry of `datasets.json` a run's data is (`match_dataset`), or a refusal. The
    bundled sample is known without an entry, as a smoke dataset."""
    try:
        return match_dataset(dataset, with_sample(registered_datasets(leaderboard)))
    except FinReflectError as exc:
        raise Refusal([str(exc)]) from exc


def with_sample(entries: list[RegisteredDataset]) -> list[RegisteredDataset]:
    return entries if any(e.id == "sample" for e in entries) else [*entries, sample_entry()]


def sample_entry() -> RegisteredDataset:
    """The bundled sample: every span of its test split, for the smoke tasks."""
    sample = load_benchmark("sample", split="test")
    return RegisteredDataset(
        name="bundled sample",
        section="smoke",
        id="sample",
        split="test",
        fingerprint=sample.fingerprint,
        spans=len(sample.spans),
        span_list_sha256=str(span_list([s.span_id for s in sample.spans])["sha256"]),
        tasks=[task.name for task in TaskIndex().resolve(["smoke"])],
    )


def pin_dataset(
    leaderboard: Path, dataset_id: str, revision: str, dataset_name: str | None = None
) -> list[str]:
    """Pin the official data version of a Hub dataset: load it at `revision` (a branch or tag is
    resolved to its commit; this needs the Hub) and record, in every official entry of that id
    (of config `dataset_name`, if given), the commit, the data's fingerprint and the span count
    and span-list hash of the entry's slice. Returns the names of the entries pinned."""
    registry = leaderboard / "datasets.json"
    entries = registered_datasets(leaderboard)
    chosen = [
        index
        for index, entry in enumerate(entries)
        if entry.section == "official"
        and entry.id == dataset_id
        and dataset_name in (None, entry.config)
    ]
    if not chosen:
        config = f" (config {dataset_name})" if dataset_name else ""
        raise FinReflectError(f"{registry}: no official entry of dataset '{dataset_id}'{config}")
    raw = read_json(registry)
    loaded: dict[tuple[str, str | None], Benchmark] = {}
    commit: str | None = None
    for index in chosen:
        entry = entries[index]
        key = (entry.split, entry.config)
        if key not in loaded:  # at the commit the first load resolved: the branch may move
            loaded[key] = load_benchmark(
                dataset_id, split=entry.split, revision=commit or revision, config=entry.config
            )
            commit = loaded[key].revision
            if not is_commit(commit):
                raise FinReflectError(
                    f"cannot pin '{dataset_id}' at {revision!r}: no commit known for it "
                    "(offline?); pinning reads the data from the Hub"
                )
        whole = loaded[key]
        spans = select_slice(whole.spans, entry.slice) if entry.slice else whole.spans
        listed = span_list([span.span_id for span in spans])
        raw[index].update(
            revision=commit,
            pinned=commit,
            fingerprint=whole.fingerprint,
            spans=listed["count"],
            span_list_sha256=listed["sha256"],
        )
    write_atomic(registry, json.dumps(raw, indent=2, ensure_ascii=False) + "\n")
    return [entries[index].name for index in chosen]
