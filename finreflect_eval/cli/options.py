"""Option groups that several subcommands share (log level, tasks, task folders, the response
cache, the judge panel, run folders, the leaderboard folder, Hub logging, the failure policy),
and the value types they check."""

from __future__ import annotations

import argparse
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hub import check_repo_id
from finreflect_eval.cli.lm_eval_forms import SplitList


def add_verbosity(parser: argparse.ArgumentParser, default: object = None) -> None:
    """`--verbosity LEVEL` and `-v`; a subcommand's default (SUPPRESS) keeps the top's value."""
    parser.add_argument(
        "--verbosity",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        default=default,  # None: not given (then $LMEVAL_LOG_LEVEL, else INFO)
        help="log level (default: $LMEVAL_LOG_LEVEL, as lm-eval reads it, else INFO); DEBUG "
        "also prints the traceback of an error",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="store_const",
        const="DEBUG",
        default=default,
        help="same as --verbosity DEBUG",
    )


def add_task_selection(
    parser: argparse.ArgumentParser, default: list[str] | None, what: str
) -> None:
    """`--tasks`, which adds up when given again (as lm-eval's); `what` opens its help."""
    parser.add_argument(
        "--tasks",
        "-t",
        nargs="+",
        action=SplitList,  # given again, it adds (as lm-eval's)
        default=default,
        metavar="TASK",
        help=f"{what}: names or task YAML files (a file's folder joins the include paths), "
        "space or comma separated; repeatable",
    )


def add_include_path(parser: argparse.ArgumentParser) -> None:
    """`--include-path`: more task folders."""
    parser.add_argument(
        "--include-path",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="more task folders (repeatable; later ones override)",
    )


def add_cache(parser: argparse.ArgumentParser, default: str) -> None:
    """`--cache FILE` or `--no-cache`; `default` says, in the help, which file is used."""
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache",
        "--use-cache",
        "-c",
        type=Path,
        help=f"SQLite response cache file (default: {default})",
    )
    cache.add_argument("--no-cache", action="store_true", help="call the models for everything")


def add_judges(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """`--judges PANEL` and `--judge-endpoints`; not required: the tasks name the panel."""
    parser.add_argument(
        "--judges",
        required=required,
        help="judge panel: paper, small, demo (offline smoke panel) or a panel YAML file"
        + ("" if required else " (default: the tasks' `judges` field)"),
    )
    parser.add_argument(
        "--judge-endpoints",
        metavar="NAME=URL,...",
        help="serve these judges of the panel at OpenAI-compatible endpoints (e.g. `vllm serve`),"
        " which then run concurrently: qwen3-235b-a22b=http://node1:8000/v1,...",
    )


def add_run_folders(parser: argparse.ArgumentParser) -> None:
    """`--samples DIR...`: the saved run (or its shards) that `judge` and `score` read."""
    parser.add_argument(
        "--samples",
        required=True,
        nargs="+",
        type=Path,
        metavar="DIR",
        help="a run folder (OUTPUT_PATH/MODEL; its newest manifest) or a manifest_*.json file; "
        "or every shard's folder, merged into their parent folder",
    )


def add_leaderboard_folder(parser: argparse.ArgumentParser) -> None:
    """`--leaderboard DIR`."""
    parser.add_argument(
        "--leaderboard",
        type=Path,
        default=Path("leaderboard"),
        metavar="DIR",
        help="leaderboard folder (default: leaderboard)",
    )


def add_hub_logging(parser: argparse.ArgumentParser) -> None:
    """lm-eval's `--hf-hub-log-args`: also push the results to the Hub."""
    parser.add_argument(
        "--hf-hub-log-args",
        nargs="+",
        action="extend",
        metavar="ARGS",
        help="also push the results and samples to a Hub dataset repo, as lm-eval does: "
        "hub_results_org=ORG,details_repo_name=NAME,push_results_to_hub=True,"
        "push_samples_to_hub=True,public_repo=False",
    )


def add_failure_policy(parser: argparse.ArgumentParser, scoring: bool) -> None:
    """How many failed calls stop a run: the candidate's, and when `scoring`, the judges'."""
    parser.add_argument(
        "--max-invalid-share",
        type=_share,
        default=0.2,
        metavar="S",
        help="stop when more than this share of a task's spans gave invalid output after "
        "retries (default 0.2); a span failed in transport always stops the run",
    )
    if scoring:
        parser.add_argument(
            "--max-judge-failure-share",
            type=_share,
            default=0.2,
            metavar="S",
            help="stop scoring when a judge failed (in transport, or with invalid output after "
            "retries) more than this share of its calls on a task (default 0.2)",
        )
        parser.add_argument(
            "--allow-failures",
            action="store_true",
            help="score despite failed calls; the results say so (never a leaderboard entry)",
        )


def add_scoring_options(parser: argparse.ArgumentParser) -> None:
    """`--bootstrap_iters N`, lm-eval's flag: the resamples of the intervals (0: none); and
    `--prices FILE`, the price table of the cost block."""
    parser.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help="a price table (YAML: currency, and per model id input/output/cached prices per "
        "million tokens, device_hour): the results' cost block then counts the money too",
    )
    parser.add_argument(
        "--bootstrap_iters",
        "--bootstrap-iters",
        type=non_negative_int,
        metavar="N",
        help="resamples of the filing bootstrap behind every interval and stderr (default: "
        "the leaderboard's minimum, 1000; 0: no intervals, as lm-eval)",
    )


def _share(value: str) -> float:
    # argparse names this function in the message for a value that is no number
    share = float(value)
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return share


def hub_repo_id(value: str) -> str:
    """A Hub repo id (`org/name`), checked when the command line is read."""
    try:
        return check_repo_id(value, "repo id")
    except FinReflectError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("repo id: ")) from None


def positive_int(value: str) -> int:
    """An option's value that must be 1 or more."""
    return _at_least(value, 1, "a positive integer")


def non_negative_int(value: str) -> int:
    """An option's value that must be 0 or more."""
    return _at_least(value, 0, "0 or more")


def _at_least(value: str, least: int, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = least - 1
    if number < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return number


def add_grounding_cascade(parser: argparse.ArgumentParser) -> None:
    """`--skip-judging-ungrounded`: the grounding cascade (`pipeline.cascade`)."""
    parser.add_argument(
        "--skip-judging-ungrounded",
        action="store_true",
        help="send the judges only triples whose numbers, amounts and dates their span holds; "
        "the others score 0 by rule (recorded in the results; default: every triple judged, as "
        "the paper)",
    )
