"""`samples_<task>_<run>.jsonl`: one `SampleRecord` per span and task, with lm-eval's logged
sample fields beside ours."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import (
    Field,
    TypeAdapter,
    model_validator,
)

from finreflect_eval._util.hashing import text_sha256 as hash_string  # lm-eval's name
from finreflect_eval.protocol.criteria import TRIPLE_CRITERIA, CriterionName
from finreflect_eval.protocol.modes import ModeName
from finreflect_eval.protocol.schema import Triple
from finreflect_eval.records.base import (
    FileRecord,
    Record,
)


class Feedback(Record):
    """One item of a reflection critic's feedback."""

    triple_index: int = Field(ge=0)
    issue: str = Field(max_length=300)
    suggestion: str = Field(max_length=300)


class ModelCall(Record):
    """One model call about a span (an extraction step or a judge's criterion), as kept."""

    step: str
    """`extract`, `normalize`, `critic`, `correct`, or `judge:<criterion>`."""
    model: str | None = None
    """The judge's name, for judge calls."""
    iteration: int = 0
    text: str | None
    """The accepted output (None when the call failed in transport)."""
    raw_outputs: list[str] = []
    """Every output, including those that failed validation and were retried."""
    error: str | None = None
    cached: bool = False
    """Answered from the run's response cache, or a copy of an identical request's answer."""
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    reasoning_tokens: int = Field(0, ge=0)
    """Of `completion_tokens`, those the model spent thinking (every attempt's)."""
    thinking: str | None = None
    """A reasoning model's thought before its accepted output (None: it did not think); never
    parsed, never judged (see `models._thinking`)."""
    thinking_cut: bool = False
    """The thought reached the model's `think_budget`: its end was written for it."""
    cached_prompt_tokens: int | None = Field(None, ge=0)
    """Of `prompt_tokens`, those the backend did not compute again (prompt-prefix reuse, a
    server's prompt cache); None where the backend does not say (or the sample was written
    before it was counted)."""
    seconds: float | None = Field(None, ge=0, allow_inf_nan=False)
    """Its share of the wall time its model spent answering (0 for an answer from the cache;
    None: written before it was counted)."""
    device_seconds: float | None = Field(None, ge=0, allow_inf_nan=False)
    """Its share of the time an in-process model held its devices (GPUs, or the CPU as one);
    None for a model behind a server, a call from the cache, or a sample written before it was
    counted."""
    prompt_hash: str = ""
    """sha256 of the request (messages, schema and sampling settings)."""

    @model_validator(mode="after")
    def _counts_within(self) -> ModelCall:
        if (self.cached_prompt_tokens or 0) > self.prompt_tokens:
            raise ValueError("cached_prompt_tokens is over prompt_tokens")
        if self.reasoning_tokens > self.completion_tokens:
            raise ValueError("reasoning_tokens is over completion_tokens")
        return self

    @property
    def transport_failed(self) -> bool:
        """The call failed before the model answered (server unreachable, timed out, malformed
        reply): not the model's failure, never cached, retried on rerun."""
        return self.error is not None and not self.raw_outputs


class Vote(Record):
    """One judge's verdict on one item; `verdict` None is an abstention (the call failed)."""

    verdict: Literal[0, 1, "good", "partial", "poor"] | None
    """0/1 for triple criteria, good/partial/poor for comprehensiveness."""
    reasoning: str = ""
    warning: str = ""
    synthetic: bool = False
    """Given by rule, not by the judge (a span without triples is `poor`)."""


Votes = dict[str, dict[str, list[Vote]]]  # criterion -> judge -> one vote per item

# The votes no judge answered. By rule (`synthetic`): a span without triples covers none of its
# facts, `poor` on comprehensiveness without a call; under the grounding cascade
# (`--skip-judging-ungrounded`), a triple stating a number, amount or date its span does not
# hold scores 0 on every triple criterion, never sent to a judge. A judge call that failed (in
# transport, or without a valid output after its retries) is an abstention on each of its items.
NO_TRIPLES_VOTE = Vote(
    verdict="poor", reasoning="No triples were extracted.", warning="no triples", synthetic=True
)
UNGROUNDED_VOTE = Vote(
    verdict=0,
    reasoning="A number, amount or date it states is not in the span.",
    warning="ungrounded",
    synthetic=True,
)
FAILED_CALL_VOTE = Vote(verdict=None, warning="judge call failed")


