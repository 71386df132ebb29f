"""A confidence-driven audit against a uniform one, on simulated runs whose truth is known: how
many labels each needs for a PPI interval of ±5 points, at what coverage. 200 filings of 25
triples (people's share of yes near 70%, intraclass correlation 0.05); three judges each wrong
on 10% of triples, and on 35% of the fifth that are hard: the panel's majority errs mostly
where its judges split. Seeded; the figures are in docs/people.md."""

import numpy as np
import pytest

from finreflect_eval.stats import audit, human, metrics

FILINGS, PER_FILING, TRUTH, ICC = 200, 25, 0.7, 0.05
RUNS, COVERAGE_RUNS = 200, 600
SIZES = tuple(range(80, 241, 10))
pytestmark = pytest.mark.slow  # ~1 minute


def _run(rng):
    """(truth, the panel's majority, the share of votes against it, filings) of every triple."""
    spread = 1 / ICC - 1
    rate = rng.beta(TRUTH * spread, (1 - TRUTH) * spread, size=FILINGS)
    units = np.repeat(np.arange(FILINGS), PER_FILING)
    y = (rng.random(len(units)) < rate[units]).astype(int)
    hard = rng.random(len(units)) < 0.2
    wrong = rng.random((len(units), 3)) < np.where(hard, 0.35, 0.10)[:, None]
    votes = np.where(wrong, 1 - y[:, None], y[:, None])
    outcome = metrics.Outcomes.of(votes, np.full(len(units), 3))
    dissent = 1 - np.max([(votes == v).sum(axis=1) for v in (0, 1)], axis=0) / 3
    return y, outcome.score, dissent, units


def measure(select, size, runs=RUNS):
    """Coverage and mean half-width (points) of the PPI interval with `size` labels."""
    rng = np.random.default_rng(size)
    covered, halves = 0, []
    for run in range(runs):
        y, yhat, dissent, units = _run(rng)
        weights = audit.confidence_weights(dissent) if select == "confidence" else None
        drawn = audit.draw(units, size, seed=run, weights=weights)
        inclusion = None if weights is None else audit.inclusion(weights, size)[drawn]
        found = human.ppi_mean(
            y[drawn],
            yhat[drawn],
            units[drawn],
            yhat,
            units,
            FILINGS,
            inclusion=inclusion,
            seed=run,
        )
        covered += found.ci[0] <= TRUTH <= found.ci[1]
        halves.append(50 * (found.ci[1] - found.ci[0]))
    return covered / runs, float(np.mean(halves))


def needed(select, halfwidth=5.0):
    """The fewest labels (of `SIZES`, by bisection: the half-width falls as labels grow) whose
    mean half-width is at most `halfwidth`, and the coverage there over `COVERAGE_RUNS`."""
    low, high = 0, len(SIZES) - 1
    if measure(select, SIZES[high])[1] > halfwidth:
        return None, None
    while low < high:
        middle = (low + high) // 2
        if measure(select, SIZES[middle])[1] <= halfwidth:
            high = middle
        else:
            low = middle + 1
    return SIZES[low], measure(select, SIZES[low], COVERAGE_RUNS)[0]


def test_a_confidence_driven_audit_needs_fewer_labels_at_the_same_coverage():
    uniform = needed("uniform")
    confident = needed("confidence")
    print(f"\n±5 points: uniform {uniform}, confidence-driven {confident}")
    assert uniform[0] is not None and confident[0] is not None
    assert confident[0] <= 0.85 * uniform[0]
    assert uniform[1] >= 0.93 and confident[1] >= 0.93
