"""The Python API (`simple_evaluate`, `evaluate_run`) and lm-eval's `--hf_hub_log_args` push,
against the command line's own results."""

import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import huggingface_hub
import pytest
from support import scripted_judges
from support.hub_server import hub_server
from support.runs import TRIPLES, panel_file, run_args

import finreflect_eval
from finreflect_eval import progress
from finreflect_eval.errors import FinReflectError
from finreflect_eval.hub_log import HubLogArgs, dataset_card
from finreflect_eval.judging import Panel
from finreflect_eval.models.scripted import ScriptedModel

TASK = "finreflect_smoke_single_pass"
RESPONDERS = ("accepts_all", "rejects_all", "accepts_all")
SCORES = ("results", "groups", "details", "overall", "agreement", "n-samples", "versions")


def cli_results(
    cli, env, folder: Path, *extra: str, environment: dict | None = None, tasks=(TASK,)
):
    panel = panel_file(folder, *RESPONDERS)
    result = cli(*run_args(folder, panel, *tasks), *extra, env={**env, **(environment or {})})
    files = sorted((folder / "out" / "candidate").glob("results_*.json"))
    return result, (json.loads(files[-1].read_text()) if files else None)


def loaded_judges():
    return [ScriptedModel(responses=getattr(scripted_judges, name)) for name in RESPONDERS]


def test_simple_evaluate_with_loaded_models_equals_the_cli_and_prints_nothing(
    cli, env, tmp_path, capfd
):
    result, expected = cli_results(cli, env, tmp_path / "cli")
    assert result.returncode == 0, result.stderr
    assert f"{TASK} extract: 100%" in result.stderr  # the command line shows progress

    capfd.readouterr()
    candidate = ScriptedModel("candidate", responses=[json.dumps(TRIPLES)])
    results = finreflect_eval.simple_evaluate(
        model=candidate,
        tasks=[TASK],
        judges=loaded_judges(),
        dataset="sample",
        limit=3,
        output_path=tmp_path / "api",
    )
    assert capfd.readouterr() == ("", "")  # no progress bars either
    got = results.model_dump(mode="json", by_alias=True)
    for details in (got["details"][TASK], expected["details"][TASK]):
        details.pop("seconds")  # wall time
    for block in SCORES:
        assert got[block] == expected[block], (block, _diff(got[block], expected[block]))
    assert got["results"][TASK]["faithfulness,none"] == 100.0  # the majority of 2 accepts
    assert candidate.requests, "the loaded model itself answered"
    assert (tmp_path / "api" / "candidate").is_dir()

    # Scoring the saved run again, and judging it again with a named panel, from Python.
    rescored = finreflect_eval.evaluate_run(tmp_path / "api" / "candidate")
    assert rescored.model_dump(by_alias=True)["results"] == got["results"]
    panel = panel_file(tmp_path / "panel", *RESPONDERS)
    rejudged = finreflect_eval.evaluate_run(tmp_path / "api" / "candidate", judges=panel)
    assert rejudged.judges.panel == "scripted-test"
    assert rejudged.model_dump(by_alias=True)["results"] == got["results"]
    assert capfd.readouterr() == ("", "")


def test_simple_evaluate_takes_the_model_by_name_in_either_form(tmp_path):
    responses = str(tmp_path / "candidate.json")
    Path(responses).write_text(json.dumps([json.dumps(TRIPLES)]))
    panel = Panel.from_models({"a": ScriptedModel(responses=scripted_judges.accepts_all)})
    ours = finreflect_eval.simple_evaluate(
        "candidate",
        f"responses={responses}",
        TASK,
        panel,
        backend="scripted",
        dataset="sample",
        limit=2,
        output_path=tmp_path / "ours",
    )
    lm_eval_form = finreflect_eval.simple_evaluate(
        model="scripted",
        model_args={"pretrained": "candidate", "responses": responses},
        tasks=TASK,
        judges=panel,
        dataset="sample",
        limit=0.1,  # of the sample's 24 spans: 3 (rounded up, as lm-eval)
        output_path=tmp_path / "theirs",
        use_cache=False,
    )
    assert ours.config.model == lm_eval_form.config.model == "scripted"
    assert ours.model_name == lm_eval_form.model_name == "candidate"
    assert ours.n_samples[TASK].effective == 2
    assert lm_eval_form.n_samples[TASK].effective == 3
    assert not (tmp_path / "theirs" / "cache.sqlite").exists()
    with pytest.raises(FinReflectError, match="batch_size is for a model given by name"):
        finreflect_eval.simple_evaluate(ScriptedModel(), tasks=TASK, judges=panel, batch_size=4)


