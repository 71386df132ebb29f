"""The run folder: one `RunStore` owns its files, their names and how they are written.

Whole files are written atomically (a unique temporary file, then a rename), so a killed write
leaves the old file whole and two writers never share a temporary name. Samples are appended
as spans finish, so a killed run keeps them; a rerun of the same run finds the unfinished
manifest and continues it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models.replicas import REPLICA_ARGS
from finreflect_eval.records import (
    HumanLabel,
    Manifest,
    Results,
    SampleRecord,
    read,
    read_json,
    read_lines,
)
from finreflect_eval.records.downstream import DownstreamFile
from finreflect_eval.runs.consistency import check_samples, check_spans
from finreflect_eval.scoring.graph import task_graph
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable

LOCK = ".finreflect-eval.lock"
# What `score` reads instead of the samples (see `RunStore.score_index`): derived, rebuilt by
# every save, never needed (without it, scoring reads the samples).
SCORE_INDEX = ".score-index"
INDEX_FORMAT = "10"  # in the index's file names: bump when its files or their columns change


@dataclass
class Run:
    """A run in memory: its manifest, its records by task (in span order) and its folder."""

    store: RunStore
    manifest: Manifest
    records: dict[str, list[SampleRecord]]
    """By task; loaded for scoring, only the tasks read from their samples (see `span_facts`)."""
    span_facts: dict[str, SpanFacts] = field(default_factory=dict)
    """By task: what scoring reads of the records, as the score index holds it (read from it,
    or written to it by the last save)."""
    votes: dict[str, dict[str, VoteTable]] = field(default_factory=dict)
    """By panel, by task: the votes as the score index holds them (see `span_facts`)."""
    graphs: dict[str, dict] = field(default_factory=dict)
    """By task: its graph (`scoring.graph.task_graph`), as the score index holds it."""
    written: bool = True
    """False for a new run whose files are not written yet (see `RunStore.start`)."""

    @property
    def folder(self) -> Path:
        return self.store.folder

    def span_ids(self, task: str) -> tuple[list[int], list[str]]:
        """The doc_ids and span ids of a task's spans, in `doc_id` order."""
        if task in self.records:
            records = self.records[task]
            return [r.doc_id for r in records], [r.span_id for r in records]
        facts = self.span_facts[task]
        return facts.python_values("doc_id"), facts.python_values("span_id")