def answer_fields(criterion: str, answer: Any) -> list[dict[str, Any]]:
    """A judge's valid answer (its output as parsed JSON) as the fields of its votes, one per
    item it was asked about (`{"verdicts": [...]}` for a triple criterion, one verdict for a
    span's), each the judge's own (not `synthetic`). The judge stage votes with them
    (`answer_votes`), and a run's checks compare each vote's fields with its call's."""
    items = answer["verdicts"] if criterion in TRIPLE_CRITERIA else [answer]
    return [{**item, "synthetic": False} for item in items]


def answer_votes(criterion: str, answer: Any) -> list[Vote]:
    """A judge's valid answer as its votes (`answer_fields`)."""
    return [Vote(**fields) for fields in answer_fields(criterion, answer)]


class SampleMetrics(Record):
    """A span's per-sample metric values, each item's as its aggregation takes it: a task's
    result is the mean over all items of its spans (micro, ×100) or over its spans of each
    span's mean (macro; the criterion's `aggregation` in the results' details)."""

    triples_per_span: int = 0
    """The final triples (the result is the mean over spans)."""
    check_rules: list[Literal[0, 1]] = []
    """Per final triple: 1 when it passes all four CheckRules (micro)."""
    panels: dict[str, dict[CriterionName, list[float | None]]] = {}
    """By panel (as `votes`), per criterion judged: the panel's score of each item, the label
    its majority takes as 0/1 (good/partial/poor: 1/0.5/0), None where it is unscored."""


class SampleRecord(FileRecord):
    """Everything about one span of one task: one line of `samples_<task>_<run>.jsonl`. It
    holds every field lm-eval 0.4.13 logs for a document, computed as lm-eval computes them
    (finreflect_eval.records.lm_eval). A line written before they existed reads with them
    derived from its other fields."""

    doc_id: int = Field(ge=0, lt=2**63)
    """The span's position in the task's span list (lm-eval's `doc_id`)."""
    task: str
    mode: ModeName
    span_id: str
    ticker: str
    section: str
    doc: dict[str, Any] = {}
    """The span's dataset row (lm-eval's `doc`): `span_id`, `ticker`, `company`, `fiscal_year`,
    `section`, ..., `text`; the span's text is written here only."""
    text: str = Field("", exclude=True)
    """The span's text, `doc["text"]` (never written; a line written before `doc` existed holds
    it, and its `doc` is made of it, `span_id`, `ticker` and `section`)."""
    doc_hash: str = ""
    """lm-eval's: sha256 of `doc` as JSON indented by 2, non-ASCII kept."""
    prompt_hash: str = ""
    """lm-eval's: sha256 of the first request's prompt, its messages (`gen_args_0.arg_0`) as
    the JSON string lm-eval's chat API models send."""
    target: str = ""
    """lm-eval's: the reference triples, as the extraction answers (`{"triples": [...]}`)."""
    target_hash: str = ""
    """lm-eval's: sha256 of `target`."""
    arguments: dict[str, dict[str, Any]] = {}
    """The rendered prompt of each extraction step, as lm-eval logs it:
    `gen_args_<i>: {arg_0: messages, arg_1: generation settings}`."""
    resps: list[list[str]] = []
    """lm-eval's: per request (each step, as `arguments`), every output of the model (those
    retried as invalid first; none when the call failed in transport)."""
    filtered_resps: list[str] = []
    """lm-eval's: the answer scored, the final triples as `target` writes them."""
    filter: Literal["none"] = "none"
    """lm-eval's filter: none (the answer is the final triples as parsed; results `<m>,none`)."""
    metrics: SampleMetrics = Field(default_factory=SampleMetrics)
    """Per-sample metric values (lm-eval writes their names here and each value as a key of its
    own: our line holds every panel's values, so they are here, by panel). Set by extraction;
    each panel's when it judges."""
    reference: list[Triple] = []
    triples: list[Triple] = []
    """The final triples."""
    rule_checks: list[dict[str, bool]] = []
    """CheckRules per final triple."""
    failed: bool = False
    """The extraction failed (after retries): the span counts with no triples."""
    failures: list[str] = []
    steps: list[ModelCall] = []
    iterations: int = 0
    converged: bool | None = None
    feedback_trail: list[list[Feedback]] = []
    prompt_tokens: int = 0
    completion_tokens: int = 0
    votes: dict[str, Votes] = {}
    """By panel: criterion -> judge -> one vote per item (per triple for faithfulness,
    precision and relevance; one for comprehensiveness)."""
    judge_calls: dict[str, list[ModelCall]] = {}
    """By panel: every judge call about this span."""

    @model_validator(mode="after")
    def _text_in_doc(self) -> SampleRecord:
        """`text` from `doc`; a line written before `doc` existed gets its lm-eval fields."""
        if not self.doc:
            self.doc = {
                "span_id": self.span_id,
                "ticker": self.ticker,
                "section": self.section,
                "text": self.text,
            }
            fill(self)
        if not isinstance(self.doc.get("text"), str):
            raise ValueError("doc must be the span's row, with its text")
        if self.text and self.text != self.doc["text"]:
            raise ValueError("text differs from doc.text")
        self.text = self.doc["text"]
        return self


