"""The report's Downstream tab, for a run of the downstream task on FinReflectKG-MultiHop's sample
questions (tests/support/multihop.py: a candidate extracting 60% of the gold hops, a QA model that
answers from the gold path when its context holds it, a panel that also scores answers): the
results' measures with their intervals, every question with its answers, scores and votes, its
gold hops found or missing from the model's triples, and the gold path drawn beside the model's
subgraph with the Graph tab's code. Markup written into the downstream file (the report reads it
as it is) shows as text. A run without downstream files has no such tab. In Chromium at 1,280
and 390 px (the screenshot goes where FINREFLECT_DOWNSTREAM_SCREENSHOT says).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from markupsafe import escape
from support.browser import Browser, injected, overflow, require_browser
from support.hostile import payload
from support.multihop import qa_file, task_folder

from finreflect_eval.records import Results, read
from finreflect_eval.records.downstream import DownstreamFile
from finreflect_eval.view import downstream as view_downstream
from finreflect_eval.view import write_report
from finreflect_eval.view.scores import interval_text, number

TASK = "mh_test"
FOUND, MISSING, OTHER = (
    view_downstream.ON_PATH,
    view_downstream.MISSING,
    view_downstream.OTHER_RELATION,
)
DRAWN = ".qa-browser[data-drawn]"


@pytest.fixture(scope="module")
def downstream_run(tmp_path_factory) -> Path:
    """The scored run folder, with its downstream file of the panel."""
    from finreflect_eval.models import ModelSpec
    from finreflect_eval.pipeline.evaluator import evaluate
    from finreflect_eval.pipeline.judging import load_panel
    from finreflect_eval.pipeline.run_config import RunConfig

    root = tmp_path_factory.mktemp("view-downstream")
    tasks = task_folder(root / "tasks", qa=qa_file(root / "qa"), name=TASK)
    judge = {"model": "scripted", "backend": "scripted"}
    judge["model_args"] = {"responses": "support.multihop:judge"}
    judges = [{"name": f"judge-{n}", **judge} for n in range(3)]
    panel = root / "panel.yaml"
    panel.write_text(yaml.safe_dump({"panel": "scripted-test", "judges": judges}))
    candidate = {"responses": "support.multihop:extracts_share_60"}
    config = RunConfig(
        model=ModelSpec("acme/kg-mh", "scripted", candidate),
        tasks=[TASK],
        include_paths=[tasks],
        output_path=root / "out",
        cache=root / "out" / "cache.sqlite",
    )
    run, results = evaluate(config, load_panel(panel))
    folder = run.store.results_path(results.run, results.judges.panel).parent
    assert len(list(folder.glob(f"downstream_{TASK}_*.json"))) == 1
    return folder


def downstream_file(folder: Path) -> tuple[Path, DownstreamFile]:
    (path,) = folder.glob(f"downstream_{TASK}_*.json")
    return path, read(DownstreamFile, path)


def questions(report: Path, run: int = 0) -> list[dict]:
    """Every question of the task's pages in a report, in order."""
    paths = sorted(
        (report / "data" / TASK).glob(f"questions-{run}-*.js"),
        key=lambda path: int(path.stem.rpartition("-")[2]),
    )
    found = []
    for number_, path in enumerate(paths):
        text = path.read_text(encoding="utf-8")
        assert text.startswith("FRV.questions(") and text.endswith(");\n"), path
        task, shown_run, page, page_questions = json.loads("[" + text[14:-3] + "]")
        assert (task, shown_run, page) == (TASK, run, number_)
        found += page_questions
    return found


def tab(page: str) -> str:
    return page[page.index('<section id="downstream"') : page.index('<section id="cost"')]


