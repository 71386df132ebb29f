"""KG-QA: a fixed QA model (`tasks/qa/<name>.yaml`: model, backend, prompts, token budget)
answers each question from a context, and the answer is scored: by the judge panel on
FinReflectKG-MultiHop's correctness rubric (0-10, the score committed before its reasoning), or,
for a quantitative question, by the gold answer's numbers found in it."""

from __future__ import annotations

import hashlib
import re
import statistics
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jinja2
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from finreflect_eval._util.errors import FinReflectError, first_invalid_field
from finreflect_eval._util.redaction import redact
from finreflect_eval._util.resources import load_yaml, tasks_dir
from finreflect_eval.downstream.graph import render_triple
from finreflect_eval.models import GenerationRequest, ModelSpec, check_spec
from finreflect_eval.records.downstream import (
    Condition,
    ContextTriple,
    QASettings,
    QAVote,
    Question,
)
from finreflect_eval.tasks.config import GenerationKwargs

ANSWER_CHARS = 1500
REASONING_CHARS = 160
WARNING_CHARS = 60
MAX_BUDGET = 32768  # tokens of graph one question is shown, at most
MIN_VOTES = 2  # as every panel score: an answer is scored on two valid votes or more


class AnswerOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str = Field(max_length=ANSWER_CHARS)


