"""`review import`: people's labels from a Label Studio JSON export into the run folder, as
`human_labels_<task>_<run>.jsonl` (`HumanLabel`).

The export is untrusted input: a task of another run, of a span or triple the run does not
have, or whose span text differs from the run's (sha256), is refused in one line, as is a
choice the labeling config does not offer or a criterion the item does not ask; a cancelled
annotation is left out, a partial one gives the labels it has; the same task or annotation
twice counts once, and an annotator who labelled an item twice keeps the latest label.
Annotators are pseudonymised (a hash of the run and their Label Studio user id; no e-mail is
kept). Importing merges into what earlier imports wrote (the same annotator's label of the same
item replaced, nothing else touched), so importing the same export twice changes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.protocol.criteria import CRITERIA, CRITERION_NAMES, TRIPLE_CRITERIA
from finreflect_eval.records import HumanLabel, Manifest, read_lines
from finreflect_eval.review.label_studio import ANSWERS
from finreflect_eval.runs.store import RunStore, load_run, write_atomic, writing
from finreflect_eval.scoring.compute import facts_from_records
from finreflect_eval.scoring.span_facts import TRIPLE_FIELDS, SpanFacts

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
    spans = {task: _Spans(facts) for task, facts in span_facts.items()}
    imported, seen_tasks, seen_annotations = Imported(), set(), set()
    latest: dict[_Key, tuple[str, HumanLabel]] = {}
    for number, task in enumerate(data, 1):
        name = f"task {task.get('id', f'#{number}')}" if isinstance(task, dict) else f"#{number}"
        item = _item(task, name, manifest, spans, imported.refused)
        if item is None:
            continue
        if task.get("id") is not None and task["id"] in seen_tasks:
            imported.duplicates += 1
            continue
        seen_tasks.add(task.get("id"))
        imported.tasks += 1
        for annotation in task.get("annotations") or []:
            where = (
                f"{name} annotation {annotation.get('id') if isinstance(annotation, dict) else '?'}"
            )
            if not isinstance(annotation, dict):
                imported.refused.append(f"{where}: not an annotation")
                continue
            if annotation.get("was_cancelled"):
                imported.cancelled += 1
                continue
            if annotation.get("id") is not None:
                if annotation["id"] in seen_annotations:
                    imported.duplicates += 1
                    continue
                seen_annotations.add(annotation["id"])
            for label in _labels(annotation, where, item, manifest.run, imported.refused):
                key = (
                    label.task,
                    label.span_id,
                    label.triple_index,
                    label.criterion,
                    label.annotator,
                )
                when = str(annotation.get("updated_at") or annotation.get("created_at") or "")
                if key in latest:
                    imported.duplicates += 1
                    if latest[key][0] > when:
                        continue
                latest[key] = (when, label)
    for _, label in latest.values():
        imported.labels.setdefault(label.task, []).append(label)
    return imported


class _Spans:
    """A task's spans by id: their row, doc_id, text hash (made when first asked) and triples."""

    def __init__(self, facts: SpanFacts) -> None:
        self.facts = facts
        self.row = {span_id: row for row, span_id in enumerate(facts.python_values("span_id"))}
        self._sha: dict[int, str] = {}

    def sha256(self, row: int) -> str:
        if row not in self._sha:
            self._sha[row] = text_sha256(self.facts.table.column("text")[row].as_py())
        return self._sha[row]

    def triple(self, row: int, index: int) -> str | None:
        triples = self.facts.table.column("triples")[row].as_py()
        if not 0 <= index < len(triples):
            return None
        return " | ".join(triples[index][name] for name in TRIPLE_FIELDS)


