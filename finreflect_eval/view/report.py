"""`finreflect-eval view`: a scored run (or two, side by side) as a static report folder.

    index.html            settings, scores with their intervals (SVG), α, leave-one-judge-out,
                          what the run cost (`cost`), and the span browser and review queue
                          (report-*.js, report.css)
    report-*.js           the page's script, in parts by what they draw, loaded in the order of
                          SCRIPTS: plain scripts (a page opened from disk may not load modules)
    data/<task>/index.js  the task's span index: one row per span (company, section, counts,
                          a mask of its items' labels and flags) — what filtering reads
    data/<task>/<n>.js    the spans themselves, a page of at most SPANS_PER_PAGE spans (and
                          about PAGE_BYTES) each: text, triples, every judge's votes
    data/<task>/graph-<run>-<n>.js  a filing's graph as the Graph tab draws it (`graph`)
    data/<task>/questions-<run>-<n>.js  a page of a downstream task's questions, with their
                          drawings, as the Downstream tab shows them (`downstream`)
    README.md             a Hugging Face static Space's card (the folder is the Space)
    .finreflect-report    the record of the files above (MARKER): a rerun replaces those and
                          keeps whatever else is in the folder (the user's files, written into
                          an existing folder such as `.`)

Data files are scripts that call a global (`FRV.index(...)`, `FRV.page(...)`,
`FRV.graph(...)`, `FRV.questions(...)`): a page opened from disk cannot fetch() files beside
it, but it can load scripts, and so can a static host.
The page loads the index and the spans on the screen only, and renders one screen of spans at a
time. Every text from the run reaches the page as data and is set with `textContent` (HTML by
Jinja's autoescape): span text holding `<script>` shows as text.
"""

from __future__ import annotations

import re
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import yaml

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval._util.hub import check_repo_id
from finreflect_eval._util.output_folder import (
    files_under,
    move_in,
    plan_write,
    read_record,
    write_record,
)
from finreflect_eval._util.tables import markdown_text
from finreflect_eval._util.version import __version__
from finreflect_eval.protocol.criteria import CRITERIA, CRITERION_NAMES
from finreflect_eval.records import Submission
from finreflect_eval.runs.store import not_a_link
from finreflect_eval.stats.agreement import ALPHA_GATE
from finreflect_eval.stats.metrics import code_label, vote_code
from finreflect_eval.view.cost import COLUMNS as COST_COLUMNS
from finreflect_eval.view.cost import cost_contexts
from finreflect_eval.view.downstream import task_downstreams
from finreflect_eval.view.graph import TripleCollector, task_graphs
from finreflect_eval.view.people import labels_by_doc
from finreflect_eval.view.scores import (
    compare_context,
    interval_text,
    number,
    run_context,
    signed,
    task_datasets,
)
from finreflect_eval.view.source import ViewRun, open_run
from finreflect_eval.view.spans import SpanRow, compare_parts, dumps, span_meta, span_part

TEMPLATES = Path(__file__).parent / "templates"
SPANS_PER_PAGE = 100
PAGE_BYTES = 1_000_000
SCREEN = 20  # spans rendered at a time
# The page's script, in the order it runs: each part uses names the ones before it set on FRV.
SCRIPTS = (
    "report-shared.js",  # the summary, the data's codes, loading data scripts, DOM helpers
    "report-compare.js",  # two runs side by side: what differs between A and B
    "report-filters.js",  # the state in the URL, the filter form, which spans pass it
    "report-spans.js",  # a span: its text, triples, verdicts and every judge's vote
    "report-graph.js",  # the Graph tab: a filing's graph, drawn from data/<task>/graph-*.js
    "report-downstream.js",  # the Downstream tab: questions from data/<task>/questions-*.js
    "report-main.js",  # the tabs, the span browser's screen, the wiring; starts the page
)
MARKER = ".finreflect-report"  # in a folder this command wrote: the files it wrote there
# What an older version's report holds (its marker lists nothing): the page, its styles, scripts
# and card, and the data scripts data/<task>/*.js; anything else there is the user's.
OLDER_REPORT = re.compile(
    r"index\.html|README\.md|report\.css|report[^/]*\.js|data/[^/]+/[^/]+\.js"
)
# What a push deletes on the Space where the upload lacks it: an earlier report's data pages and
# scripts (`*` spans folders). A user's file in the folder is uploaded, so never deleted; one
# added on the Space alone stays unless it is named as our pages are.
SPACE_DELETES = ["data/*/*.js", "report.js", "report-*.js"]
RULES = {
    "subject_reference": "subject is a pronoun or a generic reference",
    "entity_length": "an entity is longer than 5 words",
    "entity_schema": "an entity type is not in the schema",
    "relation_schema": "the relation is not in the schema",
}

