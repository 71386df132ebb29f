"""The statistics with answers known in advance: the filing bootstrap against the span bootstrap,
Krippendorff's α and its interval on his own example, and leave-one-judge-out by hand."""

import random

import krippendorff
import numpy as np
import pytest

from finreflect_eval.stats import uncertainty
from finreflect_eval.stats.metrics import Item, krippendorff_alpha, score_criterion

JUDGES = ["a", "b", "c"]


def _run(filings: int, spans_per_filing: int, triples: int, *, clustered: bool, seed: int):
    """Faithfulness items, the judges unanimous; each span's outcome drawn once per filing
    (`clustered`: a filing's spans all alike) or once per span (independent)."""
    rng = random.Random(seed)
    items = []
    for filing in range(filings):
        shared = rng.random() < 0.5
        for span in range(spans_per_filing):
            outcome = int(shared if clustered else rng.random() < 0.5)
            span_id = f"F{filing}_s{span}"
            items += [
                Item(
                    span_id, "faithfulness", t, dict.fromkeys(JUDGES, outcome), filing=f"F{filing}"
                )
                for t in range(triples)
            ]
    return score_criterion(items, JUDGES, aggregation="micro", seed=seed)


@pytest.mark.parametrize("spans_per_filing", [4, 9])
def test_clustered_spans_widen_the_interval_by_the_square_root_of_the_cluster_size(
    spans_per_filing,
):
    scores = _run(200, spans_per_filing, 3, clustered=True, seed=1)
    width = (scores.ci[1] - scores.ci[0]) / (scores.ci_span[1] - scores.ci_span[0])
    print(f"\nclustered, {spans_per_filing} spans per filing: filing/span width {width:.3f}")
    assert width == pytest.approx(spans_per_filing**0.5, rel=0.1)


def test_independent_spans_give_the_same_interval_by_filing_and_by_span():
    scores = _run(200, 4, 3, clustered=False, seed=2)
    width = (scores.ci[1] - scores.ci[0]) / (scores.ci_span[1] - scores.ci_span[0])
    print(f"\nindependent spans: filing/span width {width:.3f}")
    assert width == pytest.approx(1, rel=0.1)


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": four observers, twelve
# units, values 1-5 with missing ones. Published: nominal α = 0.743, ordinal α = 0.815.
_N = None
TEXTBOOK = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, _N, _N, _N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _N, 3],
    [_N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _N],
]


def _textbook_codes() -> np.ndarray:
    """Units × observers, -1 where missing."""
    return np.array([[-1 if v is None else v for v in row] for row in TEXTBOOK]).T


@pytest.mark.parametrize(("level", "published"), [("nominal", 0.743), ("ordinal", 0.815)])
def test_alpha_is_krippendorffs_published_value(level, published):
    counts = uncertainty.value_counts(_textbook_codes(), [1, 2, 3, 4, 5])
    value = float(uncertainty.alpha(uncertainty.coincidences(counts).sum(axis=0), level))
    assert round(value, 3) == published


def test_the_panels_alpha_on_the_textbook_example_is_the_published_one():
    labels = {1: 0, 2: 1, 3: "poor", 4: "partial", 5: "good"}  # five distinct nominal labels
    judges = [f"j{i}" for i in range(len(TEXTBOOK))]
    items = [
        Item(
            f"u{unit}",
            "faithfulness",
            0,
            {
                j: None if row[unit] is None else labels[row[unit]]
                for j, row in zip(judges, TEXTBOOK, strict=True)
            },
        )
        for unit in range(len(TEXTBOOK[0]))
    ]
    result = krippendorff_alpha(items, judges, seed=1)
    assert round(result["alpha"], 3) == 0.743 and result["reason"] is None
    assert result["ci"][0] < result["alpha"] < result["ci"][1]


