"""The files a run writes: every one validates against `finreflect_eval.records`; another format
version is a one-line error; a run saved before the redesign scores the same after `upgrade`;
a killed extraction keeps its finished spans; lm-eval's own `make_table` reads our results."""

import json
import tarfile
from hashlib import sha256
from pathlib import Path

import pytest
from conftest import TESTS, require
from support.runs import audit_with, panel_file, run_args, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard import submit
from finreflect_eval.pipeline.audit import write_audit
from finreflect_eval.pipeline.evaluator import score
from finreflect_eval.records import (
    JudgeAudit,
    Manifest,
    Results,
    ReviewItem,
    ReviewSpan,
    SampleRecord,
    Submission,
    Vote,
    read,
    read_lines,
)
from finreflect_eval.runs.store import SCORE_INDEX, load_run

DATA = TESTS / "fixtures"
FILES = {  # file name prefix -> what every such file is
    "manifest_": (Manifest, read),
    "samples_": (SampleRecord, read_lines),
    "results_": (Results, read),
    "review_spans_": (ReviewSpan, read_lines),  # (before review_: the first prefix matches)
    "review_": (ReviewItem, read_lines),
    "judge_audit_": (JudgeAudit, read),
}


def test_every_file_a_run_writes_validates_against_the_schemas(tmp_path):
    panel = panel_file(tmp_path, "accepts_all", "broken_now_and_then", "rejects_all")
    tasks = ("finreflect_smoke_single_pass", "finreflect_smoke_reflection")
    results = scripted_run(tmp_path, "acme/kg-7b", None, panel, tasks)  # submit takes no --limit
    abstentions = [
        vote
        for samples in results.parent.glob("samples_*.jsonl")
        for line in samples.read_text().splitlines()
        for criterion in json.loads(line)["votes"]["scripted-test"].values()
        for vote in criterion["judge-1"]
        if vote["verdict"] is None
    ]
    assert abstentions  # judge-1 failed now and then: abstentions are in the files too
    write_audit(audit_with(tmp_path, "accepts_all", limit=1), tmp_path / "out" / "acme__kg-7b")
    board = tmp_path / "board"
    stored, _ = submit(results, board)
    checked = 0
    for path in sorted((tmp_path / "out").rglob("*.json*")):
        if SCORE_INDEX in path.parts:
            continue  # derived, rebuilt by every save (its graphs are the results' own records)
        prefix = next(p for p in FILES if path.name.startswith(p))
        model, reader = FILES[prefix]
        parsed = reader(model, path)
        for item in parsed if isinstance(parsed, list) else [parsed]:
            assert item.format_version == 2
        checked += 1
    # manifest, 2 samples, results, 2 reviews with their spans, audit (not the score index)
    assert checked == 1 + 2 + 1 + 2 * 2 + 1
    assert read(Submission, stored).results.run == read(Results, results).run


def test_another_format_version_is_one_line(cli, tmp_path):
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    results = scripted_run(tmp_path, "acme/kg-7b", 1, panel)
    data = json.loads(results.read_text())
    data["format_version"] = 1
    results.write_text(json.dumps(data))
    with pytest.raises(FinReflectError, match="is in format version 1; this finreflect-eval reads"):
        read(Results, results)
    with tarfile.open(DATA / "run_d167a05.tar.gz") as archive:
        archive.extractall(tmp_path / "old", filter="data")
    old = cli("score", "--samples", str(tmp_path / "old" / "candidate"))
    assert old.returncode == 1 and len(old.stderr.strip().splitlines()) == 1
    assert "in an older format" in old.stderr and "finreflect-eval upgrade" in old.stderr


