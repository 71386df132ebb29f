"""`finreflect-eval view` of a run people labelled (`review export` / `import`, then `score`):
the scores tab shows the results' `human` block (PPI beside the panel's score, the labels
counted, each judge's and the panel's agreement with people, α with people) and each labelled
item carries the people's labels beside the judges' votes; a run without labels shows nothing
of it. In Chromium: a verdict opens the people's labels under the judges' votes, and the page
fits a phone.

The run: the sample's first spans, a panel that splits on every triple (accepts all, rejects
all, the gold label), labelled at random by one annotator (`support.human_labels`)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from support.human_labels import label_run
from support.runs import panel_file, scripted_run
from test_view import report_spans

from finreflect_eval.records import HumanLabel, Results, read, read_lines
from finreflect_eval.stats import metrics
from finreflect_eval.view import write_report
from finreflect_eval.view.scores import number

TASK = "finreflect_smoke_single_pass"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The same run twice: as judged (no labels), and labelled by people and rescored."""
    root = tmp_path_factory.mktemp("view-human")
    panel = panel_file(root, "accepts_all", "rejects_all", "gold_labels")
    plain = scripted_run(root / "run", "acme/kg-7b", 8, panel).parent
    labelled = root / "labelled"
    shutil.copytree(plain, labelled)
    label_run(labelled)
    return {"plain": plain, "labelled": labelled}


def labels_of(run: Path) -> list[HumanLabel]:
    return read_lines(HumanLabel, next(run.glob(f"human_labels_{TASK}_*.jsonl")))


def test_the_scores_tab_shows_the_check_against_people(runs, tmp_path):
    results = read(Results, next(runs["labelled"].glob("results_*.json")))
    human = results.human[TASK]
    assert human  # the fixture's labels gave a `human` block
    page = write_report(runs["labelled"], tmp_path / "report").read_text(encoding="utf-8")
    assert page.count('<table class="people">') == 1
    assert page.count('<table class="people-agreement">') == 1
    scores = page[page.index('<table class="scores">') : page.index('<table class="people">')]
    assert '<th scope="col" title="prediction-powered' in scores  # the PPI column
    people = page[page.index('<table class="people">') : page.index('<table class="agreement">')]
    for criterion, check in human.items():
        row = people[people.index(f'<th scope="row">{criterion}</th>') :]
        row = row[: row.index("</tr>")]
        assert f">{number(check.panel)}<" in row and f">{number(check.ppi)}<" in row
        assert f"{check.audit_labels} / {check.labels}" in row
        assert number(check.alpha_with_people.alpha, 3) in row
        # the PPI beside the panel's score in the scores table
        cells = scores[scores.index(f'<th scope="row">{criterion} ') :]
        assert f'<td class="num ppi">{number(check.ppi)} ' in cells[: cells.index("</tr>")]
    agreement = people[people.index('<table class="people-agreement">') :]
    assert all(f">{judge}</th>" in agreement for judge in ("judge-0", "judge-1", "judge-2"))
    first = human["faithfulness"]
    assert f"acc {number(first.panel_agreement.accuracy, 2)}" in agreement
    assert f"acc {number(first.judges['judge-1'].accuracy, 2)}" in agreement
    settings = page[page.index('<section id="settings"') :]
    assert "alpha_with_people" not in settings  # shown in the scores, not dumped in settings


