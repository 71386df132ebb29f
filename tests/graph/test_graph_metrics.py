import json

import networkx as nx
import pytest
import yaml

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.graph.metrics import (
    GRAPH_KEYS,
    filing_graph,
    graph_metrics,
    keyed_triples,
    reference_overlap,
)
from finreflect_eval.graph.normalise import RULES
from finreflect_eval.graph.table import triple_table
from finreflect_eval.protocol.schema import default_schema_path, load_schema

FILERS = {"AAPL": "Apple Inc.", "MSFT": "Microsoft Corporation", "KO": None}
OPPOSITES = load_schema().opposite_relations


def triples(filing: str, spans: dict[str, list[tuple[str, str, str, str, str]]]):
    """A `TripleTable`'s rows for one filing (`<ticker>_2024`), span by span."""
    ticker = filing.split("_")[0]
    rows = []
    for span, span_triples in spans.items():
        for index, (subject, subject_type, relation, obj, object_type) in enumerate(span_triples):
            rows.append(
                {
                    "task": "finreflect_single_pass",
                    "span_id": f"{filing}_{span}",
                    "filing": filing,
                    "ticker": ticker,
                    "company": FILERS[ticker],
                    "triple_index": index,
                    "subject": subject,
                    "subject_type": subject_type,
                    "relation": relation,
                    "object": obj,
                    "object_type": object_type,
                }
            )
    return rows


# Apple's filing, fragmented: "Apple Inc.", "Apple", "AAPL" and "apple inc" are the filer,
# "Microsoft Corp" and "Microsoft" one company; "Alphabet" and "Google" stay two.
APPLE = {
    "s1": [("Apple Inc.", "ORG", "Produces", "iPhone", "PRODUCT")],
    "s2": [("Apple", "ORG", "Produces", "iPhone", "PRODUCT")],
    "s3": [("AAPL", "ORG", "Partners_With", "Microsoft Corp", "COMP")],
    "s4": [
        ("apple inc", "ORG", "Related_To", "Microsoft", "COMP"),
        ("Alphabet", "COMP", "Related_To", "Google", "COMP"),
    ],
}


def metrics(rows, opposites=OPPOSITES, reference=None):
    return graph_metrics(triple_table(rows), opposites, reference=reference)


def test_known_fragmentation_gives_exact_counts():
    result = metrics(triples("AAPL_2024", APPLE))
    assert result["per_filing"]["AAPL_2024"] == {
        "entities": 5,  # aapl, iphone, microsoft, alphabet, google
        "edges": 4,
        "surface_forms_per_entity": 1.8,  # 4 + 1 + 2 + 1 + 1 surface forms
        "fragmented_share": 0.4,  # aapl and microsoft
        "duplicate_triples": 1,  # (aapl, Produces, iphone) in s1 and s2
        "contradictions": 0,
        "invalid_type_pairs": 0,
        "largest_component_share": 0.6,  # {aapl, iphone, microsoft} of 5
        "cross_chunk_entities": 3,  # aapl, iphone, microsoft
    }
    assert result["overall"] == {**result["per_filing"]["AAPL_2024"], "filings": 1}
    assert result["reference"] is None
    assert result["normalisation"] == RULES


def test_result_keys_are_the_contract_and_json_ready():
    result = metrics(triples("AAPL_2024", APPLE))
    assert list(result["per_filing"]["AAPL_2024"]) == list(GRAPH_KEYS)
    assert list(result["overall"]) == [*GRAPH_KEYS, "filings"]
    assert json.loads(json.dumps(result)) == result


def test_the_filer_is_merged_in_its_own_filing_only():
    # In Microsoft's filing "Apple Inc." and "AAPL" are two entities; "Microsoft" is the filer.
    rows = triples(
        "MSFT_2024",
        {
            "s1": [("Microsoft", "ORG", "Partners_With", "Apple Inc.", "COMP")],
            "s2": [("MSFT", "ORG", "Partners_With", "AAPL", "COMP")],
        },
    )
    keyed = keyed_triples(triple_table(rows))
    assert keyed["subject_key"].to_pylist() == ["msft", "msft"]
    assert keyed["object_key"].to_pylist() == ["apple", "aapl"]
    counts = metrics(rows)["overall"]
    assert (counts["entities"], counts["edges"], counts["fragmented_share"]) == (3, 2, 0.3333)


def test_duplicates_count_extra_spans_per_filing():
    triple = ("AAPL", "ORG", "Produces", "iPhone", "PRODUCT")
    rows = [
        *triples(
            "AAPL_2023", {"s1": [triple], "s2": [("Apple", *triple[1:3], "iphone", "PRODUCT")]}
        ),
        *triples("AAPL_2024", {"s1": [triple], "s2": [triple], "s3": [triple]}),
        *triples("MSFT_2024", {"s1": [triple, triple]}),  # twice in one span
    ]
    result = metrics(rows)
    duplicates = {f: m["duplicate_triples"] for f, m in result["per_filing"].items()}
    assert duplicates == {"AAPL_2023": 1, "AAPL_2024": 2, "MSFT_2024": 0}
    assert result["overall"]["duplicate_triples"] == 3
    assert result["overall"]["edges"] == 3  # one distinct triple per filing
    assert result["overall"]["filings"] == 3