def by_name(folder: Path) -> dict:
    """`simple_evaluate` arguments of a cheap valid run: a scripted candidate named by name."""
    responses = folder / "candidate.json"
    folder.mkdir(parents=True, exist_ok=True)
    responses.write_text(json.dumps([json.dumps(TRIPLES)]))
    return {
        "model": "candidate",
        "model_args": f"responses={responses}",
        "backend": "scripted",
        "tasks": TASK,
        "judges": loaded_judges(),
        "dataset": "sample",
        "limit": 2,
        "output_path": folder / "out",
    }


# (argument, bad value, the exception expected besides FinReflectError)
BAD_SIMPLE_EVALUATE_ARGUMENTS = [
    ("model", 123, TypeError),
    ("model", None, TypeError),
    ("model", "", ValueError),
    ("model_args", [1, 2], TypeError),
    ("model_args", 5, TypeError),
    ("model_args", {1: "a"}, TypeError),
    ("tasks", None, TypeError),
    ("tasks", {1, 2}, TypeError),
    ("tasks", [TASK, 3], TypeError),
    ("judges", ["a", "b", "c"], TypeError),
    ("judges", {"a": "b"}, TypeError),
    ("judges", [], ValueError),
    ("judges", 5, TypeError),
    ("backend", 5, TypeError),
    ("dataset", 5, TypeError),
    ("limit", "2", TypeError),
    ("limit", True, TypeError),
    ("limit", -1, ValueError),
    ("limit", 1.5, ValueError),
    ("num_fewshot", "1", TypeError),
    ("num_fewshot", -1, ValueError),
    ("batch_size", [1], TypeError),
    ("batch_size", "banana", ValueError),
    ("batch_size", "auto:x", ValueError),
    ("batch_size", 0, ValueError),
    ("max_batch_size", "8", TypeError),
    ("device", 0, TypeError),
    ("revision", 2, TypeError),
    ("trust_remote_code", "yes", TypeError),
    ("system_instruction", ["be brief"], TypeError),
    ("fewshot_as_multiturn", "yes", TypeError),
    ("gen_kwargs", 5, TypeError),
    ("gen_kwargs", ["temperature=0", 1], TypeError),
    ("seed", "x", TypeError),
    ("seed", 1.5, TypeError),
    ("output_path", 5, TypeError),
    ("output_path", None, TypeError),
    ("use_cache", 5, TypeError),
    ("include_path", 5, TypeError),
    ("include_path", [5], TypeError),
    ("shard", "0/2", TypeError),
    ("max_invalid_share", 2, ValueError),
    ("max_invalid_share", "0.1", TypeError),
    ("max_judge_failure_share", 1.5, ValueError),
    ("model_args", ["api_key=sk-never-shown", 1], TypeError),
    ("allow_failures", "no", TypeError),
    ("show_progress", "no", TypeError),
    ("bogus", 1, TypeError),
]


@pytest.mark.parametrize(("name", "value", "error"), BAD_SIMPLE_EVALUATE_ARGUMENTS)
def test_simple_evaluate_names_a_bad_argument_before_any_work(tmp_path, name, value, error):
    arguments = by_name(tmp_path)
    if name in ("batch_size", "max_batch_size", "device", "revision", "trust_remote_code"):
        arguments["backend"] = "hf"  # options of the hf backend; nothing loads before the error
    with pytest.raises(error, match=rf"^{name}\b") as raised:
        finreflect_eval.simple_evaluate(**{**arguments, name: value})
    assert isinstance(raised.value, FinReflectError)
    assert "sk-never-shown" not in str(raised.value)
    assert not (tmp_path / "out").exists()


BAD_EVALUATE_RUN_ARGUMENTS = [
    ("samples", None, TypeError),
    ("samples", 5, TypeError),
    ("samples", [], ValueError),
    ("samples", ["run", 1], TypeError),
    ("judges", ["a", "b", "c"], TypeError),
    ("use_cache", 5, TypeError),
    ("include_path", 5, TypeError),
    ("max_invalid_share", -0.1, ValueError),
    ("allow_failures", 1, TypeError),
    ("show_progress", None, TypeError),
]


