"""lm-eval's habits on our command line: repeated flags read as lm-eval 0.4.13's own parser reads
them, its four seeds, its `ls` and `validate` subcommands, a task YAML path given as a task,
`LMEVAL_LOG_LEVEL`, and for each of its flags we do not take, what to use instead."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
from conftest import require

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import tasks_dir
from finreflect_eval.cli.commands import _hub_log_args, _run_config
from finreflect_eval.cli.parser import build_parser, parse_args
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.runs.hub_log import HubLogArgs
from finreflect_eval.tasks.config import TaskIndex

GPT2 = "lm_eval --model hf --model_args pretrained=gpt2"
MODES = ("single_pass", "multi_pass", "reflection")


def lm_evals_namespace(line: str) -> argparse.Namespace:
    """lm-eval's own reading of a command line (its CLI inserts `run` when no subcommand leads)."""
    harness = require("lm_eval._cli.harness", "[dev] extra")
    cli = harness.HarnessCLI()
    argv = shlex.split(line)[1:]
    if argv[0] not in cli._subparsers.choices:
        argv.insert(0, "run")
    return cli._parser.parse_args(argv)


@dataclass
class Reading:
    """What a command line asks of a run: the model args (with the model as `pretrained`), the
    generation kwargs, the Hub logging and the task list."""

    model_args: dict[str, Any]
    gen_kwargs: dict[str, Any]
    hub: HubLogArgs | None
    tasks: list[str]


def lm_evals_reading(line: str) -> Reading:
    args = lm_evals_namespace(line)
    hub = HubLogArgs.parse(args.hf_hub_log_args) if args.hf_hub_log_args else None
    return Reading(args.model_args or {}, args.gen_kwargs or {}, hub, args.tasks)


def our_reading(line: str) -> Reading:
    args = parse_args(shlex.split(line)[1:])
    config = _run_config(args)
    model_args = {"pretrained": config.model.model, **config.model.args}
    return Reading(model_args, config.gen_kwargs, _hub_log_args(args), config.tasks)


# lm-eval command lines with a flag given more than once: key=value options merge key by key,
# --tasks adds up (in lm-eval 0.4.13 as here).
REPEATED = [
    f"{GPT2} --tasks finreflect_smoke --tasks finreflect_single_pass",
    f"{GPT2} -t finreflect_smoke_single_pass,finreflect_smoke_reflection -t finreflect_reflection",
    f"{GPT2} --tasks finreflect_single_pass finreflect_multi_pass --tasks=finreflect_reflection",
    f"{GPT2} --tasks finreflect --tasks finreflect",
    "lm_eval --model hf --model_args dtype=float16,batch_size=3 --model_args pretrained=gpt2 "
    "--tasks finreflect",
    "lm_eval --model hf -a pretrained=gpt2 -a dtype=float16 --model_args trust_remote_code=True "
    "--tasks finreflect",
    f"{GPT2} dtype=bfloat16 --model_args max_length=4096 --tasks finreflect",
    """lm_eval --model hf --model_args '{"pretrained": "gpt2"}' --model_args dtype=float32 """
    "--tasks finreflect",
    f"""{GPT2} --model_args '{{"dtype": "float32", "max_length": 4096}}' --tasks finreflect""",
    "lm_eval --model hf --model_args=pretrained=gpt2 --model_args=dtype=float32 --tasks=finreflect",
    f"{GPT2},dtype=float32 --model_args dtype=float32 --tasks finreflect",  # the same value again
    f"{GPT2} --gen_kwargs temperature=0 --gen_kwargs max_gen_toks=256 --tasks finreflect",
    f"{GPT2} --gen_kwargs temperature=0.7,max_gen_toks=128 --gen_kwargs seed=7 --tasks finreflect",
    f"""{GPT2} --gen_kwargs '{{"temperature": 0}}' --gen_kwargs max_gen_toks=64 -t finreflect""",
    f"{GPT2} --tasks finreflect --hf_hub_log_args hub_results_org=EleutherAI --hf_hub_log_args "
    "push_results_to_hub=True,public_repo=False",
    f"{GPT2} --tasks finreflect --hf_hub_log_args hub_results_org=EleutherAI "
    "details_repo_name=evals --hf_hub_log_args push_samples_to_hub=True",
    f"""{GPT2} --hf_hub_log_args '{{"hub_results_org": "EleutherAI"}}' --hf_hub_log_args """
    "push_results_to_hub=True --tasks finreflect",
    "lm-eval run --model hf -a pretrained=gpt2 -t finreflect_smoke -a dtype=float32 -t finreflect "
    "--gen_kwargs max_gen_toks=32 --gen_kwargs temperature=0",
    "lm_eval --model vllm --model_args pretrained=Qwen/Qwen3-8B --model_args "
    "tensor_parallel_size=2,gpu_memory_utilization=0.8 --tasks finreflect",
]


