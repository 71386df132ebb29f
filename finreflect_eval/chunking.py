"""Structure-aware chunking of 10-K filings into spans (DESIGN.md §3.4).

`read_filing` turns an EDGAR HTML, markdown or plain-text filing into a flat list of `Block`s;
`chunk_filing` groups the blocks into Item sections and packs them into `Chunk`s of at most
`max_tokens` tokens. Both are pure functions of their input (no randomness, no clock), so
rebuilding the data set from the same files gives byte-identical spans.

Chunking rules:
- A chunk never crosses a section boundary. Text before the first Item is "Front matter".
- A section's first chunk starts with its heading lines: the "Part ..." heading directly before
  it (if any), then the Item heading with its title on one line ("Item 1. Business").
- Every table is a chunk of its own (content_type "table"), kept whole even when it is longer
  than `max_tokens`: half a financial table is worse for extraction than a long span.
- Text paragraphs are packed greedily, in order, up to `max_tokens` and joined with a blank
  line. A paragraph is split only when it alone exceeds `max_tokens`: at sentence ends, and a
  sentence that is still too long at spaces.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from finreflect_eval.errors import FinReflectError

logger = logging.getLogger(__name__)

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text; see `token_counter`."""

FRONT_MATTER = "Front matter"
BLOCK_KINDS = frozenset({"text", "table", "heading", "page_break"})


@dataclass(frozen=True)
class Block:
    """One paragraph-level unit of a filing, in document order."""

    kind: str
    """"text" | "table" (a markdown table) | "heading" | "page_break" (empty text)."""
    text: str = ""


@dataclass(frozen=True)
class Chunk:
    """One span of a filing: the unit a model extracts triples from."""

    section: str
    """"Item 7", "Item 1A", ...; "Front matter" for text before the first Item."""
    chunk_index: int
    """0-based position within its section, in document order."""
    page_id: str
    """"page_<n>" of the chunk's first block; pages are counted from 1 at each page break."""
    content_type: str
    """"text" | "table"."""
    text: str
    n_tokens: int
    """Tokens in `text` by the counter used; at most max_tokens unless content_type is "table"."""


# ---------------------------------------------------------------------------------------------
# Token counting

_REGEX_TOKEN = re.compile(r"\w+|[^\w\s]")


def _count_regex_tokens(text: str) -> int:
    # Words and single punctuation marks: BPE vocabularies hold most English words whole and
    # split punctuation off, so this over-estimates prose slightly, which is safe for a limit.
    return len(_REGEX_TOKEN.findall(text))


def token_counter(name: str = "regex") -> TokenCounter:
    """Returns a token counter.

    Args:
        name: "regex" (fast, offline, the default) or a Hugging Face tokenizer name or local
            path, loaded with `transformers.AutoTokenizer` (needs the `[hf]` extra).

    Raises:
        FinReflectError: transformers is not installed, or the tokenizer cannot be loaded.
    """
    if name == "regex":
        return _count_regex_tokens
    try:
        # Imported here: transformers is an optional extra and slow to import.
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise FinReflectError(
            f"tokenizer {name!r} needs transformers: pip install 'finreflect-eval[hf]' "
            "or use the default 'regex' token counter"
        ) from exc
    source = str(Path(name).expanduser()) if name.startswith("~") else name
    if name.startswith(("/", "./", "../", "~")) and not Path(source).exists():
        # Otherwise transformers takes the path for a Hub id and reports an invalid repo id.
        raise FinReflectError(f"cannot load tokenizer {name!r}: no such directory")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except Exception as exc:  # OSError, ValueError, HFValidationError, ... depending on the cause
        cause = " ".join(str(exc).split()) or type(exc).__name__
        raise FinReflectError(f"cannot load tokenizer {name!r}: {cause}") from exc

    def count(text: str) -> int:
        # verbose=False: we only count, so the "longer than the model's maximum" warning is noise.
        return len(tokenizer(text, add_special_tokens=False, verbose=False).input_ids)

    return count


# ---------------------------------------------------------------------------------------------
# Line classification shared by the readers and the chunker

