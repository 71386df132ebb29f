"""A filing's ticker and fiscal year, from its file name and cover page."""

from __future__ import annotations

import logging
import re
from pathlib import Path

logger = logging.getLogger(__name__)

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
        # Whitespace runs collapsed first: on a long one the regex's adjacent "\s*"s backtrack
        # quadratically (20,000 spaces after "ended" took half a minute).
        cover = _FISCAL_YEAR_ENDED_RE.search(" ".join(text[:20_000].split()))
        if cover:
            return ticker, int(cover.group(1))
    return ticker, name_year
