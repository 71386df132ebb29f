"""The run's files say exactly what ran: for every override flag, and for random combinations of
them, the settings in the results file (and the manifest and samples) equal the arguments the
backend received; the results file has every key lm-eval 0.4.13 writes."""

import json
import math
import random
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO, require
from support import recording

from finreflect_eval.cli import main
from finreflect_eval.tasks.config import GenerationKwargs

TASKS = ("finreflect_smoke_single_pass", "finreflect_smoke_reflection")
# Values each --gen_kwargs key may take in these tests: a key added to GenerationKwargs without
# values here fails `test_every_generation_setting_has_test_values`.
GEN_VALUES = {
    "max_gen_toks": [64, 300],
    "temperature": [0.0, 0.7],
    "seed": [3, 99],
    "top_p": [0.9, 1.0],
    "top_k": [0, 40],
    "do_sample": [False],  # True needs a temperature above 0
}
# GenerationKwargs' name -> GenerationRequest's, where they differ.
REQUEST_FIELD = {"max_gen_toks": "max_tokens"}
# What the requests carry (do_sample is read into the temperature).
SETTINGS = [name for name in GenerationKwargs.model_fields if name != "do_sample"]
# The judges of the panel, each with its own settings: their requests tell them apart.
JUDGES = {
    "judge-0": {"temperature": 0.0, "seed": 11},
    "judge-1": {"temperature": 0.5, "seed": 12, "max_gen_toks": 700},
    "judge-2": {},
}


def _panel(folder: Path) -> Path:
    judges = [
        {
            "name": name,
            "model": "recorder",
            "backend": "scripted",
            "model_args": {"responses": "support.recording:judge"},
            "generation_kwargs": settings,
        }
        for name, settings in JUDGES.items()
    ]
    path = folder / "panel.yaml"
    path.write_text(yaml.safe_dump({"panel": "recorded", "judges": judges}))
    return path


def _run(folder: Path, flags: list[str], tasks=TASKS) -> tuple[dict, dict, dict]:
    """`finreflect-eval run` in this process with recording models: (results, manifest,
    samples by task)."""
    recording.reset()
    folder.mkdir(parents=True, exist_ok=True)
    argv = [
        *("run", "--model", "candidate", "--backend", "scripted"),
        *("--model-args", "responses=support.recording:candidate", "--tasks", *tasks),
        *("--dataset", "sample", "--judges", str(_panel(folder)), "--no-cache"),
        *("--output-path", str(folder / "out"), *flags),
    ]
    assert main(argv) == 0
    run = folder / "out" / "candidate"
    (results,) = [json.loads(p.read_text()) for p in run.glob("results_*.json")]
    (manifest,) = [json.loads(p.read_text()) for p in run.glob("manifest_*.json")]
    samples = {
        task: [json.loads(line) for line in (run / name).read_text().splitlines()]
        for task, name in results["samples"].items()
    }
    return results, manifest, samples


def _settings(values: dict) -> tuple:
    """Generation settings as recorded (an unset top_p is not written), comparable with
    `_received`."""
    return tuple((name, values.get(name)) for name in SETTINGS)


def _received(request) -> tuple:
    """The generation settings a backend received with a request."""
    return tuple((name, getattr(request, REQUEST_FIELD.get(name, name))) for name in SETTINGS)


def _examples(request) -> int:
    """The few-shot examples in an extraction request's system message."""
    return len(re.findall(r"^Example \d+$", request.messages[0]["content"], re.M))


def _extractions(requests) -> list:
    """The first step's requests (extract.jinja's system message)."""
    return [r for r in requests if "You extract a knowledge graph" in r.messages[0]["content"]]


