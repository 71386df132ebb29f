"""Comprehensiveness stated: the score of each level (good / partial / poor → 1 / 0.5 / 0 unless
a task sets others) is in the results, the levels' shares stand beside C, and a task's own
levels are part of its config and its hash."""

import json
from collections import Counter

import pytest
from conftest import TESTS, run_cli
from support.runs import panel_file, run_args, scripted_run

from finreflect_eval.leaderboard import build, submit
from finreflect_eval.pipeline.summary import results_table
from finreflect_eval.records import Results
from finreflect_eval.tasks.config import TaskIndex
from finreflect_eval.view import write_report

TASK = "finreflect_smoke_single_pass"
DEFAULT = {"good": 1.0, "partial": 0.5, "poor": 0.0}


def levels_taken(samples, panel):
    """Each span's comprehensiveness as the panel's majority takes it, worked out here from the
    votes: the label more than half agree on, else the lowest (poor < partial < good)."""
    order = ["poor", "partial", "good"]
    taken = []
    for line in samples.read_text().splitlines():
        votes = json.loads(line)["votes"][panel]["comprehensiveness"]
        labels = [cast[0]["verdict"] for cast in votes.values() if cast[0]["verdict"]]
        label, top = Counter(labels).most_common(1)[0]
        taken.append(label if 2 * top > len(labels) else min(labels, key=order.index))
    return Counter(taken)


def test_results_record_the_levels_and_the_spans_at_each(tmp_path):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    path = scripted_run(tmp_path, "candidate", 12, panel)
    results = Results.model_validate_json(path.read_text())
    detail = results.details[TASK].criteria["comprehensiveness"]
    taken = levels_taken(path.parent / results.samples[TASK], results.judges.panel)

    assert detail.levels == DEFAULT
    assert detail.level_counts == {level: taken[level] for level in DEFAULT}
    assert len(taken) >= 2  # the panel used more than one level here
    spans = sum(taken.values())
    expected = 100 * sum(DEFAULT[level] * n for level, n in taken.items()) / spans
    assert results.results[TASK]["comprehensiveness,none"] == pytest.approx(expected)

    shares = "/".join(f"{100 * taken[level] / spans:.0f}" for level in DEFAULT)
    table = results_table(results)
    assert "C (good/partial/poor %)" in table and f"({shares})" in table


def test_the_viewer_and_the_leaderboard_show_the_shares_beside_c(tmp_path):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    path = scripted_run(tmp_path / "run", "acme/kg-7b", None, panel)
    results = Results.model_validate_json(path.read_text())
    taken = levels_taken(path.parent / results.samples[TASK], results.judges.panel)
    shares = {level: 100 * taken[level] / sum(taken.values()) for level in DEFAULT}

    page = write_report(path.parent, tmp_path / "report").read_text()
    shown = " · ".join(f"{level} {share:.0f}%" for level, share in shares.items())
    assert shown in page and "scored good 1 · partial 0.5 · poor 0" in page

    submit(path, tmp_path / "board")
    build(tmp_path / "board")
    [row] = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    mode = results.details[TASK].mode
    assert {level: row[f"{mode}.C_{level}"] for level in DEFAULT} == pytest.approx(
        shares, abs=0.005
    )
    page = (tmp_path / "board" / "index.html").read_text()
    assert "({:.0f}/{:.0f}/{:.0f})</small>".format(*shares.values()) in page


def test_a_task_sets_its_own_levels_recorded_and_hashed(tmp_path):
    smoke = TaskIndex().tasks[TASK].path

    def task_folder(name, partial):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "strict.yaml").write_text(
            f"include: {smoke}\ntask: strict_c\nmetric_list:\n"
            "  - metric: faithfulness\n  - metric: precision\n  - metric: relevance\n"
            f"  - metric: comprehensiveness\n    levels: {{good: 1, partial: {partial}, poor: 0}}\n"
        )
        return folder

    tasks = task_folder("tasks", 0.25)
    index = TaskIndex([tasks])
    assert (
        index.tasks["strict_c"].hash
        != TaskIndex([task_folder("other", 0.3)]).tasks["strict_c"].hash
    )
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    args = [*run_args(tmp_path, panel, TASK, "strict_c", limit=12), "--include-path", str(tasks)]
    ran = run_cli(*args, env={"PYTHONPATH": str(TESTS)})
    assert ran.returncode == 0, ran.stderr
    [path] = (tmp_path / "out").rglob("results_*.json")
    results = Results.model_validate_json(path.read_text())

    strict = results.details["strict_c"].criteria["comprehensiveness"]
    default = results.details[TASK].criteria["comprehensiveness"]
    assert strict.levels == {"good": 1.0, "partial": 0.25, "poor": 0.0}
    assert default.levels == DEFAULT and strict.level_counts == default.level_counts
    counts = strict.level_counts
    expected = 100 * (counts["good"] + 0.25 * counts["partial"]) / sum(counts.values())
    assert results.results["strict_c"]["comprehensiveness,none"] == pytest.approx(expected)
    [manifest] = path.parent.glob("manifest_*.json")
    assert (
        json.loads(manifest.read_text())["tasks"]["strict_c"]["hash"]
        == index.tasks["strict_c"].hash
    )
    [spec] = [m for m in results.configs["strict_c"]["metric_list"] if "levels" in m]
    assert spec["levels"] == strict.levels
    assert not any("levels" in m for m in results.configs[TASK]["metric_list"])


@pytest.mark.parametrize(
    "levels, message",
    [
        ("{good: 0.5, partial: 1, poor: 0}", "0 ≤ poor ≤ partial ≤ good ≤ 1"),
        ("{good: 1, poor: 0}", "good, partial and poor"),
        ("{good: 2, partial: 1, poor: 0}", "0 ≤ poor ≤ partial ≤ good ≤ 1"),
    ],
)
def test_levels_that_cannot_be_scores_are_refused_naming_the_file(tmp_path, levels, message):
    smoke = TaskIndex().tasks[TASK].path
    (tmp_path / "bad.yaml").write_text(
        f"include: {smoke}\ntask: bad_c\nmetric_list:\n"
        f"  - metric: comprehensiveness\n    levels: {levels}\n"
    )
    listed = run_cli("tasks", "list", "--include-path", str(tmp_path))
    assert listed.returncode != 0
    [line] = listed.stderr.strip().splitlines()
    assert "bad.yaml" in line and message in line
