"""The `finreflect-eval` command line. Heavy imports happen inside each command, so `--help` is
instant; a user error prints one line (no traceback) and exits 1."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from finreflect_eval import __version__
from finreflect_eval.errors import FinReflectError

logger = logging.getLogger("finreflect_eval")


def _dataset_info(args: argparse.Namespace) -> None:
    from finreflect_eval.data import available_splits, describe, load_benchmark

    splits = [args.split] if args.split else available_splits(args.dataset, args.revision)
    benchmarks = [
        load_benchmark(args.dataset, split=split, revision=args.revision) for split in splits
    ]
    print(describe(benchmarks), end="")


def _dataset_build(args: argparse.Namespace) -> None:
    from finreflect_eval.data import build_spans, write_dataset_folder

    spans = build_spans(
        args.files,
        max_tokens=args.max_tokens,
        tokenizer=args.tokenizer,
        ticker=args.ticker,
        fiscal_year=args.fiscal_year,
    )
    output = write_dataset_folder(args.output, {"spans": {args.split: spans}})
    print(f"wrote {len(spans)} spans from {len(args.files)} filing(s) to {output}")


def _dataset_push(args: argparse.Namespace) -> None:
    from finreflect_eval.data import push_dataset

    url = push_dataset(args.folder, args.repo_id, private=args.private)
    print(f"pushed {args.folder} to {url}")


def _tasks_list(args: argparse.Namespace) -> None:
    from finreflect_eval.tables import markdown_table
    from finreflect_eval.tasks import TaskIndex

    index = TaskIndex(args.include_path)
    rows = [
        [task.name, task.config.mode, ", ".join(task.config.tag), task.config.version, task.path]
        for task in index.tasks.values()
    ]
    rows += [
        [group.group, "group: " + ", ".join(group.task), "", group.metadata.get("version", ""), ""]
        for group in index.groups.values()
    ]
    print(markdown_table(["name", "mode", "tags", "version", "file"], rows))


def _tasks_validate(args: argparse.Namespace) -> None:
    from finreflect_eval.data import SAMPLE, load_benchmark
    from finreflect_eval.tasks import TaskIndex, validate_task

    index = TaskIndex(args.include_path)
    tasks = index.resolve(args.tasks) if args.tasks else list(index.tasks.values())
    span = load_benchmark(SAMPLE, split="test", limit=1).spans[0]
    dev = load_benchmark(SAMPLE, split="dev", limit=1)
    fewshot = [{"span": s, "triples": dev.reference_triples} for s in dev.spans]
    for task in tasks:
        validate_task(task, span, fewshot)
        print(f"ok  {task.name}  ({task.path})")
    print(f"{len(tasks)} task(s) valid, {len(index.groups)} group(s)")


def _extract(args: argparse.Namespace) -> None:
    from finreflect_eval.evaluator import extract, summary_table

    run = extract(_run_config(args))
    print(summary_table(run))
    print(f"samples and manifest written to {run.folder}")


def _judge(args: argparse.Namespace) -> None:
    from finreflect_eval.evaluator import default_cache, judge
    from finreflect_eval.sharding import load_runs

    run = load_runs(args.samples)
    cache = None if args.no_cache else (args.cache or default_cache(run))
    judged = judge(run, _panel(args, run), cache=cache, include_paths=args.include_path)
    panel = list(judged.manifest.judging)[-1]
    print(f"votes of panel '{panel}' added to the samples in {judged.folder}")


def _score(args: argparse.Namespace) -> None:
    from finreflect_eval.evaluator import score
    from finreflect_eval.scoring import results_table
    from finreflect_eval.sharding import load_runs

    run = load_runs(args.samples)
    results = score(run, args.judges)
    print(results_table(results))
    print(f"results, samples and review queues in {run.folder}")


def _run(args: argparse.Namespace) -> None:
    from finreflect_eval.evaluator import evaluate
    from finreflect_eval.scoring import results_table

    config = _run_config(args)
    run, results = evaluate(config, _panel(args, config))
    print(results_table(results))
    print(f"results, samples and review queues in {run.folder}")


def _upgrade(args: argparse.Namespace) -> None:
    from finreflect_eval.upgrade import upgrade_run

    for written in upgrade_run(args.folder, include_paths=args.include_path):
        print(f"wrote {written}")


def _submit(args: argparse.Namespace) -> None:
    from finreflect_eval.leaderboard import submit

    target, pull_request = submit(
        args.results, args.leaderboard, hub_repo=args.hub_repo, dry_run=args.dry_run
    )
    if args.dry_run:
        print(f"accepted (dry run): would be written to {target}")
    elif args.hub_repo:
        print(f"submitted to {args.hub_repo}: {pull_request}")
    else:
        print(f"accepted: {target}; {args.leaderboard / 'index.html'} rebuilt")


def _leaderboard_build(args: argparse.Namespace) -> None:
    from finreflect_eval.leaderboard import build

    for path in build(args.leaderboard):
        print(f"wrote {path}")


def _audit_judges(args: argparse.Namespace) -> None:
    from finreflect_eval.audit import PROBES, audit_table, run_audit, write_audit
    from finreflect_eval.data import load_benchmark
    from finreflect_eval.tasks import TaskIndex

    probes = PROBES if args.probes == "all" else [p for p in args.probes.split(",") if p]
    task = TaskIndex(args.include_path).resolve([args.task])[0]
    panel = _panel(args, None)
    benchmark = load_benchmark(args.dataset, split=args.split, limit=args.limit)
    cache = None if args.no_cache else (args.cache or args.output_path / "cache.sqlite")
    audit = run_audit(
        panel,
        task,
        benchmark,
        probes=probes,
        seed=args.seed,
        limit=args.limit,
        cache_path=cache,
    )
    path = write_audit(audit, args.output_path)
    print(audit_table(audit))
    print(f"\naudit written to {path}")


def _run_config(args: argparse.Namespace):
    from finreflect_eval.evaluator import RunConfig
    from finreflect_eval.models import ModelSpec, parse_model_args
    from finreflect_eval.sharding import Shard

    config = RunConfig(
        model=ModelSpec.from_cli(args.model, args.backend, args.model_args),
        tasks=[name for item in args.tasks for name in item.split(",") if name],
        dataset=args.dataset,
        limit=args.limit,
        output_path=args.output_path,
        include_paths=args.include_path,
        seed=args.seed,
        gen_kwargs=parse_model_args(args.gen_kwargs),
        shard=Shard.parse(args.shard) if args.shard else None,
    )
    config.cache = None if args.no_cache else (args.cache or config.default_cache())
    return config


def _panel(args: argparse.Namespace, source):
    """The judge panel: `--judges`, else the one the tasks name (of a run config, or of a saved
    run); `--judge-endpoints` moves judges to servers."""
    from finreflect_eval.judging import load_panel
    from finreflect_eval.models import parse_model_args
    from finreflect_eval.tasks import TaskIndex

    name = args.judges
    if name is None:
        index = TaskIndex(args.include_path)
        tasks = source.tasks if hasattr(source, "tasks") else list(source.manifest.tasks)
        named = {task.config.judges for task in index.resolve(tasks)}
        if len(named) != 1:
            raise FinReflectError(
                f"cannot choose a judge panel from the tasks ({', '.join(sorted(named))}): "
                "choose one with --judges"
            )
        name = named.pop()
    panel = load_panel(name)
    if args.judge_endpoints:
        urls = parse_model_args(args.judge_endpoints)
        panel = panel.at_endpoints({judge: str(url) for judge, url in urls.items()})
    return panel


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="HF id, local path, .gguf, alias, or name")
    parser.add_argument("--backend", default="hf", help="hf (default), vllm, openai, scripted")
    parser.add_argument("--model-args", help="backend arguments: k=v,k2=v2")
    parser.add_argument(
        "--tasks", nargs="+", default=["finreflect"], help="tasks or groups (default: finreflect)"
    )
    parser.add_argument("--dataset", help="'sample', a folder/file or a Hub id (default: task's)")
    parser.add_argument("--limit", type=_positive_int, help="first N spans of each task")
    parser.add_argument(
        "--output-path", type=Path, default=Path("results"), help="default: results"
    )
    _add_cache(parser, "OUTPUT_PATH/cache.sqlite")
    _add_include_path(parser)
    parser.add_argument("--seed", type=int, help="overrides the tasks' generation seed")
    parser.add_argument(
        "--gen-kwargs", help="overrides generation_kwargs, e.g. max_gen_toks=512,temperature=0"
    )
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="run shard I of N (every N-th span from the I-th) into OUTPUT_PATH/MODEL/"
        "shard-I-of-N; judge or score all shards' folders together",
    )


def _add_cache(parser: argparse.ArgumentParser, default: str) -> None:
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache", type=Path, help=f"SQLite response cache file (default: {default})"
    )
    cache.add_argument("--no-cache", action="store_true", help="call the models for everything")


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="finreflect-eval",
        description="Benchmark KG extraction from 10-K filings with a panel of LLM judges.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run", help="extract → judge → score in one command (results, samples, review queue)"
    )
    _add_run_arguments(run)
    _add_judges(run)
    run.set_defaults(func=_run)

    extract = commands.add_parser(
        "extract", help="run a candidate model over the benchmark spans (all modes)"
    )
    _add_run_arguments(extract)
    extract.set_defaults(func=_extract)

    judge = commands.add_parser(
        "judge", help="add a judge panel's votes to saved extractions (resumable, cached)"
    )
    _add_samples(judge)
    _add_judges(judge)
    _add_cache(judge, "the one the extraction used")
    _add_include_path(judge)
    judge.set_defaults(func=_judge)

    score = commands.add_parser(
        "score", help="recompute every score from judged samples (no model)"
    )
    _add_samples(score)
    score.add_argument("--judges", help="the panel whose votes to score (default: the latest)")
    score.set_defaults(func=_score)

    upgrade = commands.add_parser(
        "upgrade", help="convert a run folder written by an older finreflect-eval"
    )
    upgrade.add_argument("folder", type=Path, metavar="DIR", help="the run folder")
    _add_include_path(upgrade)
    upgrade.set_defaults(func=_upgrade)

    tasks = commands.add_parser("tasks", help="list and validate tasks")
    tasks_commands = tasks.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    listing = tasks_commands.add_parser("list", help="tasks and groups with mode and version")
    _add_include_path(listing)
    listing.set_defaults(func=_tasks_list)
    validate = tasks_commands.add_parser(
        "validate", help="check YAML, fields, schema and that prompts render on a sample span"
    )
    _add_include_path(validate)
    validate.add_argument("--tasks", nargs="+", help="only these tasks or groups")
    validate.set_defaults(func=_tasks_validate)

    submit = commands.add_parser(
        "submit", help="verify a run (every score recomputed) and add it to the leaderboard"
    )
    submit.add_argument(
        "results", type=Path, metavar="RESULTS", help="results_*.json, its run folder, or a bundle"
    )
    _add_leaderboard(submit)
    submit.add_argument("--hub-repo", help="open a pull request on this Hub dataset repo instead")
    submit.add_argument("--dry-run", action="store_true", help="verify only; write nothing")
    submit.set_defaults(func=_submit)

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
    audit.set_defaults(func=_audit_judges)

    board = commands.add_parser("leaderboard", help="build the static leaderboard")
    board_commands = board.add_subparsers(dest="board_command", required=True, metavar="ACTION")
    sub = board_commands.add_parser(
        "build", help="render index.html, leaderboard.json and leaderboard.csv"
    )
    _add_leaderboard(sub)
    sub.set_defaults(func=_leaderboard_build)

    dataset = commands.add_parser("dataset", help="inspect, build and publish benchmark data")
    data_commands = dataset.add_subparsers(dest="dataset_command", required=True, metavar="ACTION")

    info = data_commands.add_parser(
        "info", help="counts per config, split, company and section of a dataset"
    )
    info.add_argument(
        "--dataset", default="sample", help="'sample', a local folder or file, or a Hub id"
    )
    info.add_argument("--split", help="one split only (default: all)")
    info.add_argument("--revision", help="Hub revision (branch, tag or commit)")
    info.set_defaults(func=_dataset_info)

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
    build.set_defaults(func=_dataset_build)

    push = data_commands.add_parser("push", help="upload a dataset folder to the Hugging Face Hub")
    push.add_argument("folder", type=Path, help="dataset folder (from `dataset build`)")
    push.add_argument("--repo-id", required=True, help="Hub dataset repo, e.g. org/name")
    push.add_argument("--private", action="store_true", help="create the repo as private")
    push.set_defaults(func=_dataset_push)
    return parser


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return number


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:  # httpx logs every request at INFO: one line per model call
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        args.func(args)
    except FinReflectError as exc:
        print(f"finreflect-eval: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("finreflect-eval: interrupted", file=sys.stderr)
        return 130
    return 0