@pytest.mark.parametrize("line", REPEATED, ids=[str(i) for i in range(len(REPEATED))])
def test_a_repeated_flag_reads_as_lm_eval_reads_it(line):
    assert our_reading(line) == lm_evals_reading(line)


def test_the_repeated_lines_repeat_a_flag():
    assert len(REPEATED) >= 15
    for line in REPEATED:
        flags = [t.partition("=")[0] for t in shlex.split(line) if t.startswith("-")]
        names = [{"-a": "--model_args", "-t": "--tasks"}.get(f, f) for f in flags]
        assert len(names) > len(set(names)), line


# The one deliberate difference: a key given two different values. lm-eval keeps the last one
# (with a log warning); we refuse the command line, naming the key and both values.
CONFLICTS = [
    (f"{GPT2} --model_args dtype=float16 -a dtype=bfloat16", "model_args", "float16", "bfloat16"),
    (f"{GPT2},dtype=float16,dtype=bfloat16", "model_args", "float16", "bfloat16"),
    (
        f"""{GPT2} -a '{{"dtype": "float16"}}' -a dtype=bfloat16""",
        "model_args",
        "float16",
        "bfloat16",
    ),
    (f"{GPT2} --model_args pretrained=gpt2-medium", "model_args", "gpt2", "gpt2-medium"),
    (f"{GPT2} --gen_kwargs temperature=0 --gen_kwargs temperature=0.7", "gen_kwargs", 0, 0.7),
    (
        f"{GPT2} --hf_hub_log_args hub_results_org=A --hf_hub_log_args hub_results_org=B",
        "hf_hub_log_args",
        "A",
        "B",
    ),
]
KEYS = {"float16": "dtype", "gpt2": "pretrained", 0: "temperature", "A": "hub_results_org"}


@pytest.mark.parametrize(("line", "dest", "first", "last"), CONFLICTS)
def test_a_key_given_two_values_is_refused_where_lm_eval_keeps_the_last(line, dest, first, last):
    line += " --tasks finreflect"
    key = KEYS[first]
    assert getattr(lm_evals_namespace(line), dest)[key] == last  # lm-eval: the last, and a log line
    message = f"--{dest}: key '{key}' given twice ({first!r} and {last!r}): keep one"
    with pytest.raises(FinReflectError, match=f"^{re.escape(message)}$"):
        our_reading(line)


# --seed: one value (all four), or random,numpy,torch[,fewshot] ("None": leave it unseeded).
SEEDS = [
    ("42", [42, 42, 42, 42]),
    ("0,1234,42,1234", [0, 1234, 42, 1234]),
    ("1,2,3", [1, 2, 3, 1234]),  # lm-eval fills the few-shot seed with its default
    ("0,None,8,52", [0, None, 8, 52]),
    ("None", [None, None, None, None]),
    ("none,5,6,7", [None, 5, 6, 7]),
]


