"""The `finreflect-eval view` report in headless Chromium (Debian's `chromium`, driven by
Playwright), opened from disk (file://): on a small scripted run (one span's text holds a
hostile `<script>`, one triple's object hostile markup) and, marked slow, on a synthetic judged
run of 480,000 triples. The first screen renders (its time is printed: run with -s), filters
work (a split item shows its three judges' verdicts with their reasoning), the review queue
puts items without a majority first, two runs side by side show the spans whose verdicts
differ, nothing scrolls sideways at 1,280 and 390 px, there are no console errors and no
requests off the disk, and the DOM stays small however many pages are opened.

Without Chromium the tests are skipped, except where FINREFLECT_FIXTURES=required (CI).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from support.browser import READY, Browser, overflow, require_browser
from test_view import HOSTILE_OBJECT, N_SPANS, TASKS, hostile_run

from finreflect_eval.view import write_report

MAX_DOM = 5_000_000  # characters of the page's HTML, however many screens were opened
BIG_TRIPLES = 480_000


def dom_size(page) -> int:
    return page.evaluate("document.documentElement.outerHTML.length")


def rendered(page, action) -> None:
    """Do `action` (a filter, a page button) and wait for the screen it asks for."""
    page.evaluate("document.body.dataset.ready = ''")
    action()
    page.wait_for_selector(READY, state="attached", timeout=60_000)


def choose(page, name: str, value: str) -> None:
    rendered(page, lambda: page.select_option(f'#filters select[name="{name}"]', value))


def first_votes_with_reasoning(page) -> list[tuple[str, str]]:
    """The judges and their reasoning in the first open votes panel on the screen."""
    panel = page.locator("#list .votes").first
    return [
        (vote.locator(".judge").inner_text(), vote.locator(".reasoning").inner_text())
        for vote in panel.locator("li.vote").all()
    ]


@pytest.fixture(scope="module")
def small_reports(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("view-browser")
    a = hostile_run(root)
    b = hostile_run(
        root,
        "acme/kg-70b",
        ("accepts_all", "accepts_all", "gold_labels"),
        name="other-panel",
    )
    return {
        "single": write_report(a, root / "report"),
        "compare": write_report(a, root / "report-ab", compare=b),
    }


def test_the_report_of_a_small_run_in_chromium(small_reports):
    require_browser()
    from playwright.sync_api import sync_playwright

    url = small_reports["single"].as_uri()
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        # The first screen: the scores (static), with the spans' index loaded behind it.
        page, seconds = chromium.open(url)
        print(f"\nsmall run ({N_SPANS} spans × {len(TASKS)} tasks): scores in {seconds:.2f} s")
        assert page.locator("#scores figure.chart svg").count() == len(TASKS)
        assert page.locator("#scores table.agreement").count() == len(TASKS)
        assert "below gate" in page.locator("#scores").inner_text()
        assert overflow(page) <= 0

        # The span browser: every span of the first task, the hostile one shown as text.
        page, seconds = chromium.open(url + "#spans")
        print(f"small run: span browser's first screen in {seconds:.2f} s")
        assert page.locator("#list article.span").count() == N_SPANS
        hostile = page.locator("#list article.span").first
        assert "<script>window.pwned = 1</script>" in hostile.locator(".text").inner_text()
        assert hostile.locator(".ent.obj", has_text=HOSTILE_OBJECT).count() == 1
        assert page.locator("#list script, #list img").count() == 0
        page.wait_for_timeout(300)  # an image's onerror would have run by now
        assert page.evaluate("window.pwned") is None
        assert hostile.locator(".text mark.obj", has_text="iPhone").count() >= 1
        # A verdict opens every judge's vote with its reasoning.
        button = hostile.locator("button.verdict").first
        button.click()
        assert button.get_attribute("aria-expanded") == "true"
        assert len(first_votes_with_reasoning(page)) == 3

        # Filters: a company; split items (each opened: three verdicts with reasoning).
        choose(page, "ticker", "BA")
        metas = page.locator("#list article.span header .meta").all_inner_texts()
        assert metas and all(meta.startswith("BA ·") for meta in metas)
        choose(page, "ticker", "")
        choose(page, "crit", "faithfulness")
        choose(page, "flag", "split")
        assert page.locator("#list article.span").count() == N_SPANS
        votes = first_votes_with_reasoning(page)
        assert [judge for judge, _ in votes] == ["judge-0", "judge-1", "judge-2"]
        assert all(reasoning for _, reasoning in votes)
        assert page.locator("#list li.triple.match").count() >= N_SPANS
        choose(page, "flag", "nomaj")  # no faithfulness item lacks a majority
        assert page.locator("#list article.span").count() == 0
        assert "No span matches" in page.locator("#status").inner_text()
        choose(page, "crit", "")
        assert page.locator("#list article.span").count() == 1  # the hostile span's C

        # The review queue: the item without a majority first, shown with its votes.
        rendered(page, lambda: page.click('.tabs a[data-view="review"]'))
        first = page.locator("#list article.span").first
        assert first.locator(".mark.nomaj").count() >= 1
        assert first.locator(".votes li.vote").count() >= 3
        page.click('.tabs a[data-view="settings"]')
        assert "bootstrap_iters" in page.locator("#settings").inner_text()

        # Nothing scrolls sideways, on a phone either, with votes open.
        assert overflow(page) <= 0
        for view in ("#scores", "#spans?flag=split", "#review", "#graph", "#settings"):
            phone, _ = chromium.open(url + view, 390, 844, is_mobile=True)
            if view == "#graph":
                phone.wait_for_selector("figure.kg[data-drawn]")
            assert overflow(phone) <= 0, view
        chromium.browser.close()
    assert not chromium.errors, chromium.errors


def test_two_runs_side_by_side_in_chromium(small_reports):
    require_browser()
    from playwright.sync_api import sync_playwright

    url = small_reports["compare"].as_uri()
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page, _ = chromium.open(url)
        assert "B − A" in page.locator("#scores").inner_text()
        page, _ = chromium.open(url + "#spans")
        # By default, the spans whose verdicts differ, each with both runs' triples.
        assert page.locator('#filters select[name="flag"]').input_value() == "differ"
        cards = page.locator("#list article.span")
        assert cards.count() >= 1
        for card in cards.all():
            assert card.locator(".flag.differs").count() == 1
            assert card.locator(".part.run-a").count() == card.locator(".part.run-b").count() == 1
        assert page.locator("#list .mark.differs").count() >= 1
        assert overflow(page) <= 0
        phone, _ = chromium.open(url + "#spans", 390, 844, is_mobile=True)
        assert overflow(phone) <= 0
        chromium.browser.close()
    assert not chromium.errors, chromium.errors


# --- a run at the benchmark's size ---


@pytest.fixture(scope="session")
def big_report(tmp_path_factory) -> Path:
    """The report of a synthetic judged and scored run of 480,000 triples (3 modes, 3 judges,
    40 triples a span; benchmarks/pipeline.py), built once (minutes)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from pipeline import synthetic_run

    from finreflect_eval.pipeline import evaluator
    from finreflect_eval.runs.store import load_run

    root = tmp_path_factory.mktemp("view-480k")
    started = time.perf_counter()
    run = synthetic_run(root, BIG_TRIPLES)
    evaluator.score(load_run(run, for_scoring=True))
    built = time.perf_counter() - started
    started = time.perf_counter()
    index = write_report(run, root / "report")
    seconds = time.perf_counter() - started
    files = [path for path in index.parent.rglob("*") if path.is_file()]
    pages = [path for path in files if path.parent.parent.name == "data" and path.stem.isdigit()]
    total = sum(path.stat().st_size for path in files)
    print(
        f"\n480k-triple run built and scored in {built:.0f} s; report written in {seconds:.1f} s: "
        f"{total / 1e6:.1f} MB in {len(files)} files ({len(pages)} pages of spans, the largest "
        f"{max(p.stat().st_size for p in pages) / 1e6:.2f} MB; index.html "
        f"{index.stat().st_size / 1e3:.0f} kB)"
    )
    return index