def _check(results: dict, manifest: dict, samples: dict, given: dict) -> None:
    """What the files say ran equals what the recording backends received; `given`: the flags'
    values as parsed (None: not given)."""
    received = recording.RECEIVED
    configs, config = results["configs"], results["config"]
    # Every candidate request used one task's generation settings, each task's is used.
    asked = {_received(r) for r in received["candidate"]}
    recorded = {_settings(configs[t]["generation_kwargs"]) for t in results["samples"]}
    assert asked == recorded
    for task in results["samples"]:
        assert manifest["tasks"][task]["generation_kwargs"] == configs[task]["generation_kwargs"]
        for line in samples[task]:
            for call in line["arguments"].values():
                settings = {
                    k: v for k, v in call["arg_1"].items() if k not in ("step", "iteration")
                }
                assert _settings(settings) == _settings(configs[task]["generation_kwargs"])
        overrides = dict(given["gen_kwargs"] or {})
        if overrides.pop("do_sample", None) is False:  # greedy
            overrides["temperature"] = 0.0
        for key, value in overrides.items():
            assert configs[task]["generation_kwargs"][key] == value
        if given["seed"] is not None and given["seed"][2] is not None:
            assert configs[task]["generation_kwargs"]["seed"] == given["seed"][2]
    assert config["gen_kwargs"] == (given["gen_kwargs"] or {})
    # lm-eval's four seeds.
    seeds = given["seed"] or (0, 1234, None, 1234)
    assert [config[k] for k in ("random_seed", "numpy_seed", "fewshot_seed")] == [
        seeds[0],
        seeds[1],
        seeds[3],
    ]
    used = {r.seed for r in received["candidate"]}
    assert config["torch_seed"] == (used.pop() if len(used) == 1 else None)
    if seeds[0] is not None:
        random.seed(seeds[0])
        assert recording.GLOBAL_STATE["random"] == random.getstate()
    if seeds[1] is not None:
        np.random.seed(seeds[1])
        state, seen = np.random.get_state(legacy=False)["state"], recording.GLOBAL_STATE["numpy"]
        assert np.array_equal(seen["state"]["key"], state["key"])
        assert seen["state"]["pos"] == state["pos"]
    # Few-shot examples: what n-shot and the task configs say, the prompts hold.
    shots = {_examples(r) for r in _extractions(received["candidate"])}
    assert shots == {results["n-shot"][t] for t in results["samples"]}
    assert shots == {configs[t]["num_fewshot"] for t in results["samples"]}
    if given["num_fewshot"] is not None:
        assert shots == {given["num_fewshot"]}
    # The system instruction, recorded as lm-eval does, is what the prompts begin with.
    instruction = given["system_instruction"]
    assert results["system_instruction"] == instruction
    if instruction is not None:
        assert results["system_instruction_sha"] is not None
        for request in _extractions(received["candidate"]):
            assert request.messages[0]["content"].startswith(instruction)
    # --limit as given, and the spans it kept, which are the spans the backend was asked about.
    assert config["limit"] == given["limit"]
    for task, lines in samples.items():
        counts = results["n-samples"][task]
        limit = given["limit"]
        expected = counts["original"]
        if isinstance(limit, float):
            expected = math.ceil(counts["original"] * limit)
        elif limit is not None:
            expected = min(limit, counts["original"])
        assert counts["effective"] == len(lines) == expected
        assert config["limit_spans"] == (None if limit is None else expected)
    spans = {r.messages[-1]["content"] for r in _extractions(received["candidate"])}
    assert len(spans) == max(len(lines) for lines in samples.values())
    # Batch size as given, and as used.
    assert config["batch_size"] == given["batch_size"]
    assert config["batch_sizes"] == [given["batch_size"] or 8]
    # Each judge's settings as recorded are those its requests carried.
    members = results["judges"]["members"]
    assert {_received(r) for r in received["judge"]} == {
        _settings(m["generation_kwargs"]) for m in members
    }
    for member in members:
        for key, value in JUDGES[member["name"]].items():
            assert member["generation_kwargs"][key] == value


NOT_GIVEN = {
    "gen_kwargs": None,
    "seed": None,
    "num_fewshot": None,
    "system_instruction": None,
    "limit": None,
    "batch_size": None,
}
# One case per override flag: (flags, their values as parsed).
OVERRIDES = [
    (["--gen_kwargs", "max_gen_toks=64"], {"gen_kwargs": {"max_gen_toks": 64}}),
    (
        ["--gen_kwargs", "temperature=0.8", "top_p=0.95", "--gen_kwargs", "top_k=40"],
        {"gen_kwargs": {"temperature": 0.8, "top_p": 0.95, "top_k": 40}},
    ),
    (
        ["--gen_kwargs", "do_sample=False,temperature=0.8"],
        {"gen_kwargs": {"do_sample": False, "temperature": 0.8}},
    ),
    (
        ["--gen_kwargs", '{"temperature": 0.7, "seed": 5}'],
        {"gen_kwargs": {"temperature": 0.7, "seed": 5}},
    ),
    (["--seed", "0,None,8,52"], {"seed": (0, None, 8, 52)}),
    (["--seed", "7"], {"seed": (7, 7, 7, 7)}),
    (["--num_fewshot", "0"], {"num_fewshot": 0}),
    (
        ["--system_instruction", "You are an analyst."],
        {"system_instruction": "You are an analyst."},
    ),
    (["--limit", "0.5"], {"limit": 0.5}),
    (["--limit", "1"], {"limit": 1}),
    (["--batch_size", "3"], {"batch_size": 3}),
]


