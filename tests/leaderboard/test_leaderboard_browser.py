"""The leaderboard page in headless Chromium (Debian's `chromium`, driven by Playwright): it
loads from file:// without console errors or network requests; official entries are ranked and
community and smoke entries are shown apart; the ranking's first rows are on a 1,400 × 1,000 first
screen, with how it is scored one click away; headers sort (details move with their entry); the
page does not scroll sideways at 1,280 and 390 px; every number on it equals leaderboard.json;
and it is saved as a screenshot. Markup in what a submitter writes that no rule restricts to a
plain name (the judges' names; their reasoning, in an entry's report) is shown as text, never run.

Without Chromium the test is skipped, except where FINREFLECT_FIXTURES=required (CI).
FINREFLECT_SCREENSHOT names where the screenshot goes.
"""

import json
import os
import time
from pathlib import Path

import pytest
from support.browser import CHROMIUM, require_browser
from support.chat_server import judge_answer
from support.official import PAPER, hub_folder, register
from support.runs import TRIPLES, audit_with, panel_file, scripted_run

from finreflect_eval.leaderboard import build, check, submit
from finreflect_eval.leaderboard.rows import standing
from finreflect_eval.pipeline.audit import write_audit
from finreflect_eval.pipeline.judging import load_panel

ONE_TRIPLE = {"triples": TRIPLES["triples"][:1]}


def official_panel(servers):
    """The official `paper` panel with each judge at one of the scripted servers."""
    urls = {name: server.url for name, server in zip(PAPER, servers, strict=True)}
    return load_panel("paper").at_endpoints(urls)


