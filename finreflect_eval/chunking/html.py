"""EDGAR HTML to blocks: paragraphs, headings, page breaks and tables (as markdown)."""

from __future__ import annotations

import html
import logging
import re
from collections import Counter

from finreflect_eval.chunking.blocks import Block, clean

logger = logging.getLogger(__name__)


def read_html(content: str) -> list[Block]:
    """The blocks of an HTML document, in linear time.

    The markup is tokenized here rather than by html.parser, which rescans to the end of the
    document for each unclosed "<a", "</", "<!", "<?" or "<!--" (quadratic in such input) and
    raises AssertionError on some ("<![ a>"). The rules are HTML5's, simplified: a tag runs to
    the first ">" outside a quoted attribute value, a comment to "-->", a doctype, processing
    instruction or other "<!", "<?" or "</" markup to the first ">", script and style content
    to its end tag; markup left open runs to the end of the document and is dropped, and a "<"
    that starts no markup is text. Every rule matches whatever follows its start, so no text is
    scanned twice.
    """
    reader = _EdgarHTMLReader()
    position = 0
    while True:
        start = _MARKUP_START_RE.search(content, position)
        end = len(content) if start is None else start.start()
        if position < end:
            reader.data(html.unescape(content[position:end]))
        if start is None:
            break
        markup = _MARKUP_RE.match(content, end)
        assert markup is not None  # some alternative matches after every markup start
        position = markup.end()
        slash, tag = markup.group("slash", "tag")
        if tag is None:
            continue  # a comment, doctype or such
        attributes_end = _attributes_end(content, position)
        if attributes_end == len(content):
            break  # a tag cut off by the end of the document
        attributes, position = content[position:attributes_end], attributes_end + 1
        tag = tag.lower()
        if slash:
            reader.end_tag(tag)
            continue
        self_closing = attributes.endswith("/")
        reader.start_tag(tag, _style(attributes), self_closing)
        if tag in _RAW_TEXT_END and not self_closing:
            # Script and style hold code, not markup: their text ends only at their end tag.
            raw_end = _RAW_TEXT_END[tag].search(content, position)
            position = len(content) if raw_end is None else raw_end.start()
    reader.close()
    return reader.blocks


# Where markup may start; any other "<" is text.
_MARKUP_START_RE = re.compile(r"<[a-zA-Z/!?]")
_MARKUP_RE = re.compile(
    # A comment ("<!-->" is one too).
    r"<!--(?:-?>|.*?--!?>|.*)"
    # A start or end tag, up to its attributes.
    r"|<(?P<slash>/?)(?P<tag>[a-zA-Z][^\s/>]*)"
    # Anything else: a doctype, a processing instruction, CDATA, "</>", "</3", ...
    r"|<[!?/][^>]*>?",
    re.DOTALL,
)
# Text up to an "=" or ">", then the "=" and a quoted value if one follows: quotes delimit a
# value only after "=". A regex repeating this would keep state for every repetition (2 GB for
# a 16 MB tag), hence `_attributes_end`'s loop.
_ATTRIBUTES_RUN_RE = re.compile(r"[^>=]*(?:=\s*(?:\"[^\"]*\"?|'[^']*'?)?)?")
_ATTRIBUTE_RE = re.compile(r"([^\s/>=][^\s/>=]*)(?:\s*=\s*(\"[^\"]*\"?|'[^']*'?|[^\s>]*))?")
_RAW_TEXT_END = {tag: re.compile(rf"</{tag}[\s/>]", re.IGNORECASE) for tag in ("script", "style")}


def _attributes_end(content: str, position: int) -> int:
    """Where the ">" ending a tag whose attributes start at `position` is, or the length of
    `content` if none does; a ">" in a quoted attribute value does not end the tag."""
    while True:
        run = _ATTRIBUTES_RUN_RE.match(content, position)
        assert run is not None  # the regex matches the empty string too
        if run.end() == position:
            return position
        position = run.end()


