"""A panel whose votes leave α undefined on one criterion still scores: the results hold
`alpha: null` with the reason, the table shows n/a, and `score` exits 0."""

import json

from conftest import run_cli
from support.runs import panel_file, scripted_run

from finreflect_eval.records import Results


def _unpaired_disagreement(samples_path):
    """Faithfulness votes where the items with two votes all say 1, and the one 0 sits on an
    item with a single vote (the two other judges abstained there)."""
    lines = samples_path.read_text().splitlines()
    rewritten = []
    for number, line in enumerate(lines):
        record = json.loads(line)
        for by_criterion in record["votes"].values():
            cast = by_criterion["faithfulness"]
            for item in range(len(cast["judge-0"])):
                first = number == 0 and item == 0
                for judge, verdict in (("judge-0", 1), ("judge-1", 1), ("judge-2", None)):
                    cast[judge][item]["verdict"] = None if first and judge != "judge-2" else verdict
                if first:
                    cast["judge-2"][item]["verdict"] = 0
        rewritten.append(json.dumps(record))
    samples_path.write_text("\n".join(rewritten) + "\n")


def test_score_writes_null_alpha_with_its_reason_and_exits_0(tmp_path):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    results_path = scripted_run(tmp_path / "run", "candidate", 3, panel)
    folder = results_path.parent
    [samples] = folder.glob("samples_*.jsonl")
    _unpaired_disagreement(samples)
    results_path.unlink()

    scored = run_cli("score", "--samples", str(folder))

    assert scored.returncode == 0, scored.stderr
    results = Results.model_validate_json(results_path.read_text())
    [agreement] = results.agreement.values()
    faithfulness = agreement["faithfulness"]
    assert faithfulness.alpha is None and faithfulness.ci is None
    assert faithfulness.reason.startswith("undefined") and not faithfulness.below_gate
    assert agreement["precision"].alpha is not None  # the other criteria are untouched
    assert "n/a" in scored.stdout
