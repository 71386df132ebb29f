"""This process's connection to Ray, made once and shared by every replica set
(`replicas.ReplicatedLM`): joined or started on first need, or earlier in the background
(`replicas.start_ray_early`), and left when the process exits. What it costs is logged. And
what the cluster can hold (`_check_room`)."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import sys
import threading
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval._util.resources import install_hint

if TYPE_CHECKING:
    from finreflect_eval.models._base import ReplicaPlan

logger = logging.getLogger(__name__)

# Settings that change what a replica loads, passed on to its actor where its worker does not
# have them already (never secrets: Ray keeps an actor's environment in its cluster state, which
# its dashboard shows). A local Ray's workers inherit this process's environment; a joined
# cluster's get them once, as the job's.
FORWARDED_ENV = (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "FINREFLECT_EVAL_CACHE",
    "XDG_CACHE_HOME",
)


class _RaySession:
    """This process's own connection to Ray: made once, on first need or earlier in the
    background (`start_ray_early`), kept for every replica set after (a run whose candidate and
    judge both have replicas starts Ray once), and closed when the process exits. What it costs
    is logged: the import, the start (and how much of it the run waited for), the stop."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        # The thread that started Ray in the background, which lives as long as this
        # connection: the kernel stops Ray's processes when the thread that started them ends.
        self.thread: threading.Thread | None = None
        self.ready = threading.Event()  # its start is done (or failed)
        self.released = threading.Event()  # it may end (Ray is stopped)
        self.exit_registered = False
        self.import_seconds = 0.0  # of `import ray`, where this module imported it
        self._reset(None)

    def _reset(self, address: str | None) -> None:
        self.address = address  # `ray_address` as asked (None: RAY_ADDRESS, else a local Ray)
        self.error: BaseException | None = None  # what stopped a start (raised by `open`)
        self.connected = False  # this process connected, and so disconnects
        self.local = False  # ... to a Ray it started
        self.env: dict[str, str] = {}  # the forwarded settings its workers have
        self.users = 0  # replica sets open on it
        self.early = False  # started by `start_ray_early`
        self.reported = False  # its start is logged
        self.seconds = 0.0  # the start, from `ray.init` on

    # --- starting ---

    def begin(self, address: str | None) -> None:
        """Start connecting in a thread of its own. Called from the main thread, it sets Ray's
        handling of SIGTERM (which `ray.init` sets only there): exit through `atexit`, which
        stops the local Ray. The thread stays until Ray is stopped (a daemon: a process that
        exits stops Ray first, in `atexit`, once a start under way is done)."""
        with self.lock:
            if self.thread is not None or self.connected or _ray_up():
                return
            self._reset(address)
            self.early = True
            main = threading.current_thread() is threading.main_thread()
            if main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _exit_on_sigterm)
            self.ready.clear()
            self.released.clear()
            self.thread = threading.Thread(
                target=self._own, name="finreflect-eval Ray", daemon=True
            )
            self.thread.start()

    def _own(self) -> None:
        try:
            self._start()
        finally:
            self.ready.set()
        if self.connected:
            self.released.wait()

    def open(self, address: str | None) -> None:
        """Connected to Ray for one more replica set: this process's connection (once a start
        in the background is done), a Ray the caller started, or a new connection to `address`.
        """
        ray = _import_ray()
        waited = time.perf_counter()
        self.wait()
        waited = _since(waited)
        with self.lock:
            if self.error is not None or (self.connected and not ray.is_initialized()):
                # A start that failed (its error is this load's, for the same address), or a
                # Ray the caller shut down.
                error = self.error if self.address == address else None
                self._release_thread()
                self._reset(address)
                if error is not None:
                    raise error
            if ray.is_initialized() and not self.connected:
                self.users += 1  # a Ray the caller started: used as it is, never stopped
                return
            if self.connected and self.address != address:
                if self.users:
                    raise FinReflectError(
                        f"ray_address={address!r}: this process is connected to "
                        f"{self.address or 'a local Ray'} for replicas still running"
                    )
                self.stop()
            if not self.connected:
                self._reset(address)
                self._start()
                if self.error is not None:
                    error = self.error
                    self._reset(None)
                    raise error
            if not self.reported:
                self.reported = True
                where = "started a local instance" if self.local else "joined the cluster"
                early = f"; started early, the run waited {waited:.2f} s for it" * self.early
                logger.info(
                    "Ray: %s in %.2f s (import %.2f s%s)",
                    where,
                    self.seconds,
                    self.import_seconds,
                    early,
                )
            self.users += 1

    def wait(self) -> None:
        """Until a start in the background is done."""
        if self.thread is not None:
            self.ready.wait()

    def _release_thread(self) -> None:
        if self.thread is not None:
            self.released.set()
            self.thread = None

    def _start(self) -> None:
        """Join the cluster at `self.address` (else `RAY_ADDRESS`), or start a local Ray; an
        error is kept in `self.error`, as one line."""
        try:
            ray = _import_ray()
            address = self.address or os.environ.get("RAY_ADDRESS") or None
            _check_reachable(address)
            forwarded = _forwarded_env()
            # Not Ray's default (None: the cluster `ray start` last started here, if its file is
            # left): without an address, a Ray of this run's own.
            local = address in (None, "local")
            # A local Ray's workers inherit this environment; a cluster's get it from the job
            # (once, rather than from each actor).
            job_env = {"env_vars": forwarded} if forwarded and not local else None
            logging.getLogger("ray._private.worker").addFilter(_quiet_sigterm_note)
            started = time.perf_counter()
            try:
                ray.init(
                    address="local" if local else self.address,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    runtime_env=job_env,
                )
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise FinReflectError(
                    f"cannot reach the Ray cluster at {address or 'a local instance'}: "
                    f"{first_line(exc)}{'' if local else _token_hint()}"
                ) from None
            with self.lock:
                self.seconds = _since(started)
                self.connected, self.local, self.env = True, local, forwarded
                if not self.exit_registered:
                    # Registered after Ray's own (at its import), so it runs first: Ray's own
                    # pauses half a second for log lines before it stops Ray.
                    atexit.register(self.stop)
                    self.exit_registered = True
        except BaseException as exc:  # raised by `open`, in the thread that waits for Ray
            self.error = exc

    # --- what the workers have ---

    def missing_env(self) -> dict[str, str]:
        """The forwarded settings the replicas' workers lack: on a Ray this process connected,
        those set or changed since; on a Ray the caller started, all but its job's own."""
        import ray

        have = self.env
        if not self.connected:
            with suppress(Exception):  # a Ray Client session may not say
                have = dict((ray.get_runtime_context().runtime_env or {}).get("env_vars") or {})
        return {k: v for k, v in _forwarded_env().items() if have.get(k) != v}

    # --- stopping ---

    def release(self) -> None:
        with self.lock:
            self.users = max(0, self.users - 1)

    def stop(self) -> None:
        """Disconnect, stopping a local Ray this process started (once a start under way is
        done)."""
        self.wait()
        with self.lock:
            ray = sys.modules.get("ray")
            if self.connected and ray is not None and ray.is_initialized():
                started = time.perf_counter()
                if self.local:
                    _stop_autoscaler(ray)
                ray.shutdown()
                logger.info(
                    "Ray: %s in %.2f s", "stopped" if self.local else "left", _since(started)
                )
            self._release_thread()
            self._reset(None)


