"""The report's tabs and tables in headless Chromium (as test_view_browser.py): opened at a
tab's anchor (`#graph`, `#cost`, `#scores`) the tab is chosen and the tab bar stays in view, and
at 1,400 px the scores tables of a panel with long judge names fit without scrolling sideways.

Without Chromium the tests are skipped, except where FINREFLECT_FIXTURES=required (CI).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.browser import Browser, overflow, require_browser
from support.runs import scripted_run
from test_view import TASKS

from finreflect_eval.view import write_report

JUDGES = ("qwen2.5-72b-instruct-awq-judge", "llama-3.3-70b-instruct-fp8-judge", "gemma-3-27b-it")
RESPONDERS = ("accepts_all", "rejects_all", "gold_labels")
WIDTH = 1400
# Per table of the scores tab: how far its content reaches past its box (0: it fits).
SIDEWAYS = """() => [...document.querySelectorAll("#scores table")].map(table =>
  [table.className, table.parentElement.scrollWidth - table.parentElement.clientWidth])"""
TAB_BAR = """() => { const box = document.querySelector("nav.tabs").getBoundingClientRect();
  return [box.top, box.bottom, window.innerHeight, window.scrollY]; }"""


@pytest.fixture(scope="module")
def wide_report(tmp_path_factory) -> Path:
    """A report of two tasks on the sample's first 6 spans, judged by three judges with long
    names (a column each, and one each without it)."""
    root = tmp_path_factory.mktemp("view-tabs")
    judges = [
        {
            "name": name,
            "model": "scripted",
            "backend": "scripted",
            "model_args": {"responses": f"support.scripted_judges:{responder}", "batch_size": 8},
        }
        for name, responder in zip(JUDGES, RESPONDERS, strict=True)
    ]
    panel = root / "panel.yaml"
    panel.write_text(yaml.safe_dump({"panel": "long-names", "judges": judges}))
    results = scripted_run(root / "run", "acme/kg-7b", 6, panel, TASKS)
    return write_report(results.parent, root / "report")


def test_a_tabs_anchor_chooses_the_tab_and_keeps_the_tab_bar_in_view(wide_report):
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        for view in ("graph", "cost", "scores"):
            page, _ = chromium.open(f"{wide_report.as_uri()}#{view}", WIDTH, 700)
            if view == "graph":
                page.wait_for_selector("figure.kg[data-drawn]")
            page.wait_for_timeout(200)  # the browser's scroll to the anchor is done
            chosen = page.locator(f'.tabs a[data-view="{view}"]').get_attribute("aria-current")
            assert chosen == "page", view
            assert page.locator(f"section#{view}").is_visible(), view
            top, bottom, height, scrolled = page.evaluate(TAB_BAR)
            assert top >= 0 and bottom <= height, (view, top, bottom, scrolled)
        chromium.browser.close()
    assert not chromium.errors, chromium.errors


def test_the_scores_tables_fit_1400_px_with_long_judge_names(wide_report):
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page, _ = chromium.open(wide_report.as_uri() + "#scores", WIDTH, 900)
        tables = page.evaluate(SIDEWAYS)
        assert [name for name, _ in tables].count("scores") == len(TASKS)
        assert all(
            JUDGES[0] in head for head in page.locator("table.scores thead").all_inner_texts()
        )
        assert [(name, width) for name, width in tables if width > 0] == []
        assert overflow(page) <= 0
        chromium.browser.close()
    assert not chromium.errors, chromium.errors
