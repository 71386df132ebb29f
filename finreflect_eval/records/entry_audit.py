"""`leaderboard audit`'s files: an entry re-judged on a seeded sample of its items
(`EntryAudit`, `<leaderboard>/entry_audits/<org__model>/<run-id>.json`, beside the entry's
`submissions/` path) and the panel's re-run agreement the audits are held to
(`AuditCalibration`, `<leaderboard>/entry_audits/calibration_<panel>.json`). Everything in their
`report` is recomputed from the items, the votes and the stored entry when the board is built."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from finreflect_eval.protocol.criteria import CriterionName, Label
from finreflect_eval.records.base import FileRecord, PlainName, Record
from finreflect_eval.records.manifest import JudgeMember


class AuditItem(Record):
    """One judged item of an entry: a triple of a span on a triple criterion (`index`: its
    place in the span's triples), or a span on comprehensiveness (`index` 0)."""

    task: PlainName
    span_id: str
    criterion: CriterionName
    index: int = Field(ge=0)


class AuditedEntry(Record):
    """The stored entry an audit is of: its path in the leaderboard folder and the sha256 of
    its bytes (the draw's seed comes from it: a submitter cannot choose the sample, and any
    change to the entry changes it)."""

    path: str = Field(pattern=r"^submissions/[A-Za-z0-9._-]+/[A-Za-z0-9._-]+\.json$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class EntryAudit(FileRecord):
    """An entry re-judged by the maintainers' panel on a seeded, stratified sample of its
    items, and how far their verdicts agree with the entry's."""

    entry: AuditedEntry
    seed: int
    """From the entry's sha256 (`rejudging.seed_of`)."""
    size: int = Field(ge=1)
    """The items asked for (fewer where the entry has fewer)."""
    panel: PlainName
    judges: list[JudgeMember]
    """The maintainers' judges, as they ran (engine, commit, settings)."""
    items: list[AuditItem]
    """The draw (`rejudging.draw`): redrawn from the seed when the board is built."""
    votes: dict[str, list[Label | None]]
    """Per judge: the maintainers' verdict on each item (None: its call failed)."""
    rerun: dict[str, list[int]]
    """Per judge, `[same, n]`: its re-run agreement in the calibration (`AuditCalibration`),
    which its agreement with the entry is compared with."""
    false_reject: float = Field(gt=0, lt=1)
    """The chance that an honest entry whose judges agree as on a re-run fails."""
    calibration: str
    """The calibration file (in the same folder) `rerun` comes from."""
    date: str
    finreflect_eval_version: str
    report: dict[str, Any]
    """Recomputed from the items, the votes and the entry (`rejudging.compare`)."""


class AuditCalibration(FileRecord):
    """The panel re-run on one sample: how often each judge gives the same verdict twice, the
    noise an audit must tolerate."""

    panel: PlainName
    entry: AuditedEntry
    items: list[AuditItem]
    runs: list[dict[str, list[Label | None]]] = Field(min_length=2)
    """Per run: per judge, a verdict per item."""
    runs_described: list[str]
    """What differed between the runs (`no cache`, an engine, a batch size)."""
    date: str
    finreflect_eval_version: str
    report: dict[str, Any]
    """Each judge's re-run agreement (`rejudging.rerun_agreement`)."""
