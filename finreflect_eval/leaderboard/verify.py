"""Verifying what is submitted: a run's results (recomputed from its votes) or a judge audit
(its report recomputed from its verdicts). Whatever is wrong is a one-line refusal."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from finreflect_eval.audit import compute_report
from finreflect_eval.criteria import CRITERIA
from finreflect_eval.data import load_benchmark, span_list
from finreflect_eval.errors import FinReflectError, first_invalid_field, first_line
from finreflect_eval.judging import available_panels, load_panel
from finreflect_eval.lm_eval_sample import first_mismatch, submitted
from finreflect_eval.records import (
    DatasetInfo,
    JudgeAudit,
    Manifest,
    Results,
    SampleRecord,
    SliceSpec,
    Submission,
    parse,
    read_json,
)
from finreflect_eval.redaction import find_secret
from finreflect_eval.scoring import FailurePolicy, compute_results, score_tables
from finreflect_eval.store import load_run, newest
from finreflect_eval.tasks import TASK_OVERRIDES, TaskIndex

T = TypeVar("T")
Section = Literal["official", "community", "smoke"]
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A Hub id or a plain name: letters, digits, '.', '_', '-' (no spaces, control or bidi
# characters that would make one name look like another on the page).
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
MAX_SUBMISSION_BYTES = 64 * 2**20


def bundle_run(path: Path) -> Submission | JudgeAudit:
    """What to submit: a results file or run folder (its newest results) as a submission
    bundle, or a judge audit file, or a bundle as it is."""
    path = Path(path)
    if path.is_dir():
        path = newest(path, "results_*.json")
    data = read_json(path, MAX_SUBMISSION_BYTES)
    if isinstance(data, dict) and "results" in data and "manifest" in data:
        return parse(Submission, data, path)
    if isinstance(data, dict) and "verdicts" in data:
        return parse(JudgeAudit, data, path)
    results = parse(Results, data, path)
    run = load_run(path.parent / f"manifest_{results.run}.json")
    samples = {task: [submitted(record) for record in rows] for task, rows in run.records.items()}
    # The cache file's path is the submitter's own folder: nothing a number depends on.
    manifest = run.manifest.model_copy(update={"cache": None})
    config = results.config.model_copy(update={"use_cache": None})
    results = results.model_copy(update={"config": config})
    return Submission(results=results, manifest=manifest, samples=samples)


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
def verify(submission: Submission, leaderboard: Path) -> Section:
    """Every check a submission must pass (the first failure is a one-line error); returns the
    section it belongs in: `official` (a complete run of an official task on an official
    dataset, judged by an official panel), `community` (the same with another panel) or
    `smoke` (the bundled sample)."""
    results, manifest = submission.results, submission.manifest
    check_model_name(results.config.model_name)
    for name, part in (("results", results), ("manifest", manifest)):
        secret = find_secret(part.model_dump(mode="json", by_alias=True), name)
        if secret:
            raise FinReflectError(
                f"refused: {secret} holds a secret (a URL's user:password, a key or a token); "
                "a submission is published: rerun with the credentials out of the arguments "
                "(an API key goes in an environment variable, see api_key_env)"
            )
    for task, config in results.configs.items():
        if "files" not in config:  # a run of a version that recorded the user's folders
            raise FinReflectError(
                f"refused: configs.{task} records its task files by local path (a run of an "
                "older finreflect-eval); rerun it to submit"
            )
    if results.config.shard or manifest.shard:
        raise FinReflectError(
            "refused: these are one shard's results; merge every shard first "
            "(finreflect-eval score --samples SHARD_FOLDER...) and submit the merged run"
        )
    dataset = results.dataset
    if dataset.limit is not None:
        raise FinReflectError(
            f"refused: a --limit {dataset.limit} run is not a complete run of the benchmark; "
            "run without --limit"
        )
    _check_tasks(results, manifest)
    registered = registered_dataset(dataset, leaderboard)
    outside = sorted(set(results.tasks) - set(registered.tasks))
    if outside:
        raise FinReflectError(
            f"refused: task '{outside[0]}' is not a task of dataset '{registered.name}' on this "
            f"leaderboard (its tasks: {', '.join(registered.tasks)})"
        )
    records = submission.samples
    if set(records) != set(manifest.tasks) or set(records) != set(results.tasks):
        raise FinReflectError("samples, manifest and results name different tasks")
    panel = results.judges.panel
    if panel not in manifest.judging:
        raise FinReflectError(f"the manifest has no judging by panel '{panel}'")
    for judge in manifest.judging[panel].judges:
        check_printable(judge.model, "judge model")
        check_printable(judge.name, "judge name")
    if results.config.allow_failures:
        raise FinReflectError(
            "refused: these results were scored with --allow-failures; a leaderboard run has no "
            "failed calls (rerun the same command to retry them, then score again)"
        )
    _check_spans(records, dataset, registered)
    _check_derived(records)
    # Before anything reads the votes: a malformed one is named, not a traceback of scoring.
    _check_votes(records, panel, [judge.name for judge in manifest.judging[panel].judges])
    span_facts, votes = score_tables(manifest, records, panel)
    failed = FailurePolicy().problems(span_facts, panel)
    if failed:
        raise FinReflectError(f"refused: {failed[0]}; rerun the same command to retry them")
    # Every number must follow from the submitted samples.
    recomputed = compute_results(manifest, panel, span_facts, votes)
    difference = first_difference(
        results.model_dump(mode="json", by_alias=True),
        recomputed.model_dump(mode="json", by_alias=True),
    )
    if difference:
        raise FinReflectError(f"refused: {difference}")
    if registered.section == "smoke":
        return "smoke"
    official = is_official(panel, [m.model_dump() for m in results.judges.members])
    return "official" if official else "community"


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
    registered_dataset(audit.dataset, leaderboard)
    difference = first_difference(audit.report, compute_report(audit), "report")
    if difference:
        raise FinReflectError(f"refused: {difference}")
    return is_official(panel, audit.panel.get("members", []))


def check_model_name(model: Any, what: str = "model name") -> None:
    """A model name becomes a folder name and a row on the page: a Hub id (`org/name`) or a
    plain name, in a safe character set."""
    if not isinstance(model, str) or not MODEL_NAME.fullmatch(model) or ".." in model:
        raise FinReflectError(
            f"refused: {what} {model!r} is not a Hub id (org/name) or a plain name "
            "(letters, digits, '.', '_', '-'; at most 96 characters a part)"
        )


def check_printable(text: str, what: str) -> None:
    """Text shown on the page: no control or format characters (bidi overrides can make one
    name read as another)."""
    if len(text) > 200 or any(unicodedata.category(char) in ("Cc", "Cf") for char in text):
        raise FinReflectError(
            f"refused: {what} {text[:40]!r} is over 200 characters or holds control characters"
        )


def _check_spans(
    records: dict[str, list[SampleRecord]], dataset: DatasetInfo, registered: RegisteredDataset
) -> None:
    """Every task covers all the spans of the registered dataset's slice, each once (no
    cherry-picking): the bundled sample's span list is recomputed here; for another dataset the
    span count and the span list's hash must be the registered ones."""
    expected = None
    if dataset.id == "sample":
        benchmark = load_benchmark("sample", split=dataset.split, slice=dataset.slice)
        expected = [(span.span_id, span.text) for span in benchmark.spans]
    for task, rows in records.items():
        spans = [(record.span_id, record.text) for record in rows]
        if len({span_id for span_id, _ in spans}) < len(spans):
            raise FinReflectError(f"refused: task {task} lists a span twice")
        if expected is not None and spans != expected:
            raise FinReflectError(
                f"refused: task {task} does not cover exactly the spans of the dataset slice"
            )
        listed = span_list([span_id for span_id, _ in spans])
        for key, value in (("count", registered.spans), ("sha256", registered.span_list_sha256)):
            if value is not None and listed[key] != value:
                raise FinReflectError(
                    f"refused: task {task} does not cover exactly the {registered.spans} spans of "
                    f"'{registered.name}' (span list {key} {listed[key]}, registered {value})"
                )