def test_a_run_saved_before_the_redesign_scores_the_same_after_upgrade(cli, tmp_path):
    with tarfile.open(DATA / "run_d167a05.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    folder = tmp_path / "candidate"
    (old_file,) = folder.glob("results_*.json")
    old = json.loads(old_file.read_text())
    old_review = {
        task: [json.loads(line) for line in (folder / f"review_{task}.jsonl").open()]
        for task in old["results"]
    }
    upgraded = cli("upgrade", str(folder))
    assert upgraded.returncode == 0, upgraded.stderr[-2000:]
    # Its panel has a judge that failed every call (scored then, before judges had a budget).
    scored = cli("score", "--samples", str(folder), "--max-judge-failure-share", "1")
    assert scored.returncode == 0, scored.stderr[-2000:]
    (new_file,) = folder.glob("results_*_fixture.json")
    new = json.loads(new_file.read_text())
    compared = 0
    for task, entry in old["results"].items():
        details = new["details"][task]
        for criterion in ("faithfulness", "precision", "relevance", "comprehensiveness"):
            assert new["results"][task][f"{criterion},none"] == entry[criterion]
            # Spans were the bootstrap's unit then; filings are now, spans are kept beside them.
            assert details["criteria"][criterion]["ci_span"] == entry[f"{criterion}_ci"]
            assert details["criteria"][criterion]["items"] == entry["items"][criterion]
            agreement, before = new["agreement"][task][criterion], old["agreement"][task][criterion]
            assert (agreement["alpha"], agreement["n_items"]) == (
                before["alpha"],
                before["n_items"],
            )
            assert (agreement["reason"] is None) == (before["reason"] is None)
            for judge, scores in old["judges"]["per_judge"][task].items():
                assert details["criteria"][criterion]["per_judge"][judge] == scores[criterion]
            compared += 4
        for metric in ("check_rules", "triples_per_span"):
            assert new["results"][task][f"{metric},none"] == entry[metric]
        assert details["judge_failures"] == entry["judge_failures"]
        (review,) = folder.glob(f"review_{task}_*_fixture.jsonl")
        rows = [json.loads(line) for line in review.open()]
        (spans,) = folder.glob(f"review_spans_{task}_*_fixture.jsonl")
        texts = {span.span_id: span.text for span in read_lines(ReviewSpan, spans)}
        # The same items; each names its span's doc_id, its text is in the spans file.
        assert [
            {k: v for k, v in r.items() if k not in ("format_version", "doc_id")}
            | {"span_text": texts[r["span_id"]]}
            for r in rows
        ] == old_review[task]
        compared += len(rows)
    for group, entry in old["groups"].items():
        for criterion in ("faithfulness", "precision", "relevance", "comprehensiveness"):
            assert new["groups"][group][f"{criterion},none"] == entry[criterion]
    assert compared > 3 * 16 and any(rows for rows in old_review.values())
    assert (folder / "format-1" / old_file.name.replace("results", "manifest")).exists()


def test_samples_written_before_lm_evals_fields_read_with_them_and_score_the_same(tmp_path):
    """A format-2 line written before `doc` and lm-eval's other fields existed (the text at the
    top, the text's sha256 as `doc_hash`, the first request's digest as `prompt_hash`) reads
    with them derived from its other fields."""
    lm_eval_utils = require("lm_eval.utils", "[dev] extra")
    panel = panel_file(tmp_path, "accepts_all", "broken_now_and_then", "rejects_all")
    results = scripted_run(tmp_path, "acme/kg-7b", 3, panel)
    run = load_run(results.parent)
    (task,) = run.manifest.tasks
    samples = run.store.samples_path(run.manifest, task)
    new = [json.loads(line) for line in samples.open()]
    added = ("doc", "target", "target_hash", "resps", "filtered_resps", "filter", "metrics")
    old = [
        {key: value for key, value in line.items() if key not in added}
        | {
            "text": line["doc"]["text"],
            "doc_hash": sha256(line["doc"]["text"].encode()).hexdigest(),
            "prompt_hash": line["steps"][0]["prompt_hash"],
        }
        for line in new
    ]
    samples.write_text("".join(json.dumps(line) + "\n" for line in old))
    for line, record in zip(new, read_lines(SampleRecord, samples), strict=True):
        written = json.loads(record.model_dump_json())
        doc = {key: line["doc"][key] for key in ("span_id", "ticker", "section", "text")}
        assert record.text == doc["text"] and written["doc"] == doc and "text" not in written
        indented = json.dumps(doc, indent=2, ensure_ascii=False)
        assert written["doc_hash"] == lm_eval_utils.hash_string(indented)
        for key in ("prompt_hash", *added[1:]):
            assert written[key] == line[key], key
    before = read(Results, results)
    rescored = score(load_run(results.parent))  # no score index for these samples: read them
    assert rescored.results == before.results and rescored.details == before.details
    assert rescored.task_hashes != before.task_hashes  # of the docs the old lines give


def test_a_killed_extraction_keeps_finished_spans_and_resumes_without_calling_for_them(
    cli, tmp_path, env
):
    args = [
        *("extract", "--model", "candidate", "--backend", "scripted", "--model-args"),
        "responses=support.scripted_judges:reference_triples,batch_size=1",
        *("--tasks", "finreflect_single_pass", "--dataset", "sample", "--limit", "11"),
        *("--no-cache", "--output-path", str(tmp_path / "out")),
    ]
    killed = cli(*args, env={**env, "SCRIPTED_JUDGE_DIE_AFTER": "9"})
    assert killed.returncode == 137  # died on the first span of the second round of eight
    folder = tmp_path / "out" / "candidate"
    (samples,) = folder.glob("samples_finreflect_single_pass_*.jsonl")
    kept = [json.loads(line) for line in samples.read_text().splitlines()]
    assert [record["doc_id"] for record in kept] == list(range(8))
    run = load_run(folder)
    assert run.manifest.status == "extracting"

    resumed = cli(*args, env=env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    calls = Path(env["SCRIPTED_JUDGE_LOG"]).read_text().count("call")
    assert calls == 9 + 3  # the rerun asked only for the 3 spans not yet saved (no cache)
    again = load_run(folder)
    assert again.manifest.run == run.manifest.run and again.manifest.status == "extracted"
    records = again.records["finreflect_single_pass"]
    assert [record.doc_id for record in records] == list(range(11))
    assert records[:8] == run.records["finreflect_single_pass"]


def test_lm_evals_make_table_reads_our_results_with_groups(cli, tmp_path, env):
    make_table = require("lm_eval.utils", "[dev] extra").make_table
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    result = cli(*run_args(tmp_path, panel, "finreflect", limit=2), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    (results_file,) = (tmp_path / "out" / "candidate").glob("results_*.json")
    results = json.loads(results_file.read_text())
    table = make_table(results)
    groups = make_table(results, "groups")
    print(table, groups, sep="\n")
    for task in ("finreflect_single_pass", "finreflect_multi_pass", "finreflect_reflection"):
        assert f"|{task}" in table.replace(" ", "").replace("-", "_") or task in table
    assert "faithfulness" in table and "↑" in table and "±" in table
    assert "|finreflect" in groups.replace(" ", "") and "comprehensiveness" in groups
    # n-samples: the dataset split's size, and what --limit left of it
    assert results["n-samples"]["finreflect_single_pass"] == {"original": 24, "effective": 2}


def test_unicode_line_separators_in_a_text_stay_inside_their_line(tmp_path):
    """Filing text may hold U+2028, U+0085 or a form feed, which the JSON writer keeps raw:
    a JSONL line ends at "\\n" only."""
    text = "Revenue grew\u2028in 2024\x85and\x0cafter."
    vote = Vote(verdict=1, reasoning=text, warning="")
    item = ReviewItem(
        task="t",
        span_id="s",
        doc_id=0,
        criterion="faithfulness",
        triple_index=0,
        triple=None,
        label=1,
        reason="split",
        votes={"j": vote},
    )
    path = tmp_path / "review.jsonl"
    path.write_text(item.model_dump_json() + "\n" + item.model_dump_json() + "\n")
    assert [read.votes["j"].reasoning for read in read_lines(ReviewItem, path)] == [text, text]
    span = ReviewSpan(task="t", span_id="s", doc_id=0, text=text)
    path.write_text(span.model_dump_json() + "\n" + span.model_dump_json() + "\n")
    assert [read.text for read in read_lines(ReviewSpan, path)] == [text, text]


def test_a_format_1_shard_upgrades_with_its_spans_place_in_the_whole_list(tmp_path):
    """A format-1 shard's samples hold every count-th span of the whole list from its index on;
    upgraded, each keeps its place there (the run's span list names the whole list)."""
    from finreflect_eval.runs.upgrade import upgrade_run

    with tarfile.open(DATA / "run_d167a05.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    folder = tmp_path / "candidate"
    (manifest,) = folder.glob("manifest_*.json")
    data = json.loads(manifest.read_text())
    data["shard"] = {"index": 1, "count": 2}
    spans = {
        task: len((folder / info["samples"]).read_text().splitlines())
        for task, info in data["tasks"].items()
    }
    for task, info in data["tasks"].items():
        info["span_list"] = {"count": 2 * spans[task], "sha256": "0" * 64}
    manifest.write_text(json.dumps(data))
    upgrade_run(folder)
    for task, info in data["tasks"].items():
        rows = [json.loads(line) for line in (folder / info["samples"]).open()]
        assert [row["doc_id"] for row in rows] == list(range(1, 2 * spans[task], 2))
