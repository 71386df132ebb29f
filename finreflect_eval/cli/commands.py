"""What each command does: resolve paths, call the library, print. Heavy imports happen inside
each command, so `--help` is instant."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError


def dataset_info(args: argparse.Namespace) -> None:
    from finreflect_eval.data import available_splits, describe, describe_slice, load_benchmark
    from finreflect_eval.tasks.config import TaskIndex

    splits = [args.split] if args.split else available_splits(args.dataset, args.revision)
    benchmarks = [
        load_benchmark(args.dataset, split=split, revision=args.revision) for split in splits
    ]
    print(describe(benchmarks), end="")
    spec = TaskIndex(args.include_path).resolve([args.task])[0].config
    if spec.slice is not None:  # the task's slice of the test split
        whole = next((b for b in benchmarks if b.split == spec.test_split), benchmarks[0])
        sliced = load_benchmark(
            args.dataset, split=whole.split, revision=args.revision, slice=spec.slice
        )
        print("\n" + describe_slice(whole, sliced), end="")


def dataset_build(args: argparse.Namespace) -> None:
    from finreflect_eval.data import build_spans, check_output_folder, write_dataset_folder

    check_output_folder(args.output, replace=args.replace)  # before chunking: refused at once
    spans = build_spans(
        args.files,
        max_tokens=args.max_tokens,
        tokenizer=args.tokenizer,
        ticker=args.ticker,
        fiscal_year=args.fiscal_year,
    )
    output = write_dataset_folder(args.output, {"spans": {args.split: spans}}, replace=args.replace)
    print(f"wrote {len(spans)} spans from {len(args.files)} filing(s) to {output}")


def dataset_push(args: argparse.Namespace) -> None:
    from finreflect_eval.data import push_dataset

    url = push_dataset(args.folder, args.repo_id, private=args.private)
    print(f"pushed {args.folder} to {url}")


def tasks_list(args: argparse.Namespace) -> None:
    """`tasks list`, or lm-eval's `ls WHAT`: tasks (all), groups, subtasks (tasks only), tags."""
    from finreflect_eval._util.tables import markdown_table
    from finreflect_eval.tasks.config import TaskIndex

    index = TaskIndex(args.include_path)
    if args.what == "tags":
        rows = [[tag, ", ".join(names)] for tag, names in index.tags.items()]
        print(markdown_table(["tag", "tasks"], rows))
        return
    rows = [
        [task.name, task.config.mode, ", ".join(task.config.tag), task.config.version, task.path]
        for task in index.tasks.values()
        if args.what != "groups"
    ]
    rows += [
        [group.group, "group: " + ", ".join(group.task), "", group.metadata.get("version", ""), ""]
        for group in index.groups.values()
        if args.what != "subtasks"
    ]
    print(markdown_table(["name", "mode", "tags", "version", "file"], rows))


def tasks_validate(args: argparse.Namespace) -> None:
    from finreflect_eval.data import SAMPLE, load_benchmark
    from finreflect_eval.downstream.qa import validate_qa
    from finreflect_eval.tasks.config import TaskIndex, validate_task

    names = args.tasks or []
    # A task file is read alone (and what it includes), not the other YAML of its folder.
    index = TaskIndex(args.include_path, files=_existing_task_files(names, _typed(args, "tasks")))
    tasks = index.resolve(names) if names else list(index.tasks.values())
    span = load_benchmark(SAMPLE, split="test", limit=1).spans[0]
    dev = load_benchmark(SAMPLE, split="dev", limit=1)
    fewshot = [{"span": s, "triples": dev.reference_triples} for s in dev.spans]
    for task in tasks:
        validate_task(task, span, fewshot)
        validate_qa(task)
        print(f"ok  {task.name}  ({task.path})")
    print(f"{len(tasks)} task(s) valid, {len(index.groups)} group(s)")


def extract(args: argparse.Namespace) -> None:
    _start_ray_early(args)
    from finreflect_eval.pipeline import evaluator
    from finreflect_eval.pipeline.summary import extraction_table

    if args.check:
        _check(_run_config(args), None)
        return
    run = evaluator.extract(_run_config(args))
    print(extraction_table(run))
    print(f"samples and manifest written to {run.folder}")
    evaluator.check_extraction(run, _policy(args))


def judge(args: argparse.Namespace) -> None:
    from finreflect_eval.pipeline import evaluator
    from finreflect_eval.pipeline.sharding import load_runs

    run = load_runs(args.samples)
    panel = _panel(args, run)  # before any model loads
    cache = None if args.no_cache else (args.cache or evaluator.default_cache(run))
    if args.check:
        from finreflect_eval.preflight import check_judging

        cascade = args.skip_judging_ungrounded
        _report(check_judging(run, panel, args.include_path, cache, cascade))
        return
    with evaluator.writing(run.folder):
        judged = evaluator.judge(
            run,
            panel,
            cache=cache,
            include_paths=args.include_path,
            skip_ungrounded=args.skip_judging_ungrounded,
        )
    print(f"votes of panel '{panel.panel}' added to the samples in {judged.folder}")
    evaluator.check_judging(judged, panel.panel)


