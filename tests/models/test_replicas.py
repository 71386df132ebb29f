"""`data_parallel_size=N`: N replicas of a model, each a Ray actor, on a real local Ray cluster
(`ray.init(num_cpus=2)`); the driver keeps the cache, retries and accounting, so the outputs are
those of one model, sooner."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import TESTS, require
from support.replica_responders import SECONDS_PER_CALL
from support.runs import panel_file

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import install_hint
from finreflect_eval.models import GenerationRequest, ModelSpec, ResponseCache, _ray, load_model
from finreflect_eval.models.replicas import ReplicatedLM
from finreflect_eval.pipeline.evaluator import evaluate
from finreflect_eval.pipeline.judging import load_panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.scoring.failures import FailurePolicy

ray = require("ray", "[ray] extra")


@pytest.fixture(scope="module")
def ray_cluster():
    """A real local Ray cluster of two CPUs; its workers import the tests' support modules."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(TESTS)}},
    )
    yield ray
    ray.shutdown()


def scripted(responder: str, **args) -> ModelSpec:
    return ModelSpec(
        "scripted", "scripted", {"responses": f"support.replica_responders:{responder}", **args}
    )


def faulty_requests(count: int, log, **faults) -> list[GenerationRequest]:
    """Requests for `replica_responders.faulty`; `faults` maps a request number to what it
    does (`die_once`, `die`, `hang`)."""
    requests = []
    for number in range(count):
        prompt = {"id": number, "log": str(log), **faults.get(f"r{number}", {})}
        requests.append(GenerationRequest(prompt=json.dumps(prompt), schema={"type": "object"}))
    return requests


