"""The report's Cost tab: per task, the results' `cost` block as a table (the extraction, each
judge with a row per criterion, the total, per 1,000 triples), every figure the one the results
hold, "—" where it is unknown, and notes for a run answered all from the cache (nothing new
spent), a model without a price and a run without a price table; in Chromium at 1,280 and 390
px; markup in the model's and judges' names and the currency shows as text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from markupsafe import escape
from support.browser import Browser, injected, overflow, require_browser
from support.hostile import JUDGE_NAMES, TASKS, hostile_run, payload
from support.runs import candidate_file

from finreflect_eval.models import ModelSpec
from finreflect_eval.pipeline.evaluator import evaluate
from finreflect_eval.pipeline.judging import load_panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.records import Prices, Results, read
from finreflect_eval.view import open_run, write_report
from finreflect_eval.view.cost import COLUMNS

TASK = "finreflect_smoke_single_pass"
PRICES = {
    "currency": "EUR",
    "models": {
        "acme/kg-cost": {"input": 1.0, "output": 2.0, "device_hour": 3.6},
        "judge-a": {"input": 0.5, "output": 1.5, "cached": 0.25},
    },
}
KEYS = [key for key, _, _ in COLUMNS]


def cost_run(folder: Path, prices: dict | None, cache: Path) -> Path:
    """A scripted run on the sample's first 3 spans judged by judge-0 (model judge-a) and
    judge-1 and judge-2 (model judge-b, which PRICES leaves out); returns its results file."""
    judges = [
        {
            "name": f"judge-{number}",
            "model": model,
            "backend": "scripted",
            "model_args": {"responses": f"support.scripted_judges:{responder}"},
        }
        for number, (model, responder) in enumerate(
            [("judge-a", "accepts_all"), ("judge-b", "rejects_all"), ("judge-b", "accepts_all")]
        )
    ]
    folder.mkdir(parents=True)
    (panel := folder / "panel.yaml").write_text(yaml.safe_dump({"panel": "cost", "judges": judges}))
    config = RunConfig(
        model=ModelSpec("acme/kg-cost", "scripted", {"responses": str(candidate_file(folder))}),
        tasks=[TASK],
        dataset="sample",
        limit=3,
        output_path=folder / "out",
        cache=cache,
        prices=None if prices is None else Prices.model_validate(prices),
    )
    run, results = evaluate(config, load_panel(panel))
    return run.store.results_path(results.run, results.judges.panel)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A priced run (judge-b unpriced), the same run again from its cache, and one unpriced."""
    root = tmp_path_factory.mktemp("view-cost")
    cache = root / "cache.sqlite"
    return {
        "priced": cost_run(root / "priced", PRICES, cache),
        "cached": cost_run(root / "cached", PRICES, cache),
        "unpriced": cost_run(root / "unpriced", None, root / "other-cache.sqlite"),
    }


def cost_section(page: str) -> str:
    return page[page.index('<section id="cost"') : page.index('<section id="settings"')]


def shown_rows(section: str) -> list[tuple[str, str, str, dict[str, tuple[str, str]]]]:
    """Each row of the cost table: its kind, label, model and per column (data-value, text)."""
    rows = []
    for kind, head, cells in re.findall(
        r'<tr class="cost-(\w+)"><th scope="row">(.*?)</th>(.*?)</tr>', section
    ):
        head = re.sub(r'<span class="visually-hidden">.*?</span>', "", head)
        label, _, model = head.partition(' <small class="model">')
        model = model.removesuffix("</small>")
        found = re.findall(r'<td data-key="(\w+)" data-value="([^"]*)">([^<]*)</td>', cells)
        rows.append((kind, label, model, {key: (value, text) for key, value, text in found}))
    return rows


def expected_text(key: str, value: float | None, currency: str | None, rate: bool) -> str:
    if value is None:
        return "—"
    if key == "money":
        return f"{value:,.6f}".rstrip("0").rstrip(".") + f" {currency}"
    if key in ("seconds", "device_seconds"):
        return f"{value:,.3f}"
    return f"{value:,.2f}" if rate else f"{value:,}"


