"""The leaderboard page in headless Chromium (Debian's `chromium`, driven by Playwright): it
loads from file:// without console errors, shows one row per submission, re-sorts on a header
click, fits a phone, and is saved as a screenshot.

Without Chromium the test is skipped, except where FINREFLECT_FIXTURES=required (CI).
FINREFLECT_LEADERBOARD_RUNS (results files or run folders, separated by ':') builds the page from
those runs instead of scripted ones; FINREFLECT_SCREENSHOT names where the screenshot goes.
"""

import os
import shutil
from pathlib import Path

import pytest
from conftest import missing
from support.runs import audit_with, panel_file, scripted_run

from finreflect_eval.audit import write_audit
from finreflect_eval.leaderboard import submit

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _require_browser():
    problem = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problem = "the playwright package is not installed ([dev] extra)"
    if CHROMIUM is None:
        problem = "chromium is not installed (apt-get install chromium)"
    if problem:
        missing(problem)


def scripted_runs(root: Path) -> list[Path]:
    """Three runs whose scores differ: panels that mostly accept, mostly reject, or fail."""
    runs = []
    panels = [
        (1, ("accepts_all", "accepts_all", "rejects_all")),
        (2, ("rejects_all", "rejects_all", "accepts_all")),
        (3, ("accepts_all", "broken", "broken")),
    ]
    for limit, judges in panels:
        folder = root / f"run{limit}"
        folder.mkdir()
        runs.append(scripted_run(folder, "acme/kg-7b", limit, panel_file(folder, *judges)))
    return runs


@pytest.mark.slow
def test_page_loads_sorts_and_fits_a_phone(tmp_path):
    _require_browser()
    from playwright.sync_api import sync_playwright

    given = os.environ.get("FINREFLECT_LEADERBOARD_RUNS")
    runs = [Path(p) for p in given.split(":")] if given else scripted_runs(tmp_path)
    board = tmp_path / "board"
    for results in runs:
        submit(results, board)
    audit = audit_with(tmp_path, "accepts_all", limit=2)  # fills the Judges view
    submit(write_audit(audit, tmp_path / "audit"), board)
    screenshot = Path(os.environ.get("FINREFLECT_SCREENSHOT", tmp_path / "leaderboard.png"))

    errors = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "request",
            lambda r: None if r.url.startswith("file://") else errors.append(f"network: {r.url}"),
        )
        page.goto((board / "index.html").as_uri())
        assert page.locator("#board tbody tr").count() == len(runs)

        def column(key):
            return page.eval_on_selector_all(
                f'#board tbody td[data-key="{key}"]',
                "cells => cells.map(c => c.dataset.value === '' ? null : Number(c.dataset.value))",
            )

        def ordered(values, descending):
            present = [v if v is not None else float("-inf") for v in values]
            return present == sorted(present, reverse=descending)

        key = "overall"
        before = column(key)
        page.click(f'#board button[data-key="{key}"]')
        assert ordered(column(key), descending=True)
        header = page.locator(f'#board th:has(button[data-key="{key}"])')
        assert header.get_attribute("aria-sort") == "descending"
        page.click(f'#board button[data-key="{key}"]')
        after = column(key)
        assert ordered(after, descending=False)
        assert header.get_attribute("aria-sort") == "ascending"
        if len(set(before)) > 1:
            assert after != before  # the rows really moved
        judges = page.locator("#judges tbody tr")
        assert judges.count() == 2  # the judge and the panel majority
        page.click('#judges button[data-key="accuracy.F"]')
        assert (
            page.locator('#judges th:has(button[data-key="accuracy.F"])').get_attribute("aria-sort")
            == "descending"
        )
        page.evaluate("document.querySelector('.table-wrap').scrollLeft = 0")
        page.screenshot(path=str(screenshot), full_page=True)

        phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
        phone.goto((board / "index.html").as_uri())
        overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1  # the table scrolls inside its box; the page itself does not
        browser.close()
    assert not errors, errors
    assert screenshot.stat().st_size > 10_000