@pytest.mark.parametrize(("value", "seeds"), SEEDS, ids=[s[0] for s in SEEDS])
def test_seed_gives_lm_evals_four_seeds_to_the_run(value, seeds):
    line = f"{GPT2} --tasks finreflect --seed {value}"
    assert lm_evals_namespace(line).seed == seeds
    config = _run_config(parse_args(shlex.split(line)[1:]))
    assert [config.random_seed, config.numpy_seed, config.seed, config.fewshot_seed] == seeds


def test_without_seed_the_run_keeps_its_default_seeds():
    config = _run_config(parse_args(["--model", "gpt2"]))
    defaults = {f.name: f.default for f in fields(RunConfig)}
    names = ("seed", "random_seed", "numpy_seed", "fewshot_seed")
    assert {name: getattr(config, name) for name in names} == {
        name: defaults[name] for name in names
    }
    assert (config.seed, config.random_seed, config.numpy_seed, config.fewshot_seed) == (
        None,
        0,
        1234,
        1234,
    )


@pytest.mark.parametrize("value", ["1,2", "1,2,3,4,5", "x", "1.5", "1,,2,3"])
def test_a_seed_lm_eval_refuses_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit, match=r"^2$"):
        lm_evals_namespace(f"{GPT2} --tasks finreflect --seed {value}")
    capsys.readouterr()
    with pytest.raises(SystemExit, match=r"^2$"):
        parse_args(["--model", "gpt2", "--seed", value])
    assert "--seed" in capsys.readouterr().err


def output_of(argv: list[str], capsys) -> str:
    args = parse_args(argv)
    args.func(args)
    return capsys.readouterr().out


def test_ls_lists_as_tasks_list(capsys):
    listing = output_of(["tasks", "list"], capsys)
    assert "| finreflect_single_pass |" in listing and "| finreflect | group:" in listing
    for line in ("lm-eval ls", "lm-eval ls tasks"):
        lm_evals_namespace(line)  # lm-eval's own forms
        assert output_of(shlex.split(line)[1:], capsys) == listing
    groups = output_of(["ls", "groups"], capsys)
    assert "| finreflect | group:" in groups and "| finreflect_single_pass |" not in groups
    subtasks = output_of(["ls", "subtasks"], capsys)
    assert "| finreflect_single_pass |" in subtasks and "group:" not in subtasks
    tags = output_of(["ls", "tags"], capsys)
    (smoke,) = re.findall(r"^\| smoke \| (.*) \|$", tags, re.M)
    assert set(smoke.split(", ")) == {f"finreflect_smoke_{mode}" for mode in MODES}
    assert "group:" not in tags


def test_ls_and_validate_take_an_include_path(tmp_path, capsys):
    task = f"include: {tasks_dir() / 'finreflect' / '_base.yaml'}\ntask: mine\nmode: single_pass\n"
    (tmp_path / "mine.yaml").write_text(task)
    for line in (
        f"lm-eval ls tasks --include_path {tmp_path}",
        f"lm-eval ls --include_path {tmp_path}",
    ):
        lm_evals_namespace(line)
        assert "| mine | single_pass |" in output_of(shlex.split(line)[1:], capsys)
    line = f"lm-eval validate --tasks mine --include_path {tmp_path}"
    lm_evals_namespace(line)
    assert "ok  mine" in output_of(shlex.split(line)[1:], capsys)


def test_validate_is_tasks_validate(capsys):
    names = ["finreflect_smoke_single_pass", "finreflect_smoke_reflection"]
    ours = output_of(["tasks", "validate", "--tasks", *names], capsys)
    assert "ok  finreflect_smoke_single_pass" in ours and "2 task(s) valid" in ours
    for line in (
        f"lm-eval validate --tasks {','.join(names)}",
        f"lm-eval validate -t {','.join(names)}",
    ):
        lm_evals_namespace(line)
        assert output_of(shlex.split(line)[1:], capsys) == ours
    assert output_of(["tasks", "validate", "--tasks", ",".join(names)], capsys) == ours
    assert output_of(["validate", "--tasks", names[0], "--tasks", names[1]], capsys) == ours