def downstream(args: argparse.Namespace) -> None:
    from finreflect_eval.pipeline import evaluator
    from finreflect_eval.pipeline.sharding import load_runs

    run = load_runs(args.samples)
    panel = _panel(args, run)  # before any model loads
    cache = None if args.no_cache else (args.cache or evaluator.default_cache(run))
    with evaluator.writing(run.folder):
        evaluator.downstream(run, panel, cache=cache, include_paths=args.include_path, qa=args.qa)
    print(f"downstream answers of panel '{panel.panel}' in {run.folder} (`score` adds them)")


def score(args: argparse.Namespace) -> None:
    from finreflect_eval.pipeline import evaluator
    from finreflect_eval.pipeline.sharding import load_runs
    from finreflect_eval.pipeline.summary import results_table

    hub_args = _hub_log_args(args)
    run = load_runs(args.samples, for_scoring=True)
    with evaluator.writing(run.folder):
        results = evaluator.score(run, args.judges, _policy(args), **_scoring(args))
    print(results_table(results))
    print(f"results, samples and review queues in {run.folder}")
    if hub_args:
        _push(run, results, hub_args)


def run(args: argparse.Namespace) -> None:
    _start_ray_early(args)
    from finreflect_eval.pipeline import evaluator
    from finreflect_eval.pipeline.summary import results_table

    config = _run_config(args)
    hub_args = _hub_log_args(args)
    panel = _panel(args, config)  # before any model loads
    if args.check:
        _check(config, panel)
        return
    judged, results = evaluator.evaluate(config, panel, policy=_policy(args))
    print(results_table(results))
    print(f"results, samples and review queues in {judged.folder}")
    if hub_args:
        _push(judged, results, hub_args)


def _check(config, panel) -> None:
    """`run --check`, `extract --check`."""
    from finreflect_eval.preflight import check_run

    _report(check_run(config, panel))


def _report(report) -> None:
    """A check's plan, or each unmet need on a line of its own and a one-line error."""
    from finreflect_eval._util.redaction import redact_text

    if report.unmet:
        for need in report.unmet:  # a URL in a line may hold a key
            print(f"unmet: {redact_text(need)}", file=sys.stderr)
        raise FinReflectError(
            f"--check: {len(report.unmet)} need(s) unmet, listed above; nothing was downloaded"
        )
    print(report.plan)


def upgrade(args: argparse.Namespace) -> None:
    from finreflect_eval.runs.upgrade import upgrade_run

    for written in upgrade_run(args.folder, include_paths=args.include_path):
        print(f"wrote {written}")


def submit(args: argparse.Namespace) -> None:
    from finreflect_eval import leaderboard

    submitted = leaderboard.submit_entry(
        args.results, args.leaderboard, hub_repo=args.hub_repo, dry_run=args.dry_run
    )
    if args.dry_run:
        said = f"accepted (dry run): would be written to {submitted.target}"
    elif args.hub_repo:
        said = f"submitted to {args.hub_repo}: {submitted.pull_request}"
    else:
        said = f"accepted: {submitted.target}; {args.leaderboard / 'index.html'} rebuilt"
    print(f"{said}; {submitted.standing}")


def view(args: argparse.Namespace) -> None:
    from finreflect_eval.pipeline.judging import panel_choice
    from finreflect_eval.view import open_run, write_report

    if len(args.runs) > 2:
        raise FinReflectError(f"view takes one run, or two to compare; got {len(args.runs)}")
    panels = args.judges or [None]
    if len(panels) > len(args.runs):
        raise FinReflectError(f"--judges: one panel per run, {len(panels)} for {len(args.runs)}")
    panels = panels + panels[-1:] * (len(args.runs) - len(panels))
    runs = [
        open_run(path, panel_choice(panel)) for path, panel in zip(args.runs, panels, strict=True)
    ]
    home = args.runs[0] if args.runs[0].is_dir() else args.runs[0].parent
    name = "report" if len(runs) == 1 else f"report-vs-{runs[1].results.run}"
    output = args.output or home / name
    index = write_report(runs[0], output, compare=runs[1] if len(runs) == 2 else None)
    print(f"wrote {index} (open it in a browser; the folder is a static Hugging Face Space)")
    if args.push:
        from finreflect_eval.view import push_report

        print(f"pushed {output} to the Space {args.push}: {push_report(output, args.push)}")


