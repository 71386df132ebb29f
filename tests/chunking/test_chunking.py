"""Tests for finreflect_eval.chunking: real 10-K text, small HTML/markdown filings, splitting."""

from __future__ import annotations

import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import SHARED_10K, missing, require

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import install_hint
from finreflect_eval.chunking import (
    Block,
    Chunk,
    chunk_filing,
    infer_filing_metadata,
    read_filing,
    token_counter,
)

# The shared test data sits next to the repository: /work/main (repo) and /work/shared.
DATA_DIR = SHARED_10K

# file -> (ticker, fiscal year, {distinctive sentence: the section it must land in})
FILINGS: dict[str, tuple[str, int, dict[str, str]]] = {
    "AMZN_10-K-2025-02-07.txt": (
        "AMZN",
        2024,
        {
            "Please carefully consider the following discussion of significant factors": "Item 1A",
            "AWS sales increased 19% in 2024, compared to the prior year.": "Item 7",
        },
    ),
    "GOOGL_10-K-2025-02-05.txt": (
        "GOOGL",
        2024,
        {
            "Our operations and financial results are subject to various risks": "Item 1A",
            "Google Cloud revenues increased$10.1 billionfrom 2023 to 2024": "Item 7",
        },
    ),
    "NVDA_10-K-2025-02-26.txt": (
        "NVDA",
        2025,
        {
            "Long manufacturing lead times and uncertain supply": "Item 1A",
            "Data Center revenue for fiscal year 2025 was up 142% from a year ago.": "Item 7",
        },
    ),
}
# All three filings have every 10-K Item, in this order.
ITEMS = ["1", "1A", "1B", "1C", "2", "3", "4", "5", "6", "7", "7A", "8", "9", "9A", "9B", "9C"]
ITEMS += [str(n) for n in range(10, 17)]
ALL_SECTIONS = ["Front matter", *(f"Item {item}" for item in ITEMS)]

count_regex = token_counter("regex")


def squash(text: str) -> str:
    return " ".join(text.split())


def sections(chunks: list[Chunk]) -> list[str]:
    """Section names in order of first appearance."""
    return list(dict.fromkeys(chunk.section for chunk in chunks))


# ---------------------------------------------------------------------------------------------
# The three real filings


@pytest.fixture(scope="module", params=sorted(FILINGS))
def filing(request: pytest.FixtureRequest) -> tuple[Path, list[Block]]:
    path = DATA_DIR / request.param
    if not path.is_file():
        missing(f"real 10-K text not found: {path} (shared test data, ../shared next to the repo)")
    return path, read_filing(path)


def test_real_filing_sections_skip_the_table_of_contents(filing: tuple[Path, list[Block]]) -> None:
    path, blocks = filing
    chunks = chunk_filing(blocks)
    # Each Item once, in document order: the TOC entries created no sections of their own.
    assert sections(chunks) == ALL_SECTIONS
    order = [ALL_SECTIONS.index(chunk.section) for chunk in chunks]
    assert order == sorted(order)  # each section is one run of chunks
    for name in ALL_SECTIONS:
        indices = [chunk.chunk_index for chunk in chunks if chunk.section == name]
        assert indices == list(range(len(indices))), name
    # The TOC stays in the front matter; every Item section starts with its own heading and,
    # except the reserved Item 6, has body text after it.
    front = " ".join(chunk.text for chunk in chunks if chunk.section == "Front matter")
    assert "Item 1A." in front and "Item 9C." in front
    for name in ALL_SECTIONS[1:]:
        first = next(chunk for chunk in chunks if chunk.section == name)
        lines = [line for line in first.text.split("\n\n") if not line.lower().startswith("part ")]
        assert re.match(rf"{name}(?!\d)", lines[0], re.IGNORECASE), (name, lines[0])
        body = lines[1:] + [chunk.text for chunk in chunks if chunk.section == name][1:]
        assert body or name == "Item 6", f"{path.name}: {name} has only its heading"
    for name in ("Item 1", "Item 1A", "Item 7", "Item 15"):
        assert max(chunk.n_tokens for chunk in chunks if chunk.section == name) > 50


