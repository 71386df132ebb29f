"""`finreflect-eval upgrade DIR`: a run folder written before the file formats had versions
(format 1), rewritten in the current format, so that `judge` and `score` read it. The old files
are kept in `DIR/format-1/`.

What format 1 did not keep is filled in where it can be derived (span positions, the span list,
and lm-eval's sample fields: `SampleRecord` derives them for a line without `doc`) and left
empty where it cannot (the rendered prompts, and so lm-eval's `prompt_hash`). Format 1 reported
every metric, so the upgraded tasks' metric list is the default one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from finreflect_eval._util.errors import FinReflectError, first_invalid_field, first_line
from finreflect_eval._util.redaction import redact
from finreflect_eval.data import span_list
from finreflect_eval.records import (
    FORMAT_VERSION,
    DatasetInfo,
    Judging,
    Manifest,
    ModelCall,
    ModelInfo,
    PlainName,
    RunId,
    SampleRecord,
    SamplesName,
    ShardInfo,
    SpanList,
    TaskManifest,
    read_json,
)
from finreflect_eval.runs.consistency import check_spans
from finreflect_eval.runs.store import Run, RunStore, newest, not_a_link
from finreflect_eval.tasks.config import DEFAULT_METRICS, TaskIndex


def upgrade_run(folder: Path, include_paths: list[Path] | None = None) -> list[Path]:
    """Rewrite the newest format-1 run of `folder` in the current format; returns the files
    written."""
    folder = Path(folder)
    path = not_a_link(newest(folder, "manifest_*.json"))
    old = read_json(path)
    if not isinstance(old, dict) or "tasks" not in old:
        raise FinReflectError(f"{path} is not a run manifest")
    if old.get("format_version") == FORMAT_VERSION:
        raise FinReflectError(f"{path} is already in format version {FORMAT_VERSION}")
    if "format_version" in old:
        raise FinReflectError(f"{path}: format version {old['format_version']} is not known here")
    try:  # what is read of it, checked first: its names become file names
        Format1Manifest.model_validate(old)
    except ValidationError as exc:
        raise FinReflectError(f"{path}: {first_invalid_field(exc)}") from exc
    if path.name != f"manifest_{old['date']}.json":
        raise FinReflectError(f"{path}: field 'date': {old['date']} is not the run of its name")
    store = RunStore(folder)
    panel = (old.get("judging") or {}).get("panel")
    # A shard's file holds every count-th span of the whole list, in order, from its index on.
    index, step = (old["shard"]["index"], old["shard"]["count"]) if old.get("shard") else (0, 1)
    try:
        records = {
            task: [
                _record(row, index + i * step, panel)
                for i, row in enumerate(_lines(store.own(info["samples"])))
            ]
            for task, info in old["tasks"].items()
        }
        manifest = _manifest(old, records, TaskIndex(include_paths))
    except ValidationError as exc:
        raise FinReflectError(f"{path}: not a format-1 run ({first_invalid_field(exc)})") from exc
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a line of another shape
        raise FinReflectError(f"{path}: not a format-1 run ({first_line(exc)})") from exc
    for task, rows in records.items():  # before anything is written
        samples = store.own(old["tasks"][task]["samples"])
        check_spans(manifest, samples, task, [r.doc_id for r in rows], [r.span_id for r in rows])
    backup = not_a_link(folder / "format-1")
    backup.mkdir(exist_ok=True)
    names = [path.name, *(info["samples"] for info in old["tasks"].values())]
    for name in names:
        shutil.copy2(store.own(name), backup / name)
    store.save(Run(store, manifest, records))
    return [folder / name for name in names]


class Format1Task(BaseModel):
    """What is read of a task of a format-1 manifest."""

    mode: str
    hash: str
    samples: SamplesName
    dataset: dict[str, Any]


class Format1Judging(BaseModel):
    panel: PlainName
    judges: list[dict[str, Any]]


class Format1Manifest(BaseModel):
    """What is read of a format-1 manifest (its other fields are taken where present)."""

    date: RunId
    model: str
    backend: str
    model_args: dict[str, Any]
    tasks: dict[PlainName, Format1Task]
    dataset: dict[str, Any]
    judging: Format1Judging | None = None


def _lines(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]
    except (OSError, ValueError, RecursionError) as exc:
        raise FinReflectError(f"cannot read samples {path}: {first_line(exc)}") from exc


def _call(call: dict[str, Any]) -> ModelCall:
    return ModelCall.model_validate({**call, "prompt_hash": ""})


def _record(row: dict[str, Any], doc_id: int, panel: str | None) -> SampleRecord:
    fields = dict(row)
    votes, calls = fields.pop("votes", {}), fields.pop("judge_calls", [])
    fields["steps"] = [_call(step) for step in fields.get("steps", [])]
    return SampleRecord.model_validate(
        {
            **fields,
            "doc_id": doc_id,
            "votes": {panel: votes} if panel else {},
            "judge_calls": {panel: [_call(c) for c in calls]} if panel else {},
        }
    )


def _manifest(
    old: dict[str, Any], records: dict[str, list[SampleRecord]], index: TaskIndex
) -> Manifest:
    judging = old.get("judging")
    tasks = {}
    for name, info in old["tasks"].items():
        current = index.tasks.get(name)
        ids = [record.span_id for record in records[name]]
        tasks[name] = TaskManifest(
            mode=info["mode"],
            version=info.get("version"),
            hash=info["hash"],
            config=current.recorded_config() if current else {},
            generation_kwargs=info.get("generation_kwargs", {}),
            metric_list=DEFAULT_METRICS,
            samples=info["samples"],
            seconds=info.get("seconds", 0.0),
            dataset=DatasetInfo(**info["dataset"]),
            span_list=SpanList(**(info.get("span_list") or span_list(ids))),
            fewshot=info.get("fewshot", []),
        )
    return Manifest(
        run=old["date"],
        status="extracted",
        model=ModelInfo(name=old["model"], backend=old["backend"], args=redact(old["model_args"])),
        tasks=tasks,
        groups=old.get("groups", {}),
        seed=old.get("seed"),
        shard=ShardInfo(**old["shard"]) if old.get("shard") else None,
        dataset=DatasetInfo(**old["dataset"]),
        cache=old.get("cache"),
        finreflect_eval_version=old.get("finreflect_eval_version", ""),
        git_hash=old.get("git_hash"),
        seconds=old.get("total_seconds", 0.0),
        judging={
            judging["panel"]: Judging(
                panel=judging["panel"],
                official=judging.get("official", False),
                description=judging.get("description", ""),
                judges=judging["judges"],
                criteria=["faithfulness", "precision", "relevance", "comprehensiveness"],
                task_hashes=judging.get("task_hashes", {}),
                seconds=judging.get("seconds", {}),
            )
        }
        if judging
        else {},
    )
