"""Deterministic grounding, before any judge: every number, percentage, money amount and date
in a triple (its subject and object; relations and types hold none) must occur in its span's
text.

Both sides are read by one parser (`quantities`), so a form it ignores (an identifier such as
`Form 10-K`) is ignored on both. A triple's value is grounded when the text holds a value of the
same kind (a number, money or not; a percentage; a date) that the triple's value rounds: the
triple may round the text, never add precision (text "$391,035 million" grounds "$391 billion"
and "$391.0 billion"; text "$391.0 billion" does not ground "$391,035 million"). `RULES` says
each rule in plain words; the results record it beside the counts.

`ground_spans` checks a run's triples span by span (a span's text is read once, and only when
one of its triples holds a digit); `grounding_counts` sums the checks into the results'
`{checked, grounded, ungrounded}`.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

RULES = [
    "A triple's quantities are read from its subject and object only; a triple without one is "
    "not checked (None). It is grounded when every quantity in it is grounded in its span's text.",
    "Numbers: thousands separators are dropped (391,035 = 391035); signs and the parentheses of "
    "negative amounts are ignored, a number is compared by its size (a decrease of $5 million "
    "is often written (5) in a table); number words (five, a dozen) are not read.",
    "Money is a number: currency signs and words ($, US$, USD, €, £, ¥, dollars) are dropped, "
    "and a money amount and a plain number of the same size ground each other.",
    "Scale words multiply: thousand (10^3), million (10^6), billion (10^9), trillion (10^12), "
    "also plural and glued to the next word (billionfrom). Abbreviations: bn and mn always scale "
    "(10^9, 10^6); k, m, mm and b (10^3, 10^6, 10^6, 10^9) only right after a currency sign or "
    "code ($10M, $5b, USD 3k), since 10K, 4K, 5G or 10 m name other things; a glued 10M or 10K "
    "without one is an identifier and not checked. M is a million, never the Roman thousand.",
    "A table's scale note in the span (in thousands / in millions / in billions, as in "
    "'(in millions, except per share data)') also reads each of the span's numbers written "
    "without a scale word at that scale (574,785 under 'in millions' is also 574,785 million).",
    "A number with a scale word in the text also grounds the same digits without a scale in "
    "the triple (text $391,035 million grounds a triple 391,035), as they are written.",
    "Percentages: 12%, 12 %, (12)%, 12 percent, 12 per cent, 12 pct and 12 percentage points "
    "are the percentage 12; a percentage is grounded only by a percentage.",
    "Precision: a value is exact to the last digit written (391.0 billion to 10^8, 391,035 "
    "million to 10^6, 150 billion to 10^9: trailing zeros count). A triple's value is grounded "
    "by a text value at least as precise that lies within half a unit of the triple's last "
    "digit (text 391,035 million grounds 391.0 billion, 391 billion and 0.4 trillion; text "
    "391.0 billion grounds neither 391,035 million nor 391.04 billion; 390.1 billion is wrong). "
    "The very same number is grounded however it is written: text $50 million grounds "
    "50,000,000 and $50.0 million.",
    "Dates: September 28, 2024 = Sept. 28, 2024 = Sep 28 2024 = 28 September 2024 = "
    "2024-09-28 = 09/28/2024 (US order; a two-digit year is 20xx). A month and year "
    "(September 2024) is a date to the month. Month names are read in any case, but for may "
    "(a verb in lower case); a day and month without a year are not read.",
    "Years: a bare 1900-2099 written as four digits (no comma, sign, scale or percent) is a "
    "year, and so are fiscal 2024, fiscal year 2024, FY2024, FY 2024, FY24 and FY'24 (fiscal "
    "and calendar years are not told apart). A year in the triple is grounded by any mention of "
    "that year in the text: a bare year, a fiscal year, a quarter or a date in it; a bare year "
    "also matches the number 2024 written with a comma, both ways.",
    "Quarters: Q3 2024, Q3 FY24, Q3 fiscal 2024, Q3'24, 3Q24, third quarter of (fiscal year) "
    "2024 are the quarter 2024-Q3, grounded only by the same quarter in the text (a fiscal "
    "quarter need not be a calendar one, so dates are never turned into quarters).",
    "A date is grounded by the same date, or a more precise one, in the text: a triple's "
    "September 2024 by the text's September 28, 2024; a triple's September 28, 2024 not by the "
    "text's September 2024.",
    "Identifiers are not quantities, on either side: filing forms (Form 10-K, 10-Q, 8-K, 20-F); "
    "the number after Item, Rule, Section, Note, Part, Exhibit, Schedule, Article, ASC, ASU, "
    "Topic, Regulation, Pillar, Level, Tier, Phase and Chapter (Item 1A, Rule 10b5-1, Level 3, "
    "ASU 2023-07, also lists such as Items 1 and 2); index names (S&P 500, Russell 2000, "
    "Nasdaq-100, Fortune 500, FTSE 100, Nikkei 225, Dow Jones 30); letters and digits run "
    "together (H100, GB200, 3A090, 5G, 1A, 10b5-1, x86, HBM3e), a capitalised word, a hyphen and "
    "digits (COVID-19, S-1); 401(k) and 15(d); ordinals (3rd, 21st).",
    "Digits glued to a lower-case word are read (approximately50%, in2023and2024, as the "
    "filings' text often runs words together); ranges share no unit (5 to 9% reads 5 and 9%).",
]
"""The normalisation rules in plain words, recorded in the results beside the counts."""

_SCALE_WORDS = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_ABBREVIATIONS = {"k": 3, "m": 6, "mm": 6, "mn": 6, "b": 9, "bn": 9}
_ALWAYS_SCALE = {"bn", "mn"}
_NOTE_SCALES = {"thousands": 3, "millions": 6, "billions": 9}
_ORDINAL_QUARTERS = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_ORDINAL_QUARTERS |= {"1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for name in names
}

_MONTH = (  # "may" in lower case is a verb
    r"(?:May|MAY|(?i:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?))(?![A-Za-z])\.?"
)
_YEAR = r"(?:19|20)[0-9]{2}(?![0-9])"
_WORD_START = r"(?:\b|(?<=[a-z])(?=[A-Z]))"  # or a capital glued to a word: endedDecember 31
_IDENT = r"[0-9][0-9A-Za-z]*(?:[-.][0-9][0-9A-Za-z]*)*(?:\([0-9A-Za-z]{1,3}\))*"
_LABELS = (
    r"(?i:items?|rules?|sections?|notes?|parts?|exhibits?|schedules?|articles?|asc|asu|topics?"
    r"|regulations?|pillars?|levels?|tiers?|phases?|chapters?)"
)
# One pass over the text; at one place the first alternative that matches wins, so the fiscal
# forms, quarters and dates come before the identifiers (3rd quarter of 2024 is a quarter, 3rd
# alone an ordinal) and the plain number comes last. Letters glued to digits (H100, 5G) are told
# from glued prose (approximately50%) after the match, in `_number`.
_PATTERN = re.compile(
    rf"""
    (?P<fiscal>\b(?i:FY)\s*'?(?P<fy>[0-9]{{4}}|[0-9]{{2}})(?![0-9]))
  | (?P<quarter>
        \bQ(?P<q>[1-4])\s*(?:(?i:of)\s+)?
        (?:(?:(?i:FY)\s*|')(?P<qy>[0-9]{{4}}|[0-9]{{2}})(?![0-9])
          |(?:(?i:fiscal)\s+(?:(?i:year)\s+)?)?(?P<qy4>{_YEAR}))
      | \b(?P<qn>[1-4])Q\s*'?(?P<qny>[0-9]{{4}}|[0-9]{{2}})(?![0-9])
      | \b(?P<qw>(?i:first|second|third|fourth|1st|2nd|3rd|4th))\s+
        (?:(?i:fiscal)\s+)?(?i:quarter)\s+(?:(?i:of)\s+)?
        (?:(?i:fiscal)\s+(?:(?i:year)\s+)?|(?i:FY)\s*)?(?P<qwy>{_YEAR}))
  | (?P<date>
        \b(?P<iy>{_YEAR})-(?P<im>[0-9]{{2}})-(?P<id>[0-9]{{2}})(?![0-9])
      | \b(?P<sm>[0-9]{{1,2}})/(?P<sd>[0-9]{{1,2}})/(?P<sy>[0-9]{{4}}|[0-9]{{2}})(?![0-9])
      | {_WORD_START}(?P<mon>{_MONTH})\s*(?:(?P<md>[0-9]{{1,2}})(?i:st|nd|rd|th)?,?\s*)?(?:of\s+)?
        (?P<my>{_YEAR})
      | \b(?P<dd>[0-9]{{1,2}})(?i:st|nd|rd|th)?\s+(?P<dmon>{_MONTH}),?\s*(?P<dy>{_YEAR}))
  | (?P<skip>
        \b{_LABELS}\s+{_IDENT}
        (?:(?:\s*,\s*(?:(?i:and|or)\s+)?|\s+(?i:and|or|through|to)\s+){_IDENT})*
      | \b(?:S&P|(?i:russell|nasdaq|fortune|ftse|nikkei|dow\s+jones))\s*-?\s*[0-9]+
      | \b[A-Z][A-Za-z]*-[0-9]+
      | \b[0-9]{{1,3}}-[A-Z]{{1,2}}\b
      | \b[0-9]+[a-z]-?[0-9]+[\w-]*(?:\([a-z]\))?
      | \b[0-9]+\([a-z]\)
      | \b[0-9]+(?i:st|nd|rd|th)\b)
  | (?P<number>
        (?:(?P<cur>US\$|\$|USD|€|£|¥)\s*\(?\s*)?
        (?:(?P<int>[0-9]{{1,3}}(?:,[0-9]{{3}})+(?![0-9])|[0-9]+)(?P<frac>\.[0-9]+)?
          |(?<![\w.])(?P<frac0>\.[0-9]+))
        (?:\s*\)?\s*(?P<pct>%|(?i:percent(?:age\s+points?)?|per\s+cent|pct)\b)
          |[^\S\n]*(?P<word>(?i:thousand|million|billion|trillion))s?
          |(?P<gap>\s?)(?P<abbr>(?i:bn|mn|mm|[kmb]))(?![A-Za-z&]))?)
    """,
    re.VERBOSE,
)
_NOTE = re.compile(r"\bin\s+(thousands|millions|billions)\b", re.IGNORECASE)
_DIGIT = re.compile(r"[0-9]")
_LOOKBACK, _QUARTER_LOOKBACK = 16, 48


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number, percentage, money amount or date as written in a text, normalised."""

    kind: str
    """`number` (money or not), `percent` or `date`."""
    value: Decimal | str
    """A number's size (`Decimal("3.91035E+11")` for $391,035 million; a percentage in percent,
    12.5 for 12.5%); a date as `2024-09-28`, `2024-09`, `2024-Q3` or `2024`."""
    precision: Decimal | str
    """The place of the last digit written (`Decimal("1E+8")` for 391.0 billion, 1 for 391,035);
    a date's `day`, `month`, `quarter` or `year`."""
    text: str
    """As written (a date's or a fiscal form's whole text)."""
    scale: int = 0
    """The power of ten a scale word or table note multiplied it by (6 for million), else 0."""
    note: str = ""
    """The span's table note that scaled a number written without a scale ("in millions"); such
    a quantity is added beside the number as written."""


def quantities(text: str) -> list[Quantity]:
    """Every number, percentage, money amount and date in `text`, in order, then each number
    without a scale read again at each of the text's table scale notes (`Quantity.note`)."""
    found = _read(text)
    if "illions" in text or "housands" in text or "ILLIONS" in text or "HOUSANDS" in text:
        found += _noted(found, text)
    return found


def _read(text: str) -> list[Quantity]:
    """The quantities written in `text`, in order (no table note applied).

    As `_PATTERN.finditer(text)` would find them, but fast: a match's first digit is at most
    `_LOOKBACK` characters from its start (September of 2024, Regulations 14A), or
    `_QUARTER_LOOKBACK` in a text that says quarter (third fiscal quarter of fiscal year 2024),
    so the pattern is tried only from there before each next digit, not at every letter of the
    prose between."""
    found: list[Quantity] = []
    lookback = _QUARTER_LOOKBACK if "uarter" in text or "UARTER" in text else _LOOKBACK
    position, search, next_digit = 0, _PATTERN.search, _DIGIT.search
    while digit := next_digit(text, position):
        match = search(text, max(position, digit.start() - lookback))
        if match is None:  # cannot happen: a digit is a number at worst
            break
        position = match.end()
        kind = match.lastgroup
        if kind == "number":
            quantity = _number(match, text)
        elif kind == "date":
            quantity = _date(match)
        elif kind == "quarter":
            quantity = _quarter(match)
        elif kind == "fiscal":
            quantity = _year(_full_year(match["fy"]), match[0])
        else:
            continue
        if quantity is not None:
            found.append(quantity)
    return found


def _number(match: re.Match, text: str) -> Quantity | None:
    """A number, money amount or percentage; a bare four-digit year is a date; None for the
    digits of an identifier the pattern could only see from here (10K, 3A090, 5G)."""
    currency, whole, fraction, fraction_only, percent, word, gap, abbreviation = match.group(
        "cur", "int", "frac", "frac0", "pct", "word", "gap", "abbr"
    )
    start, end = match.start("int") if whole is not None else match.start("frac0"), match.end()
    if not currency and (
        (start and text[start - 1].isalpha() and _glued_to_name(text, start))
        or (end < len(text) and text[end].isupper() and text[end - 1].isdigit())
    ):
        return None  # H100, 3A090; 5G, 1A
    fraction = (fraction or fraction_only or ".")[1:]
    scale = 0
    if word:
        scale = _SCALE_WORDS[word.lower()]
    elif abbreviation:
        abbreviation = abbreviation.lower()
        if currency or abbreviation in _ALWAYS_SCALE:
            scale = _ABBREVIATIONS[abbreviation]
        elif not gap:
            return None  # 10M, 10K, 4K: a name, not an amount
    if (
        not (currency or fraction or scale or percent or abbreviation)
        and len(whole) == 4
        and "1900" <= whole <= "2099"
    ):
        return _year(int(whole), match[0])
    digits = (whole or "").replace(",", "") + fraction
    exponent = scale - len(fraction)
    kind = "percent" if percent else "number"
    return Quantity(kind, Decimal(f"{digits}E{exponent}"), _unit(exponent), match[0], scale)


def _glued_to_name(text: str, start: int) -> bool:
    """Whether the letters right before the digits at `start` make them part of a name: a
    single letter or letters with a capital past the first (H100, GB200, 3A090), not a
    lower-case or capitalised word run into a figure (approximately50%, in2023, In2024)."""
    first = start - 1
    while first and text[first - 1].isalpha():
        first -= 1
    run = text[first:start]
    return len(run) < 2 or not run[1:].islower()


def _date(match: re.Match) -> Quantity | None:
    """A day or a month: ISO, US slashes, month names either way round; None for one that is
    not on the calendar (13/45/2024)."""
    if match["iy"]:
        year, month, day = int(match["iy"]), int(match["im"]), int(match["id"])
    elif match["sy"]:
        year, month, day = _full_year(match["sy"]), int(match["sm"]), int(match["sd"])
    elif match["my"]:
        year, month = int(match["my"]), _month(match["mon"])
        day = int(match["md"]) if match["md"] else 0
    else:
        year, month, day = int(match["dy"]), _month(match["dmon"]), int(match["dd"])
    if not 1 <= month <= 12 or day > 31 or (day < 1 and (match["iy"] or match["sy"])):
        return None
    if day:
        return Quantity("date", f"{year:04d}-{month:02d}-{day:02d}", "day", match[0])
    return Quantity("date", f"{year:04d}-{month:02d}", "month", match[0])


def _quarter(match: re.Match) -> Quantity:
    if match["q"]:
        quarter, year = int(match["q"]), _full_year(match["qy"] or match["qy4"])
    elif match["qn"]:
        quarter, year = int(match["qn"]), _full_year(match["qny"])
    else:
        quarter, year = _ORDINAL_QUARTERS[match["qw"].lower()], int(match["qwy"])
    return Quantity("date", f"{year:04d}-Q{quarter}", "quarter", match[0])


def _year(year: int, text: str) -> Quantity:
    return Quantity("date", f"{year:04d}", "year", text)


def _full_year(digits: str) -> int:
    """A year from four digits, or 20xx from two (FY24, 9/28/24)."""
    return int(digits) if len(digits) == 4 else 2000 + int(digits)


def _month(name: str) -> int:
    return _MONTHS[name.rstrip(".").lower()]


def _noted(found: list[Quantity], text: str) -> list[Quantity]:
    """The numbers written without a scale, read again at each table scale note in `text`."""
    notes = {_NOTE_SCALES[match[1].lower()]: match[0] for match in _NOTE.finditer(text)}
    return [
        Quantity(
            "number",
            quantity.value.scaleb(scale),
            quantity.precision.scaleb(scale),
            quantity.text,
            scale,
            note,
        )
        for scale, note in notes.items()
        for quantity in found
        if quantity.kind == "number" and not quantity.scale
    ]


class _Index:
    """A span's quantities as a triple's value looks them up: numbers and percentages sorted by
    size, each with its precision's exponent; dates under themselves and every coarser date
    they lie in (a day in its month and year, a quarter in its year)."""

    __slots__ = ("dates", "numbers", "percents")

    def __init__(self, found: Iterable[Quantity]) -> None:
        numbers: list[tuple[Decimal, int]] = []
        percents: list[tuple[Decimal, int]] = []
        self.dates: set[str] = set()
        for quantity in found:
            value = quantity.value
            if quantity.kind == "date":
                self.dates.update((value, value[:4], value[:7]))
                if quantity.precision == "year" and quantity.text.isdigit():
                    numbers.append((Decimal(value), 0))
                continue
            entries = percents if quantity.kind == "percent" else numbers
            exponent = quantity.precision.adjusted()
            entries.append((value, exponent))
            if quantity.scale:  # as written, without its scale
                entries.append((value.scaleb(-quantity.scale), exponent - quantity.scale))
        self.numbers = _Sorted(numbers)
        self.percents = _Sorted(percents)

    def grounds(self, quantity: Quantity) -> bool:
        if quantity.kind == "date":
            if quantity.value in self.dates:
                return True
            return quantity.text.isdigit() and self.numbers.holds(Decimal(quantity.value), 0)
        entries = self.percents if quantity.kind == "percent" else self.numbers
        return entries.holds(quantity.value, quantity.precision.adjusted())


class _Sorted:
    """Numbers (value, exponent of its precision), sorted, for `holds`."""

    __slots__ = ("entries", "values")

    def __init__(self, entries: list[tuple[Decimal, int]]) -> None:
        entries.sort()
        self.entries = entries
        self.values = [value for value, _ in entries]

    def holds(self, value: Decimal, exponent: int) -> bool:
        """Whether the very number is here, however written ("$50 million" holds "50,000,000"),
        or one at least as precise as 10**exponent lies within half of it of `value` (so rounds
        to it; a value half way rounds both ways)."""
        half = _half(exponent)
        index = bisect_left(self.values, value - half)
        top, entries = value + half, self.entries
        while index < len(entries) and entries[index][0] <= top:
            if entries[index][1] <= exponent or entries[index][0] == value:
                return True
            index += 1
        return False


@lru_cache(maxsize=256)
def _half(exponent: int) -> Decimal:
    return Decimal(f"5E{exponent - 1}")


@lru_cache(maxsize=256)
def _unit(exponent: int) -> Decimal:
    return Decimal(f"1E{exponent}")


@lru_cache(maxsize=1 << 16)
def _string_quantities(text: str) -> tuple[Quantity, ...]:
    """The quantities a triple's string states (no table note reads a triple's numbers)."""
    return tuple(_read(text))


def _triple_quantities(subject: str | None, object_: str | None) -> tuple[Quantity, ...]:
    subject, object_ = subject or "", object_ or ""
    found = ()
    if _DIGIT.search(subject):
        found = _string_quantities(subject)
    if _DIGIT.search(object_):
        found += _string_quantities(object_)
    return found


def ground_triple(subject: str, object: str, span_quantities: Sequence[Quantity]) -> bool | None:
    """None when the triple's subject and object hold no quantity (nothing to check), True when
    every quantity in them is grounded in `span_quantities` (`quantities(span_text)`), False
    otherwise."""
    found = _triple_quantities(subject, object)
    if not found:
        return None
    index = _Index(span_quantities)
    return all(index.grounds(quantity) for quantity in found)


def ground_spans(
    spans: Sequence[tuple[str, Sequence[tuple[str, str]]]],
) -> list[list[bool | None]]:
    """Per span (its text, its triples' (subject, object)), per triple: `ground_triple`'s check.
    A span's text is read once, and only when one of its triples holds a quantity."""
    checks = []
    for text, triples in spans:
        index = None
        row: list[bool | None] = []
        for subject, object_ in triples:
            found = _triple_quantities(subject, object_)
            if not found:
                row.append(None)
                continue
            if index is None:
                index = _Index(quantities(text or ""))
            row.append(all(index.grounds(quantity) for quantity in found))
        checks.append(row)
    return checks


def grounding_counts(checks: Iterable[bool | Iterable[bool | None] | None]) -> dict[str, int]:
    """`{checked, grounded, ungrounded}` over checks, flat or per span (`ground_spans`):
    checked counts the triples that hold a quantity."""
    grounded = ungrounded = 0
    for item in checks:
        for check in item if isinstance(item, (list, tuple)) else (item,):
            if check is True:
                grounded += 1
            elif check is False:
                ungrounded += 1
    return {"checked": grounded + ungrounded, "grounded": grounded, "ungrounded": ungrounded}
