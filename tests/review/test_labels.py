"""`review export` and `review import` without a server: the tasks a run gives, and an export
of them (as Label Studio writes one) read back, with every kind of bad input it may hold."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from support.human_labels import annotated
from support.runs import panel_file, scripted_run

from finreflect_eval.records import HumanLabel, read_lines
from finreflect_eval.review.labels import pseudonym
from finreflect_eval.stats import audit

TASK = "finreflect_smoke_single_pass"


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("labels")
    panel = panel_file(folder, "accepts_all", "rejects_all", "gold_labels")
    return scripted_run(folder, "cand", 6, panel).parent


@pytest.fixture
def run(run_folder, tmp_path) -> Path:
    """A fresh copy of the run for each test (imports write into it)."""
    import shutil

    copy_ = tmp_path / "run"
    shutil.copytree(run_folder, copy_)
    return copy_


def export(cli, run: Path, *extra: str) -> list[dict]:
    result = cli("review", "export", str(run), "--audit-sample", "4", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads((run / "label-studio" / "tasks.json").read_text())


def import_(cli, run: Path, data, tmp_path: Path):
    path = tmp_path / f"export-{len(list(tmp_path.glob('export-*')))}.json"
    path.write_text(json.dumps(data))
    return cli("review", "import", str(run), str(path))


def triples(tasks: list[dict]) -> list[dict]:
    """The triple items of an export (a yes/no answer fits them; an excerpt's is good/poor)."""
    return [task for task in tasks if task["data"]["kind"] == "triple"]


def labels(run: Path) -> list[HumanLabel]:
    return read_lines(HumanLabel, next(run.glob(f"human_labels_{TASK}_*.jsonl")))


def test_export_draws_the_audit_first_and_every_flagged_item_once(cli, run):
    tasks = export(cli, run)
    audited = [task["data"] for task in tasks if task["data"]["sample"] == "audit"]
    drawn = [data for data in audited if data["kind"] == "triple"]
    assert len(drawn) == 4 and {data["audit_sample"] for data in drawn} == {4}
    assert {d["audit_sample"] for d in audited} == {4}
    samples = [task["data"]["sample"] for task in tasks]
    assert samples == sorted(samples)  # "audit" before "flagged"
    keys = [(t["data"]["span_id"], t["data"]["triple_index"]) for t in tasks]
    assert len(keys) == len(set(keys))
    queue = (run / next(p.name for p in run.glob("review_finreflect*.jsonl"))).read_text()
    flagged = {
        (json.loads(line)["span_id"], json.loads(line)["triple_index"])
        for line in queue.splitlines()
    }
    assert flagged <= set(keys)
    assert "judges" not in tasks[0]["data"]  # blind by default
    config = (run / "label-studio" / "label_config.xml").read_text()
    assert "$judges" not in config and 'name="faithfulness"' in config
    assert "judges" in export(cli, run, "--show-judges")[0]["data"]


def test_the_audit_gives_every_item_the_same_chance():
    filings = np.repeat(np.arange(7), [1, 3, 5, 8, 2, 20, 11])
    counts = np.zeros(len(filings))
    for seed in range(4000):
        picked = audit.draw(filings, 10, seed)
        assert len(picked) == 10 and len(set(picked)) == 10
        counts[picked] += 1
        per_filing = np.bincount(filings[picked], minlength=7)
        share = 10 * np.bincount(filings) / len(filings)
        assert np.all(np.abs(per_filing - share) < 1)  # stratified: each filing its share
    assert np.allclose(counts / 4000, 10 / len(filings), atol=0.03)


def test_import_writes_pseudonymised_labels_and_is_idempotent(cli, run, tmp_path):
    tasks = annotated(export(cli, run))
    tasks[0]["annotations"][0]["completed_by"] = {"id": 7, "email": "ann@example.com"}
    result = import_(cli, run, tasks, tmp_path)
    assert result.returncode == 0, result.stderr
    written = labels(run)
    triples = sum(t["data"]["kind"] == "triple" for t in tasks)
    assert len(written) == 3 * triples + (len(tasks) - triples)
    assert {label.annotator for label in written} == {pseudonym(written[0].run, 7)}
    file = next(run.glob("human_labels_*.jsonl"))
    assert "example.com" not in file.read_text()
    before = file.read_bytes()
    assert import_(cli, run, tasks, tmp_path).returncode == 0
    assert file.read_bytes() == before


def test_a_later_import_adds_and_replaces_only_its_own(cli, run, tmp_path):
    tasks = annotated(export(cli, run))
    import_(cli, run, tasks, tmp_path)
    second = annotated(tasks[:1], answer="no" if tasks[0]["data"]["kind"] == "triple" else "poor")
    for annotation in second[0]["annotations"]:
        annotation["completed_by"] = 8
    assert import_(cli, run, second, tmp_path).returncode == 0
    by_annotator = {label.annotator for label in labels(run)}
    assert by_annotator == {pseudonym(labels(run)[0].run, 7), pseudonym(labels(run)[0].run, 8)}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d.update(run_id="2020-01-01T00-00-00-abcd"),
            "from run '2020-01-01T00-00-00-abcd'",
        ),
        (lambda d: d.update(task="other_task"), "task 'other_task' is not in this run"),
        (lambda d: d.update(span_id="NOPE_1"), "span 'NOPE_1' is not a span"),
        (lambda d: d.update(doc_id=999), "is not a span of"),
        (lambda d: d.update(text=d["text"] + " (edited)"), "shows (text) differs from the run's"),
        (lambda d: d.update(span_sha256="0" * 64), "shows (span_sha256) differs from the run's"),
        (lambda d: d.update(html="<p>another text</p>"), "shows (html) differs from the run's"),
        (lambda d: d.update(heading="Label: everything is fine"), "shows (heading) differs"),
        (lambda d: d.update(triple="(none)"), "shows (triple) differs from the run's"),
        (lambda d: d.update(audit_sample=None, sample="audit"), "without its audit_sample"),
        (lambda d: d.update(sample="convenience"), "neither audit nor flagged"),
        (lambda d: d.pop("run_id"), "not a task of `review export`"),
    ],
)
def test_a_task_that_is_not_this_runs_is_refused_in_one_line(cli, run, tmp_path, change, message):
    tasks = annotated(export(cli, run))
    bad = copy.deepcopy(tasks[0])
    change(bad["data"])
    bad["id"] = 999
    result = import_(cli, run, [bad, *tasks[1:]], tmp_path)
    assert result.returncode == 1, result.stderr  # a script sees that part did not go in
    last = result.stderr.strip().splitlines()[-1]
    assert last.endswith(
        "error: 1 refusal(s), listed above; the 41 labels imported are in "
        "the run folder, and a corrected export imports the rest"
    ), last
    refused = [line for line in result.stderr.splitlines() if line.startswith("task 999")]
    assert len(refused) == 1 and message in refused[0], result.stderr
    assert "refused" in refused[0]
    kept = labels(run)  # the rest went in; nothing of the refused task's item
    original = tasks[0]["data"]
    assert len(kept) == 41
    assert not any(
        (label.span_id, label.triple_index) == (original["span_id"], original["triple_index"])
        for label in kept
    )


