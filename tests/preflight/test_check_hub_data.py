"""`run --check` on data from the Hub (the loopback one of `support.hub_server`): the commit
its branch is at is asked once per check, however many tasks and splits read the data."""

from support.hub_server import hub_server

from finreflect_eval._util.resources import sample_dir

DATASET = "acme/data"


def test_run_check_asks_the_hub_for_the_datas_commit_once(cli, tmp_path):
    files = {
        path.relative_to(sample_dir()).as_posix(): path.read_bytes()
        for path in sample_dir().rglob("*")
        if path.is_file()
    }
    with hub_server() as hub:
        sha = hub.add_commit(DATASET, files)
        result = cli(
            *("run", "--model", "cand", "--backend", "scripted", "--tasks", "finreflect_smoke"),
            *("--dataset", DATASET, "--limit", "1", "--judges", "demo", "--check"),
            *("--output-path", str(tmp_path / "out")),
            env={
                "HF_ENDPOINT": hub.url,
                "HF_HUB_OFFLINE": "0",
                "HF_DATASETS_OFFLINE": "0",
                "HF_HOME": str(tmp_path / "hf"),
            },
        )
        paths = [request.path for request in hub.requests]
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"| {DATASET} | main = {sha} |" in result.stdout
    # What `main` is at: asked once (the data then loads at that commit, by its sha).
    asked = [
        p
        for p in paths
        if p in (f"/api/datasets/{DATASET}", f"/api/datasets/{DATASET}/revision/main")
    ]
    assert len(asked) == 1, paths