@pytest.mark.parametrize("max_tokens", [2048, 512])
def test_real_filing_text_chunks_fit(filing: tuple[Path, list[Block]], max_tokens: int) -> None:
    _, blocks = filing
    chunks = chunk_filing(blocks, max_tokens=max_tokens)
    for chunk in chunks:
        assert chunk.n_tokens == count_regex(chunk.text)
        assert chunk.content_type in ("text", "table")
        if chunk.content_type == "text":
            assert 0 < chunk.n_tokens <= max_tokens
    # Packing is greedy: chunks hold many paragraphs, not one each.
    text_chunks = [chunk for chunk in chunks if chunk.content_type == "text"]
    assert sum(chunk.n_tokens for chunk in text_chunks) / len(text_chunks) > max_tokens / 4


def test_real_filing_is_deterministic(filing: tuple[Path, list[Block]]) -> None:
    path, blocks = filing
    assert read_filing(path) == blocks
    assert chunk_filing(blocks, 512) == chunk_filing(read_filing(path), 512)


def test_real_filing_chunks_cover_the_body_in_order(filing: tuple[Path, list[Block]]) -> None:
    path, blocks = filing
    chunks = chunk_filing(blocks)
    # Nothing lost, duplicated or reordered: only whitespace differs.
    body = squash(" ".join(block.text for block in blocks if block.kind != "page_break"))
    assert squash(" ".join(chunk.text for chunk in chunks)) == body
    # The inline-XBRL residue and the "Table of Contents" running headers are gone.
    assert "fasb.org" not in body and "Table of Contents" not in body
    for sentence, section in FILINGS[path.name][2].items():
        homes = [chunk.section for chunk in chunks if sentence in chunk.text]
        assert homes == [section], sentence
    pages = [int(chunk.page_id.removeprefix("page_")) for chunk in chunks]
    assert pages == sorted(pages) and pages[0] == 1 and pages[-1] > 50


def test_real_filing_metadata(filing: tuple[Path, list[Block]]) -> None:
    path, _ = filing
    ticker, fiscal_year, _ = FILINGS[path.name]
    text = path.read_text(encoding="utf-8")
    assert infer_filing_metadata(path, text) == (ticker, fiscal_year)
    # From the name alone the year is the filing year - 1: right for December year ends.
    assert infer_filing_metadata(path) == (ticker, 2024)


# ---------------------------------------------------------------------------------------------
# EDGAR HTML

TABLE_ROWS = [
    ["", "2025", "2024", "2023"],
    ["Revenue", "$130,497", "$60,922", "$26,974"],
    ["Cost of revenue", "32,639", "16,621", "11,618"],
    ["Gross profit", "97,858", "44,301", "15,356"],
    ["Research and development", "12,914", "8,675", "7,339"],
    ["Operating income", "81,453", "32,972", "4,224"],
    ["Other income (expense), net", "(1,034)", "237", "(48)"],
    ["Net income", "$72,880", "$29,760", "$4,368"],
]


def edgar_cell(value: str) -> str:
    # EDGAR puts "$" and ")" in cells of their own and pads with empty spacer cells.
    dollar = '<td style="width:1%">$</td>' if value.startswith("$") else "<td></td>"
    close = "<td>)</td>" if value.endswith(")") else '<td style="width:1%">&#160;</td>'
    return f"{dollar}<td>{value.lstrip('$').rstrip(')')}</td>{close}"


EDGAR_TABLE = (
    "<table>\n"
    + "\n".join(
        f"<tr><td>{row[0]}</td>{''.join(edgar_cell(value) for value in row[1:])}</tr>"
        for row in TABLE_ROWS
    )
    + "\n</table>"
)

