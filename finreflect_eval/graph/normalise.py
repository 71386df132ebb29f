"""Entity names to keys, by rules a reader can predict: two names are one entity when their
keys are equal, and nothing is merged by similarity (no fuzzy matching, no embeddings).

`entity_key("The Coca-Cola Company")` is `"coca cola"`, the key of "Coca Cola Co." too; "Alphabet"
and "Google" stay two entities. The filing's own ticker and company name are one entity, keyed by
the ticker (`filer_aliases`). `RULES` says the same in words, for the results.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

# Dropped from the end of a name, one word at a time while another word is left, after
# punctuation is gone ("L.P." is "lp" by then). Not "holdings" or "group": they are often the
# name itself ("Booking Holdings", "CME Group", a segment "Consumer Group").
CORPORATE_SUFFIXES = (
    "inc",
    "incorporated",
    "corp",
    "corporation",
    "co",
    "company",
    "ltd",
    "limited",
    "llc",
    "plc",
    "lp",
    "nv",
    "sa",
    "ag",
    "gmbh",
)
_SUFFIXES = frozenset(CORPORATE_SUFFIXES)
_JOINERS = frozenset({"&", "and"})  # left dangling by "& Co."
# The filer's own name loses these too: in its own filing "UnitedHealth" is "UnitedHealth Group".
FILER_SUFFIXES = (*CORPORATE_SUFFIXES, "holdings", "holding", "group")
_FILER_SUFFIXES = frozenset(FILER_SUFFIXES)

# Marks that NFKC would spell out as letters ("™" is "TM"): they are not part of the name.
_MARKS = str.maketrans({"™": " ", "℠": " ", "®": " ", "©": " "})
_KEPT = frozenset("&%+")  # carry meaning inside a name or an amount: "AT&T", "5%", "Disney+"
_REMOVED = frozenset(".,'’‘`´")  # dropped without a space: "U.S." is "us", "McDonald's" "mcdonalds"
_NUMBER_DOT = re.compile(r"(?<=\d)\.(?=\d)")
_SIGNS = frozenset("-−‐‑–")  # hyphen-minus, minus, hyphens, en dash
_SIGN = re.compile(r"(?<![\w.])[-−‐‑–](?=\d)")  # a minus sign before a number: "-5%"
_KEEP_DOT, _KEEP_SIGN = "\ue000", "\ue001"  # private-use stand-ins while marks go

RULES = [
    "Unicode NFKC, then case-folded; the marks ™ ℠ ® © dropped.",
    "A '.' between two digits is kept (3.5%), and a minus sign before a number (-5%).",
    "'.', ',' and apostrophes are dropped without a space: U.S. is 'us', 1,000 is '1000', "
    "McDonald's is 'mcdonalds'.",
    "'&', '%', '+' and currency symbols ($, €, £, ...) are kept; every other punctuation mark or "
    "symbol (hyphens, slashes, brackets, quotes) becomes a space.",
    "Runs of whitespace are one space; none at either end.",
    "A leading 'the' is dropped when a word follows it.",
    "Corporate suffixes are dropped from the end, one word at a time while another word is left "
    f"({', '.join(CORPORATE_SUFFIXES)}), with an '&' or 'and' they leave at the end (& Co.); "
    "'holdings' and 'group' are kept.",
    "In each filing, the filer's ticker, its company name and that name without its suffixes "
    "(here 'holdings', 'holding' and 'group' too) are one entity, keyed by the ticker "
    "(AAPL, Apple Inc., Apple are 'aapl').",
    "A name the rules leave empty keeps its case-folded text; nothing else is merged: no fuzzy "
    "matching, no pronouns resolved ('the Company' is not the filer), no names across filings.",
]


def entity_key(name: str | None, aliases: Mapping[str, str] | None = None) -> str:
    """The key of an entity name under `RULES`, then `aliases` (a key to its canonical key)."""
    key = _base_key(name or "")
    return aliases.get(key, key) if aliases else key


@lru_cache(maxsize=1 << 17)  # names repeat across a filing's triples
def _base_key(name: str) -> str:
    text = unicodedata.normalize("NFKC", name.translate(_MARKS)).casefold()
    if "." in text:
        text = _NUMBER_DOT.sub(_KEEP_DOT, text)
    if not _SIGNS.isdisjoint(text):
        text = _SIGN.sub(_KEEP_SIGN, text)
    text = text.translate(_CHARACTERS)
    text = text.replace(_KEEP_DOT, ".").replace(_KEEP_SIGN, "-")
    words = text.split()
    if len(words) > 1 and words[0] == "the":
        words = words[1:]
    while len(words) > 1 and words[-1] in _SUFFIXES:
        words.pop()
        if len(words) > 1 and words[-1] in _JOINERS:
            words.pop()
    return " ".join(words) or " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def _mapped(char: str) -> str:
    """What a character becomes: itself, nothing, or a space."""
    if char.isalnum() or char.isspace() or char in _KEPT or char in (_KEEP_DOT, _KEEP_SIGN):
        return char
    if char in _REMOVED:
        return ""
    return char if unicodedata.category(char) == "Sc" else " "  # a currency symbol is kept


class _Characters(dict):
    """`_mapped` of each character, as `str.translate` reads it (at C speed once seen)."""

    def __missing__(self, code: int) -> str:
        self[code] = mapped = _mapped(chr(code))
        return mapped


_CHARACTERS = _Characters()


def filer_aliases(ticker: str, company: str | None) -> dict[str, str]:
    """The filer as one entity: its ticker's key, and the keys of its company name and of that
    name less its trailing `FILER_SUFFIXES` words, each mapped to the ticker's key ("Apple Inc.",
    "Apple" and "AAPL" are "aapl"). Empty when the ticker has no key."""
    target = entity_key(ticker)
    if not target:
        return {}
    aliases = {target: target}
    if company and company.strip():
        aliases[entity_key(company)] = target
        words = entity_key(company).split()
        while len(words) > 1 and words[-1] in _FILER_SUFFIXES:
            words.pop()
            if len(words) > 1 and words[-1] in _JOINERS:
                words.pop()
        aliases[" ".join(words)] = target
    return aliases


def entity_keys(
    names: pa.Array | pa.ChunkedArray, aliases: Mapping[str, str] | None = None
) -> pa.Array:
    """`entity_key` of every value (a null is ""), each distinct name normalised once."""
    names = names.combine_chunks() if isinstance(names, pa.ChunkedArray) else names
    encoded = pc.dictionary_encode(pc.fill_null(names.cast(pa.string()), ""))
    keys = [entity_key(name, aliases) for name in encoded.dictionary.to_pylist()]
    return pc.take(pa.array(keys, pa.string()), encoded.indices)
