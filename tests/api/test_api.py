"""The Python API (`simple_evaluate`, `evaluate_run`), as lm-eval's, against the command line's
own results."""

import inspect
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub
import lm_eval.evaluator
import pytest
from lm_eval.utils import make_table
from support import scripted_judges
from support.runs import TRIPLES, panel_file, run_args

import finreflect_eval
from finreflect_eval._util import progress
from finreflect_eval._util.errors import ArgumentValueError, FinReflectError
from finreflect_eval.api import evaluate as api
from finreflect_eval.models.scripted import ScriptedModel
from finreflect_eval.pipeline.judging import Panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.tasks.config import TaskIndex

TASK = "finreflect_smoke_single_pass"
RESPONDERS = ("accepts_all", "rejects_all", "accepts_all")
SCORES = ("results", "groups", "details", "overall", "agreement", "n-samples", "versions")


def loaded_judges():
    return [ScriptedModel(responses=getattr(scripted_judges, name)) for name in RESPONDERS]


def test_simple_evaluate_with_loaded_models_equals_the_cli_and_prints_nothing(
    cli, env, tmp_path, capfd
):
    panel = panel_file(tmp_path / "cli", *RESPONDERS)
    result = cli(*run_args(tmp_path / "cli", panel, TASK), env=env)
    assert result.returncode == 0, result.stderr
    (path,) = (tmp_path / "cli" / "out" / "candidate").glob("results_*.json")
    expected = json.loads(path.read_text())
    assert f"{TASK} extract: 100.0%" in result.stderr  # the command line shows progress

    capfd.readouterr()
    candidate = ScriptedModel("candidate", responses=[json.dumps(TRIPLES)])
    results = finreflect_eval.simple_evaluate(
        model=candidate,
        tasks=[TASK],
        judges=loaded_judges(),
        dataset="sample",
        limit=3,
        output_path=tmp_path / "api",
    )
    assert capfd.readouterr() == ("", "")  # no progress bars either
    got = results
    for details in (got["details"][TASK], expected["details"][TASK]):
        details.pop("seconds")  # wall time
    for block in SCORES:
        mine, theirs = got.get(block), expected.get(block)  # `groups`: none without a group
        assert mine == theirs, (block, _diff(mine, theirs))
    assert got["results"][TASK]["faithfulness,none"] == 100.0  # the majority of 2 accepts
    assert candidate.requests, "the loaded model itself answered"
    assert (tmp_path / "api" / "candidate").is_dir()

    # Scoring the saved run again, and judging it again with a named panel, from Python.
    rescored = finreflect_eval.evaluate_run(tmp_path / "api" / "candidate")
    assert rescored["results"] == got["results"]
    panel = panel_file(tmp_path / "panel", *RESPONDERS)
    rejudged = finreflect_eval.evaluate_run(tmp_path / "api" / "candidate", judges=panel)
    assert rejudged["judges"]["panel"] == "scripted-test"
    assert rejudged["results"] == got["results"]
    assert capfd.readouterr() == ("", "")


def test_simple_evaluate_takes_the_model_by_name_in_either_form(tmp_path):
    responses = str(tmp_path / "candidate.json")
    Path(responses).write_text(json.dumps([json.dumps(TRIPLES)]))
    judge = ScriptedModel(responses=scripted_judges.accepts_all)
    panel = Panel.from_models({"a": judge, "b": judge})
    ours = finreflect_eval.simple_evaluate(
        "candidate",
        f"responses={responses}",
        TASK,
        judges=panel,
        backend="scripted",
        dataset="sample",
        limit=2,
        output_path=tmp_path / "ours",
    )
    lm_eval_form = finreflect_eval.simple_evaluate(
        model="scripted",
        model_args={"pretrained": "candidate", "responses": responses},
        tasks=TASK,
        judges=panel,
        dataset="sample",
        limit=0.1,  # of the sample's 24 spans: 3 (rounded up, as lm-eval)
        output_path=tmp_path / "theirs",
        use_cache=False,
    )
    assert ours["config"]["model"] == lm_eval_form["config"]["model"] == "scripted"
    assert ours["model_name"] == lm_eval_form["model_name"] == "candidate"
    assert ours["n-samples"][TASK]["effective"] == 2
    assert lm_eval_form["n-samples"][TASK]["effective"] == 3
    assert not (tmp_path / "theirs" / "cache.sqlite").exists()
    with pytest.raises(FinReflectError, match="batch_size is for a model given by name"):
        finreflect_eval.simple_evaluate(ScriptedModel(), tasks=TASK, judges=panel, batch_size=4)


