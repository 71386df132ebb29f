"""The run folder: one `RunStore` owns its files, their names and how they are written.

Whole files are written atomically (a unique temporary file, then a rename), so a killed write
leaves the old file whole and two writers never share a temporary name. Samples are appended
as spans finish, so a killed run keeps them; a rerun of the same run finds the unfinished
manifest and continues it.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import os
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from finreflect_eval.errors import FinReflectError
from finreflect_eval.records import (
    Manifest,
    Results,
    ReviewItem,
    SampleRecord,
    read,
    read_lines,
)

LOCK = ".finreflect-eval.lock"


@dataclass
class Run:
    """A run in memory: its manifest, its records by task (in span order) and its folder."""

    store: RunStore
    manifest: Manifest
    records: dict[str, list[SampleRecord]]

    @property
    def folder(self) -> Path:
        return self.store.folder


class RunStore:
    """The files of the runs in one folder (`OUTPUT_PATH/<model>/`, or a shard's folder)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    # names

    def manifest_path(self, run: str) -> Path:
        return self.folder / f"manifest_{run}.json"

    def samples_path(self, manifest: Manifest, task: str) -> Path:
        return self.folder / manifest.tasks[task].samples

    def results_path(self, run: str, panel: str) -> Path:
        return self.folder / f"results_{run}_{panel}.json"

    def review_path(self, run: str, task: str, panel: str) -> Path:
        """The review queue's stem: `.jsonl` and `.csv` beside each other."""
        return self.folder / f"review_{task}_{run}_{panel}"

    # writing

    def start(self, manifest: Manifest) -> Run:
        """A new run: its manifest written, its samples files empty."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for task in manifest.tasks:
            write_atomic(self.samples_path(manifest, task), "")
        self.write_manifest(manifest)
        return Run(self, manifest, {task: [] for task in manifest.tasks})

    def append(self, run: Run, task: str, records: list[SampleRecord]) -> None:
        """Add finished spans to the samples file, flushed to disk before returning."""
        if not records:
            return
        with self.samples_path(run.manifest, task).open("a", encoding="utf-8") as file:
            file.write("".join(record.model_dump_json() + "\n" for record in records))
            file.flush()
            os.fsync(file.fileno())
        run.records[task].extend(records)

    def write_manifest(self, manifest: Manifest) -> None:
        write_atomic(self.manifest_path(manifest.run), manifest.model_dump_json(indent=2) + "\n")

    def save(self, run: Run) -> None:
        """Rewrite every samples file and the manifest (after judging), each atomically."""
        for task, records in run.records.items():
            text = "".join(record.model_dump_json() + "\n" for record in records)
            write_atomic(self.samples_path(run.manifest, task), text)
        self.write_manifest(run.manifest)

    def write_results(self, results: Results, review: dict[str, list[ReviewItem]]) -> Path:
        """The results file and each task's review queue (JSONL and CSV)."""
        path = self.results_path(results.run, results.judges.panel)
        write_atomic(path, results.to_json())
        for task, items in review.items():
            stem = self.review_path(results.run, task, results.judges.panel)
            lines = "".join(item.model_dump_json() + "\n" for item in items)
            write_atomic(stem.with_suffix(".jsonl"), lines)
            judges = [member.name for member in results.judges.members]
            write_atomic(stem.with_suffix(".csv"), review_csv(items, judges))
        return path

    # reading

    def load(self, run: str | None = None) -> Run:
        """A run of this folder by id, or its newest one."""
        path = self.manifest_path(run) if run else newest(self.folder, "manifest_*.json")
        manifest = read(Manifest, path)
        records = {}
        for task in manifest.tasks:
            samples = self.samples_path(manifest, task)
            if manifest.status == "extracting":
                _drop_partial_line(samples)  # the line a killed run was writing
            records[task] = sorted(read_lines(SampleRecord, samples), key=lambda r: r.doc_id)
        return Run(self, manifest, records)

    def unfinished(self, same_run: dict) -> Run | None:
        """The newest unfinished run of this folder whose settings are `same_run` (see
        `Manifest.identity`), to continue it."""
        for path in sorted(self.folder.glob("manifest_*.json"), reverse=True):
            try:
                manifest = read(Manifest, path)
            except FinReflectError:
                continue  # another version, or not ours: never resumed into
            if manifest.status == "extracting" and identity(manifest) == same_run:
                return self.load(manifest.run)
        return None


_HELD: dict[Path, int] = {}  # folders this process holds the lock of -> nesting depth


@contextlib.contextmanager
def writing(folder: Path) -> Iterator[None]:
    """Hold the run folder for this process: another process writing to it is refused at once
    (two runs into one folder would overwrite each other's files). Reentrant within a process.
    On taking the lock, temporary files that killed writers left behind are removed."""
    folder = Path(folder).resolve()
    if folder in _HELD:
        _HELD[folder] += 1
        try:
            yield
        finally:
            _HELD[folder] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / LOCK).open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise FinReflectError(
                f"{folder} is being written by another finreflect-eval ({holder}); wait for it "
                "to finish, or use another --output-path"
            ) from None
        lock.truncate(0)
        lock.write(f"pid {os.getpid()}")
        lock.flush()
        for stale in folder.glob(".*.tmp"):  # a killed writer's; nobody else writes here now
            stale.unlink(missing_ok=True)
        _HELD[folder] = 1
        try:
            yield
        finally:
            del _HELD[folder]
            lock.truncate(0)
            fcntl.flock(lock, fcntl.LOCK_UN)


