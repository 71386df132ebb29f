"""`leaderboard audit` end to end against real judges: the demo panel's three judges (the
embedded Gemma 3 270M, greedy and at two sampling seeds) served by llama.cpp's `llama-server`
re-judge a seeded sample of a submitted entry, after a calibration on the same sample; the
agreement with the entry's original votes is reported (and printed)."""

import json

import pytest
from support.runs import candidate_file

from finreflect_eval.leaderboard import load_entries

pytestmark = pytest.mark.slow

DEMO = ("gemma-270m-greedy", "gemma-270m-sample-1", "gemma-270m-sample-2")


def test_an_entry_re_judged_by_llama_server(llama_server, cli, env, tmp_path):
    # The entry: a scripted candidate judged by scripted judges wearing the demo panel's names.
    panel = tmp_path / "demo-scripted.yaml"
    judges = "".join(
        f"  - name: {name}\n    model: gemma-3-270m\n    backend: scripted\n"
        "    model_args: {responses: 'support.scripted_judges:considered'}\n"
        for name in DEMO
    )
    panel.write_text(f"panel: demo\njudges:\n{judges}")
    run = cli(
        *("run", "--model", "acme/kg-1b", "--backend", "scripted", "--model-args"),
        f"responses={candidate_file(tmp_path)}",
        *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample"),
        *("--judges", str(panel), "--output-path", str(tmp_path / "out")),
        env=env,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    board = tmp_path / "board"
    submitted = cli("submit", str(tmp_path / "out" / "acme__kg-1b"), "--leaderboard", str(board))
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    (entry,) = load_entries(board, "submissions")

    endpoints = ",".join(f"{name}={llama_server}" for name in DEMO)
    audit = ("leaderboard", "audit", str(board / entry.path), "--judges", "demo")
    where = ("--judge-endpoints", endpoints, "--size", "4", "--leaderboard", str(board))
    calibrated = cli(*audit, *where, "--calibrate", env=env)
    assert calibrated.returncode == 0, calibrated.stderr[-2000:]
    audited = cli(*audit, *where, "--no-cache", env=env)
    assert audited.returncode == 0, audited.stderr[-2000:]
    print(calibrated.stdout, audited.stdout, sep="\n")

    (path,) = (board / "entry_audits").rglob("acme__kg-1b/*.json")
    report = json.loads(path.read_text())
    assert {member["engine"] for member in report["judges"]} == {"openai server"}
    assert sorted(report["report"]["judges"]) == sorted(DEMO)
    assert report["report"]["items"] == 4
    for name in DEMO:
        line = next(line for line in audited.stdout.splitlines() if line.startswith(name))
        assert "agrees with the entry on" in line
    row = json.loads((board / "leaderboard.json").read_text())[0]
    assert row["audit"]["state"] in ("audited", "failed")
    check = cli("leaderboard", "build", "--check", "--leaderboard", str(board))
    assert check.returncode == 0, check.stderr
