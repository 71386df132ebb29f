"""The judge protocol as the paper states it: a verdict, then a justification of at most 15
words. A judge that writes longer, or justifies before it commits, is reported per judge (its
votes are kept); an α level that is not computed here is refused, never replaced."""

import json

import numpy as np
import pytest
from support.runs import panel_file, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.pipeline.summary import results_table
from finreflect_eval.records import Results
from finreflect_eval.stats import uncertainty

TASK = "finreflect_smoke_single_pass"


def test_long_reasoning_and_reasoning_first_are_counted_per_judge_votes_kept(tmp_path):
    panel = panel_file(tmp_path, "wordy", "reasons_first", "accepts_all")
    path = scripted_run(tmp_path, "candidate", 6, panel)
    results = Results.model_validate_json(path.read_text())
    details = results.details[TASK]
    protocol = details.judge_protocol

    # Worked out here from the samples: each vote's words after JSON decoding, and each
    # accepted answer's key order.
    votes, long, calls, first = {}, {}, {}, {}
    for line in (path.parent / results.samples[TASK]).read_text().splitlines():
        record = json.loads(line)
        for by_judge in record["votes"][results.judges.panel].values():
            for judge, cast in by_judge.items():
                mine = [v for v in cast if v["verdict"] is not None and not v["synthetic"]]
                votes[judge] = votes.get(judge, 0) + len(mine)
                long[judge] = long.get(judge, 0) + sum(
                    len(v["reasoning"].split()) > 15 for v in mine
                )
        for call in record["judge_calls"][results.judges.panel]:
            answer = json.loads(call["text"])
            objects = answer.get("verdicts", [answer])
            late = any(list(o).index("reasoning") < list(o).index("verdict") for o in objects)
            calls[call["model"]] = calls.get(call["model"], 0) + 1
            first[call["model"]] = first.get(call["model"], 0) + late

    assert long["judge-0"] == votes["judge-0"] > 0 and first["judge-1"] == calls["judge-1"] > 0
    for judge in ("judge-0", "judge-1", "judge-2"):
        assert protocol[judge].votes == votes[judge]
        assert protocol[judge].long_reasoning == long[judge]
        assert protocol[judge].calls == calls[judge]
        assert protocol[judge].reasoning_first == first[judge]
    assert protocol["judge-2"].long_reasoning == protocol["judge-2"].reasoning_first == 0
    assert details.criteria["faithfulness"].per_judge["judge-0"] == 100.0  # its votes count
    assert details.criteria["faithfulness"].items.abstentions == 0

    table = results_table(results)
    assert f"judge-0: {long['judge-0']} of {votes['judge-0']} reasonings over 15 words" in table
    assert f"judge-1: reasoning before the verdict in {first['judge-1']} of" in table
    assert "judge-2" not in table.split("judge protocol")[1].splitlines()[0]


def test_a_panel_that_keeps_the_protocol_has_no_protocol_line(tmp_path):
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    results = Results.model_validate_json(scripted_run(tmp_path, "c", 3, panel).read_text())
    assert all(
        p.long_reasoning == p.reasoning_first == 0
        for p in results.details[TASK].judge_protocol.values()
    )
    assert "judge protocol" not in results_table(results)


@pytest.mark.parametrize("level", ["interval", "ratio", "Nominal", ""])
def test_an_alpha_level_not_computed_here_is_refused(level):
    coincidence = np.array([[3.0, 1.0, 1.0, 3.0]])
    with pytest.raises(FinReflectError, match=r"α level .* is not computed here") as raised:
        uncertainty.alpha(coincidence, level)
    assert "\n" not in str(raised.value) and "nominal, ordinal" in str(raised.value)
    assert uncertainty.alpha(coincidence, "ordinal") == uncertainty.alpha(coincidence, "nominal")
