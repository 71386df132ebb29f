"""How each judge kept the judge protocol (verdict first, then at most 15 words of reasoning),
counted from its votes and its accepted answers. A judge that breaks it is reported, never
dropped: its votes are what it answered."""

from __future__ import annotations

import numpy as np

from finreflect_eval.records import JudgeProtocol
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable


def judge_protocol_of(facts: SpanFacts, table: VoteTable, panel: str) -> dict[str, JudgeProtocol]:
    """Per judge of the panel: its votes and how many have a reasoning over the protocol's
    words, its answered calls and how many put a reasoning before its verdict (counted from
    the records: `SpanFacts`)."""
    reasoning_first = _counts(facts.python_values(f"judge_reasoning_first:{panel}"))
    long_reasoning = _counts(facts.python_values(f"judge_long_reasoning:{panel}"))
    calls = _counts(facts.python_values(f"judge_answered:{panel}"))
    protocol = {}
    for judge in table.judges:
        voted = (table.column(f"code:{judge}") >= 0) & ~table.column(f"synthetic:{judge}")
        protocol[judge] = JudgeProtocol(
            votes=int(voted.sum()),
            long_reasoning=long_reasoning.get(judge, 0),
            calls=calls.get(judge, 0),
            reasoning_first=reasoning_first.get(judge, 0),
        )
    return protocol


def _counts(judges_by_span: list[list[str]]) -> dict[str, int]:
    names, counts = np.unique([j for span in judges_by_span for j in span], return_counts=True)
    return dict(zip(names.tolist(), counts.tolist(), strict=True))
