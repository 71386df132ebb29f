"""`review export`: a run's items for people to label, as Label Studio tasks: the random audit
(`audit.draw`) first, then the review queue's items (what the judges split on, could not score,
or had no majority for), each item once."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from finreflect_eval._util.hashing import text_sha256
from finreflect_eval._util.output_folder import plan_write, read_record, write_record
from finreflect_eval._util.version import __version__
from finreflect_eval.protocol.criteria import CRITERION_NAMES
from finreflect_eval.records import Manifest
from finreflect_eval.review.label_studio import Item
from finreflect_eval.review.queue import review_queue
from finreflect_eval.runs.store import load_run, not_a_link, write_atomic
from finreflect_eval.scoring.compute import PanelFile, choose_panel, score_tables
from finreflect_eval.scoring.label_checks import SPAN, audit_weights, judged
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable
from finreflect_eval.stats import audit, metrics
from finreflect_eval.stats.uncertainty import units_of


@dataclass
class Export:
    """What `review export` writes: the tasks, and the criteria the labeling config asks."""

    items: list[Item] = field(default_factory=list)
    criteria: set[str] = field(default_factory=set)
    audit: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per task: the triples and the spans the audit drew."""
    flagged: int = 0


def export_items(
    manifest: Manifest,
    span_facts: dict[str, SpanFacts],
    votes: dict[str, VoteTable],
    *,
    audit_size: int | None,
    seed: int,
    show_judges: bool,
    queue: bool = True,
    select: str = "uniform",
    panel: str | None = None,
) -> Export:
    """Every task's items to label (`audit_size` triples drawn per task, and the same share of
    its spans; None: none), and the review queue's (unless not `queue`), with the judges' votes
    where `show_judges`. `select`: how the audit chooses (`confidence`: where `panel`'s judges
    disagreed more often, `label_checks.audit_weights`)."""
    export = Export()
    for task, facts in span_facts.items():
        criteria = judged(manifest, task)
        export.criteria.update(criteria)
        chosen: dict[tuple[int, int], list] = {}  # (span row, triple index) → sample, flags
        if audit_size:
            weights = audit_weights(facts, votes[task]) if select == "confidence" else None
            drawn = _draw(facts, audit_size, seed, "comprehensiveness" in criteria, weights)
            export.audit[task] = (len(drawn[0][0]), len(drawn[1][0]))
            for rows, indices in drawn:
                for row, index in zip(rows.tolist(), indices.tolist(), strict=True):
                    chosen[row, index] = ["audit", audit_size, []]
        if queue:
            _add_flagged(chosen, facts, votes[task])
        export.flagged += sum(1 for entry in chosen.values() if entry[0] == "flagged")
        judges = _judges_text(facts, votes[task], list(chosen)) if show_judges else None
        design = (seed, select, panel if select == "confidence" else None)
        export.items += _items(manifest.run, task, facts, chosen, judges, design)
    return export


def _add_flagged(chosen: dict[tuple[int, int], list], facts: SpanFacts, table: VoteTable) -> None:
    """The review queue's items into `chosen` (an item drawn for the audit stays the audit's,
    with the criteria it is flagged for)."""
    flagged = review_queue({"task": facts}, {"task": table})["task"]
    rows = np.searchsorted(facts.column("doc_id"), flagged.spans["doc_id"].to_numpy())
    span_rows = rows[flagged.items["span"].to_numpy()]
    indices = flagged.items["triple_index"].fill_null(SPAN).to_numpy()
    criteria = flagged.items["criterion"].to_pylist()
    for row, index, code in zip(span_rows.tolist(), indices.tolist(), criteria, strict=True):
        chosen.setdefault((row, index), ["flagged", None, []])[2].append(CRITERION_NAMES[code])


