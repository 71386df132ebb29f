"""Data versions on the leaderboard (issue 35): a run on the Hub data records the commit it read,
the leaderboard accepts any commit of an official dataset id and ranks together only the entries
on one data version, a maintainer pins the official one, and `submit` lists every reason it
refuses a run for at once. The Hub is the loopback one (`support.hub_server`), holding
`domyn/FinReflectKG-EvalBench` in two commits: A, then B with some chunk text changed."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli
from support.hub_server import hub_server
from support.official import OFFICIAL, REPO, hub_folder, paper_at_endpoints
from support.runs import TESTS, candidate_file, panel_file

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import load_benchmark, span_list
from finreflect_eval.leaderboard import bundle_run, submit
from finreflect_eval.leaderboard.registry import registered_dataset
from finreflect_eval.records import DatasetInfo

DATASET = "domyn/FinReflectKG-EvalBench"


def repo_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def commit_b(root: Path) -> Path:
    """The data of commit B: A's rows with the text of the AAA chunks changed."""
    folder = hub_folder(root)
    parquet = folder / "data" / "train-00000-of-00001.parquet"
    rows = pd.read_parquet(parquet)
    changed = rows["ticker"] == "aaa"
    rows.loc[changed, "chunk_text"] = rows.loc[changed, "chunk_text"] + " Restated."
    rows.to_parquet(parquet)
    return folder


