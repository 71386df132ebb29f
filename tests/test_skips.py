"""Where fixtures are required (CI: FINREFLECT_FIXTURES=required), no test may skip: every way a
test can skip fails instead (tests/conftest.py's hooks), and says why it would have skipped.
Elsewhere they skip, as before. Shown on a small suite of every kind of skip, run by pytest in a
child process with this suite's conftest.py as a plugin."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import REQUIRED_NOTE, TESTS

SKIPPING = """
import pytest
from conftest import missing

@pytest.fixture
def gone():
    missing("a fixture that is missing")

def test_importorskip():
    pytest.importorskip("finreflect_no_such_module")

@pytest.mark.skip(reason="a skip mark")
def test_skip_mark():
    pass

@pytest.mark.skipif(True, reason="a skipif mark")
def test_skipif_mark():
    pass

def test_missing_fixture(gone):
    pass

@pytest.mark.parametrize("value", [])
def test_empty_parametrization(value):
    pass

def test_runs():
    pass

@pytest.mark.xfail(reason="an expected failure", strict=True)
def test_expected_failure():
    assert False
"""
SKIPPED_MODULE = """
import pytest

pytest.importorskip("finreflect_no_such_module")

def test_never_collected():
    pass
"""
REASONS = (
    "could not import 'finreflect_no_such_module'",
    "a skip mark",
    "a skipif mark",
    "a fixture that is missing",
    "got empty parameter set",
)


def run_pytest(folder: Path, required: bool) -> tuple[int, str]:
    environment = {**os.environ, "PYTHONPATH": str(TESTS)}
    environment.pop("FINREFLECT_FIXTURES", None)
    if required:
        environment["FINREFLECT_FIXTURES"] = "required"
    options = ["-p", "conftest", "-p", "no:cacheprovider", "-c", str(folder / "pytest.ini")]
    options += ["--rootdir", str(folder), "-rA", "--continue-on-collection-errors"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *options, str(folder)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=folder,
        timeout=300,
    )
    return result.returncode, result.stdout + result.stderr


def summary(output: str) -> str:
    return re.findall(r"^=+ (.*) in [\d.]+s", output, re.M)[-1]


def suite(folder: Path) -> Path:
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_skipping.py").write_text(textwrap.dedent(SKIPPING))
    (folder / "test_skipped_module.py").write_text(textwrap.dedent(SKIPPED_MODULE))
    return folder


def test_every_skip_fails_where_fixtures_are_required(tmp_path):
    code, output = run_pytest(suite(tmp_path / "suite"), required=True)
    assert code == 1, output
    # the skip in the test's call fails it; those in its setup (marks, fixtures, an empty
    # parametrization) and the module's at import are errors
    assert summary(output) == "1 failed, 1 passed, 1 xfailed, 5 errors", output
    assert "SKIPPED" not in output
    for reason in REASONS:
        assert f"{REQUIRED_NOTE}: {reason}" in output, reason
    assert "ERROR test_skipped_module.py" in output


def test_skips_skip_elsewhere(tmp_path):
    code, output = run_pytest(suite(tmp_path / "suite"), required=False)
    assert code == 0, output
    assert summary(output) == "1 passed, 6 skipped, 1 xfailed", output
    assert REQUIRED_NOTE not in output
