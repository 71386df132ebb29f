"""lm-eval's `--hf_hub_log_args`: the results and samples pushed to a Hub dataset repo (a local
fake Hub), and its dataset card."""

import json
from pathlib import Path

import datasets
import yaml
from support.hub_server import hub_server
from support.runs import panel_file, run_args

from finreflect_eval.runs.hub_log import HubLogArgs, dataset_card

TASK = "finreflect_smoke_single_pass"
RESPONDERS = ("accepts_all", "rejects_all", "accepts_all")


def cli_results(
    cli, env, folder: Path, *extra: str, environment: dict | None = None, tasks=(TASK,)
):
    panel = panel_file(folder, *RESPONDERS)
    result = cli(*run_args(folder, panel, *tasks), *extra, env={**env, **(environment or {})})
    files = sorted((folder / "out" / "candidate").glob("results_*.json"))
    return result, (json.loads(files[-1].read_text()) if files else None)


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
    configs = {c["config_name"]: c["data_files"] for c in yaml.safe_load(header)["configs"]}
    assert configs["m__t"] == [
        {"split": "2026_01_01T00_00_00_aaaa", "path": files[0]},
        {"split": "2026_02_01T00_00_00_bbbb", "path": files[1]},
        {"split": "latest", "path": files[1]},
    ]
    assert configs["m__results"][-1] == {"split": "latest", "path": files[2]}
    assert "Leaderboard: https://x" in card
