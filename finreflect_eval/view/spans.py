"""A span as the report's pages hold it: its row (text, company, section, reference triples)
and, per run, its triples with every judge's vote on every item, each item's outcome (the label
the panel's majority takes, and whether it is split, unscored or without a majority: the review
queue's reasons, by `metrics.Outcomes`, the rule scoring applies).

Written compact (the report of a 480k-triple run is paged by these): triples as 5-string lists,
a vote as `[code, reasoning, warning, synthetic]` with its strings as indices into the span's
own string table (a judge repeats its phrases), labels as `metrics.vote_code` codes; people's
labels of its items, where it has any, as `h` (`people`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from finreflect_eval.protocol.criteria import CRITERIA, CRITERION_NAMES
from finreflect_eval.records import HumanLabel, SampleRecord
from finreflect_eval.stats import extraction, metrics
from finreflect_eval.view.people import people_part

# An item's flag bits: the review queue's reasons (report.js reads the same bits).
SPLIT, UNSCORED, NO_MAJORITY = 1, 2, 4
UNSCORED_LABEL = -1
# A span's mask, per criterion one byte (criterion i at bits 8i..8i+7): bits 0-4 the labels its
# items took (their codes), bit 5 an unscored item, bit 6 a split one, bit 7 one without majority.
MASK_UNSCORED, MASK_SPLIT, MASK_NO_MAJORITY = 1 << 5, 1 << 6, 1 << 7
# A compared span's difference bits.
VERDICTS_DIFFER, TRIPLES_DIFFER = 1, 2


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept (the page files are UTF-8)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class SpanPart:
    """One run's side of a span: what the page shows and what comparing needs."""

    json: str
    """The part as its page holds it (compact JSON)."""
    mask: int
    keys: list[tuple[str, str, str]]
    """Each triple's `extraction.triple_key`."""
    labels: dict[str, list[int]] = field(default_factory=dict)
    """Per criterion, each item's label code (UNSCORED_LABEL: unscored)."""


@dataclass
class SpanRow:
    """A span of a task, with each run's part (one, or two when comparing)."""

    doc_id: int
    span_id: str
    meta: dict[str, Any]
    parts: list[SpanPart]
    differences: dict[str, list[list[int]]] = field(default_factory=dict)
    """Comparing: per criterion, the items of each run whose label the other run differs on."""
    diff: int = 0

    @property
    def ticker(self) -> str:
        return self.meta["ticker"]

    @property
    def section(self) -> str:
        return self.meta["section"]

    def to_json(self, position: int) -> str:
        """The span as its page holds it (`position`: its row in the task's index)."""
        head = {"i": position, **self.meta}
        if self.differences:
            head["d"] = self.differences
        parts = ",".join(part.json for part in self.parts)
        return dumps(head)[:-1] + ',"runs":[' + parts + "]}"


def span_meta(record: SampleRecord) -> dict[str, Any]:
    """What a span is, whichever run it is read from: its id, row and reference triples."""
    doc = record.doc
    return {
        "id": record.span_id,
        "doc": record.doc_id,
        "ticker": record.ticker,
        "company": str(doc.get("company") or ""),
        "year": doc.get("fiscal_year") if isinstance(doc.get("fiscal_year"), int) else None,
        "section": record.section,
        "text": record.text,
        "ref": [list(t.as_tuple()) for t in record.reference],
    }


