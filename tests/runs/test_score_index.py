"""The score index (what `score` reads instead of gigabytes of samples) and the review queue's
bulk writers: the same files, byte for byte, as pydantic and the csv module write item by item,
each span's text once."""

import csv
import io
import json
import os
import re

import numpy as np
import pyarrow as pa
import pytest
from support.runs import panel_file, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.protocol.criteria import CRITERION_NAMES
from finreflect_eval.records import ReviewItem, ReviewSpan, SampleRecord, Vote, read_lines
from finreflect_eval.review import queue as review
from finreflect_eval.review.queue import (
    REASONS,
    csv_cells,
    json_strings,
    review_csv,
    review_jsonl,
    review_queue,
    review_spans_jsonl,
    spreadsheet_safe,
)
from finreflect_eval.runs.store import INDEX_FORMAT, SCORE_INDEX, RunStore
from finreflect_eval.scoring.compute import compute_results, score_tables
from finreflect_eval.scoring.failures import FailurePolicy
from finreflect_eval.scoring.span_facts import TRIPLE_FIELDS, SpanFacts
from finreflect_eval.scoring.votes import VOTE_FIELDS, VoteTable
from finreflect_eval.stats.extraction import _normalise
from finreflect_eval.stats.metrics import aggregate, code_label, vote_code