def _item(
    task: Any, name: str, manifest: Manifest, spans: dict[str, _Spans], refused: list[str]
) -> dict | None:
    """The task's item (its checked `data`), or None with the refusal's line."""
    data = task.get("data") if isinstance(task, dict) else None
    problem = _problem(data, manifest, spans)
    if problem:
        refused.append(f"{name}: {problem}; refused")
        return None
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
    if row is None or data.get("doc_id") != int(of_task.facts.column("doc_id")[row]):
        return f"span {str(span_id)[:60]!r} is not a span of {task} in this run"
    text = data.get("text")
    if data.get("span_sha256") != of_task.sha256(row) or (
        text is not None and (not isinstance(text, str) or text_sha256(text) != of_task.sha256(row))
    ):
        return f"the text of span {span_id} differs from the run's (sha256)"
    if data.get("sample") not in ("audit", "flagged"):
        return f"sample {str(data.get('sample'))[:20]!r} is neither audit nor flagged"
    index = data.get("triple_index")
    if index is not None:
        if type(index) is not int or of_task.triple(row, index) is None:
            return f"span {span_id} has no triple {str(index)[:20]}"
        if data.get("triple") != of_task.triple(row, index):
            return f"triple {index} of span {span_id} differs from the run's"
    for key in ("audit_size", "audit_seed"):
        if data.get(key) is not None and type(data[key]) is not int:
            return f"{key} is not a number"
    return None


def _labels(
    annotation: dict, where: str, data: dict, run: str, refused: list[str]
) -> list[HumanLabel]:
    """The labels of one annotation; a result that is not a choice this item asks is refused."""
    annotator = pseudonym(run, annotation.get("completed_by"))
    if annotator is None:
        refused.append(f"{where}: no annotator (completed_by); refused")
        return []
    labels = []
    asked = TRIPLE_CRITERIA if data["triple_index"] is not None else ("comprehensiveness",)
    for result in annotation.get("result") or []:
        if not isinstance(result, dict) or result.get("type") != "choices":
            continue  # not one of our controls (a comment, a relation): not a label
        criterion = result.get("from_name")
        choices = (
            (result.get("value") or {}).get("choices")
            if isinstance(result.get("value"), dict)
            else None
        )
        if criterion not in CRITERION_NAMES:
            refused.append(f"{where}: no criterion {str(criterion)[:40]!r}; left out")
            continue
        if criterion not in asked:
            refused.append(f"{where}: {criterion} is not asked of this item; left out")
            continue
        allowed = [c for c, label in ANSWERS.items() if label in CRITERIA[criterion].labels]
        if not isinstance(choices, list) or len(choices) != 1 or choices[0] not in allowed:
            refused.append(f"{where}: {criterion} must be one of {'/'.join(allowed)}; left out")
            continue
        try:
            labels.append(
                HumanLabel(
                    run=run,
                    task=data["task"],
                    span_id=data["span_id"],
                    doc_id=data["doc_id"],
                    span_sha256=data["span_sha256"],
                    criterion=criterion,
                    triple_index=data["triple_index"],
                    sample=data["sample"],
                    audit_size=data.get("audit_size") if data["sample"] == "audit" else None,
                    audit_seed=data.get("audit_seed") if data["sample"] == "audit" else None,
                    annotator=annotator,
                    label=ANSWERS[choices[0]],
                    source=f"label-studio {where}"[:200],
                )
            )
        except ValidationError as exc:
            refused.append(f"{where}: {exc.errors()[0]['msg']}; left out")
    return labels


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
    digest = hashlib.sha256(f"finreflect-eval annotator|{run}|{who}".encode()).hexdigest()
    return f"annotator-{digest[:12]}"


def merge(store: RunStore, manifest: Manifest, imported: Imported) -> dict[str, int]:
    """The imported labels written into the run folder, each task's merged with its earlier
    ones (the same annotator's label of the same item replaced); per task, its labels now."""
    written = {}
    for task, new in imported.labels.items():
        path = store.human_labels_path(manifest.run, task)
        earlier = read_lines(HumanLabel, path) if path.exists() else []
        merged = {_key(label): label for label in earlier} | {_key(label): label for label in new}
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
