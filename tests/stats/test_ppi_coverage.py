"""PPI on simulated audits whose truth is known, in the clustered design (40 filings of 50
items; a filing's true pass rate drawn around 70%, intraclass correlation 0.15; n items
labeled at random): the interval covers and is never wider than the labels' alone, whether
the judge is good (errors 12%), poor (40%) or lenient (says yes to 30% of the noes); and a
good judge whose errors gather in some filings (their rate drawn by filing, mean 12%), where
PPI is weakest. Seeded, bounded in time; figures in docs/people.md."""

import numpy as np
import pytest

from finreflect_eval.stats import human

FILINGS, PER_FILING, TRUTH, ICC = 40, 50, 0.7, 0.15
RUNS = 1000
pytestmark = pytest.mark.slow  # ~1 minute


def _audit(rng, judge, n):
    """(labels, the panel on them, their filings, the panel on all, all items' filings)."""
    spread = 1 / ICC - 1
    rate = rng.beta(TRUTH * spread, (1 - TRUTH) * spread, size=FILINGS)
    units = np.repeat(np.arange(FILINGS), PER_FILING)
    y = (rng.random(len(units)) < rate[units]).astype(float)
    if judge == "good":
        yhat = np.where(rng.random(len(units)) < 0.12, 1 - y, y)
    elif judge == "good, errors by filing":
        wrong = rng.random(len(units)) < rng.beta(1.2, 8.8, size=FILINGS)[units]
        yhat = np.where(wrong, 1 - y, y)
    elif judge == "poor":
        yhat = np.where(rng.random(len(units)) < 0.4, 1 - y, y)
    else:
        yhat = np.where(rng.random(len(units)) < 0.3, 1.0, y)
    labeled = rng.choice(len(units), n, replace=False)
    return y[labeled], yhat[labeled], units[labeled], yhat, units


ESTIMATORS = {"ppi": None, "labels": 0.0, "plain": 1.0}  # λ: tuned, the labels alone, plain


def measure(judge, n, runs=RUNS, estimators=("ppi", "labels")):
    """Per estimator: coverage and mean width (points)."""
    rng = np.random.default_rng(0)
    found = {name: [0, 0.0] for name in estimators}
    for _ in range(runs):
        y, yhat, units, yhat_all, units_all = _audit(rng, judge, n)
        for name in estimators:
            lam = ESTIMATORS[name]
            ci = human.ppi_mean(y, yhat, units, yhat_all, units_all, FILINGS, lam=lam).ci
            found[name][0] += ci[0] <= TRUTH <= ci[1]
            found[name][1] += 100 * (ci[1] - ci[0])
    return {name: (hits / runs, width / runs) for name, (hits, width) in found.items()}


@pytest.mark.parametrize("judge", ["good", "poor", "lenient"])
@pytest.mark.parametrize("n", [100, 200, 400])
def test_ppi_covers_and_is_never_wider_than_the_labels_alone(judge, n):
    found = measure(judge, n)
    coverage, width = found["ppi"]
    assert coverage >= 0.93, found
    assert width <= found["labels"][1], found


@pytest.mark.parametrize("n", [100, 200, 400])
def test_where_a_judge_s_errors_gather_by_filing_ppi_is_still_narrower(n):
    """The weak case, measured and kept from getting worse: with 2.5 labels a filing (n = 100)
    the few filings where the judge errs most are often missed, and the interval covered
    92.4% (plain PPI 93.9%; the labels alone 94.3%, and 4.9 points wider)."""
    found = measure("good, errors by filing", n)
    coverage, width = found["ppi"]
    assert coverage >= (0.91 if n == 100 else 0.93), found
    assert width <= found["labels"][1], found