class CountingCache(ResponseCache):
    """The response cache, counting how often each key is written."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.writes: Counter[str] = Counter()

    def put_many(self, items) -> None:
        items = list(items)
        self.writes.update(key for key, _ in items)
        super().put_many(items)


def test_two_replicas_answer_faster_and_alike(ray_cluster, capsys):
    """0.2 s per request: two replicas take about half the time of one model, and answer the
    same, in request order."""
    requests = [GenerationRequest(prompt="x" * number) for number in range(20)]
    seconds, answers = {}, {}
    for size in (1, 2):
        with load_model(scripted("slow", batch_size=2, data_parallel_size=size)) as lm:
            assert isinstance(lm, ReplicatedLM) == (size == 2)
            started = time.perf_counter()
            answers[size] = [result.text for result in lm.generate(requests)]
            seconds[size] = time.perf_counter() - started
            if size == 2:
                record = lm.resolved()
    speedup = seconds[1] / seconds[2]
    with capsys.disabled():  # into the test log, passed or not
        print(
            f"\ndata_parallel_size=2: {seconds[2]:.2f} s, one model: {seconds[1]:.2f} s "
            f"({len(requests)} requests of {SECONDS_PER_CALL} s): {speedup:.2f}x faster"
        )
    assert answers[2] == answers[1] == [json.dumps({"length": n}) for n in range(20)]
    assert speedup >= 1.8, f"two replicas were only {speedup:.2f}x faster"
    assert record["data_parallel_size"] == 2 and record["batch_sizes"] == [2]
    replicas = record["replicas"]
    assert [r["requests"] for r in replicas] == [10, 10]  # balanced: 5 batches of 2 each
    assert all(r["node"] and r["gpus"] == 0 and r["batch_sizes"] == [2] for r in replicas)


def test_killed_replica_its_batch_goes_to_another(ray_cluster, tmp_path):
    """A replica dies in the middle of a batch: the other one answers that batch, every answer is
    cached exactly once, and the run is complete (a rerun generates nothing)."""
    flag = tmp_path / "die-once"
    flag.touch()
    log = tmp_path / "calls.log"
    requests = faulty_requests(10, log, r5={"die_once": str(flag)})
    cache = CountingCache(tmp_path / "cache.sqlite")
    spec = scripted("faulty", batch_size=2, data_parallel_size=2)
    with load_model(spec) as lm:
        lm.cache = cache
        results = lm.generate(requests)
        record = lm.resolved()
    assert not flag.exists()  # the fault happened
    assert [json.loads(r.text)["id"] for r in results] == list(range(10))
    assert all(r.ok for r in results)
    assert len(cache) == 10 and set(cache.writes.values()) == {1}  # no duplicate cached call
    # request 4 shared the lost batch: answered before the replica died, never delivered, so
    # generated again by the other replica; every other request once
    generated = Counter(log.read_text().split())
    assert generated == {str(n): 2 if n == 4 else 1 for n in range(10)}
    assert sum(r["requests"] for r in record["replicas"]) == 10  # answers delivered
    with load_model(spec) as lm:
        lm.cache = cache
        assert all(r.cached and r.ok for r in lm.generate(requests))
        assert lm.stats["requests_generated"] == 0
    cache.close()


def test_batch_that_kills_two_replicas_stops_with_one_line_then_resumes(ray_cluster, tmp_path):
    """A request that kills every replica it reaches: the stage stops with one line once it has
    stopped two; what was answered stays cached, and the same requests resume from there."""
    poison = tmp_path / "poison"
    poison.touch()
    log = tmp_path / "calls.log"
    requests = faulty_requests(10, log, r6={"die": str(poison)})
    spec = scripted("faulty", batch_size=2, data_parallel_size=2)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with pytest.raises(FinReflectError) as stop, load_model(spec) as lm:
        lm.cache = cache
        lm.generate(requests)
    message = str(stop.value)
    assert "\n" not in message and "stopped two replicas" in message
    assert "the same command resumes" in message
    answered = len(cache)
    assert 0 < answered < 10
    poison.unlink()  # the fault is fixed
    with load_model(spec) as lm:
        lm.cache = cache
        results = lm.generate(requests)
        assert lm.stats["requests_generated"] == 10 - answered  # only what was missing
    assert [json.loads(r.text)["id"] for r in results] == list(range(10))
    cache.close()


def test_a_hung_replica_is_stopped_at_its_deadline(ray_cluster, tmp_path):
    """A request that never returns: each replica it reaches is stopped after replica_timeout,
    and the stage stops with one line instead of waiting forever."""
    requests = faulty_requests(4, tmp_path / "calls.log", r1={"hang": True})
    spec = scripted("faulty", batch_size=2, data_parallel_size=2, replica_timeout=60)
    stop = pytest.raises(FinReflectError, match="no answer within replica_timeout=2 s")
    with stop, load_model(spec) as lm:
        lm.timeout = 2  # the requests' deadline; starting replicas takes seconds on a busy CI
        started = time.perf_counter()
        lm.generate(requests)
    assert time.perf_counter() - started < 30


def test_replicas_the_cluster_is_too_busy_to_place_stop_at_the_deadline(ray_cluster):
    """The cluster could hold them, but another job holds its CPUs: the start waits for them
    until replica_timeout, then stops with one line and releases what it asked for."""
    from ray.util.placement_group import (
        placement_group,
        placement_group_table,
        remove_placement_group,
    )

    other_job = placement_group([{"CPU": 2}])
    assert other_job.wait(30)
    before = set(placement_group_table())
    spec = scripted("faulty", batch_size=2, data_parallel_size=2, replica_timeout=1.5)
    late = pytest.raises(FinReflectError, match=r"^2 of 2 replicas not placed within replica_")
    started = time.perf_counter()
    try:
        with late, load_model(spec):
            pass
        assert time.perf_counter() - started >= 1.5  # it waited its deadline, fractions too
        mine = {k: v for k, v in placement_group_table().items() if k not in before}
        assert len(mine) == 2 and {g["state"] for g in mine.values()} == {"REMOVED"}
    finally:
        remove_placement_group(other_job)


def test_retries_go_as_with_one_model_even_when_a_replica_dies_in_one(ray_cluster, tmp_path):
    """Invalid outputs are asked again (sampled, seeded) by the driver: the same attempts, texts
    and errors with two replicas as with one model, though a replica dies during a retry."""
    log = tmp_path / "calls.log"
    flag = tmp_path / "die-on-retry"
    faults = {
        "r2": {"invalid_first": True},
        "r5": {"invalid_first": True, "die_once_on_retry": str(flag)},
    }
    requests = faulty_requests(8, log, **faults)
    outcomes = {}
    for size in (1, 2):
        if size == 2:
            flag.touch()  # only where a replica may die: one model runs in this process
        with load_model(
            scripted("faulty", batch_size=2, max_retries=2, data_parallel_size=size)
        ) as lm:
            results = lm.generate(requests)
            outcomes[size] = [(r.text, r.raw_outputs, r.attempts, r.error) for r in results]
            if size == 2:
                record = lm.resolved()
    assert not flag.exists()  # a replica died on the retry
    assert outcomes[2] == outcomes[1]
    assert outcomes[1][5] == ('{"id": 5}', ["not JSON", '{"id": 5}'], 2, None)
    assert sum(r["requests"] for r in record["replicas"]) == 8 + 2  # two requests asked twice


def test_a_hung_replica_is_stopped_and_its_batch_answered_by_another(ray_cluster, tmp_path):
    flag = tmp_path / "hang-once"
    flag.touch()
    requests = faulty_requests(6, tmp_path / "calls.log", r3={"hang_once": str(flag)})
    spec = scripted("faulty", batch_size=2, data_parallel_size=2, replica_timeout=60)
    with load_model(spec) as lm:
        lm.timeout = 3  # the requests' deadline, as above
        results = lm.generate(requests)
        record = lm.resolved()
    assert [json.loads(r.text)["id"] for r in results] == list(range(6))
    assert sorted(r["requests"] for r in record["replicas"]) == [0, 6]  # the hung one answered none


def test_a_failed_start_releases_what_it_reserved(ray_cluster):
    """A replica that cannot load stops the start with its own one-line error; the placement
    groups are removed and the Ray the caller started stays up."""
    from ray.util import placement_group_table

    before = set(placement_group_table())
    spec = ModelSpec(
        "scripted", "scripted", {"responses": "no_such_module:f", "data_parallel_size": 2}
    )
    refused = pytest.raises(FinReflectError, match="cannot import scripted responder no_such")
    with refused, load_model(spec):
        pass
    groups = {k: v for k, v in placement_group_table().items() if k not in before}
    assert len(groups) == 2 and {g["state"] for g in groups.values()} == {"REMOVED"}
    assert ray.is_initialized()


@pytest.mark.slow
def test_hf_two_replicas_give_byte_identical_samples_and_results(
    ray_cluster, tiny_model_dir, tmp_path
):
    """The hf backend on a tiny model, greedy and constrained: samples byte for byte but for
    each call's clock (its seconds) and its cached prompt tokens, and the results in everything
    but the record of how they ran and those."""
    panel = load_panel(panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all"))
    outputs = {}
    for size in (1, 2):
        folder = tmp_path / f"dp{size}"
        args = {"batch_size": 2, "max_batch_size": 2}
        config = RunConfig(
            model=ModelSpec(str(tiny_model_dir), "hf", {**args, "data_parallel_size": size}),
            tasks=["finreflect_single_pass", "finreflect_reflection"],
            dataset="sample",
            limit=3,
            output_path=folder,
            cache=folder / "cache.sqlite",
            gen_kwargs={"max_gen_toks": 96},
        )
        # A random model's invalid outputs (and their retries) are part of what must match.
        _, results = evaluate(config, panel, FailurePolicy(allow_failures=True))
        samples = {
            path.name.split("_20")[0]: without_clock(path.read_bytes())
            for path in sorted(folder.rglob("samples_*.jsonl"))
        }
        outputs[size] = samples, results.model_dump(mode="json", by_alias=True)
    (samples_1, results_1), (samples_2, results_2) = outputs[1], outputs[2]
    assert set(samples_1) == {"samples_finreflect_single_pass", "samples_finreflect_reflection"}
    assert samples_2 == samples_1
    config_2 = results_2["config"]
    assert config_2["data_parallel_size"] == 2 and len(config_2["replicas"]) == 2
    assert config_2["model_args"]["data_parallel_size"] == 2
    assert all(r["requests"] > 0 for r in config_2["replicas"]), config_2["replicas"]
    assert comparable(results_2) == comparable(results_1)
    # not a trivial comparison: invalid outputs were asked again (sampled, seeded), and scored
    calls = [
        call
        for text in samples_1.values()
        for line in text.splitlines()
        for call in json.loads(line)["steps"]
    ]
    assert any(len(call["raw_outputs"]) > 1 for call in calls)
    assert results_1["results"]["finreflect_single_pass"]


@pytest.mark.slow
def test_hf_auto_batch_size_is_found_by_each_replica(ray_cluster, tiny_model_dir):
    """`batch_size=auto`: each replica searches its own memory (from max_batch_size down)."""
    spec = ModelSpec(
        str(tiny_model_dir),
        "hf",
        {"batch_size": "auto", "max_batch_size": 3, "data_parallel_size": 2},
    )
    requests = [GenerationRequest(prompt=f"Apple {n}", max_tokens=4) for n in range(7)]
    with load_model(spec) as lm:
        results = lm.generate(requests)
        record = lm.resolved()
    assert all(result.ok for result in results)
    assert record["batch_sizes"] == [3] and record["device"] == "cpu"
    assert [r["batch_sizes"] for r in record["replicas"]] == [[3], [3]]
    assert sorted(r["requests"] for r in record["replicas"]) == [3, 4]  # 3 + 3 + 1


def without_clock(samples: bytes) -> bytes:
    """A samples file with each call's `seconds` and `device_seconds` (its clock) taken out, and
    its cached prompt tokens (each replica keeps its own prompt prefixes)."""
    clock = re.compile(rb',"((device_)?seconds|cached_prompt_tokens)":(null|[0-9.e-]+)')
    return clock.sub(b"", samples)


def comparable(results: dict) -> dict:
    """Results without what differs between any two runs (clock, run id, cache file) and the
    record of how the candidate ran (its model args and replicas)."""
    kept = {k: v for k, v in results.items() if k not in ("date", "run", "samples")}
    kept["total_evaluation_time_seconds"] = None
    config = dict(kept["config"])
    for name in ("use_cache", "data_parallel_size", "replicas"):
        config[name] = None
    config["model_args"] = {
        k: v for k, v in config["model_args"].items() if k != "data_parallel_size"
    }
    kept["config"] = config
    kept["judges"] = {**kept["judges"], "seconds": None}
    kept["details"] = {task: {**entry, "seconds": None} for task, entry in kept["details"].items()}
    kept["cost"] = {task: _without_clock(cost) for task, cost in kept.get("cost", {}).items()}
    return kept


def _without_clock(value):
    """The cost block without its clock and cached prompt tokens (each replica keeps its own
    prompt prefixes): the calls and the other tokens must match."""
    if isinstance(value, dict):
        return {
            k: _without_clock(v)
            for k, v in value.items()
            if k not in ("seconds", "device_seconds", "money", "cached_prompt_tokens")
        }
    return value


def test_run_starts_its_own_ray_and_records_the_replicas(cli, env, tmp_path):
    """`finreflect-eval run` with data_parallel_size=2 and no Ray running: it starts a local Ray
    for the run, and the results say how the candidate ran. A judge takes the argument too."""
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    panel_yaml = yaml.safe_load(panel.read_text())
    panel_yaml["judges"][0]["model_args"]["data_parallel_size"] = 2
    panel.write_text(yaml.safe_dump(panel_yaml))
    out = tmp_path / "out"
    result = cli(
        *("run", "--model", "candidate", "--backend", "scripted", "--model-args"),
        "responses=support.scripted_judges:reference_triples,data_parallel_size=2,batch_size=2",
        *("--tasks", "finreflect_single_pass", "--dataset", "sample", "--limit", "5"),
        *("--judges", str(panel), "--output-path", str(out)),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert ", replicas: 2 (" in result.stdout  # the summary says how the requests were shared
    # One Ray for the candidate and the judge, stopped once, at the end.
    assert result.stderr.count("Ray: started a local instance in ") == 1, result.stderr[-3000:]
    assert result.stderr.count(" placed and loaded in ") == 2  # the candidate's, the judge's
    assert result.stderr.count("Ray: stopped in ") == 1
    (path,) = (out / "candidate").glob("results_*.json")
    results = json.loads(path.read_text())
    config = results["config"]
    judge = results["judges"]["members"][0]
    assert judge["name"] == "judge-0" and judge["model_args"]["data_parallel_size"] == 2
    failures = results["details"]["finreflect_single_pass"]["failures"]
    assert failures["judge_calls_each"] > 0 and failures["judge_failed_calls"] == {}
    assert config["data_parallel_size"] == 2
    assert config["model_args"]["data_parallel_size"] == 2
    replicas = config["replicas"]
    assert len(replicas) == 2 and sum(r["requests"] for r in replicas) == 5
    assert all(r["batch_sizes"] == [2] and r["node"] for r in replicas)


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1", "nowhere"])
def test_an_unreachable_cluster_is_one_line_at_once(cli, tmp_path, address):
    """Nothing listens there: one line within seconds (`ray.init` itself waits minutes)."""
    started = time.perf_counter()
    result = cli(
        *("extract", "--model", "candidate", "--backend", "scripted", "--model-args"),
        f'responses=["{{}}"],ray_address={address}',
        *("--tasks", "finreflect_single_pass", "--dataset", "sample", "--limit", "1"),
        *("--output-path", str(tmp_path / "out")),
    )
    assert result.returncode != 0
    assert f"cannot reach the Ray cluster at {address}" in result.stderr
    assert len(result.stderr.strip().splitlines()[-1]) > 40 and time.perf_counter() - started < 60


def test_without_ray_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    names_the_extra = pytest.raises(FinReflectError, match=re.escape(install_hint("ray")))
    with names_the_extra, load_model(scripted("slow", data_parallel_size=2)):
        pass


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"data_parallel_size": "two"}, "data_parallel_size='two'"),
        ({"data_parallel_size": 0}, "data_parallel_size=0 .*greater than or equal to 1"),
        ({"replica_timeout": -1}, "replica_timeout=-1 .*greater than 0"),
    ],
)
def test_bad_replica_args_are_one_line(args, message):
    with pytest.raises(FinReflectError, match=message), load_model(scripted("slow", **args)):
        pass


def test_a_server_backend_refuses_data_parallel_size():
    from finreflect_eval.models import check_spec

    spec = ModelSpec("m", "openai", {"base_url": "http://127.0.0.1:9/v1", "data_parallel_size": 2})
    with pytest.raises(FinReflectError, match="max_concurrency"):
        check_spec(spec)


PLACEMENT = """
import dataclasses, json, sys
import ray
from ray.util import placement_group_table
ray.init(num_cpus=4, num_gpus=4, include_dashboard=False)
from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models import ModelSpec, load_model
from finreflect_eval.models.scripted import ScriptedModel
from finreflect_eval.models.vllm import VLLMModel

