"""The command line's parser: the top-level options and the subcommands in `--help` order
(each built in `subcommands`), and the reading of a command line in either spelling."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence

from finreflect_eval._util.version import __version__
from finreflect_eval.cli import graph, review, subcommands, validity
from finreflect_eval.cli.lm_eval_forms import (
    INSTEAD,
    environment_level,
    normalise,
    spelled_like,
    typed_options,
)
from finreflect_eval.cli.options import add_verbosity


def build_parser() -> argparse.ArgumentParser:
    """The `finreflect-eval` parser, with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="finreflect-eval",
        description="Benchmark KG extraction from 10-K filings with a panel of LLM judges. "
        "Every option also takes lm-eval's spelling (--model_args, --output_path), and a command "
        "line that starts with an option runs `run` (as lm-eval's does).",
        epilog="Exit codes: 0 success, 1 a problem with the input or the environment (one line "
        "says which), 2 a usage error, 3 an internal error, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_verbosity(parser)
    parser.set_defaults(parser=parser)
    commands = subcommands.Commands(
        parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    )
    subcommands.add_run(commands)
    subcommands.add_extract(commands)
    subcommands.add_judge(commands)
    subcommands.add_downstream(commands)
    subcommands.add_score(commands)
    subcommands.add_upgrade(commands)
    subcommands.add_task_commands(commands)  # tasks, ls, validate
    subcommands.add_submit(commands)
    subcommands.add_view(commands)
    review.add_review(commands)
    graph.add_graph(commands)
    subcommands.add_audit_judges(commands)
    subcommands.add_leaderboard(commands)
    validity.add_validity(commands)
    subcommands.add_dataset(commands)
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line, read as our own or as lm-eval's (`lm_eval_forms.normalise`). An unknown
    option is a usage error naming the closest one, or, for lm-eval's, what to use instead. With
    no `--verbosity`, the level is lm-eval's `LMEVAL_LOG_LEVEL`, else INFO."""
    parser = build_parser()
    normal, written = normalise(argv)
    args, unknown = parser.parse_known_args(normal)
    if unknown:
        flag = unknown[0].partition("=")[0]
        known = {
            option[2:]: option
            for option in args.parser._option_string_actions
            if option.startswith("--") and option not in ("--help", "--verbose")
        }
        close = difflib.get_close_matches(flag[2:], known, n=1, cutoff=0.6)
        close = [known[name] for name in close]
        user = written.get(flag, flag)
        if flag in INSTEAD:
            hint = f": {INSTEAD[flag]}"
        elif close:
            hint = f" (did you mean {spelled_like(close[0], user)}?)"
        else:
            hint = ""
        args.parser.error(f"unrecognized argument {user}{hint}")
    if args.verbosity is None:  # no --verbosity given
        try:
            args.verbosity = environment_level()
        except ValueError as exc:
            parser.error(str(exc))
    args.typed = typed_options(argv, args.parser)
    return args
