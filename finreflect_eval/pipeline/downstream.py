"""The downstream stage: for each task with a `downstream` section, its questions measured
against the graph the run's triples make (`downstream.graph`), answered by the fixed QA model in
three conditions and the answers scored (`downstream.qa`), written per task and panel as
`downstream_<task>_<run>_<panel>.json`. Every model call goes through the response cache (when
the run has one): a rerun makes none, a killed one asks only what it had not; a rerun keeps the
file's questions already answered and scored the same way."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.chunking import TokenCounter, token_counter
from finreflect_eval.data import load_benchmark, questions_within
from finreflect_eval.downstream import graph as measures
from finreflect_eval.downstream.qa import (
    QAConfig,
    answer_request,
    contexts,
    judge_request,
    load_qa,
    needs_judges,
    number_score,
    panel_score,
    vote_of,
)
from finreflect_eval.models import GenerationResult, load_model
from finreflect_eval.pipeline.judging import Panel, run_judges
from finreflect_eval.records import Usage
from finreflect_eval.records.downstream import (
    CONDITIONS,
    Answer,
    DownstreamFile,
    Question,
    QuestionRecord,
)
from finreflect_eval.runs.store import Run
from finreflect_eval.scoring.cost import total_usage
from finreflect_eval.tasks.config import Task

logger = logging.getLogger(__name__)


def questions_of(run: Run, task: str) -> list[Question]:
    """The task's questions whose every hop chunk the run extracted from, read again from its
    data at the version the run recorded."""
    info = run.manifest.tasks[task].dataset
    benchmark = load_benchmark(
        info.id, split=info.split, revision=info.revision, config=info.config
    )
    if not benchmark.questions:
        raise FinReflectError(
            f"task {task}: its data ({info.id}) has no multi-hop questions (rows with question, "
            "answer and hops), but the task has a downstream section"
        )
    if benchmark.fingerprint != info.fingerprint:
        raise FinReflectError(
            f"task {task}: its data ({info.id}) is not what the run extracted from (fingerprint "
            f"{benchmark.fingerprint}, the run's {info.fingerprint}): was it changed since?"
        )
    return questions_within(benchmark.questions, run.records[task])


def run_downstream(
    run: Run,
    panel: Panel,
    tasks: Mapping[str, Task],
    *,
    cache_path: Path | None,
    qa_name: str | None = None,
) -> dict[str, DownstreamFile]:
    """Measure, answer and score every downstream task's questions; write and return the
    files. `panel` scores the qualitative answers; `tasks`: the run's tasks by name;
    `qa_name`: a QA model in place of the tasks' own. A question the panel's file already
    holds, measured and answered alike, is kept as it is (a rerun asks nothing)."""
    chosen = {n: t for n, t in tasks.items() if n in run.manifest.tasks and t.config.downstream}
    if not chosen:
        return {}
    names = {qa_name or t.config.downstream.qa for t in chosen.values()}
    if len(names) > 1:
        raise FinReflectError(
            f"the tasks name different QA models ({', '.join(sorted(names))}): choose one with --qa"
        )
    qa = load_qa(names.pop())
    count_tokens = token_counter()
    files = {name: measured(run, name, task, panel.panel, qa) for name, task in chosen.items()}
    done = run.store.downstream(run.manifest, panel.panel)
    chunks = {r.span_id: r.text for name in files for r in run.records[name]}
    asked = []
    for name, file in files.items():
        kept = _answered(done.get(name), file)
        for record in file.questions:
            if record.question.question_id in kept:
                record.answers = kept[record.question.question_id]
                continue
            for condition, context in contexts(record.question, record.subgraph, chunks).items():
                asked.append((record, condition, context))
    if asked:
        _answer(asked, qa, panel, cache_path, count_tokens)
    for file in files.values():
        run.store.write_downstream(run.manifest, file)
    return files


def measured(run: Run, name: str, task: Task, panel: str, qa: QAConfig) -> DownstreamFile:
    """The task's questions measured against the run's graph, not yet answered."""
    graph = measures.ModelGraph.of_records(run.records[name])
    spec = task.config.downstream
    count_tokens = token_counter()
    return DownstreamFile(
        task=name,
        panel=panel,
        qa=qa.settings(),
        max_hops=spec.max_hops,
        questions=[
            measures.measure(q, name, graph, spec.max_hops, qa, count_tokens)
            for q in questions_of(run, name)
        ],
    )


def _answered(previous: DownstreamFile | None, file: DownstreamFile) -> dict[str, dict]:
    """The answers of `previous` (the file a run wrote before) still good for `file`: same QA
    settings and k, the question measured the same, every condition answered and scored (an
    answer that failed, or that the judges could not score, is asked again)."""
    if previous is None or (previous.qa, previous.max_hops) != (file.qa, file.max_hops):
        return {}
    now = {record.question.question_id: record for record in file.questions}
    kept = {}
    for record in previous.questions:
        same = now.get(record.question.question_id)
        answers = record.answers.values()
        scored = all(a.answer is not None and a.score is not None for a in answers)
        if same is not None and record.answers.keys() == set(CONDITIONS) and scored:
            parts = ("question", "evidence", "path", "subgraph")
            if all(getattr(record, p) == getattr(same, p) for p in parts):
                kept[record.question.question_id] = record.answers
    return kept


def _answer(
    asked: list[tuple[QuestionRecord, str, dict]],
    qa: QAConfig,
    panel: Panel,
    cache_path: Path | None,
    count_tokens: TokenCounter,
) -> None:
    """The QA model's answers to `asked` (record, condition, context), then the panel's
    scores of those the judges score; set in each record's `answers`."""
    with load_model(qa.model_spec, cache_path=cache_path) as lm:
        answers = lm.generate(
            [answer_request(qa, record.question, context) for record, _, context in asked],
            desc=f"QA {qa.name}",
        )
    judged = [
        (record.question, result.parsed["answer"])
        for (record, _, _), result in zip(asked, answers, strict=True)
        if result.ok and needs_judges(record.question)
    ]

    def work(spec: Any, lm: Any) -> list[GenerationResult]:
        generation = panel.generation(spec)
        requests = [judge_request(qa, q, a, generation, spec.system_prefix) for q, a in judged]
        return lm.generate(requests, desc=f"judge {spec.name} (QA)") if requests else []

    by_judge = run_judges(panel, cache_path, work) if judged else {}
    position = 0
    for (record, condition, context), result in zip(asked, answers, strict=True):
        votes, calls = [], []
        if result.ok and needs_judges(record.question):
            votes = [vote_of(judge, results[position]) for judge, results in by_judge.items()]
            calls = [results[position] for results in by_judge.values()]
            position += 1
        record.answers[condition] = scored_answer(
            record.question, result, votes, count_tokens(context_text(context))
        ).model_copy(update={"judge_usage": usage_of(calls)})


