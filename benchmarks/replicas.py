"""Data parallelism's fixed cost on Ray, and from what run size it pays, as one Markdown table:
`finreflect-eval extract` of the bundled sample (`finreflect_single_pass`, batch_size=2) by a
candidate whose every call takes 3 s (`tests/support/replica_responders.extraction_3s`: the
span's reference triples), run in turn with data_parallel_size=1 and =N (`--runs` pairs, in
alternating order; medians), offline as in CI:

- wall seconds of the whole command, and of the extraction alone (the manifest's task seconds);
- Ray's fixed cost F: what data parallelism adds to the time outside the extraction, and its
  parts from the log lines of `models.replicas`: `import ray`, the start (with `--early-start`,
  the part the run waited for), placing and loading the replicas, the stop at exit, and the rest
  (the run's own work, slower beside Ray's processes on few cores; the exit);
- the speed-up, and whether the samples are the same (all but their timings);
- the break-even: N calls of t seconds on two replicas pay when N·t/2 > F.

    python benchmarks/replicas.py [--runs 3] [--replicas 2] [--limit N] [--early-start]
                                  [--checkout PATH]

`--early-start` runs the command through a wrapper that calls `replicas.start_ray_early` with
the model args before the command imports the pipeline. `extract` and `run` do that themselves
now; the wrapper gives an older `--checkout` the same start. `--checkout` runs another copy of the
package (an older one: the before figures; Ray's figures need its log lines).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from finreflect_eval._util.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
RESPONDER = "support.replica_responders:extraction_3s"
TASK = "finreflect_single_pass"

# The command line, with `start_ray_early` called first (the model args are argv's).
EARLY = """
import sys
from finreflect_eval.models import parse_model_args
from finreflect_eval.models.replicas import start_ray_early
argv = sys.argv[1:]
start_ray_early(parse_model_args(argv[argv.index("--model-args") + 1]))
from finreflect_eval.cli import main
sys.exit(main(argv))
"""

LOG = {
    "start": re.compile(
        r"Ray: (?:started a local instance|joined the cluster) in ([\d.]+) s \(import ([\d.]+) s"
        r"(?:; started early, the run waited ([\d.]+) s for it)?\)"
    ),
    "load": re.compile(r"\d+ replicas of \S+ placed and loaded in ([\d.]+) s"),
    "stop": re.compile(r"Ray: (?:stopped|left) in ([\d.]+) s"),
}


def extract(
    replicas: int, folder: Path, limit: int | None, early: bool, checkout: Path | None
) -> dict:
    """One `extract` in a child process: its wall seconds, task seconds, Ray's log figures and
    its samples."""
    model_args = f"responses={RESPONDER},batch_size=2,data_parallel_size={replicas}"
    command = ["extract", "--model", "c", "--backend", "scripted", "--model-args", model_args]
    command += ["--tasks", TASK, "--dataset", "sample", "--output-path", str(folder), "--no-cache"]
    command += ["--limit", str(limit)] if limit else []
    python = [sys.executable, "-c", EARLY] if early else [sys.executable, "-m", "finreflect_eval"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(checkout), str(checkout / "tests")] if checkout else [str(REPO / "tests")]
        ),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    started = time.perf_counter()
    cwd = checkout or REPO
    done = subprocess.run(python + command, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"extract with {replicas} replica(s) failed:\n{done.stderr[-3000:]}")
    (manifest,) = (folder / "c").glob("manifest_*.json")
    (samples,) = (folder / "c").glob(f"samples_{TASK}_*.jsonl")
    found = {
        "wall": wall,
        "task": json.loads(manifest.read_text())["tasks"][TASK]["seconds"],
        "samples": [untimed(json.loads(line)) for line in samples.read_text().splitlines()],
    }
    start = LOG["start"].search(done.stderr)
    load, stop = LOG["load"].search(done.stderr), LOG["stop"].search(done.stderr)
    if replicas > 1 and start and load and stop:  # (an older checkout logs none)
        found["import"], found["init"] = float(start[2]), float(start[1])
        found["waited"] = float(start[3]) if start[3] is not None else found["init"]
        found["load"], found["stop"] = float(load[1]), float(stop[1])
    return found


def untimed(value):
    """A sample without its clock readings (the seconds of each call differ from run to run)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in ("seconds", "device_seconds")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="pairs of runs (default 3)")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--limit", type=int, help="spans (default: the whole sample)")
    parser.add_argument("--early-start", action="store_true", help="see above")
    parser.add_argument("--checkout", type=Path, help="another copy of the repository")
    args = parser.parse_args()
    runs: dict[int, list[dict]] = {1: [], args.replicas: []}
    with tempfile.TemporaryDirectory() as scratch:
        for number in range(args.runs):
            order = (1, args.replicas) if number % 2 == 0 else (args.replicas, 1)
            for size in order:
                folder = Path(scratch) / f"dp{size}-{number}"
                found = extract(size, folder, args.limit, args.early_start, args.checkout)
                runs[size].append(found)
    one, many = runs[1], runs[args.replicas]
    calls = len(one[0]["samples"])

    def median(figures: list[dict], key: str) -> float:
        values = [figure[key] for figure in figures if key in figure]
        return statistics.median(values) if values else float("nan")

    same = all(run["samples"] == one[0]["samples"] for run in one + many)
    pairs = sorted(a["wall"] / b["wall"] for a, b in zip(one, many, strict=True))
    speedup = median(one, "wall") / median(many, "wall")
    fixed = {key: median(many, key) for key in ("import", "init", "waited", "load", "stop")}
    logged = fixed["import"] + fixed["waited"] + fixed["load"] + fixed["stop"]
    outside = [
        median(one, "wall") - median(one, "task"),
        median(many, "wall") - median(many, "task"),
    ]
    cost = outside[1] - outside[0]  # F: what Ray adds to the run, outside the extraction
    per_call = median(one, "task") / calls
    dp = f"data_parallel_size={args.replicas}"
    start_note = "in the background (--early-start)" if args.early_start else "when the model loads"
    rows = [
        ["calls (spans × 1 call), each", f"{calls} × {per_call:.2f} s", "", ""],
        [
            "wall, whole command",
            f"{median(one, 'wall'):.1f} s",
            f"{median(many, 'wall'):.1f} s",
            f"{speedup:.2f}x (pairs {pairs[0]:.2f}–{pairs[-1]:.2f}x)",
        ],
        [
            "extraction alone (task seconds)",
            f"{median(one, 'task'):.1f} s",
            f"{median(many, 'task'):.1f} s",
            f"{median(one, 'task') / median(many, 'task'):.2f}x",
        ],
        [
            "outside the extraction (start, data, load, exit)",
            f"{outside[0]:.2f} s",
            f"{outside[1]:.2f} s",
            "",
        ],
        ["Ray: `import ray`", "", f"{fixed['import']:.2f} s", ""],
        [
            f"Ray: start (`ray.init`), {start_note}",
            "",
            f"{fixed['waited']:.2f} s",
            f"of {fixed['init']:.2f} s" if args.early_start else "",
        ],
        [f"Ray: {args.replicas} replicas placed and loaded", "", f"{fixed['load']:.2f} s", ""],
        ["Ray: stop (`ray.shutdown`, at exit)", "", f"{fixed['stop']:.2f} s", ""],
        [
            "the rest: the run's own work beside Ray's processes, exit",
            "",
            f"{cost - logged:.2f} s",
            "",
        ],
        ["Ray's fixed cost F (the difference outside the extraction)", "", f"{cost:.2f} s", ""],
        [
            "same samples (all but timings)",
            "",
            "yes" if same else "NO",
            f"{len(one) + len(many)} runs",
        ],
        [
            "two replicas pay from (N·t/2 > F)",
            "",
            f"{2 * cost / per_call:.1f} calls",
            f"of {per_call:.2f} s, in 2 batches or more",
        ],
    ]
    print(
        f"`extract`, bundled sample, {TASK}, batch_size=2, {args.runs} pairs of runs, medians; "
        f"{os.cpu_count()} CPUs"
    )
    print(markdown_table(["measure", "one model", dp, "ratio / note"], rows))
    if not same:
        raise SystemExit("the samples differ between runs")


if __name__ == "__main__":
    main()