@pytest.mark.slow
def test_the_report_of_a_480k_triple_run_opens_fast_and_stays_small(big_report):
    require_browser()
    from playwright.sync_api import sync_playwright

    url = big_report.as_uri()
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        _, scores = chromium.open(url)
        page, spans = chromium.open(url + "#spans")
        print(
            f"480k-triple run: first screen (scores, index loaded) in {scores:.2f} s; the span "
            f"browser's first screen in {spans:.2f} s"
        )
        assert scores < 10 and spans < 10  # measured here: well under 3 s (see the log)
        assert page.locator("#list article.span").count() == 20
        assert "of 4,000 matching" in page.locator("#status").inner_text()

        # A split item: its three verdicts with reasoning.
        choose(page, "flag", "split")
        votes = first_votes_with_reasoning(page)
        assert len(votes) == 3 and all(reasoning for _, reasoning in votes)
        # Many screens later the DOM holds one screen of spans.
        sizes = [dom_size(page)]
        for _ in range(5):
            rendered(page, lambda: page.click('.pager button[data-go="next"]'))
            sizes.append(dom_size(page))
        rendered(page, lambda: page.click('.pager button[data-go="last"]'))
        sizes.append(dom_size(page))
        choose(page, "task", "finreflect_smoke_reflection")
        sizes.append(dom_size(page))
        print(
            f"480k-triple run: page HTML after each screen: {[f'{s / 1e6:.2f} MB' for s in sizes]}"
        )
        assert max(sizes) < MAX_DOM
        assert page.locator("#list article.span").count() == 20

        rendered(page, lambda: page.click('.tabs a[data-view="review"]'))
        assert page.locator("#list article.span").first.locator(".votes").count() >= 1
        assert dom_size(page) < MAX_DOM
        assert overflow(page) <= 0

        # The Graph tab: a filing of 1,601 entities (a subject and 1,600 objects) drawn by its
        # 40 best connected, and said so.
        page, _ = chromium.open(url + "#graph")
        page.wait_for_selector("figure.kg[data-drawn]")
        figure = page.locator("figure.kg").first
        assert figure.locator(".kg-canvas g.kg-entity").count() == 40
        assert "Showing the 40 entities of highest degree" in figure.inner_text()
        assert dom_size(page) < MAX_DOM
        for view in ("#scores", "#spans", "#review", "#graph"):
            phone, _ = chromium.open(url + view, 390, 844, is_mobile=True)
            assert overflow(phone) <= 0, view
        chromium.browser.close()
    assert not chromium.errors, chromium.errors
