"""The command line's arguments: one parser, subcommands with shared option groups."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from pathlib import Path

from finreflect_eval import __version__
from finreflect_eval.cli import commands as handlers
from finreflect_eval.cli.lm_eval_forms import (
    INSTEAD,
    SplitList,
    boolean,
    environment_level,
    normalise,
    seeds,
    span_limit,
    spans_by_task,
    spelled_like,
    typed_options,
)
from finreflect_eval.errors import FinReflectError


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        "-M",
        "-m",
        default="hf",
        help="HF id (ORG/NAME[@REV]), local path, .gguf, alias or name; or, lm-eval's form, a "
        "backend name (default hf) with the model in --model-args pretrained=ORG/NAME",
    )
    parser.add_argument(
        "--backend", help="hf (default), vllm, openai, scripted; given: --model is the model"
    )
    parser.add_argument(
        "--model-args",
        "-a",
        nargs="+",
        action="extend",
        metavar="ARGS",
        help="backend arguments: k=v,k2=v2 (or k=v k2=v2, or a JSON object); repeatable, "
        "merged key by key (a key given two values is refused)",
    )
    _add_tasks(parser, ["finreflect"], "tasks, groups or tags (default: finreflect)")
    parser.add_argument("--dataset", help="'sample', a folder/file or a Hub id (default: task's)")
    parser.add_argument(
        "--dataset-revision",
        metavar="REV",
        help="the Hub dataset's branch, tag or commit (default: the task's dataset_revision); "
        "the run records the commit it read",
    )
    parser.add_argument(
        "--limit",
        "-L",
        type=span_limit,
        help="first N spans of each task (lm-eval's meaning: in dataset order, after the "
        "task's slice and --sections), or a fraction of them (0.1)",
    )
    parser.add_argument(
        "--sections",
        nargs="+",
        action=SplitList,
        metavar="NAMES",
        help="only the spans of these 10-K sections: item1,item1a,item7,... (front: the text "
        "before Item 1); see `dataset info`",
    )
    parser.add_argument(
        "--samples",
        "-E",
        type=spans_by_task,
        metavar="JSON",
        help="lm-eval's: the spans to run per task, by index or span id: '{\"TASK\": [0, 5]}' "
        "or a JSON file (not with --limit)",
    )
    parser.add_argument(
        "--output-path",
        "-o",
        type=Path,
        default=Path("results"),
        help="results folder (a .json path: its folder); default: results",
    )
    _add_cache(parser, "OUTPUT_PATH/cache.sqlite")
    _add_include_path(parser)
    parser.add_argument(
        "--seed",
        type=seeds,
        metavar="random,numpy,torch[,fewshot]",
        help="lm-eval's seeds, or one value for all four; None leaves one unseeded; torch is "
        "the generation seed (default: 0, 1234, the tasks' own, 1234)",
    )
    parser.add_argument(
        "--gen-kwargs",
        nargs="+",
        action="extend",
        metavar="KWARGS",
        help="overrides generation_kwargs (max_gen_toks, temperature, seed, top_p, top_k, "
        "do_sample), e.g. max_gen_toks=512,temperature=0; repeatable, as --model-args",
    )
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="run shard I of N (every N-th span from the I-th) into OUTPUT_PATH/MODEL/"
        "shard-I-of-N; judge or score all shards' folders together",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="a dry run: check what the run needs (tasks, data, models and access to them, disk, "
        "output folder) and print its plan, or one line per unmet need; no model runs and no "
        "weight is downloaded",
    )
    lm_eval = parser.add_argument_group(
        "lm-eval's flags", "each becomes a model arg or a task field for this run"
    )
    lm_eval.add_argument(
        "--batch-size",
        "-b",
        type=_batch_size,
        help="N, or auto (hf: the largest that fits; lm-eval's auto:N is read as auto)",
    )
    lm_eval.add_argument(
        "--max-batch-size", type=_positive_int, help="where --batch-size auto starts (hf)"
    )
    lm_eval.add_argument("--device", help="hf: cuda, cuda:0, cpu, mps")
    lm_eval.add_argument("--revision", help="the model's Hub revision (branch, tag or commit)")
    lm_eval.add_argument(
        "--trust-remote-code", action="store_const", const=True, help="run the model repo's code"
    )
    lm_eval.add_argument(
        "--num-fewshot", "-f", type=_count, help="few-shot examples in every extraction prompt"
    )
    lm_eval.add_argument(
        "--system-instruction", help="text put before every extraction prompt's system part"
    )
    lm_eval.add_argument(
        "--apply-chat-template",
        nargs="?",
        const=True,
        metavar="NAME",
        help="accepted: a model's chat template is always applied when it has one",
    )
    lm_eval.add_argument(
        "--fewshot-as-multiturn",
        nargs="?",
        const=True,
        type=boolean,
        metavar="BOOL",
        help="no effect (a warning): our few-shot examples are part of the prompt template",
    )
    lm_eval.add_argument(
        "--log-samples", "-s", action="store_true", help="accepted: samples are always logged"
    )


def _add_cache(parser: argparse.ArgumentParser, default: str) -> None:
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache",
        "--use-cache",
        "-c",
        type=Path,
        help=f"SQLite response cache file (default: {default})",
    )
    cache.add_argument("--no-cache", action="store_true", help="call the models for everything")


def _add_tasks(parser: argparse.ArgumentParser, default: list[str] | None, what: str) -> None:
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


VALIDATE = "check YAML, fields, schema and that prompts render on a sample span"


def _add_listing(parser: argparse.ArgumentParser) -> None:
    _add_include_path(parser)
    parser.set_defaults(func=handlers.tasks_list, what="tasks")


def _add_validation(parser: argparse.ArgumentParser) -> None:
    _add_include_path(parser)
    _add_tasks(parser, None, "only these tasks, groups or tags (default: all)")
    parser.set_defaults(func=handlers.tasks_validate)


def _add_include_path(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--include-path",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="more task folders (repeatable; later ones override)",
    )


def _add_leaderboard(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--leaderboard",
        type=Path,
        default=Path("leaderboard"),
        metavar="DIR",
        help="leaderboard folder (default: leaderboard)",
    )


def _add_judges(parser: argparse.ArgumentParser, required: bool = False) -> None:
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


def _add_hub_logging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hf-hub-log-args",
        nargs="+",
        action="extend",
        metavar="ARGS",
        help="also push the results and samples to a Hub dataset repo, as lm-eval does: "
        "hub_results_org=ORG,details_repo_name=NAME,push_results_to_hub=True,"
        "push_samples_to_hub=True,public_repo=False",
    )


def _add_samples(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--samples",
        required=True,
        nargs="+",
        type=Path,
        metavar="DIR",
        help="a run folder (OUTPUT_PATH/MODEL; its newest manifest) or a manifest_*.json file; "
        "or every shard's folder, merged into their parent folder",
    )


class _Commands:
    """Subcommand parsers that all take `--verbosity` (before or after the subcommand)."""

    def __init__(self, subparsers: argparse._SubParsersAction) -> None:
        self.subparsers = subparsers

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        parser = self.subparsers.add_parser(name, **kwargs)
        _add_verbosity(parser, default=argparse.SUPPRESS)
        parser.set_defaults(parser=parser)  # the innermost subcommand's parser wins
        return parser


def _add_verbosity(parser: argparse.ArgumentParser, default: object = None) -> None:
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


def _add_failure_policy(parser: argparse.ArgumentParser, scoring: bool) -> None:
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


def _share(value: str) -> float:
    share = float(value)
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return share


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="finreflect-eval",
        description="Benchmark KG extraction from 10-K filings with a panel of LLM judges. "
        "Every option also takes lm-eval's spelling (--model_args, --output_path), and a command "
        "line that starts with an option runs `run` (as lm-eval's does).",
        epilog="Exit codes: 0 success, 1 a problem with the input or the environment (one line "
        "says which), 2 a usage error, 3 an internal error, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_verbosity(parser)
    parser.set_defaults(parser=parser)
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = _Commands(subcommands)

    run = commands.add_parser(
        "run", help="extract → judge → score in one command (results, samples, review queue)"
    )
    _add_run_arguments(run)
    _add_judges(run)
    _add_failure_policy(run, scoring=True)
    _add_hub_logging(run)
    run.set_defaults(func=handlers.run)

    extract = commands.add_parser(
        "extract", help="run a candidate model over the benchmark spans (all modes)"
    )
    _add_run_arguments(extract)
    _add_failure_policy(extract, scoring=False)
    extract.set_defaults(func=handlers.extract)

    judge = commands.add_parser(
        "judge", help="add a judge panel's votes to saved extractions (resumable, cached)"
    )
    _add_samples(judge)
    _add_judges(judge)
    _add_cache(judge, "the one the extraction used")
    _add_include_path(judge)
    judge.set_defaults(func=handlers.judge)

    score = commands.add_parser(
        "score", help="recompute every score from judged samples (no model)"
    )
    _add_samples(score)
    score.add_argument("--judges", help="the panel whose votes to score (default: the latest)")
    _add_failure_policy(score, scoring=True)
    _add_hub_logging(score)
    score.set_defaults(func=handlers.score)

    upgrade = commands.add_parser(
        "upgrade", help="convert a run folder written by an older finreflect-eval"
    )
    upgrade.add_argument("folder", type=Path, metavar="DIR", help="the run folder")
    _add_include_path(upgrade)
    upgrade.set_defaults(func=handlers.upgrade)

    tasks = commands.add_parser("tasks", help="list and validate tasks")
    tasks_commands = _Commands(
        tasks.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    )
    _add_listing(tasks_commands.add_parser("list", help="tasks and groups with mode and version"))
    _add_validation(tasks_commands.add_parser("validate", help=VALIDATE))
    # lm-eval's spellings of the two
    listing = commands.add_parser("ls", help="`tasks list`, as lm-eval's `ls` [WHAT]")
    listing.add_argument(
        "what",
        nargs="?",
        choices=("tasks", "groups", "subtasks", "tags"),
        help="tasks: all (default); groups; subtasks: the tasks only; tags: each with its tasks",
    )
    _add_listing(listing)
    _add_validation(commands.add_parser("validate", help="`tasks validate` (lm-eval's spelling)"))

    submit = commands.add_parser(
        "submit", help="verify a run (every score recomputed) and add it to the leaderboard"
    )
    submit.add_argument(
        "results", type=Path, metavar="RESULTS", help="results_*.json, its run folder, or a bundle"
    )
    _add_leaderboard(submit)
    submit.add_argument("--hub-repo", help="open a pull request on this Hub dataset repo instead")
    submit.add_argument("--dry-run", action="store_true", help="verify only; write nothing")
    submit.set_defaults(func=handlers.submit)

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
        help="then upload the report to this Hugging Face Space (created as a static Space if "
        "needed; your token: HF_TOKEN or `hf auth login`)",
    )
    view.set_defaults(func=handlers.view)

    audit = commands.add_parser(
        "audit-judges", help="judge accuracy against gold labels, and measured bias probes"
    )
    _add_judges(audit, required=True)
    audit.add_argument("--dataset", default="sample", help="a dataset with gold judgments")
    audit.add_argument("--split", default="test", help="default: test")
    audit.add_argument("--limit", type=_positive_int, help="first N spans")
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
    _add_cache(audit, "OUTPUT_PATH/cache.sqlite")
    _add_include_path(audit)
    audit.set_defaults(func=handlers.audit_judges)

    board = commands.add_parser("leaderboard", help="build the static leaderboard")
    board_commands = _Commands(
        board.add_subparsers(dest="board_command", required=True, metavar="ACTION")
    )
    sub = board_commands.add_parser(
        "build", help="render index.html, leaderboard.json, leaderboard.csv and each entry's report"
    )
    _add_leaderboard(sub)
    sub.add_argument(
        "--check",
        action="store_true",
        help="write nothing; fail when an entry no longer verifies or a generated file is stale",
    )
    sub.set_defaults(func=handlers.leaderboard_build)
    pin = board_commands.add_parser(
        "pin-dataset",
        help="pin the official data version: record a commit's fingerprint and span lists in "
        "datasets.json (reads the data from the Hub), then rebuild the page",
    )
    pin.add_argument(
        "dataset_id", metavar="ID", help="the dataset's Hub id, as datasets.json names it"
    )
    pin.add_argument(
        "--revision", required=True, help="a commit, or a branch or tag (pins its commit)"
    )
    _add_leaderboard(pin)
    pin.add_argument(
        "--dataset-name", help="only the entries of this config (lm-eval's dataset_name)"
    )
    pin.set_defaults(func=handlers.leaderboard_pin_dataset)

    dataset = commands.add_parser("dataset", help="inspect, build and publish benchmark data")
    data_commands = _Commands(
        dataset.add_subparsers(dest="dataset_command", required=True, metavar="ACTION")
    )

    info = data_commands.add_parser(
        "info", help="counts per config, split, company and section of a dataset"
    )
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
    _add_include_path(info)
    info.set_defaults(func=handlers.dataset_info)

    build = data_commands.add_parser(
        "build", help="chunk 10-K filings (HTML, text, markdown) into a dataset folder"
    )
    build.add_argument("files", nargs="+", type=Path, metavar="FILE", help="10-K filings")
    build.add_argument("--output", required=True, type=Path, help="dataset folder to write")
    build.add_argument("--max-tokens", type=_positive_int, default=2048, help="default: 2048")
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

    push = data_commands.add_parser("push", help="upload a dataset folder to the Hugging Face Hub")
    push.add_argument("folder", type=Path, help="dataset folder (from `dataset build`)")
    push.add_argument("--repo-id", required=True, help="Hub dataset repo, e.g. org/name")
    push.add_argument("--private", action="store_true", help="create the repo as private")
    push.set_defaults(func=handlers.dataset_push)
    return parser


def _positive_int(value: str) -> int:
    return _at_least(value, 1, "a positive integer")


def _count(value: str) -> int:
    return _at_least(value, 0, "0 or more")


def _at_least(value: str, least: int, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = least - 1
    if number < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return number


def _batch_size(value: str) -> int | str:
    from finreflect_eval.models import parse_batch_size

    try:
        return parse_batch_size(value)
    except FinReflectError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