def test_the_tab_shows_the_measures_and_every_question(downstream_run, tmp_path):
    folder = write_report(downstream_run, tmp_path / "report").parent
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert '<a href="#downstream" data-view="downstream">Downstream</a>' in page
    assert '<script src="report-downstream.js"></script>' in page

    # The measures: the results' block, each with its interval and n.
    (results_path,) = downstream_run.glob("results_*.json")
    block = read(Results, results_path).downstream[TASK]
    rows = re.findall(
        r'<tr data-key="(\w+)"><th scope="row">[^<]*<small>[^<]*</small></th>'
        r'<td class="num">([^<]*)</td><td>([^<]*)</td><td>(\d+)</td></tr>',
        tab(page),
    )
    measures = {
        "evidence_recall": block.evidence_recall,
        "evidence_recall_entities": block.evidence_recall_entities,
        "path_connected": block.path_connected,
        **{f"qa_{condition}": measure for condition, measure in block.qa.items()},
    }
    assert len(measures) == 6
    assert rows == [
        (key, number(m.value), str(escape(interval_text(m.ci))), str(m.n))
        for key, m in measures.items()
    ]

    # Every question, as the file holds it, with each condition's answer, score and votes.
    _, file = downstream_file(downstream_run)
    shown = questions(folder)
    assert [q["id"] for q in shown] == [r.question.question_id for r in file.questions]
    assert len(shown) == 7
    for question, record in zip(shown, file.questions, strict=True):
        assert question["question"] == record.question.question
        assert question["answer"] == record.question.answer
        answers = {a["condition"]: a for a in question["answers"]}
        assert list(answers) == ["model_graph", "gold_path", "hop_chunks"]
        for condition, answer in answers.items():
            kept = record.answers[condition]
            assert (answer["answer"], answer["score"]) == (kept.answer, kept.score)
            assert answer["votes"] == [
                [v.judge, v.score, v.reasoning, v.warning] for v in kept.votes
            ]
    assert any(a["votes"] for q in shown for a in q["answers"])  # the qualitative ones

    # A question's hops, in words and drawn: found where the model's triples hold the hop.
    for question, record in zip(shown, file.questions, strict=True):
        states = [
            FOUND if match.edge else OTHER if match.entities else MISSING
            for match in record.evidence
        ]
        assert [hop["state"] for hop in question["hops"]] == states
        gold = question["gold"]
        names = [node[0] for node in gold["nodes"]]
        drawn = {
            (names[s], relation, names[o]): rest[-1] for s, o, relation, *rest in gold["links"]
        }
        for hop, state in zip(record.question.hops, states, strict=True):
            assert drawn[(hop.head, hop.relation, hop.tail)] == state
    mixed = [q for q in shown if {h["state"] for h in q["hops"]} >= {FOUND, MISSING}]
    assert mixed, "the fixture should have a question with a found hop and a missing one"
    assert any(link[5] == FOUND for q in shown for link in q["model"]["links"])


def test_markup_in_the_downstream_file_is_data_not_html(downstream_run, tmp_path):
    """The report reads the file as it is: markup in its texts reaches the page as data (the
    questions' scripts) or escaped (the QA model's name, in the HTML)."""
    run = hostile_copy(downstream_run, tmp_path / "run")
    folder = write_report(run, tmp_path / "report").parent
    page = (folder / "index.html").read_text(encoding="utf-8")
    section = tab(page)
    assert str(escape(payload("qa name"))) in section and payload("qa name") not in page
    first = questions(folder)[0]
    assert first["question"] == payload("question")
    assert first["hops"][0]["head"] == payload("hop head")
    assert first["answers"][0]["answer"] == payload("answer")
    assert payload("question") not in page  # the questions are data, not the page's HTML


def test_a_run_without_downstream_files_has_no_downstream_tab(downstream_run, tmp_path):
    plain = tmp_path / "plain"
    shutil.copytree(downstream_run, plain)
    for path in plain.glob("downstream_*.json"):
        path.unlink()
    folder = write_report(plain, tmp_path / "report").parent
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert 'data-view="downstream"' not in page and 'id="downstream"' not in page
    assert not list((folder / "data").rglob("questions-*.js"))

    # Side by side with the run that has one: the tab, with B's lack said.
    both = write_report(downstream_run, tmp_path / "both", compare=plain).parent
    section = tab((both / "index.html").read_text(encoding="utf-8"))
    assert "Run B: " in section and "No downstream file for panel scripted-test." in section
    assert len(questions(both)) == 7 and not questions(both, run=1)


