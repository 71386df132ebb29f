"""`review import`: people's labels from a Label Studio JSON export into the run folder, as
`human_labels_<task>_<run>.jsonl` (`HumanLabel`).

The export is untrusted input: a task of another run, of a span or triple the run does not
have, or whose span text differs from the run's (sha256), is refused in one line, as is a
choice the labeling config does not offer or a criterion the item does not ask; a cancelled
annotation is left out, a partial one gives the labels it has; the same task or annotation
twice counts once, and an annotator who labelled an item twice keeps the latest label.
Annotators are pseudonymised (a hash of the run and their Label Studio user id; no e-mail is
kept). Importing merges into what earlier imports wrote (the same annotator's label of the same
item replaced by the later made, nothing else touched), so importing the same export twice
changes nothing, and an older export never undoes a newer label. What each task shows people
(the span's text, its marked text, the triple, the heading) must be what the run's item shows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.protocol.criteria import CRITERIA, CRITERION_NAMES, TRIPLE_CRITERIA
from finreflect_eval.records import HumanLabel, Manifest, read_lines
from finreflect_eval.review.label_studio import ANSWERS, Item
from finreflect_eval.runs.store import RunStore, load_run, write_atomic, writing
from finreflect_eval.scoring.compute import facts_from_records
from finreflect_eval.scoring.label_checks import judged
from finreflect_eval.scoring.span_facts import TRIPLE_FIELDS, SpanFacts
from finreflect_eval.stats.audit import SELECTS

_Key = tuple[str, str, int | None, str, str]  # task, span, triple index, criterion, annotator


@dataclass
class Imported:
    """What one export gave: the labels per task, and what was refused or left out."""

    labels: dict[str, list[HumanLabel]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    """One line per refusal (a task, an annotation or a choice)."""
    tasks: int = 0
    cancelled: int = 0
    duplicates: int = 0

    @property
    def count(self) -> int:
        return sum(len(labels) for labels in self.labels.values())


def read_export(data: Any, manifest: Manifest, span_facts: Mapping[str, SpanFacts]) -> Imported:
    """The labels of a Label Studio JSON export (a list of tasks) of this run's items."""
    if not isinstance(data, list):
        raise FinReflectError("not a Label Studio JSON export (a list of tasks)")
    spans = {task: _Spans(task, facts) for task, facts in span_facts.items()}
    asked = {task: set(judged(manifest, task)) for task in span_facts}
    imported, seen_tasks, seen_annotations = Imported(), set(), set()
    latest: dict[_Key, HumanLabel] = {}
    for number, task in enumerate(data, 1):
        task_id = task.get("id") if isinstance(task, dict) else None
        name = f"task {task_id if _is_id(task_id) else f'#{number}'}"
        item = _item(task, name, manifest, spans, imported.refused)
        if item is None:
            continue
        if task_id in seen_tasks:
            imported.duplicates += 1
            continue
        seen_tasks.add(task_id)
        imported.tasks += 1
        for annotation in task["annotations"]:
            annotation_id = annotation.get("id") if isinstance(annotation, dict) else None
            where = f"{name} annotation {annotation_id if _is_id(annotation_id) else '?'}"
            if not isinstance(annotation, dict) or not isinstance(annotation.get("result"), list):
                imported.refused.append(
                    f"{where}: not an annotation (no list of results); left out"
                )
                continue
            if annotation.get("was_cancelled"):
                imported.cancelled += 1
                continue
            if annotation_id in seen_annotations:
                imported.duplicates += 1
                continue
            if _is_id(annotation_id):
                seen_annotations.add(annotation_id)
            made = _labels(annotation, where, item, asked[item["task"]], manifest.run)
            imported.refused += made.refused
            for label in made.labels:
                key = _key(label)
                if key in latest:
                    imported.duplicates += 1
                latest[key] = _newer(latest.get(key), label)
    for label in latest.values():
        imported.labels.setdefault(label.task, []).append(label)
    return imported


def _is_id(value: Any) -> bool:
    """Label Studio's ids are numbers (anything else is refused, never written)."""
    return type(value) is int and value >= 0


