"""`score` reads a run folder and writes files: it imports nothing of the Hub stack or of a
model's (seconds of imports on every call; a profile of 480k triples found 2.9 s of them)."""

import subprocess
import sys

from support.runs import panel_file, scripted_run

HEAVY = ("datasets", "huggingface_hub", "transformers", "torch", "vllm", "ray")


def test_score_imports_neither_the_hub_stack_nor_a_model_s(tmp_path):
    panel = panel_file(tmp_path, "accepts_all", "rejects_all", "gold_labels")
    run = scripted_run(tmp_path, "cand", 2, panel).parent
    code = (
        "import sys\n"
        "from finreflect_eval.cli import main\n"
        f"code = main(['score', '--samples', {str(run)!r}])\n"
        f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip().splitlines()[-1] == "0 []", ran.stdout[-2000:]