def official_hub_run(root: Path, environment: dict[str, str]) -> Path:
    """A complete official run (`--tasks finreflect`, the official `paper` panel at scripted
    endpoints) on the Hub dataset at its default branch."""
    with paper_at_endpoints() as judges:
        result = run_cli(
            *("run", "--model", "acme/kg-7b", "--backend", "scripted", "--tasks", "finreflect"),
            *("--model-args", f"responses={candidate_file(root)}", "--dataset", DATASET),
            *("--output-path", str(root / "out"), *judges),
            env=environment,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "out" / "acme__kg-7b"


def results_of(folder: Path) -> dict:
    (path,) = folder.glob("results_*.json")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def hub_runs(tmp_path_factory):
    """Commits A and B on the loopback Hub, a complete official run on each (made while it was
    `main`), and a board with the committed datasets.json (no version pinned). Yields what the
    tests need while the Hub still serves (pinning reads the data)."""
    root = tmp_path_factory.mktemp("versions")
    folder_a, folder_b = hub_folder(root / "a"), commit_b(root / "b")
    with hub_server() as hub:
        environment = {
            "PYTHONPATH": str(TESTS),
            "SCRIPTED_JUDGE_LOG": str(root / "judge_calls.log"),
            "HF_ENDPOINT": hub.url,
            "HF_HUB_OFFLINE": "0",
            "HF_DATASETS_OFFLINE": "0",  # CI sets both to 1 (datasets 4 reads its own)
            "HF_HOME": str(root / "hf-home"),  # a cache of its own: nothing from other runs
        }
        a = hub.add_commit(DATASET, repo_files(folder_a))
        run_a = official_hub_run(root / "run-a", environment)
        b = hub.add_commit(DATASET, repo_files(folder_b))
        run_b = official_hub_run(root / "run-b", environment)
        board = root / "board"
        board.mkdir()
        shutil.copy(REPO / "leaderboard" / "datasets.json", board)
        yield {
            "a": a,
            "b": b,
            "folder_a": folder_a,
            "run_a": run_a,
            "run_b": run_b,
            "board": board,
            "env": environment,
            "hub": hub,
        }


def rows_of(board: Path) -> dict[str, dict]:
    return {
        row["data_version.revision"]: row
        for row in json.loads((board / "leaderboard.json").read_text())
    }


def test_runs_record_the_commit_and_none_is_ranked_until_a_version_is_pinned(hub_runs):
    a, b, board = hub_runs["a"], hub_runs["b"], hub_runs["board"]
    dataset_a = results_of(hub_runs["run_a"])["dataset"]
    dataset_b = results_of(hub_runs["run_b"])["dataset"]
    assert (dataset_a["id"], dataset_a["revision"]) == (DATASET, a)
    assert (dataset_b["id"], dataset_b["revision"]) == (DATASET, b)
    assert dataset_a["fingerprint"] != dataset_b["fingerprint"]  # B changed the text

    # No version pinned: both accepted, each compared within its own data version, neither
    # ranked (an entry on a commit no pin names opens no ranked table of its own).
    submit(hub_runs["run_a"], board)
    submit(hub_runs["run_b"], board)
    rows = rows_of(board)
    for revision, dataset in ((a, dataset_a), (b, dataset_b)):
        row = rows[revision]
        assert (row["section"], row["rank"], row["group_size"]) == ("official", None, 1)
        assert row["data_version.id"] == DATASET
        assert row["data_version.fingerprint"] == dataset["fingerprint"]
        assert row["data_version.pinned"] is None
    page = (board / "index.html").read_text()
    for revision, dataset in ((a, dataset_a), (b, dataset_b)):
        heading = f"{DATASET} @ {revision[:10]}, fingerprint {dataset['fingerprint']}"
        assert f"{heading}, slice official-v1" in page
    assert page.count("No version of this dataset is pinned yet") == 2
    assert "another data version" not in page

    # The maintainer pins A: A is the official version, B another one (shown, not ranked).
    pinned = run_cli(
        *("leaderboard", "pin-dataset", DATASET, "--revision", a, "--leaderboard", str(board)),
        env=hub_runs["env"],
    )
    assert pinned.returncode == 0, pinned.stderr[-3000:]
    entries = json.loads((board / "datasets.json").read_text())
    sliced = load_benchmark(str(hub_runs["folder_a"]), slice=OFFICIAL)
    whole = load_benchmark(str(hub_runs["folder_a"]), split="train")
    official, every_span, sample = entries
    assert (official["pinned"], official["revision"]) == (a, a)
    assert official["fingerprint"] == dataset_a["fingerprint"] == sliced.fingerprint
    assert official["spans"] == len(sliced.spans) == 18
    assert official["span_list_sha256"] == span_list([s.span_id for s in sliced.spans])["sha256"]
    assert (every_span["pinned"], every_span["spans"]) == (a, len(whole.spans))
    assert sample == json.loads((REPO / "leaderboard" / "datasets.json").read_text())[2]
    rows = rows_of(board)
    assert (rows[a]["data_version.pinned"], rows[a]["rank"]) == (True, 1)
    assert (rows[b]["data_version.pinned"], rows[b]["rank"]) == (False, None)
    assert [
        row["data_version.revision"] for row in json.loads((board / "leaderboard.json").read_text())
    ] == [a, b]
    page = " ".join((board / "index.html").read_text().split())
    pinned_heading = f'"badge official">official</span> pinned data version: {DATASET} @ {a[:10]}'
    assert pinned_heading in page
    assert "Another data version (not the pinned one)" in page
    assert (
        page.index(f"@ {a[:10]}") < page.index("Another data version") < page.index(f"@ {b[:10]}")
    )
    assert "No version of this dataset is pinned yet" not in page
    checked = run_cli("leaderboard", "build", "--check", "--leaderboard", str(board))
    assert checked.returncode == 0, checked.stderr

    # After the pin, a run on A must still be A's data: another fingerprint on A is refused.
    forged = bundle_run(hub_runs["run_a"]).model_dump(mode="json", by_alias=True)
    forged["results"]["dataset"]["fingerprint"] = "0" * 16
    path = board.parent / "forged.json"
    path.write_text(json.dumps(forged))
    with pytest.raises(
        FinReflectError, match=f"fingerprint 0{{16}}, not the pinned {dataset_a['fingerprint']}"
    ):
        submit(path, board)


def test_pinning_a_branch_pins_the_commit_it_points_to(hub_runs, tmp_path):
    board = tmp_path / "board"
    board.mkdir()
    shutil.copy(REPO / "leaderboard" / "datasets.json", board)
    pinned = run_cli(
        *("leaderboard", "pin-dataset", DATASET, "--revision", "main", "--leaderboard", str(board)),
        env=hub_runs["env"],
    )
    assert pinned.returncode == 0, pinned.stderr[-3000:]
    entries = json.loads((board / "datasets.json").read_text())
    assert [entry.get("pinned") for entry in entries] == [hub_runs["b"], hub_runs["b"], None]


def test_offline_the_cached_data_loads_and_names_no_commit(hub_runs):
    """Offline, `datasets` serves its latest cached copy whatever the revision asked for (A's
    or B's, asked for A): the data loads, and names no commit rather than a wrong one."""
    offline = {**hub_runs["env"], "HF_HUB_OFFLINE": "1"}
    args = ("dataset", "info", "--dataset", DATASET, "--revision", hub_runs["a"])
    shown = run_cli(*args, env=offline)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert f"## Dataset `{DATASET}`\n" in shown.stdout  # no "(revision ...)"
    cached = [results_of(hub_runs[run])["dataset"]["fingerprint"] for run in ("run_a", "run_b")]
    assert any(f"fingerprint {fingerprint}," in shown.stdout for fingerprint in cached)


def _forged(hub_runs, tmp_path, change) -> Path:
    data = bundle_run(hub_runs["run_a"]).model_dump(mode="json", by_alias=True)
    change(data)
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(data))
    return path


def _board(tmp_path) -> Path:
    board = tmp_path / "board"
    board.mkdir(exist_ok=True)
    shutil.copy(REPO / "leaderboard" / "datasets.json", board)
    return board


