"""The Python API, lm-eval's: `simple_evaluate` (extract → judge → score, as `finreflect-eval
run` does), `evaluate_run` (judge and score a saved run) and `run_config` (a run as the command
line describes it). They print nothing unless asked, and check every argument before any work
(`finreflect_eval.api.arguments`)."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import ArgumentValueError, FinReflectError, first_line
from finreflect_eval._util.progress import progress_bars
from finreflect_eval.api.arguments import check_arguments
from finreflect_eval.models import LM, ModelSpec, parse_batch_size, parse_model_args
from finreflect_eval.pipeline import judging
from finreflect_eval.pipeline.evaluator import (
    check_judging,
    choose_panel,
    default_cache,
    downstream,
    evaluate,
    judge,
    score,
)
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.pipeline.sharding import Shard, load_runs
from finreflect_eval.records import Prices, Results, SampleRecord
from finreflect_eval.runs.store import writing
from finreflect_eval.scoring.failures import FailurePolicy
from finreflect_eval.stats.uncertainty import BOOTSTRAP_ITERS

Judges = str | Path | judging.Panel | Sequence[LM] | Mapping[str, LM] | None


def run_config(
    model: str | Path | LM,
    model_args: str | Sequence[str] | dict[str, Any] | None = None,
    tasks: str | Sequence[str] = ("finreflect",),
    *,
    backend: str | None = None,
    dataset: str | Path | None = None,
    dataset_revision: str | None = None,
    limit: int | float | None = None,
    samples: Mapping[str, list[int | str]] | None = None,
    sections: Sequence[str] | None = None,
    num_fewshot: int | None = None,
    batch_size: int | str | None = None,
    max_batch_size: int | None = None,
    device: str | None = None,
    revision: str | None = None,
    trust_remote_code: bool | None = None,
    system_instruction: str | None = None,
    fewshot_as_multiturn: bool = False,
    gen_kwargs: str | Sequence[str] | dict[str, Any] | None = None,
    seed: int | None = None,
    random_seed: int | None = 0,
    numpy_random_seed: int | None = 1234,
    fewshot_random_seed: int | None = 1234,
    output_path: str | Path = "results",
    use_cache: str | Path | bool | None = True,
    include_path: str | Path | Sequence[str | Path] = (),
    shard: Shard | None = None,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
    skip_judging_ungrounded: bool = False,
    prices: str | Path | Mapping[str, Any] | Prices | None = None,
    qa: str | Path | None = None,
) -> RunConfig:
    """A run as the command line and `simple_evaluate` describe it, with lm-eval's names.
    `model`: a name or path (with `model_args` and `backend`, read by `ModelSpec.from_cli`'s
    rule: `model="hf", model_args="pretrained=ORG/NAME"` works too) or a loaded `LM`, used as it
    is (with its own cache). `tasks`: names or comma lists. `output_path`: a folder (a `.json`
    path: its folder, as lm-eval). `use_cache`: True (`<output_path>/cache.sqlite`), False or
    None (no cache), or a cache file. `include_path`: a folder or a list of them. `seed`: the
    generation seed (lm-eval's torch seed; None: the tasks' own); the other seeds are lm-eval's,
    with its defaults. `skip_judging_ungrounded`: the grounding cascade (triples whose numbers
    or dates their span lacks score 0, unjudged; the default judges every triple, as the
    paper). `prices`: the price table of the results' cost block (a YAML file, its content as
    a dict, or a `Prices`; None: no money counted). `qa`: the QA model of the downstream tasks
    (a `tasks/qa/` name or a file; None: the tasks' own). An argument of the wrong type or value is
    an `ArgumentTypeError`/`ArgumentValueError` naming it."""
    check_arguments(locals(), spans_by_task=True)  # first: the parameters are all the locals
    names = [tasks] if isinstance(tasks, str) else list(tasks)
    names = [name for item in names for name in item.split(",") if name]
    if not names:
        raise ArgumentValueError("--tasks names no task")
    if names[0] in ("list", "list_groups", "list_tags", "list_subtasks"):  # lm-eval's listings
        raise ArgumentValueError("to list the tasks and groups: finreflect-eval tasks list")
    if batch_size is not None:
        batch_size = parse_batch_size(batch_size)  # lm-eval's auto:N is auto
    loading = {"model_args": model_args, "backend": backend, "batch_size": batch_size}
    loading |= {"max_batch_size": max_batch_size, "device": device, "revision": revision}
    loading |= {"trust_remote_code": trust_remote_code}
    if isinstance(model, LM):
        given = [name for name, value in loading.items() if value is not None]
        if given:
            raise ArgumentValueError(f"{given[0]} is for a model given by name, not a loaded one")
    else:
        del loading["model_args"], loading["backend"]
        model = ModelSpec.from_cli(os.fspath(model), backend, model_args, **loading)
    output = Path(output_path)
    config = RunConfig(
        model=model,
        tasks=names,
        dataset=None if dataset is None else os.fspath(dataset),
        dataset_revision=dataset_revision,
        limit=limit,
        sections=None if sections is None else list(sections),
        samples=None if samples is None else {task: list(ids) for task, ids in samples.items()},
        output_path=output.parent if output.suffix == ".json" else output,
        include_paths=_paths(include_path),
        seed=seed,
        random_seed=random_seed,
        numpy_seed=numpy_random_seed,
        fewshot_seed=fewshot_random_seed,
        gen_kwargs=parse_model_args(gen_kwargs, "gen_kwargs"),
        shard=shard,
        bootstrap_iters=bootstrap_iters,
        skip_judging_ungrounded=skip_judging_ungrounded,
        prices=_prices(prices),
        qa=None if qa is None else os.fspath(qa),
        num_fewshot=num_fewshot,
        system_instruction=system_instruction,
        fewshot_as_multiturn=fewshot_as_multiturn,
    )
    config.cache = _cache_file(use_cache, config.default_cache())
    return config


def simple_evaluate(
    model: str | Path | LM,
    model_args: str | Sequence[str] | dict[str, Any] | None = None,
    tasks: str | Sequence[str] = ("finreflect",),
    num_fewshot: int | None = None,
    batch_size: int | str | None = None,
    max_batch_size: int | None = None,
    device: str | None = None,
    use_cache: str | Path | bool | None = True,
    cache_requests: bool = False,
    rewrite_requests_cache: bool = False,
    delete_requests_cache: bool = False,
    limit: int | float | None = None,
    samples: dict[str, list[int | str]] | None = None,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
    check_integrity: bool = False,
    write_out: bool = False,
    log_samples: bool = True,
    evaluation_tracker: Any = None,
    system_instruction: str | None = None,
    apply_chat_template: bool | str = False,
    fewshot_as_multiturn: bool = False,
    gen_kwargs: str | Sequence[str] | dict[str, Any] | None = None,
    task_manager: Any = None,
    verbosity: str | int | None = None,
    predict_only: bool = False,
    random_seed: int | None = 0,
    numpy_random_seed: int | None = 1234,
    torch_random_seed: int | None = None,
    fewshot_random_seed: int | None = 1234,
    confirm_run_unsafe_code: bool = False,
    metadata: dict[str, Any] | None = None,
    *,
    judges: Judges = None,
    backend: str | None = None,
    dataset: str | Path | None = None,
    dataset_revision: str | None = None,
    sections: Sequence[str] | None = None,
    revision: str | None = None,
    trust_remote_code: bool | None = None,
    output_path: str | Path | None = None,
    include_path: str | Path | Sequence[str | Path] = (),
    shard: Shard | None = None,
    max_invalid_share: float = FailurePolicy.max_invalid_share,
    max_judge_failure_share: float = FailurePolicy.max_judge_failure_share,
    allow_failures: bool = False,
    skip_judging_ungrounded: bool = False,
    prices: str | Path | Mapping[str, Any] | Prices | None = None,
    qa: str | Path | None = None,
    show_progress: bool = False,
) -> dict[str, Any]:
    """extract → judge → score, as `finreflect-eval run` does, called as lm-eval 0.4.13's
    `simple_evaluate` (its parameters, in its order); returns the results file's content as a
    dict (`lm_eval.utils.make_table` and `json.dumps` take it), where `samples` holds each
    task's sample records (the lines of its samples file) unless `log_samples=False` (then:
    the files' names, as in the file; with `output_path` the files are written all the same,
    as scoring reads them).

    Nothing is written without `output_path` (as lm-eval): the run's files go to a temporary
    folder removed afterwards (the response cache too, unless `use_cache` names a file: the
    file itself, where lm-eval's adds `_rank0.db`), so a run that fails cannot be continued;
    with it, the results, samples and review queues of `finreflect-eval run`. `judges`
    (keyword-only: not lm-eval's): a panel name or file, a
    `Panel`, loaded `LM`s (a list, or by judge name), or None (the tasks' panel). The other
    keyword-only arguments and lm-eval's `model` ... `limit`, `samples`, `system_instruction`,
    `fewshot_as_multiturn`, `gen_kwargs` and seeds are `run_config`'s (`torch_random_seed`
    is its `seed`). Of lm-eval's others: `verbosity` sets the `finreflect_eval` logger's level
    (as lm-eval sets its own); `apply_chat_template` True or False (a model's chat template is
    always applied); `bootstrap_iters`: the resamples behind every interval and stderr (0:
    none, as lm-eval; lm-eval's default, 100000, is honoured, at 100 times the time of ours);
    `confirm_run_unsafe_code` changes nothing (no task runs code); the rest are refused unless
    at lm-eval's default, with the reason and what to use instead.

    It prints nothing: progress bars only with `show_progress`, warnings only through the
    caller's `logging` setup. Every argument is checked before any work
    (`ArgumentTypeError`/`ArgumentValueError`, naming it)."""
    check_arguments(locals(), lm_eval=True)  # first: the parameters are all the locals there are
    if verbosity is not None:  # the level only: handlers stay the caller's (see above)
        level = verbosity.upper() if isinstance(verbosity, str) else verbosity
        logging.getLogger("finreflect_eval").setLevel(level)
    policy = FailurePolicy(
        max_invalid_share=max_invalid_share,
        max_judge_failure_share=max_judge_failure_share,
        allow_failures=allow_failures,
    )
    with contextlib.ExitStack() as stack:
        if output_path is None:  # removed on leaving, after the run folder's lock is let go
            output_path = stack.enter_context(tempfile.TemporaryDirectory(prefix="finreflect-"))
        config = run_config(
            model,
            model_args,
            tasks,
            backend=backend,
            dataset=dataset,
            dataset_revision=dataset_revision,
            limit=limit,
            samples=samples,
            sections=sections,
            num_fewshot=num_fewshot,
            batch_size=batch_size,
            max_batch_size=max_batch_size,
            device=device,
            revision=revision,
            trust_remote_code=trust_remote_code,
            system_instruction=system_instruction,
            fewshot_as_multiturn=fewshot_as_multiturn,
            gen_kwargs=gen_kwargs,
            seed=torch_random_seed,
            random_seed=random_seed,
            numpy_random_seed=numpy_random_seed,
            fewshot_random_seed=fewshot_random_seed,
            output_path=output_path,
            use_cache=use_cache,
            include_path=include_path,
            shard=shard,
            bootstrap_iters=bootstrap_iters,
            skip_judging_ungrounded=skip_judging_ungrounded,
            prices=prices,
            qa=qa,
        )
        panel = _panel(judges, config.tasks, config.include_paths)
        with progress_bars(show_progress):
            run, results = evaluate(config, panel, policy)
        return _as_dict(results, run.records if log_samples else None)


def evaluate_run(
    samples: str | Path | Sequence[str | Path],
    judges: Judges = None,
    *,
    use_cache: str | Path | bool | None = True,
    include_path: str | Path | Sequence[str | Path] = (),
    max_invalid_share: float = FailurePolicy.max_invalid_share,
    max_judge_failure_share: float = FailurePolicy.max_judge_failure_share,
    allow_failures: bool = False,
    show_progress: bool = False,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
    skip_judging_ungrounded: bool = False,
    prices: str | Path | Mapping[str, Any] | Prices | None = None,
    qa: str | Path | None = None,
) -> dict[str, Any]:
    """Judge and score a saved run (`finreflect-eval judge`, `downstream` for tasks that have
    it, then `score`): `samples` a run
    folder or manifest (or every shard's folder); `judges` as for `simple_evaluate`, or None to
    score the votes already there (the newest panel's). `use_cache`: True (the extraction's
    cache), False or None (no cache), or a cache file. `skip_judging_ungrounded`, `prices` and
    `qa`: as for `run_config`. Returns the results file's content, as
    written to the run folder (its `samples`: the files' names; their records are in the
    folder). Prints nothing, and checks its arguments, as `simple_evaluate` does."""
    check_arguments(locals())  # first: the parameters are all the locals there are
    price_table = _prices(prices)
    run = load_runs(_paths(samples))
    include_paths = _paths(include_path)
    policy = FailurePolicy(
        max_invalid_share=max_invalid_share,
        max_judge_failure_share=max_judge_failure_share,
        allow_failures=allow_failures,
    )
    with writing(run.folder), progress_bars(show_progress):
        name = None
        if judges is not None:
            panel = _panel(judges, list(run.manifest.tasks), include_paths)
            cache = _cache_file(use_cache, default_cache(run))
            run = judge(
                run,
                panel,
                cache=cache,
                include_paths=include_paths,
                skip_ungrounded=skip_judging_ungrounded,
            )
            if not allow_failures:
                check_judging(run, panel.panel)
            qa_name = None if qa is None else os.fspath(qa)
            downstream(run, panel, cache=cache, include_paths=include_paths, qa=qa_name)
            name = panel.panel
        return _as_dict(score(run, name, policy, bootstrap_iters, price_table))


def _prices(prices: str | Path | Mapping[str, Any] | Prices | None) -> Prices | None:
    """The price table an argument gives (a wrong one: an `ArgumentValueError` naming it)."""
    if prices is None or isinstance(prices, Prices):
        return prices
    try:
        if isinstance(prices, Mapping):
            return Prices.parse(dict(prices))
        return Prices.load(prices)
    except FinReflectError as exc:
        raise ArgumentValueError(f"prices: {first_line(exc)}") from None


def _panel(judges: Judges, tasks: list[str], include_paths: list[Path]) -> judging.Panel:
    if isinstance(judges, judging.Panel):
        return judges
    if isinstance(judges, Mapping) or (
        isinstance(judges, Sequence) and not isinstance(judges, str)
    ):
        return judging.Panel.from_models(judges)
    try:
        return judging.load_panel(choose_panel(judges, tasks, include_paths))
    except FinReflectError as exc:
        if isinstance(exc, ArgumentValueError) or str(exc).startswith("judges:"):
            raise
        raise ArgumentValueError(f"judges: {exc}") from None


def _as_dict(
    results: Results, records: dict[str, list[SampleRecord]] | None = None
) -> dict[str, Any]:
    """The results file's content: lm-eval's callers read a dict. With `records`: under
    `samples`, each task's sample records as its samples file holds them (lm-eval returns its
    samples there), in place of the files' names."""
    content = results.model_dump(mode="json", by_alias=True)
    if records is not None:
        content["samples"] = {
            task: [record.model_dump(mode="json") for record in task_records]
            for task, task_records in records.items()
        }
    return content


def _cache_file(use_cache: str | Path | bool | None, default: Path) -> Path | None:
    if use_cache is True:
        return default
    return Path(use_cache) if use_cache else None


def _paths(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """One path or several (a single string is one path, not its characters)."""
    if isinstance(paths, str | os.PathLike):
        return [Path(paths)]
    return [Path(path) for path in paths]
