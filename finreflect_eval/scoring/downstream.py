"""The results' `downstream` block: per downstream task, its questions' measures (evidence-edge
recall, path connectivity, KG-QA scores per condition) averaged with filing-clustered
intervals. The downstream file is input: what it says the graph holds is measured again from
the samples' triples, and every answer's score from its votes or numbers; a file that does not
follow from them is refused in one line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.chunking import token_counter
from finreflect_eval.downstream.graph import ModelGraph, measure
from finreflect_eval.downstream.qa import needs_judges, number_score, panel_score
from finreflect_eval.records import Manifest
from finreflect_eval.records.downstream import (
    CONDITIONS,
    Answer,
    DownstreamFile,
    DownstreamScores,
    Measure,
    Question,
    QuestionRecord,
)
from finreflect_eval.scoring.cost import total_usage
from finreflect_eval.scoring.graph import triple_table
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.stats import uncertainty
from finreflect_eval.stats.averages import pct


def downstream_block(
    manifest: Manifest,
    span_facts: Mapping[str, SpanFacts],
    files: Mapping[str, DownstreamFile],
    *,
    seed: int,
    iterations: int,
) -> dict[str, DownstreamScores]:
    """Per task with a downstream file, its scores (each file checked first against the
    samples: `check_questions`, `check_file`)."""
    block = {}
    for task, file in files.items():
        if task not in span_facts:
            raise FinReflectError(f"downstream file of task {task}: the run has no such task")
        facts = span_facts[task]
        data = manifest.tasks[task].dataset
        chosen = data.limit or data.sections or data.samples or manifest.shard
        check_questions(file, triple_table(task, facts, "reference"), complete=not chosen)
        judges = [member.name for member in manifest.judging[file.panel].judges]
        check_file(file, ModelGraph(triple_table(task, facts)), judges)
        block[task] = scores_of(file, seed=seed, iterations=iterations)
    return block


def check_questions(file: DownstreamFile, reference: pa.Table, *, complete: bool) -> None:
    """Refuse a file whose questions are not the run's data's: every gold hop must be a
    reference triple of its span in the samples (the data's, as extraction read it), and, in
    a run of every span (`complete`: no --limit, --sections, --samples or shard, which may cut
    a question's chunks apart), every reference triple the hop of a question there (one left
    out is a question taken away)."""
    where = f"downstream file of task {file.task}"
    rows = reference.select(["span_id", "subject", "relation", "object"]).to_pylist()
    held = {tuple(row.values()) for row in rows}
    asked = set()
    for record in file.questions:
        for hop in record.question.hops:
            edge = (hop.span_id, hop.head, hop.relation, hop.tail)
            if edge not in held:
                raise FinReflectError(
                    f"{where}, question {record.question.question_id}: its hop {hop.head} "
                    f"-[{hop.relation}]-> {hop.tail} is not a reference triple of span "
                    f"{hop.span_id} in the samples"
                )
            asked.add(edge)
    left = sorted(held - asked)
    if left and complete:
        raise FinReflectError(
            f"{where}: the samples' reference triple {left[0][1]} -[{left[0][2]}]-> "
            f"{left[0][3]} ({left[0][0]}) is the hop of no question in it: a question is missing"
        )


def check_file(file: DownstreamFile, graph: ModelGraph, judges: Sequence[str]) -> None:
    """Refuse a downstream file whose measures or answer scores do not follow from the
    samples' triples and its own votes: every condition answered, each answer scored the way
    its question is (by the `judges`, each voting once, or by its numbers)."""
    count_tokens = token_counter()
    where = f"downstream file of task {file.task}"
    seen: set[str] = set()
    for record in file.questions:
        question = record.question
        if question.question_id in seen:
            raise FinReflectError(f"{where}: question {question.question_id} is there twice")
        seen.add(question.question_id)
        # A submission carries no subgraphs (`leaderboard.verify.without_subgraphs`).
        shown = bool(record.subgraph)
        again = measure(question, file.task, graph, file.max_hops, file.qa, count_tokens, shown)
        for part in ("evidence", "path", "subgraph"):
            if getattr(again, part) != getattr(record, part):
                raise FinReflectError(
                    f"{where}, question {question.question_id}: its {part} does not follow "
                    "from the samples' triples"
                )
        if record.answers.keys() != set(CONDITIONS):
            raise FinReflectError(
                f"{where}, question {question.question_id}: it is not answered in every "
                f"condition ({', '.join(CONDITIONS)})"
            )
        for condition, answer in record.answers.items():
            problem = _method_problem(question, answer, judges)
            if problem:
                raise FinReflectError(
                    f"{where}, question {question.question_id}, {condition}: {problem}"
                )
            if answer.score != answer_score(record, answer):
                raise FinReflectError(
                    f"{where}, question {question.question_id}, {condition}: its score "
                    f"{answer.score} does not follow from its "
                    + ("votes" if answer.method == "judges" else "numbers")
                )


def _method_problem(question: Question, answer: Answer, judges: Sequence[str]) -> str | None:
    method = "judges" if needs_judges(question) else "numbers"
    if answer.method != method:
        return f"scored by {answer.method}, but a {question.kind} question is scored by {method}"
    voters = [vote.judge for vote in answer.votes]
    if method == "judges" and answer.answer is not None and voters != list(judges):
        return f"its votes are {voters or 'none'}, not one of each of the panel's {list(judges)}"
    if method == "numbers" and voters:
        return "it is scored by its numbers, but has judges' votes"
    return None


def answer_score(record: QuestionRecord, answer: Answer) -> float | None:
    if answer.answer is None:
        return None
    if answer.method == "judges":
        return panel_score(answer.votes)
    return number_score(record.question.answer, answer.answer)[2]


def scores_of(file: DownstreamFile, *, seed: int, iterations: int) -> DownstreamScores:
    records = file.questions
    filings, units = uncertainty.units_of([r.question.filing for r in records])

    def mean(values: Sequence[float | None]) -> Measure:
        return clustered_mean(units, len(filings), values, seed=seed, iterations=iterations)

    qa = {}
    for condition in CONDITIONS:
        answers = [r.answers.get(condition) for r in records]
        if any(answers):
            qa[condition] = mean([_tenths(a) for a in answers])
    return DownstreamScores(
        questions=len(records),
        filings=len(filings),
        max_hops=file.max_hops,
        evidence_recall=mean([_share([h.edge for h in r.evidence]) for r in records]),
        evidence_recall_entities=mean([_share([h.entities for h in r.evidence]) for r in records]),
        path_connected=mean([float(r.path.connected) for r in records]),
        qa=qa,
        qa_settings=file.qa,
        qa_usage=total_usage(a.usage for r in records for a in r.answers.values()),
        judge_usage=total_usage(a.judge_usage for r in records for a in r.answers.values()),
    )


def clustered_mean(
    units: np.ndarray,
    n_units: int,
    values: Sequence[float | None],
    *,
    seed: int,
    iterations: int,
) -> Measure:
    """The mean of the defined values (0-1) as a percent, with its studentized interval
    resampling filings (`uncertainty.studentized_interval`)."""
    defined = np.array([v is not None for v in values], dtype=bool)
    numbers = np.array([0.0 if v is None else float(v) for v in values])
    sums = uncertainty.unit_sums(units[defined], numbers[defined], n_units)[:, None]
    counts = np.bincount(units[defined], minlength=n_units).astype(float)[:, None]
    resampling = uncertainty.Resampling(n_units, seed, iterations)
    estimate, ci, stderr = uncertainty.studentized_interval(sums, counts, resampling)
    if ci is not None:
        ci = [max(0.0, pct(ci[0])), min(100.0, pct(ci[1]))]
    return Measure(value=pct(estimate), ci=ci, stderr=pct(stderr), n=int(defined.sum()))


def _tenths(answer: Answer | None) -> float | None:
    return None if answer is None or answer.score is None else answer.score / 10


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags)
