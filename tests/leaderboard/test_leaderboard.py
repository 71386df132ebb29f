"""`submit` and `leaderboard build`: verified submissions, refusals, and an escaped page."""

import csv
import io
import json
import os
import shutil

import pytest
from support.runs import panel_file, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard import build, bundle_run, check, submit
from finreflect_eval.view.report import MARKER

TASK = "finreflect_smoke_single_pass"


def bundle(results_file):
    """The submission bundle of a run, as JSON data a test can tamper with."""
    return bundle_run(results_file).model_dump(mode="json", by_alias=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three complete smoke runs on the sample (scripted candidate and judges)."""
    root = tmp_path_factory.mktemp("runs")
    made = {}
    settings = [
        ("org", "acme/kg-7b", "scripted-test"),
        ("other", "acme/kg-7b", "another-panel"),
        ("script", "<script>alert(1)</script>", "scripted-test"),
    ]
    for name, model, panel_name in settings:
        (root / name).mkdir()
        panel = panel_file(
            root / name, "accepts_all", "accepts_all", "rejects_all", name=panel_name
        )
        made[name] = scripted_run(root / name, model, None, panel)
    return made


def test_a_valid_submission_is_accepted_and_listed_everywhere(runs, tmp_path):
    board = tmp_path / "board"
    target, _ = submit(runs["org"], board)
    assert target.parent == (board / "submissions" / "acme__kg-7b").resolve()
    page = (board / "index.html").read_text()
    assert "acme/kg-7b" in page and 'href="https://huggingface.co/acme/kg-7b"' in page
    assert 'class="badge smoke"' in page  # the sample: the smoke section, never ranked
    rows = json.loads((board / "leaderboard.json").read_text())
    assert len(rows) == 1 and rows[0]["single_pass.F"] == 100.0 and rows[0]["overall"] == 100.0
    assert rows[0]["section"] == "smoke" and rows[0]["rank"] is None
    assert "acme/kg-7b" in (board / "leaderboard.csv").read_text()
    assert page.count('<tr class="entry') == 1


def test_a_changed_score_is_refused_naming_it(runs, tmp_path):
    data = bundle(runs["org"])
    data["results"]["results"][TASK]["precision,none"] = 99.0
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    with pytest.raises(
        FinReflectError,
        match=rf"results\.{TASK}\.precision,none: submitted 99\.0, recomputed from the samples "
        r"100\.0$",
    ):
        submit(forged, tmp_path / "board")
    assert not (tmp_path / "board" / "submissions").exists()


def test_a_duplicate_is_refused(runs, tmp_path):
    board = tmp_path / "board"
    submit(runs["org"], board)
    copy = tmp_path / "copy"
    shutil.copytree(runs["org"].parent, copy)
    with pytest.raises(FinReflectError, match="already on the leaderboard"):
        submit(copy, board)
    submit(runs["other"], board)  # the same model judged by another panel is not a duplicate
    assert len(json.loads((board / "leaderboard.json").read_text())) == 2
    # The same model thinking (as its manifest and results say) is another entry, not a copy.
    data = bundle(runs["org"])
    data["manifest"]["model"]["loaded"] |= {"think": "on", "think_budget": 512}
    data["results"]["config"] |= {"think": "on", "think_budget": 512}
    thinking = tmp_path / "thinking.json"
    thinking.write_text(json.dumps(data))
    submit(thinking, board)
    rows = json.loads((board / "leaderboard.json").read_text())
    assert sorted(str(row["think"]) for row in rows) == ["None", "None", "on, budget 512"]
    assert "think: on, budget 512" in (board / "index.html").read_text()


def test_a_script_in_a_model_name_is_refused(runs, tmp_path):
    with pytest.raises(FinReflectError, match="refused: model name '<script>"):
        submit(runs["script"], tmp_path / "board")
    assert not (tmp_path / "board").exists()


@pytest.mark.parametrize(
    "name",
    ["../evil", "acme/../../evil", "/etc/passwd", "a/b/c", "..\\x", "acme/kg\u202e7b", "a b", ""],
)
def test_path_like_model_names_are_refused(runs, tmp_path, name):
    data = bundle(runs["org"])
    data["results"]["config"]["model_name"] = name
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        FinReflectError, match=r"refused: 2 reasons\n- model name .* is not a Hub id"
    ):
        submit(path, tmp_path / "board")
    assert not (tmp_path / "board").exists()


def test_unknown_task_version_and_dataset_are_refused(runs, tmp_path):
    data = bundle(runs["org"])
    data["results"]["versions"][TASK] = 99
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FinReflectError, match="version 99 is not the current 2"):
        submit(path, tmp_path / "board")
    data = bundle(runs["org"])
    data["results"]["dataset"]["fingerprint"] = "0000"
    path.write_text(json.dumps(data))
    with pytest.raises(FinReflectError, match=r"fingerprint 0000. is not a dataset of this"):
        submit(path, tmp_path / "board")


@pytest.mark.parametrize("score", [140.0, -5.0])
def test_a_score_out_of_range_is_refused_by_the_recomputation(runs, tmp_path, score):
    """A score outside 0-100 cannot follow from valid votes: the recomputation from the samples
    is the range check, and the refusal names the submitted and the recomputed value."""
    data = bundle(runs["org"])
    data["results"]["results"][TASK]["relevance,none"] = score
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        FinReflectError,
        match=rf"^refused: results\.{TASK}\.relevance,none: submitted {score}, recomputed from "
        r"the samples 100\.0$",
    ):
        submit(path, tmp_path / "board")
    assert not (tmp_path / "board" / "submissions").exists()


def test_a_submission_edited_on_disk_stops_the_build_naming_the_file(runs, tmp_path):
    board = tmp_path / "board"
    stored, _ = submit(runs["org"], board)
    data = json.loads(stored.read_text())
    data["results"]["results"][TASK]["faithfulness,none"] = 12.5
    stored.write_text(json.dumps(data))
    with pytest.raises(FinReflectError, match=stored.name):
        build(board)


def test_cli_submit_dry_run_and_offline_hub_pull_request(cli, runs, tmp_path):
    board = tmp_path / "board"
    dry = cli("submit", str(runs["org"]), "--leaderboard", str(board), "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "accepted (dry run)" in dry.stdout and not board.exists()
    hub = cli("submit", str(runs["org"]), "--leaderboard", str(board), "--hub-repo", "org/board")
    assert hub.returncode == 1 and "cannot open a pull request on org/board" in hub.stderr
    assert hub.stderr.count("\n") == 1
    built = cli("leaderboard", "build", "--leaderboard", str(board))
    assert built.returncode == 0 and (board / "index.html").exists()


def _forge(runs, tmp_path, change):
    data = bundle(runs["org"])
    change(data)
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(data))
    return path


def test_votes_from_outside_the_panel_are_refused(runs, tmp_path):
    def add_judge(data):
        for record in data["samples"][TASK]:
            for votes in record["votes"]["scripted-test"].values():
                votes["ghost"] = next(iter(votes.values()))  # same shape, an extra voter

    with pytest.raises(FinReflectError, match="one valid vote per item from each panel judge"):
        submit(_forge(runs, tmp_path, add_judge), tmp_path / "board")


def test_dropped_or_repeated_spans_are_refused(runs, tmp_path):
    def drop_first(data):
        data["samples"][TASK].pop(0)

    with pytest.raises(FinReflectError, match="exactly the spans of the dataset slice"):
        submit(_forge(runs, tmp_path, drop_first), tmp_path / "board")

    def repeat_first(data):
        records = data["samples"][TASK]
        records[1] = records[0]

    with pytest.raises(FinReflectError, match="lists a span twice"):
        submit(_forge(runs, tmp_path, repeat_first), tmp_path / "board")


def test_malformed_values_are_a_one_line_refusal(runs, tmp_path):
    def text_ci(data):
        data["results"]["details"][TASK]["criteria"]["faithfulness"]["ci"] = ["a", "b"]

    with pytest.raises(FinReflectError, match=r"details.*faithfulness.ci"):
        submit(_forge(runs, tmp_path, text_ci), tmp_path / "board")


def test_a_submission_holds_a_span_text_once_and_no_copies(runs):
    """A submission must not balloon: it leaves out the prompts and the fields that copy others
    (lm-eval's `resps`, `filtered_resps` and `target`), and a span's text is in its `doc` only."""
    records = bundle(runs["org"])["samples"][TASK]
    for record in records:
        left_out = (record["arguments"], record["resps"], record["filtered_resps"])
        assert left_out == ({}, [], []) and record["target"] == "" and "text" not in record
        assert record["target_hash"] and record["metrics"]["panels"]["scripted-test"]
        assert json.dumps(record).count(json.dumps(record["doc"]["text"])) == 1
    assert len(records) == 24


def _first_sample(data: dict) -> dict:
    return data["samples"][TASK][0]


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            lambda data: _first_sample(data)["doc"].update(company="Forged Inc."),
            rf"^refused: task {TASK}, span \S+: doc_hash is not what the sample's other fields",
        ),
        (
            lambda data: _first_sample(data).update(target_hash="0" * 64),
            "target_hash is not what the sample's other fields give",
        ),
        (
            lambda data: _first_sample(data)["metrics"]["panels"]["scripted-test"].update(
                faithfulness=[]
            ),
            "metrics is not what the sample's other fields give",
        ),
        (  # the prompts are not submitted: the task hash recomputed is the check
            lambda data: _first_sample(data).update(prompt_hash="0" * 64),
            rf"^refused: task_hashes\.{TASK}: submitted '[0-9a-f]{{64}}', recomputed from the "
            r"samples '[0-9a-f]{64}'$",
        ),
        (
            lambda data: data["results"]["task_hashes"].update({TASK: "0" * 64}),
            rf"^refused: task_hashes\.{TASK}: submitted '0{{64}}', recomputed",
        ),
        (  # the task's config hash, in the manifest: the task changed since
            lambda data: data["manifest"]["tasks"][TASK].update(hash="0" * 16),
            rf"^refused: task '{TASK}' hash 0{{16}} differs from this leaderboard's [0-9a-f]+ "
            r"\(its prompts",
        ),
    ],
)
def test_a_sample_hash_or_task_hash_that_does_not_follow_is_refused(
    runs, tmp_path, change, refusal
):
    with pytest.raises(FinReflectError, match=refusal):
        submit(_forge(runs, tmp_path, change), tmp_path / "board")
    assert not (tmp_path / "board" / "submissions").exists()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"num_fewshot": 2}, "ran with num_fewshot=2, not the task's 1"),
        ({"gen_kwargs": {"max_gen_toks": 64}}, "ran with generation_kwargs .*'max_gen_toks': 64"),
        ({"seed": 7}, "ran with generation_kwargs .*'seed': 7"),
    ],
)
def test_a_run_with_a_task_changed_by_a_flag_is_refused_naming_it(tmp_path, change, says):
    from support.runs import candidate_file

    from finreflect_eval.models import ModelSpec
    from finreflect_eval.pipeline.evaluator import evaluate
    from finreflect_eval.pipeline.judging import load_panel
    from finreflect_eval.pipeline.run_config import RunConfig

    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    config = RunConfig(
        model=ModelSpec("acme/kg-7b", "scripted", {"responses": str(candidate_file(tmp_path))}),
        tasks=[TASK],
        dataset="sample",
        output_path=tmp_path / "out",
        **change,
    )
    run, results = evaluate(config, load_panel(panel))
    with pytest.raises(FinReflectError, match=says):
        submit(run.store.results_path(results.run, results.judges.panel), tmp_path / "board")


def test_built_files_follow_the_umask_and_keep_a_mode_set_by_hand(runs, tmp_path):
    """The site's files get the mode an ordinary write gives them (0644 under umask 022: a web
    server can read them), and a rebuild keeps the mode a maintainer gave a file."""
    board = tmp_path / "board"
    previous = os.umask(0o022)
    try:
        target, _ = submit(runs["org"], board)
        names = ("index.html", "leaderboard.json", "leaderboard.csv", "judges.json")
        modes = {
            path.name: oct(path.stat().st_mode & 0o777)
            for path in [target] + [board / n for n in names]
        }
        (board / "index.html").chmod(0o664)
        build(board)
    finally:
        os.umask(previous)
    assert set(modes.values()) == {"0o644"}, modes
    assert oct((board / "index.html").stat().st_mode & 0o777) == "0o664"


# --- each entry's report (`finreflect-eval view` of the stored submission) ---


def _files(folder):
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_every_entry_gets_its_report_and_its_row_links_to_it(runs, tmp_path, cli):
    """`build` writes each stored entry's report under reports/<entry folder>/<run id>/ (what
    `view` writes of the stored, re-verified submission), and the entry's row links to it
    relatively (the folder works served or from disk)."""
    from finreflect_eval.records import Submission, read
    from finreflect_eval.view import write_report

    board = tmp_path / "board"
    stored = [submit(runs[name], board)[0] for name in ("org", "other")]
    rows = {row["run_id"]: row for row in json.loads((board / "leaderboard.json").read_text())}
    page = (board / "index.html").read_text()
    for path in stored:
        run_id = path.stem
        folder = board / "reports" / "acme__kg-7b" / run_id
        assert rows[run_id]["report"] == f"reports/acme__kg-7b/{run_id}/index.html"
        assert page.count(f'href="reports/acme__kg-7b/{run_id}/index.html"') == 2  # row, details
        expected = write_report(read(Submission, path), tmp_path / run_id).parent
        assert _files(folder) == _files(expected)
        assert "acme/kg-7b" in (folder / "index.html").read_text()
    assert sorted(p.name for p in (board / "reports" / "acme__kg-7b").iterdir()) == sorted(
        p.stem for p in stored
    )
    assert check(board) == []
    # another process (another hash seed) gives the same reports
    checked = cli("leaderboard", "build", "--check", "--leaderboard", str(board))
    assert checked.returncode == 0, checked.stderr


def _one_byte_changed(data: bytes) -> bytes:
    middle = len(data) // 2
    return (
        data[:middle] + (b"x" if data[middle : middle + 1] != b"x" else b"y") + data[middle + 1 :]
    )


def _record_a_stale_page(report, page):
    """A page of a bigger earlier report, which the report's record lists as its own."""
    page.write_text("FRV.page();")
    record = json.loads((report / MARKER).read_text())
    record["files"] = sorted([*record["files"], page.relative_to(report).as_posix()])
    (report / MARKER).write_text(json.dumps(record))


