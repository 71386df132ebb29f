"""What the human loop costs at the benchmark's size, as one Markdown table: on the synthetic
judged run of `pipeline.py` (c) (3 modes, 3 judges, 40 triples a span, 40 spans a filing),

- `review export --audit-sample N --no-queue`: about 10,000 Label Studio tasks written;
- `review import`: those tasks, each annotated (as Label Studio exports them), read back;
- `score` before and after the import: the seconds and peak memory the `human` block adds.

    python benchmarks/human_review.py [--triples 480000] [--tasks 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pipeline import TASKS, TRIPLES_PER_SPAN, score_cost, synthetic_run
from support.human_labels import annotated

from finreflect_eval._util.tables import markdown_table


def timed(*args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "finreflect_eval", *args], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triples", type=int, default=480_000)
    parser.add_argument("--tasks", type=int, default=10_000, help="Label Studio tasks, about")
    args = parser.parse_args()
    # The audit's share of spans rides along (1 span for each 40 triples drawn).
    per_task = round(args.tasks / len(TASKS) / (1 + 1 / TRIPLES_PER_SPAN))
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        run = synthetic_run(Path(scratch), args.triples)
        before = score_cost(run)
        seconds = timed("review", "export", str(run), "--audit-sample", str(per_task), "--no-queue")
        tasks = json.loads((run / "label-studio" / "tasks.json").read_text())
        rows.append([f"review export, {len(tasks):,} tasks", f"{seconds:.1f} s", ""])
        export = Path(scratch) / "export.json"
        export.write_text(json.dumps(annotated(tasks, seed=random.randrange(1 << 30))))
        seconds = timed("review", "import", str(run), str(export))
        rows.append([f"review import, {len(tasks):,} tasks", f"{seconds:.1f} s", ""])
        after = score_cost(run)
        for name, (seconds, peak) in (("without", before), ("with", after)):
            rows.append(
                [
                    f"score, {args.triples:,} triples, {name} people's labels",
                    f"{seconds:.1f} s",
                    f"{peak:.2f} GB peak",
                ]
            )
        rows.append(
            [
                "the labels add",
                f"{after[0] - before[0]:+.1f} s",
                f"{(after[1] - before[1]) * 1024:+.0f} MB peak",
            ]
        )
    print(markdown_table(["measure", "value", "detail"], rows))


if __name__ == "__main__":
    main()