TASKS = ("finreflect_smoke_single_pass", "finreflect_smoke_reflection")
TASK_C = "comprehensiveness"


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
    # With the stamp of the review files `score` wrote of them (see test_review_queue_reuse).
    assert indexed == sorted(
        ["graph.json", "spans.arrow", "votes.scripted-test.arrow", "queue.scripted-test.json"]
        * len(TASKS)
    )
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

    # Samples changed (a new time): their index is not theirs any more; `score` reads them,
    # and refuses votes that are not what the judge calls answered (nothing written).
    os.utime(samples, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    scored = cli("score", "--samples", str(folder), *A_JUDGE_MAY_FAIL_FLAG)
    assert scored.returncode == 1 and len(scored.stderr.strip().splitlines()) == 1
    assert f"{samples}: task {TASKS[0]}, span " in scored.stderr
    assert "is not what its judge call answered" in scored.stderr
    assert outputs(folder) == written


HOSTILE = [
    'Apple Inc. ⁠— “quoted”, "escaped"\\ and a tab\there',
    "line\nbreak\r\nand\u2028separator\u0085next\x00nul\x1f",
    '=HYPERLINK("http://x")',
    "+1, -1, @SUM, \tleading tab",
    "",
    "emoji 🚀 and ünïcödé, Σ",
]
JUDGES = ["judge-0", "judge,1", "judge-2"]
# Each item's votes, cycled: unanimous (not queued), split, split without a majority, unscored,
# an abstention beside agreeing votes (not queued), no valid vote; for a span: a three-way
# split, unanimous, a split beside an abstention.
TRIPLE_VOTES = [(1, 1, 1), (1, 0, 1), (None, 1, 0), (None, None, 1), (0, 0, None), (None,) * 3]
SPAN_VOTES = [("good", "partial", "poor"), ("good",) * 3, ("poor", None, "good")]
FAITHFULNESS, COMPREHENSIVENESS = (CRITERION_NAMES.index(n) for n in ("faithfulness", TASK_C))


def hostile_run(n_spans=6):
    """A task's span facts and votes (what the review queue reads) full of hostile text: every
    span's text, id and triples, and every judge's reasoning and warning. The last span's
    items are all unanimous (no item of it is queued)."""
    spans = {"doc_id": [], "span_id": [], "text": [], "triples": []}
    votes = {"doc_id": [], "criterion": [], "index": [], "synthetic": []}
    votes |= {f"{key}:{judge}": [] for judge in JUDGES for key in VOTE_FIELDS}
    for span in range(n_spans):
        spans["doc_id"].append(10 * span)
        spans["span_id"].append(HOSTILE[span % 6] + f" S{span}" if span % 2 else f"S{span}")
        spans["text"].append(HOSTILE[span % 6])
        triples = [[HOSTILE[(span + n) % 6], "ORG", "Produces", f"P{n}", "-"] for n in range(3)]
        spans["triples"].append([dict(zip(TRIPLE_FIELDS, t, strict=True)) for t in triples])
        items = [(FAITHFULNESS, n) for n in range(3)] + [(COMPREHENSIVENESS, 0)]
        for criterion, index in items:
            row = len(votes["doc_id"])
            if span == n_spans - 1:
                cast = ("good",) * 3 if criterion == COMPREHENSIVENESS else (1, 1, 1)
            elif criterion == COMPREHENSIVENESS:
                cast = SPAN_VOTES[row % len(SPAN_VOTES)]
            else:
                cast = TRIPLE_VOTES[row % len(TRIPLE_VOTES)]
            votes["doc_id"].append(10 * span)
            votes["criterion"].append(criterion)
            votes["index"].append(index)
            votes["synthetic"].append(False)
            for number, (judge, label) in enumerate(zip(JUDGES, cast, strict=True)):
                votes[f"code:{judge}"].append(vote_code(label))
                votes[f"reasoning:{judge}"].append(HOSTILE[(row + number) % 6])
                votes[f"warning:{judge}"].append(HOSTILE[(2 * row + number) % 6])
                votes[f"synthetic:{judge}"].append(row % 4 == number)
    triple = pa.struct([(name, pa.string()) for name in TRIPLE_FIELDS])
    facts = pa.table(
        {
            "doc_id": pa.array(spans["doc_id"], pa.int64()),
            "span_id": pa.array(spans["span_id"], pa.string()),
            "text": pa.array(spans["text"], pa.large_string()),
            "triples": pa.array(spans["triples"], pa.large_list(triple)),
        }
    )
    kinds = {"doc_id": pa.int64(), "criterion": pa.int8(), "index": pa.int32(), "code": pa.int8()}
    columns = {
        name: pa.array(values, kinds.get(name.split(":")[0])) for name, values in votes.items()
    }
    return SpanFacts(facts), VoteTable(pa.table(columns), JUDGES)


def expected_review(facts, votes):
    """The review files item by item, through pydantic and the csv module: the JSONL of the
    items and of their spans, and the CSV."""
    spans = {row["doc_id"]: row for row in facts.table.to_pylist()}
    items, flagged_spans, first_rows = [], {}, []
    for row in votes.table.to_pylist():
        cast = {judge: code_label(row[f"code:{judge}"]) for judge in JUDGES}
        outcome = aggregate(cast)
        flags = [outcome.split, not outcome.scored, outcome.no_majority]
        if not any(flags):
            continue
        span = spans[row["doc_id"]]
        first_rows.append(span["doc_id"] not in flagged_spans)
        flagged_spans[span["doc_id"]] = span
        per_triple = row["criterion"] == FAITHFULNESS
        items.append(
            ReviewItem(
                task=TASKS[0],
                span_id=span["span_id"],
                doc_id=span["doc_id"],
                criterion=CRITERION_NAMES[row["criterion"]],
                triple_index=row["index"] if per_triple else None,
                triple=list(span["triples"][row["index"]].values()) if per_triple else None,
                label=outcome.label,
                reason=", ".join(n for n, f in zip(REASONS, flags, strict=True) if f),
                votes={
                    judge: Vote(
                        verdict=cast[judge],
                        reasoning=row[f"reasoning:{judge}"],
                        warning=row[f"warning:{judge}"],
                        synthetic=row[f"synthetic:{judge}"],
                    )
                    for judge in JUDGES
                },
            )
        )
    jsonl = "".join(item.model_dump_json() + "\n" for item in items)
    review_spans = [
        ReviewSpan(task=TASKS[0], span_id=s["span_id"], doc_id=s["doc_id"], text=s["text"])
        for s in flagged_spans.values()
    ]
    spans_jsonl = "".join(span.model_dump_json() + "\n" for span in review_spans)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    fields = ("verdict", "reasoning", "warning")
    writer.writerow(
        ["task", "span_id", "doc_id", "criterion", "triple_index", "triple", "label", "reason"]
        + [f"{judge}_{key}" for judge in JUDGES for key in fields]
        + ["span_text"]
    )
    for item, first in zip(items, first_rows, strict=True):
        row = [item.task, item.span_id, item.doc_id, item.criterion, item.triple_index]
        row += [" | ".join(item.triple) if item.triple else "", item.label, item.reason]
        row += [getattr(item.votes[judge], key) for judge in JUDGES for key in fields]
        row.append(spans[item.doc_id]["text"] if first else "")
        writer.writerow([spreadsheet_safe(cell) for cell in row])
    return jsonl, spans_jsonl, buffer.getvalue()


def test_the_review_files_are_what_pydantic_and_the_csv_module_write_item_by_item(monkeypatch):
    facts, votes = hostile_run()
    jsonl, spans_jsonl, table = expected_review(facts, votes)
    for chunk in (100_000, 4):  # one chunk, and several (items and spans)
        monkeypatch.setattr(review, "CHUNK", chunk)
        queue = review_queue({TASKS[0]: facts}, {TASKS[0]: votes})[TASKS[0]]
        assert b"".join(review_jsonl(queue)).decode() == jsonl
        assert b"".join(review_spans_jsonl(queue)).decode() == spans_jsonl
        assert b"".join(review_csv(queue)).decode() == table
    # Every kind of item is in the queue, and the records read the files back.
    items = [ReviewItem.model_validate_json(line) for line in jsonl.split("\n")[:-1]]
    assert {item.reason for item in items} == {"split", "split, no majority", "unscored"}
    assert {item.criterion for item in items} == {"faithfulness", "comprehensiveness"}
    assert len(spans_jsonl.split("\n")[:-1]) == 5  # the last span has no item queued
    assert [ReviewSpan.model_validate_json(line).text for line in spans_jsonl.split("\n")[:-1]]
    # A formula in a cell is quoted; in the CSV the text is on the first row of its span only.
    rows = list(csv.DictReader(io.StringIO(table, newline="")))
    assert {row["span_text"] for row in rows} == {
        "",
        HOSTILE[0],
        HOSTILE[1],
        "'" + HOSTILE[2],
        "'" + HOSTILE[3],
    }
    assert any(row["judge-2_warning"] == "'" + HOSTILE[2] for row in rows)
    assert len(rows) == len(items)

    # A queued vote on a triple its span does not have (edited samples): one line naming it.
    index = votes.table.column("index").to_numpy().copy()
    index[1] = 99  # the first split item
    edited = VoteTable(votes.table.set_column(2, "index", pa.array(index)), JUDGES)
    with pytest.raises(FinReflectError, match=r"span S0: a vote on triple 99, but the span has 3"):
        review_queue({TASKS[0]: facts}, {TASKS[0]: edited})


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
        ('"=1"', '"=1"'),
        ("", ""),
    ],
)
def test_a_review_csv_cell_a_spreadsheet_would_run_is_quoted(text, cell):
    buffer = io.StringIO()
    csv.writer(buffer).writerow(["", spreadsheet_safe(text)])
    assert csv_cells(pa.array([text])).to_pylist() == [buffer.getvalue()[1:-2]]
    assert spreadsheet_safe(text) == cell
    assert json_strings(pa.array([text])).to_pylist() == [json.dumps(text, ensure_ascii=False)]