def by_name(folder: Path) -> dict:
    """`simple_evaluate` arguments of a cheap valid run: a scripted candidate named by name."""
    responses = folder / "candidate.json"
    folder.mkdir(parents=True, exist_ok=True)
    responses.write_text(json.dumps([json.dumps(TRIPLES)]))
    return {
        "model": "candidate",
        "model_args": f"responses={responses}",
        "backend": "scripted",
        "tasks": TASK,
        "judges": loaded_judges(),
        "dataset": "sample",
        "limit": 2,
        "output_path": folder / "out",
    }


# (argument, bad value, the exception expected besides FinReflectError)
BAD_SIMPLE_EVALUATE_ARGUMENTS = [
    ("model", 123, TypeError),
    ("model", None, TypeError),
    ("model", "", ValueError),
    ("model_args", [1, 2], TypeError),
    ("model_args", 5, TypeError),
    ("model_args", {1: "a"}, TypeError),
    ("tasks", None, TypeError),
    ("tasks", {1, 2}, TypeError),
    ("tasks", [TASK, 3], TypeError),
    ("judges", ["a", "b", "c"], TypeError),
    ("judges", {"a": "b"}, TypeError),
    ("judges", [], ValueError),
    ("judges", 5, TypeError),
    ("backend", 5, TypeError),
    ("dataset", 5, TypeError),
    ("limit", "2", TypeError),
    ("limit", True, TypeError),
    ("limit", -1, ValueError),
    ("limit", 1.5, ValueError),
    ("num_fewshot", "1", TypeError),
    ("num_fewshot", -1, ValueError),
    ("batch_size", [1], TypeError),
    ("batch_size", "banana", ValueError),
    ("batch_size", "auto:x", ValueError),
    ("batch_size", 0, ValueError),
    ("max_batch_size", "8", TypeError),
    ("device", 0, TypeError),
    ("revision", 2, TypeError),
    ("trust_remote_code", "yes", TypeError),
    ("system_instruction", ["be brief"], TypeError),
    ("fewshot_as_multiturn", "yes", TypeError),
    ("gen_kwargs", 5, TypeError),
    ("gen_kwargs", ["temperature=0", 1], TypeError),
    ("torch_random_seed", "x", TypeError),
    ("random_seed", 1.5, TypeError),
    ("numpy_random_seed", "1", TypeError),
    ("fewshot_random_seed", True, TypeError),
    ("bootstrap_iters", "1000", TypeError),
    ("log_samples", None, TypeError),
    ("apply_chat_template", None, TypeError),
    ("verbosity", "LOUD", ValueError),
    ("verbosity", 1.5, TypeError),
    ("output_path", 5, TypeError),
    ("use_cache", 5, TypeError),
    ("include_path", 5, TypeError),
    ("include_path", [5], TypeError),
    ("shard", "0/2", TypeError),
    ("max_invalid_share", 2, ValueError),
    ("max_invalid_share", "0.1", TypeError),
    ("max_judge_failure_share", 1.5, ValueError),
    ("model_args", ["api_key=sk-never-shown", 1], TypeError),
    ("allow_failures", "no", TypeError),
    ("show_progress", "no", TypeError),
    ("judges", "nosuch", ValueError),  # an unknown panel: the argument named, not only the panel
]


@pytest.mark.parametrize(("name", "value", "error"), BAD_SIMPLE_EVALUATE_ARGUMENTS)
def test_simple_evaluate_names_a_bad_argument_before_any_work(tmp_path, name, value, error):
    arguments = by_name(tmp_path)
    if name in ("batch_size", "max_batch_size", "device", "revision", "trust_remote_code"):
        arguments["backend"] = "hf"  # options of the hf backend; nothing loads before the error
    with pytest.raises(error, match=rf"^{name}\b") as raised:
        finreflect_eval.simple_evaluate(**{**arguments, name: value})
    assert isinstance(raised.value, FinReflectError)
    assert "sk-never-shown" not in str(raised.value)
    assert not (tmp_path / "out").exists()


