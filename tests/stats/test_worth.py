"""What the panel's votes are worth, on simulated judges whose errors are correlated by a known
amount: the error correlations and Kish's effective number of judges against numpy, the theory
and an independent loop; each judge's accuracy and κ against scikit-learn; the best single
judge's difference from the majority against a hand computation."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score

from finreflect_eval.stats import human, worth

ITEMS, FILINGS = 20000, 200
SHARED, OWN = 0.1, 0.1  # an item's shared error (every judge errs on it), each judge's own


def _judges(seed=0, judges=3):
    """People's labels and the judges' votes: each judge errs where a shared error strikes
    (probability SHARED) or its own (OWN)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(ITEMS) < 0.6).astype(np.int64)
    shared = rng.random(ITEMS) < SHARED
    errors = shared[:, None] | (rng.random((ITEMS, judges)) < OWN)
    votes = np.where(errors, 1 - truth[:, None], truth[:, None])
    units = np.arange(ITEMS) % FILINGS
    return truth, votes, errors, units


def test_error_correlation_and_effective_judges_are_numpys_and_the_theorys():
    truth, votes, errors, units = _judges()
    found = worth.error_correlation(
        votes, lambda i, j: truth, units, FILINGS, seed=1, iterations=200
    )
    matrix = np.corrcoef(errors.T.astype(float))
    pairs = [(0, 1), (0, 2), (1, 2)]
    assert [(i, j) for i, j, _, _ in found.pairs] == pairs
    for (i, j), (_, _, n, r) in zip(pairs, found.pairs, strict=True):
        assert n == ITEMS and r == pytest.approx(matrix[i, j], abs=1e-4)
    mean = np.mean([matrix[i, j] for i, j in pairs])
    assert found.mean == pytest.approx(mean, abs=1e-4)
    assert found.effective == pytest.approx(3 / (1 + 2 * mean), abs=1e-4)
    # The theory: an error is the shared one or the judge's own.
    p = SHARED + (1 - SHARED) * OWN
    both = SHARED + (1 - SHARED) * OWN**2
    rho = (both - p * p) / (p * (1 - p))
    assert found.mean == pytest.approx(rho, abs=0.02)
    assert found.effective_ci[0] < 3 / (1 + 2 * rho) < found.effective_ci[1]
    assert 1 < found.effective < 2.2  # three judges, about two votes


def test_independent_errors_make_as_many_judges_and_identical_ones_one():
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 2, 5000)
    units = np.arange(5000) % 50
    independent = np.where(rng.random((5000, 4)) < 0.2, 1 - truth[:, None], truth[:, None])
    found = worth.error_correlation(independent, lambda i, j: truth, units, 50, seed=0)
    assert found.effective == pytest.approx(4, abs=0.25)
    same = np.repeat(independent[:, :1], 3, axis=1)
    assert worth.error_correlation(same, lambda i, j: truth, units, 50, seed=0).effective == 1
    # Two judges whose errors are exactly opposite (r = -1): counted as two, not infinitely many.
    opposite = np.column_stack([truth, 1 - truth])  # the first never errs, the second always
    flip = rng.random(5000) < 0.5
    opposite = np.where(flip[:, None], 1 - opposite, opposite)
    found = worth.error_correlation(opposite, lambda i, j: truth, units, 50, seed=0)
    assert found.mean == -1 and found.effective == 2


def test_against_the_panel_the_reference_is_the_judges_outside_the_pair():
    """With three judges the pair's reference is the third. An error all three share is then
    invisible (they agree), and the third's own errors read as errors the pair shares: the
    figure is not the correlation of errors against the truth. Here, where the shared errors
    are most of the correlation, it reads lower than the truth's."""
    truth, votes, _, units = _judges(seed=3)
    panel = worth.error_correlation(
        votes, lambda i, j: worth.others_majority(votes, (i, j)), units, FILINGS, seed=0
    )
    people = worth.error_correlation(votes, lambda i, j: truth, units, FILINGS, seed=0)
    for i, j, _, r in panel.pairs:
        third = 3 - i - j
        a, b = votes[:, i] != votes[:, third], votes[:, j] != votes[:, third]
        assert r == pytest.approx(np.corrcoef(a, b)[0, 1], abs=1e-4)
    assert panel.mean < people.mean


def test_each_judges_accuracy_and_kappa_are_sklearns():
    truth, votes, _, units = _judges(seed=4)
    votes = votes[:3000].copy()
    truth, units = truth[:3000], units[:3000]
    votes[::7, 1] = -1  # judge 1 abstains on some items
    found = human.agreement_with_people(
        votes, truth, units, FILINGS, coders=["a", "b", "c"], seed=0, iterations=50
    )
    for column, judge in enumerate("abc"):
        voted = votes[:, column] >= 0
        assert found[judge]["n"] == voted.sum()
        assert found[judge]["accuracy"] == pytest.approx(
            accuracy_score(truth[voted], votes[voted, column]), abs=1e-4
        )
        assert found[judge]["kappa"] == pytest.approx(
            cohen_kappa_score(truth[voted], votes[voted, column]), abs=1e-4
        )


def test_the_best_judges_difference_from_the_majority_by_hand():
    truth, votes, _, units = _judges(seed=5)
    majority = worth.strict_majority(votes)
    pair = np.column_stack([votes[:, 0], majority])
    difference, ci = worth.accuracy_difference(
        pair == truth[:, None], pair >= 0, units, FILINGS, seed=0
    )
    by_hand = 100 * (np.mean(votes[:, 0] == truth) - np.mean(majority == truth))
    assert difference == pytest.approx(by_hand, abs=1e-3)
    assert ci[0] < difference < ci[1]
    assert ci[1] < 0  # the majority of three errs less than any one judge here
