"""Where the files that ship with the package live, and how its YAML data files are read.

In a wheel, `tasks/` and `dataset_card.md` are copied into `finreflect_eval/_bundled/`; in a
source checkout (or an editable install) they sit at the top of the repository.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def bundled_path(name: str) -> Path:
    """Path of a file or folder shipped with the package (`tasks`, `dataset_card.md`, `sample`)."""
    inside = PACKAGE_DIR / "_bundled" / name
    return inside if inside.exists() else PACKAGE_DIR.parent / name


def install_hint(extra: str) -> str:
    """The command that installs an extra where this package came from: a source checkout
    (a clone, installed editable) takes its own folder's extras, since `finreflect-eval[...]`
    names a release that a clone may not match, or that may not be published."""
    checkout = PACKAGE_DIR.parent
    if (checkout / "pyproject.toml").is_file() and not (PACKAGE_DIR / "_bundled").exists():
        return f"pip install -e '{checkout}[{extra}]'"
    return f"pip install 'finreflect-eval[{extra}]'"


def tasks_dir() -> Path:
    return bundled_path("tasks")


def sample_dir() -> Path:
    return PACKAGE_DIR / "sample"


def load_yaml(path: Path, what: str) -> Any:
    """Parse a YAML data file (a task, panel, schema or probe file); errors name the file and
    the line, in one line. A key given twice in a mapping, at any depth, is an error (YAML
    forbids it; PyYAML would keep the last value silently)."""
    import yaml

    from finreflect_eval._util.errors import FinReflectError, first_line

    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_unique_key_loader())
    except OSError as exc:
        raise FinReflectError(f"cannot read {what} {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise FinReflectError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or first_line(str(exc))
        raise FinReflectError(f"{path}: not valid YAML{where}: {problem}") from exc


@functools.cache
def _unique_key_loader() -> type:
    """PyYAML's safe loader, refusing a key given twice in one mapping."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
            seen: dict[Any, int] = {}  # key -> the line it is first on
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the safe loader refuses it itself
                    continue
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        problem=f"key {key!r} given twice (first on line {first})",
                        problem_mark=key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def cache_root() -> Path:
    """Where converted models and other reusable artifacts live (never inside the package):
    `$FINREFLECT_EVAL_CACHE`, else `$XDG_CACHE_HOME/finreflect-eval`, else `~/.cache/...`."""
    import os

    if os.environ.get("FINREFLECT_EVAL_CACHE"):
        return Path(os.environ["FINREFLECT_EVAL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "finreflect-eval"