def identity(manifest: Manifest) -> dict:
    """What makes two runs the same run: a rerun with these settings continues it."""
    return {
        "model": manifest.model.model_dump(exclude={"sha"}),  # known once the model loads
        "tasks": {
            name: [task.hash, task.generation_kwargs, task.dataset.model_dump()]
            for name, task in manifest.tasks.items()
        },
        "seed": manifest.seed,
        "shard": manifest.shard and manifest.shard.model_dump(),
    }


def load_run(path: Path) -> Run:
    """A run from its folder (its newest manifest) or a manifest file."""
    path = Path(path)
    if path.is_file():
        if not path.name.startswith("manifest_"):
            raise FinReflectError(f"{path} is not a run manifest (manifest_<run>.json)")
        return RunStore(path.parent).load(path.stem.removeprefix("manifest_"))
    return RunStore(path).load()


def review_csv(items: list[ReviewItem], judges: list[str]) -> str:
    """The review queue as CSV: one row per item, each judge's verdict, reasoning and warning
    in columns, the span text last; cells a spreadsheet would run as formulas are quoted."""
    fields = ("verdict", "reasoning", "warning")
    columns = ["task", "span_id", "criterion", "triple_index", "triple", "label", "reason"]
    columns += [f"{judge}_{key}" for judge in judges for key in fields]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, [*columns, "span_text"])
    writer.writeheader()
    for item in items:
        row = item.model_dump(include=set(columns[:7]))
        row["triple"] = " | ".join(item.triple) if item.triple else ""
        for judge, vote in item.votes.items():
            row.update({f"{judge}_{key}": getattr(vote, key) for key in fields})
        row["span_text"] = item.span_text
        writer.writerow({key: spreadsheet_safe(value) for key, value in row.items()})
    return buffer.getvalue()


def spreadsheet_safe(value: object) -> object:
    """A CSV text cell that a spreadsheet would run as a formula, quoted (CSV injection)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file of this writer's own and a rename: a killed write leaves
    the old file whole, and concurrent writers never touch each other's temporary file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def newest(folder: Path, pattern: str) -> Path:
    """The newest file of `folder` matching `pattern` (file names carry a sortable time)."""
    found = sorted(Path(folder).glob(pattern))
    if not found:
        raise FinReflectError(f"{folder}: no {pattern} here")
    return found[-1]


def run_id() -> str:
    """A new run's id: the UTC time, sortable and safe in file names, and a random part, so that
    two runs started in the same second never share a name (`2026-12-03T07-16-18-9f2c`)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%S-") + secrets.token_hex(2)


def _drop_partial_line(path: Path) -> None:
    data = path.read_bytes() if path.exists() else b""
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])