def test_a_stale_or_missing_report_is_named_by_check_and_rebuilt(runs, tmp_path):
    board = tmp_path / "board"
    stored, _ = submit(runs["org"], board)
    name = f"reports/acme__kg-7b/{stored.stem}"
    report = board / name
    page = next((report / "data").glob("*/0.js"))
    built = _files(report)
    edits = [
        lambda: page.write_bytes(_one_byte_changed(page.read_bytes())),  # the same size
        lambda: page.write_text(page.read_text() + " "),
        lambda: page.unlink(),
        lambda: _record_a_stale_page(report, page.parent / "7.js"),
        lambda: shutil.rmtree(report),
    ]
    for edit in edits:
        edit()
        assert check(board) == [name]
        build(board)
        assert check(board) == [] and _files(report) == built


def test_a_report_of_an_entry_no_longer_stored_is_removed(runs, tmp_path):
    """A report whose entry was removed is named by `check` and removed by `build` (its files,
    and the folders that leaves empty); what the user put under reports/ is theirs: neither
    named nor removed."""
    board = tmp_path / "board"
    kept, _ = submit(runs["org"], board)
    gone, _ = submit(runs["other"], board)
    gone.unlink()
    (board / "reports" / "stray.txt").write_text("x")
    (board / "reports" / "acme__kg-70b").mkdir()
    stale = check(board)  # the generated files too: an entry fewer
    assert [name for name in stale if "/" in name] == [f"reports/acme__kg-7b/{gone.stem}"]
    build(board)
    assert check(board) == []
    assert [
        p.relative_to(board / "reports").as_posix() for p in (board / "reports").glob("*/*")
    ] == [f"acme__kg-7b/{kept.stem}"]
    assert (board / "reports" / "stray.txt").read_text() == "x"
    kept.unlink()  # no entry left: no report left, the user's files stay
    build(board)
    assert sorted(p.name for p in (board / "reports").iterdir()) == ["acme__kg-70b", "stray.txt"]
    assert check(board) == []


