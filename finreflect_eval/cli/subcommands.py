"""Each subcommand's parser: its arguments and the command (in `commands`) that it runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from finreflect_eval.cli import commands as handlers
from finreflect_eval.cli.options import (
    add_cache,
    add_failure_policy,
    add_grounding_cascade,
    add_hub_logging,
    add_include_path,
    add_judges,
    add_leaderboard_folder,
    add_run_folders,
    add_scoring_options,
    add_task_selection,
    add_verbosity,
    hub_repo_id,
    positive_int,
)
from finreflect_eval.cli.run_options import add_run_arguments


class Commands:
    """Subcommand parsers that all take `--verbosity` (before or after the subcommand)."""

    def __init__(self, subparsers: argparse._SubParsersAction) -> None:
        self.subparsers = subparsers

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """A subcommand's parser, which `parse_args` finds as `args.parser`."""
        parser = self.subparsers.add_parser(name, **kwargs)
        add_verbosity(parser, default=argparse.SUPPRESS)
        parser.set_defaults(parser=parser)  # the innermost subcommand's parser wins
        return parser


def add_run(commands: Commands) -> None:
    """`run`: extract, judge and score."""
    run = commands.add_parser(
        "run", help="extract → judge → score in one command (results, samples, review queue)"
    )
    add_run_arguments(run)
    add_judges(run)
    add_grounding_cascade(run)
    add_qa(run)
    add_failure_policy(run, scoring=True)
    add_scoring_options(run)
    add_hub_logging(run)
    run.set_defaults(func=handlers.run)


def add_extract(commands: Commands) -> None:
    """`extract`: the candidate model's predictions only."""
    extract = commands.add_parser(
        "extract", help="run a candidate model over the benchmark spans (all modes)"
    )
    add_run_arguments(extract)
    add_failure_policy(extract, scoring=False)
    extract.set_defaults(func=handlers.extract)


def add_judge(commands: Commands) -> None:
    """`judge`: a panel's votes on a saved run."""
    judge = commands.add_parser(
        "judge", help="add a judge panel's votes to saved extractions (resumable, cached)"
    )
    add_run_folders(judge)
    add_judges(judge)
    add_grounding_cascade(judge)
    add_cache(judge, "the one the extraction used")
    add_include_path(judge)
    judge.add_argument(
        "--check",
        action="store_true",
        help="a dry run of the judging: check the panel, its models and endpoints, the run "
        "folder, and print the plan of the judges' calls, or one line per unmet need; no model "
        "runs and no weight is downloaded",
    )
    judge.set_defaults(func=handlers.judge)


def add_downstream(commands: Commands) -> None:
    """`downstream`: the multi-hop QA stage on a judged run."""
    downstream = commands.add_parser(
        "downstream",
        help="answer a run's multi-hop questions from the graph its triples make (its "
        "downstream tasks: resumable, cached); then `score`",
    )
    add_run_folders(downstream)
    add_judges(downstream)
    add_qa(downstream)
    add_cache(downstream, "the one the extraction used")
    add_include_path(downstream)
    downstream.set_defaults(func=handlers.downstream)


def add_qa(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--qa",
        metavar="NAME|FILE",
        help="the QA model of the downstream tasks (a tasks/qa/ name or a QA model YAML file; "
        "default: each task's own, `reference` for finreflect_multihop)",
    )


def add_score(commands: Commands) -> None:
    """`score`: the results from a judged run."""
    score = commands.add_parser(
        "score", help="recompute every score from judged samples (no model)"
    )
    add_run_folders(score)
    score.add_argument(
        "--judges", help="the panel whose votes to score, by name or its file (default: the latest)"
    )
    add_failure_policy(score, scoring=True)
    add_scoring_options(score)
    add_hub_logging(score)
    score.set_defaults(func=handlers.score)


def add_upgrade(commands: Commands) -> None:
    """`upgrade`: an older version's run folder."""
    upgrade = commands.add_parser(
        "upgrade", help="convert a run folder written by an older finreflect-eval"
    )
    upgrade.add_argument("folder", type=Path, metavar="DIR", help="the run folder")
    add_include_path(upgrade)
    upgrade.set_defaults(func=handlers.upgrade)


