"""Reading run files: the format-version check, validation with one-line errors, and JSON
size and depth limits for hostile input."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeVar

from pydantic import (
    ValidationError,
)

from finreflect_eval._util.errors import FinReflectError, first_invalid_field, first_line
from finreflect_eval.records.base import (
    FORMAT_VERSION,
    FileRecord,
)

M = TypeVar("M", bound=FileRecord)
MAX_DEPTH = 64  # our files nest about 8 levels; JSON deeper than this is refused


def check_version(data: Any, where: str | Path) -> None:
    """A one-line error for a file of another format version (no version: written before
    versions existed)."""
    version = data.get("format_version") if isinstance(data, dict) else None
    if version == FORMAT_VERSION:
        return
    shown = version if isinstance(version, int) else repr(version)  # "2" is not 2
    written = f"format version {shown}" if version is not None else "an older format"
    raise FinReflectError(
        f"{where} is in {written}; this finreflect-eval reads format version {FORMAT_VERSION}"
        " (convert a run folder with `finreflect-eval upgrade DIR`)"
    )


def _check_kind(model: type[FileRecord], data: Any, where: str | Path) -> None:
    """A one-line error for JSON that is no such file at all: without a format version and
    without any of its fields (an older file of the kind has some: its version is what is
    wrong)."""
    fields = [info.alias or name for name, info in model.model_fields.items()]
    if isinstance(data, dict) and ("format_version" in data or set(fields) & set(data)):
        return
    shown = ", ".join([name for name in fields if name != "format_version"][:4])
    raise FinReflectError(
        f"{where} is not a {model.__name__} file: it has no format_version and none of its "
        f"fields ({shown}, ...)"
    )


def parse(model: type[M], data: Any, where: str | Path) -> M:
    """`data` (parsed JSON) as `model`, after the version check; errors name `where`."""
    _check_kind(model, data, where)
    check_version(data, where)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise FinReflectError(f"{where}: {first_invalid_field(exc)}") from exc


def read(model: type[M], path: Path) -> M:
    """A JSON file as `model`."""
    return parse(model, read_json(path), path)


def read_lines(model: type[M], path: Path) -> list[M]:
    """A JSONL file, one `model` per line; errors name the file and the line. Read a line at a
    time: a run's samples can be gigabytes, and only their records are kept."""
    records = []
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:  # pydantic's own JSON parser: about half the time of json.loads + validation
                    records.append(model.model_validate_json(line))
                    continue
                except ValueError:  # (a ValidationError) read it again to say what is wrong
                    pass
                try:
                    data = json.loads(line)
                except ValueError as exc:
                    raise FinReflectError(f"{path}, line {number}: not JSON ({exc})") from exc
                except RecursionError:
                    raise FinReflectError(
                        f"{path}, line {number}: nested more than {MAX_DEPTH} levels deep"
                    ) from None
                records.append(parse(model, data, f"{path}, line {number}"))
    except OSError as exc:
        raise FinReflectError(f"cannot read {path}: {exc.strerror}") from exc
    return records


def read_json(path: Path, max_bytes: int | None = None) -> Any:
    """A JSON file, refused in one line when larger than `max_bytes` or nested deeper than
    MAX_DEPTH (hostile input must not exhaust memory or the stack)."""
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            raise FinReflectError(
                f"{path}: {path.stat().st_size / 2**20:.1f} MiB is more than the "
                f"{max_bytes / 2**20:.0f} MiB allowed"
            )
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FinReflectError(f"cannot read {path}: {exc.strerror}") from exc
    except RecursionError:
        raise FinReflectError(f"{path}: nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        raise FinReflectError(f"{path}: not JSON ({first_line(exc)})") from exc
    depth, finite = _shape(data)
    if depth > MAX_DEPTH:
        raise FinReflectError(f"{path}: nested more than {MAX_DEPTH} levels deep")
    if not finite:  # Python's JSON reads NaN and Infinity; no file written here holds one
        raise FinReflectError(f"{path}: {_not_finite(data)} is not a number (NaN or infinite)")
    return data


def _shape(value: Any) -> tuple[int, bool]:
    """How deeply lists and objects nest in parsed JSON, and whether every number in it is
    finite (iteratively: no recursion limit)."""
    deepest, finite, stack = 0, True, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, float) and not math.isfinite(item):
            finite = False
    return deepest, finite


def _not_finite(value: Any) -> str | None:
    """Where parsed JSON holds a NaN or an infinity (`results.t.faithfulness,none`), if it does."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where
        children = (
            item.items()
            if isinstance(item, dict)
            else enumerate(item)
            if isinstance(item, list)
            else ()
        )
        stack.extend((child, f"{where}.{key}" if where else str(key)) for key, child in children)
    return None