# A stand-in replica (vLLM's engine needs a real GPU) placed as the vllm backend's replicas are.
def plan(cls, args, cluster, replicas):
    vllm_plan = VLLMModel.replica_plan({"tensor_parallel_size": 2}, cluster, replicas)
    return dataclasses.replace(vllm_plan, args={})  # vLLM's engine args are checked elsewhere
ScriptedModel.replica_plan = classmethod(plan)
found = {}
with load_model(ModelSpec("scripted", "scripted", {"data_parallel_size": 2})) as lm:
    tables = [placement_group_table(replica.group) for replica in lm.replicas]
    found["bundles"] = [list(table["bundles"].values()) for table in tables]
    found["states"] = [table["state"] for table in tables]
    found["gpus_left"] = ray.available_resources().get("GPU", 0)
    found["replicas"] = lm.resolved()["replicas"]
    found["group"] = lm.replicas[0].group.id.hex()
    if {vllm!r}:
        sys.path.insert(0, {vllm!r})
        from vllm.config import ParallelConfig
        from vllm.platforms import current_platform
        from vllm.v1.executor import ray_utils
        current_platform.ray_device_key = "GPU"  # as on a CUDA machine
        config = ParallelConfig(tensor_parallel_size=2, distributed_executor_backend="ray")
        config.placement_group = lm.replicas[0].group
        ray_utils.initialize_ray_cluster(config)  # vLLM's own checks of the group
        found["vllm_accepted"] = True
