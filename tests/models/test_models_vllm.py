"""The vllm backend against the real vLLM package (config and request classes, no GPU).

`vllm.LLM.__init__` runs for real until it would start the engine, so vLLM itself validates the
structured-outputs config and builds the `EngineArgs`; every request's `SamplingParams` goes
through vLLM's own structured-output validation with a real `ModelConfig` and tokenizer. Only
generation is faked (it needs a GPU), and the fake binds its arguments to the real signatures.
"""

from __future__ import annotations

import copy
import json
import re
import sys

import pytest

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import install_hint
from finreflect_eval.data import load_benchmark
from finreflect_eval.models import GenerationRequest, ModelSpec, load_model
from finreflect_eval.models.vllm import STRUCTURED_BACKENDS, VLLMModel, sampling_params
from finreflect_eval.pipeline.extraction import CriticOutput
from finreflect_eval.pipeline.judging import judge_request, load_panel
from finreflect_eval.protocol.criteria import TRIPLE_CRITERIA
from finreflect_eval.protocol.schema import Triple
from finreflect_eval.tasks.config import GenerationKwargs, TaskIndex

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def bundled_vllm_models(tiny_model_dir) -> dict[str, ModelSpec]:
    """Every configuration the backend is asked to build: a default candidate, each structured
    backend choice, and every judge of every bundled panel that runs on vLLM."""
    specs = {"candidate (defaults)": ModelSpec(str(tiny_model_dir), "vllm")}
    for backend in STRUCTURED_BACKENDS:
        specs[f"candidate ({backend})"] = ModelSpec(
            str(tiny_model_dir), "vllm", {"structured_backend": backend}
        )
    for name in ("paper", "small"):
        for judge in load_panel(name).judges:
            specs[f"{name}/{judge.name}"] = judge.model_spec
    return specs


def test_vllm_accepts_every_configuration_we_build(engine_args_of, tiny_model_dir):
    """The default candidate and every judge of `paper` and `small`: 0 rejected by vLLM."""
    rejected = {}
    for label, spec in bundled_vllm_models(tiny_model_dir).items():
        try:
            engine_args = engine_args_of(spec)
        except Exception as exc:  # anything vLLM raises is a rejection
            rejected[label] = f"{type(exc).__name__}: {exc}"
            continue
        assert engine_args.model == spec.model
        assert engine_args.enable_prefix_caching is True
        structured = engine_args.structured_outputs_config
        assert structured.backend == spec.args.get("structured_backend", "xgrammar")
        # Compact JSON: xgrammar and guidance drop free whitespace; outlines' JSON regex allows
        # at most one space where JSON allows whitespace.
        assert structured.disable_any_whitespace == (structured.backend != "outlines")
    assert rejected == {}, json.dumps(rejected, indent=1)
    assert len(bundled_vllm_models(tiny_model_dir)) == 1 + len(STRUCTURED_BACKENDS) + 6


def test_panel_parallelism_reaches_the_engine(engine_args_of):
    paper = {judge.name: judge for judge in load_panel("paper").judges}
    engine_args = engine_args_of(paper["qwen3-235b-a22b"].model_spec)
    assert (engine_args.tensor_parallel_size, engine_args.max_model_len) == (8, 32768)
    nemotron = engine_args_of(paper["nemotron-super-49b-v1.5"].model_spec)
    assert nemotron.trust_remote_code is True and nemotron.tensor_parallel_size == 4


