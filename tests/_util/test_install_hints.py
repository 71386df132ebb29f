"""Install hints that work where the package came from: a clone (installed editable) takes its
own folder's extras; an installed wheel takes the published package's; an install from a folder,
a repository or a file (PEP 610's `direct_url.json`) takes that folder, repository or file."""

import json
import shutil
import subprocess
import sys

import pytest

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


def hint_in(site) -> str:
    """The hint the package installed in `site` gives, run from elsewhere."""
    code = "from finreflect_eval._util.resources import install_hint; print(install_hint('vllm'))"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=site.parent,
        env={"PYTHONPATH": str(site)},
        check=True,
    ).stdout.strip()


def test_installed_from_a_clone_not_editable_the_hint_installs_that_folder(tmp_path):
    """The README's own install (`pip install '.[hf,demo]'` in a clone): pip builds the package
    from the folder and records it in direct_url.json; `finreflect-eval[vllm]` may not exist."""
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site)]
    subprocess.run([*pip, str(PACKAGE_DIR.parent)], check=True, capture_output=True)
    [record] = site.glob("finreflect_eval-*.dist-info/direct_url.json")
    assert json.loads(record.read_text())["url"] == PACKAGE_DIR.parent.as_uri()
    assert hint_in(site) == f"pip install '{PACKAGE_DIR.parent}[vllm]'"


@pytest.mark.parametrize(
    ("origin", "hint"),
    [
        (
            {
                "url": "https://user:s3cret@github.com/o/r.git",
                "vcs_info": {"vcs": "git", "commit_id": "ab12"},
            },
            "pip install 'finreflect-eval[vllm] @ git+https://github.com/o/r.git@ab12'",
        ),
        (
            {"url": "file:///wheels/finreflect_eval-0.1.0-py3-none-any.whl", "archive_info": {}},
            "pip install 'finreflect-eval[vllm] @ file:///wheels/finreflect_eval-0.1.0-py3-none-any.whl'",
        ),
        ({"url": "file:///gone/clone", "dir_info": {}}, "pip install 'finreflect-eval[vllm]'"),
        ("not json", "pip install 'finreflect-eval[vllm]'"),
    ],
)
def test_the_hint_follows_what_direct_url_json_records(tmp_path, origin, hint):
    """From a repository or a file: that source again, never a secret in its URL; a folder that
    is gone or a record that is not PEP 610's: the published package."""
    site = tmp_path / "site"
    shutil.copytree(PACKAGE_DIR, site / "finreflect_eval", ignore=shutil.ignore_patterns("__py*"))
    shutil.copytree(PACKAGE_DIR.parent / "tasks", site / "finreflect_eval" / "_bundled" / "tasks")
    info = site / "finreflect_eval-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: finreflect-eval\nVersion: 0.1.0\n")
    (info / "RECORD").write_text("")
    text = origin if isinstance(origin, str) else json.dumps(origin)
    (info / "direct_url.json").write_text(text)
    assert hint_in(site) == hint
