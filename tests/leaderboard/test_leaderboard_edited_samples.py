"""`submit` refuses samples that disagree with themselves with the check `score`, `view` and
`review` make (`runs.consistency.sample_problem`): votes that are not what the judge calls'
recorded text answered, even with the per-sample metrics made to follow, whether the run folder
or a bundle was edited; an honest run (a span without triples, failed calls, the grounding
cascade) passes it."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from support.edited_runs import PANEL, TASK, VOTE_EDITED, edit_vote, honest_run

from finreflect_eval._util.errors import FinReflectError, Refusal
from finreflect_eval.leaderboard import bundle_run, submit
from finreflect_eval.leaderboard.sample_checks import derived_problems
from finreflect_eval.records import Submission
from finreflect_eval.records.samples import fill

ACCEPTING = ("gold_labels", "accepts_all", "accepts_all")  # no failed call: within the policy


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {
        "failing judge": honest_run(root / "failing"),
        "cascade, failing judge": honest_run(root / "cascade", cascade=True),
        "submittable": honest_run(root / "submittable", judges=ACCEPTING, limit=None),
    }


@pytest.mark.parametrize("run", ["failing judge", "cascade, failing judge", "submittable"])
def test_an_honest_run_holds_together(runs, run):
    assert derived_problems(bundle_run(runs[run]).samples) == []


def test_an_honest_run_is_accepted(runs, tmp_path):
    target, _ = submit(runs["submittable"], tmp_path / "board", dry_run=True)
    assert target.name.endswith(".json")


def test_a_run_folder_with_votes_and_metrics_edited_is_refused(runs, tmp_path):
    """Votes edited and the metrics made to follow (`fill`): only the judge calls' recorded
    text says that the votes are not the judges'."""
    folder = tmp_path / "run"
    shutil.copytree(runs["submittable"].parent, folder)
    span = edit_vote(folder, metrics=True)
    with pytest.raises(
        FinReflectError, match=re.escape(f"task {TASK}, span {span}: {VOTE_EDITED}")
    ):
        submit(folder / runs["submittable"].name, tmp_path / "board", dry_run=True)


def test_a_bundle_with_votes_and_metrics_edited_is_refused_naming_span_criterion_and_judge(
    runs, tmp_path
):
    submission = bundle_run(runs["submittable"])
    record = next(r for r in submission.samples[TASK] if r.triples)
    cast = record.votes[PANEL]["faithfulness"]["judge-1"]
    cast[0] = cast[0].model_copy(update={"verdict": 1 - cast[0].verdict})
    fill(record)
    forged = tmp_path / "forged.json"
    forged.write_text(submission.model_dump_json())
    Submission.model_validate(json.loads(forged.read_text()))  # a well-formed bundle
    with pytest.raises(Refusal) as refused:
        submit(forged, tmp_path / "board", dry_run=True)
    reason = f"task {TASK}, span {record.span_id}: {VOTE_EDITED}"
    assert any(r.startswith(reason) for r in refused.value.reasons), refused.value.reasons
