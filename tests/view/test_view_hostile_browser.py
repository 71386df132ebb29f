"""Hostile markup through every field the report shows, in headless Chromium: a run whose span
(id, company, ticker, section, text), reference triple, extracted triples (subject, relation,
object, their types), the model's thought, failure message, CheckRules name, judges' names,
reasoning and warnings, model name and dataset id are all markup (support/hostile.py), shown
alone (the Graph tab's drawing too: entities, relation, types, the filing's name), side by side
with another such run, and with markup in the URL's filter state. Nothing of it runs (no `xss`
call, no element it makes, no `javascript:` link) and each field reads as its text, literally.
Panel and task names cannot carry markup: the run's files refuse them.

Without Chromium the tests are skipped, except where FINREFLECT_FIXTURES=required (CI).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from support.browser import READY, Browser, injected, require_browser
from support.hostile import JUDGE_NAMES, N_SPANS, TASKS, entity, hostile_run, payload

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.view import open_run, write_report

MODEL_A, MODEL_B = payload("model A"), payload("model B")
JUDGES = list(JUDGE_NAMES.values())
SPAN_ID = payload("span id")
TRIPLE = [entity(f) for f in ("subject", "subject type", "relation", "object", "object type")]
REFERENCE = [
    payload(f"reference {name}")
    for name in ("subject", "subject_type", "relation", "object", "object_type")
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("view-hostile")
    a, b = hostile_run(root, MODEL_A), hostile_run(root, MODEL_B)
    return {
        "a": a,
        "single": write_report(a, root / "report"),
        "compare": write_report(a, root / "report-ab", compare=b),
    }


def texts(scope, selector: str) -> list[str]:
    """The text of every element `selector` finds in a page or under a locator."""
    return scope.locator(selector).all_text_contents()


def hostile_card(page):
    return page.locator("#list article.span").filter(has=page.locator("h3", has_text=SPAN_ID))


def test_markup_in_every_field_of_a_run_shows_as_text(hostile):
    require_browser()
    from playwright.sync_api import sync_playwright

    run = open_run(hostile["a"])
    failure = run.results.details[TASKS[0]].failures.first
    failed = next(record for record in run.records(TASKS[0]) if record.failed)
    assert "<img src=x onerror=xss(" in failure  # the candidate's markup, quoted by the schema
    url = hostile["single"].as_uri()
    with sync_playwright() as playwright:
        chromium = Browser(playwright)

        # The static tabs (Jinja): the model, the judges, the dataset, a failure, a rule's name.
        page, _ = chromium.open(url)
        assert page.title() == f"finreflect-eval report · {MODEL_A}"
        assert page.locator("h1").text_content() == MODEL_A
        header = page.locator("header .runs").text_content()
        assert MODEL_A in header and all(judge in header for judge in JUDGES)
        assert payload("dataset id") in header
        scores = page.locator("#scores").text_content()
        for judge in JUDGES:
            assert f"without {judge}" in texts(page, "#scores table.scores th")
        assert f"first: {failure}" in scores and payload("rule name") in scores
        page.click('.tabs a[data-view="settings"]')
        settings = page.locator("#settings").text_content()
        assert MODEL_A in settings and payload("dataset id") in settings
        assert all(judge in settings for judge in JUDGES)
        assert injected(page) == []

        # The span browser (textContent): the span, its triples, reference, rules and votes.
        page, _ = chromium.open(url + "#spans")
        card = hostile_card(page)
        assert card.count() == 1
        meta = card.locator("header .meta").text_content()
        assert all(payload(f) in meta for f in ("ticker", "company", "section"))
        text = card.locator(".text").text_content()
        assert text.startswith(f"{payload('span text')} {TRIPLE[3]} ")
        assert TRIPLE[3] in texts(card, ".text mark.obj")
        extracted = card.locator(".part.run-a li.triple").first
        assert texts(extracted, ".triple-text > span") == TRIPLE
        rules = [payload("rule name"), "entity_length", "entity_schema", "relation_schema"]
        assert texts(extracted, ".flag.rules") == ["CheckRules: " + ", ".join(rules)]
        assert REFERENCE in [
            texts(line, "span") for line in card.locator(".reference .triple-text").all()
        ]
        thought = card.locator(".part.run-a details.thinking")
        assert thought.locator("summary").text_content() == "Thinking (extract)"
        thought.locator("summary").click()  # opened, its text is the thought's, literally
        assert thought.locator("pre").text_content() == payload("thinking")
        extracted.locator("button.verdict").first.click()
        votes = card.locator(".votes").first
        assert texts(votes, ".judge") == JUDGES
        assert texts(votes, ".reasoning") == [payload("reasoning")] * 3
        assert texts(votes, ".warning") == ["⚠ " + entity("warning")] * 3
        failed_card = page.locator(f'#list article.span[data-span="{failed.span_id}"]')
        assert failed_card.locator("p.warning").text_content() == (
            "Extraction failed: " + "; ".join(failed.failures)
        )
        assert any(payload("ticker") in option for option in texts(page, "#filters option"))
        assert payload("section") in texts(page, '#filters select[name="section"] option')
        assert injected(page) == []

        # A hostile company, chosen: it goes into the URL, and the URL brings it back.
        page.evaluate("document.body.dataset.ready = ''")
        page.select_option('#filters select[name="ticker"]', payload("ticker"))
        page.wait_for_selector(READY, state="attached")
        assert page.locator("#list article.span").count() == 1
        linked, _ = chromium.open(page.url)
        assert linked.locator('#filters select[name="ticker"]').input_value() == payload("ticker")
        assert hostile_card(linked).count() == 1 and injected(linked) == []

        # Markup in every filter of the URL, and as the view: ignored, never run.
        state = {key: payload(f"url {key}") for key in ("task", "ticker", "section", "crit")}
        state |= {key: payload(f"url {key}") for key in ("verdict", "flag", "page")}
        page, _ = chromium.open(url + "#spans?" + urlencode(state))
        for key in ("ticker", "section", "crit", "verdict", "flag"):
            assert page.locator(f'#filters select[name="{key}"]').input_value() == "", key
        assert page.locator('#filters select[name="task"]').input_value() == TASKS[0]
        assert page.locator("#list article.span").count() == N_SPANS
        assert injected(page) == []
        page, _ = chromium.open(url + "#" + quote(payload("url view")))
        assert page.locator("#scores").is_visible() and injected(page) == []

        # The Graph tab: the hostile filing's graph (its name is the ticker's markup, so it
        # comes first), its entities, relation and types in the drawing, its picker and lists.
        page, _ = chromium.open(url + "#graph")
        figure = page.locator("#graph figure.kg").first
        page.wait_for_selector("#graph figure.kg[data-drawn]")
        filing = f"{payload('ticker')}_{first_year(hostile['a'])}"
        assert figure.get_attribute("data-drawn") == filing
        assert texts(figure, "select option")[0].startswith(f"{filing} · ")
        assert figure.locator(".kg-caption").text_content().startswith(f"{filing}: ")
        drawn = figure.locator(".kg-canvas svg")
        entities = [title.split(" — ")[0] for title in texts(drawn, "g.kg-entity > title")]
        assert set(entities) == {TRIPLE[0], TRIPLE[3], "Apple", "iPhone"}
        node = drawn.locator("g.kg-entity").filter(has=page.locator("title", has_text=TRIPLE[0]))
        assert node.locator("title").text_content().endswith(f"; types {TRIPLE[1]}")
        label = node.locator("text.kg-label").text_content()
        assert label.endswith("…") and TRIPLE[0].startswith(label[:-1])  # its full text: title
        edges = texts(drawn, "line.kg-edge > title")
        assert f"{TRIPLE[0]} — {TRIPLE[2]} → {TRIPLE[3]} (1 triple)" in edges
        assert texts(page, "#graph .graph-rules li")  # the rules, as text
        assert injected(page) == []
        chromium.browser.close()
    assert not chromium.errors, chromium.errors


def first_year(run_folder: Path) -> int:
    """The fiscal year of the hostile span (the first) of the run."""
    run = open_run(run_folder)
    record = next(r for r in run.records(TASKS[0]) if r.span_id == SPAN_ID)
    return record.doc["fiscal_year"]


def test_markup_in_two_runs_side_by_side_shows_as_text(hostile):
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page, _ = chromium.open(hostile["compare"].as_uri())
        assert page.locator("h1").text_content() == f"{MODEL_A} vs {MODEL_B}"
        runs = texts(page, "header .runs li")
        assert MODEL_A in runs[0] and MODEL_B in runs[1]
        labels = texts(page, "#scores details.run-scores summary")
        assert MODEL_A in labels[0] and MODEL_B in labels[1]
        page.click('.tabs a[data-view="settings"]')
        differences = texts(page, "#settings table.differences td")
        assert MODEL_A in differences and MODEL_B in differences
        assert injected(page) == []
        page, _ = chromium.open(hostile["compare"].as_uri() + "#spans?flag=")
        card = hostile_card(page)
        titles = texts(card, ".part h4")
        assert titles[:2] == [f"A: {MODEL_A} · hostile-panel", f"B: {MODEL_B} · hostile-panel"]
        for side in ("a", "b"):
            extracted = card.locator(f".part.run-{side} li.triple").first
            assert texts(extracted, ".triple-text > span") == TRIPLE
            extracted.locator("button.verdict").first.click()
            votes = card.locator(f".part.run-{side} .votes").first
            assert texts(votes, ".judge") == JUDGES
            assert texts(votes, ".reasoning") == [payload("reasoning")] * 3
        assert injected(page) == []
        chromium.browser.close()
    assert not chromium.errors, chromium.errors


def test_panel_and_task_names_cannot_carry_markup(hostile, tmp_path):
    """The panel and task names are in file names: a run's files refuse any but plain names,
    so a report never shows one with markup."""
    (results,) = hostile["a"].glob("results_*.json")
    panel = json.loads(results.read_text(encoding="utf-8"))["judges"]["panel"]
    for old, where in [(panel, "*.json"), (TASKS[0], "*.json"), (TASKS[0], "results_*.json")]:
        folder = tmp_path / f"{len(list(tmp_path.iterdir()))}"
        shutil.copytree(hostile["a"], folder)
        for path in folder.glob(where):
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace(json.dumps(old), json.dumps(payload("name"))))
        with pytest.raises(FinReflectError) as error:
            write_report(folder, tmp_path / f"report-{folder.name}")
        assert "\n" not in str(error.value), str(error.value)
