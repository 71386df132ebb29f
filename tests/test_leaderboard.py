"""`submit` and `leaderboard build`: verified submissions, refusals, and an escaped page."""

import json
import os
import shutil

import pytest
from support.runs import panel_file, scripted_run

from finreflect_eval.errors import FinReflectError
from finreflect_eval.leaderboard import build, bundle_run, submit

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
    assert page.count('<tr class="entry"') == 1


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
    with pytest.raises(FinReflectError, match="refused: model name"):
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
            rf"^task '{TASK}' hash 0{{16}} differs from this leaderboard's [0-9a-f]+ \(its prompts",
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

    from finreflect_eval.evaluator import RunConfig, evaluate
    from finreflect_eval.judging import load_panel
    from finreflect_eval.models import ModelSpec

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