EDGAR_HTML = f"""<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL">
<head><title>acme-20250126</title><style>p {{ margin: 0 }}</style></head>
<body>
<div style="display:none"><ix:header><ix:hidden>
<ix:nonNumeric name="dei:DocumentFiscalYearFocus">HIDDEN-XBRL-2025</ix:nonNumeric>
</ix:hidden><ix:resources><xbrli:context id="c-1">0000000001</xbrli:context></ix:resources>
</ix:header></div>
<div><span style="font-weight:700">ACME WIDGETS CORPORATION</span></div>
<p>For the fiscal year ended January&#160;26, 2025</p>
<table>
<tr><td>Item 1.</td><td>Business</td><td>3</td></tr>
<tr><td>Item 7.</td><td>Management&#8217;s Discussion and Analysis</td><td>4</td></tr>
</table>
<p style="text-align:center">2</p>
<div style="page-break-after: always"></div>
<div><a href="#toc">Table of Contents</a></div>
<p><b>PART I</b></p>
<p><b>Item 1.</b> <b>Business</b></p>
<p>Acme Widgets designs   widgets &amp; gadgets
for data centers.</p>
<p>Acme sells them in 40 countries.<br/>It employs 1,200 people.</p>
<p style="text-align:center">3</p>
<hr style="page-break-after:always"/>
<div style="PAGE-BREAK-BEFORE : Always"><span style="font-weight:bold">Item 7. Management&#8217;s
Discussion and Analysis of Financial Condition and Results of Operations</span></div>
<p>Revenue more than doubled, as the table below shows.</p>
{EDGAR_TABLE}
<p>Gross margin rose to 75.0%.</p>
<script>var note = "Item 9. not text";</script>
</body></html>
"""


def test_edgar_html(tmp_path: Path) -> None:
    path = tmp_path / "acme-20250126.htm"
    path.write_text(EDGAR_HTML, encoding="utf-8")
    chunks = chunk_filing(read_filing(path))
    assert sections(chunks) == ["Front matter", "Item 1", "Item 7"]
    everything = "\n".join(chunk.text for chunk in chunks)
    for hidden in ("HIDDEN-XBRL", "0000000001", "acme-20250126", "margin: 0", "Item 9", "Table of"):
        assert hidden not in everything

    item1 = [chunk for chunk in chunks if chunk.section == "Item 1"]
    assert [chunk.text for chunk in item1] == [
        "PART I\n\nItem 1. Business\n\n"
        "Acme Widgets designs widgets & gadgets for data centers.\n\n"
        "Acme sells them in 40 countries.\n\nIt employs 1,200 people."
    ]

    item7 = [chunk for chunk in chunks if chunk.section == "Item 7"]
    assert [chunk.content_type for chunk in item7] == ["text", "table", "text"]
    before, table, after = item7
    assert before.text == (
        "Item 7. Management’s Discussion and Analysis of Financial Condition and Results of "
        "Operations\n\nRevenue more than doubled, as the table below shows."
    )
    assert after.text == "Gross margin rose to 75.0%."
    lines = table.text.split("\n")
    assert len(lines) == len(TABLE_ROWS) + 1  # the header rule after the first row
    assert lines[0] == "|  | 2025 | 2024 | 2023 |"
    assert lines[1] == "| --- | --- | --- | --- |"
    assert lines[-1] == "| Net income | $72,880 | $29,760 | $4,368 |"
    for row in TABLE_ROWS:
        for value in row:
            assert value in table.text
    # The TOC is a table too: it stays whole in the front matter and makes no sections.
    assert [chunk.content_type for chunk in chunks if chunk.section == "Front matter"] == [
        "text",
        "table",
    ]
    # Cover, then a page-break-after div, an <hr>, and a page-break-before div.
    assert [chunk.page_id for chunk in chunks] == [
        "page_1",
        "page_1",
        "page_2",
        "page_3",
        "page_3",
        "page_3",
    ]
    assert infer_filing_metadata(path, everything) == ("ACME", 2025)


def test_html_layout_tables_and_sloppy_markup(tmp_path: Path) -> None:
    path = tmp_path / "filing.html"
    path.write_text(
        "<html><body><ix:header><ix:hidden>HIDDEN</ix:hidden></ix:header><p>Cover"
        "<table><tr><td><b>Item 1A.</b></td><td><b>Risk Factors</b></td></tr></table>"
        "<div>Risks <i>abound</i><table><tr><td>•</td><td>Bullet text.</td></tr></table>"
        "<table><tr><th>a<th>b<tr><td>1<td>2<tr><td>3<td>4</table>"
        "<h2>Item 7. MD&A</h2><ul><li>one<li>two</ul><p>unclosed <b>bold",
        encoding="utf-8",
    )
    # One-row tables are EDGAR layout (headings, bullets): text. Unclosed tags still close.
    assert read_filing(path) == [
        Block("text", "Cover"),
        Block("heading", "Item 1A. Risk Factors"),
        Block("text", "Risks abound"),
        Block("text", "• Bullet text."),
        Block("table", "| a | b |\n| --- | --- |\n| 1 | 2 |\n| 3 | 4 |"),
        Block("heading", "Item 7. MD&A"),
        Block("text", "one"),
        Block("text", "two"),
        Block("text", "unclosed bold"),
    ]


