"""The downstream track's deterministic measures against a hand computation on the sample's
questions: a 3-hop path, a relation that does not match, an entity written two ways, a hop
whose chunk has no triple; and the task's means from them."""

import pytest
from support.multihop import qa_sample

from finreflect_eval.chunking import token_counter
from finreflect_eval.data import load_benchmark
from finreflect_eval.downstream.graph import ModelGraph, evidence, measure, path, subgraph
from finreflect_eval.graph.table import triple_table
from finreflect_eval.records.downstream import DownstreamFile, QASettings
from finreflect_eval.scoring.downstream import scores_of

THREE_HOP = "AMT's 2021 Credit Facility"  # words of the 3-hop question (AMT, then SPG)
LINDE = "2021 Linde plc Long Term Incentive Plan"


@pytest.fixture(scope="module")
def sample():
    return load_benchmark(str(qa_sample()))


def question(sample, words: str):
    return next(q for q in sample.questions if words in q.question)


def graph_of(*triples: tuple[str, str, str, str]) -> ModelGraph:
    """A model graph of (span_id, subject, relation, object) triples; the filer is the span's
    ticker, with no company name (as the MultiHop data gives none)."""
    rows = [
        {
            "task": "t",
            "span_id": span,
            "filing": "_".join(span.split("_")[:2]),
            "ticker": span.split("_")[0],
            "company": None,
            "triple_index": index,
            "subject": subject,
            "subject_type": "",
            "relation": relation,
            "object": obj,
            "object_type": "",
        }
        for index, (span, subject, relation, obj) in enumerate(triples)
    ]
    return ModelGraph(triple_table(rows))


def three_hop_graph() -> ModelGraph:
    return graph_of(
        # hop 1 (AMT -Discloses-> 2021 Credit Facility), the tail written another way
        ("AMT_2022_page_111_chunk_1", "AMT", "Discloses", "The 2021 Credit Facility."),
        # hop 2 (2021 Credit Facility -Supplies-> Financing) with another relation
        ("AMT_2022_page_52_chunk_1", "2021 credit facility", "Related_To", "Financing"),
        # hop 3 (SPG -Supplies-> Financing), the relation in other case and separators
        ("SPG_2022_page_116_chunk_5", "SPG", "supplies", "financing"),
        # a triple of the right entities in the wrong chunk counts for no hop
        ("SPG_2022_page_116_chunk_5", "AMT", "Discloses", "2021 Credit Facility"),
    )


def test_evidence_of_a_three_hop_question_by_hand(sample):
    found = evidence(question(sample, THREE_HOP), three_hop_graph())
    # hop 1: "The 2021 Credit Facility." is "2021 credit facility" (the, the dot): found;
    # hop 2: head and tail found, Related_To is not Supplies; hop 3: "supplies" is Supplies.
    assert [(h.edge, h.entities) for h in found] == [(True, True), (False, True), (True, True)]


def test_a_hop_is_looked_for_in_its_own_chunk_only(sample):
    moved = graph_of(("SPG_2022_page_116_chunk_5", "AMT", "Discloses", "2021 Credit Facility"))
    found = evidence(question(sample, THREE_HOP), moved)
    assert [(h.edge, h.entities) for h in found] == [(False, False)] * 3


def test_the_three_hop_path_is_connected_within_three_edges_not_two(sample):
    q = question(sample, THREE_HOP)
    found = path(q, three_hop_graph(), max_hops=3)
    # amt - 2021 credit facility - financing - spg (direction ignored)
    assert (found.connected, found.length) == (True, 3)
    assert found.nodes == ["amt", "2021 credit facility", "financing", "spg"]
    assert not path(q, three_hop_graph(), max_hops=2).connected


def test_a_company_against_itself_ends_at_the_entity_the_hops_meet_at(sample):
    q = question(sample, LINDE)
    assert (q.start, q.end) == ("LIN", LINDE)
    half = graph_of(("LIN_2023_page_105_chunk_3", "Linde", "Discloses", LINDE))
    # "Linde" is not the ticker LIN (the data names no company): the path is not there
    assert not path(q, half, 3).connected
    whole = graph_of(("LIN_2023_page_85_chunk_1", "LIN", "Introduces", LINDE.lower()))
    assert path(q, whole, 3).length == 1
    assert [(h.edge, h.entities) for h in evidence(q, whole)] == [(False, False), (True, True)]


def test_the_subgraph_starts_at_the_questions_entities_and_keeps_to_the_budget(sample):
    q = question(sample, THREE_HOP)
    far = ("SPG_2022_page_116_chunk_5", "Unrelated Co", "Partners_With", "Someone Else")
    graph = graph_of(*[(s, a, r, b) for s, a, r, b in [*_triples(three_hop_graph()), far]])
    count = token_counter()
    shown = subgraph(q, graph, hops=2, budget=1000, count_tokens=count)
    lines = [f"{t.subject} -[{t.relation}]-> {t.object}" for t in shown]
    assert "Unrelated Co -[Partners_With]-> Someone Else" not in lines  # not within 2 hops
    assert lines[0] == "AMT -[Discloses]-> The 2021 Credit Facility."  # nearest first
    assert len(lines) == 4
    tight = subgraph(q, graph, hops=2, budget=count(lines[0] + "\n"), count_tokens=count)
    assert len(tight) == 1


def _triples(graph: ModelGraph):
    table = graph.table.to_pylist()
    return [(r["span_id"], r["subject"], r["relation"], r["object"]) for r in table]


def test_a_tasks_means_are_the_questions_means(sample):
    graph = three_hop_graph()
    settings = QASettings(
        name="q",
        model="m",
        backend="scripted",
        prompt_sha="0" * 64,
        budget_tokens=64,
        neighbourhood_hops=2,
    )
    count = token_counter()
    records = [measure(q, "t", graph, 3, settings, count) for q in sample.questions]
    file = DownstreamFile(task="t", panel="p", qa=settings, max_hops=3, questions=records)
    scores = scores_of(file, seed=1, iterations=200)
    # Only the 3-hop question has triples: recall 2/3 (entities 3/3), connected; 6 others 0.
    assert scores.evidence_recall.value == pytest.approx(100 * (2 / 3) / 7, abs=1e-3)
    assert scores.evidence_recall_entities.value == pytest.approx(100 / 7, abs=1e-3)
    assert scores.path_connected.value == pytest.approx(100 / 7, abs=1e-3)
    assert (scores.questions, scores.filings, scores.evidence_recall.n) == (7, 5, 7)
    low, high = scores.evidence_recall.ci
    assert 0 <= low <= scores.evidence_recall.value <= high <= 100
    assert scores.qa == {}  # nothing answered
