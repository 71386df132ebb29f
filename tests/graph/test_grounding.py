"""Deterministic grounding: the quantities of a triple against its span's text, on real 10-K
text (read from ../shared/data/10k_text, never copied here) and on a case for each rule."""

from __future__ import annotations

import dataclasses
import random
import time
from decimal import Decimal

import pytest
from conftest import SHARED_10K, missing

from finreflect_eval.graph import grounding
from finreflect_eval.graph.grounding import (
    RULES,
    Quantity,
    ground_spans,
    ground_triple,
    grounding_counts,
    quantities,
)

SPAN = 2_000  # the size of a span of the benchmark


def filing(name: str) -> str:
    path = SHARED_10K / name
    if not path.is_file():
        missing(f"real 10-K text not found: {path}")
    return path.read_text(encoding="utf-8")


def window(name: str, anchor: str) -> str:
    """A span-sized window of a real filing around `anchor` (which it holds once)."""
    text = filing(name)
    assert text.count(anchor) == 1, anchor
    middle = text.index(anchor) + len(anchor) // 2
    return text[middle - SPAN // 2 : middle + SPAN // 2]


def check(text: str, value: str, subject: str = "Company") -> bool | None:
    return ground_triple(subject, value, quantities(text))


# --- real 10-K text -----------------------------------------------------------------------


AMZN, GOOGL, NVDA = (
    "AMZN_10-K-2025-02-07.txt",
    "GOOGL_10-K-2025-02-05.txt",
    "NVDA_10-K-2025-02-26.txt",
)


def test_amazon_income_statement_in_millions():
    """AMZN's statement of operations: '(in millions, except per share data)', then Total net
    sales 637,959 (2024) on a line of its own."""
    span = window(AMZN, "Total net sales\n513,983\n574,785\n637,959")
    assert "(in millions, except per share data)" in span
    for right in ("637,959", "$637,959 million", "$638.0 billion", "$638 billion", "0.6 trillion"):
        assert check(span, right) is True, right
    for wrong in ("$637.8 billion", "$639 billion", "$636,959 million"):
        assert check(span, wrong) is False, wrong
    # more precise than the text (which is exact to the million)
    assert check(span, "$637,959.4 million") is False
    assert check(span, "$637.9594 billion") is False
    # the table's note is what scales it: without the note 637,959 is only 637,959
    bare = span.replace("(in millions, except per share data)", "")
    assert check(bare, "637,959") is True
    assert check(bare, "$638.0 billion") is False


def test_alphabet_dividends_scaled():
    """GOOGL: 'were $3.5 billion, $519 million, and $3.3 billion' (Class A, B, C dividends)."""
    span = window(GOOGL, "were $3.5 billion, $519 million, and $3.3 billion, respectively")
    for right in ("$519 million", "$0.519 billion", "$0.52 billion", "$0.5 billion", "519"):
        assert check(span, right, "Class B dividends") is True, right
    assert check(span, "$0.51 billion", "Class B dividends") is False  # wrong
    assert check(span, "$0.53 billion", "Class B dividends") is False  # wrong
    # The same number written with more digits is that number; a different one is not.
    assert check(span, "$519.0 million", "Class B dividends") is True
    assert check(span, "$0.5190 billion", "Class B dividends") is True
    assert check(span, "$519.4 million", "Class B dividends") is False  # more precise, other
    assert check(span, "$7.4 billion", "Total dividends") is True
    assert check(span, "$7,400 million", "Total dividends") is True
    assert check(span, "$7,412 million", "Total dividends") is False


def test_alphabet_glued_text():
    """The filings' text often runs words and figures together: 'increased$10.1 billionfrom
    2023 to 2024', 'year endedDecember 31, 2024total'."""
    span = window(GOOGL, "Google Cloud revenues increased$10.1 billionfrom 2023 to 2024")
    assert check(span, "$10.1 billion", "Google Cloud revenues") is True
    assert check(span, "10,100 million", "Google Cloud revenues") is True
    assert ground_triple("Google Cloud 2024", "$10 billion", quantities(span)) is True
    span = window(GOOGL, "$519 million, and $3.3 billionfor Class A")
    assert check(span, "$3.3 billion", "Class C dividends") is True
    assert check(span, "December 31, 2024") is True
    assert check(span, "2024-12-31") is True


def test_nvidia_percentage_and_fiscal_year():
    """NVDA: 'Data Center revenue for fiscal year 2025 was up 142% from a year ago.'"""
    span = window(NVDA, "Data Center revenue for fiscal year 2025 was up 142% from a year ago.")
    assert "2019" not in span and "2026" not in span
    for right in ("142%", "142 percent", "up 142 %"):
        assert check(span, right, "Data Center revenue") is True, right
    assert check(span, "124%", "Data Center revenue") is False  # wrong
    assert (
        check(span, "142.0%", "Data Center revenue") is True
    )  # the same number, written with more digits
    assert check(span, "142", "Data Center revenue") is False  # a number is not a percentage
    for year in ("FY2025", "FY25", "FY 2025", "fiscal 2025", "fiscal year 2025", "2025"):
        assert ground_triple(f"Data Center revenue {year}", "142%", quantities(span)), year
    assert ground_triple("Data Center revenue FY2026", "142%", quantities(span)) is False
    assert ground_triple("Data Center revenue FY2019", "142%", quantities(span)) is False
    assert check(span, "$130.5 billion", "Revenue FY2025") is True
    assert check(span, "$130.6 billion", "Revenue FY2025") is False


def test_nvidia_date_in_other_formats():
    """NVDA: 'As of January 26, 2025, we had $43.2 billion in cash, cash equivalents, and
    marketable securities.'"""
    span = window(NVDA, "As of January 26, 2025, we had $43.2 billion in cash")
    for date in ("2025-01-26", "Jan. 26, 2025", "Jan 26 2025", "26 January 2025", "01/26/2025"):
        assert check(span, date, "Cash as of") is True, date
    assert check(span, "January 2025", "Cash as of") is True  # less precise
    assert check(span, "January 28, 2025", "Cash as of") is False
    assert check(span, "2025-01-25", "Cash as of") is False
    assert check(span, "$43.2 billion") is True
    assert check(span, "$43 billion") is True
    assert check(span, "$43,200 million") is True  # the same number, written with more digits
    assert check(span, "$42.3 billion") is False


def test_amazon_percentage_and_scaled_prose():
    span = window(AMZN, "AWS sales increased 19% in 2024, compared to the prior year.")
    assert ground_triple("AWS sales 2024", "19%", quantities(span)) is True
    assert ground_triple("AWS sales 2024", "91%", quantities(span)) is False
    assert ground_triple("AWS sales 2024", "19.0%", quantities(span)) is True
    span = window(AMZN, "reduced technology and infrastructure costs by $244 million in 2024")
    assert check(span, "$0.24 billion", "Foreign exchange") is True
    assert check(span, "$0.244 billion", "Foreign exchange") is True
    assert check(span, "$0.25 billion", "Foreign exchange") is False


def test_every_figure_of_real_text_grounds_itself(filings):
    """Each quantity read from a real span, written as the span writes it, grounds in it."""
    rng = random.Random(7)
    for path in filings:
        text = path.read_text(encoding="utf-8")
        for _ in range(40):
            start = rng.randrange(20_000, len(text) - SPAN)
            span = text[start : start + SPAN]
            found = quantities(span)
            for quantity in found:
                if not quantity.note:
                    assert ground_triple("X", quantity.text, found) is True, quantity


def test_fast_scan_finds_what_a_full_scan_finds(filings, monkeypatch):
    """`quantities` tries the pattern only a few characters before each digit; on real text
    that finds exactly what trying it at every character finds."""
    rng = random.Random(3)
    spans = []
    for path in filings:
        text = path.read_text(encoding="utf-8")
        for _ in range(100):
            start = rng.randrange(0, len(text) - SPAN)
            spans.append(text[start : start + SPAN])
    spans.append("in the third fiscal quarter of fiscal year 2024, up 5% in Q3 FY24")
    fast = [quantities(span) for span in spans]
    monkeypatch.setattr(grounding, "_LOOKBACK", 10**9)
    monkeypatch.setattr(grounding, "_QUARTER_LOOKBACK", 10**9)
    assert [quantities(span) for span in spans] == fast


# --- each rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        # thousands separators
        ("revenue of 391,035 units", "391035", True),
        ("revenue of 391035 units", "391,035", True),
        ("revenue of 391,035 units", "391,036", False),
        # currency signs and words
        ("sales were $5.2 billion", "5.2 billion USD", True),
        ("sales were $5.2 billion", "USD 5.2 billion", True),
        ("sales were 5.2 billion dollars", "$5.2 billion", True),
        ("sales were €5.2 billion", "$5.2 billion", True),
        ("sales were US$5.2 billion", "5.2 billion", True),
        # scale words
        ("a $300 thousand grant", "$0.3 million", True),
        ("a backlog of $1,200 billion", "$1.2 trillion", True),
        ("a backlog of $1.2 trillion", "$1,200 billion", True),
        ("5.2 billion", "5,200 million", True),
        ("5,200 million", "5.2 billion", True),
        ("5,200 millions of shares", "5.2 billion", True),
        # abbreviations
        ("sales were $5.2 billion", "$5.2B", True),
        ("sales were $5.2 billion", "$5.2bn", True),
        ("sales were $5.2 billion", "5.2bn", True),
        ("sales were $5.2 billion", "5.2 Bn", True),
        ("a $300 thousand grant", "$300k", True),
        ("a $4.5 million fine", "$4.5M", True),
        ("a $4.5 million fine", "$4.5mm", True),
        ("a $4.5 million fine", "USD 4.5m", True),
        ("a $4.5 million fine", "$4.6M", False),
        ("sales were $5.2B", "$5.2 billion", True),
        ("sales were $5,200M", "$5.2 billion", True),
        # percentages
        ("margin was 12%", "12 percent", True),
        ("margin was 12 percent", "12%", True),
        ("margin was 12 per cent", "12 pct", True),
        ("margin rose 3 percentage points", "3%", True),
        ("margin was 12.4%", "12%", True),
        ("margin was 12%", "12.0%", True),
        ("margin was 12%", "12.4%", False),
        ("margin was 12%", "13%", False),
        ("Gross margin\n75.0\n%", "75%", True),
        ("change (5)%", "-5%", True),
        ("margin was 12%", "12", False),
        ("12 stores", "12%", False),
        # signs and negative amounts in parentheses: compared by size
        ("Net loss\n(1,234)", "-1,234", True),
        ("Net loss\n$\n(1,234)", "loss of $1,234", True),
        # precision: round the text, never add to it; trailing zeros count
        ("revenue $391,035 million", "391.0 billion", True),
        ("revenue $391,035 million", "$391 billion", True),
        ("revenue $391,035 million", "$0.4 trillion", True),
        ("revenue $391,035 million", "$390.1 billion", False),
        ("revenue $391,035 million", "$390 billion", False),
        ("revenue 391.0 billion", "$391,035 million", False),
        ("revenue 391.0 billion", "391.04 billion", False),
        ("revenue 391.0 billion", "$391 billion", True),
        ("revenue $153 billion", "$150 billion", False),
        ("revenue $1.45 billion", "$1.4 billion", True),
        ("revenue $1.45 billion", "$1.5 billion", True),
        ("revenue $1.46 billion", "$1.4 billion", False),
        # a scaled figure's digits, as written, without the scale
        ("revenue $391,035 million", "391,035", True),
        ("revenue $391,035 million", "391", False),
        # a table's scale note
        ("(in thousands)\nRevenue\n12,345", "$12.3 million", True),
        ("(Dollars in billions)\nRevenue\n12.3", "$12.3 billion", True),
        ("Revenue\n12,345", "$12.3 million", False),
        ("(in millions)\nMargin\n12.5%", "12.5 million", False),
        # dates in other formats
        ("ended September 28, 2024", "Sept. 28, 2024", True),
        ("ended September 28, 2024", "2024-09-28", True),
        ("ended September 28, 2024", "09/28/2024", True),
        ("ended September 28, 2024", "9/28/24", True),
        ("ended September 28, 2024", "28 September 2024", True),
        ("ended Sept. 28, 2024", "September 28th, 2024", True),
        ("ended 2024-09-28", "September 28, 2024", True),
        ("ended September 28, 2024", "September 2024", True),
        ("ended September 28, 2024", "September 29, 2024", False),
        ("ended September 2024", "September 28, 2024", False),
        ("ended September 28, 2024", "October 2024", False),
        ("paid in June of 2024", "June 2024", True),
        ("Dividends paid in JUNE 2024", "2024-06-28", False),
        # years and fiscal years
        ("in fiscal 2024", "FY2024", True),
        ("in fiscal year 2024", "FY24", True),
        ("in FY'24", "fiscal year 2024", True),
        ("in FY2024", "2024", True),
        ("in 2024", "fiscal 2024", True),
        ("ended September 28, 2024", "2024", True),
        ("ended September 28, 2024", "FY2023", False),
        ("in fiscal 2024", "FY2025", False),
        ("2,024 stores", "2024", True),
        ("in 2024", "2,024", True),
        ("in 2024", "$2,024", True),
        # quarters
        ("in Q3 2024", "third quarter of 2024", True),
        ("in the third quarter of fiscal 2024", "Q3 FY24", True),
        ("in the fourth quarter of fiscal year 2024", "Q4 fiscal 2024", True),
        ("in 3Q24", "Q3'24", True),
        ("in Q3 of 2024", "3rd quarter 2024", True),
        ("in Q3 2024", "Q2 2024", False),
        ("in Q3 2024", "2024", True),
        ("in 2024", "Q3 2024", False),
        ("ended September 28, 2024", "Q3 2024", False),
        # words and figures run together, as the filings' text has them
        ("up approximately50%", "50%", True),
        ("$211 millionin2023and2024", "$211 million", True),
        ("$211 millionin2023and2024", "2023", True),
        ("were$3.3 billionfor Class C", "$3.3 billion", True),
        ("year endedDecember 31, 2024total", "2024-12-31", True),
    ],
)
def test_rule(text, value, expected):
    assert check(text, value) is expected


