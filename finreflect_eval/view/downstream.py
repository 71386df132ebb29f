"""The report's Downstream tab: per task with a downstream file (`downstream_<task>_<run>_<panel>
.json`, the panel shown), the results' `downstream` measures with their intervals, and its
multi-hop questions a page at a time, which `report-downstream.js` shows from data scripts
(`data/<task>/questions-<run>-<n>.js`, calling `FRV.questions(task, run, n, questions)`).

A question shows its text, the gold answer, each condition's answer with its score and votes,
its gold hops in words (whether the model's triples of the hop's chunk hold it: `evidence`),
whether its start and end are connected in the model's graph (`path`), and two drawings made
by the Graph tab's code (`graph.filing_drawing`, drawn by `report-graph.js`): the gold path,
each hop marked found or missing from the model's triples, and beside it the subgraph the QA
model was shown, its triples that are a gold hop marked. The file is read as it is: scoring
checked it against the samples; the report only shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from finreflect_eval.downstream.graph import relation_key
from finreflect_eval.graph.normalise import entity_key, filer_aliases
from finreflect_eval.records.downstream import (
    CONDITIONS,
    Answer,
    DownstreamFile,
    QuestionRecord,
)
from finreflect_eval.view.graph import GraphParts, filing_drawing
from finreflect_eval.view.source import ViewRun
from finreflect_eval.view.spans import dumps

QUESTIONS_PER_PAGE = 20
# A link's kind in a question's drawings (the last item of a link; report-graph.js styles it).
ON_PATH = 1  # a gold hop the model's triples hold (in the subgraph: a triple that is one)
MISSING = 2  # a gold hop missing from the model's triples
OTHER_RELATION = 3  # missing, though the chunk's triples link its head and tail otherwise

MEASURES = (
    (
        "evidence_recall",
        "evidence recall",
        "gold hops whose chunk's triples hold the hop: head, relation and tail",
    ),
    (
        "evidence_recall_entities",
        "evidence recall, entities",
        "gold hops whose chunk's triples link the head and tail, whatever the relation",
    ),
    (
        "path_connected",
        "path connected",
        "questions whose start and end are connected in the model's graph (within k edges)",
    ),
)
CONDITIONS_SHOWN = {  # the QA measure of each condition: its label and what it answers from
    "model_graph": ("QA: model's graph", "the subgraph retrieved from the model's triples"),
    "gold_path": ("QA: gold path", "the gold path's triples and their chunks (the ceiling)"),
    "hop_chunks": ("QA: hop chunks", "the hop chunks alone, as text"),
}


def task_downstreams(
    data: Path, runs: list[ViewRun], tasks: list[str]
) -> list[list[dict[str, Any]]]:
    """Per run, what its Downstream tab shows of each task with a downstream file (in the
    order of `tasks`), its questions' pages written into `data/<task>/`."""
    shown: list[list[dict[str, Any]]] = []
    for number, run in enumerate(runs):
        contexts = []
        for task in tasks:
            file = run.downstream.get(task)
            if file is not None:
                contexts.append(downstream_context(data / task, run, file, number))
        shown.append(contexts)
    return shown