def test_html_malformed_markup(tmp_path: Path) -> None:
    path = tmp_path / "filing.htm"
    path.write_text(
        "<p>Revenue < cost &amp; 3<5</p>"  # a "<" that starts no tag is text
        "<p title='a > b'>Quoted</p>"  # a quoted ">" does not end the tag
        "<!-- <p>commented out</p> --><![ a ><?php x ?><!DOCTYPE html></>"
        "<script>document.write('<p>not text</p>')</script>"
        "<p>Last</p><p>cut off <a href='x"  # a tag left open at the end is dropped
    )
    # html.parser raised AssertionError on "<![ a >".
    assert read_filing(path) == text_blocks("Revenue < cost & 3<5", "Quoted", "Last", "cut off")


def test_html_table_rows_are_padded_to_the_widest(tmp_path: Path) -> None:
    path = tmp_path / "filing.htm"
    row = "<tr><td>Revenue</td><td>1</td><td>2</td></tr>"
    path.write_text(f"<table><tr><td>Costs:</td></tr>{row}</table>")
    assert read_filing(path) == [
        Block("table", "| Costs: |  |  |\n| --- | --- | --- |\n| Revenue | 1 | 2 |")
    ]
    # Padding every row to one far wider would grow as rows x width: those rows stay short.
    wide = "<tr>" + "<td>x</td>" * 10 + "</tr>"
    path.write_text("<table>" + wide + "<tr><td>y</td></tr>" * 10 + "</table>")
    (table,) = read_filing(path)
    assert table.text.split("\n")[:3] == [
        "| " + " | ".join(["x"] * 10) + " |",
        "| " + " | ".join(["---"] * 10) + " |",
        "| y |",
    ]


def test_html_is_sniffed_from_content(tmp_path: Path) -> None:
    path = tmp_path / "filing.txt"
    path.write_text("<html><body><div>Item 7. MD&amp;A</div><p>Sales grew.</p></body></html>")
    assert read_filing(path) == [Block("heading", "Item 7. MD&A"), Block("text", "Sales grew.")]


# ---------------------------------------------------------------------------------------------
# Markdown and plain text

MARKDOWN = """# ACME CORP FORM 10-K

For the fiscal year ended December 31, 2024.

## Table of Contents

| Item | Page |
|---|---|
| Item 1. Business | 3 |
| Item 7. MD&A | 9 |

## Item 1. Business

We make widgets
in three factories.

Second paragraph.

## Item 7. Management's Discussion and Analysis

Revenue grew 10%.

| Segment | 2024 | 2023 |
|---|---|---|
| Widgets | $10 | $8 |

After the table.
"""


def test_markdown(tmp_path: Path) -> None:
    path = tmp_path / "ACME_10k_2024.md"
    path.write_text(MARKDOWN, encoding="utf-8")
    chunks = chunk_filing(read_filing(path))
    assert [(chunk.section, chunk.content_type, chunk.text) for chunk in chunks] == [
        (
            "Front matter",
            "text",
            "ACME CORP FORM 10-K\n\nFor the fiscal year ended December 31, 2024.",
        ),
        (
            "Front matter",
            "table",
            "| Item | Page |\n|---|---|\n| Item 1. Business | 3 |\n| Item 7. MD&A | 9 |",
        ),
        (
            "Item 1",
            "text",
            "Item 1. Business\n\nWe make widgets in three factories.\n\nSecond paragraph.",
        ),
        ("Item 7", "text", "Item 7. Management's Discussion and Analysis\n\nRevenue grew 10%."),
        ("Item 7", "table", "| Segment | 2024 | 2023 |\n|---|---|---|\n| Widgets | $10 | $8 |"),
        ("Item 7", "text", "After the table."),
    ]
    assert {chunk.page_id for chunk in chunks} == {"page_1"}
    assert infer_filing_metadata(path) == ("ACME", 2024)