# A sample value for each lm-eval run flag that takes one (by its destination).
SAMPLE_VALUES = {
    "config": "my_config.yaml",
    "tasks": "finreflect",
    "model": "hf",
    "model_args": "pretrained=gpt2",
    "limit": "2",
    "use_cache": "cache.sqlite",
    "num_fewshot": "1",
    "batch_size": "2",
    "max_batch_size": "8",
    "device": "cpu",
    "gen_kwargs": "temperature=0",
    "output_path": "out",
    "samples": '{"finreflect": [0, 1]}',
    "system_instruction": "Be brief.",
    "include_path": ".",
    "verbosity": "DEBUG",
    "wandb_args": "project=evals",
    "wandb_config_args": "team=a",
    "trackio_args": "project=evals",
    "hf_hub_log_args": "hub_results_org=EleutherAI",
    "seed": "3",
    "metadata": "max_seq_lengths=[4096]",
}
# lm-eval's run flags we refuse, each with what to use instead.
REFUSED = {
    "--config",
    "-C",
    "--cache_requests",
    "--check_integrity",
    "--write_out",
    "-w",
    "--show_config",
    "--wandb_args",
    "--wandb_config_args",
    "--trackio_args",
    "--predict_only",
    "-x",
    "--confirm_run_unsafe_code",
    "--metadata",
}


def lm_evals_run_flags() -> list[tuple[str, argparse.Action]]:
    harness = require("lm_eval._cli.harness", "[dev] extra")
    run = harness.HarnessCLI()._subparsers.choices["run"]
    return [(flag, action) for action in run._actions for flag in action.option_strings]


def test_lm_eval_has_the_flags_this_test_knows():
    flags = {flag for flag, _ in lm_evals_run_flags()}
    assert flags > REFUSED | {"--model_args", "--seed", "-v", "--trackio_args"}
    assert len(flags) > 40


def test_every_lm_eval_flag_is_taken_or_says_what_to_use_instead(capsys):
    ours = build_parser()._subparsers._group_actions[0].choices
    run_options = set(ours["run"]._option_string_actions)
    refused = set()
    for flag, action in lm_evals_run_flags():
        if flag in ("-h", "--help"):
            continue
        value = [] if action.nargs in (0, "?") else [SAMPLE_VALUES[action.dest]]
        model = [] if action.dest == "model" else ["--model", "hf"]
        argv = ["run", *model, "--model_args", "pretrained=gpt2", flag, *value]
        if action.dest == "model_args":
            argv = ["run", "--model", "hf", flag, *value]
        lm_evals_namespace("lm-eval " + shlex.join(argv))  # a real lm-eval command line
        try:
            args = parse_args(argv)
        except SystemExit as exit:
            assert exit.code == 2, flag
            err = capsys.readouterr().err.strip().splitlines()[-1]
            match = re.fullmatch(
                rf"finreflect-eval run: error: unrecognized argument {flag}: (.+)", err
            )
            assert match, err
            refused.add(flag)
            instead = match.group(1)
            for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", instead):  # options it names exist
                assert option in run_options, (flag, option)
            for command in re.findall(r"`finreflect-eval ([a-z-]+)", instead):
                assert command in ours, (flag, command)
            continue
        assert flag in args.typed.values(), flag  # taken as the flag, not as another's value
        _run_config(args)
    assert refused == REFUSED


def test_refused_flags_answer_in_the_users_spelling(capsys):
    with pytest.raises(SystemExit, match=r"^2$"):
        parse_args(["--model", "gpt2", "--show-config"])
    assert "unrecognized argument --show-config: " in capsys.readouterr().err


TASK_FILE = """\
include: {base}
task: {name}
mode: single_pass
"""


