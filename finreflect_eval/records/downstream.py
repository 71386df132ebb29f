"""The downstream multi-hop QA track's files: a question with its gold KG path (`Question`), what
a run made of it (`QuestionRecord`, in `downstream_<task>_<run>_<panel>.json`: a
`DownstreamFile`), and the results' `downstream` block (`DownstreamScores`, per task)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from finreflect_eval.records.base import FileRecord, Percent, Record
from finreflect_eval.records.cost import Usage

QuestionKind = Literal["quantitative", "qualitative"]
Condition = Literal["model_graph", "gold_path", "hop_chunks"]
CONDITIONS: tuple[Condition, ...] = ("model_graph", "gold_path", "hop_chunks")


class GoldHop(Record):
    """One edge of a question's gold path, read head -relation-> tail, and the chunk it is in."""

    span_id: str
    filing: str
    """`<ticker>_<year>` of the chunk's filing."""
    ticker: str
    head: str
    head_type: str = ""
    relation: str
    tail: str
    tail_type: str = ""


class Question(Record):
    """A multi-hop question, its gold answer and its gold path."""

    question_id: str
    question: str
    answer: str
    kind: QuestionKind
    """Quantitative answers are scored by their numbers, qualitative ones by the judges."""
    start: str
    """The entity the path starts from."""
    end: str
    """The entity the path ends at; where it is the start (a company against itself), the
    entity the hops meet at."""
    hops: list[GoldHop] = Field(min_length=1)
    origin: dict[str, Any] = {}
    """Where the question came from (repository, file, id), as the data gives it."""

    @property
    def filing(self) -> str:
        """The filing the question is counted under in intervals: its first hop's."""
        return self.hops[0].filing


class HopMatch(Record):
    """Whether the model's triples of a hop's chunk hold the hop."""

    edge: bool
    """A triple with the hop's head, relation and tail (keys as `graph.normalise` makes them)."""
    entities: bool
    """A triple with the hop's head and tail, whatever its relation."""


class PathFound(Record):
    """The question's start and end in the model's graph (all the task's filings together)."""

    connected: bool
    length: int | None
    """Edges on the shortest path (direction ignored); None where none within `max_hops`."""
    nodes: list[str]
    """The entity keys along it."""


class ContextTriple(Record):
    """A triple of the model's graph as the QA model was shown it."""

    subject: str
    relation: str
    object: str
    span_id: str


class QAVote(Record):
    """One judge's correctness score of an answer (MultiHop's rubric, 0-10)."""

    judge: str
    score: int | None = Field(None, ge=0, le=10)
    """None: the call failed (an abstention)."""
    reasoning: str = ""
    warning: str = ""


class Answer(Record):
    """The QA model's answer under one condition, and its score."""

    context_tokens: int
    """The context's length, in the task's token counter."""
    answer: str | None
    error: str | None = None
    """Why there is no answer (an invalid output after retries)."""
    method: Literal["judges", "numbers"]
    votes: list[QAVote] = []
    numbers_expected: list[str] = []
    numbers_found: list[str] = []
    score: float | None = Field(None, ge=0, le=10)
    """0-10: the judges' median (two valid votes or more), or the share of the gold answer's
    numbers found in the answer; None where unscored."""
    usage: Usage = Usage()
    """The QA model's call."""
    judge_usage: Usage = Usage()
    """The judges' calls about this answer."""


class QuestionRecord(Record):
    """A question, and what the run's graph and QA model made of it."""

    task: str
    question: Question
    evidence: list[HopMatch]
    """Per gold hop, in order."""
    path: PathFound
    subgraph: list[ContextTriple]
    """The triples of the model's graph retrieved for the question, in the order shown."""
    answers: dict[Condition, Answer] = {}


class Measure(Record):
    """A mean over questions (percent) with its filing-clustered interval."""

    value: Percent
    ci: list[float] | None
    stderr: float | None
    n: int
    """Questions it is over."""


class QASettings(Record):
    """The fixed QA model and how it was asked."""

    name: str
    model: str
    backend: str
    model_args: dict[str, Any] = {}
    prompt_sha: str
    """The sha256 of the answering and the judging prompts' templates."""
    budget_tokens: int = Field(ge=16, le=32768)
    neighbourhood_hops: int = Field(ge=1, le=3)
    generation_kwargs: dict[str, Any] = {}
    """The QA model's sampling settings."""


class DownstreamScores(Record):
    """A task's downstream measures (`results["downstream"][task]`)."""

    questions: int
    filings: int
    max_hops: int
    """The path connectivity's k: start and end within this many edges."""
    evidence_recall: Measure
    """Gold hops whose chunk's triples hold the hop (head, relation, tail)."""
    evidence_recall_entities: Measure
    """Gold hops whose chunk's triples hold its head and tail (any relation)."""
    path_connected: Measure
    """Questions whose start and end are connected within `max_hops` in the model's graph."""
    qa: dict[Condition, Measure]
    """Mean answer score (0-10 as a percent) per condition: the model's graph, the gold path
    (its triples and chunks: MultiHop's E1), the hop chunks alone."""
    qa_settings: QASettings
    qa_usage: Usage
    judge_usage: Usage


class DownstreamFile(FileRecord):
    """`downstream_<task>_<run>_<panel>.json`: a task's questions as the run measured and
    answered them, scored with a panel."""

    task: str
    panel: str
    qa: QASettings
    max_hops: int = Field(ge=1, le=3)
    questions: list[QuestionRecord]