def context_text(context: Mapping[str, Sequence[str]]) -> str:
    return "\n".join([*context["triples"], *context["chunks"]])


def scored_answer(
    question: Question,
    result: GenerationResult,
    votes: list,
    context_tokens: int,
) -> Answer:
    """The answer with its score: the judges' median (`votes`), else its numbers'."""
    usage = usage_of([result])
    if not result.ok:
        method = "judges" if needs_judges(question) else "numbers"
        return Answer(
            context_tokens=context_tokens,
            answer=None,
            error=result.error,
            method=method,
            usage=usage,
        )
    text = result.parsed["answer"]
    if votes:
        return Answer(
            context_tokens=context_tokens,
            answer=text,
            method="judges",
            votes=votes,
            score=panel_score(votes),
            usage=usage,
        )
    expected, found, score = number_score(question.answer, text)
    return Answer(
        context_tokens=context_tokens,
        answer=text,
        method="numbers",
        numbers_expected=expected,
        numbers_found=found,
        score=score,
        usage=usage,
    )


def usage_of(results: Sequence[GenerationResult]) -> Usage:
    """What these calls used, as the cost block counts it (a cache hit: nothing but its tokens
    as first counted)."""
    return total_usage(_usage(result) for result in results) if results else Usage()


def _usage(result: GenerationResult) -> Usage:
    if result.cached:
        tokens = result.prompt_tokens + result.completion_tokens
        return Usage(cache_hits=1, cache_hit_tokens=tokens, seconds=0.0)
    return Usage(
        calls=1,
        prompt_tokens=result.prompt_tokens,
        cached_prompt_tokens=result.cached_prompt_tokens,
        completion_tokens=result.completion_tokens,
        reasoning_tokens=result.reasoning_tokens,
        seconds=result.seconds,
        device_seconds=result.device_seconds,
    )
