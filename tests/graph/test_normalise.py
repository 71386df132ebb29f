import pyarrow as pa
import pytest

from finreflect_eval.graph.normalise import (
    CORPORATE_SUFFIXES,
    FILER_SUFFIXES,
    RULES,
    entity_key,
    entity_keys,
    filer_aliases,
)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Apple Inc.", "apple"),
        ("  APPLE   inc ", "apple"),
        ("Microsoft Corp", "microsoft"),
        ("Microsoft Corporation", "microsoft"),
        ("The Coca-Cola Company", "coca cola"),
        ("Coca Cola Co.", "coca cola"),
        ("JPMorgan Chase & Co.", "jpmorgan chase"),
        ("Blackstone L.P.", "blackstone"),
        ("Deutsche Bank AG", "deutsche bank"),
        ("AT&T Inc.", "at&t"),
        ("S&P 500", "s&p 500"),
        ("Disney+", "disney+"),
        ("U.S.", "us"),
        ("McDonald’s", "mcdonalds"),
        ("Windows™", "windows"),
        ("ＡＰＰＬＥ", "apple"),  # full-width letters: NFKC
        ("COVID-19", "covid 19"),
        ("$391,035 million", "$391035 million"),
        ("€5.2 billion", "€5.2 billion"),
        ("£5 million", "£5 million"),
        ("Nestlé S.A.", "nestlé"),
        ("“Apple” (iPhone)", "apple iphone"),
        ("3.5%", "3.5%"),
        ("-5%", "-5%"),
        ("Booking Holdings Inc.", "booking holdings"),  # holdings is kept
        ("CME Group", "cme group"),
        ("The Company", "company"),  # a word is left: the suffix rule stops there
        ("Inc.", "inc"),
        ("the", "the"),
        ("—", "—"),  # the rules leave nothing: the case-folded text
        ("", ""),
        (None, ""),
    ],
)
def test_entity_key(name, key):
    assert entity_key(name) == key


def test_different_names_stay_different():
    assert entity_key("Alphabet") != entity_key("Google")
    assert entity_key("3.5%") != entity_key("35%")
    assert entity_key("-5%") != entity_key("5%")
    assert entity_key("Disney+") != entity_key("Disney")
    assert entity_key("Amazon.com, Inc.") == "amazoncom" != entity_key("Amazon")


def test_aliases_map_a_key_to_its_canonical_key():
    assert entity_key("Apple Inc.", {"apple": "aapl"}) == "aapl"
    assert entity_key("Google", {"apple": "aapl"}) == "google"


def test_filer_aliases_make_ticker_and_company_one_entity():
    aliases = filer_aliases("AAPL", "Apple Inc.")
    assert aliases == {"aapl": "aapl", "apple": "aapl"}
    keys = {entity_key(name, aliases) for name in ("Apple Inc.", "Apple", "AAPL", "apple inc")}
    assert keys == {"aapl"}
    assert entity_key("the Company", aliases) == "company"  # no pronoun resolution
    assert entity_key("Google", aliases) == "google"


def test_filer_aliases_drop_holdings_and_group_of_the_filer_only():
    aliases = filer_aliases("UNH", "UnitedHealth Group Incorporated")
    assert aliases == {"unh": "unh", "unitedhealth group": "unh", "unitedhealth": "unh"}
    assert filer_aliases("JPM", "JPMorgan Chase & Co.") == {"jpm": "jpm", "jpmorgan chase": "jpm"}
    assert entity_key("UnitedHealth") == "unitedhealth"  # elsewhere, not the filer
    assert filer_aliases("MSFT", None) == {"msft": "msft"}
    assert filer_aliases("", "Apple Inc.") == {}


def test_entity_keys_normalises_each_value_with_nulls_as_empty():
    names = pa.chunked_array([["Apple Inc.", None, "AAPL"], ["Apple", "Google"]])
    keys = entity_keys(names, filer_aliases("AAPL", "Apple Inc."))
    assert keys.to_pylist() == ["aapl", "", "aapl", "aapl", "google"]
    assert entity_keys(pa.array([], pa.string())).to_pylist() == []


def test_rules_name_every_suffix():
    text = " ".join(RULES)
    assert all(suffix in text for suffix in CORPORATE_SUFFIXES)
    assert set(FILER_SUFFIXES) - set(CORPORATE_SUFFIXES) == {"holdings", "holding", "group"}
    assert "fuzzy" in text
