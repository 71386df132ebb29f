"""Install hints that work where the package came from: a clone (installed editable) takes its
own folder's extras; an installed wheel takes the published package's."""

import shutil
import subprocess
import sys

from finreflect_eval._util.resources import PACKAGE_DIR, install_hint


def test_from_a_clone_the_hint_installs_the_clone():
    hint = install_hint("vllm")
    assert hint == f"pip install -e '{PACKAGE_DIR.parent}[vllm]'"


def test_from_a_wheel_the_hint_names_the_package(tmp_path):
    # A wheel's layout: the package alone, with tasks/ and the card under _bundled/ (pyproject's
    # force-include), in a site folder with no pyproject.toml above it.
    site = tmp_path / "site-packages"
    shutil.copytree(PACKAGE_DIR, site / "finreflect_eval", ignore=shutil.ignore_patterns("__py*"))
    shutil.copytree(PACKAGE_DIR.parent / "tasks", site / "finreflect_eval" / "_bundled" / "tasks")
    code = "from finreflect_eval._util.resources import install_hint; print(install_hint('vllm'))"
    shown = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(site)},
        check=True,
    ).stdout.strip()
    assert shown == "pip install 'finreflect-eval[vllm]'"