# --- the board's folder is the user's too: build replaces only what it wrote there ---


def test_build_keeps_the_users_files_and_replaces_only_its_own(runs, tmp_path, cli):
    """Notes beside the board, a page of the user's, a file under reports/, one inside an
    entry's report and one inside the report of an entry removed since: `leaderboard build`
    leaves each as it was, removes the removed entry's own files, writes what a new board
    gets, and `--check` then passes."""
    from finreflect_eval.records import Submission, read
    from finreflect_eval.view import write_report

    board = tmp_path / "board"
    kept, _ = submit(runs["org"], board)
    gone, _ = submit(runs["other"], board)
    kept_report, gone_report = (f"reports/acme__kg-7b/{path.stem}" for path in (kept, gone))
    users = {
        "notes.md": b"# my notes\n",
        "extra/page.html": b"<p>about this board</p>\n",
        "reports/mine.txt": b"beside the reports\n",
        f"{kept_report}/notes.md": b"on this entry\n",
        f"{gone_report}/data/mine.txt": b"on an entry removed since\n",
    }
    for name, data in users.items():
        (board / name).parent.mkdir(parents=True, exist_ok=True)
        (board / name).write_bytes(data)
    gone.unlink()
    result = cli("leaderboard", "build", "--leaderboard", str(board))
    assert result.returncode == 0, result.stderr
    found = _files(board)
    for name, data in users.items():
        assert found.pop(name) == data, name
    assert not [name for name in found if name.startswith(gone_report)]
    fresh = write_report(read(Submission, kept), tmp_path / "fresh").parent
    prefix = f"{kept_report}/"
    assert {n[len(prefix) :]: d for n, d in found.items() if n.startswith(prefix)} == _files(fresh)
    assert check(board) == []


