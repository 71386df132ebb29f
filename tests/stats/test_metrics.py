"""Aggregation, averages, bootstrap CIs and Krippendorff's α against hand-computed values."""

import math
import random

import krippendorff
import numpy as np
import pytest

from finreflect_eval.stats.averages import SpanScores, macro_average, micro_average
from finreflect_eval.stats.metrics import (
    Item,
    Outcomes,
    aggregate,
    code_label,
    judge_influence,
    krippendorff_alpha,
    score_criterion,
    vote_code,
)

JUDGES = ["a", "b", "c"]


def by_span(scores: dict[str, list[float]]) -> SpanScores:
    """Each span's scores as `SpanScores` (spans without any left out)."""
    kept = {span: values for span, values in scores.items() if values}
    sums = np.array([sum(values) for values in kept.values()], dtype=float)
    return SpanScores(list(kept), sums, np.array([len(v) for v in kept.values()]))


def test_unanimous():
    outcome = aggregate({"a": 1, "b": 1, "c": 1})
    assert outcome.label == 1 and outcome.unanimous and not outcome.split


def test_two_one_split_takes_the_majority_and_is_flagged():
    outcome = aggregate({"a": 1, "b": 0, "c": 1})
    assert outcome.label == 1 and outcome.split and not outcome.unanimous
    assert not outcome.no_majority


def test_one_abstention_still_scores_but_is_not_unanimous():
    outcome = aggregate({"a": 0, "b": None, "c": 0})
    assert outcome.label == 0 and outcome.scored and not outcome.unanimous and not outcome.split


def test_two_abstentions_leave_the_item_unscored():
    assert not aggregate({"a": 1, "b": None, "c": None}).scored
    all_abstain = aggregate({"a": None, "b": None, "c": None})
    assert not all_abstain.scored and all_abstain.score is None


def test_no_majority_takes_the_most_conservative_label():
    outcome = aggregate({"a": "good", "b": "partial", "c": "poor"})
    assert outcome.label == "poor" and outcome.no_majority and outcome.split
    tie = aggregate({"a": 1, "b": 0, "c": None})
    assert tie.label == 0 and tie.no_majority


@pytest.mark.parametrize("labels", [(0, 1), ("poor", "partial", "good")])
def test_the_vectorised_rule_is_the_item_rule(labels):
    rng = random.Random(7)
    votes = [
        {j: rng.choice([*labels, None]) for j in rng.sample(JUDGES, rng.randint(1, 3))}
        for _ in range(3000)
    ]
    codes = np.array([[vote_code(v[j]) if j in v else -2 for j in JUDGES] for v in votes])
    outcomes = Outcomes.of(codes, np.array([len(v) for v in votes]))
    for row, vote in enumerate(votes):
        one = aggregate(vote)
        label = code_label(outcomes.label[row]) if outcomes.scored[row] else None
        assert (label, outcomes.unanimous[row], outcomes.split[row]) == (
            one.label,
            one.unanimous,
            one.split,
        )
        assert outcomes.no_majority[row] == one.no_majority


def test_micro_and_macro_differ():
    # span s1: one triple judged 1; span s2: three triples judged 0
    per_span = by_span({"s1": [1.0], "s2": [0.0, 0.0, 0.0]})
    assert micro_average(per_span) == pytest.approx(0.25)
    assert macro_average(per_span) == pytest.approx(0.5)


def test_criterion_scores_are_percentages_with_counts():
    items = [
        Item("s1", "faithfulness", 0, {"a": 1, "b": 1, "c": 1}),
        Item("s2", "faithfulness", 0, {"a": 0, "b": 1, "c": 0}),
        Item("s2", "faithfulness", 1, {"a": 0, "b": 0, "c": 0}),
        Item("s2", "faithfulness", 2, {"a": None, "b": None, "c": 1}),
    ]
    scores = score_criterion(items, JUDGES, aggregation="micro", seed=0)
    assert scores.score == pytest.approx(100 / 3, abs=1e-3)  # 1 of 3 scored triples
    assert (scores.n_items, scores.n_scored, scores.unanimous, scores.split) == (4, 3, 2, 1)
    assert scores.abstentions == 2
    assert scores.per_judge["a"] == pytest.approx(33.3333, abs=1e-3)  # 1 of 3
    assert scores.per_judge["b"] == pytest.approx(66.6667, abs=1e-3)  # 2 of 3
    assert scores.per_judge["c"] == pytest.approx(50.0)  # 2 of 4


