"""The results' `judges_worth` block, against the test's own reading of the run's files: each
judge's accuracy and κ with people (scikit-learn), the pairwise correlations of the judges'
errors and Kish's effective number (numpy), the best single judge against the majority (by
hand), and against the panel each judge beside the other two."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score
from support.human_labels import label_run
from support.runs import panel_file, scripted_run

from finreflect_eval.records import HumanLabel, SampleRecord, read_lines

TASK = "finreflect_smoke_single_pass"
JUDGES = ["judge-0", "judge-1", "judge-2"]


@pytest.fixture(scope="module")
def labeled(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("worth")
    panel = panel_file(folder, "gold_labels", "accepts_all", "gold_labels")
    run = scripted_run(folder, "cand", None, panel).parent
    shutil.copytree(run, folder / "labeled")
    return label_run(folder / "labeled", audit_sample=20, seed=11)


def _votes(run: Path, criterion: str) -> dict[tuple[str, int], list[int]]:
    """Per (span, triple), each judge's verdict, read from the samples."""
    records = read_lines(SampleRecord, next(run.glob(f"samples_{TASK}_*.jsonl")))
    panel = next(iter(records[0].votes))
    found = {}
    for record in records:
        cast = record.votes[panel].get(criterion, {})
        for index in range(len(record.triples)):
            found[record.span_id, index] = [cast[judge][index].verdict for judge in JUDGES]
    return found


def test_each_judge_and_the_majority_against_people_are_sklearns_and_numpys(labeled):
    worth = json.loads(next(labeled.glob("results_*.json")).read_text())["judges_worth"]
    people = worth[TASK]["faithfulness"]["people"]
    labels = read_lines(HumanLabel, next(labeled.glob("human_labels_*.jsonl")))
    truth = {
        (label.span_id, label.triple_index): label.label
        for label in labels
        if label.criterion == "faithfulness" and label.sample == "audit"
    }
    votes = _votes(labeled, "faithfulness")
    keys = sorted(truth)
    y = np.array([truth[key] for key in keys])
    cast = np.array([votes[key] for key in keys])
    assert people["n_items"] == len(keys) == 20 and people["agreement_on"] == "audit"
    for column, judge in enumerate(JUDGES):
        found = people["judges"][judge]
        assert found["accuracy"] == pytest.approx(accuracy_score(y, cast[:, column]), abs=1e-4)
        expected = cohen_kappa_score(y, cast[:, column])
        assert found["kappa"] == (None if np.isnan(expected) else pytest.approx(expected, abs=1e-4))
    majority = (cast.sum(axis=1) >= 2).astype(int)
    assert people["majority"]["accuracy"] == pytest.approx(accuracy_score(y, majority), abs=1e-4)
    errors = (cast != y[:, None]).astype(float)
    pairs = {tuple(pair["judges"]): pair["correlation"] for pair in people["error_correlation"]}
    defined = []
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        spread = errors[:, a].std() * errors[:, b].std()
        expected = np.corrcoef(errors[:, a], errors[:, b])[0, 1] if spread else None
        got = pairs[JUDGES[a], JUDGES[b]]
        assert got == (None if expected is None else pytest.approx(expected, abs=1e-4))
        if expected is not None:
            defined.append(expected)
    mean = np.mean(defined)
    assert people["mean_error_correlation"] == pytest.approx(mean, abs=1e-4)
    # Kish's number, capped at 3 (these judges' errors go against each other: r̄ < 0)
    assert people["effective_judges"] == pytest.approx(3 / (1 + 2 * max(mean, 0)), abs=1e-3)
    # The best judge (accuracy, then κ) against the majority, by hand.
    accuracy = [np.mean(cast[:, column] == y) for column in range(3)]
    best = people["best_judge"]
    assert accuracy[JUDGES.index(best)] == max(accuracy)
    difference = 100 * (np.mean(cast[:, JUDGES.index(best)] == y) - np.mean(majority == y))
    assert people["best_minus_majority"] == pytest.approx(difference, abs=1e-3)
    assert people["best_as_good"] == (people["best_minus_majority_ci"][1] >= 0)


def test_against_the_panel_each_judge_meets_the_other_two(labeled):
    """Without labels too: a judge against the strict majority of the other two (where they
    agree), scikit-learn's accuracy on those items."""
    worth = json.loads(next(labeled.glob("results_*.json")).read_text())["judges_worth"]
    panel = worth[TASK]["faithfulness"]["panel"]
    cast = np.array(list(_votes(labeled, "faithfulness").values()))
    for column, judge in enumerate(JUDGES):
        others = np.delete(cast, column, axis=1)
        agree = others[:, 0] == others[:, 1]
        expected = accuracy_score(others[agree, 0], cast[agree, column])
        assert panel["judges"][judge]["n"] == agree.sum()
        assert panel["judges"][judge]["accuracy"] == pytest.approx(expected, abs=1e-4)


def test_results_written_before_the_block_have_none(labeled):
    """A results file without `judges_worth` (scored before it existed) reads as an empty block
    and is written without one, so the leaderboard compares it without the block."""
    from finreflect_eval.records import Results

    path = next(labeled.glob("results_*.json"))
    data = json.loads(path.read_text())
    data.pop("judges_worth")
    old = Results.model_validate(data)
    assert old.judges_worth == {} and "judges_worth" not in json.loads(old.to_json())
