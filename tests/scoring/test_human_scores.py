"""The results' `human` block, checked against the test's own reading of the files: which items
people labelled (the annotators' majority; a tie left out and counted), the panel's decisions
on them, the prediction-powered estimate from the audit, and labels that do not belong to the
run refused in one line with nothing lost."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from support.human_labels import annotated, label_run
from support.runs import panel_file, scripted_run

from finreflect_eval.records import HumanLabel, SampleRecord, read_lines
from finreflect_eval.stats.human import ppi_mean

TASK = "finreflect_smoke_single_pass"


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("human-scores")
    panel = panel_file(folder, "accepts_all", "rejects_all", "gold_labels")
    return scripted_run(folder, "cand", 8, panel).parent


@pytest.fixture
def run(judged, tmp_path) -> Path:
    shutil.copytree(judged, tmp_path / "run")
    return tmp_path / "run"


def results(run: Path) -> dict:
    return json.loads(next(run.glob("results_*.json")).read_text())


def panel_labels(run: Path, criterion: str) -> dict[tuple[str, int], int]:
    """Per (span, triple) the panel's majority on a triple criterion, read from the samples."""
    records = read_lines(SampleRecord, next(run.glob(f"samples_{TASK}_*.jsonl")))
    panel = next(iter(records[0].votes))
    majority = {}
    for record in records:
        by_judge = record.votes[panel].get(criterion, {})
        for index in range(len(record.triples)):
            votes = [by_judge[j][index].verdict for j in by_judge if index < len(by_judge[j])]
            valid = [v for v in votes if v is not None]
            if len(valid) >= 2:
                top = Counter(valid).most_common()
                tie = len(top) > 1 and top[0][1] == top[1][1]
                majority[record.span_id, index] = min(valid) if tie else top[0][0]
    return majority


def test_the_ppi_estimate_and_agreement_follow_from_the_labels(run):
    label_run(run, audit_sample=6, seed=3)
    check = results(run)["human"][TASK]["faithfulness"]
    labels = read_lines(HumanLabel, next(run.glob("human_labels_*.jsonl")))
    people = {
        (label.span_id, label.triple_index): label.label
        for label in labels
        if label.criterion == "faithfulness"
    }
    audit = {
        (label.span_id, label.triple_index)
        for label in labels
        if label.criterion == "faithfulness" and label.sample == "audit"
    }
    panel = panel_labels(run, "faithfulness")
    assert check["labels"] == len(people) and check["audit_labels"] == len(audit) == 6
    y = np.array([people[key] for key in sorted(audit)], float)
    yhat = np.array([panel[key] for key in sorted(audit)], float)
    everything = np.array(list(panel.values()), float)
    assert check["panel"] == pytest.approx(100 * everything.mean(), abs=1e-3)
    # The statistic itself is tested in tests/stats; here: that scoring hands it the right items,
    # labels and filings. Plain PPI (λ = 1) by hand, and PPI++ from the same arrays.
    filing = {key: key[0].split("_item")[0] for key in panel}  # AAPL_2024_item1_0001 → AAPL_2024
    names = list(dict.fromkeys(filing[key] for key in panel))
    units = np.array([names.index(filing[key]) for key in sorted(audit)])
    all_units = np.array([names.index(filing[key]) for key in panel])
    tuned = ppi_mean(y, yhat, units, everything, all_units, len(names))
    assert check["ppi"] == pytest.approx(100 * tuned.estimate, abs=1e-2)
    assert check["ppi_lambda"] == pytest.approx(tuned.lam, abs=1e-4)
    plain = ppi_mean(y, yhat, units, everything, all_units, len(names), lam=1.0)
    assert plain.estimate == pytest.approx(everything.mean() + (y - yhat).mean())
    lo, hi = check["ppi_ci"]
    assert 0 <= lo <= check["ppi"] <= hi <= 100
    agreement = check["panel_agreement"]
    assert agreement["n"] == 6
    assert agreement["accuracy"] == pytest.approx((y == yhat).mean(), abs=1e-4)
    confusion = agreement["confusion"]
    for person, name in ((0, "no"), (1, "yes")):
        for judged_as, column in ((0, "no"), (1, "yes")):
            expected = int(((y == person) & (yhat == judged_as)).sum())
            assert confusion.get(name, {}).get(column, 0) == expected


def test_several_annotators_take_the_majority_and_a_tie_is_counted(run, cli, tmp_path):
    assert cli("review", "export", str(run), "--audit-sample", "3").returncode == 0
    tasks = json.loads((run / "label-studio" / "tasks.json").read_text())
    triples = [task for task in tasks if task["data"]["kind"] == "triple"][:2]
    majority, tie = triples
    export = [
        annotated([task])[0] | {"id": number, "annotations": []}
        for number, task in enumerate(triples)
    ]
    for user, answers in ((1, ("yes", "no")), (2, ("yes", "yes")), (3, ("no", None))):
        for number, answer in enumerate(answers):
            if answer is not None:
                annotation = annotated([triples[number]], answer=answer, user=user)[0]
                annotation = annotation["annotations"][0] | {"id": 10 * user + number}
                export[number]["annotations"].append(annotation)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    assert cli("review", "import", str(run), str(path)).returncode == 0
    assert cli("score", "--samples", str(run)).returncode == 0
    check = results(run)["human"][TASK]["faithfulness"]
    assert check["annotators"] == 3
    assert check["unresolved"] == 1  # users 1 and 2 split on the second triple
    assert check["labels"] == 1  # the first: yes, yes, no → yes
    assert majority["data"]["sample"] == tie["data"]["sample"] == "audit"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("span_sha256", "f" * 64, "made on other text than the run's span (sha256)"),
        ("span_id", "OTHER_2024_item1_0001", "the run has no such span"),
        ("run", "2020-01-01T00-00-00-abcd", "made for run 2020-01-01T00-00-00-abcd"),
    ],
)
def test_a_label_that_is_not_the_runs_stops_scoring_and_loses_nothing(
    run, cli, field, value, message
):
    label_run(run)
    labels_file = next(run.glob("human_labels_*.jsonl"))
    lines = labels_file.read_text().splitlines()
    first = json.loads(lines[0]) | {field: value}
    labels_file.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    before = {path.name: path.read_bytes() for path in run.glob("results_*.json")}
    result = cli("score", "--samples", str(run))
    assert result.returncode == 1
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert {path.name: path.read_bytes() for path in run.glob("results_*.json")} == before


def test_without_labels_the_results_have_no_human_block(run):
    assert "human" not in results(run)
