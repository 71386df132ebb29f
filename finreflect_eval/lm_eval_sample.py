"""lm-eval's view of a sample record: the fields lm-eval 0.4.13 logs for every document, derived
from the record's own, and a task's hash over its samples.

lm-eval's evaluator logs per document `doc_id`, `doc`, `target`, `arguments`, `resps`,
`filtered_resps`, `filter`, `metrics` and three hashes (`lm_eval/evaluator.py`): `doc_hash`
of the document as indented JSON, `prompt_hash` of the first request's prompt, `target_hash` of
`str(target)`, each `hash_string` (the sha256 hex of the UTF-8 text). Its evaluation tracker
hashes a task as the `hash_string` of every sample's three hashes joined, in order
(`EvaluationTracker.save_results_aggregated`). Here the same, with our records' meanings:
`doc` is the span's dataset row, the prompt is a chat (its messages as the JSON string lm-eval's
chat API models send), and the target and the answer are triples as the extraction writes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import TypeAdapter

from finreflect_eval import metrics
from finreflect_eval.hashing import text_sha256 as hash_string  # lm-eval's name
from finreflect_eval.schema import Triple

if TYPE_CHECKING:
    from finreflect_eval.records import SampleRecord, Vote

DERIVED = ("doc_hash", "target_hash", "metrics")
"""What a submission's samples must hold as their other fields give it (the prompts, which
`prompt_hash` is of, are not submitted)."""

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
    n_items = max((len(cast) for cast in votes.values()), default=0)
    codes = np.full((n_items, len(votes)), metrics.ABSENT, dtype=np.int8)
    for column, cast in enumerate(votes.values()):
        codes[: len(cast), column] = [metrics.vote_code(vote.verdict) for vote in cast]
    outcome = metrics.Outcomes.of(codes, np.full(n_items, len(votes)))
    scored = outcome.scored.tolist()
    return [s if ok else None for s, ok in zip(outcome.score.tolist(), scored, strict=True)]


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
                panel: {criterion: item_scores(cast) for criterion, cast in by_criterion.items()}
                for panel, by_criterion in record.votes.items()
            },
        }
    )


def submitted(record: SampleRecord) -> SampleRecord:
    """The record as a leaderboard submission holds it: without the prompts (no number needs
    them) and the fields that copy others (`resps`, `filtered_resps` and `target` copy the
    steps' outputs, the triples and the reference, which stay)."""
    return record.model_copy(
        update={"arguments": {}, "resps": [], "filtered_resps": [], "target": ""}
    )


def first_mismatch(record: SampleRecord) -> str | None:
    """The first derived field (`DERIVED`) the record's other fields do not give, else None."""
    expected = record.model_copy()
    fill(expected)
    differing = (name for name in DERIVED if getattr(expected, name) != getattr(record, name))
    return next(differing, None)


def sample_hashes(record: SampleRecord) -> str:
    """What lm-eval joins of a sample to hash its task."""
    return record.doc_hash + record.prompt_hash + record.target_hash


def task_hash(hashes: Iterable[str]) -> str:
    """lm-eval's task hash, of its samples' `sample_hashes` in `doc_id` order."""
    return hash_string("".join(hashes))
