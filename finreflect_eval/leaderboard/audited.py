"""Audit files on the board: `leaderboard audit` re-judges a stored entry (`rejudging`) and
writes `<leaderboard>/entry_audits/<org__model>/<run-id>.json` (the entry's own path under
`submissions/`); `--calibrate` writes `entry_audits/calibration_<panel>.json`, each judge's
re-run agreement, which the panel's audits are compared with. Whenever the board is built every
audit file is verified offline: the entry is the one audited (its sha256), the draw redraws from
the seed, the re-run agreements are its calibration's, and the report recomputes from the votes;
a file that does not is an error naming it."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.version import __version__
from finreflect_eval.leaderboard.entries import RunEntry, load_entries
from finreflect_eval.leaderboard.rejudging import (
    DEFAULT_SIZE,
    FALSE_REJECT,
    compare,
    draw,
    file_sha256,
    rejudge,
    rerun_agreement,
    seed_of,
)
from finreflect_eval.leaderboard.verify import first_difference
from finreflect_eval.pipeline.judging import Panel, judge_member
from finreflect_eval.records import (
    AuditCalibration,
    AuditedEntry,
    EntryAudit,
    parse,
    read_json,
)
from finreflect_eval.runs.store import write_atomic

AUDITS = "entry_audits"
# The maintainers' cache of audit calls: their own, never in the published folder.
AUDIT_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "finreflect-eval"
    / "audits.sqlite"
)
CALIBRATION = "calibration_{panel}.json"
CALIBRATION_NAME = re.compile(r"calibration_[A-Za-z0-9][A-Za-z0-9._-]*\.json")


def stored_entry(leaderboard: Path, path: Path) -> tuple[RunEntry, AuditedEntry]:
    """The stored, re-verified entry at `path` (a file under `<leaderboard>/submissions/`) and
    what an audit records of it (its path in the folder and the sha256 of its bytes)."""
    relative = _relative(leaderboard, path)
    for entry in load_entries(leaderboard, "submissions"):
        if isinstance(entry, RunEntry) and entry.path == relative:
            return entry, AuditedEntry(path=relative, sha256=file_sha256(leaderboard / relative))
    raise FinReflectError(
        f"{path} is not an entry stored in {leaderboard / 'submissions'}: audit a stored entry "
        "(submit it first)"
    )


def audit_entry(
    leaderboard: Path,
    path: Path,
    panel: Panel,
    *,
    size: int = DEFAULT_SIZE,
    cache_path: Path | None = None,
) -> tuple[Path, EntryAudit]:
    """Re-judge a stored entry with `panel` on its seeded sample, compare, and write the audit
    file (compared with the re-run agreement of the panel's calibration, which must exist)."""
    entry, audited = stored_entry(leaderboard, path)
    calibration_path = leaderboard / AUDITS / CALIBRATION.format(panel=panel.panel)
    if not calibration_path.is_file():
        raise FinReflectError(
            f"no calibration of panel '{panel.panel}' in {calibration_path.parent}: measure the "
            f"re-run agreement first (`finreflect-eval leaderboard audit {path} --judges "
            f"{panel.panel} --calibrate`)"
        )
    calibration = load_calibration(calibration_path)
    seed = seed_of(audited.sha256)
    items = draw(entry.submission, seed, size)
    votes, facts = rejudge(entry.submission, items, panel, cache_path)
    rerun = rerun_counts(calibration)
    audit = EntryAudit(
        entry=audited,
        seed=seed,
        size=size,
        panel=panel.panel,
        judges=[judge_member(panel, spec, facts[spec.name]) for spec in panel.judges],
        items=items,
        votes=votes,
        rerun=rerun,
        false_reject=FALSE_REJECT,
        calibration=calibration_path.name,
        date=_today(),
        finreflect_eval_version=__version__,
        report=compare(entry.submission, items, votes, rerun),
    )
    target = leaderboard / AUDITS / Path(audited.path).relative_to("submissions")
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, audit.model_dump_json(indent=1) + "\n")
    return target, audit