def downstream_context(
    folder: Path, run: ViewRun, file: DownstreamFile, run_number: int
) -> dict[str, Any]:
    """A task's measures (the results' block; None where the results have none) and its
    questions, written a page at a time into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    questions = [question_json(record) for record in file.questions]
    pages = [
        questions[start : start + QUESTIONS_PER_PAGE]
        for start in range(0, len(questions), QUESTIONS_PER_PAGE)
    ]
    for number, page in enumerate(pages):
        head = f"FRV.questions({dumps(file.task)},{run_number},{number},"
        text = head + "[\n" + ",\n".join(dumps(q) for q in page) + "\n]);\n"
        (folder / f"questions-{run_number}-{number}.js").write_text(text, encoding="utf-8")
    block = run.results.downstream.get(file.task)
    measures = []
    if block is not None:
        measures = [(key, label, getattr(block, key), text) for key, label, text in MEASURES]
        measures += [
            (f"qa_{condition}", label, block.qa[condition], text)
            for condition, (label, text) in CONDITIONS_SHOWN.items()
            if condition in block.qa
        ]
    return {
        "name": file.task,
        "run": run_number,
        "mode": run.results.details[file.task].mode if file.task in run.results.details else "",
        "block": block,
        "measures": measures,
        "qa": file.qa,
        "max_hops": file.max_hops,
        "questions": len(questions),
        "pages": len(pages),
        "per_page": QUESTIONS_PER_PAGE,
    }


def question_json(record: QuestionRecord) -> dict[str, Any]:
    """A question as its page holds it: what report-downstream.js shows, texts as they are."""
    question = record.question
    states = [_state(match.edge, match.entities) for match in record.evidence]
    return {
        "id": question.question_id,
        "question": question.question,
        "answer": question.answer,
        "kind": question.kind,
        "filing": question.filing,
        "start": question.start,
        "end": question.end,
        "hops": [
            {
                "head": hop.head,
                "relation": hop.relation,
                "tail": hop.tail,
                "span": hop.span_id,
                "state": state,
            }
            for hop, state in zip(question.hops, states, strict=False)
        ],
        "path": record.path.model_dump(mode="json"),
        "subgraph": len(record.subgraph),
        "answers": [
            _answer_json(condition, record.answers[condition])
            for condition in CONDITIONS
            if condition in record.answers
        ],
        "gold": gold_drawing(record, states),
        "model": subgraph_drawing(record),
    }


def _state(edge: bool, entities: bool) -> int:
    return ON_PATH if edge else OTHER_RELATION if entities else MISSING


def _answer_json(condition: str, answer: Answer) -> dict[str, Any]:
    return {
        "condition": condition,
        "answer": answer.answer,
        "error": answer.error,
        "score": answer.score,
        "method": answer.method,
        "votes": [[v.judge, v.score, v.reasoning, v.warning] for v in answer.votes],
        "expected": answer.numbers_expected,
        "found": answer.numbers_found,
    }


def _aliases(record: QuestionRecord) -> dict[str, str]:
    """The filers of the question's hops, each one entity with its ticker's key."""
    aliases: dict[str, str] = {}
    for hop in record.question.hops:
        aliases |= filer_aliases(hop.ticker, None)
    return aliases


def gold_drawing(record: QuestionRecord, states: list[int]) -> dict[str, Any]:
    """The gold path's drawing: a link per hop, of its kind (ON_PATH, MISSING or
    OTHER_RELATION; a hop without evidence is missing)."""
    aliases = _aliases(record)
    parts = GraphParts()
    marked: dict[tuple[str, str, str], int] = {}
    for number, hop in enumerate(record.question.hops):
        edge = parts.add(
            (entity_key(hop.head, aliases), hop.head, hop.head_type),
            hop.relation,
            (entity_key(hop.tail, aliases), hop.tail, hop.tail_type),
        )
        state = states[number] if number < len(states) else MISSING
        marked[edge] = max(marked.get(edge, 0), state)  # missing outweighs found
    return filing_drawing("the gold path", parts, (), marked)


def subgraph_drawing(record: QuestionRecord) -> dict[str, Any]:
    """The drawing of the subgraph the QA model was shown, its triples that are a gold hop
    (entities by `graph.normalise` keys, relations case- and separator-blind) ON_PATH."""
    aliases = _aliases(record)
    gold = {
        (entity_key(hop.head, aliases), relation_key(hop.relation), entity_key(hop.tail, aliases))
        for hop in record.question.hops
    }
    parts = GraphParts()
    marked: dict[tuple[str, str, str], int] = {}
    for triple in record.subgraph:
        subject, obj = entity_key(triple.subject, aliases), entity_key(triple.object, aliases)
        edge = parts.add(
            (subject, triple.subject, None), triple.relation, (obj, triple.object, None)
        )
        if (subject, relation_key(triple.relation), obj) in gold:
            marked[edge] = ON_PATH
    return filing_drawing("the model's subgraph", parts, (), marked)
