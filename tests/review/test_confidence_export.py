"""`review export --select confidence`: an audit drawn where the panel's judges disagreed, each
item's chance known; scoring draws it again from the panel's votes, weighs each label by 1 / its
chance, and refuses what the draw did not give; `review plan` says what each design needs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from support.human_labels import annotated
from support.runs import panel_file, scripted_run

from finreflect_eval.records import HumanLabel, SampleRecord, read_lines
from finreflect_eval.stats import audit
from finreflect_eval.stats.human import ppi_mean

TASK = "finreflect_smoke_single_pass"
SIZE, SEED = 30, 5


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> Path:
    """Two judges who answer the gold labels and one who accepts all: they split exactly where
    the gold says no."""
    folder = tmp_path_factory.mktemp("confidence")
    panel = panel_file(folder, "gold_labels", "gold_labels", "accepts_all")
    return scripted_run(folder, "cand", None, panel).parent


@pytest.fixture
def run(judged, tmp_path) -> Path:
    shutil.copytree(judged, tmp_path / "run")
    return tmp_path / "run"


def _triples(run: Path):
    """Every triple in span order: (span id, index), its filing, and per criterion the votes."""
    records = sorted(
        read_lines(SampleRecord, next(run.glob(f"samples_{TASK}_*.jsonl"))),
        key=lambda record: record.doc_id,
    )
    panel = next(iter(records[0].votes))
    found = []
    for record in records:
        cast = record.votes[panel]
        for index in range(len(record.triples)):
            votes = {
                c: [v[index].verdict for v in by.values()]
                for c, by in cast.items()
                if c != "comprehensiveness"
            }
            found.append(
                (
                    (record.span_id, index),
                    f"{record.doc['ticker']}_{record.doc['fiscal_year']}",
                    votes,
                )
            )
    return found


def _export(cli, run: Path) -> list[dict]:
    """`review export --select confidence` of the audit alone; the tasks it wrote."""
    args = ("--audit-sample", str(SIZE), "--seed", str(SEED), "--select", "confidence")
    result = cli("review", "export", str(run), *args, "--no-queue")
    assert result.returncode == 0, result.stderr
    return json.loads((run / "label-studio" / "tasks.json").read_text())


def test_the_draw_favours_split_items_with_known_chances_and_scoring_weighs_them(
    cli, run, tmp_path
):
    tasks = _export(cli, run)
    drawn = {
        (t["data"]["span_id"], t["data"]["triple_index"])
        for t in tasks
        if t["data"]["kind"] == "triple"
    }
    assert {t["data"]["audit_select"] for t in tasks} == {"confidence"}
    assert {t["data"]["audit_panel"] for t in tasks} == {"scripted-test"}
    # By hand: a triple's dissent is its most split criterion's share of dissenting votes.
    triples = _triples(run)
    dissent = np.array(
        [
            max(1 - max(v.count(0), v.count(1)) / 3 for v in votes.values())
            for _, _, votes in triples
        ]
    )
    assert 0 < (dissent > 0).mean() < 1
    weights = 0.5 / len(dissent) + 0.5 * dissent / dissent.sum()
    chance = audit.inclusion(weights, SIZE)
    filings = list(dict.fromkeys(filing for _, filing, _ in triples))
    units = np.array([filings.index(filing) for _, filing, _ in triples])
    expected = audit.draw(units, SIZE, SEED, weights)
    assert drawn == {triples[at][0] for at in expected.tolist()}
    split_share = np.mean([dissent[at] > 0 for at in expected.tolist()])
    assert split_share > (dissent > 0).mean()  # split items over-represented
    # Label, import, score: PPI weighs each label by 1 / its chance.
    export = tmp_path / "export.json"
    export.write_text(json.dumps(annotated(tasks, seed=2)))
    assert cli("review", "import", str(run), str(export)).returncode == 0
    assert cli("score", "--samples", str(run)).returncode == 0
    labels = read_lines(HumanLabel, next(run.glob(f"human_labels_{TASK}_*.jsonl")))
    assert {(label.audit_select, label.audit_panel) for label in labels} == {
        ("confidence", "scripted-test")
    }
    people = {
        (label.span_id, label.triple_index): label.label
        for label in labels
        if label.criterion == "faithfulness"
    }
    keys = [key for key, _, _ in triples]
    labeled = [keys.index(key) for key in sorted(people, key=keys.index)]
    majority = np.array([int(sum(votes["faithfulness"]) >= 2) for _, _, votes in triples], float)
    y = np.array([people[keys[at]] for at in labeled], float)
    estimate = ppi_mean(
        y,
        majority[labeled],
        units[labeled],
        majority,
        units,
        len(filings),
        inclusion=chance[labeled],
    )
    results = json.loads(next(run.glob("results_*.json")).read_text())
    check = results["human"][TASK]["faithfulness"]
    assert check["ppi"] == pytest.approx(100 * estimate.estimate, abs=1e-3)
    unweighted = ppi_mean(y, majority[labeled], units[labeled], majority, units, len(filings))
    assert abs(unweighted.estimate - estimate.estimate) > 1e-6  # the weights count


def test_a_label_the_confidence_draw_did_not_give_is_refused_in_one_line(cli, run, tmp_path):
    tasks = _export(cli, run)
    for task in tasks:  # as if it had been drawn uniformly
        task["data"]["audit_select"], task["data"]["audit_panel"] = "uniform", None
    export = tmp_path / "export.json"
    export.write_text(json.dumps(annotated(tasks, seed=2)))
    assert cli("review", "import", str(run), str(export)).returncode == 0
    result = cli("score", "--samples", str(run))
    assert result.returncode == 1
    assert (
        "marked audit, but the audit (audit_sample 30, audit_seed 5, uniform) did not draw"
        in result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_plan_says_what_each_design_needs(cli, run):
    result = cli("review", "plan", str(run), "--halfwidth", "10")
    assert result.returncode == 0, result.stderr
    assert "| Label at random | By confidence |" in result.stdout
