"""The blocks of the results that describe the run rather than score it: lm-eval's `config`
(the settings), its top-level fields of the model, environment and time, and the panel."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.records import JudgesInfo, LoadedModel, Manifest, Results, RunSettings
from finreflect_eval.scoring.groups import GROUP_STDERR
from finreflect_eval.scoring.judged import bootstrap_seed
from finreflect_eval.stats import metrics

# lm-eval's top-level keys of the chat template and tokenizer: what loading the model resolved.
LM_EVAL_TOP_LEVEL = set(LoadedModel.model_fields) & set(Results.model_fields)
# How the candidate thought (`models._thinking`), into the `config` block.
THINKING = {"think", "think_budget", "think_default", "reasoning_parser", "reasoning_effort"}


def run_settings(manifest: Manifest, panel: str, bootstrap_iters: int) -> RunSettings:
    """lm-eval's `config` block: the model and the run's settings as given and as resolved."""
    model = manifest.model
    loaded = model.loaded or LoadedModel()
    given = manifest.arguments
    return RunSettings(
        model=model.backend,
        model_args=model.args,
        model_name=model.name,
        model_num_parameters=loaded.num_parameters,
        model_revision=model.args.get("revision"),
        model_sha=model.sha,
        model_dtype=loaded.dtype or model.args.get("dtype"),
        batch_size=model.args.get("batch_size"),
        batch_sizes=loaded.batch_sizes,
        data_parallel_size=loaded.data_parallel_size,
        replicas=loaded.replicas,
        device=loaded.device or model.args.get("device"),
        device_map=loaded.device_map,
        attn_implementation=loaded.attn_implementation,
        **loaded.model_dump(include=THINKING),
        use_cache=manifest.cache,
        # A manifest written before `arguments` holds the count only.
        limit=manifest.dataset.limit if given.limit is None else given.limit,
        limit_spans=manifest.dataset.limit,
        sections=given.sections,
        samples=given.samples,
        gen_kwargs=given.gen_kwargs,
        random_seed=given.random_seed,
        numpy_seed=given.numpy_seed,
        torch_seed=_generation_seed(manifest),
        fewshot_seed=given.fewshot_seed,
        seed=manifest.seed,
        shard=None if manifest.shard is None else f"{manifest.shard.index}/{manifest.shard.count}",
        bootstrap_iters=bootstrap_iters,
        bootstrap_seed=bootstrap_seed(manifest),
        group_stderr=GROUP_STDERR if manifest.groups else None,
        judges=panel,
        without_judge_rule=metrics.TIE_RULE,
    )


def run_header(manifest: Manifest, panel: str) -> dict[str, Any]:
    """lm-eval's top-level fields of the results about the model (its name, source, chat
    template and tokenizer), the code and environment, and the run (its id, start, duration)."""
    model = manifest.model
    loaded = model.loaded or LoadedModel()
    environment = manifest.environment
    instruction = manifest.arguments.system_instruction
    seconds = round(manifest.seconds + sum(manifest.judging[panel].seconds.values()), 3)
    return {
        "model_name": model.name,
        "model_name_sanitized": model.name.replace("/", "__"),
        "model_source": model.backend,
        "git_hash": manifest.git_hash,
        "date": _unix_time(manifest.run),
        "pretty_env_info": environment and environment.pretty(),
        "transformers_version": environment and environment.packages.get("transformers"),
        "system_instruction": instruction,
        "system_instruction_sha": instruction and text_sha256(instruction),
        "fewshot_as_multiturn": manifest.arguments.fewshot_as_multiturn,
        **loaded.model_dump(include=LM_EVAL_TOP_LEVEL),
        "environment": environment,
        "run": manifest.run,
        "total_evaluation_time_seconds": str(seconds),
    }


def judges_info(manifest: Manifest, panel: str, always_agree: bool = False) -> JudgesInfo:
    """The panel that voted: its name, whether it is official, its judges and their time, and
    whether they agreed on every item."""
    judging = manifest.judging[panel]
    return JudgesInfo(
        panel=panel,
        official=judging.official,
        members=judging.judges,
        seconds=judging.seconds,
        always_agree=always_agree,
    )


def _generation_seed(manifest: Manifest) -> int | None:
    """lm-eval's torch seed: `--seed`, else the tasks' generation seed where they share one."""
    if manifest.seed is not None:
        return manifest.seed
    seeds = {task.generation_kwargs.get("seed") for task in manifest.tasks.values()}
    return seeds.pop() if len(seeds) == 1 else None


def _unix_time(run: str) -> float:
    moment = datetime.strptime(run[:19], "%Y-%m-%dT%H-%M-%S").replace(tzinfo=timezone.utc)
    return moment.timestamp()