def test_build_refuses_a_users_file_where_it_writes_and_changes_nothing(runs, tmp_path, cli):
    """A folder never built, holding the user's own index.html; a board whose entry's report
    folder holds the user's file but no report: `leaderboard build` refuses each, naming the
    file in one line, and changes nothing."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<h1>my site</h1>\n")
    result = cli("leaderboard", "build", "--leaderboard", str(site))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and f"{site} holds index.html, which" in result.stderr
    assert _files(site) == {"index.html": b"<h1>my site</h1>\n"}

    board = tmp_path / "board"
    stored, _ = submit(runs["org"], board)
    folder = board / "reports" / "acme__kg-7b" / stored.stem
    shutil.rmtree(folder)
    folder.mkdir()
    (folder / "notes.md").write_text("mine\n")
    before = _files(board)
    result = cli("leaderboard", "build", "--leaderboard", str(board))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and f"{folder} holds" in result.stderr
    assert "notes.md" in result.stderr and _files(board) == before


# --- paired comparisons, rank ranges, ties, stability and the agreement gate ---


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """Smoke runs on the bundled sample (24 spans of 10 filings), all judged by panels named
    `scripted-test` (so they are compared with each other): `twin-a` and `twin-b` answer alike
    and are judged by three judges that give the gold labels (scores that vary by filing), so
    their samples are identical but for the model name; `better` is judged by three judges
    that accept everything (100 on every filing)."""
    root = tmp_path_factory.mktemp("compared")
    made = {}
    settings = [("twin-a", "gold_labels"), ("twin-b", "gold_labels"), ("better", "accepts_all")]
    for name, responder in settings:
        panel = panel_file(root / name, responder, responder, responder)
        made[name] = scripted_run(root / name, f"acme/{name}", None, panel)
    return made


def test_identical_submissions_are_tied_and_a_clearly_better_one_is_not(compared, tmp_path):
    """(d) of issue 25, with answers known in advance. Two entries with the same samples have
    the same Overall on every bootstrap draw: their difference is 0 with interval [0, 0], so
    they are tied and each may be 1st or 2nd. An entry judged 100 on every filing is surely
    better than both (the paired interval of its lead excludes 0): rank range [1, 1], and the
    twins' ranges become [2, 3]. Leaving out any one judge of three identical judges changes
    no score, so the ranking's stability is τ = 1 for every judge."""
    board = tmp_path / "board"
    submit(compared["twin-a"], board)
    submit(compared["twin-b"], board)
    rows = {row["model"]: row for row in json.loads((board / "leaderboard.json").read_text())}
    a, b = rows["acme/twin-a"], rows["acme/twin-b"]
    assert 0 < a["overall"] == b["overall"] < 100
    assert a["overall_ci"][0] < a["overall_ci"][1]  # the score varies by filing
    assert a["rank_range"] == b["rank_range"] == [1, 2]
    assert (a["tied_with"], b["tied_with"]) == (["acme/twin-b"], ["acme/twin-a"])
    assert (a["next_difference"], a["next_difference_ci"]) == (0.0, [0.0, 0.0])
    assert (a["rank"], a["section"], a["group_size"]) == (None, "smoke", 2)  # compared, not ranked

    submit(compared["better"], board)
    rows = json.loads((board / "leaderboard.json").read_text())
    assert [row["model"] for row in rows] == ["acme/better", "acme/twin-a", "acme/twin-b"]
    better, a, b = rows
    assert better["overall"] == 100.0 and better["overall_ci"] == [100.0, 100.0]
    assert better["rank_range"] == [1, 1] and better["tied_with"] == []
    assert (a["rank_range"], b["rank_range"]) == ([2, 3], [2, 3])
    assert (a["tied_with"], b["tied_with"]) == (["acme/twin-b"], ["acme/twin-a"])
    lead, (low, high) = better["next_difference"], better["next_difference_ci"]
    assert lead == round(100.0 - a["overall"], 2)
    assert 0 < low < high and low <= lead <= high  # excludes 0, and is not degenerate
    for row in rows:
        assert row["ranking_stability"] == {"judge-0": 1.0, "judge-1": 1.0, "judge-2": 1.0}
        assert row["below_gate"] == []  # identical judges: α 1 (twins) or undefined (better)
    assert a["single_pass.alpha_F"] == 1.0 and better["single_pass.alpha_F"] is None
    page = (board / "index.html").read_text()
    assert page.count('class="tie"') == 1 + 2  # the legend, and the twins' marks
    assert "≈ tied with acme/twin-b" in page and "≈ tied with acme/twin-a" in page
    assert 'data-rank-range="2,3"' in page and 'data-rank-range="1,1"' in page
    assert 'judge-0 <span class="tau" data-judge="judge-0">1.00</span>' in page
    csv_rows = list(csv.DictReader(io.StringIO((board / "leaderboard.csv").read_text())))
    assert json.loads(csv_rows[1]["rank_range"]) == [2, 3]
    assert json.loads(csv_rows[1]["tied_with"]) == ["acme/twin-b"]
    assert json.loads(csv_rows[0]["ranking_stability"])["judge-1"] == 1.0

    # `--check` recomputes the comparisons: a forged range in a generated file is stale.
    assert check(board) == []
    generated = board / "leaderboard.json"
    forged = json.loads(generated.read_text())
    forged[1]["rank_range"] = [1, 1]
    generated.write_text(json.dumps(forged, indent=2, ensure_ascii=False) + "\n")
    assert check(board) == ["leaderboard.json"]