def filled_board(root: Path) -> Path:
    """Three official entries (a lenient panel's, and two identical ones of a strict panel under
    different names: tied), a community entry whose judges disagree (accept, reject, reject:
    α below the gate), a smoke entry and a judge audit."""
    import contextlib

    from support.chat_server import Reply, ScriptedServer

    board = root / "board"
    dataset = hub_folder(root)
    register(board, dataset, pin=True)  # ranked on the pinned version only
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
            ("e", "acme/kg-7b-twin", strict, TRIPLES),
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
            [...row.querySelectorAll("[data-key]"),
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


def shown(value: float | None, digits: int = 1, sign: str = "", missing: str = "—") -> str:
    return missing if value is None else f"{value:{sign}.{digits}f}"


def missing_of(key: str) -> str:
    """An undefined α reads n/a (the ordinal α, absent for two labels, a dash)."""
    return "n/a" if "alpha" in key and "ordinal" not in key else "—"


def digits_of(key: str) -> int:
    return 0 if key in ("rank", "graph_contradictions") else 2 if "alpha" in key else 1


SHARES = ("graph_fragmented_share", "graph_grounded_share")  # 0-1, shown as a percentage


def written_as(key: str, value: float | None) -> str:
    """How the page writes a row's value."""
    if key in SHARES:
        return "—" if value is None else f"{100 * value:.1f}%"
    sign = "+" if key == "next_difference" else ""
    return shown(value, digits_of(key), sign, missing_of(key))


@pytest.mark.slow
def test_the_page_ranks_splits_sorts_fits_and_shows_the_json_numbers(tmp_path):
    require_browser()
    from playwright.sync_api import sync_playwright

    board = filled_board(tmp_path)
    started = time.perf_counter()
    build(board)  # the page, and a report per entry
    print(
        f"\nleaderboard build of {len(list(board.glob('reports/*/*')))} entries with their "
        f"reports: {time.perf_counter() - started:.2f} s"
    )
    assert check(board) == []
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
        assert [rows[run]["section"] for run in official] == ["official"] * 3
        assert sorted(rows[run]["section"] for run in others) == ["community", "smoke"]
        ranks = [cells["rank"][0] for cells in official.values()]
        overall = [cells["overall"][0] for cells in official.values()]
        assert ranks == [1, 2, 3] and overall == sorted(overall, reverse=True)
        assert page.locator("#board-community .badge.smoke").count() == 1
        assert "acme/tiny-smoke" in page.locator("#board-community").inner_text()

        # The first screen of a laptop shows the ranking; how it is scored is one click away.
        screen = browser.new_page(viewport={"width": 1400, "height": 1000})
        screen.goto((board / "index.html").as_uri())
        first_row = screen.locator("#board-official tr.entry").first.bounding_box()
        assert first_row["y"] + first_row["height"] <= 1000, first_row
        screen.locator('header a[href="#about"]').click()
        about = screen.locator("#about")
        assert "Range and ties" in about.inner_text() and about.is_visible()
        assert (
            screen.evaluate("document.getElementById('about').getBoundingClientRect().top") < 1000
        )

        # Every number on the page is the one in leaderboard.json.
        checked = 0
        for run, cells in {**official, **others}.items():
            for key, (value, text) in cells.items():
                expected = rows[run][key]
                assert value == expected, (run, key)
                text = text.removeprefix("⚠ ")  # an α below the gate
                assert text.startswith(written_as(key, expected)), (run, key, text)
                checked += 1
        # per entry: overall, Δ next, 3 modes, 4 α (main row), 12 scores, 15 α (detail), 2 more,
        # and the graph's fragmentation, contradictions and grounding
        assert checked >= 5 * (1 + 1 + 3 + 4 + 12 + 15 + 2 + 3)

        # Rank ranges and ties: the lenient entry is surely first; the strict twins share
        # places 2 and 3 and each is marked tied with the other.
        by_model = {row["model"]: row for row in rows.values() if row["section"] == "official"}
        assert by_model["acme/kg-70b"]["rank_range"] == [1, 1]
        assert by_model["acme/kg-7b"]["rank_range"] == by_model["acme/kg-7b-twin"]["rank_range"]
        assert by_model["acme/kg-7b"]["rank_range"] == [2, 3]
        assert standing(by_model["acme/kg-70b"]) == (  # what `submit` says of it
            "the official section, ranked 1 of 3 on the pinned data version"
        )
        ranges = page.eval_on_selector_all(
            "#board-official tr.entry td.range", "cells => cells.map(c => c.textContent.trim())"
        )
        assert ranges == ["1", "2–3", "2–3"]
        ties = page.locator("#board-official tr.entry .tie")
        assert ties.count() == 2 and all(tie.is_visible() for tie in ties.all())
        assert ties.first.inner_text() == "≈ tied with acme/kg-7b-twin"
        assert "+87.5" in page.locator("#board-official tr.entry").first.inner_text()
        stability = page.locator("section:has(#board-official) .notes .stability").inner_text()
        assert "Ranking stability, panel paper" in stability

        # α with its interval, and the agreement gate on the community entry.
        community = next(run for run in others if rows[run]["section"] == "community")
        row = page.locator(f'#board-community tr.entry[data-run="{community}"]')
        gate = row.locator(".gate")
        assert gate.is_visible()
        assert (
            "α under 0.667 on faithfulness, precision, relevance, comprehensiveness "
            "(every mode): shown, not ranked apart" in gate.inner_text()
        )
        alpha, (low, high) = (
            rows[community]["single_pass.alpha_F"],
            rows[community]["single_pass.alpha_F_ci"],
        )
        assert alpha < 0 and high < 0.667
        row.locator("button.toggle").click()
        detail = page.locator(f"#{row.locator('button.toggle').get_attribute('aria-controls')}")
        cell = detail.locator('[data-key="single_pass.alpha_F"]')
        assert cell.inner_text().replace(" ", "") == f"⚠{alpha:.2f}[{low:.2f},{high:.2f}]"
        row.locator("button.toggle").click()
        assert "upper end is under 0.667" in page.locator("#about").inner_text()

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
        assert pairs == ["entry", "detail"] * 3

        # Details on demand, and no sideways scrolling with them open.
        first = page.locator("#board-official button.toggle").first
        first.click()
        assert first.get_attribute("aria-expanded") == "true"
        assert page.locator("#board-official tr.detail:not([hidden])").count() == 1
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        wider = page.eval_on_selector_all(  # nor do the boards scroll inside their frames
            ".board", "ts => ts.map(t => t.parentElement.scrollWidth - t.parentElement.clientWidth)"
        )
        assert wider == [0, 0], wider
        page.screenshot(path=str(screenshot), full_page=True)

        # An entry's row opens its report, from disk: its first screen shows that model.
        entry = page.locator("#board-official tr.entry").first
        run, model = entry.get_attribute("data-run"), rows[entry.get_attribute("data-run")]["model"]
        report_page = entry.locator("a.report")
        assert report_page.get_attribute("href") == rows[run]["report"]
        report_page.click()
        page.wait_for_selector('body[data-ready="1"]', state="attached", timeout=60_000)
        assert page.url == (board / rows[run]["report"]).as_uri()
        assert page.locator("h1").inner_text() == model
        assert page.locator("#scores figure.chart svg").count() >= 1
        assert page.locator("#scores").is_visible()
        page.go_back()
        page.wait_for_selector("#board-official")

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


def hostile_board(root: Path) -> Path:
    """Two smoke entries judged by one panel (so the page names its judges in a ranking
    stability note) and a judge audit of that panel, whose judges' names and reasoning are
    markup (support/hostile.py): the names as a submitter may write them into the files."""
    from support.hostile import JUDGE_NAMES, hostile_panel, rename

    from finreflect_eval.data import load_benchmark
    from finreflect_eval.pipeline.audit import run_audit
    from finreflect_eval.tasks.config import TaskIndex

    board = root / "board"
    panel = hostile_panel(root / "panel")
    for name in ("a", "b"):
        results = scripted_run(root / name, f"acme/kg-{name}", None, panel)
        rename(results.parent, JUDGE_NAMES)
        submit(results, board)
    task = TaskIndex().tasks["finreflect_single_pass"]
    audit = run_audit(load_panel(panel), task, load_benchmark("sample", limit=2), limit=2)
    path = write_audit(audit, root / "audit")
    rename(path.parent, JUDGE_NAMES)
    submit(path, board)
    return board


def test_markup_in_judge_names_and_reasoning_shows_as_text(tmp_path):
    """What a submitter writes that the page shows and no rule restricts to a plain name (model
    and panel names are: `verify`): the judges' names, on the board (a ranking stability note,
    the judge audits) and in an entry's report with every judge's reasoning. Nothing of it runs
    and each reads as its text."""
    require_browser()
    from playwright.sync_api import sync_playwright
    from support.browser import READY, Browser, injected
    from support.hostile import JUDGE_NAMES, payload

    judges = list(JUDGE_NAMES.values())
    board = hostile_board(tmp_path)
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page = chromium.page()
        page.goto((board / "index.html").as_uri())
        note = page.locator(".notes .stability").first.text_content()
        assert "Ranking stability, panel hostile-panel" in note
        assert all(f" {judge} " in note for judge in judges), note
        taus = page.locator(".notes .tau")
        assert [tau.get_attribute("data-judge") for tau in taus.all()] == judges
        audit = page.locator("#judges tbody th").all_text_contents()
        assert all(judge in audit for judge in judges), audit
        assert injected(page) == []

        # An entry's report: the judges by name, and each one's reasoning.
        report = page.locator("#board-community tr.entry a.report").first.get_attribute("href")
        page, _ = chromium.open((board / report).as_uri() + "#spans?crit=faithfulness")
        assert all(judge in page.locator("header .runs").text_content() for judge in judges)
        page.locator("#list button.verdict").first.click()
        votes = page.locator("#list .votes").first
        assert votes.locator(".judge").all_text_contents() == judges
        assert votes.locator(".reasoning").all_text_contents() == [payload("reasoning")] * 3
        assert injected(page) == [] and page.locator(READY).count() == 1
        chromium.browser.close()
    assert not chromium.errors, chromium.errors