def add_task_commands(commands: Commands) -> None:
    """`tasks list` and `tasks validate`, then lm-eval's spellings of the two: `ls`, `validate`."""
    tasks = commands.add_parser("tasks", help="list and validate tasks")
    actions = Commands(tasks.add_subparsers(dest="tasks_command", required=True, metavar="ACTION"))
    _add_listing(actions.add_parser("list", help="tasks and groups with mode and version"))
    _add_validation(
        actions.add_parser(
            "validate", help="check YAML, fields, schema and that prompts render on a sample span"
        )
    )
    listing = commands.add_parser("ls", help="`tasks list`, as lm-eval's `ls` [WHAT]")
    listing.add_argument(
        "what",
        nargs="?",
        choices=("tasks", "groups", "subtasks", "tags"),
        help="tasks: all (default); groups; subtasks: the tasks only; tags: each with its tasks",
    )
    _add_listing(listing)
    _add_validation(commands.add_parser("validate", help="`tasks validate` (lm-eval's spelling)"))


def _add_listing(parser: argparse.ArgumentParser) -> None:
    add_include_path(parser)
    parser.set_defaults(func=handlers.tasks_list, what="tasks")


def _add_validation(parser: argparse.ArgumentParser) -> None:
    add_include_path(parser)
    add_task_selection(parser, None, "only these tasks, groups or tags (default: all)")
    parser.set_defaults(func=handlers.tasks_validate)


def add_submit(commands: Commands) -> None:
    """`submit`: a verified run into the leaderboard."""
    submit = commands.add_parser(
        "submit", help="verify a run (every score recomputed) and add it to the leaderboard"
    )
    submit.add_argument(
        "results", type=Path, metavar="RESULTS", help="results_*.json, its run folder, or a bundle"
    )
    add_leaderboard_folder(submit)
    submit.add_argument("--hub-repo", help="open a pull request on this Hub dataset repo instead")
    submit.add_argument("--dry-run", action="store_true", help="verify only; write nothing")
    submit.set_defaults(func=handlers.submit)


def add_view(commands: Commands) -> None:
    """`view`: a run's HTML report, or two runs side by side."""
    view = commands.add_parser(
        "view", help="write a static report of a run (or two side by side) to look at"
    )
    view.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="a run folder (its newest manifest), a manifest_*.json or a results_*.json; a "
        "second run: the two side by side (they must have judged the same spans)",
    )
    view.add_argument(
        "--output",
        "-o",
        type=Path,
        metavar="DIR",
        help="report folder (default: RUN/report, or RUN/report-vs-<B's run id> for two runs); "
        "ready to serve as a Hugging Face static Space",
    )
    view.add_argument(
        "--judges",
        nargs="+",
        metavar="PANEL",
        help="the panel whose results to show (default: a results file's own, else the run's "
        "latest); a second one is run B's (to compare two panels: `view RUN RUN --judges X Y`)",
    )
    view.add_argument(
        "--push",
        metavar="ORG/NAME",
        type=hub_repo_id,
        help="then upload the report to this Hugging Face Space (created as a static Space if "
        "needed; your token: HF_TOKEN or `hf auth login`)",
    )
    view.set_defaults(func=handlers.view)


def add_audit_judges(commands: Commands) -> None:
    """`audit-judges`: a panel against gold labels, and its bias probes."""
    audit = commands.add_parser(
        "audit-judges", help="judge accuracy against gold labels, and measured bias probes"
    )
    add_judges(audit, required=True)
    audit.add_argument("--dataset", default="sample", help="a dataset with gold judgments")
    audit.add_argument("--split", default="test", help="default: test")
    audit.add_argument("--limit", type=positive_int, help="first N spans")
    audit.add_argument(
        "--probes",
        default="all",
        help="all, or a comma list of: position, span_order, verbosity, leniency, world_knowledge",
    )
    audit.add_argument(
        "--task", default="finreflect_single_pass", help="whose judge prompts to use"
    )
    audit.add_argument("--seed", type=int, default=1234, help="probe generation seed")
    audit.add_argument("--output-path", type=Path, default=Path("results"), help="default: results")
    add_cache(audit, "OUTPUT_PATH/cache.sqlite")
    add_include_path(audit)
    audit.set_defaults(func=handlers.audit_judges)


def add_leaderboard(commands: Commands) -> None:
    """`leaderboard build` and `leaderboard pin-dataset`."""
    board = commands.add_parser("leaderboard", help="build the static leaderboard")
    actions = Commands(board.add_subparsers(dest="board_command", required=True, metavar="ACTION"))
    _add_leaderboard_build(
        actions.add_parser(
            "build",
            help="render index.html, leaderboard.json, leaderboard.csv and each entry's report",
        )
    )
    _add_leaderboard_audit(
        actions.add_parser(
            "audit",
            help="re-judge a seeded sample of a stored entry's items with the maintainers' panel "
            "and write its audit file (--calibrate: measure the panel's re-run agreement first)",
        )
    )
    _add_pin_dataset(
        actions.add_parser(
            "pin-dataset",
            help="pin the official data version: record a commit's fingerprint and span lists in "
            "datasets.json (reads the data from the Hub), then rebuild the page",
        )
    )


