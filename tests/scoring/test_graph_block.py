"""The results' `graph` block on a hand-made filing: a candidate whose triples name Apple three
ways, type it two ways, say net sales both rose and fell, and state an amount the span does not
hold, in both of AAPL's spans; every count known in advance. And the grounding cascade: the
ungrounded triple never reaches a judge, and the calls it saves are counted."""

from __future__ import annotations

import json

import pytest

import finreflect_eval
from finreflect_eval.data import load_benchmark
from finreflect_eval.models.scripted import ScriptedModel
from finreflect_eval.pipeline.judging import Panel

TASK = "finreflect_single_pass"  # (the smoke tasks take 3 triples a span)
JUDGES = ("judge-0", "judge-1", "judge-2")


def triple(subject, subject_type, relation, obj, object_type):
    return dict(
        zip(
            ("subject", "subject_type", "relation", "object", "object_type"),
            (subject, subject_type, relation, obj, object_type),
            strict=True,
        )
    )


UNGROUNDED = triple("AAPL", "ORG", "Discloses", "net sales of $999.9 billion", "FIN_METRIC")
FIRST_SPAN = [
    triple("Apple Inc.", "ORG", "Increases", "net sales", "FIN_METRIC"),
    triple("AAPL", "ORG", "Decreases", "net sales", "FIN_METRIC"),
    triple("Apple", "COMP", "Operates_In", "China", "GPE"),
    UNGROUNDED,
]
SECOND_SPAN = [UNGROUNDED]  # every triple ungrounded: the cascade makes no triple call here


def judge(request) -> str:
    properties = request.schema["properties"]
    if "verdicts" in properties:
        item = {"verdict": 1, "reasoning": "Stated.", "warning": ""}
        return json.dumps({"verdicts": [item] * properties["verdicts"]["minItems"]})
    return json.dumps({"verdict": "good", "reasoning": "Covered.", "warning": ""})


def evaluate(tmp_path, **kwargs):
    spans = [span.span_id for span in load_benchmark("sample", split="test").spans]
    apple = [span for span in spans if span.startswith("AAPL_")]
    candidate = ScriptedModel(
        "apple-kg",
        responses=[json.dumps({"triples": FIRST_SPAN}), json.dumps({"triples": SECOND_SPAN})],
    )
    judges = {name: ScriptedModel(responses=judge) for name in JUDGES}
    results = finreflect_eval.simple_evaluate(
        candidate,
        tasks=[TASK],
        judges=Panel.from_models(judges, "scripted"),
        dataset="sample",
        samples={TASK: apple},
        output_path=tmp_path,
        use_cache=False,
        **kwargs,
    )
    return results, sum(len(model.requests) for model in judges.values())


def test_the_graph_counts_are_those_of_the_hand_made_filing(tmp_path):
    results, _ = evaluate(tmp_path)
    graph = results["graph"][TASK]
    assert list(graph["per_filing"]) == ["AAPL_2024"]
    assert graph["overall"] == {
        "entities": 4,  # aapl (Apple Inc., AAPL, Apple), net sales, China, the amount
        "edges": 4,
        "surface_forms_per_entity": 1.5,  # (3 + 1 + 1 + 1) / 4
        "fragmented_share": 0.25,  # aapl
        "duplicate_triples": 1,  # the amount's triple, again in the second span
        "contradictions": 1,  # aapl Increases / Decreases net sales
        "invalid_type_pairs": 1,  # Apple as ORG and as COMP
        "largest_component_share": 1.0,
        "cross_chunk_entities": 2,  # aapl and the amount, in both spans
        "filings": 1,
    }
    assert graph["grounding"] == {"checked": 2, "grounded": 0, "ungrounded": 2}
    assert graph["cascade"] is None  # the paper's protocol: every triple judged
    assert ["Increases", "Decreases"] in graph["opposite_relations"]
    assert graph["reference"]["exact"]["edge"]["reference"] > 0  # the sample has gold triples


def test_the_cascade_keeps_ungrounded_triples_from_the_judges(tmp_path):
    judged_all, calls_all = evaluate(tmp_path / "all")
    cascaded, calls = evaluate(tmp_path / "cascade", skip_judging_ungrounded=True)
    assert cascaded["graph"][TASK]["cascade"] == {"triples_skipped": 2, "judge_calls_saved": 9}
    assert calls_all - calls == 9  # F, P and R of the second span, for three judges
    assert judged_all["graph"][TASK]["cascade"] is None
    # Scored 0 by rule: faithfulness falls from 5/5 to 3/5.
    assert judged_all["results"][TASK]["faithfulness,none"] == pytest.approx(100.0)
    assert cascaded["results"][TASK]["faithfulness,none"] == pytest.approx(60.0)
    samples = cascaded["samples"][TASK]
    votes = samples[1]["votes"]["scripted"]["faithfulness"]["judge-0"]
    assert votes == [
        {
            "verdict": 0,
            "reasoning": "A number, amount or date it states is not in the span.",
            "warning": "ungrounded",
            "synthetic": True,
        }
    ]


def test_the_summary_says_what_the_graph_is(tmp_path):
    from finreflect_eval.pipeline.summary import results_table
    from finreflect_eval.records import Results

    _, _ = evaluate(tmp_path, skip_judging_ungrounded=True)
    written = Results.model_validate_json(next(tmp_path.glob("*/results_*.json")).read_text())
    assert (
        f"graph {TASK}: 4 entities, 4 edges, 25% fragmented, 1 duplicate(s), 1 contradiction(s), "
        "1 type conflict(s); figures grounded: 0 of 2; cascade: 2 ungrounded triple(s) scored 0 "
        "unjudged, 9 judge call(s) saved"
    ) in results_table(written)
