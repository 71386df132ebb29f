"""`review export`, `review plan` and `review import` read a run's votes: samples that disagree
with themselves (votes that are not what the judge calls answered, metrics that do not follow
from the votes) are refused in one line, before anything is written; an honest run, with
failed calls, a span without triples and the grounding cascade, is not."""

from __future__ import annotations

import shutil

import pytest
from support.edited_runs import EDITS, assert_refused, edit_vote, honest_run

from finreflect_eval.runs.store import SCORE_INDEX

PLAN = ("--halfwidth", "40", "--disagreement", "0.2")


@pytest.fixture(scope="module", params=[False, True], ids=["every-triple-judged", "cascade"])
def honest(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cascade" if request.param else "judged")
    return honest_run(folder, cascade=request.param).parent


@pytest.fixture
def copy(honest, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(honest, folder)
    return folder


def test_an_honest_run_is_exported_planned_and_imported(cli, copy):
    shutil.rmtree(copy / SCORE_INDEX)  # every sample read, and checked
    exported = cli("review", "export", str(copy), "--audit-sample", "2")
    assert exported.returncode == 0, exported.stderr[-2000:]
    planned = cli("review", "plan", str(copy), *PLAN)
    assert planned.returncode == 0, planned.stderr[-2000:]
    imported = cli("review", "import", str(copy), str(copy / "label-studio" / "tasks.json"))
    assert imported.returncode == 0, imported.stderr[-2000:]  # (no annotations: no labels)


@pytest.mark.parametrize("edit", list(EDITS))
def test_edited_samples_are_refused_in_one_line(cli, copy, tmp_path, edit):
    options, says = EDITS[edit]
    span = edit_vote(copy, **options)
    before = sorted(path.name for path in copy.iterdir())
    exported = cli("review", "export", str(copy), "--audit-sample", "2")
    assert_refused(exported, copy, span, says)
    assert_refused(cli("review", "plan", str(copy), *PLAN), copy, span, says)
    export = tmp_path / "export.json"
    export.write_text("[]")
    assert_refused(cli("review", "import", str(copy), str(export)), copy, span, says)
    assert sorted(path.name for path in copy.iterdir()) == before  # nothing written
