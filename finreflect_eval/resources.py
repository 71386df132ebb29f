"""Where the files that ship with the package live.

In a wheel, `tasks/` and `dataset_card.md` are copied into `finreflect_eval/_bundled/`; in a
source checkout (or an editable install) they sit at the top of the repository.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def bundled_path(name: str) -> Path:
    """Path of a file or folder shipped with the package (`tasks`, `dataset_card.md`, `sample`)."""
    inside = PACKAGE_DIR / "_bundled" / name
    return inside if inside.exists() else PACKAGE_DIR.parent / name


def tasks_dir() -> Path:
    return bundled_path("tasks")


def sample_dir() -> Path:
    return PACKAGE_DIR / "sample"


def newest(path: Path, pattern: str, hint: str) -> Path:
    """`path` itself, or when it is a folder, its newest file matching `pattern` (file names
    carry a sortable date); `hint` says which command writes such files."""
    if not path.is_dir():
        return path
    found = sorted(path.glob(pattern))
    if not found:
        from finreflect_eval.errors import FinReflectError

        raise FinReflectError(f"{path}: no {pattern} here ({hint})")
    return found[-1]


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and a rename: a killed write leaves the old file whole."""
    import os

    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def spreadsheet_safe(value: object) -> object:
    """A CSV text cell that a spreadsheet would run as a formula, quoted (CSV injection)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def timestamp() -> str:
    """The UTC time as used in output file names (`2026-12-03T07-16-18`)."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%S")


def cache_root() -> Path:
    """Where converted models and other reusable artifacts live (never inside the package):
    `$FINREFLECT_EVAL_CACHE`, else `$XDG_CACHE_HOME/finreflect-eval`, else `~/.cache/...`."""
    import os

    if os.environ.get("FINREFLECT_EVAL_CACHE"):
        return Path(os.environ["FINREFLECT_EVAL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "finreflect-eval"
