"""People's labels on the leaderboard: a submission carries the run's labels (`review import`),
`verify` recomputes the results' `human` block from them, and the board shows the entry's audit
by people (audit size, the panel's agreement with people, PPI beside the panel's score) only
for an entry whose labels came with it and verified; nothing (an empty cell, never 0) for one
without. Tampered labels are refused in one line."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from support.human_labels import label_run
from support.runs import panel_file, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard import build, bundle_run, check, submit
from finreflect_eval.records import Results, read

TASK = "finreflect_smoke_single_pass"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two complete smoke runs on the sample whose panel splits on every triple (accepts all,
    rejects all, the gold label): one labelled by people at random (and rescored), one not."""
    root = tmp_path_factory.mktemp("human-runs")
    made = {}
    for name, model in (("labelled", "acme/kg-7b"), ("plain", "acme/kg-3b")):
        panel = panel_file(root / name, "accepts_all", "rejects_all", "gold_labels")
        made[name] = scripted_run(root / name, model, None, panel).parent
    label_run(made["labelled"])
    return made


def bundle(run) -> dict:
    return bundle_run(run).model_dump(mode="json", by_alias=True)


def forged(tmp_path, data: dict):
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(data))
    return path


def results_of(run) -> Results:
    return read(Results, next(run.glob("results_*.json")))


def test_a_submission_with_labels_is_accepted_and_the_board_shows_its_audit(runs, tmp_path):
    board = tmp_path / "board"
    data = bundle(runs["labelled"])
    labels = data["human_labels"][TASK]
    assert labels and all(label["task"] == TASK for label in labels)
    stored, _ = submit(runs["labelled"], board)
    assert json.loads(stored.read_text())["human_labels"] == data["human_labels"]
    assert check(board) == []

    human = results_of(runs["labelled"]).human[TASK]
    row = json.loads((board / "leaderboard.json").read_text())[0]
    assert row["human_audit"] == sum(c.audit_labels for c in human.values()) > 0
    assert row["human_labels"] == sum(c.labels for c in human.values())
    assert row["human_annotators"] == 1
    with_ppi = [c for c in human.values() if c.ppi is not None]
    assert row["human_ppi"] == round(sum(c.ppi for c in with_ppi) / len(with_ppi), 2)
    assert row["human_panel"] == round(sum(c.panel for c in with_ppi) / len(with_ppi), 2)
    audited = [c.panel_agreement for c in human.values() if c.agreement_on == "audit"]
    pooled = sum(a.accuracy * a.n for a in audited) / sum(a.n for a in audited)
    assert row["human_accuracy"] == round(pooled, 4)
    faithfulness = row["human"]["single_pass"]["F"]
    assert faithfulness["ppi"] == human["faithfulness"].ppi
    assert faithfulness["accuracy"] == human["faithfulness"].panel_agreement.accuracy
    assert row["overall"] == results_of(runs["labelled"]).overall.score  # not part of it
    # What the judges' votes are worth: against people, the mean of Kish's effective numbers.
    worth = results_of(runs["labelled"]).judges_worth[TASK]
    effective = [w.people.effective_judges for w in worth.values() if w.people]
    effective = [value for value in effective if value is not None]
    assert row["judges_effective_against"] == "people" and effective
    assert row["judges_effective"] == round(sum(effective) / len(effective), 2)
    # accepts_all and rejects_all err on opposite items: anti-correlated, counted as at most 3
    assert row["judges_effective"] == 3.0
    line = next(csv.DictReader(io.StringIO((board / "leaderboard.csv").read_text())))
    assert line["human_audit"] == str(row["human_audit"])

    page = (board / "index.html").read_text()
    assert 'data-key="human_ppi"' in page  # the PPI column, beside Overall
    assert f'data-value="{float(row["human_ppi"])}"' in page
    assert f"{row['human_audit']} audited · acc {row['human_accuracy']:.2f}" in page
    assert "checked against people" in page
    assert "count as " + f"{row['judges_effective']:.2f}" in page
    # The entry's report shows the people's labels too (the stored labels travel with it).
    report = (board / row["report"]).parent
    assert 'class="people"' in (report / "index.html").read_text()
    assert '"h":{' in (report / "data" / TASK / "0.js").read_text()


def test_a_submission_without_labels_claims_nothing(runs, tmp_path):
    """An old-style submission (no labels, no `human` block) still verifies; its file has no
    `human_labels` key (so an entry stored before labels existed keeps its name and digest) and
    the board claims no audit: every human column empty, no PPI or People column on the page."""
    board = tmp_path / "board"
    data = bundle(runs["plain"])
    assert "human_labels" not in data and "human" not in data["results"]
    stored, _ = submit(forged(tmp_path, data), board)
    assert "human_labels" not in json.loads(stored.read_text())
    row = json.loads((board / "leaderboard.json").read_text())[0]
    human = {key: value for key, value in row.items() if key.startswith("human")}
    assert human and set(human.values()) == {None}
    line = next(csv.DictReader(io.StringIO((board / "leaderboard.csv").read_text())))
    assert {line[key] for key in human} == {""}
    page = (board / "index.html").read_text()
    # (no people's audit, "N audited"; the re-judging audit's badge says "not audited")
    assert "human_ppi" not in page and not re.search(r"\d audited", page)
    assert "checked against people" not in page

    # Beside a labelled entry: the columns show, the unlabelled entry's cells empty.
    submit(runs["labelled"], board)
    rows = {r["model"]: r for r in json.loads((board / "leaderboard.json").read_text())}
    assert rows["acme/kg-3b"]["human_ppi"] is None and rows["acme/kg-7b"]["human_ppi"]
    page = (board / "index.html").read_text()
    plain = page[page.index('data-run="' + rows["acme/kg-3b"]["run_id"]) :]
    plain = plain[: plain.index("</tr>")]
    assert '<td class="people optional"></td>' in plain and 'data-key="human_ppi"' not in plain
    assert re.search(r'<td class="optional people left"></td>', plain)


