"""The Python API's arguments (`simple_evaluate`, `run_config`, `evaluate_run`): what each takes,
checked before any work, so that a mistake is one error naming the argument
(`ArgumentTypeError`/`ArgumentValueError`), not a TypeError deep inside."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from finreflect_eval._util.errors import ArgumentTypeError, ArgumentValueError, FinReflectError
from finreflect_eval._util.redaction import redact
from finreflect_eval.models import LM, parse_batch_size
from finreflect_eval.pipeline.judging import Panel
from finreflect_eval.pipeline.sharding import Shard
from finreflect_eval.records import Prices


@dataclass(frozen=True)
class _Takes:
    """What an argument of the Python API takes: in words (for its error message), the test of
    its type, and of its value. `refused`: for lm-eval's arguments taken at their default only,
    why another value is refused and what to use instead (the value error's message)."""

    words: str
    of_type: Callable[[Any], bool]
    valid: Callable[[Any], bool] = lambda value: True
    refused: str = ""


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
    "bootstrap_iters": _Takes("an integer, 0 or more", _is_int, lambda v: v >= 0),
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
    "qa": _Takes("a QA model's name or file, or None", _optional(_is_path)),
    "limit": _Takes(
        "a count of spans or a fraction between 0 and 1, or None",
        _optional(_is_number),
        _optional(lambda v: 0 < v < 1 or (v >= 1 and float(v).is_integer())),  # as RunConfig
    ),
    "dataset_revision": _Takes(
        "a Hub revision (branch, tag or commit) or None", _optional(_is_str)
    ),
    "sections": _Takes(
        "a list of 10-K section names (item1, item7, front) or None",
        _optional(_list_of(_is_str)),
        lambda v: v is None or len(v) > 0,
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
    "skip_judging_ungrounded": _Takes("True or False", _is_bool),
    "prices": _Takes(
        "a price table: a YAML file's path, a dict of its content, a Prices, or None",
        lambda v: v is None or _is_path(v) or isinstance(v, Mapping | Prices),
    ),
    "gen_kwargs": _Takes(_KEY_VALUES, _is_key_values),
    "seed": _Takes("an integer or None", _optional(_is_int)),
    "random_seed": _Takes("an integer or None", _optional(_is_int)),
    "numpy_random_seed": _Takes("an integer or None", _optional(_is_int)),
    "fewshot_random_seed": _Takes("an integer or None", _optional(_is_int)),
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


def _is_level(value: str | int) -> bool:
    return _is_int(value) or isinstance(logging.getLevelName(value.upper()), int)


def _default_only(words: str, of_type: Callable[[Any], bool], refused: str) -> _Takes:
    """One of lm-eval's arguments with no counterpart here: its default (False or None) only."""
    return _Takes(words, of_type, lambda value: not value, refused)


# lm-eval's `samples` of `simple_evaluate` and `run_config` (`evaluate_run`'s is a run folder).
SPANS_BY_TASK = _Takes(
    "a dict of span indices or ids by task, or None",
    _optional(lambda v: isinstance(v, Mapping) and all(isinstance(k, str) for k in v)),
)
_NO_REQUEST_CACHE = (
    "there is no request cache (prompts are built as the run goes); to call the models again, "
    "give use_cache a new file or False"
)
# `simple_evaluate`'s arguments besides run_config's: lm-eval's (its `samples` is not
# `evaluate_run`'s), and an output path that may be None (nothing written).
_SIMPLE_EVALUATE = {
    "output_path": _Takes("a folder path (str or Path), or None", _optional(_is_path)),
    "torch_random_seed": _Takes("an integer or None", _optional(_is_int)),
    "log_samples": _Takes("True or False", _is_bool),
    "confirm_run_unsafe_code": _Takes("True or False", _is_bool),  # no task runs code
    "verbosity": _Takes(
        "a logging level ('DEBUG', 'INFO', ... or its number) or None",
        _optional(lambda v: _is_str(v) or _is_int(v)),
        _optional(_is_level),
    ),
    "apply_chat_template": _Takes(
        "True or False",
        lambda v: _is_bool(v) or _is_str(v),
        _is_bool,
        "a model's own chat template is always applied (True and False alike), not one by name",
    ),
    "cache_requests": _default_only(
        "True or False",
        _is_bool,
        "there is no request cache (prompts are built as the run goes); every model call is "
        "cached already (use_cache)",
    ),
    "rewrite_requests_cache": _default_only("True or False", _is_bool, _NO_REQUEST_CACHE),
    "delete_requests_cache": _default_only("True or False", _is_bool, _NO_REQUEST_CACHE),
    "samples": SPANS_BY_TASK,
    "check_integrity": _default_only(
        "True or False",
        _is_bool,
        "tasks are checked as they load; to check their prompts on a sample span first: "
        "finreflect-eval tasks validate --tasks NAMES",
    ),
    "write_out": _default_only(
        "True or False",
        _is_bool,
        "every prompt's hash and output are in the returned samples (log_samples=True)",
    ),
    "evaluation_tracker": _default_only(
        "None",
        lambda v: True,
        "the results and samples go to output_path (lm-eval's file names); to push them to the "
        "Hub: finreflect-eval score --samples DIR --hf_hub_log_args ...",
    ),
    "task_manager": _default_only(
        "None", lambda v: True, "tasks are found in the package and the include_path folders"
    ),
    "predict_only": _default_only(
        "True or False",
        _is_bool,
        "for the predictions only: finreflect_eval.pipeline.evaluator.extract(run_config(...)) (or "
        "finreflect-eval extract), then evaluate_run(its folder, judges=...)",
    ),
    "metadata": _default_only(
        "a dict or None",
        _optional(lambda v: isinstance(v, Mapping)),
        "task settings live in the task YAML (include_path)",
    ),
}


def check_arguments(
    arguments: Mapping[str, Any], *, lm_eval: bool = False, spans_by_task: bool = False
) -> None:
    """Each argument's type, then its value (see `_ARGUMENTS`), before any work: a mistake
    stops the call with one error naming the argument, not a TypeError deep inside. `lm_eval`:
    `simple_evaluate`'s arguments, lm-eval's among them (see `_SIMPLE_EVALUATE`);
    `spans_by_task`: `samples` is lm-eval's choice of spans, not a run folder."""
    table = _ARGUMENTS | _SIMPLE_EVALUATE if lm_eval else _ARGUMENTS
    if spans_by_task:
        table = table | {"samples": SPANS_BY_TASK}
    for name, value in arguments.items():
        takes = table[name]  # a new parameter of the API needs its entry there
        if not takes.of_type(value):
            raise ArgumentTypeError(f"{name} takes {takes.words}, got {_described(value)}")
        if not takes.valid(value) and takes.refused:
            raise ArgumentValueError(f"{name}={_shown(value)} is not supported: {takes.refused}")
        if not takes.valid(value):
            raise ArgumentValueError(f"{name} takes {takes.words}, got {_described(value)}")


def _described(value: Any) -> str:
    return f"{type(value).__name__} {_shown(value)}"


def _shown(value: Any) -> str:
    text = repr(redact(value))  # a key or a URL's password is never echoed
    return text if len(text) <= 60 else text[:57] + "..."
