"""The graph an entry's triples make on the leaderboard: fragmentation, contradictions and
grounding as columns of leaderboard.json, .csv and the page (not in Overall, not ranked), from
the results' `graph` block that `verify` recomputes from the samples; a tampered graph figure is
refused like any other number, and an entry scored before results had the block is shown with
the block recomputed (and stored as submitted)."""

import csv
import io
import json

import pytest
from support.runs import panel_file, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard import build, bundle_run, check, submit
from finreflect_eval.leaderboard.rows import GRAPH_COLUMNS
from finreflect_eval.records import Results, read

TASKS = ("finreflect_smoke_single_pass", "finreflect_smoke_multi_pass")
# The filer three ways and opposite relations: in Apple's filing "Apple Inc.", "AAPL" and
# "Apple" are one entity that both increases and decreases net sales (one contradiction); in
# every other filing "Apple Inc." and "Apple" are one entity, "AAPL" another (no contradiction).
ANSWER = {
    "triples": [
        {
            "subject": "Apple Inc.",
            "subject_type": "ORG",
            "relation": "Increases",
            "object": "net sales",
            "object_type": "FIN_METRIC",
        },
        {
            "subject": "AAPL",
            "subject_type": "ORG",
            "relation": "Decreases",
            "object": "net sales",
            "object_type": "FIN_METRIC",
        },
        {
            "subject": "Apple",
            "subject_type": "ORG",
            "relation": "Discloses",
            "object": "net sales of $391,035 million",
            "object_type": "FIN_METRIC",
        },
    ]
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A complete smoke run of two modes on the sample whose candidate writes ANSWER."""
    root = tmp_path_factory.mktemp("graph-board")
    panel = panel_file(root, "accepts_all", "accepts_all", "rejects_all")
    return scripted_run(root / "run", "acme/kg-graph", None, panel, TASKS, answer=ANSWER)


def bundle(results_file) -> dict:
    return bundle_run(results_file).model_dump(mode="json", by_alias=True)


def test_the_graph_columns_come_from_the_graph_block_and_are_on_the_page(run, tmp_path):
    block = read(Results, run).graph
    assert [block[task].overall.contradictions for task in TASKS] == [1, 1]
    board = tmp_path / "board"
    submit(run, board)
    (row,) = json.loads((board / "leaderboard.json").read_text())
    entities = sum(block[task].overall.entities for task in TASKS)
    assert entities == 2 * (3 + 9 * 4)  # Apple's filing: 3 entities; the 9 others: 4 each
    checked = sum(block[task].grounding.checked for task in TASKS)
    grounded = sum(block[task].grounding.grounded for task in TASKS)
    assert checked == 2 * 24  # the amount, in every span
    assert {key: row[key] for key in GRAPH_COLUMNS if key != "graph"} == {
        "graph_entities": entities,
        "graph_fragmented_share": round(20 / entities, 4),  # one fragmented entity a filing
        "graph_contradictions": 2,
        "graph_duplicate_triples": sum(block[t].overall.duplicate_triples for t in TASKS),
        "graph_checked": checked,
        "graph_grounded": grounded,
        "graph_grounded_share": round(grounded / checked, 4),
    }
    assert row["graph"]["single_pass"]["contradictions"] == 1
    assert row["graph"]["multi_pass"]["checked"] == 24
    assert row["overall"] == read(Results, run).overall.score  # Overall: the judged criteria
    (line,) = csv.DictReader(io.StringIO((board / "leaderboard.csv").read_text()))
    assert line["graph_contradictions"] == "2"
    assert float(line["graph_fragmented_share"]) == row["graph_fragmented_share"]

    # The page: three sortable optional columns (hidden on phones), and the figures per mode.
    page = (board / "index.html").read_text()
    for key in ("graph_fragmented_share", "graph_contradictions", "graph_grounded_share"):
        header = f'class="optional graph"><button type="button" data-key="{key}"'
        assert f'<th scope="col" aria-sort="none" {header}' in page
        assert (
            f'<td data-key="{key}" data-value="{float(row[key])}" class="optional graph">' in page
        )
    share = f"{100 * row['graph_fragmented_share']:.1f}%"
    assert f'class="optional graph">{share}</td>' in page
    assert f'<small title="grounded / checked">{grounded}/{checked}</small>' in page
    assert '<table class="criteria graph">' in page
    assert '<tr><th scope="row">single-pass</th><td>39</td>' in page


@pytest.mark.parametrize(
    "where, value",
    [
        (("overall", "contradictions"), 0),
        (("overall", "fragmented_share"), 0.0),
        (("per_filing", "AAPL_2024", "contradictions"), 0),
        (("grounding", "grounded"), 24),
        (("grounding", "checked"), 0),
    ],
)
def test_a_tampered_graph_figure_is_refused_naming_it(run, tmp_path, where, value):
    data = bundle(run)
    block = data["results"]["graph"][TASKS[0]]
    *path, key = where
    for part in path:
        block = block[part]
    recomputed = block[key]
    assert recomputed != value
    block[key] = value
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    name = ".".join(where).replace(".", r"\.")
    with pytest.raises(
        FinReflectError,
        match=rf"^refused: graph\.{TASKS[0]}\.{name}: submitted {value!r}, recomputed from "
        rf"the samples {recomputed!r}$",
    ):
        submit(forged, tmp_path / "board")
    assert not (tmp_path / "board" / "submissions").exists()


def test_an_entry_scored_before_the_graph_block_is_shown_with_it_recomputed(run, tmp_path):
    """Results written before there was a `graph` block: the recomputation adds it, the row and
    the entry's report show it, and the entry is stored as submitted (its name is its digest).
    A block that is there is compared whole: one without one of its tasks is refused."""
    full = tmp_path / "full"
    submit(run, full)
    (expected,) = json.loads((full / "leaderboard.json").read_text())
    data = bundle(run)
    del data["results"]["graph"]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(data))
    board = tmp_path / "board"
    stored, _ = submit(older, board)
    assert "graph" not in json.loads(stored.read_text())["results"]
    (row,) = json.loads((board / "leaderboard.json").read_text())
    assert row["run_id"] == stored.stem and row["json"].endswith(stored.name)
    assert {key: row[key] for key in GRAPH_COLUMNS} == {key: expected[key] for key in GRAPH_COLUMNS}
    report = (board / row["report"]).read_text()
    assert 'id="graph"' in report and '<tr data-key="contradictions">' in report
    build(board)
    assert check(board) == []

    data = bundle(run)
    del data["results"]["graph"][TASKS[1]]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(data))
    with pytest.raises(
        FinReflectError,
        match=rf"graph\.{TASKS[1]}: present in only one of the submitted and recomputed results",
    ):
        submit(partial, tmp_path / "board-partial")


def test_a_cascade_run_is_not_ranked_and_its_rule_votes_must_be_the_cascades(tmp_path):
    """Under `--skip-judging-ungrounded` some triples score 0 by rule: never the official
    ranking; and a rule vote on a grounded triple (a forged one) is refused."""
    import json

    from finreflect_eval.leaderboard.verify import bundle_run
    from finreflect_eval.records import Submission

    folder = tmp_path / "cascade"
    results = _cascade_run(folder)
    submission = bundle_run(results.parent)
    judging = submission.manifest.judging[submission.results.judges.panel]
    assert judging.cascade is not None
    from finreflect_eval.leaderboard.sample_checks import cascade_problems

    panel = submission.results.judges.panel
    assert cascade_problems(submission.samples, submission.manifest, panel) == []
    data = json.loads(submission.model_dump_json())
    record = next(r for rows in data["samples"].values() for r in rows if r["triples"])
    vote = record["votes"][panel]["faithfulness"]["judge-0"][0]
    vote.update(
        verdict=0,
        warning="ungrounded",
        synthetic=True,
        reasoning="A number, amount or date it states is not in the span.",
    )
    forged = Submission.model_validate(data)
    assert cascade_problems(forged.samples, forged.manifest, panel)[0].endswith(
        "the grounding cascade's votes are not on the triples whose figures the span lacks"
    )
    judging_forged = forged.manifest.judging[panel]
    judging_forged.cascade = None
    assert cascade_problems(forged.samples, forged.manifest, panel)


def _cascade_run(folder):
    from support.runs import panel_file, scripted_run

    answer = {
        "triples": [
            {  # no figure: judged
                "subject": "AAPL",
                "subject_type": "ORG",
                "relation": "Produces",
                "object": "iPhone",
                "object_type": "PRODUCT",
            },
            {
                "subject": "AAPL",
                "subject_type": "ORG",
                "relation": "Discloses",
                "object": "net sales of $999.9 billion",
                "object_type": "FIN_METRIC",
            },
        ]
    }
    panel = panel_file(folder, "accepts_all", "accepts_all", "accepts_all")
    return scripted_run(folder, "cand", 2, panel, answer=answer, skip_judging_ungrounded=True)
