"""Rendering the leaderboard: `index.html` (self-contained: data, CSS and JS inline, no network),
`leaderboard.json`, `leaderboard.csv` and `judges.json`, from the verified entries, and each
entry's report (`finreflect-eval view` of the stored submission) under `reports/`, which the
entry's row links to. Every text that comes from a submission is HTML-escaped (and CSV cells
quoted against formulas)."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import jinja2

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard import ranking
from finreflect_eval.leaderboard.entries import (
    UNSAFE_CHARACTER,
    AuditEntry,
    RunEntry,
    load_entries,
)
from finreflect_eval.leaderboard.published import load_published
from finreflect_eval.leaderboard.ranking import Contender, Standing
from finreflect_eval.pipeline.audit import PANEL_ROW
from finreflect_eval.protocol.criteria import CRITERIA
from finreflect_eval.protocol.modes import MODE_NAMES
from finreflect_eval.records import DatasetInfo, Results
from finreflect_eval.review.queue import spreadsheet_safe
from finreflect_eval.runs.store import write_atomic
from finreflect_eval.stats.agreement import ALPHA_GATE
from finreflect_eval.view.report import MARKER, write_report

LETTERS = {name: criterion.letter for name, criterion in CRITERIA.items()}
MODES = MODE_NAMES
TEMPLATES = Path(__file__).parent / "templates"
REPORTS = "reports"  # <leaderboard>/reports/<org__model>/<run id>/: each entry's report


SECTIONS = ("official", "community", "smoke")
VERSION_ORDER = {True: 0, None: 1, False: 2}  # the pinned data version, none pinned, another


def rows_of(entries: list[RunEntry]) -> list[dict[str, Any]]:
    """One flat row per submission, ordered by section, comparison group and Overall: the
    overall score with its CI, its place among the entries it is compared with (`ranking`: rank
    range, ties, the difference to the next entry with its paired interval, the ranking's
    stability without each judge), the score per mode, per-criterion detail per mode, the
    judges' α per criterion with its interval, the agreement gate, and its data version
    (`data_version.*`: dataset id, commit, fingerprint, slice, and whether it is the pinned
    version). Official rows get a `rank`, except those on a version other than the pinned one;
    community and smoke rows are compared, never ranked."""
    rows, contenders = [], []
    for entry in entries:
        results = entry.submission.results
        by_mode = {results.details[task].mode: task for task in results.tasks}
        contenders.append(Contender.of(entry.run_id, entry.section, results))
        row = _entry_row(entry, contenders[-1]) | _mode_scores(results, by_mode)
        rows.append(row | _agreement(results, by_mode) | _output_means(results))
    standing = ranking.standings(contenders)
    _place(rows, standing)
    return _board_order(rows, standing)


def _entry_row(entry: RunEntry, contender: Contender) -> dict[str, Any]:
    """A row's first columns: the entry, its data version, its overall score (place: `_place`)."""
    results, model = entry.submission.results, entry.model
    return {
        "section": entry.section,
        "rank": None,
        "rank_range": None,
        "model": model,
        "hub_url": f"https://huggingface.co/{model}" if "/" in model else None,
        "panel": results.judges.panel,
        "panel_note": results.judges.note(),
        "dataset": dataset_label(results.dataset),
        "data_version.id": results.dataset.id,
        "data_version.revision": results.dataset.revision,
        "data_version.fingerprint": results.dataset.fingerprint,
        "data_version.slice": results.dataset.slice.name if results.dataset.slice else None,
        "data_version.pinned": entry.pinned,
        "date": results.run[:10],
        "run_id": entry.run_id,
        "json": (entry.folder / f"{entry.run_id}.json").as_posix(),
        "report": (report_folder(entry) / "index.html").as_posix(),
        "overall": results.overall.score,
        "overall_ci": results.overall.ci,
        "overall_ci_reliable": results.overall.ci_reliable,
        "comparison_group": ranking.describe_group(contender.group),
        "group_size": 1,
        "tied_with": [],
        "tied_with_runs": [],
        "next_difference": None,
        "next_difference_ci": None,
        "ranking_stability": {},
    }


def _mode_scores(results: Results, by_mode: dict[str, str]) -> dict[str, Any]:
    """Per mode: its score, and each criterion's score with its CI (None: a mode not run)."""
    columns: dict[str, Any] = {}
    for mode in MODES:
        task = by_mode.get(mode)
        columns[mode] = results.overall.tasks.get(task) if task else None
        scores = results.results.get(task, {}) if task else {}
        criteria = results.details[task].criteria if task else {}
        for criterion, short in LETTERS.items():
            columns[f"{mode}.{short}"] = scores.get(f"{criterion},none")
            detail = criteria.get(criterion)
            columns[f"{mode}.{short}_ci"] = detail.ci if detail else None
    return columns