_SESSION = _RaySession()


def _import_ray() -> Any:
    started = time.perf_counter()
    imported = "ray" in sys.modules
    try:
        import ray

        if not imported:
            _SESSION.import_seconds = _since(started)
    except ImportError:
        raise FinReflectError(
            f"data_parallel_size > 1 and ray_address need Ray: {install_hint('ray')}"
        ) from None
    return ray


def _ray_up() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def _stop_autoscaler(ray: Any) -> None:
    """Stop the autoscaler of a local Ray (which has nothing to scale) before `ray.shutdown`
    stops the rest: stopped after the cluster's state server, as `ray.shutdown` does, it hangs
    reporting its end to it until killed a second later, a second of every run's end. Through
    Ray's internals (2.x), so where they differ, `ray.shutdown` does it as before."""
    with suppress(Exception):
        ray._private.worker._global_node.kill_monitor(check_alive=False)


def _forwarded_env() -> dict[str, str]:
    return {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    """Ray's own handler, which `ray.init` sets only from the main thread: exit through
    `atexit`, which stops the local Ray."""
    sys.exit(signum)


def _quiet_sigterm_note(record: logging.LogRecord) -> bool:
    """Ray's warning that a start in a thread sets no SIGTERM handler: `begin` has set it."""
    return not str(record.msg).startswith("SIGTERM handler is not set")


def _since(started: float) -> float:
    return time.perf_counter() - started


def _wait_for_exit(pids: list[int], seconds: float) -> None:
    """Until these processes of this machine have exited (a zombie has), or `seconds` pass."""
    deadline = time.monotonic() + seconds
    for pid in pids:
        while time.monotonic() < deadline and _running(pid):
            time.sleep(0.01)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _token_hint() -> str:
    """Why a cluster that answers may still refuse us: one with Ray's token authentication
    takes a client that sends the token, which it does only with RAY_AUTH_MODE=token."""
    if os.environ.get("RAY_AUTH_MODE") == "token":
        return ""
    return (
        " (if it asks for a token, Ray's token authentication: set RAY_AUTH_MODE=token here, "
        "with the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token)"
    )


def _check_reachable(address: str | None, seconds: float = 10.0) -> None:
    """A cluster named by HOST:PORT (or ray://HOST:PORT) answers on its port within `seconds`:
    `ray.init` waits minutes for an address where nothing listens."""
    if not address or address in ("auto", "local"):
        return
    if "://" in address and not address.startswith("ray://"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except (OSError, ValueError) as exc:
        raise FinReflectError(
            f"cannot reach the Ray cluster at {address}: {first_line(exc)} (give HOST:PORT of a "
            "running head node, ray://HOST:PORT for Ray Client, or auto)"
        ) from None


def _check_room(plan: ReplicaPlan, size: int) -> None:
    """Refuse at once what the cluster can never hold, rather than wait for it (a placement
    group that cannot be placed waits forever: lighteval #670): the cluster's totals, and for
    replicas kept to one node each (`STRICT_PACK`), how many fit node by node."""
    import ray

    total = ray.cluster_resources()
    need = {name: sum(b.get(name, 0) for b in plan.bundles) for b in plan.bundles for name in b}
    for resource, each in sorted(need.items()):
        if size * each > total.get(resource, 0):
            raise FinReflectError(
                f"data_parallel_size={size} needs {size * each:g} {resource} "
                f"({each:g} per replica); the Ray cluster has {total.get(resource, 0):g}"
            )
    if plan.strategy != "STRICT_PACK":
        return
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    fit = sum(
        min((int(node.get(r, 0) // each) for r, each in need.items() if each), default=0)
        for node in nodes
    )
    if fit < size:
        raise FinReflectError(
            f"data_parallel_size={size}: only {fit} replicas fit, each on one node "
            f"({', '.join(f'{each:g} {r}' for r, each in sorted(need.items()))} per replica)"
        )