@pytest.mark.parametrize(
    "value",
    [
        "Form 10-K",
        "Annual Report on 10-Q",
        "Item 1A",
        "Items 7 and 7A",
        "Rule 10b5-1",
        "10b5-1 trading plan",
        "S&P 500",
        "Russell 2000 index",
        "Nasdaq-100",
        "H100",
        "GB200 NVL72",
        "COVID-19",
        "401(k) plan",
        "5G network",
        "Level 3 inputs",
        "ASU 2023-07",
        "Note 7",
        "3rd party",
        "10M users",
        "1Life Healthcare",
    ],
)
def test_identifiers_hold_no_quantity(value):
    """A name's digits are not checked, in a triple or in the text."""
    assert quantities(value) == []
    assert ground_triple("Company", value, []) is None


def test_identifier_in_text_grounds_nothing():
    assert check("Our Form 10-K for 2024", "10 filings") is False
    assert check("The S&P 500 rose", "500") is False
    assert check("H100 systems", "100 systems") is False
    assert check("Our Form 10-K for 2024", "FY2024") is True


def test_edge_cases():
    text = "Revenue was $391,035 million in fiscal 2024, up 2%."
    found = quantities(text)
    assert ground_triple("Apple", "Revenue", found) is None  # nothing to check
    assert ground_triple("", "", found) is None
    assert ground_triple(None, None, found) is None  # a null string in the table
    assert ground_triple("Revenue FY2024", "$391 billion", found) is True  # both right
    assert ground_triple("Revenue FY2023", "$391 billion", found) is False  # year wrong
    assert ground_triple("Revenue FY2024", "$390 billion", found) is False  # amount wrong
    assert ground_triple("Revenue 2024", "$391 billion, up 3%", found) is False
    assert ground_triple("Revenue 2024", "$391 billion, up 2%", found) is True
    assert ground_triple("Revenue", "$391 billion", []) is False  # no text quantity


