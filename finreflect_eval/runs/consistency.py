"""A run folder's parts agree with each other: every samples file holds the spans its manifest
lists (each once; all of them once extraction finished), each sample agrees with itself (its
votes are what its judge calls answered, its derived fields follow from the rest), and a
results file is of this run, its samples and their span counts. A run folder is input (it may
have been edited, cut short or handed over), so `load` and `view` check it before anything
reads it further, and a run whose parts disagree is refused in one line naming the file and
the mismatch, before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import span_list
from finreflect_eval.protocol.criteria import TRIPLE_CRITERIA
from finreflect_eval.records import Manifest, ModelCall, Results, SampleRecord, Vote
from finreflect_eval.records.lm_eval import first_mismatch
from finreflect_eval.records.samples import (
    FAILED_CALL_VOTE,
    NO_TRIPLES_VOTE,
    UNGROUNDED_VOTE,
    answer_fields,
)

_REFUSED = "refused, nothing written: the run folder's parts disagree"


def span_problem(
    manifest: Manifest, task: str, doc_ids: Sequence[int], span_ids: Sequence[str]
) -> str | None:
    """What is wrong with a task's spans as its samples hold them (`doc_ids` and `span_ids`,
    in any order), against its manifest; None when nothing is. A run still extracting may lack
    spans (it resumes), never hold one twice or one outside its list."""
    info = manifest.tasks[task]
    by_doc: dict[int, str] = {}
    for doc_id, span_id in zip(doc_ids, span_ids, strict=True):
        if doc_id in by_doc:
            return f"span doc_id {doc_id} ({span_id}) is in it twice"
        by_doc[doc_id] = span_id
    expected = _expected_doc_ids(manifest, task)
    outside = sorted(set(by_doc) - expected)
    if outside:
        return f"doc_id {outside[0]} ({by_doc[outside[0]]}) is not a span of its span list"
    if manifest.status == "extracting":
        return None
    missing = sorted(expected - set(by_doc))
    if missing:
        return (
            f"it holds {len(by_doc)} of the {len(expected)} spans the manifest lists (doc_id "
            f"{missing[0]} is missing), though the run finished extracting"
        )
    if manifest.shard is None:
        listed = span_list([by_doc[doc_id] for doc_id in sorted(by_doc)])
        if listed["sha256"] != info.span_list.sha256:
            return "its span ids are not those the manifest lists (the span list's sha256 differs)"
    return None


def _expected_doc_ids(manifest: Manifest, task: str) -> set[int]:
    """The doc_ids of a task's spans in this run: all of its span list, or a shard's part."""
    every = range(manifest.tasks[task].span_list.count)
    shard = manifest.shard
    return set(every if shard is None else every[shard.index :: shard.count])


def check_spans(
    manifest: Manifest, samples: Path, task: str, doc_ids: Sequence[int], span_ids: Sequence[str]
) -> None:
    """`span_problem` as a one-line error naming the samples file."""
    problem = span_problem(manifest, task, doc_ids, span_ids)
    if problem:
        raise FinReflectError(f"{samples}: {problem}; {_REFUSED}")


def results_problem(
    results: Results, manifest: Manifest, span_counts: Mapping[str, int]
) -> str | None:
    """What is wrong with a results file against its run: another run's, other samples files,
    or other span counts than the samples hold (`span_counts`, per task); None when nothing
    is."""
    if results.run != manifest.run:
        return f"results of run {results.run}, not of {manifest.run}"
    for task in results.details:
        if task not in manifest.tasks:
            return f"task {task} is not a task of run {manifest.run}"
        samples = manifest.tasks[task].samples
        if results.samples.get(task) != samples:
            return f"task {task}: samples {results.samples.get(task)}, not {samples}"
        scored = results.results.get(task, {}).get("sample_len")
        if task in span_counts and scored != span_counts[task]:
            return (
                f"task {task}: scored {scored} spans, but its samples hold {span_counts[task]} "
                f"(rescore with `finreflect-eval score`)"
            )
    return None


def check_results(
    path: Path, results: Results, manifest: Manifest, span_counts: Mapping[str, int]
) -> None:
    """`results_problem` as a one-line error naming the results file."""
    problem = results_problem(results, manifest, span_counts)
    if problem:
        raise FinReflectError(f"{path}: {problem}; {_REFUSED}")


def sample_problem(record: SampleRecord) -> str | None:
    """What is wrong with one sample against itself, None when nothing is: first its votes
    (`vote_problem`), then the fields derived from the rest (lm-eval's hashes and the per-sample
    metrics, `records.lm_eval.first_mismatch`)."""
    problem = vote_problem(record)
    if problem:
        return problem
    field = first_mismatch(record)
    if field:
        return f"{field} is not what the sample's other fields give (edited samples?)"
    return None


def check_samples(
    samples: Path | str, task: str, records: Iterable[SampleRecord]
) -> Iterator[SampleRecord]:
    """The records, each checked as it passes (`sample_problem`); the first that disagrees with
    itself is a one-line error naming the samples file, the task and the span."""
    for record in records:
        problem = sample_problem(record)
        if problem:
            raise FinReflectError(
                f"{samples}: task {task}, span {record.span_id}: {problem}; refused, nothing "
                "written: a sample must hold together as the run wrote it"
            )
        yield record


def vote_problem(record: SampleRecord) -> str | None:
    """Every vote of the sample is what its judge's recorded call answered (the call's text, as
    the judge stage read it: `answer_fields`; an abstention on each item where the call failed),
    or what a rule gives without a call (`NO_TRIPLES_VOTE` on a span without triples, the
    grounding cascade's `UNGROUNDED_VOTE` on a triple it did not send); every call has its
    votes. Each call's text is parsed once, and votes are compared as their fields: linear in
    the votes, and cheap (a run of 480k triples has some 4.5M votes)."""
    for panel, by_criterion in record.votes.items():
        calls: dict[tuple[str, str | None], ModelCall] = {}
        for call in record.judge_calls.get(panel, []):
            key = (call.step.removeprefix("judge:"), call.model)
            if not call.step.startswith("judge:") or key in calls:
                return f"panel {panel}: judge calls are not one per judge and criterion"
            calls[key] = call
        for criterion, by_judge in by_criterion.items():
            for judge, cast in by_judge.items():
                call = calls.pop((criterion, judge), None)
                problem = _cast_problem(record, criterion, cast, call)
                if problem:
                    return f"panel {panel}, {criterion} ({judge}): {problem}"
        if calls:
            criterion, judge = next(iter(calls))
            return f"panel {panel}, {criterion} ({judge}): a judge call without its votes"
    unvoted = [panel for panel, calls in record.judge_calls.items() if calls]
    unvoted = [panel for panel in unvoted if panel not in record.votes]
    return f"panel {unvoted[0]}: judge calls without votes" if unvoted else None


def _cast_problem(
    record: SampleRecord, criterion: str, cast: list[Vote], call: ModelCall | None
) -> str | None:
    """What is wrong with one judge's votes on one criterion of a span, against its call."""
    per_triple = criterion in TRIPLE_CRITERIA
    items = len(record.triples) if per_triple else 1
    if len(cast) != items:
        return f"{len(cast)} votes on {items} item(s)"
    rule = UNGROUNDED_VOTE if per_triple else NO_TRIPLES_VOTE  # (no triples: no call at all)
    ruled = [vote for vote in cast if vote.synthetic]
    if any(vote != rule for vote in ruled) or (ruled and not per_triple and record.triples):
        return "a vote marked as given by rule is not what the rule gives"
    judged = [index for index, vote in enumerate(cast) if not vote.synthetic]
    if call is None:
        return "votes without the judge call that cast them" if judged else None
    if not judged:
        return "a judge call, but every vote marked as given by rule"
    answered = _answered(criterion, call, len(judged))
    if answered is None:
        return "its judge call's recorded text is not a valid answer, yet it has votes"
    if len(answered) != len(judged):
        return f"{len(judged)} votes from its judge call, which answered {len(answered)}"
    given = [vars(cast[index]) for index in judged]  # (its fields, as `Vote.__eq__` compares)
    if given == answered:
        return None
    first = next(n for n, fields in enumerate(given) if fields != answered[n])
    return f"vote {judged[first] + 1} is not what its judge call answered (edited votes?)"


def _answered(criterion: str, call: ModelCall, asked: int) -> list[dict[str, Any]] | None:
    """The fields of the votes a judge call gives: its text's, or an abstention's on each of
    the `asked` items where it failed; None where its text is no valid answer."""
    if call.error is not None:
        return [vars(FAILED_CALL_VOTE)] * asked
    try:
        return answer_fields(criterion, from_json(call.text or ""))
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
