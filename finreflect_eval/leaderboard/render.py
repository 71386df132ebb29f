"""Rendering the leaderboard: `index.html` (self-contained: data, CSS and JS inline, no network),
`leaderboard.json`, `leaderboard.csv` and `judges.json`, from the verified entries. Every text
that comes from a submission is HTML-escaped (and CSV cells quoted against formulas)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import jinja2

from finreflect_eval.audit import PANEL_ROW
from finreflect_eval.criteria import CRITERIA
from finreflect_eval.leaderboard.entries import AuditEntry, RunEntry, load_entries
from finreflect_eval.modes import MODE_NAMES
from finreflect_eval.records import DatasetInfo
from finreflect_eval.store import spreadsheet_safe, write_atomic

LETTERS = {name: criterion.letter for name, criterion in CRITERIA.items()}
MODES = MODE_NAMES
TEMPLATES = Path(__file__).parent / "templates"


SECTIONS = ("official", "community", "smoke")


def rows_of(entries: list[RunEntry]) -> list[dict[str, Any]]:
    """One flat row per submission, official ones ranked by Overall: the overall score with
    its CI, the score per mode, per-criterion detail per mode, the judges' α and the rest."""
    rows = []
    for entry in entries:
        results = entry.submission.results
        by_mode = {results.details[task].mode: task for task in results.tasks}
        model = entry.model
        row: dict[str, Any] = {
            "section": entry.section,
            "rank": None,
            "model": model,
            "hub_url": f"https://huggingface.co/{model}" if "/" in model else None,
            "panel": results.judges.panel,
            "dataset": dataset_label(results.dataset),
            "date": results.run[:10],
            "run_id": entry.run_id,
            "json": (entry.folder / f"{entry.run_id}.json").as_posix(),
            "overall": results.overall.score,
            "overall_ci": results.overall.ci,
        }
        for mode in MODES:
            task = by_mode.get(mode)
            row[mode] = results.overall.tasks.get(task) if task else None
            scores = results.results.get(task, {}) if task else {}
            criteria = results.details[task].criteria if task else {}
            for criterion, short in LETTERS.items():
                row[f"{mode}.{short}"] = scores.get(f"{criterion},none")
                detail = criteria.get(criterion)
                row[f"{mode}.{short}_ci"] = detail.ci if detail else None
        alphas = [a.alpha for per_task in results.agreement.values() for a in per_task.values()]
        row["alpha"] = _mean(alphas, digits=4)
        row["triples_per_span"] = _mean(
            [results.results[task].get("triples_per_span,none") for task in results.tasks]
        )
        row["check_rules"] = _mean(
            [results.results[task].get("check_rules,none") for task in results.tasks]
        )
        rows.append(row)
    rows.sort(
        key=lambda r: (
            SECTIONS.index(r["section"]),
            -math.inf if r["overall"] is None else -r["overall"],
            r["model"],
        )
    )
    official = [row for row in rows if row["section"] == "official"]
    for rank, row in enumerate(official, 1):
        row["rank"] = rank
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
    rows = rows_of(load_entries(leaderboard, "submissions"))
    judges = judge_rows(load_entries(leaderboard, "audits"))
    return {
        "index.html": render_html(rows, judges),
        "leaderboard.json": json.dumps(rows, indent=2, ensure_ascii=False) + "\n",
        "leaderboard.csv": _csv(rows),
        "judges.json": json.dumps(judges, indent=2, ensure_ascii=False) + "\n",
    }


def build(leaderboard: Path) -> list[Path]:
    """Write the generated files of the leaderboard folder."""
    leaderboard.mkdir(parents=True, exist_ok=True)
    files = render(leaderboard)
    for name, text in files.items():
        write_atomic(leaderboard / name, text)
    return [leaderboard / name for name in files]


def check(leaderboard: Path) -> list[str]:
    """The generated files that differ from what the stored entries give (every entry is
    re-verified first: one that no longer verifies is an error naming its file)."""
    stale = []
    for name, text in render(leaderboard).items():
        path = leaderboard / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    return stale


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    columns = list(rows[0]) if rows else ["model"]
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        cells = {
            k: json.dumps(v) if isinstance(v, list) else spreadsheet_safe(v) for k, v in row.items()
        }
        writer.writerow(cells)
    return buffer.getvalue()


def render_html(rows: list[dict[str, Any]], judges: list[dict[str, Any]]) -> str:
    """The page, from `templates/index.html.jinja` with autoescaping (every value from a
    submission is escaped); the CSS and JS files are inlined, so the page needs no network."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    judge_columns = [key for key in (judges[0] if judges else {}) if "." in key]
    sections = {section: [row for row in rows if row["section"] == section] for section in SECTIONS}
    return environment.get_template("index.html.jinja").render(
        sections=sections,
        modes=MODES,
        letters=LETTERS,
        plots=[_plot(rows, criterion, letter) for criterion, letter in LETTERS.items()],
        judges=judges,
        judge_columns=judge_columns,
        judge_labels={key: _judge_column(key) for key in judge_columns},
        style=(TEMPLATES / "style.css").read_text(encoding="utf-8"),
        script=(TEMPLATES / "script.js").read_text(encoding="utf-8"),
    )


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
