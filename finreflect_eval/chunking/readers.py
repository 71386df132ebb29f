"""Reading a 10-K filing (EDGAR HTML, markdown or plain text) into blocks, and the
format-independent clean-up of a reader's blocks."""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.chunking.blocks import (
    Block,
    clean,
    cycle_collection_paused,
    is_page_number,
    is_part_heading,
    is_toc_header,
    parse_item,
)
from finreflect_eval.chunking.html import read_html

logger = logging.getLogger(__name__)


@cycle_collection_paused()
def read_filing(path: str | Path) -> list[Block]:
    """Reads a 10-K filing into blocks, detecting its format.

    `.htm`/`.html` files (or content that starts with a tag and contains `<html`, `<body`,
    `<div` or `<p`) are EDGAR HTML, `.md`/`.markdown` files are markdown, anything else is
    plain text with one paragraph per non-empty line. In every format, "Table of Contents"
    running headers, page numbers and repeated page headers are dropped, consecutive page
    breaks are merged, and a paragraph cut in two by a page break is joined again.
    """
    path = Path(path)
    content = read_text(path)
    suffix = path.suffix.lower()
    if suffix in {".htm", ".html", ".xhtml"}:
        blocks = read_html(content)
    elif suffix in {".md", ".markdown"}:
        blocks = _read_markdown(content)
    elif content.lstrip().startswith("<") and re.search(r"<(?:html|body|div|p)\b", content, re.I):
        blocks = read_html(content)
    else:
        blocks = _read_text(content)
    return _finish(blocks)


MAX_INVALID_SHARE = 0.01  # of characters not UTF-8: a stray byte is replaced, a binary refused


def read_text(path: Path) -> str:
    """A filing's text (UTF-8; a byte-order mark dropped, a stray invalid byte replaced). A
    binary file is a one-line error, not a filing of replacement characters."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FinReflectError(f"cannot read filing {path}: {exc.strerror}") from exc
    nul = data.find(b"\0")
    if nul >= 0:
        raise FinReflectError(f"{path} is not a text filing (binary data at byte {nul})")
    # utf-8-sig is utf-8 that also drops a byte-order mark.
    content = data.decode("utf-8-sig", errors="replace")
    if content.count("\ufffd") > MAX_INVALID_SHARE * len(content):
        raise FinReflectError(f"{path} is not UTF-8 text (too many invalid bytes)")
    return content


def _is_xbrl_residue(line: str) -> bool:
    # Text converted from inline XBRL starts with the hidden header's values: a document name
    # like "amzn-20241231", then one huge line of flags, dates and taxonomy URLs.
    return (
        "http://fasb.org" in line
        or "xbrli:" in line
        or "iso4217:" in line
        or re.fullmatch(r"[a-z]{1,6}-\d{8}", line) is not None
        or (" " not in line and len(line) > 40)
    )


def _read_text(content: str) -> list[Block]:
    lines = [line for line in map(clean, content.splitlines()) if line]
    start = 0
    while start < len(lines) and _is_xbrl_residue(lines[start]):
        start += 1
    blocks: list[Block] = []
    i = start
    while i < len(lines):
        line = lines[i]
        if is_page_number(line) and i + 1 < len(lines) and is_toc_header(lines[i + 1]):
            # A page ends with its number; the next starts with a "Table of Contents" link.
            blocks.append(Block("page_break"))
            i += 2
            continue
        blocks.append(Block("text", line))
        i += 1
    return blocks


_MD_HEADING_RE = re.compile(r"^#{1,6}\s+(.*)$")
_MD_RULE_RE = re.compile(r"^(?:-{3,}|\*{3,}|_{3,}|={3,})$")


def _md_heading(line: str) -> str | None:
    """The text of an ATX heading line ("## Item 7. MD&A ##"), else None."""
    match = _MD_HEADING_RE.match(line)
    if match is None:
        return None
    # The closing hashes are stripped by hand: a regex for them ("(.*?)(?:\s+#+)?$") backtracks
    # through every whitespace run, which is quadratic in the length of the run.
    text = match.group(1)
    body = text.rstrip("#")
    return body.rstrip() if body[-1:].isspace() else text


def _read_markdown(content: str) -> list[Block]:
    blocks: list[Block] = []
    paragraph: list[str] = []
    table: list[str] = []

    def flush_paragraph(kind: str = "text") -> None:
        text = clean(" ".join(paragraph))
        paragraph.clear()
        if text:
            blocks.append(Block(kind, text))

    def flush_table() -> None:
        if table:
            blocks.append(Block("table", "\n".join(table)))
            table.clear()

    for raw in content.splitlines():
        line = raw.strip()
        if line.startswith("|"):
            flush_paragraph()
            table.append(line)
            continue
        flush_table()
        heading = _md_heading(line)
        if not line:
            flush_paragraph()
        elif heading is not None:
            flush_paragraph()
            if clean(heading):
                blocks.append(Block("heading", clean(heading)))
        elif _MD_RULE_RE.match(line):
            # Under a paragraph "---"/"===" makes it a (setext) heading; alone it is a rule.
            flush_paragraph("heading")
        else:
            paragraph.append(line)
    flush_table()
    flush_paragraph()
    return blocks


def _finish(blocks: list[Block]) -> list[Block]:
    """Format-independent clean-up of a reader's blocks."""
    blocks = [_classify(block) for block in blocks if not is_toc_header(block.text)]
    blocks = _drop_page_furniture(_collapse_page_breaks(blocks))
    return _join_split_paragraphs(_collapse_page_breaks(blocks))


