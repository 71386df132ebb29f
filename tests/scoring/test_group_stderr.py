"""A group's stderr comes from one filing bootstrap over all its tasks together: its tasks share
their spans and filings, so lm-eval's pooled formula (independent tasks) is too small."""

import math

import numpy as np
import pytest
from support.runs import panel_file, scripted_run

from finreflect_eval.records import Results


def test_group_stderr_is_a_joint_filing_bootstraps(tmp_path):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    path = scripted_run(tmp_path, "candidate", None, panel, tasks=("finreflect_smoke",))
    results = Results.model_validate_json(path.read_text())
    group, tasks = results.groups["finreflect_smoke"], sorted(results.filings.sums)
    assert len(tasks) == 3 and len(results.filings.ids) >= 10

    # Independently: resample the filings of the results' own per-filing table, the same draw
    # for the three tasks, and take the spread of the mean of their faithfulness.
    sums = np.array([results.filings.sums[t]["faithfulness"] for t in tasks]).T
    counts = np.array([results.filings.counts[t]["faithfulness"] for t in tasks]).T
    draws = np.random.default_rng(0).integers(0, len(sums), size=(20_000, len(sums)))
    means = 100 * (sums[draws].sum(axis=1) / counts[draws].sum(axis=1)).mean(axis=1)
    joint = float(np.std(means, ddof=1))
    pooled = math.sqrt(sum(results.results[t]["faithfulness_stderr,none"] ** 2 for t in tasks)) / 3
    print(
        f"\ngroup faithfulness stderr {group['faithfulness_stderr,none']}; joint bootstrap in"
        f" the test {joint:.3f}; lm-eval's pooled formula {pooled:.3f}"
    )
    assert group["faithfulness_stderr,none"] == pytest.approx(joint, rel=0.1)
    assert pooled < 0.8 * joint
    assert "one filing bootstrap" in results.config.group_stderr