def test_contradictions_need_the_same_subject_and_object():
    rows = triples(
        "AAPL_2024",
        {
            "s1": [
                ("AAPL", "ORG", "Increases", "Net sales", "FIN_METRIC"),
                ("AAPL", "ORG", "Increases", "Revenue", "FIN_METRIC"),
                ("AAPL", "ORG", "Positively_Impacts", "Margin", "FIN_METRIC"),
            ],
            "s2": [
                ("Apple Inc.", "ORG", "Decreases", "net sales", "FIN_METRIC"),  # 1
                ("AAPL", "ORG", "Decreases", "Costs", "FIN_METRIC"),  # another object: 0
                ("Net sales", "FIN_METRIC", "Decreases", "AAPL", "ORG"),  # reversed: 0
                ("AAPL", "ORG", "Negatively_Impacts", "Margin", "FIN_METRIC"),  # 1
            ],
            "s3": [("AAPL", "ORG", "Negatively_Impacts", "Margin", "FIN_METRIC")],  # same pair
        },
    )
    assert metrics(rows)["overall"]["contradictions"] == 2
    assert metrics(rows, opposites=())["overall"]["contradictions"] == 0
    assert metrics(rows, opposites=[("Increases", "Decreases")])["overall"]["contradictions"] == 1


def test_opposite_pairs_are_data_in_the_schema_file(tmp_path):
    spec = yaml.safe_load(default_schema_path().read_text())
    assert spec["opposite_relations"] == [
        ["Increases", "Decreases"],
        ["Positively_Impacts", "Negatively_Impacts"],
        ["Stock_Rise_Due_To", "Stock_Decline_Due_To"],
    ]
    rows = triples(
        "AAPL_2024",
        {
            "s1": [("AAPL", "ORG", "Produces", "iPhone", "PRODUCT")],
            "s2": [("AAPL", "ORG", "Supplies", "iPhone", "PRODUCT")],
        },
    )
    assert metrics(rows, load_schema().opposite_relations)["overall"]["contradictions"] == 0
    other = tmp_path / "schema.yaml"
    other.write_text(yaml.safe_dump({**spec, "opposite_relations": [["Produces", "Supplies"]]}))
    schema = load_schema(other)
    assert schema.opposite_relations == (("Produces", "Supplies"),)
    assert metrics(rows, schema.opposite_relations)["overall"]["contradictions"] == 1


def test_opposite_pairs_are_optional_and_checked(tmp_path):
    spec = yaml.safe_load(default_schema_path().read_text())
    without = tmp_path / "without.yaml"
    without.write_text(yaml.safe_dump({k: v for k, v in spec.items() if k != "opposite_relations"}))
    assert load_schema(without).opposite_relations == ()
    for pairs, message in [
        ([["Increases", "Shrinks"]], "'Shrinks' is not a relation"),
        ([["Increases", "Increases"]], "not a new pair of two"),
        ([["Increases", "Decreases"], ["Decreases", "Increases"]], "not a new pair of two"),
        ([["Increases"]], "opposite_relations"),
    ]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump({**spec, "opposite_relations": pairs}))
        load_schema.cache_clear()
        with pytest.raises(FinReflectError, match=message):
            load_schema(bad)


def test_invalid_type_pairs_count_types_beyond_the_first():
    rows = triples(
        "AAPL_2024",
        {
            "s1": [("Apple", "ORG", "Produces", "iPhone", "PRODUCT")],
            "s2": [("AAPL", "COMP", "Produces", "iPhone", "PRODUCT")],
            "s3": [
                ("Vision Pro", "PRODUCT", "Related_To", "AAPL", "SEGMENT"),
                ("iPhone", "", "Related_To", "Vision Pro", "PRODUCT"),  # no type: not a type
            ],
        },
    )
    counts = metrics(rows)["overall"]
    assert counts["invalid_type_pairs"] == 2  # aapl: ORG, COMP, SEGMENT
    assert counts["entities"] == 3


def test_largest_component_is_weakly_connected():
    rows = triples(
        "KO_2024",
        {
            "s1": [
                ("A", "COMP", "Supplies", "B", "COMP"),
                ("C", "COMP", "Supplies", "B", "COMP"),  # A -> B <- C: one weak component
                ("D", "COMP", "Supplies", "E", "COMP"),
                ("F", "COMP", "Related_To", "F", "COMP"),  # a loop, alone
            ],
        },
    )
    counts = metrics(rows)["overall"]
    assert (counts["entities"], counts["largest_component_share"]) == (6, 0.5)
    assert counts["cross_chunk_entities"] == 0