def _check_votes(records: dict[str, list[SampleRecord]], panel: str, judges: list[str]) -> None:
    """Each item has one vote from each panel member and nobody else, with a valid label; and
    no judge abstained on more than the failure policy's share of its items (its failed calls
    are counted from the samples' calls too, but the votes say it whatever the calls say)."""
    limit = FailurePolicy.max_judge_failure_share
    for task, rows in records.items():
        items, abstained = Counter[str](), Counter[str]()
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
                for judge, cast in votes.items():
                    items[judge] += sum(not vote.synthetic for vote in cast)
                    abstained[judge] += sum(v.verdict is None and not v.synthetic for v in cast)
        for judge in judges:
            if abstained[judge] > limit * items[judge]:
                raise FinReflectError(
                    f"refused: task {task}: judge {judge} abstained on {abstained[judge]} of its "
                    f"{items[judge]} items (more than {limit * 100:g}%): a failed judge"
                )


def _check_derived(records: dict[str, list[SampleRecord]]) -> None:
    """Each sample's lm-eval hashes and per-sample metrics are what its other fields give, so
    that the task hashes recomputed from them are of the samples submitted."""
    for task, rows in records.items():
        for record in rows:
            field = first_mismatch(record)
            if field:
                raise FinReflectError(
                    f"refused: task {task}, span {record.span_id}: {field} is not what the "
                    "sample's other fields give (edited samples?)"
                )