_MAX_HEADING_CHARS = 200
# "Item 1.", "ITEM 1A.RISK FACTORS", "Item 1C", "Item 7. Management's ...", "**Item 7.**".
_ITEM_RE = re.compile(
    r"^[\s*_#]*item\s*(\d{1,2})([a-c])?(?!\w)\s*(?:([.:\u2013\u2014-])\s*)?(.*?)[\s*_]*$",
    re.IGNORECASE,
)
_PART_RE = re.compile(r"^[\s*_#]*part\s+(?:iv|i{1,3})(?!\w)", re.IGNORECASE)
# Page numbers as printed in 10-Ks: "19", "26.", "F-3", "ii", "- 19 -", "Page 19".
_PAGE_NUMBER_RE = re.compile(
    r"^(?:page\s+)?[-\u2013\u2014]?\s*(?:\d{1,3}|(?=[ivx])x{0,3}(?:ix|iv|v?i{0,3})|[a-z]-\d{1,3})"
    r"\.?\s*[-\u2013\u2014]?$",
    re.IGNORECASE,
)


def _parse_item(text: str) -> tuple[str, str] | None:
    """("Item 1A", title) when `text` is an Item heading line, else None."""
    if len(text) > _MAX_HEADING_CHARS:
        return None
    match = _ITEM_RE.match(text)
    if match is None:
        return None
    number, letter, separator, title = match.groups()
    if not 1 <= int(number) <= 16:
        return None
    if title[:1].isdigit():  # "Item 1.01" (8-K items), "Item 7 2024": not a 10-K heading
        return None
    if title and not separator and not (title[0].isupper() or title[0] in '[("\u201c'):
        return None  # "Item 7 of this report ..." is a cross-reference, not a heading
    return f"Item {int(number)}{(letter or '').upper()}", title


def _is_part_heading(text: str) -> bool:
    return len(text) <= 120 and _PART_RE.match(text) is not None


def _is_page_number(text: str) -> bool:
    return _PAGE_NUMBER_RE.match(text) is not None


def _is_toc_header(text: str) -> bool:
    return text.strip().lower() == "table of contents"


def _clean(text: str) -> str:
    # Collapses all whitespace, including the no-break spaces EDGAR uses for layout.
    return " ".join(text.replace("\u200b", "").split())


# ---------------------------------------------------------------------------------------------
# Reading filings


def read_filing(path: str | Path) -> list[Block]:
    """Reads a 10-K filing into blocks, detecting its format.

    `.htm`/`.html` files (or content that starts with a tag and contains `<html`, `<body`,
    `<div` or `<p`) are EDGAR HTML, `.md`/`.markdown` files are markdown, anything else is
    plain text with one paragraph per non-empty line. In every format, "Table of Contents"
    running headers, page numbers and repeated page headers are dropped, consecutive page
    breaks are merged, and a paragraph cut in two by a page break is joined again.
    """
    path = Path(path)
    # utf-8-sig is utf-8 that also drops a byte-order mark.
    content = path.read_text(encoding="utf-8-sig", errors="replace")
    suffix = path.suffix.lower()
    if suffix in {".htm", ".html", ".xhtml"}:
        blocks = _read_html(content)
    elif suffix in {".md", ".markdown"}:
        blocks = _read_markdown(content)
    elif content.lstrip().startswith("<") and re.search(r"<(?:html|body|div|p)\b", content, re.I):
        blocks = _read_html(content)
    else:
        blocks = _read_text(content)
    return _finish(blocks)


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
    lines = [line for line in map(_clean, content.splitlines()) if line]
    start = 0
    while start < len(lines) and _is_xbrl_residue(lines[start]):
        start += 1
    blocks: list[Block] = []
    i = start
    while i < len(lines):
        line = lines[i]
        if _is_page_number(line) and i + 1 < len(lines) and _is_toc_header(lines[i + 1]):
            # A page ends with its number; the next starts with a "Table of Contents" link.
            blocks.append(Block("page_break"))
            i += 2
            continue
        blocks.append(Block("text", line))
        i += 1
    return blocks


_MD_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?$")
_MD_RULE_RE = re.compile(r"^(?:-{3,}|\*{3,}|_{3,}|={3,})$")


def _read_markdown(content: str) -> list[Block]:
    blocks: list[Block] = []
    paragraph: list[str] = []
    table: list[str] = []

    def flush_paragraph(kind: str = "text") -> None:
        text = _clean(" ".join(paragraph))
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
        heading = _MD_HEADING_RE.match(line)
        if not line:
            flush_paragraph()
        elif heading:
            flush_paragraph()
            if _clean(heading.group(2)):
                blocks.append(Block("heading", _clean(heading.group(2))))
        elif _MD_RULE_RE.match(line):
            # Under a paragraph "---"/"===" makes it a (setext) heading; alone it is a rule.
            flush_paragraph("heading")
        else:
            paragraph.append(line)
    flush_table()
    flush_paragraph()
    return blocks


