"""The arguments of a model run, shared by `run` and `extract`: the model, the spans, where the
run reads and writes, its seeds and sharding, and lm-eval's flags that become model args or task
fields."""

from __future__ import annotations

import argparse
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.cli.lm_eval_forms import SplitList, boolean, seeds, span_limit, spans_by_task
from finreflect_eval.cli.options import (
    add_cache,
    add_include_path,
    add_task_selection,
    non_negative_int,
    positive_int,
)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Every argument of a model run, in the order `--help` lists them."""
    _add_model(parser)
    _add_span_selection(parser)
    _add_paths(parser)
    _add_run_control(parser)
    _add_lm_eval_flags(parser)


def _add_model(parser: argparse.ArgumentParser) -> None:
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


def _add_span_selection(parser: argparse.ArgumentParser) -> None:
    add_task_selection(parser, ["finreflect"], "tasks, groups or tags (default: finreflect)")
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


def _add_paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output-path",
        "-o",
        type=Path,
        default=Path("results"),
        help="results folder (a .json path: its folder); default: results",
    )
    add_cache(parser, "OUTPUT_PATH/cache.sqlite")
    add_include_path(parser)


def _add_run_control(parser: argparse.ArgumentParser) -> None:
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


def _add_lm_eval_flags(parser: argparse.ArgumentParser) -> None:
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
        "--max-batch-size", type=positive_int, help="where --batch-size auto starts (hf)"
    )
    lm_eval.add_argument("--device", help="hf: cuda, cuda:0, cpu, mps")
    lm_eval.add_argument("--revision", help="the model's Hub revision (branch, tag or commit)")
    lm_eval.add_argument(
        "--trust-remote-code", action="store_const", const=True, help="run the model repo's code"
    )
    lm_eval.add_argument(
        "--num-fewshot",
        "-f",
        type=non_negative_int,
        help="few-shot examples in every extraction prompt",
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


def _batch_size(value: str) -> int | str:
    from finreflect_eval.models import parse_batch_size

    try:
        return parse_batch_size(value)
    except FinReflectError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
