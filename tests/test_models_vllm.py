"""The vllm backend against a fake `vllm` package (the real one needs CUDA): what it passes to
`vllm.LLM`, `LLM.chat`/`LLM.generate` and `SamplingParams`, and how it shuts the engine down."""

import json
import sys
import types
from types import SimpleNamespace

import pytest

from finreflect_eval.errors import FinReflectError
from finreflect_eval.models import GenerationRequest, ModelSpec, load_model
from finreflect_eval.models.vllm import VLLMModel

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


class Recorded:
    """Stands in for SamplingParams / StructuredOutputsParams: keeps its kwargs."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


class FakeLLM:
    """Records the constructor kwargs and every call; answers each prompt with `{"answer": ...}`
    and token counts derived from the prompt, so the tests can check the mapping."""

    chat_template: str | None = "{{ messages }}"  # what get_tokenizer() reports

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls = []
        self.engine_core = SimpleNamespace(shutdowns=0)
        self.engine_core.shutdown = self._count_shutdown
        self.llm_engine = SimpleNamespace(engine_core=self.engine_core)

    def _count_shutdown(self):
        self.engine_core.shutdowns += 1

    def get_tokenizer(self):
        return SimpleNamespace(chat_template=self.chat_template)

    def chat(self, messages, sampling_params=None, use_tqdm=True, **kwargs):
        self.calls.append(("chat", messages, sampling_params, use_tqdm, kwargs))
        return [_output(len(conversation)) for conversation in messages]

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True):
        self.calls.append(("generate", prompts, sampling_params, use_tqdm, {}))
        return [_output(len(prompt)) for prompt in prompts]


def _output(size):
    completion = SimpleNamespace(text=json.dumps({"answer": "ok"}), token_ids=[7] * 3)
    return SimpleNamespace(prompt_token_ids=list(range(size)), outputs=[completion])


@pytest.fixture
def fake_vllm(monkeypatch):
    """A `vllm` package in sys.modules; returns the record of destroy_* calls."""
    destroyed = []
    vllm = types.ModuleType("vllm")
    vllm.LLM = FakeLLM
    vllm.SamplingParams = type("SamplingParams", (Recorded,), {})
    sampling_params = types.ModuleType("vllm.sampling_params")
    sampling_params.SamplingParams = vllm.SamplingParams
    sampling_params.StructuredOutputsParams = type("StructuredOutputsParams", (Recorded,), {})
    distributed = types.ModuleType("vllm.distributed")
    parallel_state = types.ModuleType("vllm.distributed.parallel_state")
    parallel_state.destroy_model_parallel = lambda: destroyed.append("model_parallel")
    parallel_state.destroy_distributed_environment = lambda: destroyed.append("environment")
    for name, module in [
        ("vllm", vllm),
        ("vllm.sampling_params", sampling_params),
        ("vllm.distributed", distributed),
        ("vllm.distributed.parallel_state", parallel_state),
    ]:
        monkeypatch.setitem(sys.modules, name, module)
    return destroyed


def test_engine_arguments(fake_vllm):
    lm = VLLMModel(
        "org/model",
        revision="abc123",
        tensor_parallel_size=4,
        gpu_memory_utilization=0.8,
        seed=5,
        structured_backend="guidance",
    )
    assert lm.llm.kwargs == {
        "model": "org/model",
        "revision": "abc123",
        "tensor_parallel_size": 4,
        "pipeline_parallel_size": 1,
        "gpu_memory_utilization": 0.8,
        "enable_prefix_caching": True,
        "dtype": "auto",
        "trust_remote_code": False,
        "seed": 5,
        "structured_outputs_config": {"backend": "guidance", "disable_any_whitespace": True},
    }
    assert VLLMModel("m", max_model_len=8192).llm.kwargs["max_model_len"] == 8192


@pytest.mark.parametrize("enable_thinking", [False, None])
def test_chat_model_batch(fake_vllm, enable_thinking):
    lm = VLLMModel("m", enable_thinking=enable_thinking)
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

    [(method, conversations, sampling, use_tqdm, kwargs)] = lm.llm.calls
    assert method == "chat" and use_tqdm is False
    assert conversations == [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1"}],
        [{"role": "user", "content": "Q2"}],
        [{"role": "user", "content": "Q3"}],
    ]
    if enable_thinking is None:
        assert kwargs == {}
    else:
        assert kwargs == {"chat_template_kwargs": {"enable_thinking": False}}
    assert len(sampling) == 3
    first = sampling[0].kwargs
    assert (first["max_tokens"], first["temperature"], first["seed"]) == (64, 0.2, 3)
    assert first["structured_outputs"].kwargs == {"json": {**SCHEMA, "additionalProperties": False}}
    assert [r.parsed for r in results] == [{"answer": "ok"}] * 3
    assert [r.prompt_tokens for r in results] == [2, 1, 1]  # from the fake's prompt_token_ids
    assert all(r.completion_tokens == 3 for r in results)


def test_base_model_gets_plain_prompts(fake_vllm, monkeypatch):
    monkeypatch.setattr(FakeLLM, "chat_template", None)
    lm = VLLMModel("m")
    assert lm.chat is False
    results = lm.generate(
        [
            GenerationRequest(prompt="Plain prompt.", schema=SCHEMA),
            GenerationRequest.chat([{"role": "user", "content": "As text."}], schema=SCHEMA),
        ]
    )
    [(method, prompts, sampling, use_tqdm, _)] = lm.llm.calls
    assert (method, prompts, use_tqdm) == ("generate", ["Plain prompt.", "As text."], False)
    assert len(sampling) == 2 and all(r.ok for r in results)


def test_no_schema_no_structured_outputs(fake_vllm):
    lm = VLLMModel("m")
    [result] = lm.generate([GenerationRequest(prompt="Free text.")])
    [(_, _, [sampling], _, _)] = lm.llm.calls
    assert sampling.kwargs.get("structured_outputs") is None
    assert result.text == result.parsed == '{"answer": "ok"}'


def test_close_shuts_the_engine_down(fake_vllm):
    lm = VLLMModel("m")
    engine_core = lm.llm.engine_core
    lm.close()
    assert engine_core.shutdowns == 1
    assert lm.llm is None
    assert fake_vllm == ["model_parallel", "environment"]
    lm.close()  # a second close is harmless
    assert engine_core.shutdowns == 1


def test_close_prefers_llm_shutdown(fake_vllm, monkeypatch):
    shut = []
    monkeypatch.setattr(FakeLLM, "shutdown", lambda self: shut.append(self), raising=False)
    lm = VLLMModel("m")
    llm = lm.llm
    lm.close()
    assert shut == [llm] and llm.engine_core.shutdowns == 0


def test_load_model_closes_on_exit(fake_vllm):
    with load_model(ModelSpec("m", "vllm", {"tensor_parallel_size": 2, "chat": False})) as lm:
        assert isinstance(lm, VLLMModel) and lm.llm.kwargs["tensor_parallel_size"] == 2
        engine_core = lm.llm.engine_core
    assert engine_core.shutdowns == 1 and lm.llm is None


def test_missing_vllm_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(FinReflectError, match=r"pip install 'finreflect-eval\[vllm\]'"):
        VLLMModel("m")
