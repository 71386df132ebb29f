import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_10K = REPO.parent / "shared" / "data" / "10k_text"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the installed command line in a child process, offline (as a user would)."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "finreflect_eval", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def filings() -> list[Path]:
    files = sorted(SHARED_10K.glob("*_10-K-*.txt"))
    if not files:
        pytest.skip(f"real 10-K text not found in {SHARED_10K}")
    return files