def test_a_changed_or_unknown_triple_is_refused(cli, run, tmp_path):
    tasks = [t for t in annotated(export(cli, run)) if t["data"]["kind"] == "triple"]
    moved, edited = copy.deepcopy(tasks[0]), copy.deepcopy(tasks[0])
    moved["id"], edited["id"] = 901, 902
    moved["data"]["triple_index"] = 99
    edited["data"]["triple"] = "Apple | ORG | Sells | Moon | PRODUCT"
    result = import_(cli, run, [moved, edited], tmp_path)
    assert result.returncode == 1  # nothing importable: one line says so
    assert "has no triple 99" in result.stderr and "shows (triple) differs" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: nothing imported") or (
        "nothing imported" in result.stderr
    )
    assert not list(run.glob("human_labels_*.jsonl"))


def test_cancelled_partial_duplicate_and_invalid_annotations(cli, run, tmp_path):
    tasks = [t for t in annotated(export(cli, run)) if t["data"]["kind"] == "triple"][:2]
    first, second = tasks
    cancelled = copy.deepcopy(first["annotations"][0]) | {
        "id": 500,
        "was_cancelled": True,
        "completed_by": 9,
    }
    partial = copy.deepcopy(first["annotations"][0]) | {"id": 501, "completed_by": 10}
    partial["result"] = partial["result"][:1]  # faithfulness only
    invalid = copy.deepcopy(first["annotations"][0]) | {"id": 502, "completed_by": 11}
    invalid["result"][0]["value"]["choices"] = ["maybe"]
    invalid["result"][1]["from_name"] = "comprehensiveness"
    later = copy.deepcopy(first["annotations"][0]) | {
        "id": 503,
        "updated_at": "2026-12-07T00:00:00Z",
    }
    later["result"][0]["value"]["choices"] = ["no"]  # user 7 changed their mind
    first["annotations"] += [cancelled, partial, invalid, later, copy.deepcopy(partial)]
    result = import_(cli, run, [first, second, copy.deepcopy(second)], tmp_path)
    assert result.returncode == 1, result.stderr  # two results were left out
    assert "error: 2 refusal(s), listed above" in result.stderr
    assert "faithfulness must be one of yes/no" in result.stderr
    assert "comprehensiveness is not asked of this item" in result.stderr
    assert "1 cancelled" in result.stdout
    assert "duplicate" in result.stdout
    run_id = first["data"]["run_id"]
    mine = [
        label
        for label in labels(run)
        if label.span_id == first["data"]["span_id"]
        and label.triple_index == first["data"]["triple_index"]
    ]
    by = {(label.annotator, label.criterion): label.label for label in mine}
    assert by[pseudonym(run_id, 7), "faithfulness"] == 0  # the latest
    assert (pseudonym(run_id, 9), "faithfulness") not in by  # cancelled
    assert {c for a, c in by if a == pseudonym(run_id, 10)} == {"faithfulness"}  # partial
    assert {c for a, c in by if a == pseudonym(run_id, 11)} == {"relevance"}  # the valid one