class CorrectnessVerdict(BaseModel):
    """Commit, then justify: the score first."""

    model_config = ConfigDict(extra="forbid")

    score: Literal[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    reasoning: str = Field(max_length=REASONING_CHARS)
    warning: str = Field(max_length=WARNING_CHARS)


class QAConfig(BaseModel):
    """A QA model file: the fixed model that answers from each context, and how."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    description: str = ""
    model: str
    backend: str = "hf"
    model_args: dict[str, Any] = {}
    prompt: str
    """The answering prompt's template (`system()` and `user()` macros)."""
    judge_prompt: str
    """The judges' correctness prompt's template."""
    budget_tokens: int = Field(1024, ge=16, le=MAX_BUDGET)
    """The most tokens of the model's graph's triples one question is shown."""
    neighbourhood_hops: int = Field(2, ge=1, le=3)
    """How far from the question's entities its subgraph reaches."""
    generation_kwargs: GenerationKwargs = GenerationKwargs(max_gen_toks=512)
    _source: Path | None = PrivateAttr(default=None)

    @property
    def model_spec(self) -> ModelSpec:
        return ModelSpec(self.model, self.backend, dict(self.model_args))

    def render(self, which: Literal["prompt", "judge_prompt"], **context: Any) -> tuple[str, str]:
        path = Path(getattr(self, which))
        try:
            template = _environment(str(path.parent)).get_template(path.name)
            module = template.make_module(context)
            return str(module.system()).strip(), str(module.user()).strip()
        except (jinja2.TemplateError, AttributeError, TypeError) as exc:
            raise FinReflectError(f"QA {which} template {path}: {exc}") from exc

    def settings(self) -> QASettings:
        """As the downstream file records it (secrets in the model args redacted)."""
        return QASettings(
            name=self.name,
            model=self.model,
            backend=self.backend,
            model_args=redact(self.model_args),
            prompt_sha=self.prompt_sha,
            budget_tokens=self.budget_tokens,
            neighbourhood_hops=self.neighbourhood_hops,
            generation_kwargs=self.generation_kwargs.model_dump(),
        )

    @property
    def prompt_sha(self) -> str:
        """The sha256 of the answering and the judging templates, in that order."""
        digest = hashlib.sha256()
        for path in (self.prompt, self.judge_prompt):
            digest.update(Path(path).read_bytes())
        return digest.hexdigest()


@cache
def _environment(folder: str) -> jinja2.Environment:
    """A template folder's environment (each template looked up in its own folder)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def load_qa(name_or_path: str | Path) -> QAConfig:
    """A bundled QA model file by name (`tasks/qa/<name>.yaml`) or a QA model YAML file;
    its templates are relative to the file."""
    path = Path(name_or_path)
    if not path.is_file():
        path = tasks_dir() / "qa" / f"{name_or_path}.yaml"
        if not path.is_file():
            bundled = sorted(p.stem for p in (tasks_dir() / "qa").glob("*.yaml"))
            raise FinReflectError(
                f"unknown QA model '{name_or_path}'; bundled: {', '.join(bundled)} (or give a "
                "QA model YAML file)"
            )
    raw = load_yaml(path, "QA model file")
    if not isinstance(raw, dict):
        raise FinReflectError(f"{path}: field '(top level)': expected a mapping")
    for field in ("prompt", "judge_prompt"):
        if isinstance(raw.get(field), str):
            raw[field] = str((path.parent / raw[field]).resolve())
            if not Path(raw[field]).is_file():
                raise FinReflectError(f"{path}: field '{field}': no such file {raw[field]}")
    try:
        config = QAConfig.model_validate(raw)
    except ValidationError as exc:
        raise FinReflectError(f"{path}: {first_invalid_field(exc)}") from None
    config._source = path
    return config


def validate_qa(task: Any) -> QAConfig | None:
    """A downstream task's QA model, checked as `tasks validate` and `run --check` do: the file
    loads, its model args pass `check_spec`, both templates render. Errors name the task file
    and the field; None for a task without a downstream section."""
    if task.config.downstream is None:
        return None
    where = f"{task.path}: field 'downstream.qa'"
    try:
        qa = load_qa(task.config.downstream.qa)
        check_spec(qa.model_spec)
        for which in ("prompt", "judge_prompt"):
            system, user = qa.render(
                which,
                question="Q?",
                gold_answer="A.",
                answer="A.",
                triples=["a -[r]-> b"],
                chunks=["Text."],
            )
            if not system or "Q?" not in user:
                raise FinReflectError(
                    f"QA {which} template: it must render a non-empty system() part and put the "
                    "question in user()"
                )
    except FinReflectError as exc:
        raise FinReflectError(f"{where}: {exc}") from None
    return qa


def contexts(
    question: Question, subgraph: Sequence[ContextTriple], chunks: Mapping[str, str]
) -> dict[Condition, dict[str, Any]]:
    """What the QA model is shown in each condition: the model's subgraph; the gold path's
    triples with its hop chunks (MultiHop's E1); the hop chunks alone."""
    hop_chunks = [chunks[span] for span in dict.fromkeys(hop.span_id for hop in question.hops)]
    gold = [
        render_triple({"subject": h.head, "relation": h.relation, "object": h.tail})
        for h in question.hops
    ]
    return {
        "model_graph": {"triples": [render_triple(t) for t in subgraph], "chunks": []},
        "gold_path": {"triples": gold, "chunks": hop_chunks},
        "hop_chunks": {"triples": [], "chunks": hop_chunks},
    }


def answer_request(
    qa: QAConfig, question: Question, context: Mapping[str, Any]
) -> GenerationRequest:
    system, user = qa.render("prompt", question=question.question, **context)
    return qa.generation_kwargs.chat_request(system, user, AnswerOutput)


def judge_request(
    qa: QAConfig,
    question: Question,
    answer: str,
    generation: GenerationKwargs,
    system_prefix: str = "",
) -> GenerationRequest:
    system, user = qa.render(
        "judge_prompt", question=question.question, gold_answer=question.answer, answer=answer
    )
    if system_prefix:
        system = f"{system_prefix}\n{system}"
    return generation.chat_request(system, user, CorrectnessVerdict)


# A number as an answer writes it: $1,234.5, (12.4), 7.5%, -3.
_NUMBER = re.compile(r"(?<![\w.])\(?-?\$?\d[\d,]*(?:\.\d+)?\)?%?")
_YEAR = re.compile(r"^(19|20)\d\d$")  # a bare year (no comma, sign, decimals or %): context


def numbers_in(text: str) -> list[str]:
    """The distinct numbers of a text, as plain decimals (`$1,234.50` is `1234.50`; a sign or
    accounting parentheses dropped: answers write a decrease either way), bare years left out
    (`2015` is a year, `$2,015` and `2,015` are not)."""
    found = []
    for match in _NUMBER.finditer(text):
        token = match.group().strip("()").rstrip(".,")
        if _YEAR.match(token):
            continue
        raw = token.strip("$%-").replace(",", "").replace("$", "")
        if re.fullmatch(r"\d+(\.\d+)?", raw):
            found.append(raw)
    return list(dict.fromkeys(found))


def number_score(gold_answer: str, answer: str) -> tuple[list[str], list[str], float | None]:
    """The gold answer's numbers, those the answer states exactly (equal at the finer of the
    two precisions: 7.4 is not 7, 296.60 is 296.6), and 10 × their share; None where the gold
    answer holds no number."""
    expected = numbers_in(gold_answer)
    if not expected:
        return [], [], None
    given = numbers_in(answer)
    found = [number for number in expected if any(_same(number, value) for value in given)]
    return expected, found, round(10 * len(found) / len(expected), 4)


def _same(gold: str, given: str) -> bool:
    places = max(len(gold.partition(".")[2]), len(given.partition(".")[2]))
    return round(float(gold), places) == round(float(given), places)


def needs_judges(question: Question) -> bool:
    """A qualitative question, or a quantitative one whose gold answer holds no number."""
    return question.kind == "qualitative" or not numbers_in(question.answer)


def vote_of(judge: str, result: Any) -> QAVote:
    if not result.ok:
        return QAVote(judge=judge, score=None)
    parsed = result.parsed
    return QAVote(
        judge=judge,
        score=parsed["score"],
        reasoning=parsed.get("reasoning", ""),
        warning=parsed.get("warning", ""),
    )


def panel_score(votes: Sequence[QAVote]) -> float | None:
    """The median of the valid votes; None with fewer than `MIN_VOTES`."""
    valid = [vote.score for vote in votes if vote.score is not None]
    return float(statistics.median(valid)) if len(valid) >= MIN_VOTES else None