def _draw(
    facts: SpanFacts,
    size: int,
    seed: int,
    with_spans: bool,
    weights: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The audit's triples and spans, as (span rows, triple indices)."""
    _, span_filings = units_of(facts.python_values("filing"))
    counts = facts.table.column("triples").combine_chunks().value_lengths().to_numpy()
    rows, indices, spans = audit.audit_items(span_filings, counts, size, seed, with_spans, weights)
    return (rows, indices), (spans, np.full(len(spans), SPAN))


def _items(
    run: str,
    task: str,
    facts: SpanFacts,
    chosen: dict[tuple[int, int], list],
    judges: dict[tuple[int, int], str] | None,
    design: tuple[int, str, str | None],
) -> list[Item]:
    """The chosen items, the audit's first, each in span order (`judges`: their votes as
    text; None: blind; `design`: the audit's seed, how it chose, on which panel's votes)."""
    seed, select, panel = design
    keys = sorted(chosen, key=lambda key: (chosen[key][0] != "audit", key))
    rows = np.array([row for row, _ in keys], dtype=np.int64)
    wanted = np.array([index for _, index in keys], dtype=np.int64)
    is_triple = wanted != SPAN
    triples = facts.triples(rows[is_triple], wanted[is_triple]) if is_triple.any() else []
    of_triple = iter(triples)
    columns = {name: facts.python_values(name) for name in ("span_id", "doc_id", "filing")}
    texts, span_triples = facts.table.column("text"), facts.table.column("triples")
    items = []
    for (row, index), triple_wanted in zip(keys, is_triple.tolist(), strict=True):
        sample, size, flagged_for = chosen[row, index]
        text = texts[row].as_py()
        items.append(
            Item(
                run=run,
                task=task,
                span_id=columns["span_id"][row],
                doc_id=columns["doc_id"][row],
                filing=columns["filing"][row],
                text=text,
                span_sha256=text_sha256(text),
                triple=next(of_triple) if triple_wanted else None,
                triple_index=index if triple_wanted else None,
                sample=sample,
                audit_sample=size,
                audit_seed=seed if sample == "audit" else None,
                audit_select=select,
                audit_panel=panel,
                flagged_for=tuple(flagged_for),
                judges=None if judges is None else judges.get((row, index), ""),
                span_triples=()
                if triple_wanted
                else tuple(" | ".join(t.values()) for t in span_triples[row].as_py()),
            )
        )
    return items


def _judges_text(
    facts: SpanFacts, table: VoteTable, keys: list[tuple[int, int]]
) -> dict[tuple[int, int], str]:
    """Per item, each judge's verdict and reasoning on each criterion, as lines of text."""
    doc_ids = facts.column("doc_id")
    wanted = {(int(doc_ids[row]), index) for row, index in keys}
    row_of = {int(doc_ids[row]): row for row, _ in keys}
    mine = np.flatnonzero(np.isin(table.column("doc_id"), [doc for doc, _ in wanted]))
    lines: dict[tuple[int, int], list[str]] = {}
    codes = table.codes(mine)
    criteria, indices = table.criteria()[mine], table.column("index")[mine]
    documents = table.column("doc_id")[mine]
    reasons = {j: table.table.column(f"reasoning:{j}").take(mine).to_pylist() for j in table.judges}
    for at in range(len(mine)):
        name = CRITERION_NAMES[criteria[at]]
        index = SPAN if name == "comprehensiveness" else int(indices[at])
        if (int(documents[at]), index) not in wanted:
            continue
        for column, judge in enumerate(table.judges):
            label = metrics.code_label(int(codes[at, column]))
            verdict = "abstained" if label is None else {1: "yes", 0: "no"}.get(label, label)
            key = (row_of[int(documents[at])], index)
            lines.setdefault(key, []).append(f"{name} · {judge}: {verdict} — {reasons[judge][at]}")
    return {key: "\n".join(text) for key, text in lines.items()}


# --- the files ---

MARKER = ".finreflect-label-studio"  # what `review export` wrote into its folder (output_folder)
TASKS_FILE, CONFIG_FILE = "tasks.json", "label_config.xml"


def export_run(
    path: Path,
    *,
    panel: str | PanelFile | None,
    audit_size: int | None,
    seed: int,
    show_judges: bool,
    queue: bool = True,
    select: str = "uniform",
) -> tuple[Manifest, Export]:
    """A run folder's items to label, with the votes of `panel` (None: its only or latest)."""
    run = load_run(path, for_scoring=True)
    panel = choose_panel(run.manifest, panel)
    span_facts, votes = score_tables(
        run.manifest, run.records, panel, run.span_facts, run.votes.get(panel)
    )
    export = export_items(
        run.manifest,
        span_facts,
        votes,
        audit_size=audit_size,
        seed=seed,
        show_judges=show_judges,
        queue=queue,
        select=select,
        panel=panel,
    )
    return run.manifest, export


def write_export(folder: Path, tasks: list[dict], config: str) -> list[Path]:
    """`tasks.json` (Label Studio's import format) and `label_config.xml` into `folder`; a file
    of the user's there is never replaced (the write is refused, naming it)."""
    folder = not_a_link(Path(folder))
    folder.mkdir(parents=True, exist_ok=True)
    names = [TASKS_FILE, CONFIG_FILE]
    record = read_record(folder, MARKER)
    plan = plan_write(folder, names, record.files or () if record else ())
    plan.refuse_conflicts(folder, "move it away, or choose another --output")
    write_atomic(folder / TASKS_FILE, json.dumps(tasks, ensure_ascii=False, indent=1) + "\n")
    write_atomic(folder / CONFIG_FILE, config)
    write_record(folder, MARKER, f"finreflect-eval {__version__} review export", names)
    return [folder / name for name in names]