class RunStore:
    """The files of the runs in one folder (`OUTPUT_PATH/<model>/`, or a shard's folder)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    # names (the records check the names read from run files; this checks every path built)

    def own(self, name: str) -> Path:
        """The file `name` of this folder; a name that would point elsewhere, or a link (to
        anywhere), is refused."""
        path = self.folder / name
        if path.parent != self.folder or name in ("", ".", ".."):
            raise FinReflectError(f"{self.folder}: refused file name {name!r} (outside the folder)")
        return not_a_link(path)

    def manifest_path(self, run: str) -> Path:
        return self.own(f"manifest_{run}.json")

    def samples_path(self, manifest: Manifest, task: str) -> Path:
        return self.own(manifest.tasks[task].samples)

    def results_path(self, run: str, panel: str) -> Path:
        return self.own(f"results_{run}_{panel}.json")

    def review_path(self, run: str, task: str, panel: str, suffix: str) -> Path:
        """The review queue's file with `suffix` (`.jsonl` and `.csv` beside each other)."""
        return self.own(f"review_{task}_{run}_{panel}{suffix}")

    def review_spans_path(self, run: str, task: str, panel: str) -> Path:
        """The text of the review queue's spans, once each (see `ReviewItem`)."""
        return self.own(f"review_spans_{task}_{run}_{panel}.jsonl")

    def human_labels_path(self, run: str, task: str) -> Path:
        """People's labels of the task's items (`review import`), whichever panel judged."""
        return self.own(f"human_labels_{task}_{run}.jsonl")

    def human_labels(self, manifest: Manifest) -> dict[str, list[HumanLabel]]:
        """Per task with any, people's labels (`HumanLabel`), as `review import` wrote them."""
        labels = {}
        for task in manifest.tasks:
            path = self.human_labels_path(manifest.run, task)
            if path.exists():
                labels[task] = read_lines(HumanLabel, path)
        return labels

    def downstream_path(self, run: str, task: str, panel: str) -> Path:
        """A downstream task's questions as measured and answered, scored with `panel`."""
        return self.own(f"downstream_{task}_{run}_{panel}.json")

    def write_downstream(self, manifest: Manifest, file: DownstreamFile) -> Path:
        path = self.downstream_path(manifest.run, file.task, file.panel)
        write_atomic(path, file.model_dump_json(indent=1))
        return path

    def downstream(self, manifest: Manifest, panel: str) -> dict[str, DownstreamFile]:
        """Per task with one, its downstream file of `panel`."""
        files = {}
        for task in manifest.tasks:
            path = self.downstream_path(manifest.run, task, panel)
            if path.exists():
                files[task] = read(DownstreamFile, path)
                if files[task].task != task or files[task].panel != panel:
                    raise FinReflectError(
                        f"{path}: it holds task {files[task].task}, panel {files[task].panel}"
                    )
        return files

    def score_index(self, manifest: Manifest, task: str) -> tuple[Path, dict[str, Path]]:
        """The score index of a task's samples as they are on disk now: what scoring reads of
        the records (`SpanFacts`), and each panel's votes (`VoteTable`), as Arrow tables. Their
        names carry the samples file's size and time, so that the index of other samples
        (rewritten, edited, copied) is never read."""
        samples = self.samples_path(manifest, task)
        stat = samples.stat()
        stem = f"{samples.stem}.{stat.st_size}-{stat.st_mtime_ns}.v{INDEX_FORMAT}"
        folder = not_a_link(self.folder / SCORE_INDEX)
        votes = {panel: folder / f"{stem}.votes.{panel}.arrow" for panel in manifest.judging}
        return folder / f"{stem}.spans.arrow", votes

    def queue_stamp(self, manifest: Manifest, task: str, panel: str) -> Path:
        """Where `review.update_queues` notes the review files it wrote of the task's samples
        as they are now (beside their score index, so a save of other samples removes it)."""
        spans_path, _ = self.score_index(manifest, task)
        return spans_path.with_name(spans_path.name.replace(".spans.arrow", f".queue.{panel}.json"))

    # writing

    def start(self, manifest: Manifest) -> Run:
        """A new run, in memory: its files are written with its first records (`append`) or
        its manifest (`finish`), so a run stopped before any model answered (a dead endpoint)
        leaves nothing behind."""
        return Run(self, manifest, {task: [] for task in manifest.tasks}, written=False)

    def _write_new(self, run: Run) -> None:
        """A new run's files: its manifest, its samples files empty."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for task in run.manifest.tasks:
            write_atomic(self.samples_path(run.manifest, task), "")
        self.write_manifest(run.manifest)
        run.written = True

    def append(self, run: Run, task: str, records: list[SampleRecord]) -> None:
        """Add finished spans to the samples file, flushed to disk before returning."""
        if not records:
            return
        if not run.written:
            self._write_new(run)
        with self.samples_path(run.manifest, task).open("a", encoding="utf-8") as file:
            file.write("".join(record.model_dump_json() + "\n" for record in records))
            file.flush()
            os.fsync(file.fileno())
        run.records[task].extend(records)

    def write_manifest(self, manifest: Manifest) -> None:
        write_atomic(self.manifest_path(manifest.run), manifest.model_dump_json(indent=2) + "\n")

    def finish(self, run: Run) -> None:
        """The manifest written as the run is now (its files first, for a run with no records)."""
        if run.written:
            self.write_manifest(run.manifest)
        else:
            self._write_new(run)

    def save(self, run: Run) -> None:
        """Rewrite every samples file (with its score index, which the run then holds) and the
        manifest (after judging), each atomically."""
        for task, records in run.records.items():
            text = "".join(record.model_dump_json() + "\n" for record in records)
            write_atomic(self.samples_path(run.manifest, task), text)
            self._write_score_index(run, task)
        self.write_manifest(run.manifest)

    def _write_score_index(self, run: Run, task: str) -> None:
        spans_path, vote_paths = self.score_index(run.manifest, task)
        spans_path.parent.mkdir(exist_ok=True)
        for stale in spans_path.parent.glob(f"{self.samples_path(run.manifest, task).stem}.*"):
            stale.unlink()  # the index of the samples this save replaced
        rows = sorted(run.records[task], key=lambda r: r.doc_id)  # as `load` reads them
        for panel, path in vote_paths.items():
            judges = [member.name for member in run.manifest.judging[panel].judges]
            votes = VoteTable.from_records(rows, panel, judges)
            write_atomic(path, votes.to_bytes())
            run.votes.setdefault(panel, {})[task] = votes
        facts = SpanFacts.from_records(rows, list(run.manifest.judging))
        run.graphs[task] = task_graph(task, facts)  # seconds at 480k triples: once, here
        write_atomic(graph_path(spans_path), json.dumps(run.graphs[task]))
        # Last: the spans make the index whole (`load` reads none of an index without them).
        write_atomic(spans_path, facts.to_bytes())
        run.span_facts[task] = facts

    def write_results(self, results: Results) -> Path:
        """The results file (each task's review queue goes beside it: `review.update_queues`)."""
        path = self.results_path(results.run, results.judges.panel)
        write_atomic(path, results.to_json())
        return path

    # reading

    def load(self, run: str | None = None, *, for_scoring: bool = False) -> Run:
        """A run of this folder by id, or its newest one; each sample read is refused unless
        it holds together (`consistency.sample_problem`). `for_scoring`: each task whose samples
        have a whole score index is read from it instead (into `Run.span_facts` and
        `Run.votes`: see `score_index`)."""
        path = (
            self.manifest_path(run) if run else not_a_link(newest(self.folder, "manifest_*.json"))
        )
        manifest = read(Manifest, path)
        if path.name != f"manifest_{manifest.run}.json":
            raise FinReflectError(f"{path}: field 'run': {manifest.run} is not the run of its name")
        loaded = Run(self, manifest, {})
        for task in manifest.tasks:
            samples = self.samples_path(manifest, task)
            if manifest.status == "extracting":
                _drop_partial_line(samples)  # the line a killed run was writing
            index = self._whole_score_index(manifest, task) if for_scoring else None
            if index is not None:
                spans_path, vote_paths = index
                loaded.span_facts[task] = SpanFacts.read(spans_path, list(manifest.judging))
                if graph_path(spans_path).exists():
                    loaded.graphs[task] = read_json(graph_path(spans_path), MAX_GRAPH_BYTES)
                for panel, votes in vote_paths.items():
                    judges = [member.name for member in manifest.judging[panel].judges]
                    loaded.votes.setdefault(panel, {})[task] = VoteTable.read(votes, judges)
            else:
                # Each sample as the run wrote it (a whole score index was made of such).
                records = check_samples(samples, task, read_lines(SampleRecord, samples))
                loaded.records[task] = sorted(records, key=lambda r: r.doc_id)
            check_spans(manifest, samples, task, *loaded.span_ids(task))
        return loaded

    def _whole_score_index(
        self, manifest: Manifest, task: str
    ) -> tuple[Path, dict[str, Path]] | None:
        """The score index of the task's samples, if they have a whole one."""
        try:
            spans_path, vote_paths = self.score_index(manifest, task)
        except OSError:  # no samples: reading them says so
            return None
        whole = spans_path.exists() and all(path.exists() for path in vote_paths.values())
        return (spans_path, vote_paths) if whole else None

    def unfinished(self, same_run: dict, panel: str | None = None) -> Run | None:
        """The newest run of this folder whose settings are `same_run` (see
        `Manifest.identity`), to continue it, if it is unfinished: still extracting, or (with
        `panel`) not yet scored by that panel (killed while judging or scoring)."""
        for path in sorted(self.folder.glob("manifest_*.json"), reverse=True):
            try:
                manifest = read(Manifest, path)
            except FinReflectError:
                continue  # another version, or not ours: never resumed into
            if identity(manifest) != same_run or path != self.manifest_path(manifest.run):
                continue
            scored = panel is None or self.results_path(manifest.run, panel).exists()
            if manifest.status == "extracting" or not scored:
                return self.load(manifest.run)
            return None  # the newest such run is finished: a rerun is a new run
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
    created = [path for path in (folder, *folder.parents) if not path.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    not_a_link(folder / SCORE_INDEX)  # (its stale files are removed below)
    try:  # never through a link: truncating it would empty whatever it points at
        handle = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        not_a_link(folder / LOCK)
    with os.fdopen(handle, "a+") as lock:
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
        for stale in [*folder.glob(".*.tmp"), *(folder / SCORE_INDEX).glob(".*.tmp")]:
            stale.unlink(missing_ok=True)  # a killed writer's; nobody else writes here now
        _HELD[folder] = 1
        try:
            yield
        finally:
            del _HELD[folder]
            # A folder made for a command that wrote nothing in it (refused before its first
            # file): its lock goes while still held (no one else can have taken it), then the
            # folder and those made for it, as if the command had not run.
            unused = bool(created) and [path.name for path in folder.iterdir()] == [LOCK]
            if unused:
                (folder / LOCK).unlink()
            lock.truncate(0)
            fcntl.flock(lock, fcntl.LOCK_UN)
            if unused:
                _remove_empty(created)


def _remove_empty(folders: list[Path]) -> None:
    """`folders`, innermost first, each removed while it is empty."""
    for path in folders:
        try:
            path.rmdir()
        except OSError:  # not empty after all (another process wrote there meanwhile)
            return


def not_a_link(path: Path) -> Path:
    """`path`, refused when it is a symbolic link: a run folder is input, and writing through a
    link it holds would change files outside it."""
    if path.is_symlink():
        raise FinReflectError(f"{path} is a symbolic link; a run folder's files must be its own")
    return path


def identity(manifest: Manifest) -> dict:
    """What makes two runs the same run: a rerun with these settings continues it (with any
    number of replicas: a run that lost a node goes on with fewer)."""
    model = manifest.model.model_dump(exclude={"sha", "loaded"})  # known once it loads
    model["args"] = {k: v for k, v in model["args"].items() if k not in REPLICA_ARGS}
    return {
        "model": model,
        "tasks": {
            name: [task.hash, task.generation_kwargs, task.dataset.model_dump()]
            for name, task in manifest.tasks.items()
        },
        "seed": manifest.seed,
        "shard": manifest.shard and manifest.shard.model_dump(),
    }


def graph_path(spans_path: Path) -> Path:
    """The score index's graph of a task (beside its spans' table)."""
    return spans_path.with_name(spans_path.name.replace(".spans.arrow", ".graph.json"))


MAX_GRAPH_BYTES = 1 << 28  # a graph block per filing: far below this for any real run


def load_run(path: Path, *, for_scoring: bool = False) -> Run:
    """A run from its folder (its newest manifest) or a manifest file (see `RunStore.load`)."""
    path = Path(path)
    if path.is_file():
        if not path.name.startswith("manifest_"):
            raise FinReflectError(f"{path} is not a run manifest (manifest_<run>.json)")
        run = path.stem.removeprefix("manifest_")
        return RunStore(path.parent).load(run, for_scoring=for_scoring)
    return RunStore(path).load(for_scoring=for_scoring)


def write_atomic(path: Path, text: str | bytes | Iterable[bytes]) -> None:
    """Write through a temporary file of this writer's own and a rename: a killed write leaves
    the old file whole, and concurrent writers never touch each other's temporary file. The
    file gets the mode `open(path, "w")` would give it: an existing file keeps its own, a new
    one is 0666 less the umask (a leaderboard's pages must stay readable by a web server).
    `text` may come in parts (bytes), written as they come."""
    handle, temporary = _create_beside(path)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.fchmod(handle, stat.S_IMODE(os.stat(path).st_mode))
        if isinstance(text, str):
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text)
        else:
            with os.fdopen(handle, "wb") as file:
                file.writelines([text] if isinstance(text, bytes) else text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _create_beside(path: Path) -> tuple[int, str]:
    """A new file of a unique name beside `path`, created as `open` creates files: 0666 less
    the umask (`tempfile.mkstemp` makes it 0600, which the rename would pass on)."""
    while True:
        temporary = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), str(temporary)
        except FileExistsError:  # another writer's: draw another name
            continue


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
