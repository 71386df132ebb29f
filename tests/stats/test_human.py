"""The judges against people, with answers known in advance: PPI++ against ppi-python and by
simulation (its intervals cover the people's mean, the panel's own do not), accuracy, Cohen's κ
and the confusion counts by hand, α with the people against the krippendorff package, and the
labels an interval needs, worked by hand."""

import math

import krippendorff
import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from ppi_py.ppi import _calc_lam_glm

from finreflect_eval.stats import metrics
from finreflect_eval.stats.agreement import Coincidences
from finreflect_eval.stats.human import (
    agreement_with_people,
    alpha_with_people,
    labels_needed,
    panel_interval,
    ppi_mean,
    tuned_lambda,
)

# --- PPI++ against ppi-python, items independent (each its own unit) ---


def _independent(seed: int, n: int = 2000, big_n: int = 20000):
    """People's labels on n items, a biased judge's votes on them and on N other items (ppi
    takes the two sets apart), every item its own unit."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n + big_n) < 0.6).astype(float)
    yhat = np.where(truth == 1, rng.random(n + big_n) < 0.9, rng.random(n + big_n) < 0.35)
    yhat = yhat.astype(float)
    units = np.arange(n + big_n)
    return truth[:n], yhat[:n], units[:n], yhat[n:], units[n:], n + big_n


def _half(ci) -> float:
    return (ci[1] - ci[0]) / 2


def test_ppi_with_a_fixed_lambda_is_ppi_pythons():
    """Same point; the standard error times 1.96 is ppi-python's half-width but for G/(G-1)
    (G = 22000: 2e-5 of it), so 1e-3 of it is a close bound that still fails on any real
    difference. The interval is the studentized bootstrap's (at least Student's t's): with
    22000 independent units its t quantiles are the normal's but for the 1000 draws' own noise
    (a 2.5% quantile of 1000 draws: about 4% of the half-width, one standard deviation)."""
    y, yhat, units, yhat_all, units_all, n_units = _independent(0)
    for lam in (0.0, 0.4, 1.0):
        ours = ppi_mean(y, yhat, units, yhat_all, units_all, n_units, lam=lam)
        point = ppi_mean_pointestimate(y, yhat, yhat_all, lam=lam)
        low, high = ppi_mean_ci(y, yhat, yhat_all, alpha=0.05, lam=lam)
        assert ours.estimate == pytest.approx(float(point[0]), abs=1e-9)
        half = (high[0] - low[0]) / 2
        assert abs(1.959964 * ours.stderr - half) < 1e-3 * half
        assert ours.ci[0] <= low[0] + 1e-3 * half and ours.ci[1] >= high[0] - 1e-3 * half
        assert abs(ours.ci[0] - low[0]) < 0.12 * half
        assert abs(ours.ci[1] - high[0]) < 0.12 * half
        assert ours.lam == lam and ours.n_labeled == 2000 and ours.n_units == 22000
    assert ours.panel == pytest.approx(yhat_all.mean())


@pytest.mark.parametrize("seed", range(4))
def test_tuned_lambda_is_ppi_pythons_up_to_how_it_pools_the_variance(seed):
    """ppi-python's λ is cov₀(y, ŷ) / ((1 + n/N)·var₁(ŷ pooled)); ours (the clustered
    variance's minimiser, items as units) is cov₀(y, ŷ) / (var₀(ŷ labeled) + n/N·var₀(ŷ all)):
    the same but for the variance of ŷ, pooled by ppi, apart here (the labeled part's mean is
    over n items, the rest's over N, so each variance has its own weight). Both are checked
    exactly; the two λs then differ by the sampling error of ŷ's variance on 2000 labeled items
    (relative SD ≈ |1 − 2q|·sqrt(q(1 − q)/n)/(q(1 − q)) ≈ 1.7% for q ≈ 0.68; ≈ 0.009 on λ ≈ 0.55),
    so 0.03 is about three of those; and at the optimum the variance is flat, so the intervals
    agree within 1e-3 of the half-width."""
    y, yhat, units, yhat_all, units_all, n_units = _independent(seed)
    n, big_n = len(y), len(yhat_all)
    centre = ppi_mean_pointestimate(y, yhat, yhat_all, lam=1)[0]
    theirs = _calc_lam_glm(y - centre, yhat - centre, yhat_all - centre, np.eye(1), clip=True)
    covariance = np.mean((y - y.mean()) * (yhat - yhat.mean()))
    pooled = np.var(np.concatenate([yhat, yhat_all]), ddof=1)
    assert float(theirs) == pytest.approx(covariance / ((1 + n / big_n) * pooled), abs=1e-9)
    present = np.ones(n_units, bool)
    a = np.zeros(n_units)
    a[units_all] = (yhat_all - yhat_all.mean()) / big_n
    mine = tuned_lambda(y, yhat, units, a, n_units, present)
    assert mine == pytest.approx(covariance / (yhat.var() + n / big_n * yhat_all.var()))
    assert 0.3 < mine < 0.8  # not clipped: the comparison means something
    assert abs(mine - float(theirs)) < 0.03
    # Used cross-fitted (each half of the units weighed with the λ tuned on the other half: on
    # n/2 labels, so n/(2N) in its denominator and √2 its sampling error), λ̄ is within 0.05 and
    # the interval is ppi-python's within 2% of its half-width, and the bootstrap's draws' noise
    # (about 4% each way, one standard deviation).
    ours = ppi_mean(y, yhat, units, yhat_all, units_all, n_units)
    assert abs(ours.lam - float(theirs)) < 0.05
    low, high = ppi_mean_ci(y, yhat, yhat_all, alpha=0.05)
    half = (high[0] - low[0]) / 2
    assert abs(_half(ours.ci) / half - 1) < 0.12
    assert abs(ours.estimate - (low[0] + high[0]) / 2) < 0.1 * half


def test_ppi_undefined_without_labels_or_units():
    empty = np.array([])
    none = ppi_mean(empty, empty, empty.astype(int), np.array([0.5, 1.0]), np.array([0, 1]), 2)
    assert none.estimate is None and none.ci is None and none.panel == 0.75
    one = ppi_mean(np.array([1.0]), np.array([1.0]), np.array([0]), np.ones(3), np.zeros(3), 1)
    assert one.estimate == 1.0 and one.ci is None and one.stderr is None and one.n_units == 1
    assert panel_interval(np.ones(3), np.zeros(3, dtype=int), 1) == (None, None)


def test_only_filings_with_items_count():
    """G is the filings with any item: units without one (another task's) change nothing."""
    y, yhat, units, yhat_all, units_all, _ = _independent(1, n=40, big_n=200)
    units, units_all = units % 8, units_all % 8
    few = ppi_mean(y, yhat, units, yhat_all, units_all, 8)
    many = ppi_mean(y, yhat, units, yhat_all, units_all, 30)
    assert few == many and few.n_units == 8
    assert panel_interval(yhat_all, units_all, 8) == panel_interval(yhat_all, units_all, 30)


def test_a_panel_that_does_not_vary_takes_lambda_zero():
    y, units = np.array([1.0, 0.0, 1.0, 1.0]), np.arange(4)
    result = ppi_mean(y, np.ones(4), units, np.ones(8), np.arange(8) % 4, 4)
    assert result.lam == 0.0 and result.estimate == 0.75


# --- coverage by simulation: filings, a biased panel, an audit sample ---

RUNS, FILINGS, PER_FILING, AUDIT = 500, 40, 100, 300
RATE_A, RATE_B = 6.0, 4.0  # each filing's rate of true yes ~ Beta(6, 4): mean θ = 0.6
FALSE_YES, FALSE_NO = 0.30, 0.05  # the panel says yes to 30% of true noes, no to 5% of yeses


def _coverage(
    seed: int, rate_a: float = RATE_A, rate_b: float = RATE_B, audit_size: int = AUDIT
) -> tuple[float, float, float]:
    """How often the nominal-95% PPI interval and the panel's own cover θ, the superpopulation
    mean of the true rate (the filings themselves are a draw), and the narrowest PPI interval's
    width."""
    theta = rate_a / (rate_a + rate_b)
    rng = np.random.default_rng(seed)
    units = np.repeat(np.arange(FILINGS), PER_FILING)
    ppi_covers = panel_covers = 0
    narrowest = 1.0
    for _ in range(RUNS):
        rate = rng.beta(rate_a, rate_b, FILINGS)[units]
        truth = rng.random(len(units)) < rate
        panel = np.where(
            truth, rng.random(len(units)) >= FALSE_NO, rng.random(len(units)) < FALSE_YES
        )
        audit = rng.choice(len(units), audit_size, replace=False)
        yhat = panel.astype(float)
        result = ppi_mean(
            truth[audit].astype(float), yhat[audit], units[audit], yhat, units, FILINGS
        )
        ci, _ = panel_interval(yhat, units, FILINGS)
        ppi_covers += result.ci[0] <= theta <= result.ci[1]
        panel_covers += ci[0] <= theta <= ci[1]
        narrowest = min(narrowest, result.ci[1] - result.ci[0])
    return ppi_covers / RUNS, panel_covers / RUNS, narrowest


def test_ppi_intervals_cover_the_peoples_mean_and_the_panels_own_do_not():
    ppi, panel, _ = _coverage(seed=2024)
    print(f"\ncoverage of nominal 95% over {RUNS} runs: PPI++ {ppi:.1%}, panel alone {panel:.1%}")
    assert ppi >= 0.93
    assert panel < 0.5


@pytest.mark.parametrize(("audit_size", "least"), [(300, 0.93), (100, 0.9), (50, 0.9)])
def test_ppi_covers_where_people_and_panel_rarely_disagree(audit_size, least):
    """θ = 0.97: the panel errs on ~6% of items, so a small audit often sees no disagreement at
    all. λ tuned on the labels it weighs covered 89% at 300 labels, and an audit without a
    disagreement gave an interval of width 0; cross-fitted λ and the `UNSEEN` floor keep it
    honest (at 50-100 labels coverage is near, not at, 95%: the interval is approximate)."""
    ppi, panel, narrowest = _coverage(seed=7, rate_a=19.4, rate_b=0.6, audit_size=audit_size)
    print(f"\nθ = 0.97, {audit_size} labels: PPI++ covers {ppi:.1%}, the panel {panel:.1%}")
    assert ppi >= least and panel < 0.5
    assert narrowest > 0.01  # never width 0: the floor of `UNSEEN` disagreements


# --- labels needed ---


def test_labels_needed_worked_by_hand():
    """h = 2 points, σ_r² = 0.1, deff = 1.5, panel stderr 0.005: z² = 1.959964² = 3.841459,
    n = 3.841459·0.1·1.5 / (0.02² − 3.841459·0.005²) = 0.5762188 / 0.0003039635 = 1895.69."""
    assert labels_needed(2, rectifier_variance=0.1, panel_stderr=0.005, design_effect=1.5) == 1896
    assert labels_needed(2, rectifier_variance=0.1) == math.ceil(3.841459 * 0.1 / 0.0004)
    # The panel's own error fills the half-width: z·0.0103 > 0.02.
    assert labels_needed(2, rectifier_variance=0.1, panel_stderr=0.0103) is None


def test_labels_needed_gives_the_half_width_asked():
    """Items independent, λ = 1: labelling as many items as asked gives about that half-width."""
    rng = np.random.default_rng(7)
    truth = rng.random(60000) < 0.6
    yhat = np.where(truth, rng.random(60000) < 0.9, rng.random(60000) < 0.35).astype(float)
    units = np.arange(60000)
    _, stderr = panel_interval(yhat, units, 60000)
    variance = float(np.var(truth - yhat, ddof=1))
    n = labels_needed(3, rectifier_variance=variance, panel_stderr=stderr)
    audit = rng.choice(60000, n, replace=False)
    result = ppi_mean(truth[audit], yhat[audit], units[audit], yhat, units, 60000, lam=1.0)
    assert 100 * _half(result.ci) == pytest.approx(3, rel=0.05)


# --- agreement with people ---

YES, NO, POOR, PARTIAL, GOOD = (
    metrics.vote_code(label) for label in (1, 0, "poor", "partial", "good")
)


def _agreement(codes, human, units=None, **kwargs):
    codes, human = np.array(codes), np.array(human)
    units = np.arange(len(human)) % 10 if units is None else np.array(units)
    names = [f"c{column}" for column in range(codes.shape[1])]
    return agreement_with_people(
        codes, human, units, int(units.max()) + 1, coders=names, seed=1, **kwargs
    )


def test_a_worked_two_by_two():
    """People yes & coder yes 20, yes & no 5, no & yes 10, no & no 15: p_o = 35/50 = 0.7,
    p_e = (25·30 + 25·20)/50² = 0.5, κ = 0.2/0.5 = 0.4."""
    human = [YES] * 25 + [NO] * 25
    coder = [YES] * 20 + [NO] * 5 + [YES] * 10 + [NO] * 15
    result = _agreement(np.array([coder]).T, human)["c0"]
    assert result["n"] == 50 and result["accuracy"] == 0.7 and result["kappa"] == 0.4
    assert result["confusion"] == {
        "no": {"no": 15, "yes": 10, "abstained": 0},
        "yes": {"no": 5, "yes": 20, "abstained": 0},
    }
    for key in ("accuracy", "kappa"):
        low, high = result[f"{key}_ci"]
        assert low <= result[key] <= high and low < high


def test_always_yes_is_chance_and_perfect_is_one():
    human = [YES] * 30 + [NO] * 20
    result = _agreement(np.array([[YES] * 50, human]).T, human)
    assert result["c0"]["accuracy"] == 0.6 and result["c0"]["kappa"] == 0.0
    assert result["c1"]["accuracy"] == 1.0 and result["c1"]["kappa"] == 1.0
    assert result["c1"]["kappa_ci"] == [1.0, 1.0]


def test_undefined_where_there_is_nothing_to_measure():
    """Both say yes to everything: chance agreement is 1 and κ is 0/0. A coder that never
    labels has no n. Items people did not label are left out."""
    human = [YES] * 10 + [-1] * 5
    codes = np.array([[YES] * 15, [-1] * 15]).T
    result = _agreement(codes, human)
    assert result["c0"]["n"] == 10 and result["c0"]["accuracy"] == 1.0
    assert result["c0"]["kappa"] is None and result["c0"]["kappa_ci"] is None
    assert result["c1"]["n"] == 0 and result["c1"]["accuracy"] is None
    assert result["c1"]["kappa"] is None and result["c1"]["accuracy_ci"] is None
    assert result["c1"]["confusion"] == {"yes": {"yes": 0, "abstained": 10}}


def test_abstentions_are_counted_apart():
    """Levels: an abstention (-1) and a missing vote (-2) are neither right nor wrong."""
    human = [GOOD, GOOD, PARTIAL, POOR, POOR, GOOD]
    coder = [GOOD, -1, PARTIAL, PARTIAL, -2, GOOD]
    result = _agreement(np.array([coder]).T, human)["c0"]
    assert result["n"] == 4 and result["accuracy"] == 0.75
    # p_e = (people good 2·coder good 2 + partial 1·2 + poor 1·0)/16 = 6/16; κ = (0.75-0.375)/0.625
    assert result["kappa"] == 0.6
    assert result["confusion"] == {
        "poor": {"poor": 0, "partial": 1, "good": 0, "abstained": 1},
        "partial": {"poor": 0, "partial": 1, "good": 0, "abstained": 0},
        "good": {"poor": 0, "partial": 0, "good": 2, "abstained": 1},
    }


def test_one_filing_has_no_interval():
    human = [YES, NO, YES, NO]
    result = _agreement(np.array([[YES, NO, NO, NO]]).T, human, units=[0, 0, 0, 0])["c0"]
    assert result["accuracy"] == 0.75 and result["accuracy_ci"] is None


# --- α with people as one more coder ---

JUDGE_CODES = np.array(
    [
        [YES, YES, NO],
        [NO, NO, NO],
        [YES, NO, YES],
        [YES, YES, YES],
        [NO, YES, NO],
        [YES, YES, -1],
        [NO, NO, YES],
        [YES, YES, YES],
    ]
)


def test_alpha_with_people_is_krippendorffs():
    human = np.array([YES, NO, YES, YES, NO, YES, NO, -1])
    result = alpha_with_people(JUDGE_CODES, human, np.arange(8) % 4, 4, ordered=False, seed=3)
    labeled = np.column_stack([JUDGE_CODES, human])[human >= 0].astype(float)
    labeled[labeled < 0] = np.nan
    reference = krippendorff.alpha(reliability_data=labeled.T, level_of_measurement="nominal")
    assert result["alpha"] == round(reference, 4) and result["n_items"] == 7
    assert result["ci"][0] <= result["alpha"] <= result["ci"][1]


def test_people_who_agree_with_the_judges_raise_alpha():
    units = np.arange(8) % 4
    majority = metrics.Outcomes.of(JUDGE_CODES, np.full(8, 3)).label
    judges = Coincidences.of(
        JUDGE_CODES, units, 4, ordered=False, code_scores=metrics.code_scores()
    ).agreement()["alpha"]
    agreeing = alpha_with_people(JUDGE_CODES, majority, units, 4, ordered=False)["alpha"]
    contrary = alpha_with_people(JUDGE_CODES, 1 - majority, units, 4, ordered=False)["alpha"]
    assert contrary < judges < agreeing


def test_alpha_with_people_on_levels_is_ordinal_too():
    codes = np.array(
        [[GOOD, GOOD], [PARTIAL, GOOD], [POOR, PARTIAL], [POOR, POOR], [GOOD, PARTIAL]]
    )
    human = np.array([GOOD, PARTIAL, POOR, POOR, GOOD])
    result = alpha_with_people(codes, human, np.arange(5), 5, ordered=True)
    scores = metrics.code_scores()[np.column_stack([codes, human])].T
    for key, level in (("alpha", "nominal"), ("ordinal", "ordinal")):
        reference = krippendorff.alpha(reliability_data=scores, level_of_measurement=level)
        assert result[key] == round(reference, 4)


def test_a_weighted_audit_weighs_each_label_by_one_over_its_chance():
    """With unequal chances of being drawn, the rectifier's mean is Σ (y − λ·ŷ)/π / Σ 1/π (the
    Hájek mean), written out here for plain PPI; equal chances give the unweighted estimate."""
    rng = np.random.default_rng(8)
    units_all = np.arange(400) % 20
    yhat_all = (rng.random(400) < 0.7).astype(float)
    chance = np.where(rng.random(400) < 0.3, 0.5, 0.1)
    drawn = np.flatnonzero(rng.random(400) < chance)
    y = np.where(rng.random(len(drawn)) < 0.8, yhat_all[drawn], 1 - yhat_all[drawn])
    found = ppi_mean(
        y,
        yhat_all[drawn],
        units_all[drawn],
        yhat_all,
        units_all,
        20,
        lam=1.0,
        inclusion=chance[drawn],
    )
    weights = 1 / chance[drawn]
    by_hand = yhat_all.mean() + np.sum(weights * (y - yhat_all[drawn])) / weights.sum()
    assert found.estimate == pytest.approx(by_hand, abs=1e-12)
    assert found.ci[0] < found.estimate < found.ci[1]
    same = ppi_mean(
        y,
        yhat_all[drawn],
        units_all[drawn],
        yhat_all,
        units_all,
        20,
        lam=1.0,
        inclusion=np.full(len(drawn), 0.25),
    )
    plain = ppi_mean(y, yhat_all[drawn], units_all[drawn], yhat_all, units_all, 20, lam=1.0)
    assert same.estimate == pytest.approx(plain.estimate, abs=1e-12)
    assert same.ci == pytest.approx(plain.ci, abs=1e-12)
