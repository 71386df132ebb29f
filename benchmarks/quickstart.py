"""The README's quickstart timed as a newcomer runs it: the README's own command, in a fresh
clone of this checkout, with empty caches (pip's, the Hub's and the converted model's: a
`XDG_CACHE_HOME` of its own), `--runs` times. Prints a Markdown table (wall time, and the run's
own seconds per stage from its results' cost block) and exits 1 when the median is more than
25% away from the figure the README states, so that the figure cannot silently go stale.

    python benchmarks/quickstart.py [--runs 3] [--warm-caches]

Run it on a quiet machine (2 cores, nothing else running): the figure is a wall time.
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

ROOT = Path(__file__).resolve().parents[1]
# Variables that would point the run at caches a fresh machine does not have.
CACHE_VARIABLES = ("FINREFLECT_EVAL_CACHE", "HF_HOME", "HF_HUB_CACHE", "PIP_CACHE_DIR")

TOLERANCE = 0.25
# What the README says: "... from a fresh venv, the median of 3 runs: 255 s, ...".
STATED = re.compile(r"the median of (\d+) runs:\s+(\d+) s")


def readme_command(readme: str) -> str:
    """The quickstart's command: the first bash block under "## Quickstart"."""
    section = readme.split("## Quickstart", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", section, re.S).group(1).strip()


def stated_seconds(readme: str) -> int:
    """The quickstart's time as the README states it."""
    return int(STATED.search(readme.split("## Quickstart", 1)[1]).group(2))


def timed_run(command: str, caches: Path | None) -> tuple[float, dict[str, float]]:
    """The command's wall time in a fresh clone, and the seconds of each model stage."""
    with tempfile.TemporaryDirectory(prefix="quickstart-") as scratch:
        clone = Path(scratch) / "finreflect-eval"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in CACHE_VARIABLES}
        env["XDG_CACHE_HOME"] = str(caches or Path(scratch) / "cache")
        started = time.perf_counter()
        done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True)
        seconds = time.perf_counter() - started
        if done.returncode:
            sys.exit(f"the quickstart failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
        written = sorted((clone / "results").glob("*/results_*.json"))
        if len(written) != 1:
            sys.exit(f"the quickstart wrote {len(written)} results files, not one")
        return seconds, stage_seconds(json.loads(written[0].read_text()))


def stage_seconds(results: dict) -> dict[str, float]:
    """Seconds per model stage (extraction, each judge), from the results' cost block."""
    stages: dict[str, float] = {}
    for block in results["cost"].values():
        stages["extraction"] = stages.get("extraction", 0) + block["extraction"]["seconds"]
        for judge, cost in block["judging"].items():
            stages[judge] = stages.get(judge, 0) + cost["seconds"]
    return stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--warm-caches",
        action="store_true",
        help="keep pip's and the converted model's caches between runs (not a fresh machine)",
    )
    args = parser.parse_args()
    readme = (ROOT / "README.md").read_text()
    command, stated = readme_command(readme), stated_seconds(readme)
    with tempfile.TemporaryDirectory(prefix="quickstart-cache-") as shared:
        warm = Path(shared) if args.warm_caches else None
        runs = [timed_run(command, warm) for _ in range(args.runs)]
    walls = [wall for wall, _ in runs]
    rows = [
        ["wall (README command)", *(f"{w:.0f}" for w in walls), f"{statistics.median(walls):.0f}"]
    ]
    for stage in runs[0][1]:
        values = [stages[stage] for _, stages in runs]
        rows.append([stage, *(f"{v:.0f}" for v in values), f"{statistics.median(values):.0f}"])
    header = ["seconds", *(f"run {n + 1}" for n in range(args.runs)), "median"]
    print(markdown_table(header, rows))
    median = statistics.median(walls)
    drift = median / stated - 1
    print(f"\nREADME states {stated} s; measured median {median:.0f} s ({drift:+.0%})")
    if abs(drift) > TOLERANCE:
        sys.exit(f"the README's figure is more than {TOLERANCE:.0%} off: update it")


if __name__ == "__main__":
    main()