def test_plain_text_page_breaks_and_xbrl_residue(tmp_path: Path) -> None:
    path = tmp_path / "ACME_10-K-2025-02-07.txt"
    lines = [
        "acme-20241231",
        "false2024FY0000000001P1Yhttp://fasb.org/us-gaap/2024#Revenuesxbrli:sharesiso4217:USD",
        "Table of Contents",
        "FORM10-K",
        "For the fiscal year endedDecember 31, 2024",
        "Item 1.",
        "Business",
        "3",
        "Item 7.",
        "Management’s Discussion",
        "9",
        "2",
        "Table of Contents",
        "PART I",
        "Item 1.",
        "Business",
        "Acme makes widgets in three factories, and it ships them",
        "3",
        "Table of Contents",
        "to customers in 40 countries.",
        "Item 7.",
        "Management’s Discussion",
        "Sales grew.",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    blocks = read_filing(path)
    assert blocks[0] == Block("text", "FORM10-K")
    assert Block("page_break") in blocks and not any("Table of" in b.text for b in blocks)
    chunks = chunk_filing(blocks)
    assert [(chunk.section, chunk.page_id, chunk.text) for chunk in chunks][1:] == [
        (
            "Item 1",
            "page_2",
            "PART I\n\nItem 1. Business\n\n"
            "Acme makes widgets in three factories, and it ships them "
            "to customers in 40 countries.",
        ),
        ("Item 7", "page_3", "Item 7. Management’s Discussion\n\nSales grew."),
    ]
    assert infer_filing_metadata(path, path.read_text()) == ("ACME", 2024)


# ---------------------------------------------------------------------------------------------
# Packing and splitting


def text_blocks(*texts: str) -> list[Block]:
    return [Block("text", text) for text in texts]


def test_long_paragraph_is_split_at_sentence_ends() -> None:
    sentences = [
        f"Acme Inc. sold {n} widgets to the U.S. Government in quarter {n}, a record."
        for n in range(30)
    ]
    paragraph = " ".join(sentences)
    assert count_regex(paragraph) > 300
    chunks = chunk_filing(text_blocks(paragraph), max_tokens=64)
    assert len(chunks) > 4
    for chunk in chunks:
        assert chunk.n_tokens <= 64
        assert chunk.text.endswith(", a record.") and chunk.text.startswith("Acme Inc. sold")
    assert " ".join(chunk.text for chunk in chunks) == paragraph


def test_short_paragraphs_are_never_split() -> None:
    paragraphs = [f"Paragraph {n} has ten tokens counting the final period." for n in range(10)]
    assert {count_regex(paragraph) for paragraph in paragraphs} == {10}
    chunks = chunk_filing(text_blocks(*paragraphs), max_tokens=25)
    # Greedy: two paragraphs (20 tokens) fit in 25, a third does not.
    assert [chunk.text.split("\n\n") for chunk in chunks] == [
        paragraphs[i : i + 2] for i in range(0, 10, 2)
    ]
    assert [chunk.chunk_index for chunk in chunks] == [0, 1, 2, 3, 4]


def test_overlong_sentence_is_split_at_spaces_and_overlong_word_at_characters() -> None:
    sentence = " ".join(f"word{n}" for n in range(100))
    chunks = chunk_filing(text_blocks(sentence), max_tokens=30)
    assert all(chunk.n_tokens <= 30 for chunk in chunks)
    assert [chunk.text.split() for chunk in chunks] == [
        [f"word{n}" for n in range(i, min(i + 30, 100))] for i in range(0, 100, 30)
    ]
    run = "-" * 50  # 50 punctuation tokens, no space to split at
    chunks = chunk_filing(text_blocks(run), max_tokens=8)
    assert "".join(chunk.text for chunk in chunks) == run
    assert [chunk.n_tokens for chunk in chunks] == [8] * 6 + [2]


def test_table_is_kept_whole_and_sections_are_not_crossed() -> None:
    table = "| a | b |\n| --- | --- |\n" + "\n".join(f"| row {n} | {n} |" for n in range(40))
    blocks = [
        Block("heading", "Item 7. MD&A"),
        *text_blocks("Before the table."),
        Block("table", table),
        *text_blocks("After the table."),
        Block("page_break"),
        Block("heading", "Item 8. Financial Statements"),
        *text_blocks("Short."),
    ]
    chunks = chunk_filing(blocks, max_tokens=50)
    assert [(c.section, c.chunk_index, c.content_type, c.page_id) for c in chunks] == [
        ("Item 7", 0, "text", "page_1"),
        ("Item 7", 1, "table", "page_1"),
        ("Item 7", 2, "text", "page_1"),
        ("Item 8", 0, "text", "page_2"),
    ]
    assert chunks[1].text == table and chunks[1].n_tokens > 50


def test_toc_entries_do_not_open_sections() -> None:
    blocks = text_blocks(
        "Cover page.",
        "Item 1.",
        "Business",
        "3",
        "Item 6.",
        "[Reserved]",
        "5",
        "Item 7.",
        "MD&A",
        "6",
        "ITEM 1.BUSINESS",
        "We make widgets.",
        "ITEM 6.[Reserved]",  # really empty, but the last occurrence: still a section
        "ITEM 7.MD&A",
        "Sales grew.",
        "Item 7 of this report is a cross-reference, not a heading.",
    )
    chunks = chunk_filing(blocks)
    assert [(chunk.section, chunk.text) for chunk in chunks] == [
        (
            "Front matter",
            "Cover page.\n\nItem 1. Business\n\n3\n\nItem 6. [Reserved]\n\n5\n\nItem 7. MD&A\n\n6",
        ),
        ("Item 1", "ITEM 1.BUSINESS\n\nWe make widgets."),
        ("Item 6", "ITEM 6.[Reserved]"),
        (
            "Item 7",
            "ITEM 7.MD&A\n\nSales grew.\n\n"
            "Item 7 of this report is a cross-reference, not a heading.",
        ),
    ]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        chunk_filing(text_blocks("x"), max_tokens=0)
    with pytest.raises(ValueError, match="paragraph"):
        chunk_filing([Block("paragraph", "x")])


# ---------------------------------------------------------------------------------------------
# Token counters and metadata


def test_regex_counter() -> None:
    # Amazon ’ s revenue grew 11 % to $ 638 . 0 billion .
    assert count_regex("Amazon’s revenue grew 11% to $638.0 billion.") == 14
    assert count_regex("") == 0
    assert count_regex("  \n\n ") == 0


def test_unknown_tokenizer_without_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes the import fail
    with pytest.raises(FinReflectError, match=re.escape(install_hint("hf"))) as error:
        token_counter("no-such-org/no-such-tokenizer")
    message = str(error.value)
    assert "\n" not in message and install_hint("hf") in message and "regex" in message


def test_unknown_tokenizer_with_transformers(tmp_path: Path) -> None:
    require("transformers", "[hf] extra")
    # Paths, so that neither fails by way of a network call.
    missing, empty = tmp_path / "no-such-tokenizer", tmp_path / "empty"
    empty.mkdir()
    for name in (str(missing), str(empty)):
        with pytest.raises(FinReflectError, match=r"^cannot load tokenizer") as error:
            token_counter(name)
        message = str(error.value)
        assert "\n" not in message and message.startswith(f"cannot load tokenizer {name!r}: ")


def test_local_hf_tokenizer(tmp_path: Path) -> None:
    require("transformers", "[hf] extra")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "revenue": 1, "grew": 2, ".": 3}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(tmp_path)
    count = token_counter(str(tmp_path))
    assert count("revenue grew 11%.") == 4  # revenue, grew, [UNK] ("11"), [UNK] ("%.")
    chunks = chunk_filing(
        text_blocks("revenue grew.", "revenue grew."), max_tokens=4, count_tokens=count
    )
    assert [chunk.n_tokens for chunk in chunks] == [3, 3]


