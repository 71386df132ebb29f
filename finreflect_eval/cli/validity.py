"""`validity`: the leaderboard's main scores against its entries' downstream measures."""

from __future__ import annotations

import argparse
import json

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.cli.options import add_leaderboard_folder
from finreflect_eval.cli.subcommands import Commands


def add_validity(commands: Commands) -> None:
    """`validity`."""
    validity = commands.add_parser(
        "validity",
        help="Spearman's ρ of the board's main scores against its entries' downstream "
        "(multi-hop QA) measures, with bootstrap intervals (every entry verified first)",
    )
    add_leaderboard_folder(validity)
    validity.add_argument(
        "--json", action="store_true", help="print the JSON instead of the Markdown table"
    )
    validity.set_defaults(func=validity_command)


def validity_command(args: argparse.Namespace) -> None:
    from finreflect_eval.leaderboard.entries import load_entries
    from finreflect_eval.leaderboard.validity import markdown, validity

    if not (args.leaderboard / "submissions").is_dir():
        raise FinReflectError(f"{args.leaderboard}: no leaderboard here (no submissions/ folder)")
    report = validity(load_entries(args.leaderboard, "submissions"))
    if args.json:
        print(json.dumps(report.as_json(), indent=2, ensure_ascii=False))
    else:
        print(markdown(report), end="")
