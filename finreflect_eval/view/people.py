"""What the report shows of people's labels (`review import`): per task and criterion the
results' `human` block (the panel's score beside the prediction-powered estimate, the labels
counted, each judge's and the panel's agreement with people, α with people as one more coder),
and per item the people's labels beside the judges' votes, read from the run folder's
`human_labels_<task>_<run>.jsonl` (or a leaderboard entry's). Nothing at all without labels.

An item's labels as a span's page holds them (`span_part`'s `h`): per criterion, per item
(its index, as a string key) `[code, audit, [[annotator, code], ...]]`: the annotators' majority
label as a `metrics.vote_code` code (None where they tie: unresolved, as scoring leaves it out),
whether any label is of the random audit (1) or all are of items the judges were flagged on
(0), and each annotator's pseudonym (an index into the span's string table) with its label.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.protocol.criteria import CRITERION_NAMES
from finreflect_eval.records import HumanLabel, Results, SampleRecord
from finreflect_eval.scoring.human import PANEL
from finreflect_eval.stats import metrics
from finreflect_eval.stats.human import majority


def labels_by_doc(labels: Sequence[HumanLabel], run: str, task: str) -> dict[int, list[HumanLabel]]:
    """A task's labels by the line (`doc_id`) of the span they label; only those of this run
    and task."""
    by_doc: dict[int, list[HumanLabel]] = {}
    for label in labels:
        if label.run == run and label.task == task:
            by_doc.setdefault(label.doc_id, []).append(label)
    return by_doc


def people_part(
    record: SampleRecord,
    labels: Sequence[HumanLabel],
    criteria: Sequence[str],
    string: Callable[[str], int],
) -> dict[str, dict[str, list[Any]]]:
    """The span's items' labels (see the module's docstring), only those made on this very span
    (its id and the sha256 of its text: a label of other text is none of its items')."""
    digest = text_sha256(record.text)
    by_item: dict[tuple[int, int], list[HumanLabel]] = {}
    for label in labels:
        if label.criterion not in criteria or label.span_id != record.span_id:
            continue
        if label.span_sha256 != digest:
            continue
        key = (CRITERION_NAMES.index(label.criterion), label.triple_index or 0)
        by_item.setdefault(key, []).append(label)
    items: dict[str, dict[str, list[Any]]] = {}
    for (criterion, index), item_labels in sorted(by_item.items()):
        codes = [metrics.vote_code(label.label) for label in item_labels]
        audit = int(any(label.sample == "audit" for label in item_labels))
        each = [
            [string(label.annotator), code] for label, code in zip(item_labels, codes, strict=True)
        ]
        items.setdefault(CRITERION_NAMES[criterion], {})[str(index)] = [
            majority(codes),
            audit,
            each,
        ]
    return items


def human_context(
    results: Results, task: str, criteria: Sequence[str], judges: Sequence[str]
) -> list[dict[str, Any]]:
    """Per criterion of the task that people checked (the results' `human` block), in the
    criteria's order: the check and its coders (the panel, then each judge) with their
    agreement with people. Empty without labels."""
    checks = results.human.get(task, {})
    rows = []
    for name in criteria:
        check = checks.get(name)
        if check is None:
            continue
        coders = [(PANEL, check.panel_agreement)]
        coders += [(judge, check.judges.get(judge)) for judge in judges]
        rows.append({"name": name, "check": check, "coders": coders})
    return rows