def test_infer_filing_metadata_on_a_long_whitespace_run() -> None:
    # The cover-page regex backtracked through the run: this took half a minute.
    text = "For the fiscal year ended" + " " * 20_000 + "December 31, 2024"
    start = time.perf_counter()
    assert infer_filing_metadata(Path("/filings/report.txt"), text) == (None, None)
    assert time.perf_counter() - start < 1
    text = "For the fiscal\nyear ended \u00a0\n December 31 ,\n\n2024"
    assert infer_filing_metadata(Path("/filings/report.txt"), text) == (None, 2024)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("AMZN_10-K-2025-02-07.txt", None, ("AMZN", 2024)),
        ("amzn_10k_2024.pdf", None, ("AMZN", 2024)),
        ("nvda-20250126.htm", None, ("NVDA", 2025)),
        (
            "NVDA_10-K-2025-02-26.txt",
            "FORM 10-K For the fiscal year endedJanuary 26, 2025",
            ("NVDA", 2025),
        ),
        ("NVDA_10-K-2025-02-26.txt", "no cover page here", ("NVDA", 2024)),
        ("report.txt", "For the Fiscal Year Ended Sept. 28, 2024", (None, 2024)),
        ("annual report.txt", None, (None, None)),
    ],
)
def test_infer_filing_metadata(
    name: str, text: str | None, expected: tuple[str | None, int | None]
) -> None:
    assert infer_filing_metadata(Path("/filings") / name, text) == expected