def span_part(
    record: SampleRecord,
    panel: str,
    judges: Sequence[str],
    criteria: Sequence[str],
    people: Sequence[HumanLabel] = (),
) -> SpanPart:
    """One run's triples and votes on a span (see the module's docstring), and people's labels
    of its items where it has any (`people`: the labels of this span; `people.people_part`)."""
    strings: dict[str, int] = {"": 0}

    def string(text: str) -> int:
        return strings.setdefault(text, len(strings))

    votes = record.votes.get(panel, {})
    items_by_criterion: dict[str, list] = {}
    labels: dict[str, list[int]] = {}
    mask = 0
    for criterion in criteria:
        by_judge = votes.get(criterion, {})
        cast = [by_judge.get(judge, []) for judge in judges]
        n_items = max((len(v) for v in cast), default=0)
        codes = np.full((n_items, len(judges)), metrics.ABSTAINED, dtype=np.int8)
        for column, judge_votes in enumerate(cast):
            for row, vote in enumerate(judge_votes):
                codes[row, column] = metrics.vote_code(vote.verdict)
        outcome = metrics.Outcomes.of(codes, np.full(n_items, len(judges)))
        label = np.where(outcome.scored, outcome.label, UNSCORED_LABEL).tolist()
        flags = (
            outcome.split * SPLIT + ~outcome.scored * UNSCORED + outcome.no_majority * NO_MAJORITY
        ).tolist()
        items = []
        for row in range(n_items):
            cast_row = []
            for column, judge_votes in enumerate(cast):
                vote = judge_votes[row] if row < len(judge_votes) else None
                if vote is None:
                    cast_row.append([metrics.ABSTAINED, 0, 0, 0])
                else:
                    cast_row.append(
                        [
                            int(codes[row, column]),
                            string(vote.reasoning),
                            string(vote.warning),
                            int(vote.synthetic),
                        ]
                    )
            items.append([label[row], flags[row], cast_row])
        items_by_criterion[criterion] = items
        labels[criterion] = label
        byte = 0
        for code, flag in zip(label, flags, strict=True):
            byte |= MASK_UNSCORED if code == UNSCORED_LABEL else 1 << code
            byte |= MASK_SPLIT if flag & SPLIT else 0
            byte |= MASK_NO_MAJORITY if flag & NO_MAJORITY else 0
        mask |= byte << (8 * CRITERION_NAMES.index(criterion))
    data: dict[str, Any] = {
        "t": [list(t.as_tuple()) for t in record.triples],
        "r": [
            [rule for rule, passed in checks.items() if not passed] for checks in record.rule_checks
        ],
        "v": items_by_criterion,
        "s": list(strings),
    }
    labelled = people_part(record, people, criteria, string) if people else None
    if labelled:
        data["h"] = labelled
        data["s"] = list(strings)  # the annotators' pseudonyms too
    if record.failed:
        data["failed"] = record.failures or ["the extraction failed"]
    thoughts = [[step.step, step.thinking] for step in record.steps if step.thinking is not None]
    if thoughts:  # a reasoning model's thinking, each step's (the page shows it collapsed)
        data["k"] = thoughts
    keys = [extraction.triple_key(t) for t in record.triples]
    return SpanPart(dumps(data), mask, keys, labels)


def compare_parts(row: SpanRow) -> None:
    """Mark where two runs' parts of a span differ: the items both judged (a triple with the
    same key in both, or the span's own item) whose labels differ, and whether their triples
    differ at all."""
    a, b = row.parts
    if set(a.keys) != set(b.keys):
        row.diff |= TRIPLES_DIFFER
    for criterion in sorted(a.labels.keys() & b.labels.keys(), key=CRITERION_NAMES.index):
        la, lb = a.labels[criterion], b.labels[criterion]
        if CRITERIA[criterion].per == "span":
            pairs = [(0, 0)] if la and lb else []
        else:
            first_b: dict[tuple, int] = {}
            for index, key in enumerate(b.keys[: len(lb)]):
                first_b.setdefault(key, index)
            pairs = [(i, first_b[key]) for i, key in enumerate(a.keys[: len(la)]) if key in first_b]
        differ = [(i, j) for i, j in pairs if la[i] != lb[j]]
        if differ:
            row.diff |= VERDICTS_DIFFER
            row.differences[criterion] = [
                sorted({i for i, _ in differ}),
                sorted({j for _, j in differ}),
            ]
