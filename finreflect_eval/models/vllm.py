"""The `vllm` backend: `vllm.LLM` offline inference, for models that outgrow one GPU.

vLLM's engine needs a GPU, so the backend is a thin, literal translation to vLLM's offline API
(>= 0.12: `SamplingParams` with `structured_outputs=StructuredOutputsParams(json=...)`;
`guided_decoding` is gone). The tests run it against the real package up to the engine.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, get_args

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import install_hint
from finreflect_eval.models._base import (
    LM,
    AtLeastOne,
    AtLeastZero,
    ReplicaPlan,
    hub_commit,
)
from finreflect_eval.models._cache import ResponseCache
from finreflect_eval.models._chat import ChatTemplate, chat_messages, tokenizer_info
from finreflect_eval.models._requests import Completion, GenerationRequest, Message, closed_schema

logger = logging.getLogger(__name__)

StructuredBackend = Literal["xgrammar", "guidance", "outlines"]
STRUCTURED_BACKENDS: tuple[str, ...] = get_args(StructuredBackend)


def structured_outputs_config(backend: str) -> dict[str, Any]:
    """vLLM's engine settings for JSON-schema decoding with `backend`, keeping the JSON compact
    (a decoder free to add whitespace can pad until max_tokens). xgrammar and guidance take
    `disable_any_whitespace`, which vLLM refuses for any other backend; outlines needs nothing:
    its JSON regex allows at most one space where JSON allows whitespace. vLLM's `auto` picks a
    backend per request, so neither guarantee holds for it."""
    if backend not in STRUCTURED_BACKENDS:
        raise FinReflectError(
            f"structured_backend '{backend}' is not supported: choose one of "
            f"{', '.join(STRUCTURED_BACKENDS)} (vLLM keeps JSON compact only with a fixed backend)"
        )
    if backend == "outlines":
        return {"backend": backend}
    return {"backend": backend, "disable_any_whitespace": True}


def sampling_params(request: GenerationRequest) -> Any:
    """vLLM's `SamplingParams` for one request (vLLM >= 0.12 structured-outputs API)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    return SamplingParams(
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        seed=request.seed,
        **request.sampling_options(),  # unset: vLLM's defaults (no top-p or top-k cut)
        structured_outputs=None
        if request.schema is None
        else StructuredOutputsParams(json=closed_schema(request.schema)),
    )


