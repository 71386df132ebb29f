"""Folders the user names and a command writes into: what the command may replace there.

A command records the files it wrote in a marker file it leaves in the folder, as JSON:
`{"written_by": "finreflect-eval 0.1.0 view", "files": ["README.md", "data/t/0.js", ...]}`
(paths relative to the folder, `/`-separated, the marker itself not listed). Writing again, it
replaces or removes only recorded files: every other file is the user's and stays as it is.
Where the new write needs the path of a user's file (that very file, a folder above it, or a
file of the user's under it), the write is refused, naming the file, before anything changes.

`view` and `leaderboard build` keep such a marker; `dataset build` has its record in its
dataset card (the data files it lists), and uses `files_under`, `plan_write` and
`remove_files` with it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from finreflect_eval._util.errors import FinReflectError


@dataclass(frozen=True)
class Record:
    """What a marker file says of its folder."""

    written_by: str
    """The command that wrote the folder, and its version."""
    files: frozenset[str] | None
    """The files it wrote, relative `/`-separated paths; None: the marker of an older version,
    which kept no list (each command says what it then takes as its own)."""


def read_record(folder: Path, marker: str) -> Record | None:
    """The record in `folder / marker`; None where there is no marker (a link is none: nobody's
    record). A marker that is not our JSON is an older version's: a record without files."""
    path = folder / marker
    if path.is_symlink() or not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        data = json.loads(text)
        files = data["files"]
        if isinstance(files, list) and all(isinstance(name, str) for name in files):
            return Record(str(data["written_by"]), frozenset(files))
    except (ValueError, TypeError, KeyError):  # older versions wrote a line of text
        pass
    return Record(text.strip(), None)


def write_record(folder: Path, marker: str, written_by: str, files: Iterable[str]) -> None:
    """Leave the marker listing `files` (sorted, so the same write gives the same bytes),
    through a temporary file and a rename: a killed write leaves the old record whole."""
    text = json.dumps({"written_by": written_by, "files": sorted(set(files))}, indent=1)
    temporary = folder / f".{marker}.{secrets.token_hex(4)}.tmp"
    try:
        temporary.write_text(text + "\n", encoding="utf-8")
        os.replace(temporary, folder / marker)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def files_under(folder: Path) -> Iterator[str]:
    """Every file and link below `folder` as a relative `/`-separated path, a folder's own
    before its subfolders', each sorted; a link is listed, never followed, and folders without
    files count for nothing. Lazy: a caller can stop at the first file it refuses."""
    for root, folders, files in os.walk(folder):
        folders.sort()
        links = [name for name in folders if Path(root, name).is_symlink()]
        for name in sorted(files + links):
            yield Path(root, name).relative_to(folder).as_posix()


@dataclass(frozen=True)
class Plan:
    """What a new write into a folder does to the files already there (in `files_under`
    order)."""

    replaced: tuple[str, ...]
    """Ours (recorded), written again."""
    stale: tuple[str, ...]
    """Ours, which the new write lacks: removed."""
    kept: tuple[str, ...]
    """The user's: left as they are."""
    conflicts: tuple[str, ...]
    """The user's, where the new write needs the path: the write must be refused."""

    def refuse_conflicts(self, folder: Path, hint: str) -> None:
        """Raise the one-line error naming the first conflict, if there is one; `hint` says
        what to do (`move it away, or choose another --output`)."""
        if self.conflicts:
            raise conflict_error(folder, self.conflicts[0], hint)


def conflict_error(folder: Path, path: str, hint: str) -> FinReflectError:
    """`<folder> holds <path>, which finreflect-eval did not write; <hint>`."""
    return FinReflectError(f"{folder} holds {path}, which finreflect-eval did not write; {hint}")


def plan_write(folder: Path, files: Iterable[str], ours: Container[str]) -> Plan:
    """Sort the files now in `folder` for a write of `files` (relative paths): ours are those in
    `ours` (the record, or what a command takes as its own from an older version), never a
    link (a link in the place of our file is the user's: writing would write through it)."""
    new = set(files)
    folders = {parent for name in new for parent in _parents(name)}
    groups: dict[str, list[str]] = {"replaced": [], "stale": [], "kept": [], "conflicts": []}
    for path in files_under(folder):
        if path in ours and not (folder / path).is_symlink():
            groups["replaced" if path in new else "stale"].append(path)
        elif path in new or path in folders or any(parent in new for parent in _parents(path)):
            groups["conflicts"].append(path)
        else:
            groups["kept"].append(path)
    return Plan(**{group: tuple(paths) for group, paths in groups.items()})


def _parents(path: str) -> list[str]:
    """The folders above a relative path, nearest first ("a/b/c" → "a/b", "a")."""
    return [str(parent) for parent in PurePosixPath(path).parents][:-1]  # without "."


def move_in(staging: Path, output: Path, plan: Plan, marker: str) -> None:
    """Move the files written whole in `staging` (a folder inside `output`, so on its file
    system) into `output`, each renamed over the old one, then remove ours that the new write
    lacks (`plan.stale`); `output` itself is never renamed: it may be the current folder or a
    mount point, and it holds the user's files. Until `staging`'s marker (the new record) comes
    last, the record lists every file of the old and the new write and of `staging`, so a
    killed write leaves none of them taken for the user's: the next write replaces or removes
    them."""
    names = list(files_under(staging))
    inside = staging.relative_to(output).as_posix()
    record = read_record(staging, marker)
    written_by = record.written_by if record else marker
    every = {*plan.replaced, *plan.stale, *names, *(f"{inside}/{name}" for name in names)}
    write_record(output, marker, written_by, every - {marker})
    for name in names:
        if name != marker:
            (output / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, output / name)
    remove_files(output, plan.stale)
    os.replace(staging / marker, output / marker)
    shutil.rmtree(staging)


def remove_files(folder: Path, paths: Iterable[str]) -> None:
    """Remove these files of ours (one gone already: nothing to do), and the folders that
    leaves empty: only those, never `folder` itself nor an empty folder of the user's."""
    emptied = set()
    for name in paths:
        (folder / name).unlink(missing_ok=True)
        emptied.update(_parents(name))
    for parent in sorted(emptied, key=lambda p: p.count("/"), reverse=True):  # deepest first
        path = folder / parent
        if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()
