"""The Python API's arguments (`simple_evaluate`, `run_config`, `evaluate_run`): what each takes,
checked before any work, so that a mistake is one error naming the argument
(`ArgumentTypeError`/`ArgumentValueError`), not a TypeError deep inside."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from finreflect_eval.errors import ArgumentTypeError, ArgumentValueError, FinReflectError
from finreflect_eval.judging import Panel
from finreflect_eval.models import LM, parse_batch_size
from finreflect_eval.redaction import redact
from finreflect_eval.sharding import Shard


@dataclass(frozen=True)
class _Takes:
    """What an argument of the Python API takes: in words (for its error message), the test of
    its type, and of its value."""

    words: str
    of_type: Callable[[Any], bool]
    valid: Callable[[Any], bool] = lambda value: True


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # True is not a count


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_path(value: Any) -> bool:
    return isinstance(value, str | os.PathLike)


def _optional(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or test(value)


def _list_of(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """A list or tuple (not a string, nor a set: order matters) of items that pass `test`."""
    return lambda value: isinstance(value, list | tuple) and all(test(item) for item in value)


def _is_key_values(value: Any) -> bool:
    """`model_args`/`gen_kwargs`: what `parse_model_args` reads."""
    if isinstance(value, dict):
        return all(isinstance(key, str) for key in value)
    return _optional(_is_str)(value) or _list_of(_is_str)(value)


def _is_judges(value: Any) -> bool:
    if value is None or isinstance(value, str | os.PathLike | Panel):
        return True
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and isinstance(v, LM) for k, v in value.items())
    return _list_of(lambda judge: isinstance(judge, LM))(value)


def _is_batch_size(value: int | str) -> bool:
    try:
        parse_batch_size(value)
    except FinReflectError:
        return False
    return True


def _not_empty(value: Any) -> bool:
    return not (isinstance(value, str | list | tuple | Mapping) and len(value) == 0)


_KEY_VALUES = "'key=value,...', a list of such strings, a dict, or None"
_ARGUMENTS = {
    "model": _Takes(
        "a model name or path, or a loaded LM",
        lambda v: _is_path(v) or isinstance(v, LM),
        _not_empty,
    ),
    "model_args": _Takes(_KEY_VALUES, _is_key_values),
    "tasks": _Takes(
        "a task or group name, or a list of them",
        lambda v: _is_str(v) or _list_of(_is_str)(v),
        _not_empty,
    ),
    "backend": _Takes("a backend name or None", _optional(_is_str)),
    "dataset": _Takes("'sample', a Hub id or a path, or None", _optional(_is_path)),
    "limit": _Takes(
        "a count of spans or a fraction between 0 and 1, or None",
        _optional(_is_number),
        _optional(lambda v: 0 < v < 1 or (v >= 1 and float(v).is_integer())),  # as RunConfig
    ),
    "num_fewshot": _Takes(
        "a count (0 or more) or None", _optional(_is_int), lambda v: v is None or v >= 0
    ),
    "batch_size": _Takes(
        "a count (1 or more), 'auto' or 'auto:N', or None",
        _optional(lambda v: _is_int(v) or _is_str(v)),
        lambda v: v is None or _is_batch_size(v),
    ),
    "max_batch_size": _Takes(
        "a count (1 or more) or None", _optional(_is_int), lambda v: v is None or v >= 1
    ),
    "device": _Takes("a device name ('cuda', 'cuda:0', 'cpu') or None", _optional(_is_str)),
    "revision": _Takes("a Hub revision (branch, tag or commit) or None", _optional(_is_str)),
    "trust_remote_code": _Takes("True, False or None", _optional(_is_bool)),
    "system_instruction": _Takes("a string or None", _optional(_is_str)),
    "fewshot_as_multiturn": _Takes("True or False", _is_bool),
    "gen_kwargs": _Takes(_KEY_VALUES, _is_key_values),
    "seed": _Takes("an integer or None", _optional(_is_int)),
    "output_path": _Takes("a folder path (str or Path)", _is_path),
    "use_cache": _Takes(
        "True, False, None, or a cache file path", lambda v: _optional(_is_bool)(v) or _is_path(v)
    ),
    "include_path": _Takes(
        "a folder path or a list of them", lambda v: _is_path(v) or _list_of(_is_path)(v)
    ),
    "shard": _Takes("a Shard or None", _optional(lambda v: isinstance(v, Shard))),
    "judges": _Takes(
        "a panel name or file, a Panel, loaded LMs (a list, or a dict by judge name), or None",
        _is_judges,
        _not_empty,
    ),
    "samples": _Takes(
        "a run folder or manifest path, or a list of shard folders",
        lambda v: _is_path(v) or _list_of(_is_path)(v),
        _not_empty,
    ),
    "max_invalid_share": _Takes("a share between 0 and 1", _is_number, lambda v: 0 <= v <= 1),
    "max_judge_failure_share": _Takes("a share between 0 and 1", _is_number, lambda v: 0 <= v <= 1),
    "allow_failures": _Takes("True or False", _is_bool),
    "show_progress": _Takes("True or False", _is_bool),
}


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """Each argument's type, then its value (see `_ARGUMENTS`), before any work: a mistake
    stops the call with one error naming the argument, not a TypeError deep inside."""
    for name, value in arguments.items():
        takes = _ARGUMENTS[name]  # a new parameter of the API needs its entry there
        if not takes.of_type(value):
            raise ArgumentTypeError(f"{name} takes {takes.words}, got {_described(value)}")
        if not takes.valid(value):
            raise ArgumentValueError(f"{name} takes {takes.words}, got {_described(value)}")


def _described(value: Any) -> str:
    text = repr(redact(value))  # a key or a URL's password is never echoed
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
