"""The real Label Studio, run as a subprocess on 127.0.0.1, for end-to-end tests of the review
export/import.

Label Studio pins Django and much else exactly, so it lives in its own virtual environment,
`~/.cache/finreflect-eval/label-studio-<version>/` (~1 GB, ~3 min to install), never in the
package's. A fresh data directory takes 20-75 s to start (396 migrations), so a migrated one,
with the reviewer and their API token already in it, is kept beside it in
`label-studio-<version>-data/`; each server starts from a copy of it in ~10 s.
`python tests/support/label_studio.py prepare` makes both (CI can run it before the tests; a second
one waits for the first); `label_studio_server()` makes whatever is missing, then serves.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERSION = "1.23.2"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "finreflect-eval"
VENV = CACHE / f"label-studio-{VERSION}"
DATA = CACHE / f"label-studio-{VERSION}-data"
LOCK = CACHE / f"label-studio-{VERSION}.lock"

# The one user of every server, made when the cached data directory is (its token is fixed then;
# the data directory is made again if these change).
USERNAME = "reviewer@example.com"
PASSWORD = "finreflect-review"
TOKEN = "finreflect-review-token-0123456789"

FRESH_START_S = 300  # a fresh data directory (migrations): 20-75 s here
CACHED_START_S = 120  # from a copy of the migrated one: 2-14 s here
STOP_GRACE_S = 10
_PREPARED = "finreflect-prepared.json"  # in the cached data directory: what it was made with

# Label Studio reads settings from its environment, unprefixed names too (HOST, PORT, USERNAME,
# DEBUG...): give it only these, so nothing from the caller's environment leaks in.
_PASSED_ENV = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE")
_OFFLINE_ENV = {
    "LABEL_STUDIO_LATEST_VERSION_CHECK": "false",  # else it asks PyPI at start
    "LABEL_STUDIO_COLLECT_ANALYTICS": "false",
    "LABEL_STUDIO_SENTRY_DSN": "",  # its default sends errors to Heartex's Sentry
    "LABEL_STUDIO_FRONTEND_SENTRY_DSN": "",
    "LABEL_STUDIO_DEBUG": "false",
    "LABEL_STUDIO_LOG_LEVEL": "WARNING",
    "PYTHONUNBUFFERED": "1",  # the log is read when the server dies
}


class LabelStudioError(RuntimeError):
    """Label Studio could not be installed, prepared or started (one line: the cause)."""


@dataclass(frozen=True)
class LabelStudioServer:
    """A running Label Studio: its base URL, the reviewer's legacy API token, its pid (leader of
    its own process group), its data directory (a copy) and its log."""

    url: str
    token: str
    pid: int
    data_dir: Path
    log: Path

    def client(self) -> Any:
        """The Label Studio SDK's client, logged in as the reviewer."""
        from label_studio_sdk import LabelStudio

        return LabelStudio(base_url=self.url, api_key=self.token)


def executable() -> Path:
    """The `label-studio` command in the cached environment (which may not exist yet)."""
    return VENV / "bin" / "label-studio"


def _venv_ready() -> bool:
    # pip writes a wheel's RECORD last, and label-studio (which needs all the rest) last of all.
    records = VENV.glob(f"lib/python*/site-packages/label_studio-{VERSION}.dist-info/RECORD")
    return executable().is_file() and any(records)


def _data_ready() -> bool:
    try:
        prepared = json.loads((DATA / _PREPARED).read_text())
    except (OSError, ValueError):
        return False
    return prepared == _prepared_with() and (DATA / "label_studio.sqlite3").is_file()


def _prepared_with() -> dict[str, str]:
    return {"version": VERSION, "username": USERNAME, "token": TOKEN}


