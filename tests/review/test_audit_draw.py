"""The audit's draws at their edges: no spans to draw (a task that does not judge
comprehensiveness), unequal chances, and a draw asking more items than have a chance."""

import numpy as np
import pytest

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.stats import audit


def test_a_task_without_comprehensiveness_draws_triples_only():
    """It divided by the spans' count, 0, before (ZeroDivisionError on every such export)."""
    span_filings, counts = np.array([0, 0, 1, 2]), np.array([3, 2, 4, 1])
    rows, indices, spans = audit.audit_items(span_filings, counts, 5, 7, with_spans=False)
    assert len(rows) == len(indices) == 5 and len(spans) == 0
    assert len(audit.draw(span_filings, 0, 7)) == 0


def test_unequal_chances_are_the_ones_drawn():
    """Each item enters as often as `inclusion` says (4,000 draws; 4 standard errors)."""
    dissent = np.tile([0, 0, 1 / 3, 0, 0.5], 40)
    weights = audit.confidence_weights(dissent)
    chance = audit.inclusion(weights, 30)
    assert chance.sum() == pytest.approx(30) and chance.min() >= 0.5 * 30 / 200 - 1e-12
    filings = np.repeat(np.arange(20), 10)
    seen = np.zeros(200)
    for seed in range(4000):
        picked = audit.draw(filings, 30, seed, weights)
        assert len(set(picked.tolist())) == 30
        seen[picked] += 1
    spread = 4 * np.sqrt(chance * (1 - chance) / 4000)
    assert np.all(np.abs(seen / 4000 - chance) <= spread + 1e-9)


def test_more_items_than_have_a_chance_is_one_error():
    with pytest.raises(FinReflectError, match="a draw of 3 items from 2 with a chance"):
        audit.inclusion(np.array([1.0, 0.0, 2.0, 0.0]), 3)
