"""Verifying what is submitted: a run's results (recomputed from its votes, and their `human`
block from its people's labels) or a judge audit (its report recomputed from its verdicts).
Whatever is wrong with a run is one refusal that lists every reason found, each saying what to
do. What the samples and labels must hold first: `sample_checks`; the run's tasks and downstream
files: `task_checks`."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from finreflect_eval._util.errors import FinReflectError, Refusal, first_line
from finreflect_eval._util.redaction import find_secret
from finreflect_eval.leaderboard.provenance import provenance_problems
from finreflect_eval.leaderboard.registry import (
    is_pinned,
    match_dataset,
    registered_dataset,
    registered_datasets,
    with_sample,
)
from finreflect_eval.leaderboard.sample_checks import (
    cascade_problems,
    derived_problems,
    label_problems,
    span_problems,
    vote_problems,
)
from finreflect_eval.leaderboard.task_checks import (
    downstream_problems,
    downstream_tasks,
    task_problems,
)
from finreflect_eval.pipeline.audit import compute_report
from finreflect_eval.pipeline.judging import available_panels, load_panel
from finreflect_eval.protocol.criteria import CRITERIA
from finreflect_eval.records import (
    GraphScores,
    JudgeAudit,
    Manifest,
    Results,
    Submission,
    TaskCost,
    parse,
    read,
    read_json,
)
from finreflect_eval.records.downstream import DownstreamFile
from finreflect_eval.records.lm_eval import submitted
from finreflect_eval.runs.consistency import span_problem
from finreflect_eval.runs.store import load_run, newest
from finreflect_eval.scoring.compute import compute_results, score_tables
from finreflect_eval.scoring.failures import FailurePolicy
from finreflect_eval.stats.uncertainty import BOOTSTRAP_ITERS
from finreflect_eval.tasks.config import TaskIndex

T = TypeVar("T")
Section = Literal["official", "community", "smoke"]
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A Hub id or a plain name: letters, digits, '.', '_', '-' (no spaces, control or bidi
# characters that would make one name look like another on the page).
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
MAX_SUBMISSION_BYTES = 64 * 2**20


def bundle_run(path: Path) -> Submission | JudgeAudit:
    """What to submit: a results file or run folder (its newest results) as a submission
    bundle (with the run's people's labels and its panel's downstream files, where it has
    any), or a judge audit file, or a bundle as it is."""
    path = Path(path)
    if path.is_dir():
        if not any(path.glob("results_*.json")):
            raise FinReflectError(unscored(path))
        path = newest(path, "results_*.json")
    data = read_json(path, MAX_SUBMISSION_BYTES)
    if isinstance(data, dict) and "results" in data and "manifest" in data:
        return parse(Submission, data, path)
    if isinstance(data, dict) and "verdicts" in data:
        return parse(JudgeAudit, data, path)
    if not isinstance(data, dict) or "results" not in data:  # (an older one has `results` too)
        raise FinReflectError(
            f"{path} is not a submission: it holds no `results` (a results_*.json or a "
            "bundle) and no `verdicts` (a judge audit)"
        )
    results = parse(Results, data, path)
    run = load_run(path.parent / f"manifest_{results.run}.json")
    samples = {task: [submitted(record) for record in rows] for task, rows in run.records.items()}
    # The cache file's path is the submitter's own folder: nothing a number depends on.
    manifest = run.manifest.model_copy(update={"cache": None})
    config = results.config.model_copy(update={"use_cache": None})
    results = results.model_copy(update={"config": config})
    # People's labels (`review import`), from which scoring made the results' `human` block,
    # and the downstream files of its panel, from which it made the `downstream` block.
    labels = run.store.human_labels(run.manifest)
    downstream = {
        task: without_subgraphs(file)
        for task, file in run.store.downstream(run.manifest, results.judges.panel).items()
    }
    return Submission(
        results=results,
        manifest=manifest,
        samples=samples,
        human_labels=labels,
        downstream=downstream,
    )


def without_subgraphs(file: DownstreamFile) -> DownstreamFile:
    """A downstream file as a submission carries it: without the subgraphs the QA model was
    shown (a third of its size at 113 triples a question; retrieval is deterministic, so a
    reader makes them again from the samples, and nothing can check what was shown anyway)."""
    return file.model_copy(
        update={"questions": [q.model_copy(update={"subgraph": []}) for q in file.questions]}
    )


def unscored(folder: Path) -> str:
    """Why a folder holds no results to submit, from its newest manifest: the run is still
    extracting, or not judged, or judged and not scored; with the command that finishes it."""
    manifests = sorted(folder.glob("manifest_*.json"))
    if not manifests:
        return (
            f"{folder}: no results_*.json or manifest_*.json here: not a run folder (submit the "
            "folder `finreflect-eval run` wrote, or its results_*.json)"
        )
    manifest = read(Manifest, manifests[-1])
    rerun = f"rerun the same `finreflect-eval run` command (it resumes run {manifest.run})"
    if manifest.status == "extracting":
        return f"{folder}: run {manifest.run} is still extracting (not judged or scored): {rerun}"
    if not manifest.judging:
        return (
            f"{folder}: run {manifest.run} is extracted but not judged or scored: {rerun}, or "
            f"`finreflect-eval judge --samples {folder}` then `finreflect-eval score --samples "
            f"{folder}`"
        )
    panels = ", ".join(f"'{panel}'" for panel in manifest.judging)
    return (
        f"{folder}: run {manifest.run} is judged by panel {panels} but not scored: "
        f"finreflect-eval score --samples {folder}"
    )


def as_refusal(check: Callable[..., T]) -> Callable[..., T]:
    """A submission is hostile input: whatever is wrong with it is a refusal, never a traceback
    (and never a broken `leaderboard build`)."""

    def checked(*args: Any, **kwargs: Any) -> T:
        try:
            return check(*args, **kwargs)
        except FinReflectError:
            raise
        except Exception as exc:
            raise Refusal([f"malformed submission ({first_line(exc)})"]) from exc

    return checked


@dataclass(frozen=True)
class Verdict:
    """Where a verified run goes on the page."""

    section: Section
    pinned: bool | None
    """Its data is the pinned version of its dataset (True) or another one (False, never
    ranked); None: no version of its dataset is pinned (or it is the bundled sample)."""
    graph: dict[str, GraphScores] | None = None
    """The results' `graph` block as recomputed, where the submitted results have none (a run
    scored before finreflect-eval had one): the entry shows it. None: it was submitted."""
    cost: dict[str, TaskCost] | None = None
    """The same for the `cost` block."""
    community: tuple[str, ...] = ()
    """Why a run on an official dataset is a community entry (`provenance`: which judge and
    field differed from the official panel's pins; the grounding cascade)."""


@as_refusal
def verify(submission: Submission, leaderboard: Path, others: Sequence[Submission] = ()) -> Verdict:
    """Every check a submission must pass, all of them at once: one Refusal lists every reason
    found (a check that needs an earlier one to pass, as recomputing the scores needs valid
    votes, is left out while it fails). `others`: the entries already on the leaderboard,
    earliest first (the first on a data version fixes its span list). Returns its section:
    `official` (a complete run of an official task on an official dataset, judged by an
    official panel), `community` (the same with another panel) or `smoke` (the bundled
    sample), and whether its data is the pinned version."""
    results, manifest = submission.results, submission.manifest
    dataset = results.dataset
    secrets = _secret_problems(results, manifest)
    reasons = _model_name_problems(results.config.model_name) + secrets
    reasons += _run_problems(results, manifest)
    index = TaskIndex()
    reasons += task_problems(results, manifest, index)
    # A downstream task's spans are its questions' chunks, of its own data: the dataset and
    # span checks are the main tasks'; its file's measures are recomputed from its samples.
    downstream = downstream_tasks(results.tasks, index)
    main = [task for task in results.tasks if task not in downstream]
    registered = None
    try:
        registered = match_dataset(dataset, with_sample(registered_datasets(leaderboard)))
    except FinReflectError as exc:
        reasons.append(str(exc))
    outside = sorted(set(main) - set(registered.tasks)) if registered else []
    if outside:
        reasons.append(
            f"task '{outside[0]}' is not a task of dataset '{registered.name}' on this "
            f"leaderboard (its tasks: {', '.join(registered.tasks)}); run those"
        )
    records = submission.samples
    if set(records) != set(manifest.tasks) or set(records) != set(results.tasks):
        raise Refusal([*reasons, "samples, manifest and results name different tasks"])
    for task, rows in records.items():
        problem = span_problem(manifest, task, [r.doc_id for r in rows], [r.span_id for r in rows])
        reasons += [f"task {task}'s samples: {problem}"] if problem else []
    panel = results.judges.panel
    if panel not in manifest.judging:
        raise Refusal([*reasons, f"the manifest has no judging by panel '{panel}'"])
    judges = manifest.judging[panel].judges
    for judge in judges:
        reasons += _printable_problems(judge.model, "judge model")
        reasons += _printable_problems(judge.name, "judge name")
    downstream_refused = downstream_problems(submission, index)
    reasons += downstream_refused
    config = results.config
    if config.prices is not None:  # shown on the page beside the money
        reasons += _printable_problems(config.prices.currency, "price table currency")
    if config.bootstrap_iters < BOOTSTRAP_ITERS:
        reasons.append(
            f"its intervals come from {config.bootstrap_iters} resamples, under the leaderboard's "
            f"{BOOTSTRAP_ITERS}: rescore with `finreflect-eval score --bootstrap_iters "
            f"{BOOTSTRAP_ITERS}`"
        )
    chosen = dataset.limit is not None or config.sections or config.samples is not None
    if not chosen:  # a run on chosen spans covers too few: said above
        main_records = {task: rows for task, rows in records.items() if task in main}
        reasons += span_problems(main_records, dataset, registered, others)
    problems, recomputed = _recomputed(
        submission, [judge.name for judge in judges], bool(secrets), bool(downstream_refused)
    )
    reasons += problems
    if reasons or registered is None:
        raise Refusal(reasons)
    graph = recomputed.graph if recomputed is not None and not results.graph else None
    cost = recomputed.cost if recomputed is not None and not results.cost else None
    if registered.section == "smoke":
        return Verdict("smoke", None, graph, cost)
    community = provenance_problems(panel, judges)
    if manifest.judging[panel].cascade is not None:  # not the paper's protocol: not ranked
        community.append(
            "the grounding cascade scored triples by rule (--skip-judging-ungrounded), not by "
            "the judges"
        )
    section = "community" if community else "official"
    return Verdict(section, is_pinned(dataset, registered), graph, cost, tuple(community))


def _recomputed(
    submission: Submission, judges: list[str], secrets: bool, downstream_refused: bool = False
) -> tuple[list[str], Results | None]:
    """The samples hold together (derived fields, votes), the people's labels are of them, and
    every number of the results follows from them: recomputed from the votes, the `human`
    block from the labels and the `downstream` block from the downstream files (see `verify`;
    where the labels or the files are refused, all but that block). Returns what is wrong, and
    the results recomputed (None where nothing could be)."""
    results, manifest, records = submission.results, submission.manifest, submission.samples
    panel = results.judges.panel
    derived = derived_problems(records)
    # Before anything reads the votes: a malformed one is named, not a traceback of scoring.
    votes_problems = vote_problems(records, panel, judges)
    reasons = derived + votes_problems
    reasons += label_problems(submission.human_labels, manifest, records)
    reasons += cascade_problems(records, manifest, panel)
    # Nothing follows from samples that do not hold together, and a difference would repeat a
    # secret: recompute only without those.
    if derived or votes_problems or secrets:
        return reasons, None
    span_facts, votes = score_tables(manifest, records, panel)
    failed = FailurePolicy().problems(span_facts, panel)
    if failed:
        return reasons + [f"{line}; rerun the same command to retry them" for line in failed], None
    # Every number must follow from the submitted samples (and people's labels, and the
    # downstream files: their measures again from the samples' triples).
    iters, prices = results.config.bootstrap_iters, results.config.prices
    labels = {} if reasons else submission.human_labels
    # (Downstream files refused already are not scored again: the reason is given.)
    files = {} if downstream_refused else submission.downstream

    def again(labels: dict, files: dict) -> Results:
        return compute_results(
            manifest,
            panel,
            span_facts,
            votes,
            iters,
            human_labels=labels,
            prices=prices,
            downstream=files,
        )

    with_downstream = not downstream_refused
    try:
        recomputed = again(labels, files)
    except FinReflectError as exc:  # a label scoring refuses, or a downstream file that does
        reasons.append(str(exc))  # not follow from the samples: recomputed without that part
        try:
            recomputed = again({}, files)
        except FinReflectError as downstream:  # (a downstream file it was, or is too)
            reasons += [str(downstream)] if str(downstream) != str(exc) else []
            with_downstream = False
            recomputed = again({}, {})
    difference = _difference(
        results, recomputed, with_human=not reasons, with_downstream=with_downstream
    )
    return reasons + ([difference] if difference else []), recomputed


def _difference(
    results: Results, recomputed: Results, *, with_human: bool, with_downstream: bool = True
) -> str | None:
    """The first value of the submitted results that differs from the recomputed ones (but for
    what people's labels give where they were refused, and the `downstream` block where its
    files were: that is said already). Results without a `graph`, `cost` or `judges_worth`
    block (scored before there was one) are compared without it: it is recomputed, and the
    entry shows the recomputed block (`Verdict.graph`); a block submitted is compared number
    for number like any other."""
    submitted = results.model_dump(mode="json", by_alias=True)
    again = recomputed.model_dump(mode="json", by_alias=True)
    for block in ("graph", "cost", "judges_worth"):  # scored before the block existed
        if block not in submitted:
            again.pop(block, None)
    if not with_downstream:
        for side in (submitted, again):
            side.pop("downstream", None)
    if not with_human:  # (the labels' part of `judges_worth` too)
        for side in (submitted, again):
            side.pop("human", None)
            for criteria in side.get("judges_worth", {}).values():
                for worth in criteria.values():
                    worth.pop("people", None)
    difference = first_difference(submitted, again)
    if difference and difference.startswith("human"):
        difference = difference.replace(
            "recomputed from the samples", "recomputed from the samples and human labels"
        )
        difference += (
            "; the human block follows from the submitted human labels: submit the run folder "
            "as `finreflect-eval score` left it after `review import`"
        )
    elif difference and difference.startswith("downstream"):
        difference += (
            "; the downstream block follows from the submitted downstream files: submit the run "
            "folder as `finreflect-eval score` left it"
        )
    return difference


def _secret_problems(results: Results, manifest: Manifest) -> list[str]:
    problems = []
    for name, part in (("results", results), ("manifest", manifest)):
        secret = find_secret(part.model_dump(mode="json", by_alias=True), name)
        if secret:
            problems.append(
                f"{secret} holds a secret (a URL's user:password, a key or a token); a "
                "submission is published: rerun with the credentials out of the arguments (an "
                "API key goes in an environment variable, see api_key_env)"
            )
    return problems


def _run_problems(results: Results, manifest: Manifest) -> list[str]:
    """What is wrong with the run as a whole: task files recorded by path, one shard, spans
    chosen (--limit, --sections, --samples), failures allowed."""
    problems = []
    for task, config in results.configs.items():
        if "files" not in config:  # a run of a version that recorded the user's folders
            problems.append(
                f"configs.{task} records its task files by local path (a run of an older "
                "finreflect-eval); rerun it to submit"
            )
    if results.config.shard or manifest.shard:
        problems.append(
            "these are one shard's results; merge every shard first (finreflect-eval score "
            "--samples SHARD_FOLDER...) and submit the merged run"
        )
    if results.dataset.limit is not None:
        problems.append(
            f"a --limit {results.dataset.limit} run is not a complete run of the benchmark; "
            "run without --limit"
        )
    if results.config.sections:
        problems.append(
            f"a run on sections {', '.join(results.config.sections)} (--sections) is not a "
            "complete run of the benchmark; run without --sections"
        )
    if results.config.samples is not None:
        chosen = ", ".join(f"{len(ids)} of {task}" for task, ids in results.config.samples.items())
        problems.append(
            f"a run on chosen spans ({chosen}; --samples) is not a complete run of the "
            "benchmark; run without --samples"
        )
    if results.config.allow_failures:
        problems.append(
            "these results were scored with --allow-failures; a leaderboard run has no failed "
            "calls (rerun the same command to retry them, then score again)"
        )
    return problems


@as_refusal
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
    problems = _model_name_problems(model, what)
    if problems:
        raise Refusal(problems)


def _model_name_problems(model: Any, what: str = "model name") -> list[str]:
    if not isinstance(model, str) or not MODEL_NAME.fullmatch(model) or ".." in model:
        return [
            f"{what} {model!r} is not a Hub id (org/name) or a plain name (letters, digits, "
            "'.', '_', '-'; at most 96 characters a part)"
        ]
    return []


def _printable_problems(text: str, what: str) -> list[str]:
    """Text shown on the page: no control or format characters (bidi overrides can make one
    name read as another)."""
    if len(text) > 200 or any(unicodedata.category(char) in ("Cc", "Cf") for char in text):
        return [f"{what} {text[:40]!r} is over 200 characters or holds control characters"]
    return []


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