def test_an_unpinned_version_checks_the_span_lists_it_can(hub_runs, tmp_path):
    """Without the data the leaderboard cannot recompute an unpinned version's span list; it
    checks what it can: every task the same spans, at most `per_stratum` per stratum, and the
    same span list as the entries already on that version."""
    board = _board(tmp_path)
    tasks = ("finreflect_single_pass", "finreflect_multi_pass", "finreflect_reflection")

    def drop_one(data):
        data["samples"][tasks[1]].pop()

    with pytest.raises(FinReflectError) as refused:
        submit(_forged(hub_runs, tmp_path, drop_one), board)
    assert f"task {tasks[1]} covers other spans than task {tasks[0]}" in str(refused.value)

    def crowd_a_stratum(data):
        for task in tasks:
            records = data["samples"][task]
            records[2]["ticker"], records[2]["section"] = (
                records[0]["ticker"],
                records[0]["section"],
            )

    with pytest.raises(FinReflectError, match=r"3 spans of stratum \('AAA', 'Item 1'\)"):
        submit(_forged(hub_runs, tmp_path, crowd_a_stratum), board)

    # The first entry on a version fixes its span list: another one is refused naming both.
    submit(hub_runs["run_a"], board)

    def drop_everywhere(data):
        for task in tasks:
            data["samples"][task].pop()
        data["results"]["config"]["model_name"] = "acme/kg-8b"

    with pytest.raises(FinReflectError) as refused:
        submit(_forged(hub_runs, tmp_path, drop_everywhere), board)
    message = str(refused.value)
    assert message.startswith("refused: ") and "reasons" in message.splitlines()[0]
    assert "span list" in message and "acme/kg-7b" in message


def test_a_run_that_names_no_commit_is_refused_saying_to_rerun():
    info = DatasetInfo(
        id=DATASET,
        config="default",
        revision="main",
        split="train",
        fingerprint="0" * 16,
        slice=OFFICIAL,
    )
    with pytest.raises(FinReflectError, match="rerun with this version of finreflect-eval"):
        registered_dataset(info, REPO / "leaderboard")


def test_submit_lists_every_reason_at_once(hub_runs, cli, tmp_path):
    """A --limit run on a dataset the leaderboard does not have (a Hub copy under another id,
    streamed: read by byte ranges only as far as the limit): both reasons in one refusal, from
    `submit` and from `submit --dry-run` alike."""
    hub = hub_runs["hub"]
    hub.add_commit("acme/other-evalbench", repo_files(hub_runs["folder_a"]))
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    run = cli(
        *("run", "--model", "acme/kg-2b", "--backend", "scripted"),
        *("--tasks", "finreflect_smoke_single_pass", "--dataset", "acme/other-evalbench"),
        *("--model-args", f"responses={candidate_file(tmp_path)}", "--judges", str(panel)),
        *("--limit", "2", "--output-path", str(tmp_path / "limited")),
        env=hub_runs["env"],
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert any("acme/other-evalbench" in r.path and "range" in r.headers for r in hub.requests)
    board = _board(tmp_path)
    for dry_run in ((), ("--dry-run",)):
        refused = cli(
            "submit",
            str(tmp_path / "limited" / "acme__kg-2b"),
            "--leaderboard",
            str(board),
            *dry_run,
        )
        assert refused.returncode == 1
        lines = refused.stderr.strip().splitlines()
        assert lines[0] == "finreflect-eval: error: refused: 2 reasons", refused.stderr
        assert (
            "a --limit 2 run is not a complete run of the benchmark; run without --limit"
            in lines[1]
        )
        assert "is not a dataset of this leaderboard" in lines[2]
    assert not (board / "submissions").exists()


def test_a_run_reaches_an_older_commit_with_dataset_revision(hub_runs, tmp_path):
    """`main` has moved on to B: `--dataset-revision A` runs on A (the version a maintainer may
    have pinned), recorded as given and as the commit read, with A's data."""
    a = hub_runs["a"]
    with paper_at_endpoints() as judges:
        result = run_cli(
            *("run", "--model", "acme/kg-7b", "--backend", "scripted", "--tasks", "finreflect"),
            *("--model-args", f"responses={candidate_file(tmp_path)}", "--dataset", DATASET),
            *("--dataset-revision", a, "--output-path", str(tmp_path / "out"), *judges),
            env=hub_runs["env"],
        )
    assert result.returncode == 0, result.stderr[-3000:]
    folder = tmp_path / "out" / "acme__kg-7b"
    dataset = results_of(folder)["dataset"]
    assert dataset["revision"] == a
    assert dataset["fingerprint"] == results_of(hub_runs["run_a"])["dataset"]["fingerprint"]
    (manifest,) = folder.glob("manifest_*.json")
    assert json.loads(manifest.read_text())["arguments"]["dataset_revision"] == a


def test_run_check_online_prints_the_data_version_and_the_work(hub_runs, tmp_path):
    """`run --check` against the (loopback) Hub: the commit `main` is at, the official slice's
    spans, and the calls; nothing is written."""
    with paper_at_endpoints() as judges:
        result = run_cli(
            *("run", "--model", "acme/kg-7b", "--backend", "scripted", "--tasks", "finreflect"),
            *("--model-args", f"responses={candidate_file(tmp_path)}", "--dataset", DATASET),
            *("--output-path", str(tmp_path / "out"), *judges, "--check"),
            env=hub_runs["env"],
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"main = {hub_runs['b']}" in result.stdout
    spans = len(load_benchmark(str(hub_runs["folder_a"]), split="train", slice=OFFICIAL).spans)
    row = next(line for line in result.stdout.splitlines() if "| finreflect_single_pass |" in line)
    assert f"| {spans} |" in row
    assert not (tmp_path / "out").exists()
