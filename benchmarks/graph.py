"""What the graph costs at the benchmark's size, as one Markdown table: on the synthetic judged
run of `pipeline.py` (c) (480,000 triples over 3 modes, 40 a span, 40 spans a filing),

- the graph metrics of every task (`graph.metrics.graph_metrics`, as `score` computes them);
- the grounding checks of every triple (`graph.grounding.ground_spans`, as the judge stage's
  save computes them into the score index);
- `score` itself (run it on an older checkout for the before figure: `farm-bench --vs`).

    python benchmarks/graph.py [--triples 480000]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline import score_cost, synthetic_run

from finreflect_eval._util.tables import markdown_table
from finreflect_eval.graph.grounding import ground_spans
from finreflect_eval.graph.metrics import graph_metrics
from finreflect_eval.protocol.schema import load_schema
from finreflect_eval.records import SampleRecord, read_lines
from finreflect_eval.runs.store import load_run
from finreflect_eval.scoring.graph import triple_table


def measure(what: str, run_folder: Path) -> None:
    """One measurement, in this (fresh) process: prints seconds and peak GB."""
    run = load_run(run_folder, for_scoring=True)
    started = time.perf_counter()
    if what == "metrics":
        for task, facts in run.span_facts.items():
            graph_metrics(triple_table(task, facts), load_schema().opposite_relations)
    else:
        spans = []
        for path in sorted(run_folder.glob("samples_*.jsonl")):
            for record in read_lines(SampleRecord, path):
                spans.append((record.text, [(t.subject, t.object) for t in record.triples]))
        started = time.perf_counter()
        ground_spans(spans)
    seconds = time.perf_counter() - started
    print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2)


def child(what: str, run_folder: Path) -> tuple[float, float]:
    command = [sys.executable, __file__, "--measure", what, "--run", str(run_folder)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    seconds, peak = done.stdout.split()
    return float(seconds), float(peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triples", type=int, default=480_000)
    parser.add_argument("--run", type=Path, help="an existing judged run (default: a new one)")
    parser.add_argument("--measure", choices=("metrics", "grounding"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        return measure(args.measure, args.run)
    with tempfile.TemporaryDirectory() as scratch:
        run_folder = args.run or synthetic_run(Path(scratch), args.triples)
        seconds, peak = child("metrics", run_folder)
        rows = [["graph metrics, every task", f"{seconds:.1f} s", f"{peak:.2f} GB peak"]]
        seconds, peak = child("grounding", run_folder)
        rows.append(["grounding checks, every triple", f"{seconds:.1f} s", ""])
        seconds, peak = score_cost(run_folder)
        rows.append(["score, from the score index", f"{seconds:.1f} s", f"{peak:.2f} GB peak"])
    print(markdown_table(["measure", "value", "detail"], rows))


if __name__ == "__main__":
    main()
