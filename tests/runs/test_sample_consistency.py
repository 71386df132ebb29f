"""A samples file that disagrees with itself is refused wherever a run is read: every vote is
what its judge's recorded call answered (or what a rule gives without a call), and the fields
derived from the votes (per-sample metrics, lm-eval's hashes) follow from them. An honest run,
with failed calls, spans without triples and the grounding cascade, is never refused."""

from __future__ import annotations

import json
import shutil

import pytest
from support.edited_runs import (
    A_JUDGE_MAY_FAIL_FLAG,
    EDITS,
    PANEL,
    TASK,
    assert_refused,
    edit_vote,
    honest_run,
    samples_path,
)

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.records import SampleRecord, read_lines
from finreflect_eval.records.samples import NO_TRIPLES_VOTE, UNGROUNDED_VOTE, fill
from finreflect_eval.runs.consistency import sample_problem, vote_problem
from finreflect_eval.runs.store import SCORE_INDEX, RunStore


@pytest.fixture(scope="module", params=[False, True], ids=["every-triple-judged", "cascade"])
def honest(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cascade" if request.param else "judged")
    return honest_run(folder, cascade=request.param).parent


@pytest.fixture
def copy(honest, tmp_path):
    """A copy of the honest run, read from its samples (no score index)."""
    folder = tmp_path / "run"
    shutil.copytree(honest, folder)
    shutil.rmtree(folder / SCORE_INDEX)
    return folder


def records(folder):
    return read_lines(SampleRecord, samples_path(folder))


def test_an_honest_run_holds_together_and_rescores_the_same_from_its_samples(cli, copy):
    assert [sample_problem(record) for record in records(copy)] == [None] * len(records(copy))
    results = next(copy.glob("results_*.json"))
    written = json.loads(results.read_text())
    RunStore(copy).load(for_scoring=True)  # read from the samples: every sample checked
    scored = cli("score", "--samples", str(copy), *A_JUDGE_MAY_FAIL_FLAG)
    assert scored.returncode == 0, scored.stderr[-2000:]
    again = json.loads(results.read_text())
    assert again["results"] == written["results"] and again["details"] == written["details"]


@pytest.mark.parametrize("edit", list(EDITS))
def test_score_refuses_edited_samples_in_one_line(cli, copy, edit):
    """Today's bug: `score` rewrote the results from votes edited in a copy (exit 0)."""
    options, says = EDITS[edit]
    results = next(copy.glob("results_*.json"))
    written = results.read_bytes()
    span = edit_vote(copy, **options)
    scored = cli("score", "--samples", str(copy), *A_JUDGE_MAY_FAIL_FLAG)
    assert_refused(scored, copy, span, says)
    assert results.read_bytes() == written  # nothing written
    with pytest.raises(FinReflectError, match=f"task {TASK}, span {span}: "):
        RunStore(copy).load()


def _first_judged(rows, criterion="faithfulness"):
    """The first record with a judged vote on `criterion`, and that vote's judge and index."""
    for record in rows:
        for judge, cast in record.votes[PANEL].get(criterion, {}).items():
            for index, vote in enumerate(cast):
                if not vote.synthetic and vote.verdict is not None:
                    return record, judge, index
    raise AssertionError("no judged vote")


def _call(record, criterion, judge):
    step = f"judge:{criterion}"
    return next(c for c in record.judge_calls[PANEL] if (c.step, c.model) == (step, judge))


def _flip(vote):
    return vote.model_copy(update={"verdict": 1 - vote.verdict})


def _vote_forgeries():
    """Ways to forge a record's votes against its calls, each with what the refusal says."""

    def edited(record, judge, index):
        cast = record.votes[PANEL]["faithfulness"][judge]
        cast[index] = _flip(cast[index])

    def reasoning(record, judge, index):
        cast = record.votes[PANEL]["faithfulness"][judge]
        cast[index] = cast[index].model_copy(update={"reasoning": "edited"})

    def marked_by_rule(record, judge, index):  # a judged vote passed off as the cascade's
        record.votes[PANEL]["faithfulness"][judge][index] = UNGROUNDED_VOTE

    def rule_changed(record, judge, index):
        vote = UNGROUNDED_VOTE.model_copy(update={"verdict": 1})
        record.votes[PANEL]["faithfulness"][judge][index] = vote

    def no_triples_on_a_span_with_triples(record, judge, index):
        record.votes[PANEL]["comprehensiveness"][judge] = [NO_TRIPLES_VOTE]

    def call_dropped(record, judge, index):
        record.judge_calls[PANEL].remove(_call(record, "faithfulness", judge))

    def call_repeated(record, judge, index):
        record.judge_calls[PANEL].append(_call(record, "faithfulness", judge))

    def call_text_broken(record, judge, index):
        _call(record, "faithfulness", judge).text = "not json"

    def failed_call_with_verdicts(record, judge, index):
        _call(record, "faithfulness", judge).error = "timed out"

    def votes_dropped(record, judge, index):
        del record.votes[PANEL]["faithfulness"][judge]

    def one_vote_short(record, judge, index):
        record.votes[PANEL]["faithfulness"][judge].pop()

    vote = f"panel {PANEL}, faithfulness (judge-"
    return {
        "edited verdict": (edited, f"{vote}0): vote 1 is not what its judge call answered"),
        "edited reasoning": (reasoning, f"{vote}0): vote 1 is not what its judge call answered"),
        "judged vote marked as the rule's": (marked_by_rule, f"{vote}0): "),
        "rule vote changed": (rule_changed, "a vote marked as given by rule is not what the rule"),
        "no-triples vote on triples": (
            no_triples_on_a_span_with_triples,
            "comprehensiveness (judge-0): a vote marked as given by rule is not what the rule",
        ),
        "call dropped": (call_dropped, f"{vote}0): votes without the judge call that cast them"),
        "call repeated": (call_repeated, "judge calls are not one per judge and criterion"),
        "call text broken": (call_text_broken, "its judge call's recorded text is not a valid"),
        "failed call with verdicts": (
            failed_call_with_verdicts,
            f"{vote}0): vote 1 is not what its judge call answered",
        ),
        "votes dropped": (votes_dropped, f"{vote}0): a judge call without its votes"),
        "one vote short": (one_vote_short, "votes on "),
    }


FORGERIES = _vote_forgeries()


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_votes_that_are_not_what_the_calls_answered_are_refused(honest, forgery):
    """Each forgery is refused even with the derived fields made to follow (`fill`)."""
    change, says = FORGERIES[forgery]
    rows = records(honest)
    record, judge, index = _first_judged(rows)
    assert judge == "judge-0" and vote_problem(record) is None
    change(record, judge, index)
    fill(record)
    problem = sample_problem(record)
    assert problem is not None and says in problem, problem


def test_a_judge_answer_edited_to_match_edited_votes_leaves_the_metrics_behind(honest):
    """Votes and call text edited together, the metrics left: the derived field is named."""
    rows = records(honest)
    record, _, index = _first_judged(rows)
    cast = record.votes[PANEL]["faithfulness"]
    for name in ("judge-1", "judge-2"):  # both accept: the majority changes
        position = sum(not vote.synthetic for vote in cast[name][:index])
        cast[name][index] = _flip(cast[name][index])
        call = _call(record, "faithfulness", name)
        answer = json.loads(call.text)
        answer["verdicts"][position]["verdict"] = cast[name][index].verdict
        call.text = json.dumps(answer)
    assert vote_problem(record) is None
    assert sample_problem(record) == (
        "metrics is not what the sample's other fields give (edited samples?)"
    )