def _read_html(content: str) -> list[Block]:
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
        "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "div",
        "dl", "dt", "figcaption", "figure", "footer", "form", "header", "html", "li", "main",
        "nav", "ol", "p", "pre", "section", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
        "ul",
    }
)  # fmt: skip
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
        text = _clean("".join(self._paragraph))
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
            self._row.append(_clean("".join(self._cell)))
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


def _finish(blocks: list[Block]) -> list[Block]:
    """Format-independent clean-up of a reader's blocks."""
    blocks = [_classify(block) for block in blocks if not _is_toc_header(block.text)]
    blocks = _drop_page_furniture(_collapse_page_breaks(blocks))
    return _join_split_paragraphs(_collapse_page_breaks(blocks))


def _classify(block: Block) -> Block:
    if block.kind == "text" and (_parse_item(block.text) or _is_part_heading(block.text)):
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
            (before_break and _is_page_number(block.text))
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


# ---------------------------------------------------------------------------------------------
# Sections and chunks


def chunk_filing(
    blocks: list[Block], max_tokens: int = 2048, count_tokens: TokenCounter | None = None
) -> list[Chunk]:
    """Splits a filing's blocks into Item sections and packs each section into chunks.

    Args:
        blocks: from `read_filing` (or built by hand).
        max_tokens: the most tokens in a text chunk; tables are never split (see module doc).
        count_tokens: defaults to the regex counter, `token_counter("regex")`.

    Returns:
        The chunks in document order.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    unknown = sorted({block.kind for block in blocks} - BLOCK_KINDS)
    if unknown:
        raise ValueError(f"unknown block kind(s) {unknown}; expected one of {sorted(BLOCK_KINDS)}")
    count = count_tokens or _count_regex_tokens
    blocks = _merge_item_titles(
        [block for block in blocks if block.kind == "page_break" or block.text.strip()]
    )
    pages: list[int] = []
    page = 1
    for block in blocks:
        page += block.kind == "page_break"
        pages.append(page)
    chunks: list[Chunk] = []
    for section, start, end in _sections(blocks):
        chunks += _chunk_section(section, blocks[start:end], pages[start:end], max_tokens, count)
    return chunks


def _merge_item_titles(blocks: list[Block]) -> list[Block]:
    """Joins a bare "Item 1." line with its title on the next line ("Item 1. Business")."""
    out: list[Block] = []
    i = 0
    while i < len(blocks):
        block = blocks[i]
        parsed = _parse_item(block.text) if block.kind in ("text", "heading") else None
        if parsed is None:
            out.append(block)
            i += 1
            continue
        title = blocks[i + 1] if i + 1 < len(blocks) else None
        if (
            not parsed[1]
            and title is not None
            and title.kind in ("text", "heading")
            and len(title.text) <= _MAX_HEADING_CHARS
            and _parse_item(title.text) is None
            and not _is_part_heading(title.text)
            and not _is_page_number(title.text)
        ):
            out.append(Block("heading", f"{block.text.strip()} {title.text.strip()}"))
            i += 2
        else:
            out.append(Block("heading", block.text))
            i += 1
    return out


def _is_body(block: Block) -> bool:
    if block.kind == "table":
        return True
    return (
        block.kind in ("text", "heading")
        and not _is_page_number(block.text)
        and not _is_part_heading(block.text)
    )


def _sections(blocks: list[Block]) -> list[tuple[str, int, int]]:
    """(section name, start, end) ranges of `blocks` covering all of them, in order.

    The table of contents lists every Item too, so each Item may have several heading lines.
    A section starts at the last one followed by body text before the next Item heading (TOC
    entries are followed only by page numbers; the body comes after the TOC), or at the last
    one if none is. The other occurrences stay as plain lines where they are.
    """
    candidates = [
        (i, parsed[0])
        for i, block in enumerate(blocks)
        if block.kind in ("text", "heading") and (parsed := _parse_item(block.text))
    ]
    last: dict[str, int] = {}
    last_with_body: dict[str, int] = {}
    for k, (i, name) in enumerate(candidates):
        next_heading = candidates[k + 1][0] if k + 1 < len(candidates) else len(blocks)
        last[name] = i
        if any(_is_body(block) for block in blocks[i + 1 : next_heading]):
            last_with_body[name] = i
    heads = sorted((last_with_body.get(name, i), name) for name, i in last.items())

    starts: list[tuple[int, str]] = []
    previous = -1
    for i, name in heads:
        start = i
        # A "Part II" heading (and page breaks) right before the Item opens the Item's section.
        j = i - 1
        while j > previous and (blocks[j].kind == "page_break" or _is_part_heading(blocks[j].text)):
            if blocks[j].kind != "page_break":
                start = j
            j -= 1
        starts.append((start, name))
        previous = i
    logger.debug("sections: %s", [name for _, name in starts])

    bounds = [(0, FRONT_MATTER), *starts] if not starts or starts[0][0] > 0 else starts
    ends = [start for start, _ in bounds[1:]] + [len(blocks)]
    return [(name, start, end) for (start, name), end in zip(bounds, ends, strict=True)]


def _chunk_section(
    section: str,
    blocks: Sequence[Block],
    pages: Sequence[int],
    max_tokens: int,
    count: TokenCounter,
) -> list[Chunk]:
    chunks: list[Chunk] = []

    def emit(content_type: str, text: str, n_tokens: int, page: int) -> None:
        chunks.append(Chunk(section, len(chunks), f"page_{page}", content_type, text, n_tokens))

    run: list[tuple[str, int, int]] = []  # paragraphs (text, n_tokens, page) since the last table
    for block, page in zip(blocks, pages, strict=True):
        if block.kind == "page_break":
            continue
        if block.kind == "table":
            for text, n_tokens, first_page in _pack(run, "\n\n", max_tokens, count):
                emit("text", text, n_tokens, first_page)
            run = []
            emit("table", block.text, count(block.text), page)
            continue
        run += [
            (text, n_tokens, page)
            for text, n_tokens in _split_paragraph(block.text, max_tokens, count)
        ]
    for text, n_tokens, first_page in _pack(run, "\n\n", max_tokens, count):
        emit("text", text, n_tokens, first_page)
    return chunks


def _pack(
    pieces: Sequence[tuple[str, int, int]], joiner: str, max_tokens: int, count: TokenCounter
) -> list[tuple[str, int, int]]:
    """Greedily joins consecutive (text, n_tokens, page) pieces into groups of <= max_tokens.

    Summed piece counts are exact for the regex counter (its tokens never span whitespace) but
    only an estimate for subword tokenizers, so each group is re-counted and, if the tokenizer
    merged across a joint, shortened until it fits. A piece longer than max_tokens on its own
    becomes a group by itself. The page of a group is that of its first piece.
    """
    groups: list[tuple[str, int, int]] = []
    joint = count(joiner)
    start = 0
    while start < len(pieces):
        end, total = start + 1, pieces[start][1]
        while end < len(pieces) and total + joint + pieces[end][1] <= max_tokens:
            total += joint + pieces[end][1]
            end += 1
        while True:
            text = joiner.join(piece[0] for piece in pieces[start:end])
            n_tokens = count(text)
            if n_tokens <= max_tokens or end - start == 1:
                break
            end -= 1
        groups.append((text, n_tokens, pieces[start][2]))
        start = end
    return groups


_SENTENCE_BREAK_RE = re.compile(
    r"[.!?][\"'\u201d\u2019)\]]*(\s+)(?=[\"'\u201c\u2018(\[]?[A-Z0-9$])"
)
# Periods that rarely end a sentence in a 10-K; splitting after them would cut a name in two.
_ABBREVIATIONS = frozenset(
    {"inc.", "corp.", "co.", "ltd.", "llc.", "no.", "nos.", "u.s.", "u.k.", "mr.", "ms.", "mrs.",
     "dr.", "st.", "vs.", "e.g.", "i.e.", "approx.", "jan.", "feb.", "aug.", "sept.", "oct.",
     "nov.", "dec."}
)  # fmt: skip


def _split_sentences(text: str) -> list[str]:
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_BREAK_RE.finditer(text):
        end = match.start(1)
        word = text[text.rfind(" ", 0, end) + 1 : end]
        if word.lower() in _ABBREVIATIONS or re.fullmatch(r"[A-Z]\.", word):
            continue
        sentences.append(text[start:end])
        start = match.end(1)
    sentences.append(text[start:])
    return [sentence for sentence in sentences if sentence]


def _split_paragraph(text: str, max_tokens: int, count: TokenCounter) -> list[tuple[str, int]]:
    """The paragraph whole if it fits, else sentence groups that each fit."""
    n_tokens = count(text)
    if n_tokens <= max_tokens:
        return [(text, n_tokens)]
    pieces: list[tuple[str, int, int]] = []
    for sentence in _split_sentences(text):
        n_sentence = count(sentence)
        if n_sentence <= max_tokens:
            pieces.append((sentence, n_sentence, 0))
            continue
        words: list[tuple[str, int, int]] = []
        for word in sentence.split(" "):
            n_word = count(word)
            if n_word <= max_tokens:
                words.append((word, n_word, 0))
            else:
                words += [
                    (part, count(part), 0) for part in _split_characters(word, max_tokens, count)
                ]
        pieces += _pack(words, " ", max_tokens, count)
    return [(group, n_group) for group, n_group, _ in _pack(pieces, " ", max_tokens, count)]


def _split_characters(word: str, max_tokens: int, count: TokenCounter) -> list[str]:
    # Last resort for a "word" with no spaces longer than max_tokens (a URL list, a run of
    # punctuation): the longest prefixes that fit, found by bisection; at least one character.
    parts: list[str] = []
    start = 0
    while start < len(word):
        low, high = start + 1, len(word)
        while low < high:
            middle = (low + high + 1) // 2
            if count(word[start:middle]) <= max_tokens:
                low = middle
            else:
                high = middle - 1
        parts.append(word[start:low])
        start = low
    return parts


# ---------------------------------------------------------------------------------------------
# Filing metadata

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
# EDGAR text often loses the space after "ended": "For the fiscal year endedDecember 31, 2024".
_FISCAL_YEAR_ENDED_RE = re.compile(
    rf"for\s+the\s+fiscal\s+year\s+ended\s*:?\s*{_MONTH}\.?\s*\d{{1,2}}\s*,?\s*((?:19|20)\d\d)(?!\d)",
    re.IGNORECASE,
)
# 1-5 letters and an optional share class ("BRK.B"): keeps "annual_report_2024" from naming one.
_TICKER_RE = re.compile(r"[A-Za-z]{1,5}(?:[.\-][A-Za-z]{1,2})?")
_FILING_DATE_RE = re.compile(r"(?<!\d)((?:19|20)\d\d)-\d\d-\d\d(?!\d)")
_EDGAR_DOC_NAME_RE = re.compile(r"^([a-z][a-z0-9]{0,9})-((?:19|20)\d\d)\d{4}$")
_YEAR_RE = re.compile(r"(?<!\d)((?:19|20)\d\d)(?!\d)")


def infer_filing_metadata(
    path: str | Path, text: str | None = None
) -> tuple[str | None, int | None]:
    """(ticker, fiscal year) of a filing, None for what cannot be inferred.

    Names handled: `AMZN_10-K-2025-02-07.txt` (ticker before "_", then the filing date),
    `AMZN_10k_2024.pdf` (the year is the fiscal year) and EDGAR's `amzn-20241231.htm` (the
    date is the period end; the prefix is the filer's XBRL prefix, usually but not always its
    ticker: Alphabet's is "goog"). The fiscal year comes first from the cover page of `text`, "for
    the fiscal year ended <Month> <day>, <year>" (NVIDIA's year ending January 26, 2025 is
    fiscal 2025); failing that from the name, a filing date counting as the year before
    (wrong for fiscal years ending in January, hence the cover page first).
    """
    stem = Path(path).stem
    ticker: str | None = None
    name_year: int | None = None
    edgar = _EDGAR_DOC_NAME_RE.match(stem)
    if edgar:
        ticker, name_year = edgar.group(1).upper(), int(edgar.group(2))
    else:
        if "_" in stem and _TICKER_RE.fullmatch(prefix := stem.split("_", 1)[0]):
            ticker = prefix.upper()
        filed = _FILING_DATE_RE.search(stem)
        year = _YEAR_RE.search(stem)
        if filed:
            name_year = int(filed.group(1)) - 1
        elif year:
            name_year = int(year.group(1))
    if text is not None:
        cover = _FISCAL_YEAR_ENDED_RE.search(text[:20_000])
        if cover:
            return ticker, int(cover.group(1))
    return ticker, name_year