def _flip_an_audit_label(data: dict) -> str:
    label = next(x for x in data["human_labels"][TASK] if x["sample"] == "audit")
    label["label"] = {0: 1, 1: 0, "good": "poor", "partial": "good", "poor": "good"}[label["label"]]
    return label["criterion"]


def test_a_flipped_label_is_refused_naming_the_value_it_changes(runs, tmp_path):
    data = bundle(runs["labelled"])
    criterion = _flip_an_audit_label(data)
    with pytest.raises(FinReflectError) as refusal:
        submit(forged(tmp_path, data), tmp_path / "board")
    message = str(refusal.value)
    assert "\n" not in message
    assert re.match(
        rf"^refused: human\.{TASK}\.{criterion}\.\S+: submitted .+, recomputed from the samples "
        r"and human labels .+; the human block follows from the submitted human labels",
        message,
    ), message
    assert not (tmp_path / "board" / "submissions").exists()


def test_labels_made_on_other_text_are_refused(runs, tmp_path):
    data = bundle(runs["labelled"])
    label = data["human_labels"][TASK][0]
    label["span_sha256"] = "0" * 64
    with pytest.raises(FinReflectError) as refusal:
        submit(forged(tmp_path, data), tmp_path / "board")
    message = str(refusal.value)
    assert "\n" not in message
    assert message == (
        f"refused: human label of span {label['span_id']} ({TASK}, {label['criterion']}): "
        "made on other text than the run's span (sha256)"
    ), message


def _audit_of(data: dict) -> dict:
    audit = next(label for label in data["human_labels"][TASK] if label["sample"] == "audit")
    return {"audit_sample": audit["audit_sample"], "audit_seed": audit["audit_seed"]}


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (  # labels dropped: the submitted human block no longer follows
            lambda data: data.pop("human_labels"),
            r"^refused: human: present in only one of the submitted and recomputed results; "
            r"the human block follows",
        ),
        (  # a human block claimed without any labels
            lambda data: data["results"].pop("human"),
            r"^refused: human: present in only one",
        ),
        (
            lambda data: data["human_labels"].update(other_task=data["human_labels"][TASK][:1]),
            r"^refused: human labels of task 'other_task', which the run does not have",
        ),
        (
            lambda data: data["human_labels"][TASK][0].update(span_id="NOPE_2024_item1_0001"),
            r"^refused: human label of span NOPE_2024_item1_0001 .*: the run has no such span",
        ),
        (  # a triple the span does not have
            lambda data: next(
                label for label in data["human_labels"][TASK] if label["triple_index"] is not None
            ).update(triple_index=99),
            r"^refused: human label of span \S+ \(\w+, \w+\): the span has no triple 99$",
        ),
        (  # an item of the review queue passed off as drawn by the random audit
            lambda data: next(
                label for label in data["human_labels"][TASK] if label["sample"] == "flagged"
            ).update(sample="audit", **_audit_of(data)),
            r"^refused: human label .*: marked audit, but the audit \(audit_sample \d+, "
            r"audit_seed \d+, uniform\) did not draw it",
        ),
        (
            lambda data: data["human_labels"][TASK][0].update(run="2020-01-01T00-00-00-abcd"),
            r"^refused: human label .*: made for run 2020-01-01T00-00-00-abcd",
        ),
    ],
)
def test_labels_and_human_block_that_do_not_go_together_are_refused(
    runs, tmp_path, change, refusal
):
    data = bundle(runs["labelled"])
    change(data)
    with pytest.raises(FinReflectError, match=refusal) as raised:
        submit(forged(tmp_path, data), tmp_path / "board")
    assert "\n" not in str(raised.value)


def test_a_stored_entry_with_tampered_labels_stops_the_build(runs, tmp_path):
    board = tmp_path / "board"
    stored, _ = submit(runs["labelled"], board)
    data = json.loads(stored.read_text())
    _flip_an_audit_label(data)
    stored.write_text(json.dumps(data))
    with pytest.raises(FinReflectError, match=stored.name):
        build(board)


def test_a_refused_label_and_a_changed_score_are_both_named(runs, tmp_path):
    """Refused labels leave the rest to check: every other number is still recomputed (from
    the votes alone) and a difference there is named beside them."""
    data = bundle(runs["labelled"])
    data["human_labels"][TASK][0]["span_sha256"] = "0" * 64
    data["results"]["results"][TASK]["precision,none"] = 99.0
    with pytest.raises(FinReflectError) as refusal:
        submit(forged(tmp_path, data), tmp_path / "board")
    reasons = str(refusal.value).splitlines()
    assert reasons[0] == "refused: 2 reasons", reasons
    assert "made on other text than the run's span" in reasons[1]
    assert reasons[2].startswith(f"- results.{TASK}.precision,none: submitted 99.0, recomputed")