def _classify(block: Block) -> Block:
    if block.kind == "text" and (parse_item(block.text) or is_part_heading(block.text)):
        return Block("heading", block.text)
    return block


def _collapse_page_breaks(blocks: list[Block]) -> list[Block]:
    # A break before any content, after the last, or right after another one starts no page
    # with text on it; dropping it keeps page ids counting the pages a reader sees.
    out: list[Block] = []
    for block in blocks:
        if block.kind == "page_break" and (not out or out[-1].kind == "page_break"):
            continue
        out.append(block)
    if out and out[-1].kind == "page_break":
        out.pop()
    return out


def _drop_page_furniture(blocks: list[Block]) -> list[Block]:
    """Drops page numbers that end a page and page headers repeated at the top of pages."""
    first_on_page = Counter(
        blocks[i + 1].text
        for i, block in enumerate(blocks[:-1])
        if block.kind == "page_break" and blocks[i + 1].kind == "text"
    )
    running_headers = {text for text, n in first_on_page.items() if n >= 3 and len(text) <= 80}
    out: list[Block] = []
    for i, block in enumerate(blocks):
        after_break = i > 0 and blocks[i - 1].kind == "page_break"
        before_break = i + 1 < len(blocks) and blocks[i + 1].kind == "page_break"
        if block.kind == "text" and (
            (before_break and is_page_number(block.text))
            or (after_break and block.text in running_headers)
        ):
            continue
        out.append(block)
    return out


_SENTENCE_END_RE = re.compile(r"[.!?:;][\"'\u201d\u2019)\]]*$")


def _join_split_paragraphs(blocks: list[Block]) -> list[Block]:
    # A paragraph that ends mid-sentence at a page break and continues in lower case on the next
    # page is one paragraph: rejoined, it is never cut between two chunks.
    out: list[Block] = []
    i = 0
    while i < len(blocks):
        block = blocks[i]
        if (
            block.kind == "page_break"
            and out
            and i + 1 < len(blocks)
            and out[-1].kind == "text"
            and blocks[i + 1].kind == "text"
            and len(out[-1].text.split()) >= 6
            and not _SENTENCE_END_RE.search(out[-1].text)
            and blocks[i + 1].text[:1].islower()
        ):
            out[-1] = Block("text", f"{out[-1].text} {blocks[i + 1].text}")
            out.append(block)
            i += 2
            continue
        out.append(block)
        i += 1
    return out