@pytest.mark.parametrize("level", ["nominal", "ordinal"])
def test_alpha_interval_is_the_reference_alpha_of_each_resample(level):
    """Each bootstrap replicate's α (a weighted sum of per-unit coincidences) equals the
    `krippendorff` package's α on the resampled units themselves, so the interval is the
    percentile interval of the reference implementation over the same draws."""
    codes = _textbook_codes()
    per_unit = uncertainty.coincidences(uncertainty.value_counts(codes, [1, 2, 3, 4, 5]))
    resampling = uncertainty.Resampling(len(codes), seed=3, iterations=200)
    ours = uncertainty.alpha(resampling.totals(per_unit), level)
    reference = []
    for weights in resampling.weights():
        for row in weights.astype(int):
            drawn = np.repeat(codes, row, axis=0).astype(float)
            drawn[drawn < 0] = np.nan
            try:
                reference.append(
                    krippendorff.alpha(
                        reliability_data=drawn.T,
                        level_of_measurement=level,
                        value_domain=[1, 2, 3, 4, 5],
                    )
                )
            except ValueError:  # a resample with one value only: undefined, as ours
                reference.append(np.nan)
    np.testing.assert_allclose(ours, reference, rtol=1e-9, atol=1e-12)
    ci, _ = uncertainty.interval(ours)
    print(f"\ntextbook α {level}: 95% interval by unit {ci[0]:.3f}–{ci[1]:.3f} (200 draws)")
    assert ci[0] < {"nominal": 0.743, "ordinal": 0.815}[level] < ci[1]


def test_panel_alpha_has_an_interval_and_an_ordinal_value_for_ordered_labels():
    rng = random.Random(4)
    labels = ["poor", "partial", "good"]
    items = []
    for span in range(120):
        truth = rng.randrange(3)
        votes = {j: labels[min(2, max(0, truth + rng.choice([0, 0, 0, 1, -1])))] for j in JUDGES}
        items.append(Item(f"s{span}", "comprehensiveness", 0, votes, filing=f"F{span // 4}"))
    agreement = krippendorff_alpha(items, JUDGES, seed=5)
    data = np.array([[labels.index(item.votes[j]) for item in items] for j in JUDGES], dtype=float)
    for key, level in (("alpha", "nominal"), ("ordinal", "ordinal")):
        reference = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert agreement[key] == pytest.approx(reference, abs=1e-4)
    assert agreement["ordinal"] > agreement["alpha"]  # near misses count as near
    assert agreement["ci"][0] < agreement["alpha"] < agreement["ci"][1]
    assert agreement["ordinal_ci"][0] < agreement["ordinal"] < agreement["ordinal_ci"][1]
    binary = krippendorff_alpha(
        [Item("s", "faithfulness", 0, {"a": 1, "b": 0, "c": 1})] * 3, JUDGES, seed=5
    )
    assert binary["ordinal"] is None  # two values: the ordinal α is the nominal one


def test_leaving_out_a_judge_who_always_says_yes_moves_faithfulness_by_hand_computed_amount():
    rng = random.Random(6)
    votes = [(rng.randrange(2), rng.randrange(2)) for _ in range(400)]
    items = [
        Item(f"s{i // 10}", "faithfulness", i % 10, {"a": a, "b": b, "c": 1})
        for i, (a, b) in enumerate(votes)
    ]
    scores = score_criterion(items, JUDGES, aggregation="micro", seed=0)
    n = len(votes)
    # Full panel: c's 1 decides every split, so an item passes when a or b says 1.
    assert scores.score == pytest.approx(100 * sum(a or b for a, b in votes) / n, abs=1e-3)
    # Without c: a and b must agree on 1 (a 1-0 split has no majority: the conservative 0).
    assert scores.without_judge["c"] == pytest.approx(
        100 * sum(a and b for a, b in votes) / n, abs=1e-3
    )
    shift = scores.score - scores.without_judge["c"]
    assert shift == pytest.approx(100 * sum(a != b for a, b in votes) / n, abs=1e-3)
    # Without a: b with c (always 1) passes exactly when b says 1.
    assert scores.without_judge["a"] == pytest.approx(100 * sum(b for _, b in votes) / n, abs=1e-3)
    print(f"\nwithout the always-1 judge faithfulness moves {-shift:+.2f} points")


def _filing_table(rng: random.Random, pass_rate: float, filings: int = 30):
    """A run's per-filing sums and counts of one micro-averaged criterion (10 items a filing)."""
    sums = np.array([[sum(rng.random() < pass_rate for _ in range(10))] for _ in range(filings)])
    counts = np.full((filings, 1), 10.0)
    ids = [f"F{i}" for i in range(filings)]
    return float(100 * sums.sum() / counts.sum()), ids, sums.astype(float), counts