def leaderboard_build(args: argparse.Namespace) -> None:
    from finreflect_eval.leaderboard import build, check

    if args.check:
        stale = check(args.leaderboard)
        if stale:
            raise FinReflectError(
                f"{args.leaderboard}: {', '.join(stale)} not what the stored entries give; run "
                f"`finreflect-eval leaderboard build --leaderboard {args.leaderboard}`"
            )
        print(f"{args.leaderboard}: every entry verifies and the page is up to date")
        return
    for path in build(args.leaderboard):
        print(f"wrote {path}")


def leaderboard_audit(args: argparse.Namespace) -> None:
    from finreflect_eval.leaderboard import build
    from finreflect_eval.leaderboard.audited import AUDIT_CACHE, audit_entry, calibrate
    from finreflect_eval.pipeline.judging import load_panel

    panel = _at_endpoints(args, load_panel(args.judges))
    if args.calibrate:
        path, calibration = calibrate(args.leaderboard, args.entry, panel, size=args.size)
        for judge, rate in calibration.report["judges"].items():
            print(f"{judge}: the same verdict again on {rate['rate']:.1%} of {rate['n']} items")
        print(f"written to {path}")
        return
    cache = None if args.no_cache else (args.cache or AUDIT_CACHE)
    path, audit = audit_entry(args.leaderboard, args.entry, panel, size=args.size, cache_path=cache)
    report = audit.report
    for judge, agreement in report["judges"].items():
        low, high = agreement["ci"] or (None, None)
        print(
            f"{judge}: agrees with the entry on {agreement['rate']:.1%} of {agreement['n']} "
            f"items [{low:.1%}, {high:.1%}]"
        )
    overall = report["difference"].get("overall")
    if overall:
        print(f"score difference (entry - audit): {overall['score']:+.2f} {overall['ci']}")
    build(args.leaderboard)
    verdict = "passed" if report["passed"] else "FAILED: " + "; ".join(report["reasons"])
    print(f"audit {verdict}; written to {path}, {args.leaderboard / 'index.html'} rebuilt")


def leaderboard_pin_dataset(args: argparse.Namespace) -> None:
    from finreflect_eval.leaderboard import build
    from finreflect_eval.leaderboard.registry import pin_dataset

    pinned = pin_dataset(args.leaderboard, args.dataset_id, args.revision, args.dataset_name)
    build(args.leaderboard)  # the entries on other versions lose their rank
    print(f"pinned {', '.join(pinned)}; {args.leaderboard / 'index.html'} rebuilt")


def audit_judges(args: argparse.Namespace) -> None:
    from finreflect_eval.data import load_benchmark
    from finreflect_eval.pipeline.audit import PROBES, audit_table, run_audit, write_audit
    from finreflect_eval.tasks.config import TaskIndex

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
    from finreflect_eval.api.evaluate import run_config
    from finreflect_eval.pipeline.sharding import Shard

    if isinstance(args.apply_chat_template, str):  # lm-eval picks one of a tokenizer's templates
        raise FinReflectError(
            f"--apply_chat_template {args.apply_chat_template}: a named chat template is not "
            "supported; a model's own chat template is always applied"
        )
    tasks, include_paths = _task_files(args.tasks, args.include_path, _typed(args, "tasks"))
    seeds = {}  # none given: the run's defaults (lm-eval's, and the tasks' generation seed)
    if args.seed is not None:
        seeds = {
            "seed": args.seed.torch,
            "random_seed": args.seed.random,
            "numpy_random_seed": args.seed.numpy,
            "fewshot_random_seed": args.seed.fewshot,
        }
    return run_config(
        args.model,
        _key_values(args, "model_args"),
        tasks,
        backend=args.backend,
        dataset=args.dataset,
        dataset_revision=args.dataset_revision,
        limit=args.limit,
        samples=args.samples,
        sections=args.sections,
        num_fewshot=args.num_fewshot,
        batch_size=args.batch_size,
        max_batch_size=args.max_batch_size,
        device=args.device,
        revision=args.revision,
        trust_remote_code=args.trust_remote_code,
        system_instruction=args.system_instruction,
        fewshot_as_multiturn=bool(args.fewshot_as_multiturn),
        gen_kwargs=_key_values(args, "gen_kwargs"),
        skip_judging_ungrounded=getattr(args, "skip_judging_ungrounded", False),
        qa=getattr(args, "qa", None),
        **seeds,
        output_path=args.output_path,
        use_cache=False if args.no_cache else (args.cache or True),
        include_path=include_paths,
        shard=Shard.parse(args.shard) if args.shard else None,
        **_scoring(args),
    )