def _agreement(results: Results, by_mode: dict[str, str]) -> dict[str, Any]:
    """Per mode and criterion, the judges' α with its interval (and ordinal α where ordered); per
    criterion, its mean over the modes; `below_gate`, the `mode.criterion`s under the gate."""
    columns: dict[str, Any] = {}
    gated = []
    for mode in MODES:
        task = by_mode.get(mode)
        agreement = results.agreement.get(task, {}) if task else {}
        for criterion, short in LETTERS.items():
            found = agreement.get(criterion)
            columns[f"{mode}.alpha_{short}"] = found.alpha if found else None
            columns[f"{mode}.alpha_{short}_ci"] = found.ci if found else None
            if CRITERIA[criterion].ordered:
                columns[f"{mode}.alpha_{short}_ordinal"] = found.ordinal if found else None
                columns[f"{mode}.alpha_{short}_ordinal_ci"] = found.ordinal_ci if found else None
            if found and found.below_gate:
                gated.append(f"{mode}.{criterion}")
    for short in LETTERS.values():
        columns[f"alpha_{short}"] = _mean([columns[f"{m}.alpha_{short}"] for m in MODES], 4)
    columns["below_gate"] = gated
    return columns


def _output_means(results: Results) -> dict[str, float | None]:
    """`triples_per_span` and `check_rules`, averaged over the run's tasks."""
    return {
        name: _mean([results.results[task].get(f"{name},none") for task in results.tasks])
        for name in ("triples_per_span", "check_rules")
    }


def _place(rows: list[dict[str, Any]], standing: dict[str, Standing]) -> None:
    """Each row's place among the entries it is compared with, and its `rank` (see `rows_of`)."""
    models = {row["run_id"]: row["model"] for row in rows}
    for row in rows:
        mine = standing[row["run_id"]]
        row["rank_range"] = mine.rank_range
        row["group_size"] = mine.group_size
        row["tied_with"] = [models[run] for run in mine.tied_with]
        row["tied_with_runs"] = mine.tied_with
        row["next_difference"] = mine.next_difference
        row["next_difference_ci"] = mine.next_difference_ci
        row["ranking_stability"] = mine.stability
        if row["section"] == "official" and row["data_version.pinned"] is not False:
            row["rank"] = mine.place


def _board_order(rows: list[dict[str, Any]], standing: dict[str, Standing]) -> list[dict[str, Any]]:
    """Sections in order; in one, the pinned data version, then datasets with none pinned, then
    others; in those, comparison groups (the best entry's first), by place (none last), model."""
    by_overall = sorted(rows, key=lambda r: (r["overall"] is None, -(r["overall"] or 0)))
    first_seen: dict[str, int] = {}
    for row in by_overall:
        first_seen.setdefault(row["comparison_group"], len(first_seen))
    rows.sort(
        key=lambda r: (
            SECTIONS.index(r["section"]),
            VERSION_ORDER[r["data_version.pinned"]],
            first_seen[r["comparison_group"]],
            math.inf if standing[r["run_id"]].place is None else standing[r["run_id"]].place,
            r["model"],
            r["run_id"],
        )
    )
    return rows


def _mean(values: list[Any], digits: int = 2) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), digits) if present else None


def dataset_label(dataset: DatasetInfo) -> str:
    label = dataset.id
    if dataset.revision:
        label += f"@{dataset.revision[:10]}"
    if dataset.limit:
        label += f" (first {dataset.limit})"
    return f"{label} {dataset.fingerprint[:8]}"


def judge_rows(audits: list[AuditEntry]) -> list[dict[str, Any]]:
    """One row per judge (and panel majority) per audit: accuracy and κ per criterion, flip
    rate per probe, α of the panel."""
    rows = []
    for entry in audits:
        report = entry.audit.report
        for judge, values in report["judges"].items():
            row: dict[str, Any] = {
                "panel": entry.panel,
                "official": entry.official,
                "judge": judge,
                "dataset": dataset_label(entry.audit.dataset),
                "date": entry.audit.date[:10],
            }
            for criterion, short in LETTERS.items():
                scores = values["criteria"][criterion]
                row[f"accuracy.{short}"] = scores["accuracy"]
                row[f"kappa.{short}"] = scores["kappa"]
                agreement = report["agreement"][criterion]["alpha"]
                row[f"alpha.{short}"] = agreement if judge == PANEL_ROW else None
            for probe, rate in values["probes"].items():
                row[f"flip.{probe}"] = rate["rate"]
            rows.append(row)
    return rows


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


def report_folder(entry: RunEntry) -> Path:
    """Where an entry's report goes, relative to the leaderboard folder:
    `reports/<org__model>/<run id>` (the names of its stored file, made safe again)."""
    name, run = (UNSAFE_CHARACTER.sub("_", part) for part in (entry.folder.name, entry.run_id))
    if {name, run} & {"", ".", ".."}:
        raise FinReflectError(f"refused: {entry.describe()} has no usable report folder name")
    return Path(REPORTS) / name / run


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
        folder = report_folder(entry)
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
            "value": _mean([row[f"{mode}.{letter}"] for mode in MODES]),
        }
        for row in rows
    ]
    return {"criterion": criterion, "letter": letter, "bars": bars}
