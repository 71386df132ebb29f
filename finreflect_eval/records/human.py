"""People's labels beside the panel's: `human_labels_<task>_<run>.jsonl`, one `HumanLabel` per
annotator, item and criterion, as `review import` reads them from Label Studio. (What scoring
makes of them is the results' `human` block: `HumanCheck`.)"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from finreflect_eval.protocol.criteria import CRITERIA, CriterionName
from finreflect_eval.records.base import FileRecord, PlainName, RunId

Annotator = Annotated[str, StringConstraints(pattern=r"^annotator-[0-9a-f]{12}$")]
"""A pseudonym: a hash of the run and the annotator's Label Studio user id (never an e-mail)."""
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Source = Annotated[
    str, StringConstraints(pattern=r"^label-studio task [0-9#]{1,21} annotation [0-9?]{1,20}$")
]
Timestamp = Annotated[str, StringConstraints(pattern=r"^[0-9T:.+\-Z ]{1,40}$")]


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
    triple_index: int | None = Field(ge=0)
    """The triple's place in the span's triples (None for comprehensiveness)."""
    sample: Literal["audit", "flagged"]
    """`audit`: drawn at random (uniform over the task's triples, or its spans, stratified by
    filing), the only sample that may correct the panel's scores; `flagged`: from the review
    queue (what the judges split on)."""
    audit_sample: int | None = Field(None, ge=1)
    """The audit's size as asked (`review export --audit-sample N`: N triples per task and the
    same share of its spans), with `audit_seed`: what scoring draws again to check that the
    item was drawn (None outside the audit)."""
    audit_seed: int | None = None
    audit_select: Literal["uniform", "confidence"] = "uniform"
    """How the audit chose its items: `uniform` (every item the same chance), or `confidence`
    (`review export --select confidence`: half the sample where the panel's judges disagreed,
    each item's chance known; the estimates weigh a label by 1 / its chance)."""
    audit_panel: PlainName | None = None
    """The panel whose votes a confidence-driven audit was drawn on (scoring draws it again
    from them)."""
    annotator: Annotator
    label: int | Literal["good", "partial", "poor"]
    """0/1 for a triple criterion, a level for comprehensiveness."""
    source: Source
    """Where it came from: `label-studio task <id> annotation <id>` (Label Studio's ids)."""
    annotated_at: Timestamp | None = None
    """When the annotation was last changed (Label Studio's `updated_at`): a later import of an
    older export keeps the newer label."""

    @model_validator(mode="after")
    def _fits_its_criterion(self) -> HumanLabel:
        criterion = CRITERIA[self.criterion]
        if (self.triple_index is None) != (criterion.per == "span"):
            raise ValueError(f"{self.criterion} is asked of a {criterion.per}: triple_index")
        if self.label not in criterion.labels or isinstance(self.label, bool):
            allowed = "/".join(str(label) for label in criterion.labels)
            raise ValueError(f"label {self.label!r} is not one of {self.criterion}'s ({allowed})")
        if (self.audit_sample is None) != (self.audit_seed is None) or (
            (self.sample == "audit") != (self.audit_sample is not None)
        ):
            raise ValueError("an audit label has audit_sample and audit_seed, no other label has")
        if (self.audit_select == "confidence") != (self.audit_panel is not None):
            raise ValueError("a confidence-driven audit label names its audit_panel, no other")
        return self
