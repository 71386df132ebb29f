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

from collections.abc import Iterable

from finreflect_eval._util.hashing import text_sha256 as hash_string  # lm-eval's name
from finreflect_eval.records.samples import SampleRecord, fill

DERIVED = ("doc_hash", "target_hash", "metrics")
"""What a submission's samples must hold as their other fields give it (the prompts, which
`prompt_hash` is of, are not submitted)."""


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
