"""EDGAR HTML to blocks: paragraphs, headings, page breaks and tables (as markdown)."""

from __future__ import annotations

import logging
import re
from html.parser import HTMLParser

from finreflect_eval.chunking.blocks import Block, clean

logger = logging.getLogger(__name__)


def read_html(content: str) -> list[Block]:
    parser = _EdgarHTMLParser()
    parser.feed(content)
    parser.close()
    return parser.blocks


_SKIP_TAGS = frozenset({"script", "style", "title", "noscript", "template", "ix:header"})
_VOID_TAGS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
_HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_BLOCK_TAGS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "html",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
_PAGE_BREAK_BEFORE_RE = re.compile(r"break-before\s*:\s*(?:always|page)", re.IGNORECASE)
_PAGE_BREAK_AFTER_RE = re.compile(r"break-after\s*:\s*(?:always|page)", re.IGNORECASE)
_DISPLAY_NONE_RE = re.compile(r"display\s*:\s*none", re.IGNORECASE)
# EDGAR tables put "$" and ")"/"%" in cells of their own; glued back they read as one value.
_PREFIX_CELLS = frozenset({"$", "\u20ac", "\u00a3"})
_SUFFIX_CELLS = frozenset({")", "%", ")%", "%)"})


class _EdgarHTMLParser(HTMLParser):
    """Collects paragraphs, tables and page breaks from EDGAR (inline XBRL) HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self._paragraph: list[str] = []
        self._heading_depth = 0
        # Open non-void elements with whether they end in a page break (page-break-after).
        self._stack: list[tuple[str, bool]] = []
        self._skip_tag: str | None = None
        self._skip_depth = 0
        self._table_depth = 0
        self._rows: list[list[str]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    # HTMLParser callbacks

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, self_closing=False)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, self_closing=True)

    def handle_endtag(self, tag: str) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag:
                self._skip_depth -= 1
                if self._skip_depth == 0:
                    self._skip_tag = None
            return
        if tag == "br":  # "</br>" is read as <br> by browsers
            self._boundary()
            return
        # Close everything opened since the matching start tag; a stray end tag is ignored.
        for index in range(len(self._stack) - 1, -1, -1):
            if self._stack[index][0] == tag:
                break
        else:
            return
        while len(self._stack) > index:
            closed, break_after = self._stack.pop()
            self._close(closed)
            if break_after:
                self._page_break()

    def handle_data(self, data: str) -> None:
        if self._skip_tag is not None:
            return
        if self._table_depth:
            if self._cell is not None:
                self._cell.append(data)
        else:
            self._paragraph.append(data)

    def close(self) -> None:
        super().close()
        while self._stack:
            self._close(self._stack.pop()[0])
        self._flush()

    # Element handling

    def _start(self, tag: str, attrs: list[tuple[str, str | None]], self_closing: bool) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag and not self_closing:
                self._skip_depth += 1
            return
        style = dict(attrs).get("style") or ""
        if tag in _SKIP_TAGS or _DISPLAY_NONE_RE.search(style):
            if not (self_closing or tag in _VOID_TAGS):
                self._skip_tag, self._skip_depth = tag, 1
            return
        if _PAGE_BREAK_BEFORE_RE.search(style):
            self._page_break()
        if self_closing or tag in _VOID_TAGS:
            if tag in _BLOCK_TAGS or tag == "br":
                self._boundary()
            # EDGAR marks page ends with <hr> (usually styled page-break-after) or an empty
            # <div style="page-break-after:always"/>.
            if tag == "hr" or _PAGE_BREAK_AFTER_RE.search(style):
                self._page_break()
            return
        self._stack.append((tag, _PAGE_BREAK_AFTER_RE.search(style) is not None))
        self._open(tag)

    def _open(self, tag: str) -> None:
        if tag == "table":
            if self._table_depth == 0:
                self._flush()
                self._rows, self._row, self._cell = [], None, None
            else:
                self._boundary()  # a nested table's text stays in the outer cell
            self._table_depth += 1
        elif self._table_depth == 1 and tag == "tr":
            self._end_row()
            self._row = []
        elif self._table_depth == 1 and tag in ("td", "th"):
            self._end_cell()
            if self._row is None:
                self._row = []
            self._cell = []
        elif tag in _HEADING_TAGS and not self._table_depth:
            self._flush()
            self._heading_depth += 1
        elif tag in _BLOCK_TAGS:
            self._boundary()

    def _close(self, tag: str) -> None:
        if tag == "table" and self._table_depth:
            self._table_depth -= 1
            if self._table_depth == 0:
                self._end_table()
            else:
                self._boundary()
        elif self._table_depth == 1 and tag in ("td", "th"):
            self._end_cell()
        elif self._table_depth == 1 and tag == "tr":
            self._end_row()
        elif tag in _HEADING_TAGS and not self._table_depth:
            self._flush()
            self._heading_depth = max(0, self._heading_depth - 1)
        elif tag in _BLOCK_TAGS:
            self._boundary()

    def _boundary(self) -> None:
        if self._table_depth:
            if self._cell is not None:
                self._cell.append(" ")
        else:
            self._flush()

    def _flush(self) -> None:
        text = clean("".join(self._paragraph))
        self._paragraph.clear()
        if text:
            self.blocks.append(Block("heading" if self._heading_depth else "text", text))

    def _page_break(self) -> None:
        if self._table_depth:
            return  # tables are kept whole, so a break inside one is ignored
        self._flush()
        self.blocks.append(Block("page_break"))

    def _end_cell(self) -> None:
        if self._cell is not None and self._row is not None:
            self._row.append(clean("".join(self._cell)))
        self._cell = None

    def _end_row(self) -> None:
        self._end_cell()
        if self._row is not None:
            self._rows.append(self._row)
        self._row = None

    def _end_table(self) -> None:
        self._end_row()
        block = _table_block(self._rows)
        self._rows = []
        if block is not None:
            self.blocks.append(block)


def _merge_cells(cells: list[str]) -> list[str]:
    """A row's cells without spacers, "$" and ")"/"%" glued to their number; [] if all empty."""
    merged: list[str] = []
    for index, cell in enumerate(cells):
        if not cell and index > 0:
            continue  # spacer cell
        # An empty first cell is kept: it is the row-label column, and keeping it lines header
        # rows ("", "2025", "2024") up with the data rows below them.
        if merged and merged[-1] and (cell in _SUFFIX_CELLS or merged[-1] in _PREFIX_CELLS):
            merged[-1] += cell
        else:
            merged.append(cell)
    return merged if any(merged) else []


def _table_block(raw_rows: list[list[str]]) -> Block | None:
    rows = [cells for cells in map(_merge_cells, raw_rows) if cells]
    if not rows:
        return None
    if len(rows) == 1:
        # EDGAR lays out bullets, footnotes and some headings as one-row tables: that is text.
        return Block("text", " ".join(cell for cell in rows[0] if cell))
    width = max(len(cells) for cells in rows)

    def line(cells: list[str]) -> str:
        padded = [cell.replace("|", "\\|") for cell in cells] + [""] * (width - len(cells))
        return "| " + " | ".join(padded) + " |"

    rule = "| " + " | ".join(["---"] * width) + " |"
    return Block("table", "\n".join([line(rows[0]), rule, *map(line, rows[1:])]))
