"""The blocks a filing is read into and the chunks it is cut into, and how a line is
recognised as an Item or Part heading, a page number or a table-of-contents header."""

from __future__ import annotations

import gc
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)

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


MAX_HEADING_CHARS = 200
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


def parse_item(text: str) -> tuple[str, str] | None:
    """("Item 1A", title) when `text` is an Item heading line, else None."""
    if len(text) > MAX_HEADING_CHARS:
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


def is_part_heading(text: str) -> bool:
    return len(text) <= 120 and _PART_RE.match(text) is not None


def is_page_number(text: str) -> bool:
    return _PAGE_NUMBER_RE.match(text) is not None


def is_toc_header(text: str) -> bool:
    return text.strip().lower() == "table of contents"


def clean(text: str) -> str:
    # Collapses all whitespace, including the no-break spaces EDGAR uses for layout.
    return " ".join(text.replace("\u200b", "").split())


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """Pauses Python's cycle collector (as a `with` block or a decorator). Reading and chunking
    make no reference cycles but hundreds of thousands of blocks, and every full collection
    scans them all: the time per byte grew with the filing (0.41 s for 1 MB, 2.77 s for 4 MB).
    A collector the caller had turned off stays off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
