"""Cutting a filing's blocks into Item sections and packing each into chunks of at most
`max_tokens` tokens (tables whole; paragraphs split only when too long)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from finreflect_eval.chunking.blocks import (
    BLOCK_KINDS,
    FRONT_MATTER,
    MAX_HEADING_CHARS,
    Block,
    Chunk,
    cycle_collection_paused,
    is_page_number,
    is_part_heading,
    parse_item,
)
from finreflect_eval.chunking.tokens import TokenCounter, count_regex_tokens

logger = logging.getLogger(__name__)


@cycle_collection_paused()
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
    count = count_tokens or count_regex_tokens
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
        parsed = parse_item(block.text) if block.kind in ("text", "heading") else None
        if parsed is None:
            out.append(block)
            i += 1
            continue
        title = blocks[i + 1] if i + 1 < len(blocks) else None
        if (
            not parsed[1]
            and title is not None
            and title.kind in ("text", "heading")
            and len(title.text) <= MAX_HEADING_CHARS
            and parse_item(title.text) is None
            and not is_part_heading(title.text)
            and not is_page_number(title.text)
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
        and not is_page_number(block.text)
        and not is_part_heading(block.text)
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
        if block.kind in ("text", "heading") and (parsed := parse_item(block.text))
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
        while j > previous and (blocks[j].kind == "page_break" or is_part_heading(blocks[j].text)):
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
            # A piece's own count is exact: only a group of several is counted again.
            n_tokens = pieces[start][1] if end - start == 1 else count(text)
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
    {
        "inc.",
        "corp.",
        "co.",
        "ltd.",
        "llc.",
        "no.",
        "nos.",
        "u.s.",
        "u.k.",
        "mr.",
        "ms.",
        "mrs.",
        "dr.",
        "st.",
        "vs.",
        "e.g.",
        "i.e.",
        "approx.",
        "jan.",
        "feb.",
        "aug.",
        "sept.",
        "oct.",
        "nov.",
        "dec.",
    }
)


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
    # punctuation): the longest prefixes that fit, at least one character each.
    parts: list[str] = []
    start, guess = 0, 1
    while start < len(word):
        end = max(_longest_fit(word, start, guess, max_tokens, count), start + 1)
        parts.append(word[start:end])
        guess, start = end - start, end
    return parts


def _longest_fit(word: str, start: int, guess: int, max_tokens: int, count: TokenCounter) -> int:
    """The largest end with word[start:end] of at most max_tokens tokens (start if none).

    The search gallops from start + guess (the previous part's length: in a run of punctuation
    every part is as long), doubling its step, and bisects once the end is bracketed. Each count
    is then of about the part's own length, so a word costs time linear in its length; bisecting
    over the whole rest of the word made every part cost as much as the rest: quadratic.
    """

    def fits(end: int) -> bool:
        return count(word[start:end]) <= max_tokens

    low, high = start, len(word) + 1  # word[start:low] fits, word[start:high] does not
    probe, step = min(start + guess, len(word)), 1
    while low < probe < high:
        if fits(probe):
            low, probe = probe, min(probe + step, len(word))
        else:
            high, probe = probe, probe - step
        step *= 2
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low