class VLLMModel(LM):
    """A model served in-process by vLLM.

    Args (besides those of `LM`):
        tensor_parallel_size: GPUs the weights are split across (tensor parallel).
        pipeline_parallel_size: GPUs (or nodes) the layers are split across (pipeline parallel).
        distributed_executor_backend: how vLLM runs its GPU workers ("mp": processes on this
            machine, "ray": Ray actors); None: vLLM's choice. A data-parallel replica with more
            than one GPU uses "ray", in its own placement group (see `replica_plan`).
        gpu_memory_utilization: share of each GPU's memory vLLM may take for weights and KV cache.
        max_model_len: context length; None keeps the model's own.
        enable_prefix_caching: reuse the KV cache of shared prompt prefixes (every request of a
            stage starts with the same instructions).
        dtype: weight dtype name, or "auto" (the checkpoint's).
        trust_remote_code: run code from the model repo (off unless asked).
        structured_backend: vLLM's engine for JSON-schema constrained decoding: xgrammar
            (vLLM's first choice), guidance (llguidance) or outlines.
        seed: the engine's seed; each request also carries its own.
        enable_thinking: passed to the chat template (Qwen3-style reasoning switch); None leaves
            the template's default.
        chat: use the chat template (`LLM.chat`) or plain text (`LLM.generate`); None decides by
            whether the tokenizer has a chat template.
    """

    backend = "vllm"
    engine_package = "vllm"

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        cache: ResponseCache | None = None,
        # vLLM schedules a batch itself; a large one keeps the GPU busy ("auto", as lm-eval says).
        batch_size: AtLeastOne | Literal["auto"] = "auto",
        max_retries: AtLeastZero = 2,
        tensor_parallel_size: AtLeastOne = 1,
        pipeline_parallel_size: AtLeastOne = 1,
        distributed_executor_backend: Literal["mp", "ray"] | None = None,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        enable_prefix_caching: bool = True,
        dtype: str = "auto",
        trust_remote_code: bool = False,
        structured_backend: StructuredBackend = "xgrammar",
        seed: int = 0,
        enable_thinking: bool | None = None,
        chat: bool | None = None,
    ) -> None:
        super().__init__(
            model,
            revision=revision,
            cache=cache,
            batch_size=256 if batch_size == "auto" else batch_size,
            max_retries=max_retries,
        )
        structured_outputs = structured_outputs_config(structured_backend)
        try:
            import vllm

            # Imported only to fail here, before a model loads, on a vLLM older than 0.12.
            from vllm.sampling_params import StructuredOutputsParams  # noqa: F401
        except ImportError:
            raise FinReflectError(
                f"the vllm backend needs vLLM >= 0.12: {install_hint('vllm')} "
                "(GPU only; separate environment)"
            ) from None
        self.dtype = dtype
        self.structured_backend = structured_backend
        self.enable_thinking = enable_thinking
        optional = {
            name: value
            for name, value in (
                ("max_model_len", max_model_len),
                ("distributed_executor_backend", distributed_executor_backend),
            )
            if value is not None
        }
        self.llm: Any = vllm.LLM(
            model=model,
            revision=revision,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            enable_prefix_caching=enable_prefix_caching,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            seed=seed,
            structured_outputs_config=structured_outputs,
            **optional,
        )
        tokenizer = self.llm.get_tokenizer()
        has_template = getattr(tokenizer, "chat_template", None) is not None
        self.chat = chat = has_template if chat is None else chat
        self.chat_template = ChatTemplate(tokenizer) if chat and has_template else None
        self.commit = hub_commit(model, revision)
        self.devices = tensor_parallel_size * pipeline_parallel_size
        model_config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        self.context_length = getattr(model_config, "max_model_len", None)
        if enable_thinking is not None and not chat:
            logger.warning("enable_thinking is ignored: %s is run without a chat template", model)

    @classmethod
    def replica_plan(
        cls, args: dict[str, Any], cluster: Mapping[str, float], replicas: int
    ) -> ReplicaPlan:
        """`tensor_parallel_size` × `pipeline_parallel_size` GPUs per replica, one per bundle
        (vLLM's rule for a placement group). With one GPU, the replica's actor holds it and vLLM
        runs in the actor; with more, vLLM's Ray workers take them from the replica's placement
        group (the actor only holds a CPU), on one node unless the pipeline spans nodes. vLLM's
        own processes start by `spawn`: forking a process that runs Ray hangs (lm-eval #1734,
        lighteval #670)."""
        gpus = int(args.get("tensor_parallel_size", 1)) * int(args.get("pipeline_parallel_size", 1))
        env = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
        if gpus == 1:
            return ReplicaPlan(bundles=({"CPU": 1.0, "GPU": 1.0},), actor_gpus=1.0, env=env)
        return ReplicaPlan(
            bundles=({"CPU": 1.0, "GPU": 1.0},) + ({"GPU": 1.0},) * (gpus - 1),
            env=env,
            args={"distributed_executor_backend": "ray"},
            strategy="STRICT_PACK" if int(args.get("pipeline_parallel_size", 1)) == 1 else "PACK",
        )

    def identity(self) -> dict[str, Any]:
        return {
            **super().identity(),
            "dtype": self.dtype,
            "structured_backend": self.structured_backend,
            "enable_thinking": self.enable_thinking,
            "chat": self.chat,
            **(self.chat_template.identity() if self.chat_template else {}),
        }

    def resolved(self) -> dict[str, Any]:
        tokenizer, template = self.llm.get_tokenizer(), self.chat_template
        model_config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        dtype = getattr(model_config, "dtype", None)
        return {
            **super().resolved(),
            "device": _device_type(),
            "dtype": None if dtype is None else str(dtype).removeprefix("torch."),
            **tokenizer_info(tokenizer, template and template.text, self.context_length),
        }

    def _messages(self, request: GenerationRequest) -> list[Message]:
        """What a chat model's template gets (`chat=True` without a template: vLLM's default)."""
        if self.chat_template is None:
            return chat_messages(request)
        return self.chat_template.messages(request)

    def prompt_length(self, request: GenerationRequest) -> int:
        tokenizer = self.llm.get_tokenizer()
        if not self.chat:  # `LLM.generate` adds the tokenizer's special tokens (a BOS)
            return len(tokenizer(request.plain_prompt()).input_ids)
        template_kwargs = {}
        if self.enable_thinking is not None:
            template_kwargs["enable_thinking"] = self.enable_thinking
        ids = tokenizer.apply_chat_template(
            self._messages(request),
            tokenize=True,
            add_generation_prompt=True,
            **template_kwargs,
        )
        # transformers 5 returns a mapping (return_dict=True by default); 4.x a list of ids.
        return len(ids["input_ids"] if hasattr(ids, "keys") else ids)

    def _complete(self, requests: list[GenerationRequest]) -> list[Completion]:
        params = [sampling_params(request) for request in requests]
        # One call for the whole batch: vLLM's scheduler batches across requests itself.
        if self.chat:
            template_kwargs = {}
            if self.enable_thinking is not None:
                template_kwargs["chat_template_kwargs"] = {"enable_thinking": self.enable_thinking}
            outputs = self.llm.chat(
                [self._messages(request) for request in requests],
                sampling_params=params,
                use_tqdm=False,  # LM.generate shows the progress
                **template_kwargs,
            )
        else:
            outputs = self.llm.generate(
                [request.plain_prompt() for request in requests],
                sampling_params=params,
                use_tqdm=False,
            )
        return [
            Completion(
                text=output.outputs[0].text,
                prompt_tokens=len(output.prompt_token_ids or ()),
                completion_tokens=len(output.outputs[0].token_ids),
                # Automatic prefix caching's hits (a RequestOutput of vLLM's v1 engine says so).
                cached_prompt_tokens=getattr(output, "num_cached_tokens", None),
            )
            for output in outputs
        ]

    def close(self) -> None:
        """Shut the engine down now rather than at garbage collection, so the next model of the
        run gets the GPU; `load_model` then collects garbage and empties the CUDA cache."""
        llm, self.llm = self.llm, None
        if llm is None:
            return
        # The entry point differs between versions: `LLM.shutdown()` where a vLLM has it
        # (proposed in vllm#36283 and #46023), else `LLMEngine.shutdown()` (what vLLM's CI calls,
        # vllm#37138), else the engine-core client's `shutdown()`, which every v1 engine has and
        # which stops the EngineCore process and its GPU workers.
        engine = getattr(llm, "llm_engine", None)
        for owner in (llm, engine, getattr(engine, "engine_core", None)):
            if callable(getattr(owner, "shutdown", None)):
                owner.shutdown()
                break
        # With the in-process engine the model-parallel groups live in this process; vLLM's
        # maintainers document tearing them down before loading another model (vllm#6544).
        try:
            from vllm.distributed.parallel_state import (
                destroy_distributed_environment,
                destroy_model_parallel,
            )
        except ImportError:
            return
        destroy_model_parallel()
        destroy_distributed_environment()


def _device_type() -> str | None:
    """The kind of device vLLM's engine runs on here (cuda, rocm, cpu, ...)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return None
    return getattr(current_platform, "device_type", None) or None
