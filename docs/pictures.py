"""The report picture of the README and of the docs' front page, taken from the real viewer.

    python docs/pictures.py results/gemma-3-270m     # the run folder of the README's quickstart

renders the run with `finreflect-eval view`, opens the report in Chromium (playwright, driving
Debian's `chromium`, or the one `$CHROMIUM` names) and writes `docs/assets/report.png`: its first
screen, 1400 × 900 px (a width the scores table fits). The picture keeps the report's tab names
in its PNG text (`Tabs`):
tests/test_quickstart.py compares them with the tabs of its own run's report, so a report that
gains or loses a tab fails the tests until the picture is taken again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import zlib
from pathlib import Path

PICTURE = Path(__file__).resolve().parent / "assets" / "report.png"
SIZE = {"width": 1400, "height": 900}
TABS_KEY = "Tabs"
_PNG = b"\x89PNG\r\n\x1a\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run folder to picture")
    parser.add_argument("--output", type=Path, default=PICTURE, help=f"default: {PICTURE}")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        report = render(args.run, Path(scratch) / "report")
        picture, tabs = screenshot(report)
    args.output.write_bytes(with_text(picture, TABS_KEY, ", ".join(tabs)))
    print(f"{args.output}: the first screen of {args.run}'s report; tabs: {', '.join(tabs)}")


def render(run: Path, folder: Path) -> Path:
    """The run's report, as `finreflect-eval view` writes it; its page."""
    from finreflect_eval.cli import main as cli

    if cli(["view", str(run), "--output", str(folder)]) != 0:
        raise SystemExit(f"pictures: finreflect-eval view {run} failed (above)")
    return folder / "index.html"


def screenshot(report: Path) -> tuple[bytes, list[str]]:
    """The report's first screen as PNG bytes, and its tabs' names."""
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=SIZE)
            page.goto(report.as_uri())
            page.wait_for_selector('body[data-ready="1"]', state="attached", timeout=60_000)
            return page.screenshot(), tab_names(page)
        finally:
            browser.close()


def tab_names(page) -> list[str]:
    """The report's tabs, in order, as a reader sees them."""
    return [name.strip() for name in page.locator("nav.tabs a").all_inner_texts()]


def with_text(png: bytes, key: str, value: str) -> bytes:
    """`png` with a text chunk (`tEXt`, Latin-1) after its header chunk."""
    chunk = key.encode("latin-1") + b"\0" + value.encode("latin-1")
    crc = zlib.crc32(b"tEXt" + chunk)
    text = struct.pack(">I", len(chunk)) + b"tEXt" + chunk + struct.pack(">I", crc)
    header_end = len(_PNG) + 8 + 13 + 4  # the signature, then IHDR: length, type, data, CRC
    return png[:header_end] + text + png[header_end:]


def text_of(png: bytes, key: str) -> str | None:
    """The value of the PNG's text chunk `key`, or None."""
    if not png.startswith(_PNG):
        return None
    at = len(_PNG)
    while at + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[at : at + 8])
        data = png[at + 8 : at + 8 + length]
        if kind == b"tEXt" and data.split(b"\0", 1)[0] == key.encode("latin-1"):
            return data.split(b"\0", 1)[1].decode("latin-1")
        at += 12 + length
    return None


if __name__ == "__main__":
    sys.exit(main())
