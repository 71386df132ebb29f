"""The official benchmark: the stratified slice (deterministic, the same on any machine), runs on
a folder laid out like the Hub dataset, the leaderboard's sections (official, community, smoke),
and the committed leaderboard folder (`leaderboard build --check`)."""

import json
import shutil
from pathlib import Path

import pytest
from support.official import OFFICIAL, REPO, SECTIONS, hub_folder, paper_at_endpoints, register
from support.runs import candidate_file, panel_file

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import Span, load_benchmark, select_slice, span_list, text_sha256
from finreflect_eval.leaderboard import build, check, submit
from finreflect_eval.records import SliceSpec
from finreflect_eval.tasks.config import TaskIndex


def synthetic_span(ticker: str, section: str, index: int) -> Span:
    text = f"{ticker} {section} paragraph {index}."
    return Span(
        span_id=f"{ticker}_2024_{section.split('.')[0].replace(' ', '')}_{index:04d}",
        ticker=ticker,
        company=ticker,
        fiscal_year=2024,
        source_file=f"{ticker}.htm",
        section=section.split(".")[0],
        page_id=f"page_{index}",
        chunk_index=index,
        text=text,
        n_tokens=len(text.split()),
        sha256=text_sha256(text),
    )


def test_the_slice_is_stratified_deterministic_and_local_to_each_stratum():
    spans = [
        synthetic_span(ticker, section, index)
        for ticker in ("AAA", "BBB", "CCC")
        for section in SECTIONS
        for index in range(5 if ticker != "CCC" else 1)
    ]
    spec = SliceSpec(name="test", per_stratum=2, salt="s")
    picked = select_slice(spans, spec)
    strata = {(s.ticker, s.section) for s in spans}
    per_stratum = {key: [s for s in picked if (s.ticker, s.section) == key] for key in strata}
    assert all(len(v) == (1 if key[0] == "CCC" else 2) for key, v in per_stratum.items())
    assert picked == [s for s in spans if s in picked]  # dataset order kept
    assert select_slice(list(reversed(spans)), spec) == list(reversed(picked))  # order-free
    without_bbb = [s for s in spans if s.ticker != "BBB"]
    assert select_slice(without_bbb, spec) == [s for s in picked if s.ticker != "BBB"]
    other_salt = select_slice(spans, spec.model_copy(update={"salt": "t"}))
    assert {s.span_id for s in other_salt} != {s.span_id for s in picked}