found["gpus_after"] = ray.available_resources().get("GPU", 0)
try:
    with load_model(ModelSpec("scripted", "scripted", {"data_parallel_size": 3})):
        pass
except FinReflectError as exc:
    found["too_many"] = str(exc)
print(json.dumps(found))
"""


def test_vllm_replicas_reserve_tensor_parallel_gpus_each(real_vllm, tmp_path):
    """On a Ray cluster of four (declared) GPUs, two replicas of tensor_parallel_size=2 reserve
    a placement group of two one-GPU bundles each, on one node, which vLLM's own Ray executor
    accepts; a third does not fit and is refused at once, not waited for."""
    from support.real_vllm import path as vllm_path

    script = PLACEMENT.replace("{vllm!r}", repr(str(vllm_path())))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    gpu_bundles = [[bundle.get("GPU", 0) for bundle in group] for group in found["bundles"]]
    assert gpu_bundles == [[1, 1], [1, 1]]
    assert found["states"] == ["CREATED", "CREATED"] and found["gpus_left"] == 0
    assert [r["gpus"] for r in found["replicas"]] == [2, 2]
    assert all(r["gpu_ids"] == [] for r in found["replicas"])  # vLLM's workers hold them
    assert found["vllm_accepted"] and found["gpus_after"] == 4  # released on close
    assert found["too_many"] == (
        "data_parallel_size=3 needs 6 GPU (2 per replica); the Ray cluster has 4"
    )


SESSION = """
import json, logging, os, sys
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
import ray, ray.actor
from finreflect_eval.models import GenerationRequest, ModelSpec, load_model
from finreflect_eval.models import _ray, replicas