def _repeat(unit: str, before: str = "", after: str = "") -> Callable[[int], str]:
    """A filing body of about `size` characters: `unit` repeated between `before` and `after`."""
    return lambda size: before + unit * (size // len(unit)) + after


def _ragged_table(size: int) -> str:
    """A table of one row of size/20 cells, then size/38 rows of one cell each."""
    wide = "<tr>" + "<td>x</td>" * (size // 20) + "</tr>"
    return "<table>" + wide + "<tr><td>y</td></tr>" * (size // 38) + "</table>"


# Hostile filing bodies by size, after an "Item 1. Business" heading: each once made chunking
# superlinear, or is a shape that could.
HOSTILE_FILINGS: dict[str, tuple[str, Callable[[int], str]]] = {
    "txt-dashes": (".txt", _repeat("-")),
    "txt-dots": (".txt", _repeat(".")),
    "txt-equals": (".txt", _repeat("=")),
    "txt-stars": (".txt", _repeat("*")),
    "txt-underscores": (".txt", _repeat("_")),
    "txt-pipes": (".txt", _repeat("|")),
    "txt-table-rows": (".txt", _repeat("| Revenue | $1,000 | (20)% |\n")),
    "txt-endless-word": (".txt", _repeat("abcdefghij")),
    "txt-endless-paragraph": (".txt", _repeat("word ")),
    "txt-endless-lines": (".txt", _repeat("x\n")),
    "txt-whitespace": (".txt", _repeat(" \t\u00a0", before="x", after="y")),
    "txt-mixed": (".txt", _repeat("a.b, c-d! (e) $1.0% ")),
    "txt-mixed-without-spaces": (".txt", _repeat("a.b,c-d!(e)$1.0%")),
    "txt-sentences": (".txt", _repeat("Acme Inc. sold U.S. goods. ")),
    "txt-headings": (".txt", _repeat("Part I\nItem 1.\nBusiness\nWe make widgets.\n")),
    "txt-page-breaks": (".txt", _repeat("a paragraph cut by a page break\n3\nTable of Contents\n")),
    "htm-dashes": (".htm", _repeat("-", before="<p>")),
    "htm-endless-word": (".htm", _repeat("abcdefghij", before="<p>")),
    "htm-endless-paragraph": (".htm", _repeat("word ", before="<p>")),
    "htm-endless-lines": (".htm", _repeat("x\n", before="<p>")),
    "htm-whitespace": (".htm", _repeat(" \t&#160;", before="<p>x", after="y")),
    "htm-mixed": (".htm", _repeat("a.b, c-d! (e) $1.0% ", before="<p>")),
    "htm-endless-tags": (".htm", _repeat("<div>")),
    "htm-nested-spans": (".htm", _repeat("<span>x")),
    "htm-endless-tag": (".htm", _repeat('b="c" ', before="<div ", after=">")),
    "htm-stray-end-tags": (".htm", _repeat("<div></i>")),
    "htm-table-rows": (
        ".htm",
        _repeat("<tr><td>a</td><td>$</td><td>1</td></tr>", before="<table>", after="</table>"),
    ),
    "htm-glued-cells": (
        ".htm",
        _repeat("<td>)", before="<table><tr><td>1", after="</tr><tr><td>2</table>"),
    ),
    "htm-ragged-table": (".htm", _ragged_table),
    "htm-less-than": (".htm", _repeat("<", before="<p>")),
    "htm-ampersands": (".htm", _repeat("&", before="<p>")),
    "htm-unclosed-tags": (".htm", _repeat("<a ")),
    "htm-unclosed-end-tags": (".htm", _repeat("</")),
    "htm-unclosed-declarations": (".htm", _repeat("<!")),
    "htm-unclosed-instructions": (".htm", _repeat("<? a")),
    "htm-unclosed-comments": (".htm", _repeat("<!-- a >")),
    "htm-unclosed-quotes": (".htm", _repeat("<a x='>")),
    "htm-unclosed-marked-sections": (".htm", _repeat("<![ a >")),
    "md-heading-spaces": (".md", _repeat(" ", before="# x", after="y\n")),
}
HEADINGS = {
    ".txt": "Item 1. Business\n",
    ".htm": "<p>Item 1. Business</p>",
    ".md": "## Item 1. Business\n\n",
}


class _TooSlow(Exception):
    pass


def _chunking_seconds(path: Path, limit: float) -> float:
    """Seconds `build_spans` takes on `path`, or inf, stopped, once over `limit` seconds: on
    quadratic code a 4 MB filing would take hours."""
    from finreflect_eval.data import build_spans

    def stop(signum: int, frame: object) -> None:
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        start = time.perf_counter()
        build_spans([path], fiscal_year=2024)
        return time.perf_counter() - start
    except _TooSlow:
        return float("inf")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs SIGALRM to stop slow runs")
@pytest.mark.parametrize("shape", sorted(HOSTILE_FILINGS))
def test_chunking_takes_time_linear_in_the_input(tmp_path: Path, shape: str) -> None:
    """Chunking a hostile filing takes time linear in its size: the time per byte at 4x the base
    size is within 1.5x of that at the base size, start-up (the time for a 1 kB filing) excluded.
    Quadratic work makes it 4x, while a bound on the whole time (4x input under 8x time) lets
    quadratic work with a start-up cost pass. The base size starts at 1 MB and doubles (to 8 MB at
    most) until chunking it takes a quarter second: on faster shapes the machine's noise would be
    larger than the work. Each time is the best of up to three runs, against noise."""
    suffix, body = HOSTILE_FILINGS[shape]

    def filing(size: int) -> Path:
        path = tmp_path / f"ACME_{size}{suffix}"
        if not path.exists():
            path.write_text(HEADINGS[suffix] + body(size), encoding="utf-8")
        return path

    startup = min(_chunking_seconds(filing(1_000), 20) for _ in range(3))
    assert startup < 20, f"{shape}: over 20 s for 1 kB"
    size = 1_000_000
    # Linear chunking takes a few seconds per MB at most; 20 s is a failure already.
    base = _chunking_seconds(filing(size), 20) - startup
    while base < 0.25 and size < 8_000_000:
        size *= 2
        base = _chunking_seconds(filing(size), 20) - startup
    assert base < 20, f"{shape}: over 20 s for {size / 1e6:g} MB"
    four_times = float("inf")
    for attempt in range(3):
        if attempt:
            base = min(base, _chunking_seconds(filing(size), 20) - startup)
        # 20 ms per MB of slack: below that the timer's noise is larger than the work.
        allowed = 4 * (1.5 * base + 0.02 * size / 1e6)
        # Stopped at twice what is allowed: quadratic code on 4x the input would take long.
        taken = _chunking_seconds(filing(4 * size), startup + 2 * allowed) - startup
        four_times = min(four_times, taken)
        if four_times <= allowed:
            return
    pytest.fail(
        f"{shape}: {base:.2f} s for {size / 1e6:g} MB, {four_times:.2f} s (allowed {allowed:.2f})"
        f" for {4 * size / 1e6:g} MB"
    )


def test_chunking_a_large_filing_runs_no_full_garbage_collection(tmp_path: Path) -> None:
    """Reading and chunking a filing pause Python's cycle collector: a filing is read into
    hundreds of thousands of blocks, and each full collection scans them all, which made the time
    per byte grow with the filing (0.41 s for 1 MB, 2.77 s for 4 MB on a CI machine). The
    collector's state is restored afterwards."""
    import gc

    path = tmp_path / "ACME_10-K.txt"
    path.write_text(
        HEADINGS[".txt"] + _repeat("Part I\nItem 1.\nBusiness\nWe make widgets.\n")(2_000_000),
        encoding="utf-8",
    )
    full_collections = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full_collections.append(info)

    gc.callbacks.append(count)
    try:
        chunk_filing(read_filing(path))
    finally:
        gc.callbacks.remove(count)
    assert full_collections == []
    assert gc.isenabled()
    gc.disable()
    try:
        chunk_filing(read_filing(path))
        assert not gc.isenabled(), "a caller's disabled collector was turned on"
    finally:
        gc.enable()