def official_run(cli, root: Path, dataset: Path, judges: list[str], env: dict) -> Path:
    args = [
        *("run", "--model", "acme/kg-7b", "--backend", "scripted"),
        *("--model-args", f"responses={candidate_file(root)}", "--tasks", "finreflect"),
        *("--dataset", str(dataset), "--output-path", str(root / "out"), *judges),
    ]
    result = cli(*args, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "out" / "acme__kg-7b"


def test_a_hub_shaped_folder_gives_the_same_official_slice_twice(cli, tmp_path, env):
    dataset = hub_folder(tmp_path)
    whole = load_benchmark(str(dataset))
    assert {s.section for s in whole.spans} == {"Item 1", "Item 1A", "Item 7"}  # inferred
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    lists = []
    for attempt in ("first", "second"):
        folder = official_run(cli, tmp_path / attempt, dataset, ["--judges", str(panel)], env)
        (samples,) = folder.glob("samples_finreflect_single_pass_*.jsonl")
        ids = [json.loads(line)["span_id"] for line in samples.read_text().splitlines()]
        lists.append("\n".join(ids).encode())
    assert lists[0] == lists[1]  # byte-identical span lists
    sliced = load_benchmark(str(dataset), slice=OFFICIAL)
    assert lists[0].decode().split("\n") == [s.span_id for s in sliced.spans]
    assert len(sliced.spans) == 3 * 3 * 2 < len(whole.spans) == 36


def test_sections_official_community_smoke_and_refusals(cli, tmp_path, env):
    dataset = hub_folder(tmp_path)
    board = tmp_path / "board"
    register(board, dataset, pin=True)  # ranked on the pinned version only
    with paper_at_endpoints() as judges:
        official = official_run(cli, tmp_path / "official", dataset, judges, env)
    panel = panel_file(tmp_path, "accepts_all", "rejects_all", "rejects_all")
    community = official_run(cli, tmp_path / "community", dataset, ["--judges", str(panel)], env)
    smoke = cli(
        *("run", "--model", "acme/kg-1b", "--backend", "scripted", "--tasks", "finreflect_smoke"),
        *("--model-args", f"responses={candidate_file(tmp_path)}", "--judges", str(panel)),
        *("--output-path", str(tmp_path / "smoke")),
        env=env,
    )
    assert smoke.returncode == 0, smoke.stderr[-2000:]
    for results in (official, community, tmp_path / "smoke" / "acme__kg-1b"):
        submit(results, board)
    rows = json.loads((board / "leaderboard.json").read_text())
    assert [(r["section"], r["rank"]) for r in rows] == [
        ("official", 1),
        ("community", None),
        ("smoke", None),
    ]
    assert rows[0]["overall_ci"][0] <= rows[0]["overall"] <= rows[0]["overall_ci"][1]
    # what a reader must know of a panel that is not official is said beside its entry
    assert rows[0]["panel_note"] is None
    assert "is not an official panel" in rows[1]["panel_note"]
    assert "is not an official panel" in (board / "index.html").read_text()
    # A --limit run is refused, in one line
    limited = cli(
        *("run", "--model", "acme/kg-2b", "--backend", "scripted", "--tasks", "finreflect_smoke"),
        *("--model-args", f"responses={candidate_file(tmp_path)}", "--judges", str(panel)),
        *("--limit", "2", "--output-path", str(tmp_path / "limited")),
        env=env,
    )
    assert limited.returncode == 0, limited.stderr[-2000:]
    refused = cli("submit", str(tmp_path / "limited" / "acme__kg-2b"), "--leaderboard", str(board))
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert "a --limit 2 run is not a complete run" in refused.stderr
    # any commit of the Hub data is taken, but a run that names a branch, not a commit, is
    # refused, saying to rerun (this version records the commit)
    from finreflect_eval.leaderboard.registry import registered_dataset
    from finreflect_eval.records import DatasetInfo

    info = DatasetInfo(
        id="domyn/FinReflectKG-EvalBench",
        config="default",
        revision="main",
        split="train",
        fingerprint="0" * 16,
        slice=OFFICIAL,
    )
    with pytest.raises(FinReflectError, match=r"names revision 'main' .* not a commit: rerun"):
        registered_dataset(info, REPO / "leaderboard")
    entry = registered_dataset(info.model_copy(update={"revision": "0" * 40}), REPO / "leaderboard")
    assert (entry.name, entry.pinned) == ("FinReflectKG-EvalBench, official slice", None)


def test_the_committed_leaderboard_checks_and_a_changed_number_is_named(cli, tmp_path):
    committed = cli("leaderboard", "build", "--check", "--leaderboard", str(REPO / "leaderboard"))
    assert committed.returncode == 0, committed.stderr
    board = tmp_path / "board"
    shutil.copytree(REPO / "leaderboard", board)
    generated = board / "leaderboard.json"
    generated.write_text(generated.read_text().replace("[]", '[{"overall": 99.0}]'))
    stale = cli("leaderboard", "build", "--check", "--leaderboard", str(board))
    assert stale.returncode == 1 and "leaderboard.json" in stale.stderr
    # an entry edited by hand no longer verifies: the check names its file
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    from support.runs import scripted_run

    stored, _ = submit(scripted_run(tmp_path, "acme/kg-7b", None, panel), board)
    assert cli("leaderboard", "build", "--check", "--leaderboard", str(board)).returncode == 0
    data = json.loads(stored.read_text())
    task = next(iter(data["results"]["results"]))
    data["results"]["results"][task]["precision,none"] = 12.5
    stored.write_text(json.dumps(data))
    edited = cli("leaderboard", "build", "--check", "--leaderboard", str(board))
    assert edited.returncode == 1 and stored.name in edited.stderr
    with pytest.raises(FinReflectError, match=stored.name):
        check(board)
    with pytest.raises(FinReflectError, match=stored.name):
        build(board)


def test_the_registered_sample_is_the_bundled_sample():
    entries = {e["id"]: e for e in json.loads((REPO / "leaderboard" / "datasets.json").read_text())}
    sample = load_benchmark("sample", split="test")
    assert entries["sample"]["fingerprint"] == sample.fingerprint
    assert entries["sample"]["spans"] == len(sample.spans)
    assert (
        entries["sample"]["span_list_sha256"]
        == span_list([s.span_id for s in sample.spans])["sha256"]
    )
    tasks = {t.name for t in TaskIndex().resolve(["finreflect_smoke"])}
    assert set(entries["sample"]["tasks"]) == tasks


def test_offline_the_official_tasks_say_how_to_run_the_sample(cli, tmp_path):
    result = cli(
        *("extract", "--model", "m", "--backend", "scripted", "--tasks", "finreflect"),
        *("--output-path", str(tmp_path / "out")),
    )
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "domyn/FinReflectKG-EvalBench" in result.stderr
    assert "--tasks finreflect_smoke" in result.stderr


def test_dataset_info_shows_the_official_slice(cli, tmp_path):
    dataset = hub_folder(tmp_path)
    result = cli("dataset", "info", "--dataset", str(dataset))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "## Slice `official-v1` of split `train` (2 per stratum" in result.stdout
    assert "| spans | 18 | 36 |" in result.stdout and "| companies | 3 | 3 |" in result.stdout
    sliced = load_benchmark(str(dataset), slice=OFFICIAL)
    assert f"fingerprint {sliced.fingerprint}" in result.stdout


def test_the_papers_figures_stand_apart_reported_never_ranked(tmp_path):
    """The board is not empty on day one: the paper's published figures are reference rows,
    with the citation, said to be reported and not verified, and in no ranking."""
    from finreflect_eval.leaderboard.published import load_published

    published = load_published(REPO / "leaderboard")
    table1 = next(row for row in published if row.scores)
    assert table1.scores["reflection"]["comprehensiveness"] == 72.01
    assert "arXiv:2510.05710v1, Table 1" in table1.source
    page = (REPO / "leaderboard" / "index.html").read_text(encoding="utf-8")
    assert "reported by the paper, not verified here, never ranked" in page
    assert 'href="https://arxiv.org/abs/2510.05710v1"' in page
    rows = json.loads((REPO / "leaderboard" / "leaderboard.json").read_text())
    assert all(table1.name != row["model"] for row in rows)  # never an entry
    # A malformed file is one line naming it
    board = tmp_path / "board"
    board.mkdir()
    (board / "published.json").write_text(json.dumps([{**table1.model_dump(), "url": "http://x"}]))
    with pytest.raises(FinReflectError, match=r"published\.json: .*url"):
        load_published(board)
