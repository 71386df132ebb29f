"""`--bootstrap_iters N` as lm-eval has it: the resamples behind every interval (0: no stderr),
recorded in the results; the leaderboard takes 1000 or more and says which flag to use."""

import json

import pytest
from conftest import TESTS, run_cli
from support.runs import panel_file, run_args, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard import bundle_run, submit
from finreflect_eval.records import Results

TASK = "finreflect_smoke_single_pass"


def test_run_and_score_take_bootstrap_iters_and_record_them(tmp_path):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    judges = {"PYTHONPATH": str(TESTS)}  # the scripted judges
    ran = run_cli(*run_args(tmp_path, panel, TASK, limit=12), "--bootstrap_iters", "0", env=judges)
    assert ran.returncode == 0, ran.stderr
    [path] = (tmp_path / "out").rglob("results_*.json")
    results = Results.model_validate_json(path.read_text())
    assert results.config.bootstrap_iters == 0
    assert results.results[TASK]["faithfulness_stderr,none"] == "N/A"  # lm-eval's, for none
    assert results.overall.ci is None and results.details[TASK].criteria["faithfulness"].ci is None

    scored = run_cli("score", "--samples", str(path.parent), "--bootstrap-iters", "2000")
    assert scored.returncode == 0, scored.stderr
    results = Results.model_validate_json(path.read_text())
    assert results.config.bootstrap_iters == 2000
    assert isinstance(results.results[TASK]["faithfulness_stderr,none"], float)
    refused = run_cli("score", "--samples", str(path.parent), "--bootstrap_iters", "-1")
    assert refused.returncode == 2 and "0 or more" in refused.stderr


def test_the_leaderboard_refuses_fewer_resamples_naming_the_flag(tmp_path):
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    path = scripted_run(tmp_path / "run", "acme/kg-7b", None, panel)
    run_cli("score", "--samples", str(path.parent), "--bootstrap_iters", "500")
    data = bundle_run(path).model_dump(mode="json", by_alias=True)
    assert data["results"]["config"]["bootstrap_iters"] == 500
    few = tmp_path / "few.json"
    few.write_text(json.dumps(data))
    with pytest.raises(FinReflectError, match=r"500 resamples.*--bootstrap_iters 1000"):
        submit(few, tmp_path / "board")
