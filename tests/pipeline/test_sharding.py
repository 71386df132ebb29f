"""`--shard i/N`: disjoint, balanced shards of every task's spans, each in its own folder and
cache, merged by `judge`/`score` into exactly the results of one unsharded run."""

import json

import pytest
from support.runs import panel_file

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import span_list
from finreflect_eval.pipeline.sharding import Shard

TASKS = ("finreflect_single_pass", "finreflect_reflection")
CANDIDATE = (
    *("--model", "candidate", "--backend", "scripted"),
    *("--model-args", "responses=support.scripted_judges:reference_triples"),
)
# Results fields that measure the clock or name the run, not the benchmark.
TIMING = ("date", "run", "total_evaluation_time_seconds", "samples")


def comparable(results):
    """The results without timings, the run's id (which differ between any two runs) and the
    cache (each shard has its own), nor the cost (which calls its own cache answered differ)."""
    kept = {key: value for key, value in results.items() if key not in (*TIMING, "cost")}
    kept["config"] = {**kept["config"], "shard": None, "use_cache": None}
    kept["judges"] = {**kept["judges"], "seconds": None}
    kept["details"] = {task: {**entry, "seconds": None} for task, entry in kept["details"].items()}
    return kept


def run_args(out, panel, *extra):
    return [
        *("run", *CANDIDATE, "--tasks", *TASKS, "--dataset", "sample", "--limit", "7"),
        *("--judges", str(panel), "--output-path", str(out), *extra),
    ]


def test_shard_parse_and_select():
    assert Shard.parse("1/3") == Shard(1, 3) and str(Shard(1, 3)) == "1/3"
    assert Shard(1, 3).select(list("abcdefg")) == ["b", "e"]
    for bad in ("3/3", "-1/2", "1", "a/b", "1/0"):
        with pytest.raises(FinReflectError, match="--shard"):
            Shard.parse(bad)
    assert span_list(["a", "b"]) != span_list(["b", "a"])


def test_two_shards_score_exactly_like_one_run(cli, tmp_path, env):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    whole = cli(*run_args(tmp_path / "whole", panel), env=env)
    assert whole.returncode == 0, whole.stderr[-2000:]
    for index in (0, 1):
        shard = cli(*run_args(tmp_path / "sharded", panel, "--shard", f"{index}/2"), env=env)
        assert shard.returncode == 0, shard.stderr[-2000:]
    folder = tmp_path / "sharded" / "candidate"
    # each shard has its own folder and cache; the spans are split 4 + 3
    assert sorted(p.name for p in (tmp_path / "sharded").glob("cache-*.sqlite")) == [
        "cache-shard-0-of-2.sqlite",
        "cache-shard-1-of-2.sqlite",
    ]
    for index, size in ((0, 4), (1, 3)):
        (samples,) = (folder / f"shard-{index}-of-2").glob("samples_finreflect_single_pass_*")
        assert len(samples.read_text().splitlines()) == size

    merged = cli("score", "--samples", str(folder / "shard-0-of-2"), str(folder / "shard-1-of-2"))
    assert merged.returncode == 0, merged.stderr[-2000:]
    (expected,) = (tmp_path / "whole" / "candidate").glob("results_*.json")
    (got,) = folder.glob("results_*.json")
    expected, got = json.loads(expected.read_text()), json.loads(got.read_text())
    assert comparable(got) == comparable(expected)
    # The same calls asked for, whichever cache answered them.
    for task, cost in expected["cost"].items():
        asked = [cost["extraction"], *cost["judging"].values()]
        merged = [got["cost"][task]["extraction"], *got["cost"][task]["judging"].values()]
        assert [u["calls"] + u["cache_hits"] for u in merged] == [
            u["calls"] + u["cache_hits"] for u in asked
        ]
    # not a trivial comparison: the judges split, and the scores carry intervals
    score = got["results"]["finreflect_single_pass"]["faithfulness,none"]
    ci = got["details"]["finreflect_single_pass"]["criteria"]["faithfulness"]["ci"]
    assert 0 < score < 100 and ci[0] < score
    assert got["n-samples"]["finreflect_single_pass"]["effective"] == 7


def test_shards_judged_together_after_extraction(cli, tmp_path, env):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    whole = cli(*run_args(tmp_path / "whole", panel), env=env)
    assert whole.returncode == 0, whole.stderr[-2000:]
    extract = [
        *("extract", *CANDIDATE, "--tasks", *TASKS, "--dataset", "sample", "--limit", "7"),
        *("--output-path", str(tmp_path / "sharded")),
    ]
    for index in (0, 1):
        assert cli(*extract, "--shard", f"{index}/2", env=env).returncode == 0
    folder = tmp_path / "sharded" / "candidate"
    shards = [str(folder / f"shard-{index}-of-2") for index in (1, 0)]  # any order
    judged = cli("judge", "--samples", *shards, "--judges", str(panel), env=env)
    assert judged.returncode == 0, judged.stderr[-2000:]
    scored = cli("score", "--samples", str(folder))
    assert scored.returncode == 0, scored.stderr[-2000:]
    (expected,) = (tmp_path / "whole" / "candidate").glob("results_*.json")
    (got,) = folder.glob("results_*.json")
    assert comparable(json.loads(got.read_text())) == comparable(json.loads(expected.read_text()))


def test_missing_overlapping_and_foreign_shards_are_refused(cli, tmp_path, env):
    extract = [
        *("extract", *CANDIDATE, "--tasks", "finreflect_single_pass"),
        *("--dataset", "sample", "--limit", "5"),
    ]
    out = tmp_path / "out"
    for index in (0, 2):
        result = cli(*extract, "--output-path", str(out), "--shard", f"{index}/3", env=env)
        assert result.returncode == 0, result.stderr[-2000:]
    shard = out / "candidate" / "shard-{}-of-3"
    missing = cli("score", "--samples", str(shard).format(0), str(shard).format(2))
    assert missing.returncode == 1
    assert "shard 1/3 is missing (given: 0/3, 2/3)" in missing.stderr
    twice = cli("score", "--samples", str(shard).format(0), str(shard).format(0))
    assert "shard 0/3 is given twice" in twice.stderr
    other = tmp_path / "other"
    result = cli(*extract, "--output-path", str(other), "--shard", "1/3", "--seed", "7", env=env)
    assert result.returncode == 0
    elsewhere = other / "candidate" / "shard-1-of-3"
    foreign = cli("score", "--samples", str(shard).format(0), str(elsewhere), str(shard).format(2))
    assert foreign.returncode == 1
    assert "shards of different runs (their seed differ)" in foreign.stderr
    assert len(missing.stderr.strip().splitlines()) == 1 and "Traceback" not in missing.stderr


def test_a_single_shard_is_not_a_leaderboard_entry(cli, tmp_path, env):
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    shard = cli(*run_args(tmp_path / "out", panel, "--shard", "0/2"), env=env)
    assert shard.returncode == 0, shard.stderr[-2000:]
    folder = tmp_path / "out" / "candidate" / "shard-0-of-2"
    (results,) = folder.glob("results_*.json")
    assert json.loads(results.read_text())["config"]["shard"] == "0/2"
    refused = cli("submit", str(folder), "--leaderboard", str(tmp_path / "board"), "--dry-run")
    assert refused.returncode == 1 and "one shard's results" in refused.stderr
