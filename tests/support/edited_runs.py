"""Honest scripted runs that hold every kind of vote (a judge's answer, a failed call's
abstentions, the rule votes of a span without triples and of the grounding cascade), and their
samples edited on disk as a careless or dishonest user edits them: a judge's vote changed,
with or without the per-sample metrics made to follow, with or without the judge call's
recorded text changed to match."""

from __future__ import annotations

import json
from pathlib import Path

from finreflect_eval.protocol.criteria import TRIPLE_CRITERIA
from finreflect_eval.records import SampleRecord, read_lines
from finreflect_eval.records.samples import FAILED_CALL_VOTE, NO_TRIPLES_VOTE, UNGROUNDED_VOTE, fill
from finreflect_eval.scoring.failures import FailurePolicy
from support.runs import TRIPLES, panel_file, scripted_run

TASK = "finreflect_smoke_single_pass"
PANEL = "scripted-test"
# judge-0 answers the gold labels, judge-1 accepts everything, judge-2 fails every
# comprehensiveness call (its abstentions: within a policy that lets a judge fail).
JUDGES = ("gold_labels", "accepts_all", "broken_on_spans")
A_JUDGE_MAY_FAIL = FailurePolicy(max_judge_failure_share=1)
A_JUDGE_MAY_FAIL_FLAG = ("--max-judge-failure-share", "1")
# Both judges that accept the triple are edited to reject it: its majority changes.
EDITED_JUDGES, EDITED_CRITERION = ("judge-1", "judge-2"), "faithfulness"

GROUNDED = TRIPLES["triples"][0]  # no figure: judged under the cascade
UNGROUNDED = {  # a figure its span does not hold: scored 0 by the cascade's rule
    "subject": "AAPL",
    "subject_type": "ORG",
    "relation": "Discloses",
    "object": "net sales of $999.9 billion",
    "object_type": "FIN_METRIC",
}
NO_TRIPLES = {"triples": []}
# The candidate's answers, span by span (the last repeats): the first span's output is invalid
# (no triples; one span in six, within the failure policy), so it counts with none.
ANSWERS = [NO_TRIPLES, TRIPLES]
# Under the cascade, the second span's triples are all ungrounded (no triple criterion's call).
CASCADE_ANSWERS = [NO_TRIPLES, {"triples": [UNGROUNDED]}, {"triples": [GROUNDED, UNGROUNDED]}]


def honest_run(
    folder: Path, *, cascade: bool = False, limit: int | None = 6, judges: tuple[str, ...] = JUDGES
) -> Path:
    """A scored run of the smoke task on the sample's first spans (see ANSWERS); returns its
    results file. Every kind of vote is in it (asserted, so that no test passes vacuously;
    failed calls where `judges` has `broken_on_spans`)."""
    panel = panel_file(folder, *judges)
    answers = CASCADE_ANSWERS if cascade else ANSWERS
    results = scripted_run(
        folder,
        "acme/kg-7b",
        limit,
        panel,
        (TASK,),
        answer=answers,
        policy=A_JUDGE_MAY_FAIL,
        skip_judging_ungrounded=cascade,
    )
    records = read_lines(SampleRecord, samples_path(results.parent))
    votes = [
        vote
        for record in records
        for by_judge in record.votes[PANEL].values()
        for cast in by_judge.values()
        for vote in cast
    ]
    calls = [call for record in records for call in record.judge_calls[PANEL]]
    assert NO_TRIPLES_VOTE in votes and not records[0].triples
    failing = "broken_on_spans" in judges
    assert any(call.error for call in calls) == any(v.verdict is None for v in votes) == failing
    assert (UNGROUNDED_VOTE in votes) == cascade
    if cascade:  # a span none of whose triples was sent: its triple criteria have no call
        assert {call.step for call in records[1].judge_calls[PANEL]} == {"judge:comprehensiveness"}
    return results


def samples_path(folder: Path) -> Path:
    return next(folder.glob(f"samples_{TASK}_*.jsonl"))


def edit_vote(folder: Path, *, metrics: bool = False, call: bool = False) -> str:
    """Change judged votes in the run's samples file (`EDITED_JUDGES`' faithfulness vote on the
    first judged triple of the first span with one, 1 to 0: its majority changes); `metrics`:
    the per-sample metrics made to follow from the votes (`fill`); `call`: the judge calls'
    recorded text changed to match. Returns the span's id."""
    path = samples_path(folder)
    records = read_lines(SampleRecord, path)
    by_judge = None
    for record in records:
        by_judge = record.votes[PANEL].get(EDITED_CRITERION, {})
        if any(not vote.synthetic for vote in by_judge.get(EDITED_JUDGES[0], [])):
            break
    index = next(i for i, vote in enumerate(by_judge[EDITED_JUDGES[0]]) if not vote.synthetic)
    step = f"judge:{EDITED_CRITERION}"
    for judge in EDITED_JUDGES:
        vote = by_judge[judge][index]
        assert vote.verdict == 1  # (both accept every triple)
        by_judge[judge][index] = vote.model_copy(update={"verdict": 0})
        if call:  # the first judged triple is the call's first
            made = next(c for c in record.judge_calls[PANEL] if (c.step, c.model) == (step, judge))
            answer = json.loads(made.text)
            answer["verdicts"][0]["verdict"] = 0
            made.text = json.dumps(answer)
    if metrics:
        fill(record)
    path.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    return record.span_id


def recast(record: SampleRecord) -> None:
    """Make a record whose votes a test set by hand hold together again, as if its judges had
    voted so: each judge call answers what its votes say (where they are all abstentions, the
    call failed, and each is the failed call's), and the derived fields follow (`fill`). A call
    answers every item it was asked about or fails: votes that mix the two are refused."""
    for panel, calls in record.judge_calls.items():
        for call in calls:
            criterion = call.step.removeprefix("judge:")
            cast = record.votes[panel][criterion][call.model]
            judged = [index for index, vote in enumerate(cast) if not vote.synthetic]
            if all(cast[index].verdict is None for index in judged):
                call.error = "invalid output (set by a test)"
                for index in judged:
                    cast[index] = FAILED_CALL_VOTE
                continue
            assert all(cast[index].verdict is not None for index in judged), "abstains in part"
            items = [cast[index].model_dump(exclude={"synthetic"}) for index in judged]
            answer = {"verdicts": items} if criterion in TRIPLE_CRITERIA else items[0]
            call.text, call.error = json.dumps(answer), None
    fill(record)


def assert_refused(result, folder: Path, span: str, says: str) -> None:
    """A command refused the edited samples in one line naming the file, task, span and what."""
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{samples_path(folder)}: task {TASK}, span {span}: " in lines[0], lines[0]
    assert says in lines[0], lines[0]


VOTE_EDITED = f"panel {PANEL}, {EDITED_CRITERION} (judge-1): vote 1 is not what its judge call"
# (how the samples are edited: `edit_vote`'s options; what the refusal says)
EDITS = {
    "votes": ({}, VOTE_EDITED),
    "votes and metrics": ({"metrics": True}, VOTE_EDITED),
    "votes and calls": ({"call": True}, "metrics is not what the sample's other fields give"),
}
