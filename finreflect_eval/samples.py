"""The samples files: the data every stage after the model reads and extends.

`extract` writes one `SampleRecord` per span and task (`samples_<task>_<date>.jsonl`) and a
manifest (`manifest_<date>.json`) naming them; `judge` adds every judge's votes to the same
records; `score` reads them and needs nothing else. A record holds enough to recompute every
number of the results: final triples, reference triples, CheckRules per triple, every raw model
output and every vote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from finreflect_eval.errors import FinReflectError, first_invalid_field
from finreflect_eval.models import GenerationResult
from finreflect_eval.resources import newest, write_atomic
from finreflect_eval.schema import Triple

FEEDBACK_CHARS = 300
Label = int | str  # 0/1 for triple criteria, good/partial/poor for comprehensiveness


class Feedback(BaseModel):
    """One item of a reflection critic's feedback."""

    model_config = ConfigDict(extra="forbid")

    triple_index: int = Field(ge=0)
    issue: str = Field(max_length=FEEDBACK_CHARS)
    suggestion: str = Field(max_length=FEEDBACK_CHARS)


class ModelCall(BaseModel):
    """One model call about a span (an extraction step or a judge's criterion), as kept."""

    step: str
    model: str | None = None  # the judge's name, for judge calls
    iteration: int = 0
    text: str | None
    raw_outputs: list[str] = []
    error: str | None = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @classmethod
    def of(cls, step: str, result: GenerationResult, **fields: Any) -> ModelCall:
        return cls(
            step=step,
            text=result.text,
            raw_outputs=result.raw_outputs,
            error=result.error,
            cached=result.cached,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            **fields,
        )


class Vote(BaseModel):
    """One judge's verdict on one item; `verdict` None is an abstention (the call failed)."""

    verdict: Label | None
    reasoning: str = ""
    warning: str = ""
    synthetic: bool = False  # given by rule, not by the judge (a span without triples)


class SampleRecord(BaseModel):
    """Everything about one span of one task. One line of `samples_<task>_<date>.jsonl`."""

    task: str
    mode: str
    span_id: str
    ticker: str
    section: str
    text: str
    reference: list[Triple] = []
    triples: list[Triple] = []
    rule_checks: list[dict[str, bool]] = []  # CheckRules per final triple
    failed: bool = False
    failures: list[str] = []
    steps: list[ModelCall] = []
    iterations: int = 0
    converged: bool | None = None
    feedback_trail: list[list[Feedback]] = []
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Filled in by `judge`: criterion -> judge name -> one vote per item (per triple for
    # faithfulness/precision/relevance, one for comprehensiveness).
    votes: dict[str, dict[str, list[Vote]]] = {}
    judge_calls: list[ModelCall] = []

    def add_step(self, step: str, result: GenerationResult, iteration: int = 0) -> None:
        self.steps.append(ModelCall.of(step, result, iteration=iteration))
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        if result.error is not None:
            self.failures.append(f"{step}: {result.error}")


@dataclass
class SavedRun:
    """A manifest and the sample records it names, read from and written to a run folder."""

    folder: Path
    manifest: dict[str, Any]
    records: dict[str, list[SampleRecord]]  # task -> records

    @property
    def date(self) -> str:
        return self.manifest["date"]

    @classmethod
    def load(cls, path: str | Path) -> SavedRun:
        """From a manifest file, or the newest manifest of a folder."""
        path = newest(Path(path), "manifest_*.json", "run `extract` first")
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            tasks = manifest["tasks"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FinReflectError(f"{path}: not a readable run manifest ({exc})") from exc
        records = {
            task: _read_records(path.parent / info["samples"]) for task, info in tasks.items()
        }
        return cls(path.parent, manifest, records)

    def save(self) -> None:
        """Rewrite the samples and the manifest, each atomically: a killed write loses nothing."""
        for task, records in self.records.items():
            write_atomic(
                self.folder / self.manifest["tasks"][task]["samples"],
                "".join(record.model_dump_json() + "\n" for record in records),
            )
        write_atomic(
            self.folder / f"manifest_{self.date}.json", json.dumps(self.manifest, indent=2) + "\n"
        )


def _read_records(path: Path) -> list[SampleRecord]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise FinReflectError(f"cannot read samples file {path}: {exc.strerror}") from exc
    records = []
    for number, line in enumerate(lines, 1):
        try:
            records.append(SampleRecord.model_validate_json(line))
        except ValidationError as exc:
            raise FinReflectError(f"{path}, line {number}: {first_invalid_field(exc)}") from exc
    return records