def calibrate(
    leaderboard: Path, path: Path, panel: Panel, *, size: int = DEFAULT_SIZE, runs: int = 2
) -> tuple[Path, AuditCalibration]:
    """Run `panel` `runs` times, without a cache, on a stored entry's audit sample, and write
    the re-run agreement its audits are held to."""
    entry, audited = stored_entry(leaderboard, path)
    items = draw(entry.submission, seed_of(audited.sha256), size)
    verdicts = [rejudge(entry.submission, items, panel, None)[0] for _ in range(runs)]
    calibration = AuditCalibration(
        panel=panel.panel,
        entry=audited,
        items=items,
        runs=verdicts,
        runs_described=["no cache"] * runs,
        date=_today(),
        finreflect_eval_version=__version__,
        report=rerun_agreement(verdicts),
    )
    target = leaderboard / AUDITS / CALIBRATION.format(panel=panel.panel)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, calibration.model_dump_json(indent=1) + "\n")
    return target, calibration


def rerun_counts(calibration: AuditCalibration) -> dict[str, list[int]]:
    """Per judge, `[same, n]` of its re-runs."""
    return {j: [r["same"], r["n"]] for j, r in calibration.report["judges"].items()}


def load_calibration(path: Path) -> AuditCalibration:
    """A calibration file, its report recomputed from its runs."""
    calibration = parse(AuditCalibration, read_json(path), path)
    difference = first_difference(calibration.report, rerun_agreement(calibration.runs), "report")
    if difference:
        raise FinReflectError(f"{path}: refused: {difference}")
    return calibration


def load_audits(leaderboard: Path, entries: Sequence[RunEntry]) -> dict[str, EntryAudit]:
    """Every audit file of the board, verified against the stored entries (see the module's
    docstring), by the entry's path (`submissions/<org__model>/<run-id>.json`)."""
    folder = leaderboard / AUDITS
    if not folder.is_dir():
        return {}
    stored = {entry.path: entry for entry in entries}
    audits: dict[str, EntryAudit] = {}
    for path in sorted(folder.rglob("*.json")):
        if path.parent == folder and CALIBRATION_NAME.fullmatch(path.name):
            load_calibration(path)
            continue
        audit = parse(EntryAudit, read_json(path), path)
        problem = _audit_problem(leaderboard, path, audit, stored)
        if problem:
            raise FinReflectError(f"{path}: {problem}")
        audits[audit.entry.path] = audit
    return audits


def _audit_problem(
    leaderboard: Path, path: Path, audit: EntryAudit, stored: dict[str, RunEntry]
) -> str | None:
    entry = stored.get(audit.entry.path)
    expected = leaderboard / AUDITS / Path(audit.entry.path).relative_to("submissions")
    if entry is None or expected != path:
        return f"an audit of {audit.entry.path}, which is not a stored entry at this path"
    if file_sha256(leaderboard / audit.entry.path) != audit.entry.sha256:
        return "the entry changed since it was audited (its sha256 differs): audit it again"
    if audit.seed != seed_of(audit.entry.sha256):
        return f"seed {audit.seed} is not the one the entry's sha256 gives"
    if audit.items != draw(entry.submission, audit.seed, audit.size):
        return "its items are not the draw the seed gives"
    calibration_path = leaderboard / AUDITS / audit.calibration
    if not CALIBRATION_NAME.fullmatch(audit.calibration) or not calibration_path.is_file():
        return f"its calibration {audit.calibration!r} is not a calibration file of the board"
    if rerun_counts(load_calibration(calibration_path)) != audit.rerun:
        return f"its re-run agreements are not those of {audit.calibration}"
    again = compare(entry.submission, audit.items, audit.votes, audit.rerun, audit.false_reject)
    difference = first_difference(audit.report, again, "report")
    return f"refused: {difference}" if difference else None


def audit_cell(audit: EntryAudit | None) -> dict[str, Any] | None:
    """What an entry's row shows of its audit: `audited` (N items re-judged, agreement with its
    interval) or `failed` (with the reasons); None: not audited."""
    if audit is None:
        return None
    report = audit.report
    return {
        "state": "audited" if report["passed"] else "failed",
        "items": report["items"],
        "agreement": report["agreement"]["rate"],
        "ci": report["agreement"]["ci"],
        "reasons": report["reasons"],
        "panel": audit.panel,
        "date": audit.date,
    }


def _relative(leaderboard: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(leaderboard.resolve()).as_posix()
    except ValueError:
        raise FinReflectError(
            f"{path} is not in the leaderboard folder {leaderboard}: give the stored entry's "
            "file (submissions/<org__model>/<run-id>.json)"
        ) from None


def _today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%S")