@pytest.mark.parametrize(("flags", "values"), OVERRIDES, ids=[" ".join(f) for f, _ in OVERRIDES])
def test_the_results_say_what_each_override_made_the_backend_do(tmp_path, flags, values):
    limit = [] if values.get("limit") else ["--limit", "2"]
    given = NOT_GIVEN | {"limit": 2} | values
    _check(*_run(tmp_path, flags + limit), given)


def test_every_generation_setting_has_test_values():
    assert set(GenerationKwargs.model_fields) <= set(GEN_VALUES)


@pytest.mark.slow
def test_random_combinations_of_flags_are_recorded_as_they_ran(tmp_path):
    """A property test: random combinations of every override flag, each checked as above."""
    rng = random.Random(20261204)
    for case in range(8):
        given = dict(NOT_GIVEN)
        flags = []
        gen = {key: rng.choice(values) for key, values in GEN_VALUES.items() if rng.random() < 0.5}
        if gen:
            given["gen_kwargs"] = gen
            flags += ["--gen_kwargs", ",".join(f"{k}={v}" for k, v in gen.items())]
        if rng.random() < 0.5:
            seeds = tuple(rng.choice([None, 0, 5, 1234]) for _ in range(4))
            if seeds[2] is not None and "seed" in gen:  # two generation seeds are refused
                seeds = (*seeds[:2], gen["seed"], seeds[3])
            given["seed"] = seeds
            flags += ["--seed", ",".join(str(s) for s in seeds)]
        if rng.random() < 0.5:
            given["num_fewshot"] = rng.choice([0, 1])
            flags += ["--num_fewshot", str(given["num_fewshot"])]
        if rng.random() < 0.5:
            given["system_instruction"] = rng.choice(["Be exact.", "You read 10-Ks."])
            flags += ["--system_instruction", given["system_instruction"]]
        given["limit"] = rng.choice([1, 2, 0.3])
        flags += ["--limit", str(given["limit"])]
        if rng.random() < 0.5:
            given["batch_size"] = rng.choice([1, 2, 5])
            flags += ["--batch_size", str(given["batch_size"])]
        tasks = rng.choice([TASKS, TASKS[:1], ("finreflect_smoke",)])
        try:
            _check(*_run(tmp_path / str(case), flags, tasks), given)
        except AssertionError as exc:
            raise AssertionError(f"case {case}: {' '.join(flags)} {tasks}: {exc}") from exc


LEFT_OUT = {
    "lm_eval_version": "not lm-eval: `finreflect_eval_version` says which finreflect-eval ran",
    "upper_git_hash": "lm-eval's parent-folder commit, for a submodule checkout",
}


@pytest.mark.slow
def test_the_results_file_has_every_key_lm_eval_writes(tmp_path, tiny_model_dir):
    """lm-eval 0.4.13 itself runs a tiny random model (its `hf` backend, offline) on a local
    task, and writes its results file: each of its top-level and `config` keys is in ours,
    but the ones docs/judges.md lists as left out."""
    evaluator = require("lm_eval.evaluator", "[dev] extra")
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    data = tmp_path / "data.jsonl"
    data.write_text('{"q": "a?", "a": "b"}\n{"q": "c?", "a": "d"}\n')
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    task = {
        "task": "tiny_gen",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "{{q}}",
        "doc_to_target": "{{a}}",
        "generation_kwargs": {"until": ["\n"], "max_gen_toks": 4},
        "metric_list": [{"metric": "exact_match"}],
    }
    (tasks / "tiny.yaml").write_text(yaml.safe_dump(task))
    tracker = EvaluationTracker(output_path=str(tmp_path / "lm_eval"))
    theirs = evaluator.simple_evaluate(
        model="hf",
        model_args=f"pretrained={tiny_model_dir},dtype=float32",
        tasks=["tiny_gen"],
        task_manager=TaskManager(include_path=str(tasks)),
        evaluation_tracker=tracker,
        device="cpu",
        batch_size=1,
    )
    tracker.save_results_aggregated(results=theirs, samples=None)
    (written,) = (tmp_path / "lm_eval").rglob("results_*.json")
    theirs = json.loads(written.read_text())

    ours, _, _ = _run(tmp_path / "ours", ["--limit", "1"], tasks=("finreflect_smoke",))
    missing = set(theirs) - set(ours) - set(LEFT_OUT)
    assert not missing, f"top-level keys lm-eval writes and we do not: {sorted(missing)}"
    missing = set(theirs["config"]) - set(ours["config"])
    assert not missing, f"config keys lm-eval writes and we do not: {sorted(missing)}"
    page = (REPO / "docs" / "judges.md").read_text()
    for key in LEFT_OUT:
        assert f"`{key}`" in page, f"docs/judges.md does not say why `{key}` is left out"