def test_quantities_report_kind_value_precision():
    assert quantities("$391,035 million") == [
        Quantity("number", Decimal("391035E6"), Decimal("1E6"), "$391,035 million", 6)
    ]
    (amount,) = quantities("391.0 billion")
    assert (amount.value, amount.precision, amount.scale) == (
        Decimal("391.0E9"),
        Decimal("1E8"),
        9,
    )
    assert quantities("12.5%")[0].kind == "percent"
    assert quantities("12.5%")[0].value == Decimal("12.5")
    dates = [(q.value, q.precision) for q in quantities("Sept. 28, 2024; June 2024; Q3 2024")]
    assert dates == [("2024-09-28", "day"), ("2024-06", "month"), ("2024-Q3", "quarter")]
    assert [(q.value, q.precision) for q in quantities("FY24")] == [("2024", "year")]
    (table, noted) = quantities("(in millions)\n574,785")
    assert (table.value, table.note) == (Decimal(574785), "")
    assert (noted.value, noted.precision, noted.note) == (
        Decimal("574785E6"),
        Decimal("1E6"),
        "in millions",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.value = Decimal(1)


def test_ground_spans_reads_each_text_once(monkeypatch):
    read = []
    real = grounding.quantities

    def counted(text):
        read.append(text)
        return real(text)

    monkeypatch.setattr(grounding, "quantities", counted)
    spans = [
        ("Revenue was $5.2 billion in 2024.", [("A", "$5.2 billion"), ("A", "2024"), ("A", "x")]),
        ("No figures here.", [("A", "B"), ("C", "D")]),
        ("Sales rose 7%.", [("Sales", "8%"), ("Sales 2024", "7%")]),
        ("Empty.", []),
    ]
    checks = ground_spans(spans)
    assert checks == [[True, True, None], [None, None], [False, False], []]
    texts = {text for text, _ in spans}  # (a triple's strings are read with it too)
    assert [text for text in read if text in texts] == [spans[0][0], spans[2][0]]


def test_grounding_counts():
    checks = [[True, True, None], [None, None], [False, True], []]
    expected = {"checked": 4, "grounded": 3, "ungrounded": 1}
    assert grounding_counts(checks) == expected
    assert grounding_counts([check for row in checks for check in row]) == expected
    assert grounding_counts([]) == {"checked": 0, "grounded": 0, "ungrounded": 0}


def test_rules_are_plain_words():
    assert RULES and all(isinstance(rule, str) and rule.strip() for rule in RULES)
    words = " ".join(RULES)
    for term in ("thousands separators", "million", "percent", "FY2024", "Form 10-K", "S&P 500"):
        assert term in words


def test_a_tenth_of_the_workload_is_fast(filings):
    """1,200 real spans, 40 triples each (a third with a figure): a tenth of the 480,000-triple
    workload, whose budget is 5 s; 2.5 s leaves room for a busy machine."""
    rng = random.Random(11)
    texts = [path.read_text(encoding="utf-8")[20_000:] for path in filings]
    spans = []
    for index in range(1_200):
        text = texts[index % len(texts)]
        start = rng.randrange(0, len(text) - SPAN)
        span = text[start : start + SPAN]
        figures = [q.text for q in quantities(span) if not q.note] or ["$1 billion"]
        triples = [
            ("Company", rng.choice(figures) if rng.random() < 0.33 else "Revenue")
            for _ in range(40)
        ]
        spans.append((span, triples))
    grounding._string_quantities.cache_clear()
    started = time.perf_counter()
    checks = ground_spans(spans)
    assert time.perf_counter() - started < 2.5
    assert grounding_counts(checks)["checked"] > 10_000


@pytest.mark.parametrize(
    ("text", "figure"),
    [
        ("$50 million", "$50,000,000"),
        ("$50 million", "$50.0 million"),
        ("$1.2 billion", "$1,200 million"),
        ("$1.2 billion", "USD 1200000000"),
        ("164 thousand employees", "164,000"),
    ],
)
def test_the_same_number_written_out_is_grounded(text, figure):
    assert ground_triple("AAPL", figure, quantities(f"Revenue was {text} in 2024.")) is True