@pytest.mark.parametrize(("name", "value", "error"), BAD_EVALUATE_RUN_ARGUMENTS)
def test_evaluate_run_names_a_bad_argument(tmp_path, name, value, error):
    arguments = {"samples": tmp_path / "run", name: value}
    with pytest.raises(error, match=rf"^{name}\b") as raised:
        finreflect_eval.evaluate_run(**arguments)
    assert isinstance(raised.value, FinReflectError)


def test_simple_evaluate_takes_paths_and_a_single_include_path(tmp_path):
    arguments = by_name(tmp_path)
    (tmp_path / "more-tasks").mkdir()
    sample = Path(finreflect_eval.__file__).parent / "sample"
    results = finreflect_eval.simple_evaluate(
        **{**arguments, "model": Path("candidate"), "dataset": sample},
        include_path=str(tmp_path / "more-tasks"),  # one folder (lm-eval's form), not a list
        use_cache=tmp_path / "cache.sqlite",
    )
    assert results.model_name == "candidate"
    assert results.n_samples[TASK].effective == 2
    assert (tmp_path / "cache.sqlite").is_file()


def test_progress_bars_only_when_asked(tmp_path, capfd):
    arguments = by_name(tmp_path)
    capfd.readouterr()
    finreflect_eval.simple_evaluate(**arguments, show_progress=True)
    shown = capfd.readouterr()
    assert shown.out == ""
    assert f"{TASK} extract: 100%" in shown.err and "judge judge-0: 100%" in shown.err

    rejudged = finreflect_eval.evaluate_run(
        tmp_path / "out" / "candidate", judges=loaded_judges(), use_cache=False, show_progress=True
    )
    assert rejudged.results and "judge judge-0: 100%" in capfd.readouterr().err
    finreflect_eval.evaluate_run(tmp_path / "out" / "candidate", judges=loaded_judges())
    assert capfd.readouterr() == ("", "")
    with pytest.raises(FinReflectError, match="no-such-panel"):  # a failing call too
        finreflect_eval.evaluate_run(tmp_path / "out" / "candidate", judges="no-such-panel")
    # Off only inside the calls: the command line's default, and the Hugging Face libraries'.
    assert progress.shown() and datasets.is_progress_bar_enabled()
    assert not huggingface_hub.utils.are_progress_bars_disabled()


QUIET_RUN = """
import json, sys
from pathlib import Path
from support import scripted_judges
from support.runs import TRIPLES
import finreflect_eval
from finreflect_eval.models.scripted import ScriptedModel

folder = Path(sys.argv[1])
finreflect_eval.simple_evaluate(
    model=ScriptedModel("candidate", responses=[json.dumps(TRIPLES)]),
    tasks="finreflect_smoke_single_pass",
    judges=[ScriptedModel(responses=scripted_judges.accepts_all)],
    dataset="sample",
    limit=2,
    num_fewshot=1,
    fewshot_as_multiturn=True,  # logs a warning: shown only where the caller set up logging
    output_path=folder,
)
"""


def test_simple_evaluate_prints_nothing_unless_logging_is_set_up(tmp_path, env):
    """In a fresh process, as a script that never configured logging runs it (pytest's own
    logging handlers would hide the difference)."""
    command = [sys.executable, "-c", QUIET_RUN, str(tmp_path / "quiet")]
    quiet = subprocess.run(
        command, capture_output=True, text=True, env=_environment(env), timeout=300
    )
    assert quiet.returncode == 0, quiet.stderr
    assert (quiet.stdout, quiet.stderr) == ("", "")

    configured = "import logging; logging.basicConfig()\n" + QUIET_RUN
    command = [sys.executable, "-c", configured, str(tmp_path / "logged")]
    logged = subprocess.run(
        command, capture_output=True, text=True, env=_environment(env), timeout=300
    )
    assert logged.returncode == 0, logged.stderr
    assert "fewshot_as_multiturn has no effect" in logged.stderr


def _environment(env: dict) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **env}


HUB_ARGS = (
    "hub_results_org=acme,details_repo_name=fin-details,push_results_to_hub=True,"
    "push_samples_to_hub=True,public_repo=True"
)