def test_a_data_parallel_replica_of_two_gpus_runs_vllm_on_ray(engine_args_of, tiny_model_dir):
    """What each replica of `tensor_parallel_size=2,data_parallel_size=4` loads in its Ray actor
    (see test_replicas for its placement group): accepted by vLLM, on vLLM's Ray executor with
    the group's two GPUs; a one-GPU replica loads as one model does."""
    args = {"tensor_parallel_size": 2}
    plan = VLLMModel.replica_plan(args, {"CPU": 16.0, "GPU": 8.0}, 4)
    engine_args = engine_args_of(ModelSpec(str(tiny_model_dir), "vllm", {**args, **plan.args}))
    assert engine_args.distributed_executor_backend == "ray"
    assert engine_args.tensor_parallel_size == 2
    assert plan.gpus == 2 and all(bundle.get("GPU", 0) == 1 for bundle in plan.bundles)
    assert plan.actor_gpus == 0 and plan.env == {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    one = VLLMModel.replica_plan({}, {"CPU": 16.0, "GPU": 8.0}, 8)
    assert (one.gpus, one.actor_gpus, one.args) == (1, 1, {})


def test_auto_backend_is_refused_before_vllm(real_vllm):
    """vLLM's `auto` cannot keep JSON compact (disable_any_whitespace needs a fixed backend)."""
    with pytest.raises(FinReflectError, match="structured_backend 'auto'"):
        VLLMModel("m", structured_backend="auto")


def every_request(task_name: str = "finreflect_smoke_reflection") -> list[GenerationRequest]:
    """The requests a run sends: extraction, normalisation, critic and correction, and every
    judge criterion for 1, 2 and 3 triples (the judge schemas depend on the count)."""
    task = TaskIndex().tasks[task_name]
    span = load_benchmark("sample", split="test", limit=1).spans[0]
    triple = Triple(
        subject="AAPL",
        subject_type="ORG",
        relation="Produces",
        object="iPhone",
        object_type="PRODUCT",
    )
    output = task.schema.triple_list_model(task.config.max_triples)
    chat = [{"role": "user", "content": span.text}]
    requests = [
        GenerationRequest.chat(chat, schema=output),
        GenerationRequest.chat(chat, schema=CriticOutput),
    ]
    judge = load_panel("paper").judges[0]
    for criterion in [*TRIPLE_CRITERIA, "comprehensiveness"]:
        for n in (1, 2, 3):
            requests.append(
                judge_request(task, criterion, span, [triple] * n, judge, GenerationKwargs())
            )
    return requests


@pytest.mark.parametrize("backend", STRUCTURED_BACKENDS)
def test_vllm_validates_every_request_we_send(
    engine_args_of, vllm_model_config, tiny_model_dir, backend
):
    """Each request's SamplingParams through vLLM's own structured-output validation, with the
    engine's structured-outputs config: our schemas need no fallback backend."""
    engine_args = engine_args_of(
        ModelSpec(str(tiny_model_dir), "vllm", {"structured_backend": backend})
    )
    model_config, tokenizer = vllm_model_config
    requests = every_request()
    for request in requests:
        params = sampling_params(request)
        params._validate_structured_outputs(
            model_config, engine_args.structured_outputs_config, tokenizer
        )
        assert params.structured_outputs._backend == backend
    assert len(requests) == 2 + 4 * 3


@pytest.mark.parametrize("enable_thinking", [False, None])
def test_chat_model_batch(engineless, enable_thinking):
    lm = VLLMModel("m-chat", enable_thinking=enable_thinking)
    requests = [
        GenerationRequest.chat(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1"}],
            schema=SCHEMA,
            max_tokens=64,
            temperature=0.2,
            seed=3,
        ),
        GenerationRequest(prompt="Q2", schema=SCHEMA),
        GenerationRequest(prompt="Q3", schema=SCHEMA),
    ]
    results = lm.generate(requests)

    [(method, conversations, sampling, kwargs)] = lm.llm.calls
    assert method == "chat" and callable(kwargs["use_tqdm"])  # the run's bar, not vLLM's
    assert conversations == [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1"}],
        [{"role": "user", "content": "Q2"}],
        [{"role": "user", "content": "Q3"}],
    ]
    if enable_thinking is None:
        assert "chat_template_kwargs" not in kwargs
    else:
        assert kwargs["chat_template_kwargs"] == {"enable_thinking": False}
    first = sampling[0]
    assert (first.max_tokens, first.temperature, first.seed) == (64, 0.2, 3)
    assert first.structured_outputs.json == {**SCHEMA, "additionalProperties": False}
    assert [r.parsed for r in results] == [{"answer": "ok"}] * 3
    assert [r.prompt_tokens for r in results] == [2, 1, 1]  # conversation lengths, from the fake
    assert all(r.completion_tokens == 3 for r in results)


def test_a_template_without_a_system_role_gets_it_in_the_first_user_turn(engineless, monkeypatch):
    """Gemma 2's template refuses a system turn: `chat` gets its text at the start of the first
    user turn, and the context check renders the same messages."""
    refuses = (
        "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    )
    monkeypatch.setattr(engineless, "chat_template", refuses)
    lm = VLLMModel("m-gemma2")
    chat = GenerationRequest.chat(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], schema=SCHEMA
    )
    [result] = lm.generate([chat])
    [(method, conversations, _, _)] = lm.llm.calls
    assert (method, conversations) == ("chat", [[{"role": "user", "content": "S\n\nU"}]])
    assert result.ok and lm.prompt_length(chat) > 0


def test_base_model_gets_plain_prompts(engineless, monkeypatch):
    monkeypatch.setattr(engineless, "chat_template", None)
    lm = VLLMModel("m-base")
    assert lm.chat is False
    results = lm.generate(
        [
            GenerationRequest(prompt="Plain prompt.", schema=SCHEMA),
            GenerationRequest.chat([{"role": "user", "content": "As text."}], schema=SCHEMA),
        ]
    )
    [(method, prompts, sampling, kwargs)] = lm.llm.calls
    assert (method, prompts) == ("generate", ["Plain prompt.", "As text."])
    assert callable(kwargs["use_tqdm"])
    assert len(sampling) == 2 and all(r.ok for r in results)


def test_a_base_model_s_prompt_is_counted_as_vllm_tokenizes_it(engineless, monkeypatch):
    """`LLM.generate` tokenizes a text prompt with the tokenizer's special tokens (vLLM's
    renderer: `default_cmpl_tok_params`), a BOS included: the context check counts the same."""
    from tokenizers.processors import TemplateProcessing
    from vllm.renderers.params import TokenizeParams

    monkeypatch.setattr(engineless, "chat_template", None)
    lm = VLLMModel("m-base")
    tokenizer = copy.deepcopy(lm.llm.get_tokenizer())  # the session's own stays as it is
    monkeypatch.setattr(lm.llm, "get_tokenizer", lambda: tokenizer)
    bos = tokenizer.eos_token  # the tiny tokenizer has no BOS of its own: one stands in
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, tokenizer.eos_token_id)]
    )
    request = GenerationRequest(prompt="Plain prompt about revenue.", schema=SCHEMA)
    encode = TokenizeParams(max_total_tokens=None, add_special_tokens=True).get_encode_kwargs()
    ids = tokenizer.encode(request.plain_prompt(), **encode)
    assert ids[0] == tokenizer.eos_token_id
    assert lm.prompt_length(request) == len(ids)


