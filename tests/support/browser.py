"""Headless Chromium for the page tests: Debian's `chromium`, driven by Playwright. Without it a
test is skipped, except where FINREFLECT_FIXTURES=required (CI), where it fails."""

import shutil
import time

from conftest import missing

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
READY = 'body[data-ready="1"]'  # set by a report page when its screen is rendered
# Defined on every page before its scripts run: hostile markup (support.hostile) calls xss(field)
# where it runs, so a leak names the field it came through.
TRAP = "window.leaks = []; window.xss = function (field) { window.leaks.push(String(field)); };"
INJECTED = """() => [
  ...window.leaks.map(field => "ran: " + field),
  ...[...document.querySelectorAll("[data-pwn], [onerror], [onload]")].map(
    node => "element: " + node.outerHTML.slice(0, 120)),
  ...[...document.querySelectorAll("[href], [src], [action]")].filter(node =>
    /^\\s*javascript:/i.test(node.getAttribute("href") || node.getAttribute("src") ||
      node.getAttribute("action") || "")).map(node => "link: " + node.outerHTML.slice(0, 120)),
]"""


def require_browser() -> None:
    problem = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problem = "the playwright package is not installed ([dev] extra)"
    if CHROMIUM is None:
        problem = "chromium is not installed (apt-get install chromium)"
    if problem:
        missing(problem)


class Browser:
    """One Chromium for a test; every page's console errors, page errors and requests that do
    not stay on the disk are collected in `errors`."""

    def __init__(self, playwright) -> None:
        self.browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        self.errors: list[str] = []

    def page(self, width: int = 1280, height: int = 900, **options):
        page = self.browser.new_page(viewport={"width": width, "height": height}, **options)
        page.add_init_script(TRAP)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on(
            "request",
            lambda r: None if r.url.startswith("file://") else self.errors.append(r.url),
        )
        return page

    def open(self, url: str, width: int = 1280, height: int = 900, **options):
        """A new page at `url`, and the seconds from navigation to the span browser's first
        screen (or, on another tab, to the static first screen with the spans' index loaded)."""
        page = self.page(width, height, **options)
        started = time.perf_counter()
        page.goto(url)
        page.wait_for_selector(READY, state="attached", timeout=60_000)
        return page, time.perf_counter() - started


def injected(page) -> list[str]:
    """What hostile markup did to the page: the fields whose payload ran (`xss` calls), the
    elements it made (marked `data-pwn`, or with an onerror/onload handler) and links to
    `javascript:` URLs. Empty when every text was shown as text."""
    page.wait_for_timeout(300)  # an image's onerror would have run by now
    return page.evaluate(INJECTED)


def overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