BAD_EVALUATE_RUN_ARGUMENTS = [
    ("samples", None, TypeError),
    ("samples", 5, TypeError),
    ("samples", [], ValueError),
    ("samples", ["run", 1], TypeError),
    ("judges", ["a", "b", "c"], TypeError),
    ("use_cache", 5, TypeError),
    ("include_path", 5, TypeError),
    ("max_invalid_share", -0.1, ValueError),
    ("allow_failures", 1, TypeError),
    ("show_progress", None, TypeError),
]


@pytest.mark.parametrize(("name", "value", "error"), BAD_EVALUATE_RUN_ARGUMENTS)
def test_evaluate_run_names_a_bad_argument(tmp_path, name, value, error):
    arguments = {"samples": tmp_path / "run", name: value}
    with pytest.raises(error, match=rf"^{name}\b") as raised:
        finreflect_eval.evaluate_run(**arguments)
    assert isinstance(raised.value, FinReflectError)


def test_simple_evaluate_takes_paths_and_a_single_include_path(tmp_path):
    arguments = by_name(tmp_path)
    smoke = TaskIndex().tasks[TASK].path
    (tmp_path / "more-tasks").mkdir()
    (tmp_path / "more-tasks" / "mine.yaml").write_text(f"include: {smoke}\ntask: my_task\n")
    sample = Path(finreflect_eval.__file__).parent / "sample"
    results = finreflect_eval.simple_evaluate(
        **{**arguments, "model": Path("candidate"), "dataset": sample, "tasks": "my_task"},
        include_path=str(tmp_path / "more-tasks"),  # one folder (lm-eval's form), not a list
        use_cache=tmp_path / "cache.sqlite",
    )
    assert results["model_name"] == "candidate"
    assert results["n-samples"]["my_task"]["effective"] == 2
    assert (tmp_path / "cache.sqlite").is_file()


def test_simple_evaluate_returns_the_results_file_as_a_dict(tmp_path):
    """lm-eval's callers read it as they read lm-eval's: `make_table`, `r["results"]`,
    `json.dumps`; `samples` holds each task's sample records unless `log_samples=False`."""
    arguments = by_name(tmp_path)
    results = finreflect_eval.simple_evaluate(**arguments)
    json.dumps(results)
    rows = [
        [cell.strip() for cell in row.split("|")[1:-1]]
        for row in make_table(results).split("\n")[2:-1]
    ]
    metrics = {key.split(",")[0] for key in results["results"][TASK] if key.endswith(",none")}
    assert {row[0] for row in rows} - {""} == {TASK}
    assert {row[4] for row in rows} == {metric for metric in metrics if "_stderr" not in metric}

    folder = tmp_path / "out" / "candidate"
    (path,) = folder.glob("results_*.json")
    written = json.loads(path.read_text())
    assert {**results, "samples": written["samples"]} == written
    lines = (folder / written["samples"][TASK]).read_text().splitlines()
    assert results["samples"][TASK] == [json.loads(line) for line in lines]

    again = {**arguments, "output_path": tmp_path / "again"}
    unlogged = finreflect_eval.simple_evaluate(**again, log_samples=False)
    (path,) = (tmp_path / "again" / "candidate").glob("results_*.json")
    assert unlogged == json.loads(path.read_text())  # the files' names, as in the file


def test_evaluate_run_returns_the_results_file_as_a_dict(tmp_path):
    finreflect_eval.simple_evaluate(**by_name(tmp_path))
    (path,) = (tmp_path / "out" / "candidate").glob("results_*.json")
    written = json.loads(path.read_text())
    rescored = finreflect_eval.evaluate_run(tmp_path / "out" / "candidate")
    assert rescored == written  # the file's names under `samples`: the folder holds the records
    assert TASK in make_table(rescored)