def _style(attributes: str) -> str:
    """The value of a tag's style attribute (the last one, if several), "" if none."""
    style = ""
    for match in _ATTRIBUTE_RE.finditer(attributes):
        if match.group(1).lower() == "style":
            value = match.group(2) or ""
            if value[:1] in ("'", '"'):
                value = value[1:-1] if len(value) > 1 and value[-1] == value[0] else value[1:]
            style = html.unescape(value)
    return style


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


class _EdgarHTMLReader:
    """Collects paragraphs, tables and page breaks from EDGAR (inline XBRL) HTML."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._paragraph: list[str] = []
        self._heading_depth = 0
        # Open non-void elements with whether they end in a page break (page-break-after), and
        # how many of each are open: a stray end tag is then known without searching the stack.
        self._stack: list[tuple[str, bool]] = []
        self._open: Counter[str] = Counter()
        self._skip_tag: str | None = None
        self._skip_depth = 0
        self._table_depth = 0
        self._rows: list[list[str]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    # Tokens

    def start_tag(self, tag: str, style: str, self_closing: bool) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag and not self_closing:
                self._skip_depth += 1
            return
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
        self._open[tag] += 1
        self._open_element(tag)

    def end_tag(self, tag: str) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag:
                self._skip_depth -= 1
                if self._skip_depth == 0:
                    self._skip_tag = None
            return
        if tag == "br":  # "</br>" is read as <br> by browsers
            self._boundary()
            return
        if not self._open[tag]:
            return  # a stray end tag
        # Close everything opened since the matching start tag.
        while True:
            closed, break_after = self._stack.pop()
            self._open[closed] -= 1
            self._close(closed)
            if break_after:
                self._page_break()
            if closed == tag:
                break

    def data(self, data: str) -> None:
        if self._skip_tag is not None:
            return
        if self._table_depth:
            if self._cell is not None:
                self._cell.append(data)
        else:
            self._paragraph.append(data)

    def close(self) -> None:
        while self._stack:
            self._close(self._stack.pop()[0])
        self._flush()

    # Element handling

    def _open_element(self, tag: str) -> None:
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
    merged: list[list[str]] = []  # each merged cell as the cells glued into it
    for index, cell in enumerate(cells):
        if not cell and index > 0:
            continue  # spacer cell
        # An empty first cell is kept: it is the row-label column, and keeping it lines header
        # rows ("", "2025", "2024") up with the data rows below them.
        last = merged[-1] if merged else [""]
        if last != [""] and (
            cell in _SUFFIX_CELLS or (len(last) == 1 and last[0] in _PREFIX_CELLS)
        ):
            last.append(cell)  # joined once at the end: gluing string by string is quadratic
        else:
            merged.append([cell])
    return ["".join(pieces) for pieces in merged] if any(map(any, merged)) else []


def _table_block(raw_rows: list[list[str]]) -> Block | None:
    rows = [cells for cells in map(_merge_cells, raw_rows) if cells]
    if not rows:
        return None
    if len(rows) == 1:
        # EDGAR lays out bullets, footnotes and some headings as one-row tables: that is text.
        return Block("text", " ".join(cell for cell in rows[0] if cell))
    width = max(len(cells) for cells in rows)
    # Rows are padded with empty cells to the widest so the columns line up: the header row
    # always (markdown takes its width for the table's), the others unless that would more
    # than quadruple the cells. Padding every row to one far wider row (hostile input) grows as
    # rows x width, quadratic in the input; markdown fills short rows in anyway.
    pad_all = width * len(rows) <= 4 * sum(len(cells) for cells in rows)

    def line(cells: list[str], pad: bool) -> str:
        escaped = [cell.replace("|", "\\|") for cell in cells]
        padded = escaped + [""] * (width - len(cells)) if pad else escaped
        return "| " + " | ".join(padded) + " |"

    rule = "| " + " | ".join(["---"] * width) + " |"
    body = [line(cells, pad_all) for cells in rows[1:]]
    return Block("table", "\n".join([line(rows[0], True), rule, *body]))
