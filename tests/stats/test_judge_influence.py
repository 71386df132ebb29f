"""A judge's influence and its interval on simulated panels: exchangeable judges are flagged
as moving the score about as often as the interval's level allows; a lenient one nearly always.
Seeded; the figures are in docs/scores.md."""

import numpy as np

from finreflect_eval.pipeline.summary import moves_score
from finreflect_eval.stats.metrics import Item, score_criterion

JUDGES = ["a", "b", "c"]
RUNS, FILINGS, PER_FILING = 150, 30, 20


def _flagged(lenient: float, seed: int = 0) -> dict[str, float]:
    """Per judge, the share of simulated runs whose influence interval leaves 0 out: each judge
    errs on 15% of items at random; judge a also says yes to `lenient` of the true noes (the
    panel's majority hides most of it: its yes counts only where another judge errs too)."""
    rng = np.random.default_rng(seed)
    flagged = dict.fromkeys(JUDGES, 0)
    for _ in range(RUNS):
        rate = rng.beta(7, 3, size=FILINGS)
        items = []
        for number in range(FILINGS * PER_FILING):
            filing = number // PER_FILING
            truth = int(rng.random() < rate[filing])
            votes = {j: truth if rng.random() >= 0.15 else 1 - truth for j in JUDGES}
            if not truth and rng.random() < lenient:
                votes["a"] = 1
            items.append(Item(f"s{number}", "faithfulness", 0, votes, filing=f"F{filing}"))
        scores = score_criterion(items, JUDGES, aggregation="micro", seed=int(rng.integers(1e6)))
        for judge in JUDGES:
            flagged[judge] += moves_score(scores.judge_influence_ci[judge])
    return {judge: count / RUNS for judge, count in flagged.items()}


def test_exchangeable_judges_are_seldom_said_to_move_the_score():
    shares = _flagged(lenient=0.0)
    print(f"\nexchangeable judges flagged: {shares}")
    assert all(share <= 0.09 for share in shares.values()), shares


def test_a_lenient_judge_is_said_to_move_the_score_far_more_often():
    """Judge a says yes to 80% of true noes: flagged in about half the runs (it lifts the
    panel's score by about 6 points, yet the scores without one judge see its yes only where the
    other judge left in errs too: a 1-1 split takes the lower label), the others far less."""
    shares = _flagged(lenient=0.8)
    print(f"\na lenient judge (a) flagged: {shares}")
    assert shares["a"] >= 0.4 and shares["a"] >= max(shares["b"], shares["c"]) + 0.2, shares
