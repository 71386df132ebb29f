"""Where the files that ship with the package live, and how its YAML data files are read.

In a wheel, `tasks/` and `dataset_card.md` are copied into `finreflect_eval/_bundled/`; in a
source checkout (or an editable install) they sit at the top of the repository.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent


def bundled_path(name: str) -> Path:
    """Path of a file or folder shipped with the package (`tasks`, `dataset_card.md`, `sample`)."""
    inside = PACKAGE_DIR / "_bundled" / name
    return inside if inside.exists() else PACKAGE_DIR.parent / name


def tasks_dir() -> Path:
    return bundled_path("tasks")


def sample_dir() -> Path:
    return PACKAGE_DIR / "sample"


def load_yaml(path: Path, what: str) -> Any:
    """Parse a YAML data file (a task, panel, schema or probe file); errors name the file and
    the line, in one line."""
    import yaml

    from finreflect_eval.errors import FinReflectError, first_line

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FinReflectError(f"cannot read {what} {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise FinReflectError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or first_line(str(exc))
        raise FinReflectError(f"{path}: not valid YAML{where}: {problem}") from exc


def cache_root() -> Path:
    """Where converted models and other reusable artifacts live (never inside the package):
    `$FINREFLECT_EVAL_CACHE`, else `$XDG_CACHE_HOME/finreflect-eval`, else `~/.cache/...`."""
    import os

    if os.environ.get("FINREFLECT_EVAL_CACHE"):
        return Path(os.environ["FINREFLECT_EVAL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "finreflect-eval"