class _Spans:
    """A task's spans by id: their row and doc_id, and what a Label Studio task of one of their
    items shows (`Item.data`), made when first asked."""

    def __init__(self, task: str, facts: SpanFacts) -> None:
        self.task, self.facts = task, facts
        self.span_ids = facts.python_values("span_id")
        self.doc_ids = facts.python_values("doc_id")
        self.row = {span_id: row for row, span_id in enumerate(self.span_ids)}

    def shown(self, run: str, row: int, index: int | None) -> dict[str, Any] | None:
        """What the item's task shows people (its text, marked text, triple and heading); None
        where the span has no such triple."""
        triples = self.facts.table.column("triples")[row].as_py()
        if index is not None and not 0 <= index < len(triples):
            return None
        text = self.facts.table.column("text")[row].as_py()
        as_text = [tuple(triple[name] for name in TRIPLE_FIELDS) for triple in triples]
        item = Item(
            run=run,
            task=self.task,
            span_id=self.span_ids[row],
            doc_id=self.doc_ids[row],
            filing=self.facts.table.column("filing")[row].as_py(),
            text=text,
            span_sha256=text_sha256(text),
            triple=None if index is None else as_text[index],
            triple_index=index,
            sample="audit",
            audit_sample=None,
            audit_seed=None,
            flagged_for=(),
            judges=None,
            span_triples=tuple(" | ".join(t) for t in as_text) if index is None else (),
        )
        return {key: item.data()[key] for key in SHOWN}


SHOWN = ("span_sha256", "text", "html", "triple", "heading")
"""What people see of an item (and its text's hash): an export whose task shows anything else
was not made from this run."""


def _item(
    task: Any, name: str, manifest: Manifest, spans: dict[str, _Spans], refused: list[str]
) -> dict | None:
    """The task's item (its checked `data`), or None with the refusal's line."""
    data = task.get("data") if isinstance(task, dict) else None
    problem = _problem(data, manifest, spans)
    if problem is None and not isinstance(task.get("annotations", []), list):
        problem = "its annotations are not a list"
    if problem is None and task.get("id") is not None and not _is_id(task["id"]):
        problem = "its id is not Label Studio's (a number)"
    if problem:
        refused.append(f"{name}: {problem}; refused")
        return None
    task.setdefault("annotations", [])
    return data


def _problem(data: Any, manifest: Manifest, spans: dict[str, _Spans]) -> str | None:
    if not isinstance(data, dict) or "run_id" not in data:
        return "not a task of `review export` (its data has no run_id)"
    if data["run_id"] != manifest.run:
        return f"from run {str(data['run_id'])[:40]!r}, not this run ({manifest.run})"
    task = data.get("task")
    if not isinstance(task, str) or task not in spans:
        return f"task {str(task)[:40]!r} is not in this run"
    of_task, span_id = spans[task], data.get("span_id")
    row = of_task.row.get(span_id) if isinstance(span_id, str) else None
    if row is None or data.get("doc_id") != of_task.doc_ids[row]:
        return f"span {str(span_id)[:60]!r} is not a span of {task} in this run"
    if data.get("sample") not in ("audit", "flagged"):
        return f"sample {str(data.get('sample'))[:20]!r} is neither audit nor flagged"
    index = data.get("triple_index")
    if index is not None and (type(index) is not int or index < 0):
        return f"triple_index {str(index)[:20]} is not a triple's place"
    shown = of_task.shown(manifest.run, row, index)
    if shown is None:
        return f"span {span_id} has no triple {index}"
    changed = [key for key in SHOWN if data.get(key) != shown[key]]
    if changed:
        where = f"span {span_id}" + ("" if index is None else f", triple {index}")
        return f"what it shows ({', '.join(changed)}) differs from the run's item ({where})"
    audit = [data.get("audit_sample"), data.get("audit_seed")]
    if data["sample"] == "audit" and not all(type(v) is int for v in audit):
        return "an audit task without its audit_sample and audit_seed (numbers)"
    if data["sample"] == "audit" and (data.get("audit_select") or "uniform") not in SELECTS:
        return f"audit_select {str(data.get('audit_select'))[:20]!r} is not one of {SELECTS}"
    return None


