"""`view` reads the samples it shows (not the score index): samples that disagree with
themselves (votes that are not what the judge calls answered, metrics that do not follow from
the votes) are refused in one line, before anything is written; an honest run, with failed
calls, a span without triples and the grounding cascade, is shown."""

from __future__ import annotations

import shutil

import pytest
from support.edited_runs import EDITS, assert_refused, edit_vote, honest_run


@pytest.fixture(scope="module", params=[False, True], ids=["every-triple-judged", "cascade"])
def honest(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cascade" if request.param else "judged")
    return honest_run(folder, cascade=request.param).parent


def test_an_honest_run_is_shown(cli, honest, tmp_path):
    shown = cli("view", str(honest), "--output", str(tmp_path / "report"))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert (tmp_path / "report" / "index.html").exists()


@pytest.mark.parametrize("edit", list(EDITS))
def test_edited_samples_are_refused_in_one_line_and_nothing_is_written(cli, honest, tmp_path, edit):
    options, says = EDITS[edit]
    copy = tmp_path / "run"
    shutil.copytree(honest, copy)
    span = edit_vote(copy, **options)
    shown = cli("view", str(copy), "--output", str(tmp_path / "report"))
    assert_refused(shown, copy, span, says)
    assert not (tmp_path / "report").exists()
