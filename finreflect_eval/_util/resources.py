"""Where the files that ship with the package live, and how its YAML data files are read.

In a wheel, `tasks/` and `dataset_card.md` are copied into `finreflect_eval/_bundled/`; in a
source checkout (or an editable install) they sit at the top of the repository.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def bundled_path(name: str) -> Path:
    """Path of a file or folder shipped with the package (`tasks`, `dataset_card.md`, `sample`)."""
    inside = PACKAGE_DIR / "_bundled" / name
    return inside if inside.exists() else PACKAGE_DIR.parent / name


def install_hint(extra: str) -> str:
    """The command that installs an extra where this package came from, since
    `finreflect-eval[...]` names a release that a clone may not match, or that may not be
    published: the folder, repository or file pip recorded (PEP 610's `direct_url.json`), else a
    source checkout's own folder, else the published package."""
    origin = _installed_from()
    if origin is not None:
        url, info = origin
        if isinstance(info.get("dir_info"), dict):
            folder = Path(url2pathname(urlsplit(url).path))
            if folder.is_dir():
                editable = "-e " if info["dir_info"].get("editable") else ""
                return f"pip install {editable}'{folder}[{extra}]'"
        elif isinstance(info.get("vcs_info"), dict):
            vcs = info["vcs_info"]
            commit = f"@{vcs['commit_id']}" if isinstance(vcs.get("commit_id"), str) else ""
            return f"pip install 'finreflect-eval[{extra}] @ {vcs.get('vcs')}+{url}{commit}'"
        elif "archive_info" in info:
            return f"pip install 'finreflect-eval[{extra}] @ {url}'"
    checkout = PACKAGE_DIR.parent
    source_tree = not (PACKAGE_DIR / "_bundled").exists()
    if origin is None and source_tree and (checkout / "pyproject.toml").is_file():
        return f"pip install -e '{checkout}[{extra}]'"  # run from a clone, not installed from it
    return f"pip install 'finreflect-eval[{extra}]'"


def _installed_from() -> tuple[str, dict[str, Any]] | None:
    """The URL (without credentials) and the record of where pip installed the running
    package from, if it was installed from a URL or a folder and this is that installation."""
    import json
    from importlib import metadata

    from finreflect_eval._util.redaction import redact_url

    try:
        dist = metadata.distribution("finreflect-eval")
        info = json.loads(dist.read_text("direct_url.json") or "null")
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("url"), str):
        return None
    parts = urlsplit(info["url"])
    editable = isinstance(info.get("dir_info"), dict) and info["dir_info"].get("editable")
    if editable:
        ours = Path(url2pathname(parts.path)).resolve() == PACKAGE_DIR.parent
    else:  # installed as files: this package must be the one beside the record
        ours = Path(str(dist.locate_file("finreflect_eval"))).resolve() == PACKAGE_DIR
    if not ours:
        return None
    netloc = parts.netloc.rpartition("@")[2]  # never a user or password
    return redact_url(urlunsplit(parts._replace(netloc=netloc))), info


def tasks_dir() -> Path:
    return bundled_path("tasks")


def sample_dir() -> Path:
    return PACKAGE_DIR / "sample"


def load_yaml(path: Path, what: str) -> Any:
    """Parse a YAML data file (a task, panel, schema or probe file); errors name the file and
    the line, in one line. A key given twice in a mapping, at any depth, is an error (YAML
    forbids it; PyYAML would keep the last value silently)."""
    import yaml

    from finreflect_eval._util.errors import FinReflectError

    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=unique_key_loader())
    except OSError as exc:
        raise FinReflectError(f"cannot read {what} {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise FinReflectError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        line, problem = yaml_problem(exc)
        where = f" (line {line})" if line else ""
        raise FinReflectError(f"{path}: not valid YAML{where}: {problem}") from exc


def yaml_problem(exc: Exception) -> tuple[int | None, str]:
    """The line (1-based, where PyYAML marks one) and the problem of a YAML error."""
    from finreflect_eval._util.errors import first_line

    mark = getattr(exc, "problem_mark", None)
    return (mark.line + 1 if mark else None), getattr(exc, "problem", None) or first_line(exc)


@functools.cache
def unique_key_loader() -> type:
    """PyYAML's safe loader, refusing a key given twice in one mapping (at any depth)."""
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