def test_simple_evaluate_writes_nothing_without_output_path(tmp_path, monkeypatch):
    """lm-eval's writes no file unless asked: the run's files go to a temporary folder, removed
    afterwards; a cache file named by `use_cache` is kept."""
    arguments = by_name(tmp_path / "inputs")
    del arguments["output_path"]
    for folder in ("cwd", "tmp"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    results = finreflect_eval.simple_evaluate(**arguments)  # use_cache=True: in the folder too
    assert results["results"][TASK]["faithfulness,none"] == 100.0
    cached = finreflect_eval.simple_evaluate(**arguments, use_cache=str(tmp_path / "kept.sqlite"))
    assert cached["results"] == results["results"]
    assert (tmp_path / "kept.sqlite").is_file()
    assert not list((tmp_path / "cwd").iterdir()) and not list((tmp_path / "tmp").iterdir())


LM_EVAL = inspect.signature(lm_eval.evaluator.simple_evaluate).parameters
# Each of lm-eval's parameters: a value other than its default, and what it does here: honoured
# (a check of the run it configures) or refused (words of the reason given).
LM_EVAL_KEYWORDS: dict[str, tuple[Any, Callable[[RunConfig], bool] | str]] = {
    "model": ("other", lambda config: config.model.model == "other"),
    "model_args": ("responses=x", lambda config: config.model.args == {"responses": "x"}),
    "tasks": ("finreflect_smoke", lambda config: config.tasks == ["finreflect_smoke"]),
    "num_fewshot": (2, lambda config: config.num_fewshot == 2),
    "batch_size": ("auto:4", lambda config: config.model.args["batch_size"] == "auto"),
    "max_batch_size": (8, lambda config: config.model.args["max_batch_size"] == 8),
    "device": ("cpu", lambda config: config.model.args["device"] == "cpu"),
    "use_cache": ("my.sqlite", lambda config: config.cache == Path("my.sqlite")),
    "cache_requests": (True, "every model call is cached already"),
    "rewrite_requests_cache": (True, "no request cache"),
    "delete_requests_cache": (True, "no request cache"),
    "limit": (0.5, lambda config: config.limit == 0.5),
    "samples": ({TASK: [0, 3]}, lambda config: config.samples == {TASK: [0, 3]}),
    "bootstrap_iters": (10, lambda config: config.bootstrap_iters == 10),
    "check_integrity": (True, "tasks validate"),
    "write_out": (True, "returned samples"),
    "log_samples": (False, lambda config: True),  # what is returned: test_..._as_a_dict
    "evaluation_tracker": (object(), "output_path"),
    "system_instruction": ("Be brief.", lambda config: config.system_instruction == "Be brief."),
    "apply_chat_template": ("chatml", "own chat template is always applied"),
    "fewshot_as_multiturn": (False, lambda config: config.fewshot_as_multiturn is False),
    "gen_kwargs": ("temperature=0.5", lambda config: config.gen_kwargs == {"temperature": 0.5}),
    "task_manager": (object(), "include_path"),
    "verbosity": ("DEBUG", lambda _: logging.getLogger("finreflect_eval").level == logging.DEBUG),
    "predict_only": (True, "extract"),
    "random_seed": (5, lambda config: config.random_seed == 5),
    "numpy_random_seed": (6, lambda config: config.numpy_seed == 6),
    "torch_random_seed": (7, lambda config: config.seed == 7),
    "fewshot_random_seed": (8, lambda config: config.fewshot_seed == 8),
    "confirm_run_unsafe_code": (True, lambda config: True),  # no task runs code
    "metadata": ({"key": 1}, "task YAML"),
}


class Reached(Exception):
    """`evaluate` was called: every argument was taken."""


@pytest.fixture
def stop_at_evaluate(monkeypatch):
    """The run's config as `simple_evaluate` hands it over, without running it; the package
    logger's level as it was afterwards (`verbosity` sets it, as lm-eval's sets its own)."""

    def stop(config: RunConfig, *_: Any) -> None:
        raise Reached(config)

    monkeypatch.setattr(api, "evaluate", stop)
    logger = logging.getLogger("finreflect_eval")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.mark.parametrize("name", list(LM_EVAL))
def test_every_lm_eval_keyword_is_honoured_or_refused(tmp_path, stop_at_evaluate, name):
    value, does = LM_EVAL_KEYWORDS[name]  # a KeyError: a new lm-eval keyword to decide on
    arguments = by_name(tmp_path)
    if name == "samples":  # as in lm-eval, samples and limit exclude each other
        arguments["limit"] = None
    default = LM_EVAL[name].default
    if name not in ("model", "tasks"):  # no default; tasks=None is lm-eval's "no task" error
        with pytest.raises(Reached):  # lm-eval's default is never refused
            finreflect_eval.simple_evaluate(**{**arguments, name: default})
    if isinstance(does, str):
        with pytest.raises(ArgumentValueError, match=rf"^{name}\b.*{does}"):
            finreflect_eval.simple_evaluate(**{**arguments, name: value})
    else:
        with pytest.raises(Reached) as reached:
            finreflect_eval.simple_evaluate(**{**arguments, name: value})
        assert does(reached.value.args[0])


def test_positional_parameters_are_lm_evals_and_judges_keyword_only():
    def positional(function: Callable) -> list[str]:
        parameters = inspect.signature(function).parameters.values()
        return [p.name for p in parameters if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]

    assert positional(finreflect_eval.simple_evaluate) == positional(
        lm_eval.evaluator.simple_evaluate
    )
    judges = inspect.signature(finreflect_eval.simple_evaluate).parameters["judges"]
    assert judges.kind is inspect.Parameter.KEYWORD_ONLY


def test_a_call_spelling_out_lm_evals_defaults_works(tmp_path):
    ours = ("model", "model_args", "tasks")  # the run's own (tasks=None: lm-eval's error)
    defaults = {name: p.default for name, p in LM_EVAL.items() if name not in ours}
    results = finreflect_eval.simple_evaluate(**{**by_name(tmp_path), **defaults})
    assert results["results"][TASK]["faithfulness,none"] == 100.0
    assert results["samples"][TASK] and not (tmp_path / "out" / "cache.sqlite").exists()


def test_progress_bars_only_when_asked(tmp_path, capfd):
    arguments = by_name(tmp_path)
    capfd.readouterr()
    finreflect_eval.simple_evaluate(**arguments, show_progress=True)
    shown = capfd.readouterr()
    assert shown.out == ""
    assert f"{TASK} extract: 100.0%" in shown.err and "judge judge-0: 100.0%" in shown.err

    rejudged = finreflect_eval.evaluate_run(
        tmp_path / "out" / "candidate", judges=loaded_judges(), use_cache=False, show_progress=True
    )
    assert rejudged["results"] and "judge judge-0: 100.0%" in capfd.readouterr().err
    finreflect_eval.evaluate_run(tmp_path / "out" / "candidate", judges=loaded_judges())
    assert capfd.readouterr() == ("", "")
    with pytest.raises(FinReflectError, match="no-such-panel"):  # a failing call too
        finreflect_eval.evaluate_run(tmp_path / "out" / "candidate", judges="no-such-panel")
    # Off only inside the calls: the command line's default, and the Hugging Face libraries'.
    assert progress.shown() and datasets.is_progress_bar_enabled()
    assert not huggingface_hub.utils.are_progress_bars_disabled()


QUIET_RUN = """
import json, sys
from pathlib import Path
from support import scripted_judges
from support.runs import TRIPLES
import finreflect_eval
from finreflect_eval.models.scripted import ScriptedModel

folder = Path(sys.argv[1])
finreflect_eval.simple_evaluate(
    model=ScriptedModel("candidate", responses=[json.dumps(TRIPLES)]),
    tasks="finreflect_smoke_single_pass",
    judges=[ScriptedModel(responses=scripted_judges.accepts_all)] * 2,
    dataset="sample",
    limit=2,
    num_fewshot=1,
    fewshot_as_multiturn=True,  # logs a warning: shown only where the caller set up logging
    output_path=folder,
)
"""


def test_simple_evaluate_prints_nothing_unless_logging_is_set_up(tmp_path, env):
    """In a fresh process, as a script that never configured logging runs it (pytest's own
    logging handlers would hide the difference)."""
    command = [sys.executable, "-c", QUIET_RUN, str(tmp_path / "quiet")]
    quiet = subprocess.run(
        command, capture_output=True, text=True, env=_environment(env), timeout=300
    )
    assert quiet.returncode == 0, quiet.stderr
    assert (quiet.stdout, quiet.stderr) == ("", "")

    configured = "import logging; logging.basicConfig()\n" + QUIET_RUN
    command = [sys.executable, "-c", configured, str(tmp_path / "logged")]
    logged = subprocess.run(
        command, capture_output=True, text=True, env=_environment(env), timeout=300
    )
    assert logged.returncode == 0, logged.stderr
    assert "fewshot_as_multiturn has no effect" in logged.stderr


def _environment(env: dict) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **env}


def _diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in set(a) | set(b) for d in _diff(a.get(k), b.get(k), f"{path}/{k}")]
    return [] if a == b else [(path, a, b)]
