"""The leaderboard page in headless Chromium (Debian's `chromium`, driven by Playwright): it
loads from file:// without console errors or network requests; official entries are ranked and
community and smoke entries are shown apart; headers sort (details move with their entry); the
page does not scroll sideways at 1,280 and 390 px; every number on it equals leaderboard.json;
and it is saved as a screenshot.

Without Chromium the test is skipped, except where FINREFLECT_FIXTURES=required (CI).
FINREFLECT_SCREENSHOT names where the screenshot goes.
"""

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import missing
from support.chat_server import judge_answer
from support.official import PAPER, hub_folder, register
from support.runs import TRIPLES, audit_with, panel_file, scripted_run

from finreflect_eval.audit import write_audit
from finreflect_eval.judging import load_panel
from finreflect_eval.leaderboard import submit

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ONE_TRIPLE = {"triples": TRIPLES["triples"][:1]}


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


def official_panel(servers):
    """The official `paper` panel with each judge at one of the scripted servers."""
    urls = {name: server.url for name, server in zip(PAPER, servers, strict=True)}
    return load_panel("paper").at_endpoints(urls)


def filled_board(root: Path) -> Path:
    """Two official entries (different scores), a community and a smoke entry, a judge audit."""
    import contextlib

    from support.chat_server import Reply, ScriptedServer

    board = root / "board"
    dataset = hub_folder(root)
    register(board, dataset)
    with contextlib.ExitStack() as stack:
        strict = [
            stack.enter_context(
                ScriptedServer.running([Reply(body=lambda b: judge_answer(b, 0, "partial"))])
            )
            for _ in PAPER
        ]
        lenient = [
            stack.enter_context(ScriptedServer.running([Reply(body=judge_answer)])) for _ in PAPER
        ]
        official = []
        for name, model, servers, answer in [
            ("a", "acme/kg-7b", strict, TRIPLES),
            ("b", "acme/kg-70b", lenient, ONE_TRIPLE),
        ]:
            panel = official_panel(servers)
            tasks = ("finreflect",)
            official.append(
                scripted_run(root / name, model, None, panel, tasks, str(dataset), answer)
            )
    panel = panel_file(root, "accepts_all", "rejects_all", "rejects_all")
    community = scripted_run(root / "c", "acme/kg-7b", None, panel, ("finreflect",), str(dataset))
    smoke = scripted_run(root / "d", "acme/tiny-smoke", None, panel)
    for results in [*official, community, smoke]:
        submit(results, board)
    submit(write_audit(audit_with(root, "accepts_all", limit=2), root / "audit"), board)
    return board


def page_numbers(page, table: str) -> dict[str, dict[str, tuple[float | None, str]]]:
    """Per entry (its run id): every number cell of its row and of its detail row, as
    (data-value, text)."""
    return page.evaluate(
        """table => {
          const out = {};
          document.querySelectorAll(`#${table} tr.entry`).forEach(row => {
            const cells = {};
            const detail = document.getElementById(
              row.querySelector("button.toggle").getAttribute("aria-controls"));
            [...row.querySelectorAll(":scope > [data-key]"),
             ...detail.querySelectorAll("[data-key]")].forEach(cell => {
              const value = cell.dataset.value === "" ? null : Number(cell.dataset.value);
              cells[cell.dataset.key] = [value, cell.textContent.trim()];
            });
            out[row.dataset.run] = cells;
          });
          return out;
        }""",
        table,
    )


def shown(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


@pytest.mark.slow
def test_the_page_ranks_splits_sorts_fits_and_shows_the_json_numbers(tmp_path):
    _require_browser()
    from playwright.sync_api import sync_playwright

    board = filled_board(tmp_path)
    rows = {row["run_id"]: row for row in json.loads((board / "leaderboard.json").read_text())}
    screenshot = Path(os.environ.get("FINREFLECT_SCREENSHOT", tmp_path / "leaderboard.png"))
    errors = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "request",
            lambda r: None if r.url.startswith("file://") else errors.append(f"network: {r.url}"),
        )
        page.goto((board / "index.html").as_uri())

        # Sections: the official entries ranked, the others apart with their badges.
        official = page_numbers(page, "board-official")
        others = page_numbers(page, "board-community")
        assert [rows[run]["section"] for run in official] == ["official", "official"]
        assert sorted(rows[run]["section"] for run in others) == ["community", "smoke"]
        ranks = [cells["rank"][0] for cells in official.values()]
        overall = [cells["overall"][0] for cells in official.values()]
        assert ranks == [1, 2] and overall == sorted(overall, reverse=True)
        assert page.locator("#board-community .badge.smoke").count() == 1
        assert "acme/tiny-smoke" in page.locator("#board-community").inner_text()

        # Every number on the page is the one in leaderboard.json.
        checked = 0
        for run, cells in {**official, **others}.items():
            for key, (value, text) in cells.items():
                expected = rows[run][key]
                assert value == expected, (run, key)
                digits = 2 if key == "alpha" else 0 if key == "rank" else 1
                assert text.startswith(shown(expected, digits)), (run, key, text)
                checked += 1
        assert checked >= 4 * (1 + 3 + 1 + 12 + 2)

        # Sorting moves an entry and its detail row together.
        header = page.locator('#board-official th:has(button[data-key="overall"])')
        for direction in ("descending", "ascending"):
            page.click('#board-official button[data-key="overall"]')
            assert header.get_attribute("aria-sort") == direction
            order = [c["overall"][0] for c in page_numbers(page, "board-official").values()]
            assert order == sorted(order, reverse=direction == "descending")
        pairs = page.eval_on_selector_all(
            "#board-official > tbody > tr",
            "rows => rows.map(r => r.classList.contains('entry') ? 'entry' : 'detail')",
        )
        assert pairs == ["entry", "detail", "entry", "detail"]

        # Details on demand, and no sideways scrolling with them open.
        first = page.locator("#board-official button.toggle").first
        first.click()
        assert first.get_attribute("aria-expanded") == "true"
        assert page.locator("#board-official tr.detail:not([hidden])").count() == 1
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        page.screenshot(path=str(screenshot), full_page=True)

        phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
        phone.goto((board / "index.html").as_uri())
        for toggle in phone.locator("button.toggle").all():
            toggle.click()
        overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0
        judges = page.locator("#judges tbody tr")
        assert judges.count() == 2  # the judge and the panel majority
        browser.close()
    assert not errors, errors
    assert screenshot.stat().st_size > 10_000
