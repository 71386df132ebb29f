"""The score index (what `score` reads instead of gigabytes of samples) and the review queue's
bulk writers: the same files, byte for byte, as the records and pydantic give."""

import csv
import io
import json
import os
import re

import numpy as np
import pytest
from support.runs import panel_file, scripted_run

from finreflect_eval.errors import FinReflectError
from finreflect_eval.metrics import _normalise
from finreflect_eval.records import ReviewItem
from finreflect_eval.scoring import FailurePolicy, compute_results, review_queue, score_tables
from finreflect_eval.span_facts import SpanFacts
from finreflect_eval.store import (
    INDEX_FORMAT,
    SCORE_INDEX,
    RunStore,
    review_csv,
    review_jsonl,
)
from finreflect_eval.votes import VoteTable

TASKS = ("finreflect_smoke_single_pass", "finreflect_smoke_reflection")


def outputs(folder):
    return {
        p.name: p.read_bytes()
        for p in folder.glob("*")
        if p.name.startswith(("results_", "review_"))
    }


# The broken judge's abstentions are what these tests read: its failures must not stop the run.
A_JUDGE_MAY_FAIL = FailurePolicy(max_judge_failure_share=1)
A_JUDGE_MAY_FAIL_FLAG = ("--max-judge-failure-share", "1")