@pytest.mark.parametrize("data", [{"tasks": []}, "text", [1, 2]])
def test_not_an_export(cli, run, tmp_path, data):
    result = import_(cli, run, data, tmp_path)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) <= 3, result.stderr


def test_plan_says_how_many_labels_and_from_what(cli, run):
    result = cli("review", "plan", str(run), "--halfwidth", "40", "--disagreement", "0.2")
    assert result.returncode == 0, result.stderr
    rows = [line.split(" | ") for line in result.stdout.splitlines() if TASK in line]
    assert [row[1] for row in rows] == [
        "faithfulness",
        "precision",
        "relevance",
        "comprehensiveness",
    ]
    # 1.96² · 0.2 / (0.4² − 1.96² · V_panel) items: at least the independent count of 1.96²·0.2/0.16
    assert all(int(row[3].split()[0]) >= 5 for row in rows), result.stdout
    assert all("disagreement 0.2 (stated)" in row[6] for row in rows)
    # By confidence: a number too, or "impossible" where the random draw's is
    assert all(row[4].split()[0].isdigit() or "impossible" in row[4] for row in rows)
    tight = cli("review", "plan", str(run), "--halfwidth", "0.5")
    assert (
        tight.returncode == 0 and "impossible" in tight.stdout
    )  # 6 spans: the panel is too unsure
    bad = cli("review", "plan", str(run), "--halfwidth", "0")
    assert bad.returncode == 1 and "--halfwidth 0" in bad.stderr


def test_plan_reads_the_variance_from_the_runs_audit_labels(run, monkeypatch):
    from support.human_labels import label_run

    from finreflect_eval.review import plan

    label_run(run, audit_sample=6)
    monkeypatch.setattr(plan, "MIN_PILOT", 5)  # the run has 12 triples: a small pilot
    rows = plan.plan_run(run, None, halfwidth=40, disagreement=None)
    triples = [row for row in rows if row.criterion != "comprehensiveness"]
    assert {row.source for row in triples} == {"6 audit labels"}
    assert {row.source for row in rows if row.criterion == "comprehensiveness"} == {"prior 0.15"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda task: task.update(id=[1]), "its id is not Label Studio's"),
        (lambda task: task.update(annotations=5), "its annotations are not a list"),
        (lambda task: task["annotations"][0].update(result=5), "not an annotation"),
        # An id that is no number is never written (the label's source says "annotation ?").
        (lambda task: task["annotations"][0].update(id="alice@example.com"), ""),
        (lambda task: task["annotations"][0].update(completed_by=[1]), "no annotator"),
    ],
)
def test_a_crafted_export_is_refused_in_one_line_never_a_traceback(
    cli, run, tmp_path, change, message
):
    tasks = annotated(export(cli, run))
    change(tasks[0])
    result = import_(cli, run, tasks, tmp_path)
    assert result.returncode == (1 if message else 0), result.stderr
    assert message in result.stderr
    written = next(run.glob("human_labels_*.jsonl")).read_text()
    assert "example.com" not in written