@dataclass
class _Made:
    labels: list[HumanLabel] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _labels(annotation: dict, where: str, data: dict, asked: set[str], run: str) -> _Made:
    """The labels of one annotation; a result that is not a choice this item asks is refused."""
    made = _Made()
    annotator = pseudonym(run, annotation.get("completed_by"))
    if annotator is None:
        made.refused.append(f"{where}: no annotator (completed_by); refused")
        return made
    per = TRIPLE_CRITERIA if data["triple_index"] is not None else ("comprehensiveness",)
    when = annotation.get("updated_at") or annotation.get("created_at")
    for result in annotation["result"]:
        if not isinstance(result, dict) or result.get("type") != "choices":
            continue  # not one of our controls (a comment, a relation): not a label
        criterion = result.get("from_name")
        value = result.get("value")
        choices = value.get("choices") if isinstance(value, dict) else None
        if criterion not in CRITERION_NAMES:
            made.refused.append(f"{where}: no criterion {str(criterion)[:40]!r}; left out")
            continue
        if criterion not in per or criterion not in asked:
            made.refused.append(f"{where}: {criterion} is not asked of this item; left out")
            continue
        allowed = [c for c, label in ANSWERS.items() if label in CRITERIA[criterion].labels]
        if not isinstance(choices, list) or len(choices) != 1 or choices[0] not in allowed:
            made.refused.append(
                f"{where}: {criterion} must be one of {'/'.join(allowed)}; left out"
            )
            continue
        audit = data["sample"] == "audit"
        try:
            label = HumanLabel(
                run=run,
                task=data["task"],
                span_id=data["span_id"],
                doc_id=data["doc_id"],
                span_sha256=data["span_sha256"],
                criterion=criterion,
                triple_index=data["triple_index"],
                sample=data["sample"],
                audit_sample=data["audit_sample"] if audit else None,
                audit_seed=data["audit_seed"] if audit else None,
                audit_select=data.get("audit_select") or "uniform" if audit else "uniform",
                audit_panel=data.get("audit_panel") if audit else None,
                annotator=annotator,
                label=ANSWERS[choices[0]],
                source=f"label-studio {where}",
                annotated_at=when if _instant(when) is not None else None,
            )
        except ValidationError as exc:
            made.refused.append(f"{where}: {exc.errors()[0]['msg']}; left out")
            continue
        made.labels.append(label)
    return made


def _newer(earlier: HumanLabel | None, label: HumanLabel) -> HumanLabel:
    """Of two labels of one annotator and item, the later made (by Label Studio's clock; one
    without a time is the older; of two made at one instant, the one imported last)."""
    if earlier is None:
        return label
    never = datetime.min.replace(tzinfo=timezone.utc)
    later = (_instant(label.annotated_at) or never) >= (_instant(earlier.annotated_at) or never)
    return label if later else earlier


_TIME_CHARACTERS = set("0123456789T:.+-Z ")


def _instant(when: Any) -> datetime | None:
    """The instant an ISO 8601 time names (`Z`, an offset, or none: UTC; with or without
    fractions of a second), or None for anything else."""
    if not isinstance(when, str) or len(when) > 40 or not set(when) <= _TIME_CHARACTERS:
        return None  # (what a label keeps: `HumanLabel.annotated_at`)
    try:
        moment = datetime.fromisoformat(when)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def pseudonym(run: str, completed_by: Any) -> str | None:
    """An annotator's pseudonym: a hash of the run and their Label Studio user id (or, without
    one, their e-mail), so that no name or address is kept and two runs' do not link."""
    who = (
        completed_by.get("id", completed_by.get("email"))
        if isinstance(completed_by, dict)
        else completed_by
    )
    if who is None or isinstance(who, (dict, list, bool)):
        return None
    if isinstance(who, float) and who.is_integer():  # one user id written 7 or 7.0
        who = int(who)
    digest = hashlib.sha256(f"finreflect-eval annotator|{run}|{who}".encode()).hexdigest()
    return f"annotator-{digest[:12]}"


def merge(store: RunStore, manifest: Manifest, imported: Imported) -> dict[str, int]:
    """The imported labels written into the run folder, each task's merged with its earlier
    ones (the same annotator's label of the same item replaced); per task, its labels now."""
    written = {}
    for task, new in imported.labels.items():
        path = store.human_labels_path(manifest.run, task)
        earlier = read_lines(HumanLabel, path) if path.exists() else []
        merged = {_key(label): label for label in earlier}
        for label in new:
            merged[_key(label)] = _newer(merged.get(_key(label)), label)
        ordered = sorted(merged.values(), key=_order)
        write_atomic(path, "".join(label.model_dump_json() + "\n" for label in ordered))
        written[task] = len(ordered)
    return written


def _key(label: HumanLabel) -> _Key:
    return (label.task, label.span_id, label.triple_index, label.criterion, label.annotator)


def _order(label: HumanLabel) -> tuple:
    index = -1 if label.triple_index is None else label.triple_index
    return (label.doc_id, index, CRITERION_NAMES.index(label.criterion), label.annotator)


def import_run(path: Path, data: Any) -> tuple[Imported, dict[str, int]]:
    """A Label Studio export's labels of the run at `path`, merged into its folder (under the
    run's lock); what was imported, and per task its labels now."""
    run = load_run(path, for_scoring=True)
    span_facts = facts_from_records(run.records) | run.span_facts
    imported = read_export(data, run.manifest, span_facts)
    with writing(run.folder):
        return imported, merge(run.store, run.manifest, imported)
