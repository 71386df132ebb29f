"""Where the files that ship with the package live.

In a wheel, `tasks/` and `dataset_card.md` are copied inside the package; in a source checkout
(or an editable install) they sit at the top of the repository, next to the package.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def bundled_path(name: str) -> Path:
    """Path of a file or folder shipped with the package (`tasks`, `dataset_card.md`, `sample`)."""
    inside = PACKAGE_DIR / name
    return inside if inside.exists() else PACKAGE_DIR.parent / name


def tasks_dir() -> Path:
    return bundled_path("tasks")


def sample_dir() -> Path:
    return PACKAGE_DIR / "sample"
