"""Rendering the leaderboard: `index.html` (self-contained: data, CSS and JS inline, no network),
`leaderboard.json`, `leaderboard.csv` and `judges.json`, from the verified entries, and each
entry's report (`finreflect-eval view` of the stored submission) under `reports/`, which the
entry's row links to. Every text that comes from a submission is HTML-escaped (and CSV cells
quoted against formulas).

The folder is the user's too (the stored entries, a README, pages of their own): `build`
records the files it wrote (RECORD) and replaces or removes only those; any other file stays,
and one where `build` writes is refused before anything changes."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jinja2

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.output_folder import (
    files_under,
    plan_write,
    read_record,
    remove_files,
    write_record,
)
from finreflect_eval._util.version import __version__
from finreflect_eval.leaderboard.audited import audit_cell, load_audits
from finreflect_eval.leaderboard.entries import (
    REPORTS,
    AuditEntry,
    Entry,
    RunEntry,
    load_entries,
)
from finreflect_eval.leaderboard.published import load_published
from finreflect_eval.leaderboard.rows import (
    LETTERS,
    MODES,
    SECTIONS,
    judge_rows,
    mean_of,
    rows_of,
    standing,
)
from finreflect_eval.leaderboard.validity import LABELS, Validity, validity
from finreflect_eval.review.queue import spreadsheet_safe
from finreflect_eval.runs.store import write_atomic
from finreflect_eval.stats.agreement import ALPHA_GATE
from finreflect_eval.view.report import MARKER, check_report_folder, report_files, write_report

TEMPLATES = Path(__file__).parent / "templates"
GENERATED = ("index.html", "leaderboard.json", "leaderboard.csv", "judges.json")  # `_files`
RECORD = ".finreflect-leaderboard"  # the files `build` wrote in the folder (JSON)


def render(leaderboard: Path) -> dict[str, str]:
    """The generated files of a leaderboard folder, by name: `index.html`, `leaderboard.json`,
    `leaderboard.csv` and `judges.json`, from the stored (re-verified) entries."""
    return _files(leaderboard, load_entries(leaderboard, "submissions"))


def _rows(leaderboard: Path, entries: list[RunEntry]) -> list[dict[str, Any]]:
    """The entries' rows, each with its re-judging audit (the board's audit files)."""
    audits = load_audits(leaderboard, entries)
    for entry in entries:
        entry.audit = audit_cell(audits.get(entry.path))
    return rows_of(entries)


def standing_of(leaderboard: Path, entry: Entry, stored: list[Entry]) -> str:
    """Where a verified entry would go on the page, in one line: its section and its rank, or
    why it has none, from the row the build gives it beside the `stored` entries; an audit's,
    the Judges table."""
    if isinstance(entry, AuditEntry):
        return f"the Judges table, {'an official' if entry.official else 'a community'} panel"
    entries = [e for e in stored if isinstance(e, RunEntry)] + [entry]
    return next(
        standing(row) for row in _rows(leaderboard, entries) if row["run_id"] == entry.run_id
    )


def _files(leaderboard: Path, entries: list[RunEntry]) -> dict[str, str]:
    rows = _rows(leaderboard, entries)
    judges = judge_rows(load_entries(leaderboard, "audits"))
    published = [row.row() for row in load_published(leaderboard)]
    return {
        "index.html": render_html(rows, judges, published, validity(entries)),
        "leaderboard.json": json.dumps(rows, indent=2, ensure_ascii=False) + "\n",
        "leaderboard.csv": _csv(rows),
        "judges.json": json.dumps(judges, indent=2, ensure_ascii=False) + "\n",
    }


def build(leaderboard: Path) -> list[Path]:
    """Write the generated files of the leaderboard folder, and every stored entry's report
    under `reports/`. The files it wrote before are replaced, or removed where nothing gives
    them now (the report of an entry no longer stored); anything else is kept. A file of the
    user's where it writes is refused first, naming it, and nothing changes."""
    leaderboard.mkdir(parents=True, exist_ok=True)
    entries = load_entries(leaderboard, "submissions")
    files = _files(leaderboard, entries)
    reports = _reports(entries)
    # Refused before any write: the user's file at a generated file's path or on a report's way
    # (its marker's path: `reports` itself, say), or a folder of theirs where a report goes.
    markers = [f"{folder.as_posix()}/{MARKER}" for folder in reports]
    hint = "move it away: `leaderboard build` writes there"
    plan_write(leaderboard, [*files, *markers, RECORD], _ours(leaderboard)).refuse_conflicts(
        leaderboard, hint
    )
    for folder in reports:
        check_report_folder(leaderboard / folder)
    # (A user's file inside a report, where that report now writes, is refused by `view`
    # itself: the reports before it are then new already. Nothing of the user's is lost.)
    written = [_write_report(entry, leaderboard / folder) for folder, entry in reports.items()]
    for name, text in files.items():
        write_atomic(leaderboard / name, text)
    new = [*files, *_report_paths(leaderboard, reports)]
    remove_files(leaderboard, plan_write(leaderboard, [*new, RECORD], _ours(leaderboard)).stale)
    write_record(leaderboard, RECORD, f"finreflect-eval {__version__} leaderboard build", new)
    return [leaderboard / name for name in files] + written


