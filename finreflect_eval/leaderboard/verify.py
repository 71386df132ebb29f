"""Verifying what is submitted: a run's results (recomputed from its votes) or a judge audit
(its report recomputed from its verdicts). Whatever is wrong is a one-line refusal."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from finreflect_eval.audit import compute_report
from finreflect_eval.criteria import CRITERIA
from finreflect_eval.data import load_benchmark
from finreflect_eval.errors import FinReflectError, first_line
from finreflect_eval.judging import available_panels, load_panel
from finreflect_eval.records import (
    DatasetInfo,
    JudgeAudit,
    Results,
    SampleRecord,
    Submission,
    parse,
    read_json,
)
from finreflect_eval.scoring import compute_results
from finreflect_eval.store import load_run, newest
from finreflect_eval.tasks import TaskIndex

T = TypeVar("T")
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def bundle_run(path: Path) -> Submission | JudgeAudit:
    """What to submit: a results file or run folder (its newest results) as a submission
    bundle, or a judge audit file, or a bundle as it is."""
    path = Path(path)
    if path.is_dir():
        path = newest(path, "results_*.json")
    data = read_json(path)
    if isinstance(data, dict) and "results" in data and "manifest" in data:
        return parse(Submission, data, path)
    if isinstance(data, dict) and "verdicts" in data:
        return parse(JudgeAudit, data, path)
    results = parse(Results, data, path)
    run = load_run(path.parent / f"manifest_{results.run}.json")
    samples = {
        task: [record.model_copy(update={"arguments": {}}) for record in records]
        for task, records in run.records.items()
    }  # prompts are not needed to recompute a number
    return Submission(results=results, manifest=run.manifest, samples=samples)


def one_line_refusal(check: Callable[..., T]) -> Callable[..., T]:
    """A submission is hostile input: whatever is wrong with it is a one-line refusal, never a
    traceback (and never a broken `leaderboard build`)."""

    def checked(*args: Any, **kwargs: Any) -> T:
        try:
            return check(*args, **kwargs)
        except FinReflectError:
            raise
        except Exception as exc:
            raise FinReflectError(f"refused: malformed submission ({first_line(exc)})") from exc

    return checked


@one_line_refusal
def verify(submission: Submission, leaderboard: Path) -> bool:
    """Every check a submission must pass (the first failure is a one-line error); returns
    whether it is official (a bundled official panel)."""
    results, manifest = submission.results, submission.manifest
    check_model_name(results.config.model_name)
    if results.config.shard or manifest.shard:
        raise FinReflectError(
            "refused: these are one shard's results; merge every shard first "
            "(finreflect-eval score --samples SHARD_FOLDER...) and submit the merged run"
        )
    _check_tasks(results)
    _check_dataset(results.dataset, leaderboard)
    records = submission.samples
    if set(records) != set(manifest.tasks) or set(records) != set(results.results):
        raise FinReflectError("samples, manifest and results name different tasks")
    panel = results.judges.panel
    if panel not in manifest.judging:
        raise FinReflectError(f"the manifest has no judging by panel '{panel}'")
    _check_spans(records, results.dataset)
    _check_votes(records, panel, [judge.name for judge in manifest.judging[panel].judges])
    # Every number must follow from the submitted samples.
    recomputed = compute_results(manifest, records, panel)
    difference = first_difference(
        results.model_dump(mode="json", by_alias=True),
        recomputed.model_dump(mode="json", by_alias=True),
    )
    if difference:
        raise FinReflectError(f"refused: {difference}")
    return is_official(panel, [m.model_dump() for m in results.judges.members])


@one_line_refusal
def verify_audit(audit: JudgeAudit, leaderboard: Path) -> bool:
    """A submitted judge audit: known task and dataset, well-formed cases and verdicts, and a
    report equal to the one recomputed from them; returns whether its panel is official."""
    panel = audit.panel.get("panel")
    if not isinstance(panel, str) or not PLAIN_NAME.fullmatch(panel):
        raise FinReflectError("audit: panel.panel must be a plain name (letters, digits, . _ -)")
    for judge, verdicts in audit.verdicts.items():
        shapes = [len(v) for v in verdicts] == [len(case.keys) for case in audit.cases]
        labels = (*CRITERIA["comprehensiveness"].labels, 0, 1, None)
        if not shapes or any(label not in labels for v in verdicts for label in v):
            raise FinReflectError(f"audit: verdicts of judge {judge!r} do not match the cases")
    task = TaskIndex().tasks.get(audit.task.get("name", ""))
    if task is None or task.hash != audit.task.get("hash"):
        raise FinReflectError(f"audit: task {audit.task} is not a task of this leaderboard")
    _check_dataset(audit.dataset, leaderboard)
    difference = first_difference(audit.report, compute_report(audit), "report")
    if difference:
        raise FinReflectError(f"refused: {difference}")
    return is_official(panel, audit.panel.get("members", []))


def check_model_name(model: Any) -> None:
    """A model name becomes a folder name: nothing in it may point outside the submissions
    folder. (Any other text is allowed; the page escapes it.)"""
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise FinReflectError(f"model name {model!r} must be a non-empty string")
    parts = model.split("/")
    if (
        model.startswith(("/", "~"))
        or "\\" in model
        or any(part in ("", ".", "..") for part in parts)
        or len(parts) > 2
        or any(ord(char) < 32 for char in model)
    ):
        raise FinReflectError(
            f"refused: model name {model!r} is not a Hub id (org/name) or a plain name; "
            "path parts such as '..', '/' at the start or '\\' are not allowed"
        )


def _check_spans(records: dict[str, list[SampleRecord]], dataset: DatasetInfo) -> None:
    """Every task covers the dataset slice's spans, each once (no cherry-picking). The span list
    of the bundled sample is known here; for a registered dataset, each span must be unique."""
    expected = None
    if dataset.id == "sample":
        benchmark = load_benchmark("sample", split=dataset.split, limit=dataset.limit)
        expected = [(span.span_id, span.text) for span in benchmark.spans]
    for task, rows in records.items():
        spans = [(record.span_id, record.text) for record in rows]
        if len({span_id for span_id, _ in spans}) < len(spans):
            raise FinReflectError(f"refused: task {task} lists a span twice")
        if expected is not None and spans != expected:
            raise FinReflectError(
                f"refused: task {task} does not cover exactly the spans of the dataset slice"
            )


def _check_votes(records: dict[str, list[SampleRecord]], panel: str, judges: list[str]) -> None:
    """Each item has one vote from each panel member and nobody else, with a valid label."""
    for task, rows in records.items():
        for record in rows:
            for criterion, votes in record.votes.get(panel, {}).items():
                per_triple = CRITERIA[criterion].per == "triple"
                n_items = len(record.triples) if per_triple else 1
                allowed = (*CRITERIA[criterion].labels, None)
                if per_triple and not record.triples and not any(votes.values()):
                    continue  # no triples: nothing to vote on
                if sorted(votes) != sorted(judges) or any(
                    len(cast) != n_items or any(v.verdict not in allowed for v in cast)
                    for cast in votes.values()
                ):
                    raise FinReflectError(
                        f"refused: task {task}, span {record.span_id}, {criterion}: the votes "
                        "are not one valid vote per item from each panel judge"
                    )


def _check_tasks(results: Results) -> None:
    index = TaskIndex()
    for task in results.results:
        known = index.tasks.get(task)
        if known is None:
            raise FinReflectError(f"task '{task}' is not a task of this leaderboard")
        version = results.versions.get(task)
        if known.config.version != version:
            raise FinReflectError(
                f"task '{task}' version {version} is not the current {known.config.version}"
            )
        if results.task_hashes.get(task) != known.hash:
            raise FinReflectError(
                f"task '{task}' hash {results.task_hashes.get(task)} differs from this "
                f"leaderboard's {known.hash} (its prompts, schema or settings changed)"
            )


def _check_dataset(dataset: DatasetInfo, leaderboard: Path) -> None:
    """The bundled sample is checked by recomputing its fingerprint; other datasets must be
    listed in `<leaderboard>/datasets.json` (`[{"id", "revision", "fingerprint"}]`)."""
    if dataset.id == "sample":
        expected = load_benchmark("sample", split=dataset.split, limit=dataset.limit).fingerprint
        if dataset.fingerprint != expected:
            raise FinReflectError(
                f"dataset fingerprint {dataset.fingerprint} does not match the bundled "
                f"sample's {expected}"
            )
        return
    registry = leaderboard / "datasets.json"
    known = read_json(registry) if registry.exists() else []
    for entry in known if isinstance(known, list) else []:
        if isinstance(entry, dict) and entry.get("fingerprint") == dataset.fingerprint:
            return
    raise FinReflectError(
        f"dataset {dataset.id!r} with fingerprint {dataset.fingerprint} is not registered in "
        f"{registry}"
    )


def is_official(panel: str, members: list[dict[str, Any]]) -> bool:
    """Official only when the panel is a bundled official one with the same members (name and
    model; the engine that served a judge, in-process vLLM or an endpoint, does not matter)."""
    if panel not in available_panels():
        return False
    bundled = load_panel(panel)
    given = [(m.get("name"), m.get("model")) for m in members]
    return bundled.official and given == [(j.name, j.model) for j in bundled.judges]


def first_difference(submitted: Any, recomputed: Any, path: str = "") -> str | None:
    """`path: submitted X, recomputed Y` for the first value that differs, else None."""
    if isinstance(submitted, dict) and isinstance(recomputed, dict):
        for key in sorted(set(submitted) | set(recomputed), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in submitted or key not in recomputed:
                return f"{where}: present in only one of the submitted and recomputed results"
            found = first_difference(submitted[key], recomputed[key], where)
            if found:
                return found
        return None
    if isinstance(submitted, list) and isinstance(recomputed, list):
        if len(submitted) != len(recomputed):
            return f"{path}: submitted {len(submitted)} values, recomputed {len(recomputed)}"
        for index, (a, b) in enumerate(zip(submitted, recomputed, strict=True)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return None
    numbers = all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in (submitted, recomputed)
    )
    if submitted == recomputed and (numbers or type(submitted) is type(recomputed)):
        return None  # 1 and 1.0 are the same number
    return f"{path}: submitted {submitted!r}, recomputed from the samples {recomputed!r}"