Source = ViewRun | Submission | Path | str


def write_report(
    source: Source,
    output: Path | str,
    *,
    compare: Source | None = None,
    panel: str | None = None,
    compare_panel: str | None = None,
) -> Path:
    """Write the report of `source` (a run folder, a manifest or results file, a leaderboard
    `Submission`, or a `ViewRun`) into `output`, or of two runs on the same spans side by side
    (`compare`: run B). In a folder that exists, the files this function wrote there before (its
    record, MARKER) are replaced and any other file is kept; a file of the user's where the
    report writes is refused. Returns the report's `index.html`."""
    runs = [_as_run(source, panel)]
    if compare is not None:
        runs.append(_as_run(compare, compare_panel))
    tasks = _tasks(runs)
    output = Path(output)
    check_output(output)
    existed = output.exists()
    # Written whole first: into a new folder beside `output`, renamed in (a reader sees no
    # report or the whole one); into a folder that exists (`.`, one holding the user's files),
    # then moved in file by file (`move_in`), never replacing the folder itself.
    if existed:
        for left in output.glob(f"{MARKER}.*.staging"):  # ours, from a write that was killed
            if left.is_dir() and not left.is_symlink():
                shutil.rmtree(left, ignore_errors=True)
        staging = output / f"{MARKER}.{secrets.token_hex(4)}.staging"
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        staging = output.parent / f".{output.name}.{secrets.token_hex(4)}.tmp"
    try:
        staging.mkdir()
    except OSError as exc:  # a folder that takes no new file (/proc/1, read-only)
        raise FinReflectError(
            f"cannot write the report into {output}: {exc.strerror}; choose another --output"
        ) from None
    try:
        summary_tasks = []
        graphs: list[list[dict[str, Any]]] = [[] for _ in runs]
        for task in tasks:
            collectors = [TripleCollector(task) for _ in runs]
            rows = _task_rows(runs, task, collectors)
            summary_tasks.append(_write_task(staging / "data" / task, task, rows, runs))
            shown = task_graphs(staging / "data" / task, task, runs, collectors)
            for number, context in enumerate(shown):
                graphs[number] += [context] if context else []
        downstreams = task_downstreams(staging / "data", runs, tasks)
        _write_page(staging, runs, summary_tasks, graphs, downstreams)
        files = list(files_under(staging))
        write_record(staging, MARKER, f"finreflect-eval {__version__} view", files)
        if existed:
            plan = plan_write(output, [*files, MARKER], report_files(output))
            plan.refuse_conflicts(output, "move it away, or choose another --output")
            move_in(staging, output, plan, MARKER)
        else:
            staging.rename(output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output / "index.html"


def _as_run(source: Source, panel: str | None) -> ViewRun:
    if isinstance(source, ViewRun):
        return source
    if isinstance(source, Submission):
        return ViewRun.of_submission(source)
    return open_run(Path(source), panel)


def _tasks(runs: Sequence[ViewRun]) -> list[str]:
    """The tasks to show: the run's, or those both runs scored (in run A's order)."""
    tasks = runs[0].tasks
    if len(runs) == 2:
        tasks = [task for task in tasks if task in runs[1].results.details]
        if not tasks:
            raise FinReflectError(
                f"{runs[0].where} and {runs[1].where} have no task in common (A: "
                f"{', '.join(runs[0].tasks)}; B: {', '.join(runs[1].tasks)})"
            )
    return tasks


def _task_rows(
    runs: Sequence[ViewRun], task: str, collectors: Sequence[TripleCollector]
) -> list[SpanRow]:
    """The task's spans in `doc_id` order, each with every run's part (and each run's triples
    into its collector, for the graph); two runs must have judged the same spans."""
    rows: dict[str, SpanRow] = {}
    first = runs[0]
    criteria = first.criteria(task)
    people = labels_by_doc(first.human_labels.get(task, []), first.results.run, task)
    for record in first.records(task):
        collectors[0].add(record)
        part = span_part(record, first.panel, first.judges, criteria, people.get(record.doc_id, ()))
        rows[record.span_id] = SpanRow(record.doc_id, record.span_id, span_meta(record), [part])
    if len(runs) == 2:
        second = runs[1]
        criteria = second.criteria(task)
        people = labels_by_doc(second.human_labels.get(task, []), second.results.run, task)
        only_b = []
        for record in second.records(task):
            collectors[1].add(record)
            row = rows.get(record.span_id)
            if row is None or len(row.parts) != 1:
                only_b.append(record.span_id)
                continue
            labels = people.get(record.doc_id, ())
            row.parts.append(span_part(record, second.panel, second.judges, criteria, labels))
        only_a = [span for span, row in rows.items() if len(row.parts) != 2]
        if only_a or only_b:
            shown = (only_a or only_b)[0]
            raise FinReflectError(
                f"{first.where} and {second.where} are not runs on the same spans: task {task} "
                f"has {len(only_a)} span(s) only in A and {len(only_b)} only in B (e.g. "
                f"{shown}); compare runs of the same dataset, slice and --limit"
            )
        for row in rows.values():
            compare_parts(row)
    return sorted(rows.values(), key=lambda row: (row.doc_id, row.span_id))


def _write_task(
    folder: Path, task: str, rows: list[SpanRow], runs: Sequence[ViewRun]
) -> dict[str, Any]:
    """A task's pages and index; returns what the page's summary says of it."""
    folder.mkdir(parents=True)
    page_of: list[int] = []
    pages: list[str] = []
    size = 0
    n_pages = 0
    total = 0

    def flush() -> None:
        nonlocal pages, size, n_pages, total
        text = f"FRV.page({dumps(task)},{n_pages},[\n" + ",\n".join(pages) + "\n]);\n"
        data = text.encode("utf-8")
        (folder / f"{n_pages}.js").write_bytes(data)
        total += len(data)
        n_pages += 1
        pages, size = [], 0

    for position, row in enumerate(rows):
        text = row.to_json(position)
        length = len(text.encode("utf-8"))
        if pages and (len(pages) >= SPANS_PER_PAGE or size + length > PAGE_BYTES):
            flush()
        pages.append(text)
        size += length
        page_of.append(n_pages)
    if pages:
        flush()
    tickers = sorted({row.ticker for row in rows})
    sections = sorted({row.section for row in rows}, key=_natural)
    companies = {row.ticker: row.meta["company"] for row in rows}
    ticker_code = {ticker: code for code, ticker in enumerate(tickers)}
    section_code = {section: code for code, section in enumerate(sections)}
    index = {
        "ids": [row.span_id for row in rows],
        "tickers": tickers,
        "companies": [companies[ticker] for ticker in tickers],
        "sections": sections,
        "tick": [ticker_code[row.ticker] for row in rows],
        "sec": [section_code[row.section] for row in rows],
        "n": [[len(part.keys) for part in row.parts] for row in rows],
        "mask": [[part.mask for part in row.parts] for row in rows],
        "page": page_of,
    }
    if len(runs) == 2:
        index["diff"] = [row.diff for row in rows]
    text = f"FRV.index({dumps(task)},{dumps(index)});\n".encode()
    (folder / "index.js").write_bytes(text)
    return {
        "name": task,
        "mode": runs[0].results.details[task].mode,
        "spans": len(rows),
        "pages": n_pages,
        "criteria": [c for c in CRITERION_NAMES if any(c in r.criteria(task) for r in runs)],
        "bytes": total + len(text),
    }


def _natural(text: str) -> list:
    """Sort key: numbers by value ("Item 2" before "Item 10")."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


# --- the page ---


def _write_page(
    folder: Path,
    runs: Sequence[ViewRun],
    tasks: list[dict[str, Any]],
    graphs: list[list[dict[str, Any]]],
    downstreams: list[list[dict[str, Any]]],
) -> None:
    summary = {
        "version": __version__,
        "compare": len(runs) == 2,
        "runs": [
            {
                "label": run.label,
                "model": run.results.config.model_name,
                "panel": run.panel,
                "run": run.results.run,
                "judges": run.judges,
            }
            for run in runs
        ],
        "tasks": tasks,
        "criteria": {
            name: {
                "letter": c.letter,
                "per": c.per,
                "labels": [vote_code(label) for label in c.labels],
            }
            for name, c in CRITERIA.items()
        },
        "labels": [str(code_label(code)) for code in range(5)],
        "rules": RULES,
        "screen": SCREEN,
    }
    costs = [cost_contexts(run, [task["name"] for task in tasks]) for run in runs]
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    environment.filters["num"] = number
    environment.filters["signed"] = signed
    environment.filters["interval"] = interval_text
    html = environment.get_template("report.html.jinja").render(
        runs=[run_context(run, tasks) for run in runs],
        graphs=graphs,
        has_graph=any(graphs),
        downstreams=downstreams,
        has_downstream=any(downstreams),
        costs=costs,
        has_cost=any(shown["block"] for run in costs for shown in run),
        cost_columns=COST_COLUMNS,
        compare=compare_context(runs, tasks) if len(runs) == 2 else None,
        tasks=tasks,
        summary_json=script_json(summary),
        gate=ALPHA_GATE,
        version=__version__,
        title=_title(runs),
        scripts=SCRIPTS,
    )
    (folder / "index.html").write_text(html, encoding="utf-8")
    for asset in (*SCRIPTS, "report.css"):
        shutil.copyfile(TEMPLATES / asset, folder / asset)
    (folder / "README.md").write_text(space_card(runs), encoding="utf-8")


def script_json(value: Any) -> str:
    """JSON for an inline `<script type="application/json">`: nothing in it can end the
    script or start markup (`<`, `>`, `&` and the JS line separators as escapes)."""
    text = dumps(value)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def _title(runs: Sequence[ViewRun]) -> str:
    if len(runs) == 2:
        return f"{runs[0].results.config.model_name} vs {runs[1].results.config.model_name}"
    return runs[0].results.config.model_name


def space_card(runs: Sequence[ViewRun]) -> str:
    """README.md of the folder as a Hugging Face static Space (front matter as the
    leaderboard's)."""
    title = _title(runs)
    front = {
        "title": f"finreflect-eval report: {title}"[:80],
        "emoji": "🔎",
        "colorFrom": "blue",
        "colorTo": "green",
        "sdk": "static",
        "app_file": "index.html",
        "pinned": False,
        "license": "apache-2.0",
        "short_description": "A finreflect-eval run: scores, agreement, every verdict"[:60],
    }
    matter = yaml.safe_dump(front, sort_keys=False, allow_unicode=True)
    lines = []
    for run in runs:
        datasets = [group["info"] for group in task_datasets(run, run.tasks)]
        shown = "; ".join(
            f"dataset {markdown_text(info.id)}, split {markdown_text(info.split)}"
            for info in datasets
        )
        lines.append(f"- {markdown_text(run.label)} ({shown})")
    return (
        f"---\n{matter}---\n\n# finreflect-eval report\n\n"
        + "\n".join(lines)
        + "\n\nWritten by `finreflect-eval view` "
        f"({__version__}). `index.html` is the report; `data/` holds its spans, a script per "
        "page (no server, no network: it opens from disk, or served as it is by any static "
        "host).\n"
    )


def check_output(output: Path) -> None:
    """Where a report may be written: a new folder, or one that exists (the user's files in it
    are kept; one where the report writes is refused later, by name); never a file or a link."""
    not_a_link(output)
    if output.exists() and not output.is_dir():
        raise FinReflectError(f"{output} is a file; --output must be a folder")


def check_report_folder(folder: Path) -> None:
    """A folder that only a report may be (a leaderboard's entry's): new, empty, or one holding
    a report `view` wrote (its marker); anything else is refused, naming a file it holds."""
    check_output(folder)
    if folder.exists() and read_record(folder, MARKER) is None and any(folder.iterdir()):
        first = next(files_under(folder), None) or min(p.name for p in folder.iterdir())
        raise FinReflectError(
            f"{folder} holds other files ({first}; not a report `finreflect-eval view` "
            "wrote); move them away"
        )


def report_files(folder: Path) -> set[str]:
    """The files of `folder` that `view` wrote, as relative paths: those its marker lists, and
    the marker; for an older version's marker, which lists nothing, those named as its files
    were (OLDER_REPORT). Empty without a marker."""
    record = read_record(folder, MARKER)
    if record is None:
        return set()
    if record.files is not None:
        return {*record.files, MARKER}
    return {MARKER, *(name for name in files_under(folder) if OLDER_REPORT.fullmatch(name))}


def push_report(folder: Path | str, repo_id: str, *, token: str | None = None) -> str:
    """Upload a report folder's report to the Hugging Face Space `repo_id` (created as a static
    Space if needed; pages of an earlier report that this one lacks are deleted, the user's
    files there kept: SPACE_DELETES); returns the commit's URL. Only the files `view` wrote go
    up: the folder may be the current one, with anything of the user's in it (a `.env`). Any
    failure (offline, no token, refused) is one line; the report stays on disk."""
    from huggingface_hub import HfApi

    folder = Path(folder)
    check_repo_id(repo_id, "repo_id")
    if read_record(folder, MARKER) is None:
        raise FinReflectError(f"{folder} is not a report `finreflect-eval view` wrote")
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="space", space_sdk="static", exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            repo_type="space",
            allow_patterns=sorted(report_files(folder) - {MARKER}),
            delete_patterns=SPACE_DELETES,
            commit_message="Upload a finreflect-eval report",
        )
    except Exception as exc:  # the network, offline mode, a missing or bad token, a refusal
        raise FinReflectError(
            f"cannot push the report to the Space '{repo_id}' ({first_line(exc)}); it is kept "
            f"in {folder}; check the network, HF_HUB_OFFLINE and your token (HF_TOKEN or "
            "`hf auth login`)"
        ) from exc
    return str(commit)