def assert_shown(cells: dict, usage, currency: str | None, rate: bool = False) -> None:
    """Every figure of `usage` is in its cell: the value itself, and as text."""
    assert list(cells) == KEYS
    for key in KEYS:
        value = getattr(usage, key)
        data, text = cells[key]
        assert (None if data == "" else float(data)) == value, key
        assert text == expected_text(key, value, currency, rate), (key, text)


def test_the_cost_tab_shows_the_results_numbers(runs, tmp_path):
    results = read(Results, runs["priced"])
    cost = results.cost[TASK]
    assert cost.unpriced == ["judge-b"] and cost.total.money is None
    assert cost.extraction.money and cost.judging["judge-0"].money  # priced
    page = (write_report(runs["priced"], tmp_path / "report")).read_text(encoding="utf-8")
    assert '<a href="#cost" data-view="cost">Cost</a>' in page
    section = cost_section(page)
    assert f"<h3>{TASK} <small>single_pass · {cost.triples} triples</small></h3>" in section
    rows = shown_rows(section)
    expected = [("stage", "extraction", "acme/kg-cost", cost.extraction)]
    for judge, usage in cost.judging.items():
        expected.append(("judge", judge, usage.model, usage))
        expected += [("criterion", name, "", share) for name, share in usage.criteria.items()]
    expected += [("total", "total", "", cost.total), ("rate", "per 1k triples", "", None)]
    assert [row[:3] for row in rows] == [row[:3] for row in expected]
    assert len(rows) == 1 + 3 * (1 + 4) + 2  # every judge with its four criteria
    for (_, _, _, cells), (kind, _, _, usage) in zip(rows, expected, strict=True):
        if kind == "rate":
            assert_shown(cells, cost.per_1k_triples, "EUR", rate=True)
        else:
            assert_shown(cells, usage, "EUR")
    # The criteria's rows name their judge to a screen reader.
    assert '<th scope="row"><span class="visually-hidden">judge-1: </span>relevance</th>' in page
    assert "No price for judge-b in the price table: no total money." in section
    assert "response cache" not in section.split("</table>")[1]  # every call was new
    # The block is the Cost tab's, not the settings'; the price table used is a setting.
    settings = page[page.index('<section id="settings"') :]
    assert "<summary>cost</summary>" not in settings and "device_hour" in settings


def test_a_rerun_from_the_cache_says_nothing_new_was_spent(runs, tmp_path):
    cost = read(Results, runs["cached"]).cost[TASK]
    assert (
        cost.total.calls == 0 and cost.total.cache_hits == 3 + 3 * 4 * 3
    )  # a call a span, a judge a criterion
    assert cost.total.money == 0.0  # nothing answered: nothing spent, priced or not
    section = cost_section(write_report(runs["cached"], tmp_path / "r").read_text("utf-8"))
    (total,) = [cells for kind, _, _, cells in shown_rows(section) if kind == "total"]
    assert_shown(total, cost.total, "EUR")
    assert total["money"] == ("0.0", "0 EUR")
    note = f"All {cost.total.cache_hits} calls were answered from the run's response cache: "
    assert f'<p class="cost-note" role="note">{escape(note)}nothing new spent.</p>' in section
    assert "No price for" not in section


def test_a_run_without_a_price_table_shows_no_money(runs, tmp_path):
    cost = read(Results, runs["unpriced"]).cost[TASK]
    assert cost.currency is None and cost.unpriced == []
    section = cost_section(write_report(runs["unpriced"], tmp_path / "r").read_text("utf-8"))
    rows = shown_rows(section)
    assert {cells["money"] for *_, cells in rows} == {("", "—")}
    assert_shown(rows[0][3], cost.extraction, None)
    assert "No price table (--prices FILE): no money counted." in section


