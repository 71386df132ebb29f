"""`audit-judges`' `JudgeAudit` and the leaderboard's `Submission`."""

from __future__ import annotations

from typing import Any

from pydantic import (
    Field,
    model_serializer,
)

from finreflect_eval.protocol.criteria import CriterionName, Label
from finreflect_eval.protocol.schema import Triple
from finreflect_eval.records.base import (
    FileRecord,
    Record,
    RunId,
)
from finreflect_eval.records.downstream import DownstreamFile
from finreflect_eval.records.human import HumanLabel
from finreflect_eval.records.manifest import (
    DatasetInfo,
    Manifest,
)
from finreflect_eval.records.results import (
    Results,
)
from finreflect_eval.records.samples import (
    SampleRecord,
)


class ProbeSpan(Record):
    """What a judge prompt shows of a span."""

    span_id: str
    ticker: str
    section: str
    text: str


class Case(Record):
    """One judge call of an audit and what its verdicts are compared with."""

    probe: str
    """`gold`, or the probe that made it."""
    criterion: CriterionName
    span: ProbeSpan
    triples: list[Triple]
    keys: list[str]
    """Per item: the gold item it restates (triple_id; span_id for C), or a new id."""
    expected: list[Label | None]
    """The gold label per item (0 for planted triples)."""


class JudgeAudit(FileRecord):
    """`judge_audit_<date>.json` (`audit-judges`): every case and verdict, and the report."""

    date: RunId
    panel: dict[str, Any]
    """`panel`, `official`, `members`."""
    task: dict[str, str]
    """`name` and `hash` of the task whose judge prompts were used."""
    dataset: DatasetInfo
    probes: list[str]
    seed: int
    finreflect_eval_version: str
    cases: list[Case]
    verdicts: dict[str, list[list[Label | None]]] = Field(min_length=1)
    """Per judge: per case, one verdict per item."""
    calls: dict[str, dict[str, float]]
    report: dict[str, Any]
    """Recomputable from cases, verdicts and calls."""


class Submission(FileRecord):
    """A leaderboard entry: a run's results with the manifest and samples they follow from
    (prompts left out; every number is recomputed from the votes), the people's labels its
    `human` block follows from, and the downstream files its `downstream` block follows from."""

    results: Results
    manifest: Manifest
    samples: dict[str, list[SampleRecord]]
    human_labels: dict[str, list[HumanLabel]] = {}
    """Per task, the run's people's labels (`human_labels_<task>_<run>.jsonl`), from which the
    results' `human` block is recomputed; absent where the run has none (a submission written
    before labels existed has none either)."""
    downstream: dict[str, DownstreamFile] = {}
    """Per downstream task, the run's downstream file of the results' panel
    (`downstream_<task>_<run>_<panel>.json`), from which the results' `downstream` block is
    recomputed; absent where the run has none."""

    @model_serializer(mode="wrap")
    def _without_empty_blocks(self, serialize: Any) -> dict[str, Any]:
        # No `human_labels` or `downstream` key without them: a stored entry's file (and the
        # digest in its name) is the same as before the fields existed.
        data = serialize(self)
        for field in ("human_labels", "downstream"):
            if not data.get(field):
                data.pop(field, None)
        return data
