"""Metrics of the extracted triples themselves, without judges: CheckRules passes, triples per
span, and overlap with reference triples after a normalisation a reader can predict."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from finreflect_eval.protocol.schema import CheckRulesReport
from finreflect_eval.stats.averages import pct

_NOT_WORD = re.compile(r"[^\w$%.]+")


@lru_cache(maxsize=1 << 16)  # entity names repeat across a filing's triples
def _normalise(text: str) -> str:
    """Lower case, every run of other characters than word ones, `$`, `%` and `.` one space,
    no spaces or dots at either end."""
    return _NOT_WORD.sub(" ", text.lower()).strip(" .")


def triple_key(triple: Any) -> tuple[str, str, str]:
    """What makes two triples the same fact for reference overlap."""
    return (_normalise(triple.subject), triple.relation.lower(), _normalise(triple.object))


def extraction_metrics(
    n_spans: int,
    n_triples: int,
    rules: CheckRulesReport,
    overlap: tuple[int, int, int],
    failed: int,
) -> dict[str, Any]:
    """Metrics of the extracted triples themselves, from their counts over a task's spans:
    CheckRules passes, and the (predicted, reference, matched) distinct normalised (subject,
    relation, object) keys, for micro precision and recall against the reference triples."""
    predicted, reference, matched = overlap
    return {
        "n_spans": n_spans,
        "n_triples": n_triples,
        "triples_per_span": round(n_triples / n_spans, 4) if n_spans else None,
        "check_rules": pct(rules.all_rules),
        "check_rules_detail": {
            key: pct(value) for key, value in rules.as_dict().items() if key != "n_triples"
        },
        "reference_precision": pct(matched / predicted) if predicted else None,
        "reference_recall": pct(matched / reference) if reference else None,
        "failed_extractions": failed,
    }