def _add_leaderboard_build(build: argparse.ArgumentParser) -> None:
    add_leaderboard_folder(build)
    build.add_argument(
        "--check",
        action="store_true",
        help="write nothing; fail when an entry no longer verifies or a generated file is stale",
    )
    build.set_defaults(func=handlers.leaderboard_build)


def _add_leaderboard_audit(audit: argparse.ArgumentParser) -> None:
    audit.add_argument(
        "entry",
        type=Path,
        metavar="ENTRY",
        help="a stored entry: LEADERBOARD/submissions/<org__model>/<run-id>.json",
    )
    add_judges(audit, required=True)
    audit.add_argument(
        "--size",
        type=positive_int,
        default=200,
        help="items to re-judge, stratified by task and criterion (default: 200)",
    )
    audit.add_argument(
        "--calibrate",
        action="store_true",
        help="run the panel twice without a cache on the entry's sample and record each "
        "judge's re-run agreement: the tolerance the panel's audits are held to",
    )
    add_cache(audit, "~/.cache/finreflect-eval/audits.sqlite")
    add_leaderboard_folder(audit)
    audit.set_defaults(func=handlers.leaderboard_audit)


def _add_pin_dataset(pin: argparse.ArgumentParser) -> None:
    pin.add_argument(
        "dataset_id", metavar="ID", help="the dataset's Hub id, as datasets.json names it"
    )
    pin.add_argument(
        "--revision", required=True, help="a commit, or a branch or tag (pins its commit)"
    )
    add_leaderboard_folder(pin)
    pin.add_argument(
        "--dataset-name", help="only the entries of this config (lm-eval's dataset_name)"
    )
    pin.set_defaults(func=handlers.leaderboard_pin_dataset)


def add_dataset(commands: Commands) -> None:
    """`dataset info`, `dataset build` and `dataset push`."""
    dataset = commands.add_parser("dataset", help="inspect, build and publish benchmark data")
    actions = Commands(
        dataset.add_subparsers(dest="dataset_command", required=True, metavar="ACTION")
    )
    _add_dataset_info(
        actions.add_parser(
            "info", help="counts per config, split, company and section of a dataset"
        )
    )
    _add_dataset_build(
        actions.add_parser(
            "build", help="chunk 10-K filings (HTML, text, markdown) into a dataset folder"
        )
    )
    _add_dataset_push(
        actions.add_parser("push", help="upload a dataset folder to the Hugging Face Hub")
    )


def _add_dataset_info(info: argparse.ArgumentParser) -> None:
    info.add_argument(
        "--dataset", default="sample", help="'sample', a local folder or file, or a Hub id"
    )
    info.add_argument("--split", help="one split only (default: all)")
    info.add_argument("--revision", help="Hub revision (branch, tag or commit)")
    info.add_argument(
        "--task",
        default="finreflect_single_pass",
        help="also show this task's slice of the data (default: the official one)",
    )
    add_include_path(info)
    info.set_defaults(func=handlers.dataset_info)


def _add_dataset_build(build: argparse.ArgumentParser) -> None:
    build.add_argument("files", nargs="+", type=Path, metavar="FILE", help="10-K filings")
    build.add_argument("--output", required=True, type=Path, help="dataset folder to write")
    build.add_argument("--max-tokens", type=positive_int, default=2048, help="default: 2048")
    build.add_argument(
        "--tokenizer",
        default="regex",
        help="token counter: 'regex' (fast, offline; default) or a Hugging Face tokenizer "
        "name or path",
    )
    build.add_argument("--ticker", help="default: from the file name (AMZN_10-K-2025-02-07.txt)")
    build.add_argument(
        "--fiscal-year", type=int, help="default: from the cover page, else the file name"
    )
    build.add_argument("--split", default="test", help="split name to write (default: test)")
    build.add_argument(
        "--replace",
        action="store_true",
        help="overwrite a dataset finreflect-eval wrote in --output (otherwise refused); a "
        "folder holding any other file is always refused",
    )
    build.set_defaults(func=handlers.dataset_build)


def _add_dataset_push(push: argparse.ArgumentParser) -> None:
    push.add_argument("folder", type=Path, help="dataset folder (from `dataset build`)")
    push.add_argument(
        "--repo-id", required=True, type=hub_repo_id, help="Hub dataset repo, e.g. org/name"
    )
    push.add_argument("--private", action="store_true", help="create the repo as private")
    push.set_defaults(func=handlers.dataset_push)
