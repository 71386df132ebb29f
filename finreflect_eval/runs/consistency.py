"""A run folder's parts agree with each other: every samples file holds the spans its manifest
lists (each once; all of them once extraction finished), and a results file is of this run, its
samples and their span counts. A run folder is input (it may have been edited, cut short or
handed over), so `load` and `view` check it before anything reads it further, and a finished
run whose parts disagree is refused in one line naming the file and the mismatch, before
anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import span_list
from finreflect_eval.records import Manifest, Results

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