def _task_files(
    names: list[str], include_paths: list[Path], flag: str
) -> tuple[list[str], list[Path]]:
    """lm-eval's `--tasks path/to/task.yaml`: the file's folder joins the include paths (unless
    one already holds it) and the task or group it defines runs; names pass as they are."""
    from finreflect_eval._util.resources import tasks_dir
    from finreflect_eval.tasks.config import TaskIndex, is_task_file

    if not _existing_task_files(names, flag):
        return names, include_paths
    files = [name for name in names if is_task_file(name)]  # as typed: `name in files` below
    folders = list(include_paths)
    for name in files:
        held = [tasks_dir(), *folders]
        if not any(Path(name).resolve().is_relative_to(f.resolve()) for f in held):
            folders.append(Path(name).parent)
    index = TaskIndex(folders)
    return [index.name_of(Path(name)) if name in files else name for name in names], folders


def _existing_task_files(names: list[str], flag: str) -> list[Path]:
    """The `--tasks` items that name task files (lm-eval's `--tasks x.yaml`), each there."""
    from finreflect_eval.tasks.config import is_task_file

    files = [name for name in names if is_task_file(name)]
    for name in files:
        if not Path(name).is_file():
            raise FinReflectError(f"{flag} {name}: no such task file")
    return [Path(name) for name in files]


def _hub_log_args(args: argparse.Namespace):
    """`--hf_hub_log_args`, checked before any work (None: not given)."""
    from finreflect_eval.runs.hub_log import HubLogArgs

    if not args.hf_hub_log_args:
        return None
    return HubLogArgs.parse(_key_values(args, "hf_hub_log_args"), _typed(args, "hf_hub_log_args"))


def _key_values(args: argparse.Namespace, dest: str) -> dict[str, Any]:
    """A key=value option's items (`--model-args`, ...); errors name it as the user typed it."""
    from finreflect_eval.models import parse_model_args

    return parse_model_args(getattr(args, dest), flag=_typed(args, dest))


def _typed(args: argparse.Namespace, dest: str) -> str:
    return args.typed.get(dest, "--" + dest.replace("_", "-"))


def _push(run, results, hub_args) -> None:
    from finreflect_eval.runs.hub_log import push_run

    for url in push_run(run, results, hub_args):
        print(f"pushed to {url}")


def _start_ray_early(args: argparse.Namespace) -> None:
    """Where the candidate runs replicas on Ray, start Ray now, in the background: it starts
    while the package, the tasks and the data load (not with `--check`, which loads nothing)."""
    if args.check:
        return
    from finreflect_eval.models.replicas import start_ray_early

    with contextlib.suppress(FinReflectError):  # a wrong model arg: said where it is checked
        start_ray_early(_key_values(args, "model_args"))


def _scoring(args: argparse.Namespace) -> dict[str, Any]:
    """`--bootstrap_iters` where given (else scoring's default) and the `--prices` table, read
    now (a mistake in it must not surface after the model calls); `extract` has neither."""
    from finreflect_eval.records import Prices

    options: dict[str, Any] = {}
    if getattr(args, "bootstrap_iters", None) is not None:
        options["bootstrap_iters"] = args.bootstrap_iters
    if getattr(args, "prices", None) is not None:
        options["prices"] = Prices.load(args.prices)
    return options


def _policy(args: argparse.Namespace):
    from finreflect_eval.scoring.failures import FailurePolicy

    return FailurePolicy(
        max_invalid_share=getattr(args, "max_invalid_share", FailurePolicy.max_invalid_share),
        max_judge_failure_share=getattr(
            args, "max_judge_failure_share", FailurePolicy.max_judge_failure_share
        ),
        allow_failures=getattr(args, "allow_failures", False),
    )


def _panel(args: argparse.Namespace, source):
    """The judge panel: `--judges`, else the one the tasks name (of a run config, or of a saved
    run); `--judge-endpoints` moves judges to servers."""
    from finreflect_eval.pipeline.evaluator import choose_panel
    from finreflect_eval.pipeline.judging import load_panel

    tasks = [] if source is None else getattr(source, "tasks", None)
    if tasks is None:  # a saved run
        tasks = list(source.manifest.tasks)
    # A run config's include paths hold its task files' folders too (`--tasks x.yaml`).
    include_paths = getattr(source, "include_paths", args.include_path)
    return _at_endpoints(args, load_panel(choose_panel(args.judges, tasks, include_paths)))


def _at_endpoints(args: argparse.Namespace, panel):
    """The panel with the judges `--judge-endpoints` names moved to their servers."""
    if args.judge_endpoints:
        urls = _key_values(args, "judge_endpoints")
        panel = panel.at_endpoints({judge: str(url) for judge, url in urls.items()})
    return panel