def test_results_without_a_cost_block(runs, tmp_path):
    """Scored before the block existed: no Cost tab; beside a run that has one, a note."""
    older = open_run(runs["unpriced"])
    older.results = older.results.model_copy(update={"cost": {}})
    page = write_report(older, tmp_path / "alone").read_text(encoding="utf-8")
    assert 'data-view="cost"' not in page and 'id="cost"' not in page
    page = write_report(runs["priced"], tmp_path / "ab", compare=older).read_text("utf-8")
    section = cost_section(page)
    assert '<h3 class="cost-run run-a">Run A: ' in section
    assert section.count('<table class="cost">') == 1
    assert "These results have no cost block" in section


def test_the_cost_tab_in_chromium_at_1280_and_390_px(runs, tmp_path):
    require_browser()
    from playwright.sync_api import sync_playwright

    cost = read(Results, runs["priced"]).cost[TASK]
    url = write_report(runs["priced"], tmp_path / "report").as_uri() + "#cost"
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        for width, height, options in ((1280, 900, {}), (390, 844, {"is_mobile": True})):
            page, _ = chromium.open(url, width, height, **options)
            assert page.locator("#cost").is_visible() and not page.locator("#scores").is_visible()
            assert page.locator('.tabs a[data-view="cost"]').get_attribute("aria-current") == "page"
            table = page.locator("#cost table.cost")
            assert table.locator("tbody tr").count() == 18
            criteria = table.locator("tr.cost-criterion th")
            assert criteria.count() == 12 and all(c.is_visible() for c in criteria.all())
            total = table.locator('tr.cost-total td[data-key="prompt_tokens"]')
            assert total.inner_text() == f"{cost.total.prompt_tokens:,}"
            assert page.locator("#cost .cost-note").first.is_visible()
            assert overflow(page) <= 0  # the table scrolls in its frame, the page does not
            box = page.locator("#cost .scroll").first.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width
        # The tab is reached from the others, and back.
        page.click('.tabs a[data-view="scores"]')
        page.wait_for_selector("#scores.active")
        page.click('.tabs a[data-view="cost"]')
        page.wait_for_selector("#cost.active")
        assert not page.locator("#scores").is_visible()
        chromium.browser.close()
    assert not chromium.errors, chromium.errors


def test_markup_in_the_cost_tab_shows_as_text(tmp_path):
    """The model's name, the judges' names (support.hostile) and, written into the results as
    only a handed-over folder can hold them, a currency and an unpriced model's name: text."""
    require_browser()
    from playwright.sync_api import sync_playwright

    model = payload("model")
    currency = "<b data-pwn></b>"  # at most 16 characters
    run = open_run(hostile_run(tmp_path, model, TASKS[:1]))
    cost = run.results.cost[TASKS[0]]
    extraction = cost.extraction.model_copy(update={"money": 1.5})
    forged = cost.model_copy(
        update={"currency": currency, "unpriced": [model], "extraction": extraction}
    )
    run.results = run.results.model_copy(update={"cost": {TASKS[0]: forged}})
    url = write_report(run, tmp_path / "report").as_uri() + "#cost"
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page, _ = chromium.open(url)
        table = page.locator("#cost table.cost")
        assert table.locator("tr.cost-stage th small").text_content() == model
        judges = table.locator("tr.cost-judge th").all_text_contents()
        assert judges == [f"{judge} scripted" for judge in JUDGE_NAMES.values()]
        hidden = table.locator("tr.cost-criterion th .visually-hidden").first.text_content()
        assert hidden == f"{JUDGE_NAMES['judge-0']}: "
        money = table.locator('tr.cost-stage td[data-key="money"]').text_content()
        assert money == f"1.5 {currency}"
        notes = page.locator("#cost .cost-note").all_text_contents()
        assert f"No price for {model} in the price table: no total money." in notes
        assert injected(page) == []
        chromium.browser.close()
    assert not chromium.errors, chromium.errors
