"""What `submit` and `leaderboard build` say: an unfinished run names the command that finishes
it; an accepted run, its section and whether it is ranked (and why not); a file that is no
submission says so, while one of an older format is still sent to `upgrade`; two stored files
that share a report folder are both named."""

import json
import shutil
import tarfile

import pytest
from conftest import TESTS
from support.official import hub_folder, register
from support.runs import panel_file, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard import build, submit


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """A complete smoke run on the sample (scripted candidate and judges): its results file."""
    root = tmp_path_factory.mktemp("scored")
    panel = panel_file(root, "accepts_all", "accepts_all", "rejects_all")
    return scripted_run(root, "acme/kg-7b", None, panel)


def unfinished(results, tmp_path, **manifest_fields):
    """A copy of the run's folder without its results, its manifest changed by `manifest_fields`."""
    folder = tmp_path / "run"
    shutil.copytree(results.parent, folder)
    for path in folder.glob("results_*.json"):
        path.unlink()
    (manifest,) = folder.glob("manifest_*.json")
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(data | manifest_fields))
    return folder


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({}, "judged by panel 'scripted-test' but not scored: finreflect-eval score --samples"),
        (
            {"judging": {}},
            "extracted but not judged or scored: rerun the same `finreflect-eval run`",
        ),
        (
            {"judging": {}, "status": "extracting"},
            "still extracting (not judged or scored): rerun the same `finreflect-eval run`",
        ),
    ],
)
def test_an_unfinished_run_names_the_command_that_finishes_it(scored, tmp_path, fields, says):
    folder = unfinished(scored, tmp_path, **fields)
    with pytest.raises(FinReflectError) as refused:
        submit(folder, tmp_path / "board", dry_run=True)
    assert says in str(refused.value) and str(folder) in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_folder_that_is_no_run_says_so(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(
        FinReflectError, match=r"no results_\*\.json or manifest_\*\.json here: not a"
    ):
        submit(tmp_path, tmp_path / "board", dry_run=True)


def test_a_dry_run_says_the_section_and_why_it_is_not_ranked(scored, tmp_path, cli):
    from finreflect_eval.leaderboard import submit_entry

    board = tmp_path / "board"
    said = submit_entry(scored, board, dry_run=True)
    assert said.standing == "the smoke section, not ranked: the bundled sample is never ranked"
    dry = cli("submit", str(scored), "--leaderboard", str(board), "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert dry.stdout.strip().splitlines() == [
        f"accepted (dry run): would be written to {said.target}; the smoke section, not "
        "ranked: the bundled sample is never ranked"
    ]
    # On an official dataset with no version pinned, judged by a panel of its own: community.
    dataset = hub_folder(tmp_path)
    register(board, dataset)
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    community = scripted_run(
        tmp_path / "c", "acme/kg-7b", None, panel, ("finreflect",), str(dataset)
    )
    said = submit_entry(community, board)
    assert said.standing == (
        "the community section, not ranked: a community entry (panel 'scripted-test' is not a "
        "bundled official panel)"
    )
    rows = json.loads((board / "leaderboard.json").read_text())
    assert [(row["section"], row["rank"]) for row in rows] == [("community", None)]


def test_a_json_file_that_is_no_submission_says_so(tmp_path, cli):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"not": "a submission"}))
    with pytest.raises(FinReflectError, match="is not a submission") as refused:
        submit(path, tmp_path / "board", dry_run=True)
    assert "older format" not in str(refused.value)
    # stored on the board, it stops the build, saying the same
    stored = tmp_path / "board" / "submissions" / "acme__kg-7b" / "other.json"
    stored.parent.mkdir(parents=True)
    shutil.copy(path, stored)
    with pytest.raises(FinReflectError, match="is not a Submission file") as refused:
        build(tmp_path / "board")
    assert str(stored) in str(refused.value) and "older format" not in str(refused.value)
    # a run of an older finreflect-eval is still sent to `upgrade`
    with tarfile.open(TESTS / "fixtures" / "run_d167a05.tar.gz") as archive:
        archive.extractall(tmp_path / "old", filter="data")
    old = cli("submit", str(tmp_path / "old" / "candidate"), "--dry-run")
    assert old.returncode == 1 and "in an older format" in old.stderr
    assert "finreflect-eval upgrade" in old.stderr


def test_two_files_sharing_a_report_folder_are_both_named(scored, tmp_path):
    board = tmp_path / "board"
    stored, _ = submit(scored, board)
    copy = stored.with_name("copy.json")
    shutil.copy(stored, copy)
    with pytest.raises(FinReflectError, match="share the report folder") as refused:
        build(board)
    assert str(stored) in str(refused.value) and str(copy) in str(refused.value)