def test_identical_runs_are_tied_and_a_clearly_better_one_is_not():
    rng = random.Random(8)
    same = _filing_table(rng, 0.5)
    better = _filing_table(rng, 0.9)
    comparison = uncertainty.compare([same, same, better])
    assert comparison.difference(0, 1) == (0.0, [0.0, 0.0])
    assert comparison.tied(0, 1) and not comparison.tied(2, 0) and not comparison.tied(2, 1)
    assert comparison.rank_ranges() == [(2, 3), (2, 3), (1, 1)]
    close = _filing_table(random.Random(9), 0.52)
    near = uncertainty.compare([same, close])
    print(f"\n0.50 vs 0.52 over 30 filings: difference {near.difference(1, 0)}")
    assert near.tied(0, 1) and near.rank_ranges() == [(1, 2), (1, 2)]


def _board(rng, delta=0.0, entries=10, filings=20, items=40):
    """A leaderboard's entries on the same filings: each filing has its own difficulty, which
    every entry shares; entry 0 is better by `delta` points."""
    difficulty = rng.uniform(0.55, 0.9, filings)
    ids = [f"F{i}" for i in range(filings)]
    runs = []
    for entry in range(entries):
        rate = np.clip(difficulty + (delta / 100 if entry == 0 else 0), 0, 1)
        sums = rng.binomial(items, rate).astype(float).reshape(-1, 1)
        counts = np.full((filings, 1), float(items))
        runs.append((float(100 * sums.sum() / counts.sum()), ids, sums, counts))
    return runs


def test_separations_hold_together_on_a_whole_board():
    """Of 200 boards of 10 equal entries on 20 filings, at most 5% show any separation (the
    family-wise error); an entry truly better by 14 points is told apart from all nine others
    in at least 80% of boards."""
    rng = np.random.default_rng(2026)
    false = sum(
        any(not c.tied(a, b) for a in range(10) for b in range(a))
        for c in (uncertainty.compare(_board(rng)) for _ in range(200))
    )
    found = sum(
        all(not c.tied(0, b) for b in range(1, 10))
        for c in (uncertainty.compare(_board(rng, delta=14)) for _ in range(200))
    )
    print(f"\nnull boards with a separation: {false}/200; a 14-point lead found: {found}/200")
    assert false <= 10 and found >= 160


def test_a_difference_interval_is_the_filing_bootstrap_one_and_draws_nothing():
    """The linearised standard error of a difference is what a filing bootstrap written here
    finds; the calls depend on the scores only (the same in any order of the runs)."""
    rng = np.random.default_rng(7)
    a, b = _board(rng, delta=3, entries=2, filings=30, items=25)
    comparison = uncertainty.compare([a, b])
    draws = rng.integers(0, 30, size=(20_000, 30))
    ratio = lambda run: 100 * run[2][draws, 0].sum(1) / run[3][draws, 0].sum(1)  # noqa: E731
    bootstrap = float(np.std(ratio(a) - ratio(b), ddof=1))
    assert comparison.stderr(0, 1) == pytest.approx(bootstrap * (30 / 29) ** 0.5, rel=0.05)
    difference, ci = comparison.difference(0, 1)
    t_95 = 2.0452  # Student's t, 29 degrees of freedom, one pair
    assert ci == pytest.approx(
        [difference - t_95 * comparison.stderr(0, 1), difference + t_95 * comparison.stderr(0, 1)],
        rel=1e-3,
    )
    swapped = uncertainty.compare([b, a])
    assert swapped.difference(1, 0) == comparison.difference(0, 1)


def test_two_filings_cannot_separate_close_runs():
    """With two filings the t multiplier has one degree of freedom (12.7 for one pair): an
    interval that honest cannot call a 2-point difference."""
    rng = np.random.default_rng(1)
    a, b = _board(rng, delta=2, entries=2, filings=2, items=200)
    comparison = uncertainty.compare([a, b])
    assert comparison.critical == pytest.approx(12.706, rel=1e-3)
    assert comparison.tied(0, 1)
    assert uncertainty.compare([a]).difference(0, 0)[1] is None  # nothing to compare


def test_kendall_tau_of_rankings():
    assert uncertainty.kendall_tau([3, 2, 1], [30, 20, 10]) == pytest.approx(1)
    assert uncertainty.kendall_tau([3, 2, 1], [10, 20, 30]) == pytest.approx(-1)
    assert uncertainty.kendall_tau([1.0], [2.0]) is None