def test_an_entry_with_edited_filing_sums_is_refused_naming_the_value(compared, tmp_path):
    """The comparisons are computed from each entry's per-filing sums: they are recomputed
    from the votes on every load, so raising a filing's sums cannot move an entry up."""
    board = tmp_path / "board"
    stored, _ = submit(compared["twin-a"], board)
    data = json.loads(stored.read_text())
    sums = data["results"]["filings"]["sums"][TASK]["faithfulness"]
    sums[0] += 1.0
    stored.write_text(json.dumps(data))
    with pytest.raises(
        FinReflectError,
        match=rf"{stored.name}.*filings\.sums\.{TASK}\.faithfulness\[0\]: submitted",
    ):
        check(board)


def test_a_panel_of_opposed_judges_is_flagged_below_the_gate(runs, tmp_path):
    """Judges accept, accept, reject on every item: Krippendorff's α is negative on every
    criterion (its interval too), so the entry is flagged below the gate, naming each
    criterion, and stays in its place."""
    board = tmp_path / "board"
    submit(runs["org"], board)
    (row,) = json.loads((board / "leaderboard.json").read_text())
    criteria = ("faithfulness", "precision", "relevance", "comprehensiveness")
    assert row["below_gate"] == [f"single_pass.{c}" for c in criteria]
    assert row["single_pass.alpha_F"] < 0 and row["single_pass.alpha_F_ci"][1] < 0.667
    page = (board / "index.html").read_text()
    assert (
        "⚠ α under 0.667 on faithfulness, precision, relevance, comprehensiveness "
        "(single-pass): shown, not ranked apart"
    ) in page
    words = " ".join(page.split())  # the threshold and its source, on the page
    assert (
        "upper end is under 0.667 on any criterion of any mode is flagged — Krippendorff's lowest "
        "α from which tentative conclusions may be drawn (<cite>Content Analysis</cite>, 2004, "
        "§11.4.4)"
    ) in words


