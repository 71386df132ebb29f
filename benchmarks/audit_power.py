"""How often the re-judging audit (`leaderboard audit`) rejects an honest entry and accepts a
forged one, simulated with the audit's own rule (`rejudging.agreement_test`, against each judge's
re-run agreement as `rejudging.rerun_agreement` counts it in a calibration on as many items).

The model, stated: a judge repeats its own verdict on an item with chance `rerun` (the engine's
noise: batch order, kernels); on a triple criterion the maintainers' judge says "yes" with chance
`yes_rate`. An honest entry's judge is the same judge once more. Two forgeries of an entry's
votes: `always yes` (every judge says yes to everything) and `one lenient judge` (one judge says
yes to everything, the other two are honest). An audit passes when no judge's agreement is
significantly below its re-run agreement (1% false-reject rate, shared out over the judges).

    python benchmarks/audit_power.py [--sizes 100 200 400] [--reps 2000] [--rerun 0.98]
"""

from __future__ import annotations

import argparse

import numpy as np

from finreflect_eval._util.tables import markdown_table
from finreflect_eval.leaderboard.rejudging import FALSE_REJECT, agreement_test, rerun_agreement

JUDGES = 3


def calibration_of(rng: np.random.Generator, n: int, rerun: float) -> list[list[int]]:
    """A calibration on `n` items: each judge's `[same, n]` over two runs."""
    runs = [{}, {}]
    for judge in range(JUDGES):
        first = rng.integers(0, 2, n)
        again = np.where(rng.random(n) < rerun, first, 1 - first)
        runs[0][str(judge)], runs[1][str(judge)] = first.tolist(), again.tolist()
    return [[j["same"], j["n"]] for j in rerun_agreement(runs)["judges"].values()]


def passes(agreements: list[int], n: int, calibration: list[list[int]]) -> bool:
    level = FALSE_REJECT / JUDGES
    return all(
        agreement_test(same, n, *rerun, level)[1]
        for same, rerun in zip(agreements, calibration, strict=True)
    )


def simulate(n: int, reps: int, rerun: float, yes_rate: float, seed: int = 0) -> dict[str, float]:
    """Pass rates of an honest entry and of the two forgeries, at `n` audited items."""
    rng = np.random.default_rng(seed)
    passed = {"honest": 0, "always yes": 0, "one lenient judge": 0}
    for _ in range(reps):
        calibration = calibration_of(rng, n, rerun)
        honest = [int(rng.binomial(n, rerun)) for _ in range(JUDGES)]
        # A forged "yes" agrees where the maintainers' judge says yes (itself noisy).
        says_yes = rng.random((JUDGES, n)) < yes_rate
        repeat = rng.random((JUDGES, n)) < rerun
        forged = [
            int(((says_yes[j] & repeat[j]) | (~says_yes[j] & ~repeat[j])).sum())
            for j in range(JUDGES)
        ]
        passed["honest"] += passes(honest, n, calibration)
        passed["always yes"] += passes(forged, n, calibration)
        passed["one lenient judge"] += passes([forged[0], *honest[1:]], n, calibration)
    return {key: value / reps for key, value in passed.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--yes-rates", type=float, nargs="+", default=[0.7, 0.8, 0.9, 0.95])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--rerun", type=float, default=0.98)
    args = parser.parse_args()
    rows = []
    for yes_rate in args.yes_rates:
        for n in args.sizes:
            rates = simulate(n, args.reps, args.rerun, yes_rate)
            rows.append(
                [
                    f"{yes_rate:.0%}",
                    n,
                    f"{1 - rates['honest']:.1%}",
                    f"{rates['always yes']:.1%}",
                    f"{rates['one lenient judge']:.1%}",
                ]
            )
    print(f"re-run agreement {args.rerun:.0%}, {args.reps} simulated audits each\n")
    print(
        markdown_table(
            [
                "yes rate",
                "items",
                "false reject",
                "false accept: always yes",
                "false accept: one lenient judge",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