def test_comprehensiveness_maps_levels_and_macro_averages():
    items = [
        Item("s1", "comprehensiveness", 0, {"a": "good", "b": "good", "c": "partial"}),
        Item("s2", "comprehensiveness", 0, {"a": "partial", "b": "partial", "c": "poor"}),
    ]
    scores = score_criterion(items, JUDGES, aggregation="macro", seed=0)
    assert scores.score == pytest.approx(75.0)


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    items = [
        Item(f"s{i}", "faithfulness", t, {"a": v, "b": v, "c": v})
        for i in range(20)
        for t, v in enumerate((i % 2, 1))
    ]
    first = score_criterion(items, JUDGES, aggregation="micro", seed=7)
    again = score_criterion(items, JUDGES, aggregation="micro", seed=7)
    assert (first.ci, first.stderr, first.ci_span) == (again.ci, again.stderr, again.ci_span)
    assert first.ci[0] <= first.score <= first.ci[1]
    assert 0 < first.stderr < first.ci[1] - first.ci[0]  # about a quarter of a 95% interval
    all_good = [
        Item(f"s{i}", "comprehensiveness", 0, dict.fromkeys(JUDGES, "good")) for i in (1, 2)
    ]
    both = score_criterion(all_good, JUDGES, aggregation="macro", seed=1)
    assert (both.ci, both.stderr) == ([100.0, 100.0], 0.0)
    assert score_criterion([], JUDGES, aggregation="micro", seed=1).ci is None


def _items(matrix):
    """Items from judges x units rows (None: missing)."""
    judges = [f"j{i}" for i in range(len(matrix))]
    units = len(matrix[0])
    return judges, [
        Item(f"s{u}", "faithfulness", 0, {j: row[u] for j, row in zip(judges, matrix, strict=True)})
        for u in range(units)
    ]


@pytest.mark.parametrize(
    ("matrix", "reason"),
    [
        ([[1, 1, 1], [1, 1, 1], [1, 1, 1]], "more than one value"),  # perfect but degenerate
        ([[1, None], [None, 0]], "at least two judges"),  # no unit with two votes
        ([[1, 0, 1]], "fewer than two judges"),  # one judge
        ([[None, None], [None, None]], "at least two judges"),  # every judge abstained
        ([[1], [1], [1]], "more than one value"),  # one item
        # The items with two votes agree; the other label sits on an item with a single vote,
        # which cannot be paired: no disagreement is observable, α is 0/0.
        ([[1, 1, 0], [1, 1, None]], "undefined"),
        ([[1, 1, 0], [1, 1, None], [1, 1, None]], "undefined"),
    ],
)
def test_alpha_undefined_cases_are_null_with_a_reason(matrix, reason):
    judges, items = _items(matrix)
    for seed in (None, 3):  # with and without its interval
        result = krippendorff_alpha(items, judges, seed=seed)
        assert result["alpha"] is None and result["ci"] is None
        assert reason in result["reason"]
        assert result["below_gate"] is False  # undefined is neither under the gate nor over it


def test_alpha_of_full_agreement_with_variation_is_one():
    judges, items = _items([[1, 0, 1, 0], [1, 0, 1, 0], [1, 0, 1, 0]])
    assert math.isclose(krippendorff_alpha(items, judges)["alpha"], 1.0)


def test_the_evaluate_module_gives_the_same_scores(tmp_path, monkeypatch):
    import evaluate  # a core dependency: never skipped

    from finreflect_eval.stats.metrics import EVALUATE_MODULE, score_items

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    rows = [
        ("s1", "faithfulness", ["1", "1", "0"]),
        ("s1", "faithfulness", ["0", "0", ""]),
        ("s2", "faithfulness", ["1", "1", "1"]),
        ("s1", "comprehensiveness", ["good", "partial", "partial"]),
        ("s2", "comprehensiveness", ["poor", "poor", "good"]),
    ]
    metric = evaluate.load(str(EVALUATE_MODULE))
    result = metric.compute(
        span_id=[r[0] for r in rows],
        criterion=[r[1] for r in rows],
        votes=[r[2] for r in rows],
        judges=JUDGES,
    )
    labels = {"1": 1, "0": 0, "": None}
    items = [
        Item(span, c, i, {j: labels.get(v, v) for j, v in zip(JUDGES, votes, strict=True)})
        for i, (span, c, votes) in enumerate(rows)
    ]
    direct = score_items(items, JUDGES, seed=1234)
    assert result["faithfulness"] == direct["faithfulness"]["score"] == pytest.approx(200 / 3)
    assert result["comprehensiveness"] == pytest.approx(25.0)
    assert result["faithfulness_ci"] == direct["faithfulness"]["ci"]
    assert result["comprehensiveness_per_judge"] == {"a": 50.0, "b": 25.0, "c": 75.0}