def test_score_reads_the_index_and_an_index_of_other_samples_is_never_read(cli, tmp_path):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "broken")
    results = scripted_run(tmp_path, "acme/kg-7b", 3, panel, TASKS, policy=A_JUDGE_MAY_FAIL)
    folder = results.parent
    written = outputs(folder)
    run = RunStore(folder).load()
    indexed = sorted(
        p.name.split(".", 1)[1].split(f".v{INDEX_FORMAT}.")[1]
        for p in (folder / SCORE_INDEX).iterdir()
    )
    assert indexed == sorted(["spans.arrow", "votes.scripted-test.arrow"] * len(TASKS))
    judges = ["judge-0", "judge-1", "judge-2"]
    index = folder / SCORE_INDEX
    table = VoteTable.read(next(index.glob("*single_pass*.votes.*.arrow")), judges)
    rebuilt = VoteTable.from_records(run.records[TASKS[0]], "scripted-test", table.judges)
    assert table.table.equals(rebuilt.table)
    spans = SpanFacts.read(next(index.glob("*single_pass*.spans.arrow")), ["scripted-test"])
    shuffled = run.records[TASKS[0]][::-1]  # kept in doc_id order whatever order they come in
    assert spans.table.equals(SpanFacts.from_records(shuffled, ["scripted-test"]).table)

    # Samples scrambled in place (same size and time): `score` does not read them.
    samples = RunStore(folder).samples_path(run.manifest, TASKS[0])
    stat, original = samples.stat(), samples.read_bytes()
    samples.write_bytes(re.sub(rb'"verdict":1', b'"verdict":0', original))
    os.utime(samples, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    for path in folder.glob("results_*"):
        path.unlink()
    scored = cli("score", "--samples", str(folder), *A_JUDGE_MAY_FAIL_FLAG)
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert outputs(folder) == written

    # A damaged index is one line naming it.
    for kind in ("votes", "spans"):
        table_file = next((folder / SCORE_INDEX).glob(f"*single_pass*.{kind}.*arrow"))
        kept = table_file.read_bytes()
        table_file.write_bytes(kept[: len(kept) // 2])
        damaged = cli("score", "--samples", str(folder), *A_JUDGE_MAY_FAIL_FLAG)
        assert damaged.returncode == 1 and len(damaged.stderr.strip().splitlines()) == 1
        assert f"{table_file}: not a {kind.removesuffix('s')} table" in damaged.stderr
        table_file.write_bytes(kept)

    # Samples changed (a new time): their index is not theirs any more; `score` reads them.
    os.utime(samples, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    scored = cli("score", "--samples", str(folder), *A_JUDGE_MAY_FAIL_FLAG)
    assert scored.returncode == 0, scored.stderr[-2000:]
    changed = json.loads(next(folder.glob("results_*")).read_text())
    before = json.loads(written[results.name])
    task = TASKS[0]
    assert changed["results"][task] != before["results"][task]
    assert changed["results"][TASKS[1]] == before["results"][TASKS[1]]


HOSTILE = [
    'Apple Inc. ⁠— “quoted”, "escaped"\\ and a tab\there',
    "line\nbreak\r\nand\u2028separator\u0085next\x00nul\x1f",
    '=HYPERLINK("http://x")',
    "+1, -1, @SUM, \tleading tab",
    "",
    "emoji 🚀 and ünïcödé, Σ",
]


def review_rows():
    rows = []
    for number, text in enumerate(HOSTILE):
        vote = {
            "verdict": number % 2,
            "reasoning": HOSTILE[-1 - number],
            "warning": text,
            "synthetic": False,
        }
        rows.append(
            {
                "format_version": 2,
                "task": "finreflect_smoke_single_pass",
                "span_id": f"S{number}",
                "criterion": "faithfulness" if number % 3 else "comprehensiveness",
                "triple_index": number if number % 3 else None,
                "triple": [text, "ORG", "Produces", HOSTILE[0], "PRODUCT"] if number % 3 else None,
                "label": None if number == 4 else number % 2,
                "reason": "split, no majority",
                "votes": {"judge-0": vote, "judge,1": {**vote, "verdict": None}},
                "span_text": HOSTILE[number // 2],
            }
        )
    return rows


def test_review_jsonl_is_what_pydantic_writes():
    rows = review_rows()
    expected = "".join(ReviewItem.model_validate(row).model_dump_json() + "\n" for row in rows)
    assert review_jsonl(rows) == expected
    assert [ReviewItem.model_validate_json(line) for line in expected.split("\n")[:-1]]


def test_review_csv_is_what_the_csv_module_writes_row_by_row():
    rows, judges = review_rows(), ["judge-0", "judge,1"]
    fields = ("verdict", "reasoning", "warning")
    columns = ["task", "span_id", "criterion", "triple_index", "triple", "label", "reason"]
    columns += [f"{judge}_{key}" for judge in judges for key in fields]
    table = []
    for row in rows:
        cells = {key: row[key] for key in columns[:7]}
        cells["triple"] = " | ".join(row["triple"]) if row["triple"] else ""
        for judge in judges:
            cells |= {f"{judge}_{key}": row["votes"][judge][key] for key in fields}
        table.append(cells | {"span_text": row["span_text"]})
    # The cells a spreadsheet would run as formulas start with a quote; no other cell changes.
    hyperlink, plus = '\'=HYPERLINK("http://x")', "'+1, -1, @SUM, \tleading tab"
    quoted = {
        (2, "triple"): '\'=HYPERLINK("http://x") | ORG | Produces | ' + HOSTILE[0] + " | PRODUCT",
        (2, "judge-0_reasoning"): plus,
        (2, "judge,1_reasoning"): plus,
        (2, "judge-0_warning"): hyperlink,
        (2, "judge,1_warning"): hyperlink,
        (3, "judge-0_reasoning"): hyperlink,
        (3, "judge,1_reasoning"): hyperlink,
        (3, "judge-0_warning"): plus,
        (3, "judge,1_warning"): plus,
        (4, "span_text"): hyperlink,
        (5, "span_text"): hyperlink,
    }
    for (number, column), cell in quoted.items():
        assert table[number][column] == cell[1:]
        table[number][column] = cell
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, [*columns, "span_text"])
    writer.writeheader()
    writer.writerows(table)
    assert review_csv(rows, judges) == buffer.getvalue()
    assert review_csv([], judges) == buffer.getvalue().split("\r\n", 1)[0] + "\r\n"
    parsed = list(csv.DictReader(io.StringIO(review_csv(rows, judges), newline="")))
    spans = [HOSTILE[0], HOSTILE[0], HOSTILE[1], HOSTILE[1], hyperlink, hyperlink]
    assert [row["span_text"] for row in parsed] == spans


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("=1+2", "'=1+2"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("a=1", "a=1"),
        (" =1", " =1"),
    ],
)
def test_a_review_csv_cell_a_spreadsheet_would_run_is_quoted(text, cell):
    row = review_rows()[0] | {"reason": text}
    written = review_csv([row], ["judge-0", "judge,1"])
    assert next(csv.DictReader(io.StringIO(written, newline="")))["reason"] == cell


def test_entity_normalisation_keeps_its_definition():
    def by_definition(text):
        return " ".join(re.sub(r"[^\w$%.]+", " ", text.lower()).split()).strip(" .")

    for text in [*HOSTILE, " . a .", "..x..", "U.S. $1.2 billion (10%)", "  ", "Ünïcode\u3000Co."]:
        assert _normalise(text) == by_definition(text)


def test_tables_of_a_task_without_spans_and_of_more_panels(tmp_path):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "broken")
    results = scripted_run(tmp_path, "acme/kg-7b", 2, panel, TASKS, policy=A_JUDGE_MAY_FAIL)
    run = RunStore(results.parent).load(for_scoring=True)
    assert not run.records and set(run.span_facts) == set(TASKS)  # all read from the index
    judges = ["judge-0", "judge-1", "judge-2"]
    # A task that drew no spans (a shard of a small task): scored as empty, not a traceback.
    run.span_facts[TASKS[0]] = SpanFacts.from_records([], ["scripted-test"])
    run.votes["scripted-test"][TASKS[0]] = VoteTable.from_records([], "scripted-test", judges)
    facts, votes = score_tables(
        run.manifest, run.records, "scripted-test", run.span_facts, run.votes["scripted-test"]
    )
    scores = compute_results(run.manifest, "scripted-test", facts, votes)
    assert scores.results[TASKS[0]]["sample_len"] == 0
    assert scores.results[TASKS[1]]["sample_len"] == 2
    assert review_queue(facts, votes)[TASKS[0]] == []

    # A table written for more panels than the manifest names (a save killed before the
    # manifest) serves the panels it does name.
    records = RunStore(results.parent).load().records[TASKS[1]]
    wider = tmp_path / "wider.arrow"
    wider.write_bytes(SpanFacts.from_records(records, ["other", "scripted-test"]).to_bytes())
    narrow = SpanFacts.from_records(records, ["scripted-test"])
    assert SpanFacts.read(wider, ["scripted-test"]).table.equals(narrow.table)

    # A vote on a triple its span does not have (edited samples) is one line naming the span.
    with pytest.raises(FinReflectError, match=rf"span {records[0].span_id}: a vote on triple 99"):
        narrow.triples(np.array([0]), np.array([99]))
