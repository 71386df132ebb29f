"""A panel whose votes leave α undefined on one criterion still scores: the results hold
`alpha: null` with the reason, the table shows n/a, and `score` exits 0."""

from conftest import run_cli
from support.edited_runs import recast
from support.runs import panel_file, scripted_run

from finreflect_eval.records import Results, SampleRecord, read_lines


def _unpaired_disagreement(samples_path):
    """Faithfulness votes where the items with two votes all say 1, and the 0s sit on items
    with a single vote (the two other judges' calls on that span failed), as if the judges
    had voted so (`recast`: the calls answer what the votes say)."""
    records = read_lines(SampleRecord, samples_path)
    for number, record in enumerate(records):
        for cast in (by_criterion["faithfulness"] for by_criterion in record.votes.values()):
            first = number == 0
            for judge, verdict in (("judge-0", 1), ("judge-1", 1), ("judge-2", None)):
                verdict = (0 if judge == "judge-2" else None) if first else verdict
                cast[judge] = [vote.model_copy(update={"verdict": verdict}) for vote in cast[judge]]
        recast(record)
    samples_path.write_text("".join(record.model_dump_json() + "\n" for record in records))


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