def test_the_evaluate_module_gives_comprehensiveness_its_ordinal_alpha(tmp_path, monkeypatch):
    """Against the krippendorff package on the same votes, levels ordered poor < partial <
    good: the ordinal α, which differs from the nominal one here (near misses count less)."""
    import evaluate

    from finreflect_eval.stats.metrics import EVALUATE_MODULE

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    votes = [
        ["good", "good", "partial"],
        ["poor", "partial", "poor"],
        ["good", "partial", "good"],
        ["poor", "poor", "poor"],
        ["partial", "good", "partial"],
        ["good", "poor", "good"],
    ]
    metric = evaluate.load(str(EVALUATE_MODULE))
    result = metric.compute(
        span_id=[f"s{i}" for i in range(len(votes))],
        criterion=["comprehensiveness"] * len(votes),
        votes=votes,
        judges=JUDGES,
    )
    rank = {"poor": 0, "partial": 1, "good": 2}
    data = np.array([[rank[v] for v in row] for row in votes], float).T  # judges × items
    ordinal = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal")
    nominal = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert abs(ordinal - nominal) > 0.05
    assert result["comprehensiveness_alpha_ordinal"] == pytest.approx(ordinal, abs=1e-4)
    assert result["comprehensiveness_alpha"] == pytest.approx(nominal, abs=1e-4)
    assert "faithfulness_alpha_ordinal" not in result


def _panel_items(rng, leniency, n=3000):
    """Triples judged by three judges: each item is true with probability 0.75; a judge sees
    the truth with probability 0.85 and otherwise says yes with its `leniency`."""
    items = []
    for i in range(n):
        truth = rng.random() < 0.75
        votes = {
            judge: int(truth if rng.random() < 0.85 else rng.random() < lenient)
            for judge, lenient in leniency.items()
        }
        items.append(Item(f"s{i // 5}", "faithfulness", i % 5, votes, filing=f"F{i // 100}"))
    return items


def test_judge_influence_is_near_zero_for_exchangeable_judges_and_largest_for_a_lenient_one():
    rng = random.Random(11)
    same = {"a": 0.5, "b": 0.5, "c": 0.5}
    scores = score_criterion(_panel_items(rng, same), list(same), aggregation="micro", seed=1)
    drops = {j: scores.score - without for j, without in scores.without_judge.items()}
    print(f"\nexchangeable: drop without each judge {drops}, influence {scores.judge_influence}")
    assert all(drop > 3 for drop in drops.values())  # the 1-1 tie rule lowers every leave-out
    assert sum(abs(v) for v in scores.judge_influence.values()) / 3 <= 1
    lenient = {"a": 0.5, "b": 0.5, "easy": 0.95}
    scores = score_criterion(_panel_items(rng, lenient), list(lenient), aggregation="micro", seed=1)
    print(f"one lenient: influence {scores.judge_influence}")
    influence = scores.judge_influence
    assert max(influence, key=influence.get) == "easy" and influence["easy"] > 2
    assert judge_influence({"a": 70.0, "b": None}) == {"a": None, "b": None}
    assert judge_influence({"a": 70.0}) == {"a": None}


def test_few_filings_give_a_wide_interval_marked_unreliable():
    """Two filings: a bootstrap could only reshuffle them (every studentized replicate is the
    estimate itself); the interval is then the clustered t one with one degree of freedom,
    wider than the span bootstrap's, and says it is unreliable. From 12 filings on:
    reliable."""
    rng = random.Random(5)
    judges = ["a", "b", "c"]

    def items(filings):
        labels = [int(rng.random() < 0.5) for _ in range(400)]
        return [
            Item(f"s{i}", "faithfulness", 0, dict.fromkeys(judges, y), filing=f"F{i % filings}")
            for i, y in enumerate(labels)
        ]

    two = items(2)
    few = score_criterion(two, judges, aggregation="micro", seed=1)
    assert (few.n_filings, few.ci_reliable) == (2, False) and "bootstrap-t" in few.ci_method
    assert few.ci[1] - few.ci[0] > few.ci_span[1] - few.ci_span[0]
    # By hand: each filing's linearised influence on the rate, the G/(G-1) factor, t(1 df).
    passed = {f: sum(it.votes["a"] for it in two if it.filing == f) for f in ("F0", "F1")}
    rate = sum(passed.values()) / 400
    stderr = math.sqrt(2 * sum(((k - rate * 200) / 400) ** 2 for k in passed.values()))
    expected = [100 * (rate - 12.7062 * stderr), 100 * (rate + 12.7062 * stderr)]
    assert few.ci == pytest.approx(expected, abs=0.01)
    many = score_criterion(items(12), judges, aggregation="micro", seed=1)
    assert (many.n_filings, many.ci_reliable) == (12, True) and "bootstrap-t" in many.ci_method
    eleven = score_criterion(items(11), judges, aggregation="micro", seed=1)
    assert eleven.ci_reliable is False
