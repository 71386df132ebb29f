"""Data parallelism on Ray: `data_parallel_size=N` runs N replicas of one model, each a
long-lived Ray actor in a placement group of its own, on one machine or across a cluster.

Replicas only complete batches. Everything that makes a run what it is stays in the driver, in
`LM.generate`: the cache, output validation and retries, the progress bar, failure accounting.
Batches are cut from the pending requests as with one model (each replica takes `batch_size`
requests of its own as it becomes free) and each batch's retries go as they would there, so a
greedy run gives the same samples and results with any number of replicas.

Faults: a replica that dies, or does not answer within `replica_timeout`, is stopped and its
batch goes to another; a batch that stops two replicas, or the last one, stops the stage with
one line (everything answered is cached, so the same command resumes). Every wait on Ray has a
deadline: placement, loading, each batch.

Ray itself is joined or started once per process and shared by every replica set (`_ray`).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval.models._base import (
    LM,
    AtLeastOne,
    Attempts,
    Progress,
    ReplicaPlan,
)
from finreflect_eval.models._cache import ResponseCache
from finreflect_eval.models._ray import (
    _SESSION,
    _check_room,
    _import_ray,
    _since,
    _wait_for_exit,
)
from finreflect_eval.models._requests import Completion, GenerationRequest

logger = logging.getLogger(__name__)

# The model args of this layer, taken by every in-process backend (never passed to it).
REPLICA_ARGS: dict[str, Any] = {
    "data_parallel_size": AtLeastOne,
    "ray_address": str | None,
    "replica_timeout": Annotated[float | int, Field(gt=0)],  # (no deadline: inf)
}

# The end of a line that stops a stage.
RESUME = (
    "what was answered is kept (in the cache; with --no-cache, the spans saved): "
    "the same command resumes"
)


@dataclass(frozen=True)
class Replication:
    """How many replicas, on which Ray cluster, with what deadline per step."""

    data_parallel_size: int = 1
    ray_address: str | None = None
    replica_timeout: float = 3600.0

    @classmethod
    def take(cls, args: dict[str, Any]) -> Replication:
        """This layer's args, removed from `args` (the backend's own stay)."""
        size = args.pop("data_parallel_size", 1)
        address = args.pop("ray_address", None)
        timeout = args.pop("replica_timeout", cls.replica_timeout)
        if size < 1 or timeout <= 0:
            raise FinReflectError(
                f"data_parallel_size must be ≥ 1 and replica_timeout > 0 (got {size}, {timeout})"
            )
        return cls(size, address, float(timeout))

    @property
    def on_ray(self) -> bool:
        """Replicas on Ray: more than one, or one on a cluster named by `ray_address`."""
        return self.data_parallel_size > 1 or self.ray_address is not None


@dataclass
class Replica:
    """One replica: its actor, placement group and what it has done."""

    number: int
    actor: Any
    group: Any
    plan: ReplicaPlan
    node: str = ""
    pid: int = 0  # of its worker process
    gpu_ids: list[str] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)  # as it found them (`auto`)
    requests: int = 0  # answers it delivered
    loaded: bool = False
    alive: bool = True
    busy: bool = False  # a batch is running on it

    def record(self) -> dict[str, Any]:
        """What the results say of this replica (`records.ReplicaInfo`)."""
        return {
            "node": self.node,
            "gpus": int(self.plan.gpus),
            "gpu_ids": self.gpu_ids,
            "batch_sizes": self.batch_sizes,
            "requests": self.requests,
        }


class ReplicaWorker:
    """The Ray actor of one replica: the backend, loaded once, completing batches."""

    def __init__(self, backend: type[LM], model: str, args: dict[str, Any]) -> None:
        self.backend, self.model, self.args = backend, model, args
        self.lm: LM | None = None

    def load(self) -> dict[str, Any]:
        import ray

        self.lm = self.backend(self.model, cache=None, **self.args)
        return {
            "identity": self.lm.identity(),
            "batch_size": self.lm.batch_size,
            "max_retries": self.lm.max_retries,
            "context_length": self.lm.context_length,
            "commit": self.lm.commit,
            "node": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "gpu_ids": [str(gpu) for gpu in ray.get_gpu_ids()],
        }

    def fit(self, requests: list[GenerationRequest]) -> int:
        """Check the requests against the context and choose the batch size (`auto`) here."""
        self.lm.check_context(requests)
        self.lm.fit_batch_size(requests)
        return self.lm.batch_size

    def complete(self, requests: list[GenerationRequest]) -> list[Completion]:
        return self.lm._complete(requests)

    def resolved(self) -> dict[str, Any]:
        return self.lm.resolved()

    def close(self) -> None:
        if self.lm is not None:
            self.lm.close()


class ReplicatedLM(LM):
    """N replicas of a backend on Ray, as one `LM` (the same identity, so the same cache)."""

    def __init__(
        self,
        backend: type[LM],
        model: str,
        args: dict[str, Any],
        replication: Replication,
        cache: ResponseCache | None = None,
    ) -> None:
        super().__init__(model, revision=args.get("revision"), cache=cache)
        self.backend = backend.backend
        self.engine_package = backend.engine_package
        self.replication = replication
        self.data_parallel_size = replication.data_parallel_size
        self.timeout = replication.replica_timeout
        self.replicas: list[Replica] = []
        self._closed = False
        _SESSION.open(replication.ray_address)
        try:
            self._start(backend, model, args)
        except BaseException:
            self.close()
            raise

    # --- starting ---

    def _start(self, backend: type[LM], model: str, args: dict[str, Any]) -> None:
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        size = self.replication.data_parallel_size
        plan = backend.replica_plan(args, ray.cluster_resources(), size)
        _check_room(plan, size)
        for name, value in plan.args.items():
            if args.get(name, value) != value:
                raise FinReflectError(
                    f"model arg {name}={args[name]!r}: a replica of {plan.gpus:g} GPUs runs "
                    f"with {name}={value!r}"
                )
        started = time.perf_counter()
        # Only what the workers lack: an actor with an environment of its own cannot take one of
        # the workers Ray keeps started, so each would start a process of its own (~0.5 s).
        env = {**_SESSION.missing_env(), **plan.env}
        options = {"runtime_env": {"env_vars": env}} if env else {}
        worker = ray.remote(ReplicaWorker)
        for number in range(size):
            group = placement_group(list(plan.bundles), strategy=plan.strategy)
            actor = worker.options(
                num_cpus=plan.bundles[0].get("CPU", 0),
                num_gpus=plan.actor_gpus,
                max_restarts=0,  # a dead replica's batch goes to another one instead
                **options,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group,
                    placement_group_bundle_index=0,
                    placement_group_capture_child_tasks=True,  # vLLM's workers join it
                ),
            ).remote(backend, model, {**args, **plan.args})
            self.replicas.append(Replica(number, actor, group, plan))
        self._wait_for_placement()
        logger.info("loading %d replicas of %s on Ray", size, model)
        loaded = self._wait([r.actor.load.remote() for r in self.replicas], "loaded")
        for replica, info in zip(self.replicas, loaded, strict=True):
            replica.node, replica.pid, replica.gpu_ids = info["node"], info["pid"], info["gpu_ids"]
            replica.loaded = True
        logger.info("%d replicas of %s placed and loaded in %.2f s", size, model, _since(started))
        first = loaded[0]
        self._identity = first["identity"]
        self.batch_size = first["batch_size"]
        self.max_retries = first["max_retries"]
        self.context_length = first["context_length"]
        self.commit = first["commit"]

    def _wait_for_placement(self) -> None:
        """Every replica's placement group reserved within the deadline, as Ray's control store
        says (`group.ready()` would run a task, and so start a worker process, for each;
        `group.wait` takes whole seconds)."""
        from ray.util import placement_group_table

        deadline = time.monotonic() + self.timeout
        ids = [replica.group.id.hex() for replica in self.replicas]
        while True:
            table = placement_group_table()
            late = [i for i in ids if table.get(i, {}).get("state") != "CREATED"]
            if not late:
                return
            if time.monotonic() >= deadline:
                raise self._late(len(late), len(ids), "placed")
            time.sleep(0.05)

    def _late(self, late: int, of: int, step: str) -> FinReflectError:
        return FinReflectError(
            f"{late} of {of} replicas not {step} within replica_timeout={self.timeout:g} s; "
            "`ray status` shows what the cluster has and waits for"
        )

    def _wait(self, refs: list[Any], step: str) -> list[Any]:
        """The values of `refs` within the deadline; a replica's error, or none in time, stops
        here with one line."""
        import ray

        deadline = time.monotonic() + self.timeout
        waiting = list(refs)
        while waiting:  # one at a time, so that the first failure stops here at once
            ready, waiting = ray.wait(waiting, timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                raise self._late(len(waiting), len(refs), step)
            try:
                ray.get(ready)
            except ray.exceptions.RayTaskError as exc:
                raise _cause(exc) from exc
            except ray.exceptions.RayActorError as exc:
                raise FinReflectError(
                    f"a replica died before it was {step}: {_death(exc)}"
                ) from None
        return ray.get(refs)

    # --- what it is ---

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def resolved(self) -> dict[str, Any]:
        import ray

        live = [replica for replica in self.replicas if replica.alive]
        resolved = ray.get(live[0].actor.resolved.remote(), timeout=self.timeout) if live else {}
        return {
            **resolved,
            "batch_sizes": list(self.batch_sizes),
            "data_parallel_size": self.data_parallel_size,
            "replicas": [replica.record() for replica in self.replicas],
        }

    def _complete(self, requests: list[GenerationRequest]) -> list[Completion]:
        raise NotImplementedError("a replica set completes batches on its replicas")

    # --- running ---

    def check_context(self, requests: Sequence[GenerationRequest]) -> None:
        """Checked by each replica, with its batch size (see `fit_batch_size`)."""

    def fit_batch_size(self, requests: list[GenerationRequest]) -> None:
        """Each replica checks the requests against its context and finds its batch size
        (`auto`: for its own memory); all run the smallest, so that a batch is the same whichever
        replica runs it (and a lost replica's batch fits on any other)."""
        import ray

        live = [replica for replica in self.replicas if replica.alive]
        if not requests or not live:
            return
        shared = ray.put(requests)
        sizes = self._wait([replica.actor.fit.remote(shared) for replica in live], "sized")
        for replica, size in zip(live, sizes, strict=True):
            if size not in replica.batch_sizes:
                replica.batch_sizes.append(size)
        self.batch_size = min(sizes)

    def _generate_batches(self, requests: list[GenerationRequest]) -> Iterator[Progress]:
        """Batches on every live replica at once; each batch's progress as its answer comes.
        Replicas stream no decoding steps (the bar is the driver's; a replica's own model
        shows none): the bar moves as batches are answered, several running at once."""
        import ray

        queue = _Batches(requests, self.max_retries)
        idle = [replica for replica in self.replicas if replica.alive]
        if requests and not idle:
            raise FinReflectError(f"no replica of {self.model} is left; {RESUME}")
        running: dict[Any, tuple[Replica, _Batch, float]] = {}
        clock = time.monotonic()  # the last answers' arrival: wall time is shared from there

        def send(replica: Replica, batch: _Batch) -> None:
            attempt = batch.attempts.current()
            self.count_call(attempt)
            replica.busy = True
            running[replica.actor.complete.remote(attempt)] = (replica, batch, time.monotonic())

        while True:
            while idle and (batch := queue.next(self.batch_size)) is not None:
                send(idle.pop(0), batch)
            if not running:
                return
            first_deadline = min(started for _, _, started in running.values()) + self.timeout
            ready, _ = ray.wait(
                list(running), num_returns=1, timeout=max(0.0, first_deadline - time.monotonic())
            )
            if not ready:  # the oldest call is past its deadline: that replica is stuck
                ref = min(running, key=lambda r: running[r][2])
                replica, batch, _ = running.pop(ref)
                self._lose(replica, batch, f"no answer within replica_timeout={self.timeout:g} s")
                queue.again(batch)
                continue
            replica, batch, sent = running.pop(ready[0])
            replica.busy = False
            try:
                completions = ray.get(ready[0])
            except ray.exceptions.RayTaskError as exc:  # the backend raised: as with one model
                raise _cause(exc) from exc
            except ray.exceptions.RayActorError as exc:
                self._lose(replica, batch, _death(exc))
                queue.again(batch)
                continue
            replica.requests += len(completions)
            now = time.monotonic()
            held = (now - sent) * max(1, int(replica.plan.gpus))
            final = batch.attempts.receive(list(enumerate(completions)), now - clock, held)
            clock = now
            yield batch.positions, batch.attempts.results, final
            if batch.attempts.next_attempt():
                send(replica, batch)
            else:
                self.stats["failures"] += batch.attempts.failures()
                idle.append(replica)

    def _lose(self, replica: Replica, batch: _Batch, why: str) -> None:
        """Stop a replica that died or hangs; its batch goes to another, unless this batch has
        stopped a replica before or none is left."""
        import ray

        replica.alive = False
        ray.kill(replica.actor, no_restart=True)
        batch.faults += 1
        left = sum(r.alive for r in self.replicas)
        where = f"replica {replica.number} on {replica.node or 'its node'}"
        if batch.faults > 1:
            raise FinReflectError(
                f"a batch of {len(batch.positions)} requests stopped two replicas (last: {where}: "
                f"{why}); {RESUME}"
            )
        if not left:
            raise FinReflectError(f"no replica is left ({where}: {why}); {RESUME}")
        logger.warning(
            "%s stopped (%s): its batch of %d requests goes to one of the %d left",
            where,
            why,
            len(batch.positions),
            left,
        )

    def close(self) -> None:
        """Free each replica's model, stop its actor and release its placement group; Ray stays
        up for the next replica set (see `stop_ray`). A replica still running a batch (the run
        was interrupted) is stopped at once: its calls run one at a time, so a close would wait
        for the batch. Returns once the replicas' processes on this machine have exited, so that
        the next model finds their GPU memory free."""
        if self._closed:
            return
        self._closed = True
        ray = sys.modules.get("ray")
        try:
            if ray is None or not ray.is_initialized():
                return
            from ray.util.placement_group import remove_placement_group

            idle = [r for r in self.replicas if r.alive and r.loaded and not r.busy]
            if idle:  # each frees its model (vLLM: its engine and GPU memory) before it is killed
                ray.wait([r.actor.close.remote() for r in idle], num_returns=len(idle), timeout=60)
            for replica in self.replicas:
                replica.alive = False
                ray.kill(replica.actor, no_restart=True)
                remove_placement_group(replica.group)
            here = ray.util.get_node_ip_address()
            _wait_for_exit([r.pid for r in self.replicas if r.pid and r.node == here], 30.0)
        finally:
            _SESSION.release()


@dataclass
class _Batch:
    positions: list[int]
    attempts: Attempts
    faults: int = 0  # replicas lost while this batch ran on them


class _Batches:
    """The pending requests, cut into batches in order as replicas ask; a batch whose replica
    was lost comes first again."""

    def __init__(self, requests: list[GenerationRequest], max_retries: int) -> None:
        self.requests, self.max_retries = requests, max_retries
        self.start = 0
        self.lost: deque[_Batch] = deque()

    def next(self, size: int) -> _Batch | None:
        if self.lost:
            return self.lost.popleft()
        if self.start >= len(self.requests):
            return None
        positions = list(range(self.start, min(self.start + size, len(self.requests))))
        self.start = positions[-1] + 1
        batch = _Batch(positions, Attempts([self.requests[i] for i in positions], self.max_retries))
        batch.attempts.next_attempt()
        return batch

    def again(self, batch: _Batch) -> None:
        self.lost.append(batch)


def start_ray_early(spec: Any) -> None:
    """Begin joining (or starting) Ray now, in the background, for a model spec whose model args
    run replicas on it (`data_parallel_size` > 1 or `ray_address`), so that Ray starts while the
    run does other work (tasks, data) rather than after. Anything else, or Ray not installed,
    does nothing: loading the model reports what is wrong."""
    args = getattr(spec, "args", spec)
    if not isinstance(args, Mapping):  # a loaded model
        return
    try:
        replication = Replication.take(dict(args))
    except (FinReflectError, TypeError):
        return
    if not replication.on_ray:
        return
    try:
        _import_ray()  # here: an import holds the interpreter, in any thread
    except FinReflectError:
        return
    _SESSION.begin(replication.ray_address)


def stop_ray() -> None:
    """Leave the Ray this process joined (stopping one it started; not one the caller started),
    now rather than at exit."""
    _SESSION.stop()


def _cause(exc: Any) -> BaseException:
    """The backend's own exception inside a Ray task error (a `FinReflectError` stays one
    line)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else FinReflectError(first_line(exc))


def _death(exc: Any) -> str:
    """Why an actor died: the first sentence of Ray's account (the rest is a log excerpt)."""
    text = " ".join(str(exc).split()).split(". ")[0]
    return text[:200] or type(exc).__name__