def _contender(key, score, without, *, group=("official",), filings=None):
    import numpy as np

    from finreflect_eval.leaderboard.ranking import Contender

    sums = np.array(filings or [[score / 100]] * 4)
    return Contender(
        key=key,
        model=key,
        score=score,
        group=group,
        panel="p",
        judges=("x", "y"),
        without_judge=without,
        filings=[f"F{i}_2024" for i in range(len(sums))],
        sums=sums,
        counts=np.ones_like(sums),
    )


def test_stability_is_minus_one_when_leaving_out_a_judge_reverses_the_order():
    """Two entries whose order leaving out judge `x` reverses and judge `y` keeps: τ = -1 for
    `x`, 1 for `y`."""
    from finreflect_eval.leaderboard.ranking import standings

    placed = standings(
        [
            _contender("first", 80.0, {"x": 40.0, "y": 90.0}),
            _contender("second", 60.0, {"x": 70.0, "y": 50.0}),
        ]
    )
    assert placed["first"].stability == placed["second"].stability == {"x": -1.0, "y": 1.0}
    assert (placed["first"].rank_range, placed["second"].rank_range) == ([1, 1], [2, 2])


def test_entries_on_other_tasks_or_data_are_not_compared():
    """Entries of different comparison groups (another dataset or other tasks) each stand
    alone: place 1 of 1, no ties, no difference, no stability."""
    from finreflect_eval.leaderboard.ranking import standings

    placed = standings(
        [
            _contender("a", 80.0, {}, group=("official", "data-1")),
            _contender("b", 80.0, {}, group=("official", "data-2")),
        ]
    )
    for standing in placed.values():
        assert (standing.place, standing.rank_range, standing.group_size) == (1, [1, 1], 1)
        assert standing.tied_with == [] and standing.next_difference is None
        assert standing.stability == {}


def test_an_interval_on_few_filings_is_marked_unreliable(runs, tmp_path):
    """An entry whose Overall interval rests on under 12 filings (`ci_reliable` false: the
    results say so, verification recomputes it) is marked on the page and in the JSON; one on
    enough filings is not."""
    from finreflect_eval.leaderboard import render
    from finreflect_eval.leaderboard.entries import load_entries

    board = tmp_path / "board"
    submit(runs["org"], board)
    [entry] = load_entries(board, "submissions")
    assert entry.submission.results.overall.ci_reliable is False  # the sample's 10 filings
    files = render._files(board, [entry])
    [row] = json.loads(files["leaderboard.json"])
    assert row["overall_ci_reliable"] is False
    assert 'class="unreliable"' in files["index.html"]
    entry.submission.results.overall.ci_reliable = True
    files = render._files(board, [entry])
    [row] = json.loads(files["leaderboard.json"])
    assert row["overall_ci_reliable"] is True
    assert 'class="unreliable"' not in files["index.html"]
