"""Typed records of the benchmark data and the parquet features they are stored with."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from finreflect_eval.protocol.criteria import COMPREHENSIVENESS_LEVELS, CriterionName
from finreflect_eval.protocol.schema import Triple
from finreflect_eval.records import DatasetInfo, SliceSpec
from finreflect_eval.records.downstream import Question

CONFIGS = ("spans", "reference_triples", "judgments")


class Span(BaseModel):
    """One chunk of a 10-K filing: the unit that is extracted from and judged."""

    model_config = ConfigDict(frozen=True)

    span_id: str = Field(min_length=1)
    ticker: str = Field(min_length=1)
    company: str
    fiscal_year: int
    form: str = "10-K"
    source_file: str
    section: str
    page_id: str
    chunk_index: int
    content_type: Literal["text", "table"] = "text"
    text: str = Field(min_length=1)
    n_tokens: int
    sha256: str


class ReferenceTriple(Triple):
    """A reference (gold or published) triple for a span."""

    span_id: str = Field(min_length=1)
    triple_id: str = Field(min_length=1)
    source: str

    @property
    def triple(self) -> Triple:
        return Triple.from_tuple(self.as_tuple())


class Judgment(BaseModel):
    """A gold or reference label: a triple on one criterion, or a span's triple set on
    comprehensiveness (then `triple_id` is empty and the triple fields are empty)."""

    model_config = ConfigDict(frozen=True)

    span_id: str = Field(min_length=1)
    triple_id: str
    criterion: CriterionName
    label: str
    annotator: str
    subject: str = ""
    subject_type: str = ""
    relation: str = ""
    object: str = ""
    object_type: str = ""
    flaw: str = ""

    def model_post_init(self, _context: object) -> None:
        allowed = COMPREHENSIVENESS_LEVELS if self.criterion == "comprehensiveness" else ("0", "1")
        if self.label not in allowed:
            raise ValueError(f"label {self.label!r} is not one of {', '.join(allowed)}")
        if self.criterion != "comprehensiveness" and not (self.triple_id and self.subject):
            raise ValueError(f"a {self.criterion} judgment needs triple_id and the triple")

    @property
    def triple(self) -> Triple:
        return Triple(
            subject=self.subject,
            subject_type=self.subject_type,
            relation=self.relation,
            object=self.object,
            object_type=self.object_type,
        )


RECORD_TYPES: dict[str, type[BaseModel]] = {
    "spans": Span,
    "reference_triples": ReferenceTriple,
    "judgments": Judgment,
}


def __getattr__(name: str) -> Any:
    """`FEATURES`, made on first use: `datasets` (seconds to import) only for what builds or
    loads a dataset, not for every command that reads the package's records."""
    if name == "FEATURES":
        return _features()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _features() -> dict[str, Any]:
    """The `datasets.Features` of each config (the parquet columns and their types)."""
    import datasets

    _str = datasets.Value("string")
    return {
        "spans": datasets.Features(
            {
                "span_id": _str,
                "ticker": _str,
                "company": _str,
                "fiscal_year": datasets.Value("int32"),
                "form": _str,
                "source_file": _str,
                "section": _str,
                "page_id": _str,
                "chunk_index": datasets.Value("int32"),
                "content_type": _str,
                "text": _str,
                "n_tokens": datasets.Value("int32"),
                "sha256": _str,
            }
        ),
        "reference_triples": datasets.Features(
            {
                name: _str
                for name in (
                    "span_id",
                    "triple_id",
                    *Triple.model_fields,
                    "source",
                )
            }
        ),
        "judgments": datasets.Features(
            {
                name: _str
                for name in (
                    "span_id",
                    "triple_id",
                    "criterion",
                    "label",
                    "annotator",
                    *Triple.model_fields,
                    "flaw",
                )
            }
        ),
    }


@dataclass
class Benchmark:
    """One split of a benchmark dataset, as typed records."""

    dataset: str
    split: str
    spans: list[Span]
    reference_triples: list[ReferenceTriple] = field(default_factory=list)
    judgments: list[Judgment] = field(default_factory=list)
    revision: str | None = None
    fingerprint: str = ""
    size: int | None = None  # spans in the whole split (or slice), where known
    slice: SliceSpec | None = None  # the slice of the split these spans are
    questions: list[Question] = field(default_factory=list)  # multi-hop QA data's questions

    def __post_init__(self) -> None:
        if not self.fingerprint:
            self.fingerprint = fingerprint(
                self.spans, self.reference_triples, self.judgments, self.questions
            )

    def limited(self, limit: int | None) -> Benchmark:
        """The first `limit` spans (in dataset order) with their triples and judgments."""
        if limit is None or limit >= len(self.spans):
            return self
        if limit < 1:
            raise ValueError("limit must be a positive number of spans")
        return self.subset(self.spans[:limit])

    def subset(self, spans: list[Span]) -> Benchmark:
        """These spans (some of this split's, in the order given) with their triples and
        judgments; the fingerprint still identifies the whole dataset."""
        keep = {span.span_id for span in spans}
        return Benchmark(
            dataset=self.dataset,
            split=self.split,
            spans=list(spans),
            reference_triples=[t for t in self.reference_triples if t.span_id in keep],
            judgments=[j for j in self.judgments if j.span_id in keep],
            revision=self.revision,
            fingerprint=self.fingerprint,
            size=self.size,
            slice=self.slice,
            questions=self.questions,
        )

    def info(self, limit: int | None = None, config: str | None = None) -> DatasetInfo:
        """What a run's files say of this data (with the `--limit` it ran under)."""
        return DatasetInfo(
            id=self.dataset,
            config=config,
            split=self.split,
            revision=self.revision,
            fingerprint=self.fingerprint,
            slice=self.slice,
            limit=limit,
            size=self.size,
        )

    def triples_by_span(self) -> dict[str, list[ReferenceTriple]]:
        grouped: dict[str, list[ReferenceTriple]] = {span.span_id: [] for span in self.spans}
        for triple in self.reference_triples:
            grouped.setdefault(triple.span_id, []).append(triple)
        return grouped


def fingerprint(
    spans: list[Span],
    triples: list[ReferenceTriple],
    judgments: list[Judgment],
    questions: list[Question] = (),
) -> str:
    """A content hash of a split: the same records give the same fingerprint wherever loaded
    (questions only where there are some: other data's fingerprints stay as they were)."""
    digest = hashlib.sha256()
    for records in (spans, triples, judgments, *([questions] if questions else [])):
        for record in records:
            digest.update(json.dumps(record.model_dump(), sort_keys=True).encode("utf-8"))
            digest.update(b"\n")
        digest.update(b"\x00")
    return digest.hexdigest()[:16]