def hostile_copy(folder: Path, copy: Path) -> Path:
    """The run folder with markup in its downstream file's first question (its text, gold
    answer, first hop, an answer, a vote) and in the QA model's name."""
    shutil.copytree(folder, copy)
    path, _ = downstream_file(copy)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["qa"]["name"] = payload("qa name")
    record = data["questions"][0]
    record["question"]["question"] = payload("question")
    record["question"]["answer"] = payload("gold answer")
    record["question"]["hops"][0]["head"] = payload("hop head")
    record["question"]["hops"][0]["relation"] = payload("hop relation")
    record["subgraph"][0]["subject"] = payload("subgraph subject")
    record["answers"]["model_graph"]["answer"] = payload("answer")
    record["answers"]["model_graph"]["error"] = payload("error")
    voted = next(r for r in data["questions"] if r["answers"]["gold_path"]["votes"])
    voted["answers"]["gold_path"]["votes"][0]["reasoning"] = payload("reasoning")
    voted["answers"]["gold_path"]["votes"][0]["judge"] = payload("judge")
    path.write_text(json.dumps(data), encoding="utf-8")
    return copy


# --- in Chromium ---


def test_the_tab_in_chromium(downstream_run, tmp_path):
    """Questions, answers and hops shown, the gold path and the subgraph drawn, a missing hop
    dashed and red and said missing, a found one not; no console error; it fits a phone."""
    require_browser()
    from playwright.sync_api import sync_playwright

    folder = write_report(downstream_run, tmp_path / "report").parent
    shown = questions(folder)
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        for width in (1280, 390):
            page, _ = chromium.open(folder.as_uri() + "/index.html#downstream", width, 900)
            page.wait_for_selector(DRAWN, state="attached")
            assert page.locator("section#downstream").is_visible()
            cards = page.locator("article.question")
            assert cards.count() == len(shown)
            texts = page.locator(".qa-question").all_text_contents()
            assert texts == [q["question"] for q in shown]
            mixed = next(
                n
                for n, q in enumerate(shown)
                if {h["state"] for h in q["hops"]} >= {FOUND, MISSING}
            )
            card = cards.nth(mixed)
            for hop, item in zip(
                shown[mixed]["hops"], card.locator("li.qa-hop").all(), strict=True
            ):
                said = item.text_content()
                assert hop["head"] in said and hop["tail"] in said
                if hop["state"] == FOUND:
                    assert "held by the model's triples" in said and "missing" not in said
                else:
                    assert "missing from the model's triples" in said
            gold = card.locator("figure.qa-graph").nth(0)
            missing_edges = sum(1 for link in shown[mixed]["gold"]["links"] if link[5] != FOUND)
            assert gold.locator("svg line.kg-edge.missing").count() == missing_edges
            assert gold.locator("svg line.kg-edge.on-path").count() >= 1
            assert card.locator("figure.qa-graph").nth(1).locator("svg").count() == 1
            scores = card.locator("td.qa-score").all_text_contents()
            assert scores == [f"{a['score']:.1f} / 10" for a in shown[mixed]["answers"]]
            assert overflow(page) <= 0, width
            if width == 1280 and os.environ.get("FINREFLECT_DOWNSTREAM_SCREENSHOT"):
                page.screenshot(path=os.environ["FINREFLECT_DOWNSTREAM_SCREENSHOT"], full_page=True)
        chromium.browser.close()
    assert not chromium.errors, chromium.errors


def test_markup_in_the_downstream_file_shows_as_text_in_chromium(downstream_run, tmp_path):
    require_browser()
    from playwright.sync_api import sync_playwright

    run = hostile_copy(downstream_run, tmp_path / "run")
    folder = write_report(run, tmp_path / "report").parent
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page, _ = chromium.open(folder.as_uri() + "/index.html#downstream")
        page.wait_for_selector(DRAWN, state="attached")
        assert injected(page) == []
        first = page.locator("article.question").first
        assert first.locator(".qa-question").text_content() == payload("question")
        assert payload("gold answer") in first.locator(".qa-gold").text_content()
        assert payload("hop head") in first.locator("li.qa-hop").first.text_content()
        assert payload("answer") in first.locator("td.qa-text").first.text_content()
        reasons = page.locator("#downstream .reasoning").all_text_contents()
        assert payload("reasoning") in reasons
        assert payload("judge") in page.locator("#downstream .judge").all_text_contents()
        titles = page.locator("#downstream svg title").all_text_contents()
        assert any(payload("hop head") in title for title in titles)
        assert payload("qa name") in page.locator(".qa-settings").first.text_content()
        chromium.browser.close()
    assert not chromium.errors, chromium.errors