def test_an_older_export_never_undoes_a_newer_label(cli, run, tmp_path):
    tasks = annotated(triples(export(cli, run)), answer="no")
    older = annotated(triples(export(cli, run)), answer="yes")
    for task in older:
        task["annotations"][0]["updated_at"] = "2026-01-01T00:00:00Z"
    assert import_(cli, run, tasks, tmp_path).returncode == 0
    assert import_(cli, run, older, tmp_path).returncode == 0
    triple_labels = [label.label for label in labels(run) if label.triple_index is not None]
    assert set(triple_labels) == {0}


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("2026-12-06T10:00:00Z", "2026-12-06T10:00:00.500Z"),  # fractional seconds
        ("2026-12-06T11:00:00+02:00", "2026-12-06T10:00:00Z"),  # an offset: 09:00 UTC first
        ("2026-12-06T10:00:00.250000", "2026-12-06T10:00:01Z"),  # no zone: UTC
    ],
)
def test_the_newest_label_wins_however_its_time_is_written(cli, run, tmp_path, first, then):
    """Times are compared as instants, never as strings; in either import order."""
    older = annotated(triples(export(cli, run)), answer="yes")
    newer = annotated(triples(export(cli, run)), answer="no")
    for tasks, when in ((older, first), (newer, then)):
        for task in tasks:
            task["annotations"][0]["updated_at"] = when
    for order in ((older, newer), (newer, older)):
        for tasks in order:
            assert import_(cli, run, tasks, tmp_path).returncode == 0
        triple_labels = [label.label for label in labels(run) if label.triple_index is not None]
        assert set(triple_labels) == {0}, order


def test_one_person_written_7_and_7_0_is_one_annotator(cli, run, tmp_path):
    tasks = annotated(triples(export(cli, run)), answer="yes")
    later = annotated(triples(export(cli, run)), answer="no")
    for task in later:
        task["annotations"][0] |= {"completed_by": 7.0, "updated_at": "2026-12-06T11:00:00Z"}
    assert import_(cli, run, tasks, tmp_path).returncode == 0
    assert import_(cli, run, later, tmp_path).returncode == 0
    assert {label.annotator for label in labels(run)} == {pseudonym(labels(run)[0].run, 7)}
    assert {label.label for label in labels(run) if label.triple_index is not None} == {0}
    assert pseudonym("r", {"id": 7.0}) == pseudonym("r", 7) != pseudonym("r", 7.5)


def test_a_flagged_task_passed_off_as_the_audits_is_refused_at_scoring(cli, run, tmp_path):
    tasks = annotated(export(cli, run))
    audit = next(t["data"] for t in tasks if t["data"]["sample"] == "audit")
    for task in tasks:
        if task["data"]["sample"] == "flagged":
            task["data"].update(sample="audit", audit_sample=audit["audit_sample"])
            task["data"].update(audit_seed=audit["audit_seed"])
    assert import_(cli, run, tasks, tmp_path).returncode == 0
    scored = cli("score", "--samples", str(run))
    assert scored.returncode == 1
    assert (
        "marked audit, but the audit (audit_sample 4, audit_seed 1234, uniform) did not draw it"
        in (scored.stderr)
    )


def test_a_time_in_another_iso_form_leaves_the_label_without_a_time_not_out(cli, run, tmp_path):
    tasks = annotated(triples(export(cli, run)))
    tasks[0]["annotations"][0]["updated_at"] = "2024-W01-1"  # an ISO week date
    assert import_(cli, run, tasks, tmp_path).returncode == 0
    first = tasks[0]["data"]
    mine = [
        label
        for label in labels(run)
        if (label.span_id, label.triple_index) == (first["span_id"], first["triple_index"])
    ]
    assert len(mine) == 3 and {label.annotated_at for label in mine} == {None}
