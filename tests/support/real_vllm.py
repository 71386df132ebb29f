"""The real vLLM package for the vllm backend's tests, without a GPU.

vLLM's wheel pins a CUDA torch; installed with `--no-deps` into a folder of its own (kept out of
the test environment, so nothing else imports it by accident), its config and request classes
import on a CPU beside our torch. The few pure-Python packages those imports need are the
`[vllm-check]` extra. `python tests/support/real_vllm.py install` puts the wheel under
`~/.cache/finreflect-eval/vllm-<version>/` once per version (CI runs it); `path()` finds it.

Everything up to the engine is real: `vllm.LLM.__init__` runs (it validates the
`StructuredOutputsConfig` and builds `EngineArgs`) until it would start the engine on a GPU, and
each request's `SamplingParams` is checked by vLLM's own structured-output validation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VERSION = "0.33.0"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "finreflect-eval"
INSTALL = CACHE / f"vllm-{VERSION}"


def path() -> Path | None:
    """The folder holding the installed `vllm` package, or None when it is not installed."""
    return INSTALL if (INSTALL / "vllm" / "__init__.py").is_file() else None


def install() -> Path:
    """Install the vLLM wheel (no dependencies) into the cache folder, atomically."""
    if path() is not None:
        return INSTALL
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".vllm-", dir=CACHE))
    try:
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
        subprocess.run([*pip, "--target", staging, f"vllm=={VERSION}"], check=True)
        staging.rename(INSTALL)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return INSTALL


class EngineStart(Exception):
    """Raised where vLLM would start its engine (GPU-only); carries the real `EngineArgs`."""

    def __init__(self, engine_args: object) -> None:
        super().__init__("vLLM would start the engine here")
        self.engine_args = engine_args


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        raise SystemExit("usage: python tests/support/real_vllm.py install")
    print(install())