def check(leaderboard: Path) -> list[str]:
    """The generated files and reports that differ from what the stored entries give (every
    entry is re-verified first: one that no longer verifies is an error naming its file): a
    report missing, differing in a file it writes, or of an entry no longer stored; what
    `build` would rewrite or remove. The user's files are not the build's to check."""
    stale = []
    entries = load_entries(leaderboard, "submissions")
    files = _files(leaderboard, entries)
    for name, text in files.items():
        path = leaderboard / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    reports = _reports(entries)
    new = [*files, RECORD]
    if reports:
        with tempfile.TemporaryDirectory(prefix="finreflect-reports-") as scratch:
            for folder, entry in reports.items():
                expected = Path(scratch) / folder
                _write_report(entry, expected)
                new += [f"{folder.as_posix()}/{name}" for name in files_under(expected)]
                if not _same_files(expected, leaderboard / folder):
                    stale.append(folder.as_posix())
    for path in plan_write(leaderboard, new, _ours(leaderboard)).stale:
        parts = path.split("/")  # a file of a report no longer given: named by its folder
        name = "/".join(parts[:3]) if parts[0] == REPORTS and len(parts) > 3 else path
        if name not in stale:
            stale.append(name)
    return stale


def _reports(entries: list[RunEntry]) -> dict[Path, RunEntry]:
    reports: dict[Path, RunEntry] = {}
    for entry in entries:
        folder = entry.report_folder
        if folder in reports:  # two stored files of one submission (a copy), or names that
            # differ only in unsafe characters
            raise FinReflectError(
                f"{reports[folder].stored} and {entry.stored} share the report folder {folder} "
                "(the same submission twice?): remove one"
            )
        reports[folder] = entry
    return reports


def _write_report(entry: RunEntry, folder: Path) -> Path:
    return write_report(entry.shown, folder)


def _ours(leaderboard: Path) -> set[str]:
    """The files of the folder that `build` wrote: those its record lists (a folder an older
    version built, which kept none: the generated files, where it holds all four), and every
    report's under reports/ (a folder with `view`'s marker: what that marker lists), so that a
    build stopped half-way leaves nothing of its own unknown to the next."""
    record = read_record(leaderboard, RECORD)
    if record is not None and record.files is not None:
        ours = {*record.files, RECORD}
    elif all((leaderboard / name).is_file() for name in GENERATED):
        ours = set(GENERATED)
    else:
        ours = set()
    return ours | set(_report_paths(leaderboard, _report_folders(leaderboard)))


def _report_folders(leaderboard: Path) -> list[Path]:
    """The folders reports/<model>/<run>/ holding `view`'s marker (never through a link)."""
    found = []
    for model in _subfolders(leaderboard / REPORTS):
        found += [run for run in _subfolders(model) if read_record(run, MARKER) is not None]
    return [folder.relative_to(leaderboard) for folder in found]


def _subfolders(folder: Path) -> list[Path]:
    if folder.is_symlink() or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())


def _report_paths(leaderboard: Path, folders: Iterable[Path]) -> list[str]:
    """The files `view` wrote in these report folders, as paths in the leaderboard folder."""
    return [
        f"{folder.as_posix()}/{name}"
        for folder in folders
        for name in sorted(report_files(leaderboard / folder))
    ]


def _same_files(expected: Path, found: Path) -> bool:
    """Whether `found` holds each of `expected`'s files with the same bytes (sizes first), none
    of them a link or behind one; any other file there is the user's."""
    if found.is_symlink() or not found.is_dir():
        return False
    want, have = list(files_under(expected)), set(files_under(found))
    if any(name not in have or (found / name).is_symlink() for name in want):
        return False
    if any((expected / n).stat().st_size != (found / n).stat().st_size for n in want):
        return False
    return all((expected / n).read_bytes() == (found / n).read_bytes() for n in want)


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    columns = list(rows[0]) if rows else ["model"]
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        cells = {
            k: json.dumps(v, ensure_ascii=False)
            if isinstance(v, list | dict)
            else spreadsheet_safe(v)
            for k, v in row.items()
        }
        writer.writerow(cells)
    return buffer.getvalue()