# lm-eval's fields of a sample, derived from ours (finreflect_eval.records.lm_eval says how).

_ANSWER = TypeAdapter(dict[str, list[Triple]])


def doc_hash(doc: Mapping[str, Any]) -> str:
    """lm-eval's `doc_hash`: of the document as JSON indented by 2, non-ASCII kept."""
    return hash_string(json.dumps(doc, indent=2, ensure_ascii=False))


def prompt_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """lm-eval's `prompt_hash` of a chat request: of its messages as the JSON string lm-eval's
    chat API models send (`JsonChatStr`)."""
    return hash_string(json.dumps(list(messages), ensure_ascii=False))


def answer(triples: Sequence[Triple]) -> str:
    """Triples as the extraction answers them, `{"triples": [...]}`, as pydantic writes JSON."""
    return _ANSWER.dump_json({"triples": list(triples)}).decode()


def item_scores(votes: Mapping[str, Sequence[Vote]]) -> list[float | None]:
    """A panel's score of each item of one criterion (`votes`: judge -> one vote per item): the
    label its majority rule takes as a number, None where it is unscored. Scoring's own rule
    (`metrics.Outcomes`, all items at once): a judge without a vote on an item is absent."""
    return panel_item_scores({"": votes})[""]


def panel_item_scores(
    by_criterion: Mapping[str, Mapping[str, Sequence[Vote]]],
) -> dict[str, list[float | None]]:
    """`item_scores` of each criterion of a panel's votes, decided all at once (the rule decides
    each item by its own votes: one matrix of every criterion's items, a judge absent from a
    criterion absent from its items)."""
    # Imported here: numpy, which the records' light readers do without.
    import numpy as np

    from finreflect_eval.stats import metrics

    blocks = [
        (criterion, max((len(cast) for cast in votes.values()), default=0), list(votes.values()))
        for criterion, votes in by_criterion.items()
    ]
    rows = sum(n_items for _, n_items, _ in blocks)
    codes = np.full((rows, max((len(c) for *_, c in blocks), default=0)), metrics.ABSENT, np.int8)
    n_votes, start = np.zeros(rows, dtype=np.int64), 0
    for _, n_items, casts in blocks:
        for column, cast in enumerate(casts):
            codes[start : start + len(cast), column] = [metrics.vote_code(v.verdict) for v in cast]
        n_votes[start : start + n_items] = len(casts)
        start += n_items
    outcome = metrics.Outcomes.of(codes, n_votes)
    pairs = zip(outcome.score.tolist(), outcome.scored.tolist(), strict=True)
    taken = [score if ok else None for score, ok in pairs]
    scores, start = {}, 0
    for criterion, n_items, _ in blocks:
        scores[criterion], start = taken[start : start + n_items], start + n_items
    return scores


def fill(record: SampleRecord) -> None:
    """Set the record's lm-eval fields from its own: when extraction or judging changed it, and
    for a line written before the fields existed."""
    record.doc_hash = doc_hash(record.doc)
    first = record.arguments.get("gen_args_0", {}).get("arg_0")
    if isinstance(first, list):  # (a run upgraded from format 1 has no prompts)
        record.prompt_hash = prompt_hash(first)
    record.target = answer(record.reference)
    record.target_hash = hash_string(record.target)
    record.resps = [list(step.raw_outputs) for step in record.steps]
    record.filtered_resps = [answer(record.triples)]
    # A new object: a copy of the record (see `first_mismatch`) may share the old one.
    record.metrics = record.metrics.model_copy(
        update={
            "triples_per_span": len(record.triples),
            "check_rules": [int(all(checks.values())) for checks in record.rule_checks],
            "panels": {
                panel: panel_item_scores(by_criterion)
                for panel, by_criterion in record.votes.items()
            },
        }
    )