def test_no_schema_no_structured_outputs(engineless):
    lm = VLLMModel("m")
    [result] = lm.generate([GenerationRequest(prompt="Free text.")])
    [(_, _, [sampling], _)] = lm.llm.calls
    assert sampling.structured_outputs is None
    assert result.text == result.parsed == '{"answer": "ok"}'


def test_load_model_closes_the_engine(engineless):
    with load_model(ModelSpec("m", "vllm", {"tensor_parallel_size": 2, "chat": False})) as lm:
        llm = lm.llm
        assert llm.engine_args.tensor_parallel_size == 2
    assert llm.shutdowns == 1 and lm.llm is None
    lm.close()  # a second close is harmless
    assert llm.shutdowns == 1


def test_missing_vllm_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(FinReflectError, match=re.escape(install_hint("vllm"))):
        VLLMModel("m")


# Parses `vllm serve` command lines with vLLM's own parser, the way `vllm serve` does, and prints
# the engine arguments they give. A child process: vLLM needs a device type to build the parser
# (`VLLM_TARGET_DEVICE=cpu`), which must not leak into the other tests' vLLM.
PARSE_SERVE = """
import json, shlex, sys
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.entrypoints.common.cli_args import validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser

parser = FlexibleArgumentParser(prog="vllm")
ServeSubcommand().subparser_init(parser.add_subparsers(dest="subcommand"))
for line in json.load(sys.stdin):
    args = parser.parse_args(shlex.split(line)[1:])
    validate_parsed_serve_args(args)
    args.model = args.model_tag
    engine = AsyncEngineArgs.from_cli_args(args)
    structured = engine.structured_outputs_config
    print(json.dumps({"model": engine.model, "served": args.served_model_name,
                      "tensor_parallel_size": engine.tensor_parallel_size,
                      "max_model_len": engine.max_model_len,
                      "trust_remote_code": engine.trust_remote_code,
                      "structured": [structured.backend, structured.disable_any_whitespace],
                      "reasoning_parser": engine.reasoning_parser}))
"""