def render_html(
    rows: list[dict[str, Any]],
    judges: list[dict[str, Any]],
    published: list[dict[str, Any]],
    checked: Validity | None = None,
) -> str:
    """The page, from `templates/index.html.jinja` with autoescaping (every value from a
    submission is escaped), with the published reference figures apart and, where an entry has
    a downstream block, the validity section (`checked`: the main scores against the downstream
    measures); the CSS and JS files are inlined, so the page needs no network."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    judge_columns = [key for key in (judges[0] if judges else {}) if "." in key]
    sections = {section: [row for row in rows if row["section"] == section] for section in SECTIONS}
    return environment.get_template("index.html.jinja").render(
        sections=sections,
        published=published,
        versions=version_tables(sections["official"]),
        community_notes=comparison_notes(sections["community"] + sections["smoke"]),
        alpha_gate=ALPHA_GATE,
        gate_text=gate_text,
        modes=MODES,
        letters=LETTERS,
        plots=[_plot(rows, criterion, letter) for criterion, letter in LETTERS.items()],
        judges=judges,
        validity=checked if checked is not None and checked.models else None,
        validity_labels=LABELS,
        judge_columns=judge_columns,
        judge_labels={key: _judge_column(key) for key in judge_columns},
        style=(TEMPLATES / "style.css").read_text(encoding="utf-8"),
        script=(TEMPLATES / "script.js").read_text(encoding="utf-8"),
    )


def gate_text(row: dict[str, Any]) -> str:
    """Where a row's α is below the gate, in words: each criterion with its modes ("every
    mode" where it is below in each mode the run covered)."""
    covered = [mode for mode in MODES if row[mode] is not None]
    modes: dict[str, list[str]] = {}
    for found in row["below_gate"]:
        mode, _, criterion = found.partition(".")
        modes.setdefault(criterion, []).append(mode)
    groups: dict[str, list[str]] = {}
    for criterion, where in modes.items():
        if len(covered) > 1 and where == covered:
            label = "every mode"
        else:
            label = ", ".join(mode.replace("_", "-") for mode in where)
        groups.setdefault(label, []).append(criterion)
    parts = [f"{', '.join(criteria)} ({label})" for label, criteria in groups.items()]
    return f"α under {ALPHA_GATE} on {'; '.join(parts)}: shown, not ranked apart"


def version_tables(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The official rows as one table per data version (in the rows' order: the pinned version
    first, the others last), each with its label ("ID @ commit, fingerprint F, slice S"),
    whether it is the pinned version (None: its dataset has none pinned), its rows and its
    comparison notes. Only the table of the pinned version is ranked."""
    tables: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = (row["data_version.fingerprint"], row["data_version.slice"])
        table = tables.setdefault(key, {"pinned": row["data_version.pinned"], "rows": []})
        table["rows"].append(row)
    for number, table in enumerate(tables.values(), start=1):
        table["id"] = "board-official" if number == 1 else f"board-official-{number}"
        table["label"] = version_label(table["rows"])
        table["notes"] = comparison_notes(table["rows"])
    return list(tables.values())


def version_label(rows: list[dict[str, Any]]) -> str:
    """A data version in words: the dataset id and commit it was read from (each, where its
    entries name several), its fingerprint and its slice."""
    sources = dict.fromkeys(
        row["data_version.id"]
        + (f" @ {row['data_version.revision'][:10]}" if row["data_version.revision"] else "")
        for row in rows
    )
    first = rows[0]
    part = f"slice {first['data_version.slice']}" if first["data_version.slice"] else "every span"
    return f"{'; '.join(sources)}, fingerprint {first['data_version.fingerprint']}, {part}"


def comparison_notes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per comparison group of a board's rows (in their order): its label, its size, and per
    panel with two entries or more, the ranking's stability without each judge (Kendall's τ)."""
    groups: dict[str, dict[str, Any]] = {}
    for row in rows:
        group = groups.setdefault(
            row["comparison_group"], {"label": row["comparison_group"], "size": 0, "panels": {}}
        )
        group["size"] += 1
        if row["ranking_stability"]:
            group["panels"][row["panel"]] = row["ranking_stability"]
    return list(groups.values())


def _judge_column(key: str) -> str:
    kind, _, name = key.partition(".")
    prefix = {"accuracy": "acc", "kappa": "κ", "alpha": "α", "flip": "flip"}[kind]
    return f"{prefix} {name.replace('_', ' ')}"


def _plot(rows: list[dict[str, Any]], criterion: str, letter: str) -> dict[str, Any]:
    """One bar per submission: the criterion averaged over the modes it ran."""
    bars = [
        {
            "model": row["model"],
            "section": row["section"],
            "value": mean_of([row[f"{mode}.{letter}"] for mode in MODES]),
        }
        for row in rows
    ]
    return {"criterion": criterion, "letter": letter, "bars": bars}