def test_a_group_run_reads_as_lm_eval_writes_one(tmp_path):
    """lm-eval's `make_table` prints the group's row first and its tasks under it; the group's
    entry has lm-eval's fields and the overall score; a run without a group has no `groups`."""
    utils = require("lm_eval.utils", "[dev] extra")
    # Two spans of two filings: the bootstrap has an interval (one filing gives none).
    results, _, _ = _run(tmp_path / "group", ["--limit", "2"], tasks=("finreflect_smoke",))
    table = utils.make_table(results).splitlines()
    rows = [line.split("|")[1].strip() for line in table[2:] if line.split("|")[1].strip()]
    assert rows[0] == "finreflect_smoke"
    assert set(rows[1:]) == {f"- {t}" for t in results["group_subtasks"]["finreflect_smoke"]}
    group = results["groups"]["finreflect_smoke"]
    assert results["results"]["finreflect_smoke"] == group
    members = results["group_subtasks"]["finreflect_smoke"]
    assert group["sample_len"] == sum(results["results"][t]["sample_len"] for t in members)
    assert group["sample_count"]["faithfulness,none"] == group["sample_len"]
    assert group["overall,none"] == results["overall"]["score"]
    assert isinstance(group["overall_stderr,none"], float)
    assert results["n-shot"]["finreflect_smoke"] == 1
    assert "overall" in results["higher_is_better"]["finreflect_smoke"]

    alone, _, _ = _run(tmp_path / "alone", ["--limit", "1"], tasks=TASKS[:1])
    assert "groups" not in alone
    assert "Groups" not in utils.make_table(alone)


def test_the_summary_begins_with_lm_evals_settings_line(tmp_path, capsys):
    _run(tmp_path, ["--limit", "1", "--gen_kwargs", "max_gen_toks=64", "--batch_size", "2"])
    printed = capsys.readouterr().out
    assert (
        "scripted (responses=support.recording:candidate,batch_size=2), gen_kwargs: "
        "(max_gen_toks=64), limit: 1, num_fewshot: 1, batch_size: 2 (2)"
    ) in printed
    assert re.search(r"^overall: \d", printed, re.M)


def test_two_different_generation_seeds_are_refused(capsys):
    argv = ["run", "--model", "x", "--backend", "scripted", "--gen_kwargs", "seed=3"]
    assert main([*argv, "--seed", "5"]) == 1
    error = capsys.readouterr().err
    assert "--seed gives the generation seed 5, --gen-kwargs seed=3: give one" in error


def test_num_fewshot_above_what_the_split_holds_is_an_error(tmp_path, capsys):
    code = main(
        [
            *("run", "--model", "candidate", "--backend", "scripted", "--model-args"),
            *("responses=support.recording:candidate", "--tasks", TASKS[0]),
            *("--dataset", "sample", "--judges", str(_panel(tmp_path)), "--num_fewshot"),
            *("10", "--output-path", str(tmp_path / "out")),
        ]
    )
    assert code == 1
    assert re.search(
        r"num_fewshot 10, but the few-shot split '\w+' of sample has \d span",
        capsys.readouterr().err,
    )
    assert not list((tmp_path / "out").rglob("*.json*"))  # refused before any run file


@pytest.mark.slow
def test_an_hf_run_records_what_loading_resolved(tmp_path, tiny_model_dir):
    """A real hf model (tiny, random): the dtype `auto` became, the device, the parameter
    count, the batch size `auto` found, the tokenizer's tokens and the context length."""
    require("outlines", "[hf] extra")
    from transformers import AutoConfig, AutoModelForCausalLM

    argv = [
        *("run", "--model", str(tiny_model_dir), "--backend", "hf", "--device", "cpu"),
        *("--model-args", "batch_size=auto,max_batch_size=4", "--tasks", TASKS[0]),
        *("--dataset", "sample", "--limit", "2", "--gen_kwargs", "max_gen_toks=24"),
        *("--judges", str(_panel(tmp_path)), "--no-cache", "--max-invalid-share", "1"),
        *("--output-path", str(tmp_path / "out")),
    ]
    assert main(argv) == 0
    (path,) = (tmp_path / "out").rglob("results_*.json")
    results = json.loads(path.read_text())
    config = results["config"]
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert config["model_dtype"] == "float32"  # `auto` on a CPU
    assert config["device"] == "cpu"
    assert config["model_num_parameters"] == model.num_parameters()
    assert config["batch_size"] == "auto" and config["batch_sizes"] == [4]
    assert (
        results["max_length"] == AutoConfig.from_pretrained(tiny_model_dir).max_position_embeddings
    )
    token, number = results["tokenizer_eos_token"]
    assert token and int(number) == results["eot_token_id"]
    assert results["environment"]["packages"]["transformers"] == results["transformers_version"]
    assert "torch: 2." in results["pretty_env_info"]
