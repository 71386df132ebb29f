"""The grounding cascade (`--skip-judging-ungrounded`): only triples whose numbers, amounts and
dates their span's text holds (`graph.grounding`) go to the judges; the others score 0 on every
triple criterion by rule. The default is the paper's protocol: every triple judged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from finreflect_eval.graph.grounding import ground_spans
from finreflect_eval.protocol.criteria import TRIPLE_CRITERIA
from finreflect_eval.records import SampleRecord, Vote
from finreflect_eval.records.samples import UNGROUNDED_VOTE  # an ungrounded triple's, by rule


def grounded_triples(record: SampleRecord) -> list[int]:
    """The triples of the span whose numbers, amounts and dates its text holds (or that hold
    none): what the grounding cascade sends to the judges."""
    pairs = [(triple.subject, triple.object) for triple in record.triples]
    checks = ground_spans([(record.text, pairs)])[0]
    return [index for index, check in enumerate(checks) if check is not False]


def spread_votes(votes: list[Vote], judged: Sequence[int], n_triples: int) -> list[Vote]:
    """The votes on the judged triples in their places among all the span's triples, the
    others' `UNGROUNDED_VOTE`."""
    spread = [UNGROUNDED_VOTE] * n_triples
    for index, vote in zip(judged, votes, strict=True):
        spread[index] = vote
    return spread


def unjudged(
    records: list[SampleRecord], judged: dict[int, list[int]], tasks: Mapping[str, Any], panel: Any
) -> dict[str, dict[str, int]]:
    """Per task, what the grounding cascade kept from the judges: the triples it scored by rule,
    and the calls it did not make (each judge's triple criteria on a span none of whose triples
    was sent); where it filled votes in for those calls."""
    cascade = {}
    for record in records:
        asked = judged[id(record)]
        counts = cascade.setdefault(record.task, {"triples_skipped": 0, "judge_calls_saved": 0})
        counts["triples_skipped"] += len(record.triples) - len(asked)
        if record.triples and not asked:
            criteria = [c for c in tasks[record.task].criteria if c in TRIPLE_CRITERIA]
            counts["judge_calls_saved"] += len(criteria) * len(panel.judges)
            for criterion in criteria:
                by_judge = record.votes[panel.panel][criterion]
                for spec in panel.judges:
                    by_judge[spec.name] = [UNGROUNDED_VOTE] * len(record.triples)
    return cascade