def test_overall_sums_counts_and_recomputes_shares():
    rows = [
        *triples("AAPL_2024", APPLE),
        *triples("KO_2024", {"s1": [("Coca-Cola", "ORG", "Produces", "Coke", "PRODUCT")]}),
    ]
    result = metrics(rows)
    assert result["per_filing"]["KO_2024"]["largest_component_share"] == 1.0
    assert result["overall"] == {
        "entities": 7,
        "edges": 5,
        "surface_forms_per_entity": round(11 / 7, 4),
        "fragmented_share": round(2 / 7, 4),
        "duplicate_triples": 1,
        "contradictions": 0,
        "invalid_type_pairs": 0,
        "largest_component_share": round(5 / 7, 4),  # 3 of Apple's 5, 2 of Coca-Cola's 2
        "cross_chunk_entities": 3,
        "filings": 2,
    }


def test_no_triples_no_shares():
    result = metrics([])
    assert result["per_filing"] == {}
    assert result["overall"]["filings"] == 0
    assert result["overall"]["entities"] == 0
    assert result["overall"]["fragmented_share"] is None
    assert result["overall"]["largest_component_share"] is None


def test_reference_overlap_exact_and_normalised_by_hand():
    predicted = triples(
        "AAPL_2024",
        {
            "s1": [
                ("Apple Inc.", "ORG", "Produces", "iPhone", "PRODUCT"),
                ("AAPL", "ORG", "Increases", "Net Sales", "FIN_METRIC"),
                ("Apple", "ORG", "Partners_With", "Microsoft Corp.", "COMP"),
            ]
        },
    )
    reference = triples(
        "AAPL_2024",
        {
            "s1": [
                ("AAPL", "ORG", "Produces", "iPhone", "PRODUCT"),
                ("AAPL", "ORG", "Increases", "net sales", "FIN_METRIC"),
                ("AAPL", "ORG", "Depends_On", "TSMC", "COMP"),
            ]
        },
    )
    result = metrics(predicted, reference=triple_table(reference))["reference"]
    # Exact: predicted entities {Apple Inc., iPhone, AAPL, Net Sales, Apple, Microsoft Corp.},
    # reference {AAPL, iPhone, net sales, TSMC}: iPhone and AAPL match; no edge matches.
    assert result["exact"]["entity"] == {
        "precision": 0.3333,
        "recall": 0.5,
        "f1": 0.4,
        "predicted": 6,
        "reference": 4,
        "matched": 2,
    }
    assert result["exact"]["edge"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "predicted": 3,
        "reference": 3,
        "matched": 0,
    }
    # Normalised: {aapl, iphone, net sales, microsoft} against {aapl, iphone, net sales, tsmc}.
    assert result["normalised"]["entity"] == {
        "precision": 0.75,
        "recall": 0.75,
        "f1": 0.75,
        "predicted": 4,
        "reference": 4,
        "matched": 3,
    }
    assert result["normalised"]["edge"] == {
        "precision": 0.6667,
        "recall": 0.6667,
        "f1": 0.6667,
        "predicted": 3,
        "reference": 3,
        "matched": 2,
    }


def test_reference_overlap_is_per_filing_and_none_without_reference():
    triple = ("AAPL", "ORG", "Produces", "iPhone", "PRODUCT")
    predicted = triple_table(triples("AAPL_2023", {"s1": [triple]}))
    reference = triple_table(triples("AAPL_2024", {"s1": [triple]}))
    edge = reference_overlap(predicted, reference)["normalised"]["edge"]
    assert (edge["matched"], edge["precision"], edge["recall"]) == (0, 0.0, 0.0)
    assert reference_overlap(predicted, None) is None
    assert reference_overlap(predicted, triple_table([])) is None
    empty = reference_overlap(triple_table([]), reference)["exact"]["entity"]
    assert (empty["precision"], empty["recall"], empty["f1"]) == (None, 0.0, None)


def test_filing_graph_holds_surface_forms_types_and_spans():
    graph = filing_graph(triple_table(triples("AAPL_2024", APPLE)))
    assert isinstance(graph, nx.MultiDiGraph)
    assert graph.number_of_nodes() == 5
    assert graph.number_of_edges() == 5  # a triple is an edge, duplicates too
    assert graph.nodes["aapl"]["surface_forms"] == ["AAPL", "Apple", "Apple Inc.", "apple inc"]
    assert graph.nodes["microsoft"]["types"] == ["COMP"]
    assert graph.nodes["iphone"]["spans"] == ["AAPL_2024_s1", "AAPL_2024_s2"]
    spans = sorted(
        d["span_id"] for *_, d in graph.edges("aapl", data=True) if d["relation"] == "Produces"
    )
    assert spans == ["AAPL_2024_s1", "AAPL_2024_s2"]
    largest = max(nx.weakly_connected_components(graph), key=len)
    assert largest == {"aapl", "iphone", "microsoft"}