def test_readme_vllm_serve_recipe_for_the_paper_panel(real_vllm):
    """The three `vllm serve` commands of docs/scaling.md parse with vLLM's own `vllm serve`
    parser, serve each `paper` judge's model under its own name with the judge's parallelism,
    keep JSON compact, and the page's `--judge-endpoints` names exactly those judges."""
    import os
    import re
    import subprocess

    from conftest import REPO

    readme = (REPO / "docs" / "scaling.md").read_text()
    commands = re.findall(r"^vllm serve .*$", readme, re.M)
    assert len(commands) == 3
    vllm_folder = os.path.dirname(real_vllm.__path__[0])
    child = subprocess.run(
        [sys.executable, "-c", PARSE_SERVE],
        input=json.dumps(commands),
        capture_output=True,
        text=True,
        # offline, vLLM would swap each model id for a cached snapshot (see engine_args_of)
        env={
            **os.environ,
            "PYTHONPATH": vllm_folder,
            "VLLM_TARGET_DEVICE": "cpu",
            "HF_HUB_OFFLINE": "0",
        },
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    served = {line["model"]: line for line in map(json.loads, child.stdout.splitlines())}
    paper = load_panel("paper")
    assert set(served) == {judge.model for judge in paper.judges}
    for judge in paper.judges:
        engine = served[judge.model]
        assert engine["served"] is None  # served as the model id, which each request names
        assert engine["tensor_parallel_size"] == judge.model_args["tensor_parallel_size"]
        assert engine["max_model_len"] == judge.model_args["max_model_len"]
        assert engine["trust_remote_code"] == judge.model_args.get("trust_remote_code", False)
        assert engine["structured"] == ["xgrammar", True]
    # gpt-oss needs its parser (harmony's final channel alone is held to the schema); Qwen3's
    # separates a thought, were one written; Nemotron's /no_think writes none.
    parsers = {model: line["reasoning_parser"] for model, line in served.items()}
    assert parsers == {
        "Qwen/Qwen3-235B-A22B": "qwen3",
        "openai/gpt-oss-120b": "openai_gptoss",
        "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5": "",
    }
    endpoints = re.search(r"^ +--judge-endpoints (\S+)$", readme, re.M).group(1)
    judges = dict(item.split("=", 1) for item in endpoints.split(","))
    assert [j.backend for j in paper.at_endpoints(judges).judges] == ["openai"] * 3


def test_vllm_s_own_engine_loop_moves_the_run_s_bar_per_finished_request(real_vllm, capsys):
    """vLLM's `LLM._run_engine` (real) with a fake engine finishing one of four requests a
    step: the run's bar moves a request each time, and vLLM draws no bar of its own; its
    prompt-rendering bars are left out (the iterable comes back as it went in)."""
    from vllm import LLM
    from vllm.outputs import CompletionOutput, RequestOutput

    from finreflect_eval.models._generate_args import finished_requests

    class Engine:
        def __init__(self) -> None:
            self.left = [str(n) for n in range(4)]

        def get_num_unfinished_requests(self) -> int:
            return len(self.left)

        def has_unfinished_requests(self) -> bool:
            return bool(self.left)

        def step(self) -> list[RequestOutput]:
            done = CompletionOutput(0, "{}", [1, 2], None, None)
            return [RequestOutput(self.left.pop(0), "p", [5, 6, 7], None, [done], True)]

    moved: list[float] = []
    progress = finished_requests(moved.append)
    assert finished_requests(None) is False  # no bar shown: vLLM draws none either
    prompts = ["a", "b"]
    assert progress(prompts, desc="Rendering prompts") is prompts
    llm = object.__new__(LLM)
    llm.llm_engine = Engine()
    outputs = llm._run_engine(RequestOutput, use_tqdm=progress)
    assert [output.request_id for output in outputs] == ["0", "1", "2", "3"]
    assert moved == [1, 1, 1, 1]
    assert "Processed prompts" not in capsys.readouterr().err


def test_with_bars_off_vllm_shows_none_either(engineless):
    from finreflect_eval._util import progress

    lm = VLLMModel("m-chat")
    with progress.progress_bars(False):
        lm.generate([GenerationRequest(prompt="Q1", schema=SCHEMA)])
    [(_, _, _, kwargs)] = lm.llm.calls
    assert kwargs["use_tqdm"] is False
