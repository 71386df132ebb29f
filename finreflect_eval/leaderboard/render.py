"""Rendering the leaderboard: `index.html` (self-contained: data, CSS and JS inline, no network),
`leaderboard.json`, `leaderboard.csv` and `judges.json`, from the verified entries, and each
entry's report (`finreflect-eval view` of the stored submission) under `reports/`, which the
entry's row links to. Every text that comes from a submission is HTML-escaped (and CSV cells
quoted against formulas)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import jinja2

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard.entries import (
    REPORTS,
    RunEntry,
    load_entries,
)
from finreflect_eval.leaderboard.published import load_published
from finreflect_eval.leaderboard.rows import LETTERS, MODES, SECTIONS, judge_rows, mean_of, rows_of
from finreflect_eval.review.queue import spreadsheet_safe
from finreflect_eval.runs.store import write_atomic
from finreflect_eval.stats.agreement import ALPHA_GATE
from finreflect_eval.view.report import MARKER, write_report

TEMPLATES = Path(__file__).parent / "templates"


def render(leaderboard: Path) -> dict[str, str]:
    """The generated files of a leaderboard folder, by name: `index.html`, `leaderboard.json`,
    `leaderboard.csv` and `judges.json`, from the stored (re-verified) entries."""
    return _files(leaderboard, load_entries(leaderboard, "submissions"))


def _files(leaderboard: Path, entries: list[RunEntry]) -> dict[str, str]:
    rows = rows_of(entries)
    judges = judge_rows(load_entries(leaderboard, "audits"))
    published = [row.row() for row in load_published(leaderboard)]
    return {
        "index.html": render_html(rows, judges, published),
        "leaderboard.json": json.dumps(rows, indent=2, ensure_ascii=False) + "\n",
        "leaderboard.csv": _csv(rows),
        "judges.json": json.dumps(judges, indent=2, ensure_ascii=False) + "\n",
    }


def build(leaderboard: Path) -> list[Path]:
    """Write the generated files of the leaderboard folder, and every stored entry's report
    under `reports/` (anything else there is removed: the folder is generated)."""
    leaderboard.mkdir(parents=True, exist_ok=True)
    entries = load_entries(leaderboard, "submissions")
    files = _files(leaderboard, entries)
    for name, text in files.items():
        write_atomic(leaderboard / name, text)
    written = [leaderboard / name for name in files]
    reports = _reports(entries)
    for path in _unexpected(leaderboard, reports):
        _remove(path)
    for folder, entry in reports.items():
        target = leaderboard / folder
        if target.is_symlink() or (target.exists() and not (target / MARKER).is_file()):
            _remove(target)  # not a report `view` wrote: build owns reports/
        written.append(_write_report(entry, target))
    _prune(leaderboard / REPORTS)
    return written


def check(leaderboard: Path) -> list[str]:
    """The generated files and reports that differ from what the stored entries give (every
    entry is re-verified first: one that no longer verifies is an error naming its file): a
    report missing, differing in any file, or of an entry no longer stored."""
    stale = []
    entries = load_entries(leaderboard, "submissions")
    for name, text in _files(leaderboard, entries).items():
        path = leaderboard / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    reports = _reports(entries)
    if reports:
        with tempfile.TemporaryDirectory(prefix="finreflect-reports-") as scratch:
            for folder, entry in reports.items():
                expected = Path(scratch) / folder
                _write_report(entry, expected)
                if not _same_files(expected, leaderboard / folder):
                    stale.append(folder.as_posix())
    stale += [
        path.relative_to(leaderboard).as_posix() for path in _unexpected(leaderboard, reports)
    ]
    return stale


def _reports(entries: list[RunEntry]) -> dict[Path, RunEntry]:
    reports: dict[Path, RunEntry] = {}
    for entry in entries:
        folder = entry.report_folder
        if folder in reports:  # two stored names that differ only in unsafe characters
            raise FinReflectError(
                f"{entry.describe()} and {reports[folder].describe()} share the report folder "
                f"{folder}"
            )
        reports[folder] = entry
    return reports


def _write_report(entry: RunEntry, folder: Path) -> Path:
    return write_report(entry.submission, folder)


def _unexpected(leaderboard: Path, reports: dict[Path, RunEntry]) -> list[Path]:
    """What `reports/` holds besides the entries' reports (never following a link)."""
    root = leaderboard / REPORTS
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        return [root]
    if not root.is_dir():
        return []
    names = {folder.parent.name for folder in reports}
    found = []
    for model in sorted(root.iterdir()):
        if model.name not in names or model.is_symlink() or not model.is_dir():
            found.append(model)
            continue
        for run in sorted(model.iterdir()):
            if Path(REPORTS) / model.name / run.name not in reports:
                found.append(run)
    return found


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _prune(root: Path) -> None:
    """Remove the folders under `reports/` (and itself) left empty."""
    if not root.is_dir() or root.is_symlink():
        return
    for model in root.iterdir():
        if model.is_dir() and not model.is_symlink() and not any(model.iterdir()):
            model.rmdir()
    if not any(root.iterdir()):
        root.rmdir()


def _same_files(expected: Path, found: Path) -> bool:
    """Whether `found` holds exactly `expected`'s files with the same bytes (sizes first)."""
    if found.is_symlink() or not found.is_dir():
        return False

    def listing(folder: Path) -> dict[str, Path]:
        return {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if not p.is_dir()}

    want, have = listing(expected), listing(found)
    if want.keys() != have.keys():
        return False
    if any(have[name].is_symlink() for name in have):
        return False
    if any(want[n].stat().st_size != have[n].stat().st_size for n in want):
        return False
    return all(want[n].read_bytes() == have[n].read_bytes() for n in want)


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
) -> str:
    """The page, from `templates/index.html.jinja` with autoescaping (every value from a
    submission is escaped), with the published reference figures apart; the CSS and JS files
    are inlined, so the page needs no network."""
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
    comparison notes. Tables are only ranked on the pinned version, or where none is."""
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