def prepare() -> tuple[Path, Path]:
    """Make the cached environment and migrated data directory where missing (once per version,
    under a lock: a second caller waits for the first); return their paths."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _venv_ready():
            _install_venv()
        if not _data_ready():
            _make_data_dir()
    return VENV, DATA


def _install_venv() -> None:
    shutil.rmtree(VENV, ignore_errors=True)  # a half-made one from a killed install
    log = CACHE / f"label-studio-{VERSION}-install.log"
    try:
        with log.open("w") as output:
            subprocess.run(
                [sys.executable, "-m", "venv", VENV], check=True, stdout=output, stderr=output
            )
            pip = [VENV / "bin" / "python", "-m", "pip", "install", "--no-input"]
            subprocess.run(
                [*pip, "--disable-pip-version-check", f"label-studio=={VERSION}"],
                check=True,
                stdout=output,
                stderr=output,
            )
    except subprocess.CalledProcessError as error:
        shutil.rmtree(VENV, ignore_errors=True)
        raise LabelStudioError(
            f"installing label-studio=={VERSION} into {VENV} failed (exit {error.returncode}; "
            f"needs PyPI): {_tail(log, 5)}"
        ) from None
    if not _venv_ready():
        raise LabelStudioError(f"pip installed label-studio=={VERSION}, but not into {VENV}")


def _make_data_dir() -> None:
    """Start once on an empty data directory (migrations, the user and the token), stop, keep."""
    staging = Path(tempfile.mkdtemp(prefix=".label-studio-data-", dir=CACHE))
    try:
        data = staging / "data"
        data.mkdir()
        with _running(data, staging / "server.log", FRESH_START_S):
            pass
        (data / _PREPARED).write_text(json.dumps(_prepared_with()))
        shutil.rmtree(DATA, ignore_errors=True)
        data.rename(DATA)  # atomic: no half-made data directory is ever found there
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def label_studio_server(workdir: Path | None = None) -> Iterator[LabelStudioServer]:
    """A Label Studio on a free port of 127.0.0.1, started from a copy of the cached data
    directory (made first where missing) in `workdir` (else a temporary folder, removed after);
    stopped on exit. Raises LabelStudioError with the cause when it cannot start."""
    prepare()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ls-")))
        workdir.mkdir(parents=True, exist_ok=True)
        data = workdir / "data"
        shutil.copytree(DATA, data)
        with _running(data, workdir / "server.log", CACHED_START_S) as server:
            yield server


def start_command(data: Path, port: int) -> list[Any]:
    """How the tests start Label Studio (docs/people.md shows the same command to people)."""
    return [
        executable(),
        "start",
        "--no-browser",
        *("--internal-host", "127.0.0.1", "--port", str(port)),
        *("--data-dir", data, "--log-level", "WARNING"),
        *("--username", USERNAME, "--password", PASSWORD, "--user-token", TOKEN),
        "--enable-legacy-api-token",  # without it (at the first start) the token gets 401
    ]


@contextlib.contextmanager
def _running(data: Path, log: Path, timeout_s: float) -> Iterator[LabelStudioServer]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = start_command(data, port)
    env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
    env.update(_OFFLINE_ENV)
    env["LABEL_STUDIO_BASE_DATA_DIR"] = str(data)
    with log.open("w") as output:
        process = subprocess.Popen(
            command,
            cwd=data,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole
        )
    try:
        _wait_until_ready(url, port, process, log, timeout_s)
        yield LabelStudioServer(url=url, token=TOKEN, pid=process.pid, data_dir=data, log=log)
    finally:
        _stop(process)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_ready(
    url: str, port: int, process: subprocess.Popen, log: Path, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise LabelStudioError(
                f"Label Studio exited with {process.returncode} before answering on {url}; "
                f"{log} ends: {_tail(log)}"
            )
        if f"Port {port} is in use" in log.read_text(errors="replace"):
            # It then moves to the next free port by itself: not the one we poll.
            raise LabelStudioError(f"port {port} was taken before Label Studio bound it; retry")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass  # not listening yet
        if time.monotonic() > deadline:
            raise LabelStudioError(
                f"Label Studio did not answer {url}/health within {timeout_s:.0f} s; "
                f"{log} ends: {_tail(log)}"
            )
        time.sleep(0.5)
    _check_token(url, log)


def _check_token(url: str, log: Path) -> None:
    request = urllib.request.Request(
        f"{url}/api/current-user/whoami", headers={"Authorization": f"Token {TOKEN}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            email = json.load(response).get("email")
    except urllib.error.HTTPError as error:
        raise LabelStudioError(
            f"Label Studio at {url} refused the reviewer's token (HTTP {error.code}); "
            f"remove {DATA} to make it again; {log} ends: {_tail(log)}"
        ) from None
    if email != USERNAME:
        raise LabelStudioError(f"Label Studio's token belongs to {email!r}, not {USERNAME!r}")


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to its process group, SIGKILL after a grace period; reaped either way."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError):  # any child left behind in its group
        os.killpg(process.pid, signal.SIGKILL)


def _tail(log: Path, lines: int = 8) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    kept = [line.strip() for line in text if line.strip(" ^~")]  # not traceback carets
    return " | ".join(kept[-lines:]) or "(empty)"


if __name__ == "__main__":
    if sys.argv[1:] != ["prepare"]:
        raise SystemExit("usage: python tests/support/label_studio.py prepare")
    try:
        venv, data = prepare()
    except LabelStudioError as error:
        raise SystemExit(str(error)) from None
    print(executable())
    print(data)