def test_a_span_text_is_written_once_and_every_item_finds_its_span(tmp_path):
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")  # every item split
    results = scripted_run(tmp_path, "acme/kg-7b", 3, panel, TASKS)
    folder = results.parent
    for task in TASKS:
        (items_file,) = folder.glob(f"review_{task}_*.jsonl")
        (spans_file,) = folder.glob(f"review_spans_{task}_*.jsonl")
        items = read_lines(ReviewItem, items_file)
        spans = {span.span_id: span for span in read_lines(ReviewSpan, spans_file)}
        (samples,) = folder.glob(f"samples_{task}_*.jsonl")
        records = {r.doc_id: r for r in read_lines(SampleRecord, samples)}
        assert len(items) == 3 * (3 * 2 + 1) and len(spans) == 3  # 2 triples per span
        for item in items:  # by span_id in the spans file, by doc_id in the samples
            assert spans[item.span_id].doc_id == item.doc_id
            assert records[item.doc_id].span_id == item.span_id
        # Each text once in the spans file, never in the items' JSONL, once in the CSV: on the
        # first row of its span's items.
        rows = list(csv.DictReader(items_file.with_suffix(".csv").open(newline="")))
        assert [(row["span_id"], row["doc_id"]) for row in rows] == [
            (item.span_id, str(item.doc_id)) for item in items
        ]
        for span in spans.values():
            assert span.text == records[span.doc_id].text
            encoded = json.dumps(span.text, ensure_ascii=False)
            assert spans_file.read_text().count(encoded) == 1
            assert encoded[1:80] not in items_file.read_text()
            assert [row["span_text"] for row in rows].count(span.text) == 1
        assert [row["span_text"] for row in rows if row["span_text"]] == [
            spans[span_id].text for span_id in dict.fromkeys(row["span_id"] for row in rows)
        ]


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
    empty = review_queue(facts, votes)[TASKS[0]]
    assert len(empty) == 0 and not [*review_jsonl(empty), *review_spans_jsonl(empty)]
    assert b"".join(review_csv(empty)).startswith(b"task,span_id,doc_id,criterion,")

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
