"""The validity check on the leaderboard: entries whose runs also ran a downstream task (the
multi-hop QA track) carry their downstream files, `verify` recomputes the results' `downstream`
block from them (a tampered file or figure is refused in one line), their rows get the
downstream columns (the downstream task no mode's), and `finreflect-eval validity` and the page
give Spearman's ρ of each main score against each downstream measure, with a bootstrap interval
and a verdict in plain words. Six scripted candidates extract a nested share (0, 40, 50, 60, 80
and 100%) of the sample's reference triples and of the questions' gold hops, so every main score
and the evidence recall rise with the share (20% is left out: the questions' gold hops all rank
above 0.36, so it extracts none of them, as 0% does, and the two would tie). One entry per model
counts (its newest), of the largest group with the same downstream settings, and the interval is
the paired filing bootstrap (checked against a small re-implementation here)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import shutil
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
import yaml
from scipy import stats
from support.multihop import qa_file, task_folder

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.cli import main
from finreflect_eval.leaderboard import build, bundle_run, load_entries, submit
from finreflect_eval.leaderboard.validity import SEED, markdown, validity
from finreflect_eval.models import ModelSpec
from finreflect_eval.pipeline.evaluator import evaluate
from finreflect_eval.pipeline.judging import load_panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.records import Results, read
from finreflect_eval.tasks.config import TaskIndex

pytestmark = pytest.mark.slow  # six whole runs and a board of them: a minute or two

SMOKE, DOWNSTREAM = "finreflect_smoke_single_pass", "mh_test"
SHARES = (0, 40, 50, 60, 80, 100)
CORRELATED = ("faithfulness", "evidence_recall")
VERIFY = importlib.import_module("finreflect_eval.leaderboard.verify")  # (the module, not
# the function the package's face hands on under the same name)


def downstream_run(root, tasks, panel, share: int):
    """A whole scored run through the Python API of the smoke task on the bundled sample and
    the downstream task `mh_test` on the sample questions (each task names its own data: no
    --dataset, which would apply to both), by the candidate extracting `share`% (and judged
    with the multi-hop judge, answered by the scripted QA model); returns its run folder."""
    config = RunConfig(
        model=ModelSpec(
            f"acme/kg-share-{share}",
            "scripted",
            {"responses": f"support.multihop:extracts_share_{share}"},
        ),
        tasks=[SMOKE, DOWNSTREAM],
        include_paths=[tasks],
        output_path=root / f"run-{share}",
        cache=root / "cache.sqlite",  # (the judges' answers, shared)
    )
    run, _ = evaluate(config, load_panel(panel))
    return run.folder


@pytest.fixture(scope="module")
def knows_mh_test(tmp_path_factory):
    """The leaderboard knows `mh_test` as one of its tasks (it is a test's include-path task)."""
    tasks = task_folder(
        tmp_path_factory.mktemp("mh-tasks"), qa=qa_file(tmp_path_factory.mktemp("qa"))
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(VERIFY, "TaskIndex", lambda: TaskIndex([tasks]))
        yield tasks


@pytest.fixture(scope="module")
def runs(tmp_path_factory, knows_mh_test):
    root = tmp_path_factory.mktemp("validity-runs")
    judges = [
        {
            "name": f"judge-{number}",
            "model": "scripted",
            "backend": "scripted",
            "model_args": {"responses": "support.multihop:judge"},
        }
        for number in range(3)
    ]
    panel = root / "panel.yaml"
    panel.write_text(yaml.safe_dump({"panel": "scripted-test", "judges": judges}))
    return {share: downstream_run(root, knows_mh_test, panel, share) for share in SHARES}


@pytest.fixture(scope="module")
def board(runs, tmp_path_factory):
    """A leaderboard of the six runs, each submitted as a user would."""
    folder = tmp_path_factory.mktemp("validity-board") / "board"
    for share in SHARES:
        submit(runs[share], folder)
    return folder


def validity_of(board, *options) -> str:
    """What `finreflect-eval validity` prints (every entry verified first)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["validity", "--leaderboard", str(board), *options]) == 0
    return printed.getvalue()


@pytest.fixture(scope="module")
def report(board):
    return json.loads(validity_of(board, "--json"))


def cell(report: dict, score: str, measure: str) -> dict:
    return next(c for c in report["cells"] if (c["score"], c["measure"]) == (score, measure))


def test_a_submission_carries_its_downstream_files_and_an_old_one_keeps_its_digest(runs):
    submission = bundle_run(runs[60])
    assert set(submission.downstream) == {DOWNSTREAM}
    assert submission.downstream[DOWNSTREAM].panel == "scripted-test"
    data = submission.model_dump(mode="json", by_alias=True)
    assert data["downstream"][DOWNSTREAM]["questions"]
    without = submission.model_copy(update={"downstream": {}})
    assert "downstream" not in without.model_dump(mode="json", by_alias=True)  # as before
    assert "downstream" not in json.loads(without.model_dump_json())


def test_rows_leave_the_downstream_task_out_of_the_modes_and_show_its_measures(board, runs):
    rows = {row["model"]: row for row in json.loads((board / "leaderboard.json").read_text())}
    assert len(rows) == len(SHARES)
    for share in SHARES:
        row, results = rows[f"acme/kg-share-{share}"], read(Results, _results(runs[share]))
        assert row["single_pass"] == results.overall.tasks[SMOKE]  # the smoke task's, not mh_test's
        assert row["single_pass.F"] == results.results[SMOKE]["faithfulness,none"]
        block = results.downstream[DOWNSTREAM]
        assert row["downstream_evidence_recall"] == block.evidence_recall.value
        assert row["downstream_path_connected"] == block.path_connected.value
        assert row["downstream_qa_gold_path"] == block.qa["gold_path"].value
    recall = [rows[f"acme/kg-share-{share}"]["downstream_evidence_recall"] for share in SHARES]
    assert recall == sorted(recall) and recall[0] < recall[-1]


def test_validity_ranks_faithfulness_with_evidence_recall(board, report):
    assert len(report["models"]) == len(SHARES)
    found = cell(report, "faithfulness", "evidence_recall")
    faithfulness = [m["main"]["faithfulness"] for m in report["models"]]
    recall = [m["downstream"]["evidence_recall"] for m in report["models"]]
    order = sorted(range(len(SHARES)), key=faithfulness.__getitem__)
    assert [recall[i] for i in order] == sorted(recall)  # both rise with the share
    assert len(set(faithfulness)) == len(set(recall)) == len(SHARES)  # (strictly: no ties)
    assert found["models"] == len(SHARES) and found["rho"] == 1.0
    low, high = found["ci"]
    assert -1.0 <= low <= high <= 1.0 and low < 1.0  # computed: the questions' draws vary it
    weak = abs(found["rho"]) < 0.3 or low <= 0 <= high
    assert found["verdict"] == ("weak" if weak else "positive")
    for each in report["cells"]:  # every verdict follows from its numbers
        if each["rho"] is None:
            assert each["verdict"] == "undefined"
        elif abs(each["rho"]) < 0.3 or each["ci"] is None or each["ci"][0] <= 0 <= each["ci"][1]:
            assert each["verdict"] == "weak"
        else:
            assert each["verdict"] == ("positive" if each["rho"] > 0 else "negative")
    assert report["draws"] == 2000
    entries = load_entries(board, "submissions")
    again = validity(entries).as_json()
    assert json.loads(json.dumps(again)) == report  # seeded
    assert found["ci"] == pytest.approx(paired_interval(entries, report["models"]), abs=1e-4)
    assert report["older_runs_left_out"] == report["set_aside"] == 0
    assert report["group"][DOWNSTREAM]["max_hops"] == 3

    table = validity_of(board)
    assert "| main score | downstream measure | models | ρ | 95% interval | verdict |" in table
    assert f"| Faithfulness | evidence recall | 6 | +1.00 | [{low:+.2f}, {high:+.2f}] |" in table
    assert "One entry per model, its newest run: 0 older runs of a model left out." in table
    assert "; 0 entries set aside (other downstream tasks, QA settings or max_hops)." in table


def paired_interval(entries, models, draws=2000, seed=SEED) -> list[float]:
    """The 95% interval of ρ(faithfulness, evidence recall) by the paired filing bootstrap,
    written again plainly: per draw the models (`models`' order) drawn, then the filings
    drawn once for all of them; each model's recall the exact mean of its questions on the
    drawn filings (a filing drawn twice counts twice)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(models), size=(draws, len(models)))
    per_model = []  # per model: its questions' edge shares, by filing
    for model in models:
        entry = next(e for e in entries if e.run_id == model["run_id"])
        shares = defaultdict(list)
        for record in entry.submission.downstream[DOWNSTREAM].questions:
            edges = [hop.edge for hop in record.evidence]
            shares[record.question.filing].append(Fraction(sum(edges), len(edges)))
        per_model.append(shares)
    filings = sorted(set().union(*per_model))
    drawn = rng.integers(0, len(filings), size=(draws, len(filings)))
    rhos = []
    for row, taken in zip(picks, drawn, strict=True):
        recall = []
        for shares in per_model:
            values = [value for k in taken for value in shares[filings[k]]]
            recall.append(float(100 * sum(values) / len(values)))
        x = [models[i]["main"]["faithfulness"] for i in row]
        y = [recall[i] for i in row]
        if len(set(x)) > 1 and len(set(y)) > 1:
            rhos.append(stats.spearmanr(x, y).statistic)
    assert len(rhos) >= draws / 2
    return [round(float(bound), 4) for bound in np.percentile(rhos, [2.5, 97.5])]


def _as(entry, model, run, **downstream):
    """The entry as a submission of `model` started at `run`, its downstream file changed."""
    submission = entry.submission
    results = submission.results
    config = results.config.model_copy(update={"model_name": model})
    file = submission.downstream[DOWNSTREAM]
    changed = file.model_copy(update=downstream)
    submission = submission.model_copy(
        update={
            "results": results.model_copy(update={"run": run, "config": config}),
            "downstream": {**submission.downstream, DOWNSTREAM: changed},
        }
    )
    return dataclasses.replace(entry, submission=submission)


def test_one_entry_per_model_and_only_comparable_ones(board, report):
    entries = load_entries(board, "submissions")
    of = {entry.model: entry for entry in entries}
    qa = of["acme/kg-share-50"].submission.downstream[DOWNSTREAM].qa
    extra = [
        # an earlier submission of the 100% model, scored as the 0% one: counted, it would tie
        _as(of["acme/kg-share-0"], "acme/kg-share-100", "2000-01-01T00-00-00-0000"),
        # the 80% model submitted again, later: it counts, once
        _as(of["acme/kg-share-80"], "acme/kg-share-80", "2999-01-01T00-00-00-0000"),
        # two models measured otherwise: another QA budget, paths within 2 hops
        _as(
            of["acme/kg-share-50"],
            "acme/kg-other-qa",
            "2001-01-01T00-00-00-0000",
            qa=qa.model_copy(update={"budget_tokens": 2048}),
        ),
        _as(of["acme/kg-share-40"], "acme/kg-other-k", "2001-01-01T00-00-00-0000", max_hops=2),
    ]
    checked = validity([*entries, *extra])
    models = {m["model"]: m["run_id"] for m in checked.models}
    assert sorted(models) == sorted(f"acme/kg-share-{share}" for share in SHARES)
    assert models["acme/kg-share-100"] == of["acme/kg-share-100"].run_id  # its newest
    assert models["acme/kg-share-80"] == extra[1].run_id
    assert (checked.older, checked.set_aside) == (2, 2)
    found = next(c for c in checked.cells if (c.score, c.measure) == CORRELATED)
    assert (found.models, found.rho) == (6, 1.0)
    table = markdown(checked)
    assert table.startswith("Validity: Spearman's ρ over 6 models with main scores and a ")
    assert "One entry per model, its newest run: 2 older runs of a model left out." in table
    assert (
        f"Comparable entries only: downstream task {DOWNSTREAM} (QA model scripted-qa: "
        f"scripted-qa on scripted, prompt {qa.prompt_sha[:12]}, {qa.budget_tokens} context "
        f"tokens, {qa.neighbourhood_hops} neighbourhood hops, paths within 3 hops); 2 entries "
        "set aside (other downstream tasks, QA settings or max_hops)." in table
    )
    assert "| Faithfulness | evidence recall | 6 | +1.00 | [" in table


def test_under_five_models_it_is_undefined(board, tmp_path):
    few = tmp_path / "few"
    stored = sorted((board / "submissions").rglob("*.json"))
    for path in stored[:4]:
        target = few / path.relative_to(board)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    table = validity_of(few)
    assert table.startswith("Validity: Spearman's ρ over 4 models with main scores and a ")
    rows = [line for line in table.splitlines() if line.startswith("| ") and "| — |" in line]
    assert len(rows) == 30  # every pair: no ρ, no interval
    assert all("| undefined: 4 models have both " in line for line in rows)
    assert (
        "| Faithfulness | evidence recall | 4 | — | — | undefined: 4 models have both "
        "Faithfulness and evidence recall (at least 5 needed) |" in table
    )


def _forged(runs, tmp_path, change):
    data = bundle_run(runs[40]).model_dump(mode="json", by_alias=True)
    change(data)
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(data))
    return path


def _flip_first_hop(data):
    question = data["downstream"][DOWNSTREAM]["questions"][0]
    question["evidence"][0]["edge"] = not question["evidence"][0]["edge"]


def _raise_recall(data):
    data["results"]["downstream"][DOWNSTREAM]["evidence_recall"]["value"] = 99.0


@pytest.mark.parametrize(
    "change, says",
    [
        (
            _flip_first_hop,
            rf"^refused: downstream file of task {DOWNSTREAM}, question \S+: its evidence "
            "does not follow from the samples' triples$",
        ),
        (
            _raise_recall,
            rf"^refused: downstream\.{DOWNSTREAM}\.evidence_recall\.value: submitted 99\.0, "
            r"recomputed from the samples [\d.]+; the downstream block follows from the "
            "submitted downstream files",
        ),
    ],
)
def test_a_tampered_downstream_file_or_figure_is_refused_in_one_line(runs, tmp_path, change, says):
    with pytest.raises(FinReflectError, match=says) as refused:
        submit(_forged(runs, tmp_path, change), tmp_path / "board")
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "board" / "submissions").exists()


def test_the_page_shows_the_validity_section(board, report):
    build(board)
    page = (board / "index.html").read_text()
    assert '<section id="validity" aria-labelledby="validity-title">' in page
    found = cell(report, "faithfulness", "evidence_recall")
    assert found["words"].replace("'", "&#39;") in page  # the computed verdict, escaped
    assert page.count('<tr class="verdict-') == len(report["cells"]) == 30
    assert all(f"<p>{note}</p>" in page for note in report["notes"])
    assert "acme/kg-share-100" in page


def _results(folder):
    return next(folder.glob("results_*.json"))


def test_a_board_without_downstream_entries_has_no_validity_section():
    from finreflect_eval.leaderboard.render import render_html

    assert 'id="validity"' not in render_html([], [], [], validity([]))
