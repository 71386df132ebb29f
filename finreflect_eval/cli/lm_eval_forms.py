"""lm-eval's ways of writing a command line (0.4.13), read into ours: underscore spellings of
options, `-v LEVEL`, no subcommand (then `run`), `--tasks` given again, its `--seed` form and
`LMEVAL_LOG_LEVEL`; and, for each of its `run` flags we do not take, what to use instead."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

# lm-eval's run flags with no counterpart here, and what to use instead (checked against the
# parsers by tests/cli/test_lm_eval_cli.py).
_EXTRACT = "for the predictions only, run `finreflect-eval extract`"
_CONFIG = "give the options on the command line (or call simple_evaluate from Python)"
_WRITE_OUT = "the samples files hold every rendered prompt (`arguments`, as lm-eval logs them)"
_TRACKERS = "results go to OUTPUT_PATH, and with --hf-hub-log-args to the Hub"
INSTEAD = {
    "--predict-only": _EXTRACT,
    "-x": _EXTRACT,
    "--config": _CONFIG,
    "-C": _CONFIG,
    "--write-out": _WRITE_OUT,
    "-w": _WRITE_OUT,
    "--wandb-args": _TRACKERS,
    "--wandb-config-args": _TRACKERS,
    "--trackio-args": _TRACKERS,
    "--cache-requests": "prompts are rendered afresh; every model answer is cached (--cache, or "
    "--no-cache to ask again)",
    "--check-integrity": "to check tasks, run `finreflect-eval validate --tasks ...`",
    "--show-config": "the results file holds each task's full config (`configs`)",
    "--confirm-run-unsafe-code": "no task here runs model-written code: leave the flag out",
    "--metadata": "task settings live in the task YAML (--include-path)",
    "--dtype": "dtype is a model arg: --model-args dtype=bfloat16",
}
# An option token (not a value that happens to start with dashes, like "--be brief").
OPTION = re.compile(r"^--[A-Za-z0-9][\w-]*(=.*)?$", re.S)
GLOBAL_OPTIONS = ("--verbosity", "-v", "--verbose")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def normalise(argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """`argv` in our spelling: underscores in options become dashes (`--model_args`), lm-eval's
    `-v LEVEL` is `--verbosity LEVEL`, and a command line that starts with an option gets `run`
    (as lm-eval's CLI does). Also each option's spelling as typed (ours → the user's), to answer
    in theirs."""
    written: dict[str, str] = {}
    normal: list[str] = []
    argv = list(argv)
    for index, token in enumerate(argv):
        if token == "--":
            normal += argv[index:]
            break
        if OPTION.match(token):  # an option, not a value that starts with dashes
            flag, sep, value = token.partition("=")
            ours = "--" + flag[2:].replace("_", "-")
            written[ours] = flag
            token = ours + sep + value
        elif token == "-v" and index + 1 < len(argv) and argv[index + 1].upper() in LEVELS:
            token = "--verbosity"  # lm-eval's -v takes a level
        normal.append(token)
    start = 0
    while start < len(normal) and normal[start].partition("=")[0] in GLOBAL_OPTIONS:
        start += 2 if normal[start] == "--verbosity" else 1
    first = normal[start] if start < len(normal) else ""
    if first.startswith("-") and first not in ("-h", "--help", "--version"):
        normal.insert(start, "run")
    return normal, written


def spelled_like(option: str, written: str) -> str:
    """`option` in the user's style: underscores if they wrote them."""
    return option.replace("-", "_").replace("__", "--", 1) if "_" in written else option


def typed_options(argv: Sequence[str], parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each given option's destination → the option as the user first typed it (`--model_args`,
    `-a`): messages about its value name it in their words."""
    typed: dict[str, str] = {}
    for token in argv:
        flag = token.partition("=")[0]
        ours = "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag
        action = parser._option_string_actions.get(ours)
        if action is not None:
            typed.setdefault(action.dest, flag)
    return typed


def span_limit(value: str) -> int | float:
    """`--limit`: a count of spans, or (lm-eval) a fraction of them between 0 and 1."""
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if 0 < number < 1:
        return number
    if not number >= 1 or not number.is_integer():
        raise argparse.ArgumentTypeError(
            f"must be a positive integer or a fraction between 0 and 1, got {value}"
        )
    return int(number)


def spans_by_task(value: str) -> dict[str, list[int | str]]:
    """lm-eval's `--samples`: a JSON object (or a JSON file's path) mapping each task to the
    spans to run, by index in its span list or by span id."""
    text = value
    if not value.lstrip().startswith(("{", "[")):
        try:
            text = Path(value).read_text(encoding="utf-8")
        except OSError as exc:
            raise argparse.ArgumentTypeError(
                f"not a JSON object nor a readable file: {value} ({exc.strerror})"
            ) from exc
    try:
        chosen = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc})") from exc
    if not isinstance(chosen, dict) or not all(isinstance(v, list) for v in chosen.values()):
        raise argparse.ArgumentTypeError(
            'must map each task to a list of span indices or ids, e.g. {"TASK": [0, 5]}'
        )
    return chosen


def boolean(value: str) -> bool:
    """A flag's value as lm-eval reads it (`--fewshot_as_multiturn false`)."""
    return value.lower() in ("true", "1", "yes")


def environment_level() -> str:
    """The log level lm-eval reads from `LMEVAL_LOG_LEVEL` (INFO when unset or empty); a value
    that names no level is a ValueError saying so."""
    value = os.environ.get("LMEVAL_LOG_LEVEL", "").strip()
    if not value:
        return "INFO"
    if not isinstance(logging.getLevelName(value.upper()), int):  # as lm-eval tells a level
        raise ValueError(
            f"LMEVAL_LOG_LEVEL={value} is not a log level (use one of {', '.join(LEVELS)})"
        )
    return value.upper()


class SplitList(argparse.Action):
    """A list option that adds up when given again, commas splitting items (lm-eval's `--tasks a
    --tasks b,c` is a, b, c); the first use replaces the default."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        items = getattr(namespace, self.dest, None)
        items = [] if items is None or items is self.default else items
        # Empty items stay, as in lm-eval: `run_config` refuses a list of nothing else.
        added = [item for value in values for item in value.split(",")]
        setattr(namespace, self.dest, [*items, *added])


class Seeds(NamedTuple):
    """lm-eval's four seeds; None leaves that generator unseeded."""

    random: int | None  # Python's `random`
    numpy: int | None
    torch: int | None  # ours: the generation seed
    fewshot: int | None  # the few-shot sampler


DEFAULT_SEEDS = Seeds(0, 1234, 1234, 1234)  # lm-eval's


def seeds(value: str) -> Seeds:
    """`--seed`: one value for all four, or random,numpy,torch[,fewshot] (a missing few-shot
    seed is lm-eval's default); each an integer or None."""
    parts = value.split(",")
    if len(parts) not in (1, 3, 4):
        raise argparse.ArgumentTypeError(
            f"one seed, or random,numpy,torch[,fewshot] (3 or 4 values), got {value}"
        )
    numbers = [_seed(part, value) for part in parts]
    if len(numbers) == 1:
        numbers *= len(DEFAULT_SEEDS)
    return Seeds(*numbers, *DEFAULT_SEEDS[len(numbers) :])


def _seed(part: str, value: str) -> int | None:
    part = part.strip()
    if part.lower() == "none":
        return None
    try:
        return int(part)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"each seed is an integer or None, got {part!r} in {value}"
        ) from None
