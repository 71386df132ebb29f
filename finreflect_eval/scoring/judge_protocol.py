"""How each judge kept the judge protocol (verdict first, then at most 15 words of reasoning),
counted from its votes and its accepted answers. A judge that breaks it is reported, never
dropped: its votes are what it answered."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from finreflect_eval.protocol.criteria import REASONING_WORDS
from finreflect_eval.records import JudgeProtocol
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable


def judge_protocol_of(facts: SpanFacts, table: VoteTable, panel: str) -> dict[str, JudgeProtocol]:
    """Per judge of the panel: its votes and how many have a reasoning over `REASONING_WORDS`
    words (decoded, split on whitespace), its answered calls and how many put a reasoning
    before its verdict."""
    reasoning_first = _counts(facts.python_values(f"judge_reasoning_first:{panel}"))
    calls = _counts(facts.python_values(f"judge_answered:{panel}"))
    protocol = {}
    for judge in table.judges:
        voted = (table.column(f"code:{judge}") >= 0) & ~table.column(f"synthetic:{judge}")
        reasoning = pc.utf8_trim_whitespace(table.table.column(f"reasoning:{judge}"))
        words = pc.list_value_length(pc.utf8_split_whitespace(reasoning)).to_numpy()
        protocol[judge] = JudgeProtocol(
            votes=int(voted.sum()),
            long_reasoning=int((voted & (words > REASONING_WORDS)).sum()),
            calls=calls.get(judge, 0),
            reasoning_first=reasoning_first.get(judge, 0),
        )
    return protocol


def _counts(judges_by_span: list[list[str]]) -> dict[str, int]:
    names, counts = np.unique([j for span in judges_by_span for j in span], return_counts=True)
    return dict(zip(names.tolist(), counts.tolist(), strict=True))