def _check_tasks(results: Results, manifest: Manifest) -> None:
    """Each task is this leaderboard's, as it is now: its version, its settings, and its
    config hash (the manifest's: the results' `task_hashes` are lm-eval's, of the samples)."""
    index = TaskIndex()
    for task in results.tasks:
        known = index.tasks.get(task)
        if known is None:
            raise FinReflectError(f"task '{task}' is not a task of this leaderboard")
        version = results.versions.get(task)
        if known.config.version != version:
            raise FinReflectError(
                f"task '{task}' version {version} is not the current {known.config.version}"
            )
        config = results.configs.get(task, {})
        for field in TASK_OVERRIDES:  # set for the run by a flag (--num_fewshot, ...)
            if config.get(field) != getattr(known.config, field):
                raise FinReflectError(
                    f"task '{task}' ran with {field}={config.get(field)!r}, not the task's "
                    f"{getattr(known.config, field)!r}: a changed task is not this leaderboard's"
                )
        generation = known.config.generation_kwargs.model_dump()
        if config.get("generation_kwargs") != generation:  # --gen_kwargs, --seed
            raise FinReflectError(
                f"task '{task}' ran with generation_kwargs {config.get('generation_kwargs')}, not "
                f"the task's {generation}: a changed task is not this leaderboard's"
            )
        ran = manifest.tasks[task].hash if task in manifest.tasks else None
        if ran != known.hash:
            raise FinReflectError(
                f"task '{task}' hash {ran} differs from this leaderboard's {known.hash} (its "
                "prompts, schema or settings changed)"
            )


class RegisteredDataset(BaseModel):
    """One entry of `<leaderboard>/datasets.json`: a dataset (and slice) this leaderboard ranks
    runs on, and which section its entries go to."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    section: Literal["official", "smoke"]
    """`official`: ranked (with an official panel); `smoke`: shown apart, never ranked."""
    id: str
    config: str | None = None
    revision: str | None = None
    split: str = "test"
    slice: SliceSpec | None = None
    fingerprint: str | None
    """The data's fingerprint (`finreflect-eval dataset info`); until it is recorded, no run on
    this dataset can be verified."""
    spans: int | None = None
    """Spans in the slice, where known."""
    span_list_sha256: str | None = None
    """The slice's span list (`dataset info`), where known."""
    tasks: list[str]
    """The tasks whose runs on this dataset count."""


def registered_datasets(leaderboard: Path) -> list[RegisteredDataset]:
    registry = leaderboard / "datasets.json"
    data = read_json(registry) if registry.exists() else []
    try:
        return [RegisteredDataset.model_validate(entry) for entry in data]
    except (ValidationError, TypeError) as exc:
        detail = first_invalid_field(exc) if isinstance(exc, ValidationError) else str(exc)
        raise FinReflectError(f"{registry}: {detail}") from exc


def registered_dataset(dataset: DatasetInfo, leaderboard: Path) -> RegisteredDataset:
    """The entry of `datasets.json` a run's data is: the same slice and split, and the same
    content (fingerprint). The bundled sample is known without an entry, as a smoke dataset."""
    entries = registered_datasets(leaderboard)
    if not any(entry.id == "sample" for entry in entries):
        entries.append(sample_entry())
    for entry in entries:
        if entry.slice != dataset.slice or entry.split != dataset.split:
            continue
        if entry.fingerprint is None and (entry.id, entry.revision) == (
            dataset.id,
            dataset.revision,
        ):
            raise FinReflectError(
                f"refused: the fingerprint of '{entry.name}' is not recorded in datasets.json "
                "yet (a maintainer computes it with `finreflect-eval dataset info`)"
            )
        if entry.fingerprint == dataset.fingerprint:
            return entry
    slice_name = dataset.slice.name if dataset.slice else "every span"
    raise FinReflectError(
        f"refused: dataset {dataset.id!r} (split {dataset.split}, {slice_name}, fingerprint "
        f"{dataset.fingerprint}) is not a dataset of this leaderboard (datasets.json)"
    )


def sample_entry() -> RegisteredDataset:
    """The bundled sample: every span of its test split, for the smoke tasks."""
    sample = load_benchmark("sample", split="test")
    return RegisteredDataset(
        name="bundled sample",
        section="smoke",
        id="sample",
        split="test",
        fingerprint=sample.fingerprint,
        spans=len(sample.spans),
        span_list_sha256=str(span_list([s.span_id for s in sample.spans])["sha256"]),
        tasks=[task.name for task in TaskIndex().resolve(["smoke"])],
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
