"""The real vLLM up to its engine, for the vllm backend's tests (`real_vllm`): the `EngineArgs`
vLLM builds for a model spec, a real `ModelConfig` and tokenizer, and `vllm.LLM` with a fake
engine (`EnginelessLLM`). conftest registers the fixtures (`pytest_plugins`)."""

from __future__ import annotations

import inspect
import json

import pytest

from finreflect_eval.models import ModelSpec, load_model
from support.real_vllm import EngineStart


@pytest.fixture
def engine_args_of(real_vllm, monkeypatch):
    """A function: a model spec → the real `EngineArgs` vLLM built for it (or its exception)."""
    import huggingface_hub
    from vllm.entrypoints import llm as llm_module

    # Offline (as tests run), vLLM's EngineArgs replaces a Hub id with its cached snapshot and
    # refuses one that is not cached: right on a GPU machine, but the judges' weights are never
    # here. Online, it names the model as given, which is what these tests check.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)

    def stop(engine_args, **_):
        raise EngineStart(engine_args)

    monkeypatch.setattr(llm_module.LLMEngine, "from_engine_args", stop)

    def engine_args_of(spec: ModelSpec):
        try:
            with load_model(spec):
                pass
        except EngineStart as start:
            return start.engine_args
        raise AssertionError("vllm.LLM returned without starting an engine")

    return engine_args_of


@pytest.fixture(scope="module")
def vllm_model_config(real_vllm, tiny_model_dir):
    """A real `ModelConfig` and tokenizer (of the tiny local model: no download). vLLM inspects
    a model's architecture in a child Python (unless ~/.cache/vllm holds the answer from an
    earlier run), which must find this vLLM too: it lives outside the venv."""
    import os

    from vllm.config import ModelConfig
    from vllm.tokenizers import get_tokenizer

    folders = [os.path.dirname(real_vllm.__path__[0]), os.environ.get("PYTHONPATH", "")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(folder for folder in folders if folder))
        yield ModelConfig(model=str(tiny_model_dir)), get_tokenizer(str(tiny_model_dir))


class EnginelessLLM:
    """`vllm.LLM` up to the engine (real), then a fake engine: `chat`/`generate` bind their
    arguments to the real methods' signatures, validate every SamplingParams with vLLM's own
    code, and answer `{"answer": "ok"}` as real `RequestOutput`s."""

    chat_template: str | None = "{{ messages }}"

    def __init__(self, real_llm, model_config, tokenizer, **kwargs):
        self.real_llm = real_llm
        try:
            real_llm(**kwargs)
        except EngineStart as start:
            self.engine_args = start.engine_args
        self.model_config = model_config
        self.tokenizer = tokenizer
        self.calls = []
        self.shutdowns = 0
        engine_core = type("EngineCore", (), {"shutdown": lambda _: self._shutdown()})()
        self.llm_engine = type("Engine", (), {"engine_core": engine_core})()

    def _shutdown(self):
        self.shutdowns += 1

    def get_tokenizer(self):
        tokenizer = self.tokenizer
        tokenizer.chat_template = self.chat_template
        return tokenizer

    def chat(self, messages, sampling_params=None, **kwargs):
        inspect.signature(self.real_llm.chat).bind(self, messages, sampling_params, **kwargs)
        return self._answer("chat", messages, sampling_params, kwargs)

    def generate(self, prompts, sampling_params=None, **kwargs):
        inspect.signature(self.real_llm.generate).bind(self, prompts, sampling_params, **kwargs)
        return self._answer("generate", prompts, sampling_params, kwargs)

    def completion(self, index: int) -> tuple[str, list[int]]:
        """The text and token ids the fake engine answers the `index`-th prompt of a call."""
        return json.dumps({"answer": "ok"}), [7, 7, 7]

    def _answer(self, method, prompts, sampling_params, kwargs):
        from vllm.outputs import CompletionOutput, RequestOutput

        self.calls.append((method, prompts, sampling_params, kwargs))
        for params in sampling_params:
            if params.structured_outputs is not None:
                params._validate_structured_outputs(
                    self.model_config, self.engine_args.structured_outputs_config, self.tokenizer
                )
        answers = [self.completion(index) for index in range(len(prompts))]
        return [
            RequestOutput(
                request_id=str(index),
                prompt=None,
                prompt_token_ids=list(range(len(prompt))),
                prompt_logprobs=None,
                outputs=[
                    CompletionOutput(
                        index=0,
                        text=answers[index][0],
                        token_ids=answers[index][1],
                        cumulative_logprob=None,
                        logprobs=None,
                        finish_reason="stop",
                    )
                ],
                finished=True,
            )
            for index, prompt in enumerate(prompts)
        ]


@pytest.fixture
def engineless(real_vllm, engine_args_of, vllm_model_config, monkeypatch):
    """`vllm.LLM` replaced by `EnginelessLLM`; returns the class (its instances record calls)."""
    real_llm = real_vllm.LLM
    model_config, tokenizer = vllm_model_config

    class LLM(EnginelessLLM):
        def __init__(self, **kwargs):
            super().__init__(real_llm, model_config, tokenizer, **kwargs)

    monkeypatch.setattr(real_vllm, "LLM", LLM)
    return LLM
