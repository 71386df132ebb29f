"""People's labels beside the panel's: `human_labels_<task>_<run>.jsonl`, one `HumanLabel` per
annotator, item and criterion, as `review import` reads them from Label Studio. (What scoring
makes of them is the results' `human` block: `HumanCheck`.)"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StringConstraints

from finreflect_eval.protocol.criteria import CriterionName
from finreflect_eval.records.base import FileRecord, PlainName, RunId

Annotator = Annotated[str, StringConstraints(pattern=r"^annotator-[0-9a-f]{12}$")]
"""A pseudonym: a hash of the run and the annotator's Label Studio user id (never an e-mail)."""
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class HumanLabel(FileRecord):
    """One person's label of one item: a triple on faithfulness, precision or relevance (`yes`
    is 1, `no` 0), or a span on comprehensiveness (good / partial / poor)."""

    run: RunId
    task: PlainName
    span_id: str
    doc_id: int
    """The span's line in the task's samples file."""
    span_sha256: Sha256
    """The sha256 of the span's text as the person saw it; scoring uses a label only where
    the run's span has that text."""
    criterion: CriterionName
    triple_index: int | None
    """The triple's place in the span's triples (None for comprehensiveness)."""
    sample: Literal["audit", "flagged"]
    """`audit`: drawn at random (uniform over the task's triples, or its spans, stratified by
    filing), the only sample that may correct the panel's scores; `flagged`: from the review
    queue (what the judges split on)."""
    audit_size: int | None = None
    """How many items of this kind the audit drew (None outside the audit)."""
    audit_seed: int | None = None
    annotator: Annotator
    label: int | Literal["good", "partial", "poor"]
    """0/1 for a triple criterion, a level for comprehensiveness."""
    source: str
    """Where it came from: `label-studio task <id> annotation <id>`."""