def test_each_labelled_item_shows_the_people_s_labels(runs, tmp_path):
    folder = write_report(runs["labelled"], tmp_path / "report").parent
    labels = labels_of(runs["labelled"])
    _, spans = report_spans(folder, TASK)
    by_id = {span["id"]: span["runs"][0] for span in spans}
    expected: dict[tuple, list[HumanLabel]] = {}
    for label in labels:
        expected.setdefault((label.span_id, label.criterion, label.triple_index or 0), [])
        expected[label.span_id, label.criterion, label.triple_index or 0].append(label)
    shown = {
        (span_id, criterion, int(index)): item
        for span_id, part in by_id.items()
        for criterion, items in part.get("h", {}).items()
        for index, item in items.items()
    }
    assert shown.keys() == expected.keys() and shown
    for key, item in shown.items():
        majority, audit, each = item
        codes = [metrics.vote_code(label.label) for label in expected[key]]
        strings = by_id[key[0]]["s"]
        assert [[strings[name], code] for name, code in each] == [
            [label.annotator, code] for label, code in zip(expected[key], codes, strict=True)
        ]
        top = Counter(codes).most_common()
        assert majority == (None if len(top) > 1 and top[0][1] == top[1][1] else top[0][0])
        assert audit == int(any(label.sample == "audit" for label in expected[key]))
    assert any(audit for _, audit, _ in shown.values())

    # A label made on other text than the span's (an edited labels file) is none of its items'.
    path = next(runs["labelled"].glob("human_labels_*.jsonl"))
    copy = tmp_path / "edited"
    shutil.copytree(runs["labelled"], copy)
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    edited = [
        json.dumps({**json.loads(line), "span_sha256": "0" * 64})
        if json.loads(line)["span_id"] == first["span_id"]
        else line
        for line in lines
    ]
    (copy / path.name).write_text("\n".join(edited) + "\n")
    _, spans = report_spans(write_report(copy, tmp_path / "edited-report").parent, TASK)
    part = next(span["runs"][0] for span in spans if span["id"] == first["span_id"])
    assert "h" not in part


def test_a_run_without_labels_shows_nothing_of_people(runs, tmp_path):
    """The same run before people labelled it: no table, column, section or item label."""
    labelled = write_report(runs["labelled"], tmp_path / "labelled").read_text(encoding="utf-8")
    assert 'class="people' in labelled and ">PPI<" in labelled  # what the plain run lacks
    folder = write_report(runs["plain"], tmp_path / "report").parent
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert 'class="people' not in page and ">PPI<" not in page
    assert "Checked against people" not in page and "alpha_with_people" not in page
    _, spans = report_spans(folder, TASK)
    assert all("h" not in span["runs"][0] for span in spans)


def test_two_runs_side_by_side_each_with_its_own_labels(runs, tmp_path):
    folder = write_report(runs["labelled"], tmp_path / "ab", compare=runs["plain"]).parent
    _, spans = report_spans(folder, TASK)
    assert any("h" in span["runs"][0] for span in spans)
    assert all("h" not in span["runs"][1] for span in spans)


def test_people_s_labels_in_chromium(runs, tmp_path):
    from support.browser import READY, Browser, injected, overflow, require_browser

    require_browser()
    from playwright.sync_api import sync_playwright

    labels = labels_of(runs["labelled"])
    url = write_report(runs["labelled"], tmp_path / "report").as_uri()
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page, _ = chromium.open(url)
        assert page.locator("#scores table.people").is_visible()
        page, _ = chromium.open(url + "#spans")
        button = page.locator("#list button.verdict:has(.mark.people)").first
        mark = button.locator(".mark.people").inner_text()
        assert mark.startswith("people: ")
        button.click()
        votes = page.locator("#list .votes").first
        assert votes.locator("li.vote .judge").all_text_contents() == [
            "judge-0",
            "judge-1",
            "judge-2",
        ]
        people = votes.locator(".people")
        assert people.locator(".outcome").inner_text().startswith("People: ")
        annotators = people.locator("li.person .annotator").all_text_contents()
        assert annotators and set(annotators) <= {label.annotator for label in labels}
        assert people.locator("li.person .badge").first.inner_text() in mark
        assert injected(page) == [] and page.locator(READY).count() == 1
        for view in ("#scores", "#spans?flag=split"):
            phone, _ = chromium.open(url + view, 390, 844, is_mobile=True)
            for each in phone.locator("#list button.verdict:has(.mark.people)").all()[:6]:
                each.click()
            assert overflow(phone) <= 0, view
        chromium.browser.close()
    assert not chromium.errors, chromium.errors
