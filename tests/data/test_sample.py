"""The bundled sample: loads with `datasets` like a Hub repo, meets the promised coverage, and
its parquet files are exactly what its hand-written sources build."""

from collections import Counter

import datasets
import pyarrow.parquet as pq
import pytest

from finreflect_eval._util.resources import sample_dir
from finreflect_eval.data import SAMPLE, load_benchmark, write_dataset_folder
from finreflect_eval.data.sample_source import read_sample_source, sample_card
from finreflect_eval.protocol.schema import check_rules, load_schema


@pytest.fixture(scope="module")
def test_split():
    return load_benchmark(SAMPLE, split="test")


@pytest.fixture(scope="module")
def dev_split():
    return load_benchmark(SAMPLE, split="dev")


def test_loads_with_plain_datasets():
    spans = datasets.load_dataset(str(sample_dir()), "spans", split="test")
    assert len(spans) >= 24 and "text" in spans.column_names
    assert datasets.get_dataset_config_names(str(sample_dir())) == [
        "spans",
        "reference_triples",
        "judgments",
    ]


def test_coverage(test_split, dev_split):
    assert len(test_split.spans) >= 24 and len(dev_split.spans) >= 6
    tickers = {s.ticker for s in test_split.spans + dev_split.spans}
    assert len(tickers) >= 8
    sections = {s.section for s in test_split.spans}
    assert {"Item 1", "Item 1A", "Item 3", "Item 7", "Item 8"} <= sections
    assert len(sections) >= 6
    assert sum(s.content_type == "table" for s in test_split.spans) >= 2
    assert all("|" in s.text for s in test_split.spans if s.content_type == "table")
    assert len(test_split.reference_triples) + len(dev_split.reference_triples) >= 200
    assert not {s.span_id for s in test_split.spans} & {s.span_id for s in dev_split.spans}


def test_reference_triples_follow_the_schema(test_split, dev_split):
    report = check_rules(test_split.reference_triples + dev_split.reference_triples, load_schema())
    assert report.all_rules == 1.0


def test_gold_judgments(test_split):
    comprehensiveness = {
        j.span_id: j.label for j in test_split.judgments if j.criterion == "comprehensiveness"
    }
    assert set(comprehensiveness) == {s.span_id for s in test_split.spans}
    assert {"good", "partial", "poor"} <= set(comprehensiveness.values())
    triple_level = [j for j in test_split.judgments if j.triple_id]
    assert len(triple_level) >= 120
    assert {j.criterion for j in triple_level} == {"faithfulness", "precision", "relevance"}
    # each kind of planted flaw is labelled 0 on the criterion it breaks
    breaks = {
        "hallucinated": "faithfulness",
        "wrong_amount": "faithfulness",
        "wrong_date": "faithfulness",
        "generic_subject": "precision",
        "off_topic": "relevance",
    }
    flawed = Counter()
    for j in triple_level:
        if breaks.get(j.flaw) == j.criterion:
            assert j.label == "0", j
            flawed[j.flaw] += 1
    assert flawed["hallucinated"] and flawed["generic_subject"] and flawed["off_topic"]
    assert flawed["wrong_amount"] + flawed["wrong_date"]
    # unflawed candidates are reference triples, labelled 1 on every criterion
    references = {t.triple_id for t in test_split.reference_triples}
    for j in triple_level:
        if not j.flaw:
            assert j.label == "1" and j.triple_id in references


def test_limit_takes_first_spans_in_stable_order(test_split):
    limited = load_benchmark(SAMPLE, split="test", limit=3)
    assert limited.spans == test_split.spans[:3]
    assert len({s.ticker for s in limited.spans}) == 3  # interleaved across companies
    assert {t.span_id for t in limited.reference_triples} == {s.span_id for s in limited.spans}
    assert limited.fingerprint == test_split.fingerprint


def test_parquet_files_match_their_sources(tmp_path):
    write_dataset_folder(tmp_path, read_sample_source(sample_dir() / "source"), **sample_card())
    built = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.parquet"))
    shipped = sorted(p.relative_to(sample_dir()) for p in sample_dir().rglob("*.parquet"))
    assert built == shipped
    for relative in built:
        assert pq.read_table(tmp_path / relative).equals(pq.read_table(sample_dir() / relative))
    assert (tmp_path / "README.md").read_text() == (sample_dir() / "README.md").read_text()
