"""Numbers and messages that say no more than the truth: an overall over every judged
criterion or none, a panel that never disagrees flagged, failed judge calls counted in the
summary."""

from support.runs import panel_file, scripted_run

from finreflect_eval.pipeline.summary import results_table
from finreflect_eval.records import Results
from finreflect_eval.scoring.failures import FailurePolicy

TASK = "finreflect_smoke_single_pass"
ANY_FAILURES = FailurePolicy(max_judge_failure_share=1)


def scored(tmp_path, *responders, tasks=(TASK,)):
    panel = panel_file(tmp_path, *responders)
    path = scripted_run(tmp_path, "candidate", 12, panel, tasks=tasks, policy=ANY_FAILURES)
    return Results.model_validate_json(path.read_text())


def test_an_overall_without_comprehensiveness_is_not_given(tmp_path):
    """Every comprehensiveness call failed: F, P and R are scored, C is not, and the overall
    is n/a (never the mean of F, P and R passed off as the run's), with what it lacks."""
    results = scored(
        tmp_path,
        "broken_on_spans",
        "broken_on_spans",
        "broken_on_spans",
        tasks=("finreflect_smoke",),
    )
    tasks = results.group_subtasks["finreflect_smoke"]
    assert all(results.results[t]["faithfulness,none"] == 100.0 for t in tasks)
    assert all(results.results[t]["comprehensiveness,none"] is None for t in tasks)
    overall = results.overall
    assert overall.score is None and overall.ci is None and overall.stderr is None
    assert overall.tasks == dict.fromkeys(tasks)
    assert overall.unscored == [f"comprehensiveness of {t}" for t in tasks]
    assert results.groups["finreflect_smoke"]["overall,none"] is None
    assert "overall: n/a (no score for comprehensiveness of" in results_table(results)


def test_a_panel_that_never_disagrees_is_flagged(tmp_path):
    same = scored(tmp_path / "same", "accepts_all", "accepts_all", "accepts_all")
    assert same.judges.always_agree
    assert "a panel that never disagrees" in results_table(same)
    differ = scored(tmp_path / "differ", "gold_labels", "accepts_all", "rejects_all")
    assert not differ.judges.always_agree
    assert "never disagrees" not in results_table(differ)


def test_the_summary_counts_failed_judge_calls(tmp_path):
    results = scored(tmp_path, "accepts_all", "rejects_all", "broken")
    failures = results.details[TASK].failures
    calls = failures.judge_calls_each
    assert failures.judge_failed_calls == {"judge-2": calls} and calls > 0
    assert f"judge calls failed (abstentions): judge-2 {calls} of {calls}" in results_table(results)
    clean = scored(tmp_path / "clean", "accepts_all", "rejects_all", "accepts_all")
    assert "judge calls failed" not in results_table(clean)


def test_the_viewer_says_both(tmp_path):
    """The report shows what Overall lacks, and that the panel never disagreed."""
    from finreflect_eval.view import write_report

    for name, responders, shown in (
        ("unscored", ["broken_on_spans"] * 3, "n/a: no score for comprehensiveness of " + TASK),
        ("same", ["accepts_all"] * 3, "a panel that never disagrees shows nothing by agreeing"),
    ):
        panel = panel_file(tmp_path / name, *responders)
        path = scripted_run(tmp_path / name, "candidate", 6, panel, policy=ANY_FAILURES)
        assert shown in write_report(path.parent, tmp_path / name / "report").read_text()
