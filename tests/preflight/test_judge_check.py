"""`judge --check`: the judging stage's dry run on a saved extraction; the panel, its models
and endpoints, the run folder and the plan of the judges' calls, with nothing judged."""

import hashlib

import yaml
from support.runs import candidate_file, panel_file

TASK = "finreflect_smoke_single_pass"


def extracted(cli, env, tmp_path):
    """A saved extraction of 2 spans (both with triples) by the scripted candidate."""
    result = cli(
        *("extract", "--model", "candidate", "--backend", "scripted"),
        *("--model-args", f"responses={candidate_file(tmp_path)}"),
        *("--tasks", TASK, "--dataset", "sample", "--limit", "2"),
        *("--output-path", str(tmp_path / "out")),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return tmp_path / "out" / "candidate"


def contents(folder):
    files = [path for path in folder.rglob("*") if path.is_file()]
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in files}


def test_judge_check_prints_the_plan_of_the_judge_calls_and_judges_nothing(cli, env, tmp_path):
    folder = extracted(cli, env, tmp_path)
    panel = panel_file(tmp_path / "p", "accepts_all", "rejects_all", name="checked")
    before = contents(tmp_path)
    result = cli("judge", "--samples", str(folder), "--judges", str(panel), "--check", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    plan = result.stdout
    assert "| judge judge-0 | scripted | scripted |" in plan
    assert (
        "| task | mode | spans | spans with triples | judge judge-0 calls | judge judge-1" in plan
    )
    # 4 criteria for each of the 2 spans with triples, per judge.
    assert f"| {TASK} | single_pass | 2 | 2 | 8 | 8 |" in plan
    assert "Calls: 16 by the judges" in plan
    assert f"Votes of panel 'checked' into the samples in {folder}" in plan
    assert contents(tmp_path) == before  # no vote, no cache, no log
    assert not (tmp_path / "judge_calls.log").exists()


def test_judge_check_names_each_unmet_need(cli, env, tmp_path):
    folder = extracted(cli, env, tmp_path)
    judges = [
        {"name": "gone", "model": "/nonexistent/judge", "backend": "hf"},
        {"name": "lonely", "model": "x", "backend": "openai", "model_args": {"base_url": 3}},
    ]
    panel = tmp_path / "panel.yaml"
    panel.write_text(yaml.safe_dump({"panel": "unmet", "judges": judges}))
    result = cli("judge", "--samples", str(folder), "--judges", str(panel), "--check", env=env)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("unmet: ")]
    assert (
        "unmet: judge gone (/nonexistent/judge): cannot load model '/nonexistent/judge': no "
        "such file or folder"
    ) in lines
    assert any(line.startswith("unmet: judge lonely (x): ") for line in lines), lines
    assert result.stderr.splitlines()[-1] == (
        f"finreflect-eval: error: --check: {len(lines)} need(s) unmet, listed above; nothing "
        "was downloaded"
    )