def task_file(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(TASK_FILE.format(base=tasks_dir() / "finreflect" / "_base.yaml", name=name))
    return path


def test_a_task_yaml_path_runs_the_task_it_defines(tmp_path, monkeypatch):
    path = task_file(tmp_path / "my_tasks", "my_yaml_task")
    monkeypatch.chdir(tmp_path)
    line = "lm_eval --model hf --model_args pretrained=gpt2 --tasks my_tasks/my_yaml_task.yaml"
    assert lm_evals_namespace(line).tasks == ["my_tasks/my_yaml_task.yaml"]
    config = _run_config(parse_args(shlex.split(line)[1:]))
    assert config.tasks == ["my_yaml_task"]
    assert [p.resolve() for p in config.include_paths] == [path.parent.resolve()]
    ours = "--model gpt2 --tasks my_yaml_task --include_path my_tasks"
    assert config == _run_config(parse_args(shlex.split(ours)))
    (task,) = TaskIndex(config.include_paths).resolve(config.tasks)
    assert task.path.resolve() == path.resolve()


def test_a_run_of_a_task_yaml_path_uses_the_tasks_own_panel(tmp_path, cli, env):
    """The whole command: the task from the file runs, judged by the panel its `judges` field
    names (looked up through the file's folder)."""
    from support.runs import candidate_file, panel_file

    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all", name="own-panel")
    smoke = tasks_dir() / "finreflect_smoke" / "finreflect_smoke_single_pass.yaml"
    path = tmp_path / "my_tasks" / "from_file.yaml"
    path.parent.mkdir()
    path.write_text(f"include: {smoke}\ntask: from_file\njudges: {panel}\n")
    result = cli(
        *("--model", "candidate", "--backend", "scripted"),
        *("--model_args", f"responses={candidate_file(tmp_path)}"),
        *("--tasks", str(path), "--dataset", "sample", "--limit", "1"),
        *("--output_path", str(tmp_path / "out")),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (results,) = (tmp_path / "out" / "candidate").glob("results_*_own-panel.json")
    assert list(json.loads(results.read_text())["results"]) == ["from_file"]


def test_task_yaml_paths_mix_with_names_groups_and_include_paths(tmp_path):
    first = task_file(tmp_path / "a", "task_a")
    second = task_file(tmp_path / "b" / "deeper", "task_b")
    (tmp_path / "b" / "group.yaml").write_text("group: my_group\ntask: [task_b]\n")
    argv = ["--model", "gpt2", "--include_path", str(tmp_path / "b"), "--tasks", str(first)]
    argv += ["finreflect_smoke", str(tmp_path / "b" / "group.yaml"), "-t", str(second)]
    config = _run_config(parse_args(argv))
    assert config.tasks == ["task_a", "finreflect_smoke", "my_group", "task_b"]
    # b is already an include path (it holds both b files): only a's folder is added
    assert config.include_paths == [tmp_path / "b", tmp_path / "a"]
    bundled = tasks_dir() / "finreflect" / "finreflect_reflection.yaml"
    config = _run_config(parse_args(["--model", "gpt2", "--tasks", str(bundled)]))
    assert config.tasks == ["finreflect_reflection"] and config.include_paths == []


def test_a_missing_or_non_task_yaml_path_is_one_clear_line(tmp_path, cli):
    with pytest.raises(
        FinReflectError, match=r"^--tasks nowhere/missing\.yaml: no such task file$"
    ):
        _run_config(parse_args(["--model", "gpt2", "--tasks", "nowhere/missing.yaml"]))
    base = tasks_dir() / "finreflect" / "_base.yaml"
    with pytest.raises(FinReflectError, match=r"_base\.yaml: defines no task or group \(a file "):
        _run_config(parse_args(["--model", "gpt2", "-t", str(base)]))
    result = cli("run", "--model", "gpt2", "--tasks", str(tmp_path / "missing.yaml"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"finreflect-eval: error: --tasks {tmp_path / 'missing.yaml'}: no such task file"
    ]
    result = cli("validate", "--tasks", str(tmp_path / "missing.yaml"))
    assert result.returncode == 1 and "missing.yaml: no such task file" in result.stderr


def test_validate_takes_a_task_yaml_path(tmp_path, capsys):
    path = task_file(tmp_path, "checked")
    assert "ok  checked" in output_of(["validate", "--tasks", str(path)], capsys)


def test_validate_of_a_task_yaml_path_reads_that_file_alone(tmp_path, capsys):
    """The file and the base it includes; not the folder's other YAML (a panel, a draft)."""
    folder = tmp_path / "mine"
    path = task_file(folder, "checked")
    task_file(folder, "sibling")
    (folder / "panel.yaml").write_text("panel: p\njudges: [{name: j, model: org/m}]\n")
    (folder / "draft.yaml").write_text("task: draft\nmode: sideways\n")
    output = output_of(["tasks", "validate", "--tasks", str(path)], capsys)
    assert f"ok  checked  ({path})" in output
    assert "sibling" not in output and "1 task(s) valid" in output
    # A group file's tasks come from the index (bundled, --include-path), as for a name.
    group = folder / "group.yaml"
    group.write_text("group: mine\ntask: [finreflect_smoke_single_pass]\n")
    output = output_of(["tasks", "validate", "--tasks", str(group)], capsys)
    assert "ok  finreflect_smoke_single_pass" in output and "1 task(s) valid" in output


@pytest.mark.parametrize(
    ("environment", "argv", "level"),
    [
        ("debug", ["tasks", "list"], "DEBUG"),
        ("WARNING", ["--model", "gpt2"], "WARNING"),
        ("ERROR", ["--verbosity", "INFO", "tasks", "list"], "INFO"),  # the flag wins
        ("ERROR", ["tasks", "list", "-v", "WARNING"], "WARNING"),
        ("ERROR", ["ls", "--verbose"], "DEBUG"),
        ("", ["tasks", "list"], "INFO"),
    ],
)
def test_lmeval_log_level_is_the_verbosity_unless_a_flag_says(
    monkeypatch, environment, argv, level
):
    monkeypatch.setenv("LMEVAL_LOG_LEVEL", environment)
    assert parse_args(argv).verbosity == level


def test_an_lmeval_log_level_that_is_no_level_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setenv("LMEVAL_LOG_LEVEL", "loud")
    with pytest.raises(SystemExit, match=r"^2$"):
        parse_args(["tasks", "list"])
    assert "LMEVAL_LOG_LEVEL=loud is not a log level" in capsys.readouterr().err


def test_lmeval_log_level_quietens_a_command(tmp_path, cli):
    """A task that overrides a bundled one logs a warning: LMEVAL_LOG_LEVEL=ERROR hides it, and
    an explicit --verbosity brings it back."""
    task_file(tmp_path, "finreflect_reflection")
    warned = cli("tasks", "list", "--include-path", str(tmp_path))
    assert warned.returncode == 0 and "overrides an earlier definition" in warned.stderr
    quiet = cli("ls", "--include_path", str(tmp_path), env={"LMEVAL_LOG_LEVEL": "ERROR"})
    assert quiet.returncode == 0 and "overrides" not in quiet.stderr
    assert quiet.stdout == warned.stdout
    loud = cli(
        "ls", "--include_path", str(tmp_path), "-v", "WARNING", env={"LMEVAL_LOG_LEVEL": "ERROR"}
    )
    assert "overrides an earlier definition" in loud.stderr


def test_help_tells_of_what_was_added():
    commands = build_parser()._subparsers._group_actions[0].choices
    run_help = commands["run"].format_help()
    assert "random,numpy,torch[,fewshot]" in run_help and "task YAML file" in run_help
    top = build_parser().format_help()
    assert "ls" in top and "validate" in top and "LMEVAL_LOG_LEVEL" in top