def test_results_and_samples_pushed_to_the_hub_load_as_configs(cli, env, tmp_path):
    tasks = (TASK, "finreflect_smoke_reflection")
    with hub_server() as hub:
        environment = {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_test", "HF_HUB_OFFLINE": "0"}
        result, results = cli_results(
            cli, env, tmp_path, "--hf_hub_log_args", HUB_ARGS, environment=environment, tasks=tasks
        )
        assert result.returncode == 0, result.stderr
        assert f"pushed to {hub.url}/datasets/acme/fin-details" in result.stdout
        requests = [(r.method, r.path.split("?")[0]) for r in hub.requests]
        assert ("POST", "/api/repos/create") in requests
        assert ("POST", "/api/datasets/acme/fin-details/commit/main") in requests
        writes = [r for r in hub.requests if r.path.startswith(("/api/repos", "/api/datasets"))]
        assert all(r.headers.get("authorization") == "Bearer hf_test" for r in writes)
        assert list(hub.repos) == ["acme/fin-details"]
        assert hub.repos["acme/fin-details"]["private"] is False
        files = hub.repos["acme/fin-details"]["files"]
        run = results["run"]
        local = tmp_path / "out" / "candidate"
        results_name = f"candidate/results_{run}_scripted-test.json"
        samples_names = [f"candidate/samples_{task}_{run}.jsonl" for task in tasks]
        assert set(files) == {"README.md", results_name, *samples_names}
        for name in (results_name, *samples_names):
            assert files[name] == (local / Path(name).name).read_bytes()
        hub.write_repo("acme/fin-details", tmp_path / "repo")

    for task in tasks:
        samples = datasets.load_dataset(
            str(tmp_path / "repo"), f"candidate__{task}", split="latest"
        )
        assert samples.num_rows == 3
        assert {row["task"] for row in samples} == {task} and samples[0]["triples"]
        by_run = datasets.load_dataset(
            str(tmp_path / "repo"), f"candidate__{task}", split=run.replace("-", "_")
        )
        assert by_run.num_rows == 3
    pushed = datasets.load_dataset(str(tmp_path / "repo"), "candidate__results", split="latest")
    assert pushed[0]["run"] == run


def test_a_push_that_fails_keeps_the_results(cli, env, tmp_path):
    result, results = cli_results(cli, env, tmp_path, "--hf_hub_log_args", HUB_ARGS)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("finreflect-eval: error: cannot push to the Hub (")
    assert "OfflineMode" in last and "the results are kept in" in last
    assert results is not None and results["results"][TASK]

    with hub_server(fail_with=401) as hub:
        environment = {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_bad", "HF_HUB_OFFLINE": "0"}
        args = ("score", "--samples", str(tmp_path / "out" / "candidate"))
        result = cli(*args, "--hf_hub_log_args", HUB_ARGS, env=environment)
    assert result.returncode == 1
    assert (
        "cannot push to the Hub (HfHubHTTPError: Client error '401 Unauthorized'" in result.stderr
    )


def test_hub_log_args_are_checked_before_any_work(cli, env, tmp_path):
    result, results = cli_results(cli, env, tmp_path, "--hf_hub_log_args", "push_to_hub=True")
    assert result.returncode == 1 and results is None
    assert "--hf_hub_log_args: field 'push_to_hub': Extra inputs are not permitted" in result.stderr


def test_the_card_has_a_split_per_run_and_latest_the_newest():
    files = [
        "m/samples_t_2026-01-01T00-00-00-aaaa.jsonl",
        "m/samples_t_2026-02-01T00-00-00-bbbb.jsonl",
        "m/results_2026-02-01T00-00-00-bbbb_paper.json",
        "README.md",
    ]
    card = dataset_card(files, HubLogArgs(leaderboard_url="https://x"))
    header = card.split("---")[1]
    import yaml

    configs = {c["config_name"]: c["data_files"] for c in yaml.safe_load(header)["configs"]}
    assert configs["m__t"] == [
        {"split": "2026_01_01T00_00_00_aaaa", "path": files[0]},
        {"split": "2026_02_01T00_00_00_bbbb", "path": files[1]},
        {"split": "latest", "path": files[1]},
    ]
    assert configs["m__results"][-1] == {"split": "latest", "path": files[2]}
    assert "Leaderboard: https://x" in card


def _diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in set(a) | set(b) for d in _diff(a.get(k), b.get(k), f"{path}/{k}")]
    return [] if a == b else [(path, a, b)]