inits, actor_envs = [], []
init, options = ray.init, ray.actor.ActorClass.options
def counted_init(*args, **kwargs):
    inits.append(kwargs)
    return init(*args, **kwargs)
def recorded_options(self, **kwargs):
    actor_envs.append(kwargs.get("runtime_env"))
    return options(self, **kwargs)
ray.init, ray.actor.ActorClass.options = counted_init, recorded_options

args = {"responses": "support.replica_responders:slow", "data_parallel_size": 2}
if len(sys.argv) > 1:
    args["ray_address"] = sys.argv[1]
spec = ModelSpec("scripted", "scripted", args)
found = {"clusters": [], "exited": []}
replicas.start_ray_early(spec)  # in the background, while this process goes on
for number in range(2):
    if number == 1:
        os.environ["HF_HOME"] = "/tmp/hf-home-set-later"  # the actors need it: passed to them
    with load_model(spec) as lm:
        texts = [r.text for r in lm.generate([GenerationRequest(prompt="x" * n) for n in range(4)])]
        found["clusters"].append(ray.get_runtime_context().gcs_address)
        pids = [replica.pid for replica in lm.replicas]
    found["exited"].append(not any(_ray._running(pid) for pid in pids))
    found["texts"] = texts
found["up_after"] = ray.is_initialized()
found["inits"] = [{k: v for k, v in kw.items() if k in ("address", "runtime_env")} for kw in inits]
found["actor_envs"] = actor_envs
print(json.dumps(found))
"""


def session(*args: str, **env: str) -> tuple[dict, str]:
    """SESSION in a process of its own (no Ray the caller started): what it found, and its log."""
    environment = {**os.environ, "PYTHONPATH": str(TESTS), "HF_HUB_OFFLINE": "1", **env}
    environment.pop("RAY_ADDRESS", None)
    environment.pop("HF_HOME", None)
    done = subprocess.run(
        [sys.executable, "-c", SESSION, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError:
        return False
    return True


def test_one_local_ray_per_process_started_early_and_reused():
    """Started in the background before the first replica set loads, Ray is started once and
    kept: the second replica set of the process uses it. Its workers have this environment
    (no actor takes one of its own, so each takes a worker Ray keeps started), except what is
    set after it started. Closing a set returns once its replicas' processes have exited; Ray
    stops when the process exits."""
    found, log = session()
    # Ray's default address is the cluster `ray start` last started here: not without one
    assert found["inits"] == [{"address": "local", "runtime_env": None}]
    assert found["clusters"][0] == found["clusters"][1] and found["up_after"]
    assert found["actor_envs"][:2] == [None, None]  # HF_HUB_OFFLINE=1: inherited
    later = {"env_vars": {"HF_HOME": "/tmp/hf-home-set-later"}}
    assert found["actor_envs"][2:] == [later, later]
    assert found["exited"] == [True, True]
    assert found["texts"] == [json.dumps({"length": n}) for n in range(4)]
    assert log.count("Ray: started a local instance in ") == 1
    assert "started early, the run waited" in log
    assert log.count("2 replicas of scripted placed and loaded in ") == 2
    assert log.count("Ray: stopped in ") == 1  # at exit
    assert "SIGTERM handler is not set" not in log
    assert not answers(found["clusters"][0])  # and it is gone


@contextlib.contextmanager
def running_head(**env: str) -> Iterator[str]:
    """A Ray cluster of its own (`ray start --head --block`), as a user starts one, with `env`
    added to its environment; its address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must be
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    head = subprocess.Popen(
        [ray_cli, "start", "--head", "--block", f"--port={port}", "--num-cpus=2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(TESTS), "RAY_TMPDIR": temp, **env},
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not answers(address) and time.monotonic() < deadline:
            time.sleep(0.2)
        yield address
    finally:
        head.send_signal(signal.SIGTERM)  # it stops what it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def ray_head() -> Iterator[str]:
    with running_head() as address:
        yield address


@pytest.mark.slow  # Ray retries for about 15 s; and its token authentication is from 2.52
def test_a_cluster_that_asks_for_a_token_is_one_line_saying_how_to_send_it(tmp_path):
    """A cluster with Ray's token authentication (RAY_AUTH_MODE=token where it started) is
    joined only by a client with RAY_AUTH_MODE=token: without it the join fails, and the line
    says how to send the token (and does not print one)."""
    token = secrets.token_hex(32)
    with running_head(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token) as address:
        done = _extract_joining(address, tmp_path)
        assert answers(address)
    assert done.returncode == 1, done.stderr[-3000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"finreflect-eval: error: cannot reach the Ray cluster at {address}")
    assert "set RAY_AUTH_MODE=token here" in line and "Traceback" not in done.stderr
    assert token not in done.stderr + done.stdout


def _extract_joining(address: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """`extract` with two replicas on the cluster at `address`, without RAY_AUTH_MODE."""
    args = f"responses=support.replica_responders:slow,data_parallel_size=2,ray_address={address}"
    environment = {**os.environ, "PYTHONPATH": str(TESTS), "HF_HUB_OFFLINE": "1"}
    environment.pop("RAY_AUTH_MODE", None)
    command = ["extract", "--model", "c", "--backend", "scripted", "--model-args", args]
    command += ["--tasks", "finreflect_single_pass", "--dataset", "sample", "--limit", "1"]
    return subprocess.run(
        [sys.executable, "-m", "finreflect_eval", *command, "--output-path", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )


def test_a_running_cluster_is_joined_once_and_left_running(ray_head):
    """`ray_address` names a running cluster: the process joins it once, for both replica sets;
    the settings its replicas need go once, as the job's environment (not each actor's); the
    cluster is left running."""
    # Ray authenticates with the token of `ray start` where an address is given only when asked
    found, log = session(ray_head, RAY_AUTH_MODE="token")
    assert [init["address"] for init in found["inits"]] == [ray_head]
    forwarded = found["inits"][0]["runtime_env"]["env_vars"]  # (CI sets more of them)
    assert forwarded["HF_HUB_OFFLINE"] == "1" and set(forwarded) <= set(_ray.FORWARDED_ENV)
    assert found["clusters"][0] == found["clusters"][1]
    assert found["actor_envs"][:2] == [None, None]
    assert log.count("Ray: joined the cluster in ") == 1 and "Ray: left in " in log
    assert answers(ray_head)  # still running
