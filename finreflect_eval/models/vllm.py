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
from finreflect_eval.models import _harmony
from finreflect_eval.models._base import (
    LM,
    AtLeastOne,
    AtLeastZero,
    ReplicaPlan,
    hub_commit,
)
from finreflect_eval.models._cache import ResponseCache
from finreflect_eval.models._chat import ChatTemplate, chat_messages, tokenizer_info
from finreflect_eval.models._generate_args import finished_requests
from finreflect_eval.models._requests import Completion, GenerationRequest, Message, closed_schema
from finreflect_eval.models._thinking import (
    ALWAYS_THINKING,
    HARMONY,
    THINK_TAGS,
    ThinkSetting,
    as_setting,
    family_parser,
    resolve_thinking,
    template_thinking,
)

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


def sampling_params(
    request: GenerationRequest, think_budget: int | None = None, harmony: bool = False
) -> Any:
    """vLLM's `SamplingParams` for one request (vLLM >= 0.12 structured-outputs API): its JSON
    schema, or for gpt-oss (`harmony`) the structural tag that holds only the final channel to
    it, with harmony's stop tokens; a thinking model's `think_budget`."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    structured = None
    if request.schema is not None and harmony:
        structured = StructuredOutputsParams(structural_tag=_harmony.structural_tag(request.schema))
    elif request.schema is not None:
        structured = StructuredOutputsParams(json=closed_schema(request.schema))
    return SamplingParams(
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        seed=request.seed,
        **request.sampling_options(),  # unset: vLLM's defaults (no top-p or top-k cut)
        **({"thinking_token_budget": think_budget} if think_budget else {}),
        **(
            {"stop_token_ids": _harmony.stop_tokens(), "skip_special_tokens": False}
            if harmony
            else {}
        ),
        structured_outputs=structured,
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
        think, think_budget: a reasoning model's thinking (`_thinking`): on, the engine's
            reasoning parser starts the grammar where the thought ends, and the same parser
            (vLLM's own class) splits each output into thought and answer; the budget is vLLM's
            `thinking_token_budget`.
        reasoning_parser: vLLM's parser for the model's thinking (`--reasoning-parser`); None:
            the family's, by name (`FAMILY_PARSERS`).
        reasoning_effort: gpt-oss's effort (low, medium, high; None: medium), in its harmony
            system message; gpt-oss runs in harmony, rendered and parsed by openai-harmony.
        enable_thinking: the earlier name of the switch (true: think=on, false: think=off).
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
        think: ThinkSetting | bool | None = None,
        think_budget: AtLeastOne | None = None,
        reasoning_parser: str | None = None,
        reasoning_effort: _harmony.ReasoningEffort | None = None,
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
        vllm = _import_vllm()
        self.dtype = dtype
        self.structured_backend = structured_backend
        think = _switch_as_think(think, enable_thinking)
        engine_parser = self._choose_parser(
            model, think, think_budget, reasoning_parser, structured_backend
        )
        self.reasoning_effort = reasoning_effort or ("medium" if self.harmony else None)
        if reasoning_effort is not None and not self.harmony:
            raise FinReflectError(f"reasoning_effort is gpt-oss's (harmony), not {model}'s")
        optional = {
            name: value
            for name, value in (
                ("max_model_len", max_model_len),
                ("distributed_executor_backend", distributed_executor_backend),
                # The engine starts the grammar where this parser sees the thought end.
                ("reasoning_parser", engine_parser),
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
        self._set_up_thinking(model, think, think_budget, tokenizer, engine_parser)

    def _choose_parser(
        self,
        model: str,
        think: str | None,
        budget: int | None,
        named: str | None,
        structured_backend: str,
    ) -> str | None:
        """The model's reasoning parser (`named`, else its family's), and the one the engine
        gets: where the model will think (as set, or as its family always does). Before any
        load: gpt-oss's harmony always thinks (at an effort) and needs xgrammar's structural
        tag for its final channel."""
        self.reasoning_parser = named or family_parser(model)
        self.harmony = self.reasoning_parser == HARMONY
        if self.harmony and (think == "off" or budget or structured_backend != "xgrammar"):
            raise FinReflectError(
                f"{model} runs in gpt-oss's harmony format, which has no off switch: set its "
                "effort (reasoning_effort=low, no think=off or think_budget), and "
                "structured_backend=xgrammar (its final channel's structural tag)"
            )
        thinks = think == "on" or budget is not None
        if thinks and self.reasoning_parser is None:
            raise FinReflectError(
                f"think=on on vllm: name {model}'s reasoning parser (reasoning_parser=NAME, as "
                "vLLM's --reasoning-parser: qwen3, deepseek_r1, ...)"
            )
        native = think is None and self.reasoning_parser in ALWAYS_THINKING
        return self.reasoning_parser if thinks or native else None

    def _set_up_thinking(
        self,
        model: str,
        think: str | None,
        budget: int | None,
        tokenizer: Any,
        engine_parser: str | None,
    ) -> None:
        """The model's `think` setting, checked against what its template and format can do
        (gpt-oss's harmony always thinks) and against the parser the engine got."""
        capable = {"switch": False, "always": True, "can_think": True}  # harmony always thinks
        if not self.harmony:
            capable = template_thinking(self.chat_template, tokenizer.get_vocab())
            # A family that always thinks: the engine holds the grammar back until it ends.
            capable["always"] |= engine_parser is not None and think is None
        self.thinking = resolve_thinking(think, budget, model=model, **capable)
        if self.thinking.on and engine_parser is None:
            raise FinReflectError(
                f"{model} thinks by default (its chat template opens a thought): set think=on, "
                "and the engine gets its reasoning parser"
            )
        self._parser: Any = None  # vLLM's reasoning parser, made on first use (`_answer`)

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
            "chat": self.chat,
            **(self.chat_template.identity() if self.chat_template else {}),
            **self._thinking_identity(),
        }

    def _thinking_identity(self) -> dict[str, Any]:
        """How the model thinks, for its identity, keyed as earlier versions keyed the switch
        where they ran the model the same way (a model that does not think, a switch set off):
        their cached answers stay valid; any other way is a new key."""
        think = self.thinking
        switch = None if think.default else think.on
        if think.mode == "none" or (think.mode == "off" and not think.default):
            return {"enable_thinking": switch}
        effort = {"reasoning_effort": self.reasoning_effort} if self.harmony else {}
        return {"enable_thinking": switch, **think.identity(), **effort}

    def resolved(self) -> dict[str, Any]:
        tokenizer, template = self.llm.get_tokenizer(), self.chat_template
        model_config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        dtype = getattr(model_config, "dtype", None)
        return {
            **super().resolved(),
            "device": _device_type(),
            "dtype": None if dtype is None else str(dtype).removeprefix("torch."),
            **tokenizer_info(tokenizer, template and template.text, self.context_length),
            **self.thinking.record(),
            "reasoning_parser": self.reasoning_parser if self.thinking.on else None,
            "reasoning_effort": self.reasoning_effort,
        }

    def _messages(self, request: GenerationRequest) -> list[Message]:
        """What a chat model's template gets (`chat=True` without a template: vLLM's default)."""
        if self.chat_template is None:
            return chat_messages(request)
        return self.chat_template.messages(request)

    def prompt_length(self, request: GenerationRequest) -> int:
        tokenizer = self.llm.get_tokenizer()
        if self.harmony:
            return len(_harmony.render(request, self.reasoning_effort))
        if not self.chat:  # `LLM.generate` adds the tokenizer's special tokens (a BOS)
            return len(tokenizer(request.plain_prompt()).input_ids)
        ids = tokenizer.apply_chat_template(
            self._messages(request),
            tokenize=True,
            add_generation_prompt=True,
            **self.thinking.template_switch(),
        )
        # transformers 5 returns a mapping (return_dict=True by default); 4.x a list of ids.
        return len(ids["input_ids"] if hasattr(ids, "keys") else ids)

    def _complete(self, requests: list[GenerationRequest]) -> list[Completion]:
        params = [
            sampling_params(request, self.thinking.budget, self.harmony) for request in requests
        ]
        # The run's bar moves as vLLM finishes each request, not once for the whole call.
        progress = finished_requests(self.decoding_progress(len(requests), len(requests)))
        # One call for the whole batch: vLLM's scheduler batches across requests itself.
        if self.harmony:
            effort = self.reasoning_effort
            outputs = self.llm.generate(
                [{"prompt_token_ids": _harmony.render(r, effort)} for r in requests],
                sampling_params=params,
                use_tqdm=progress,
            )
        elif self.chat:
            switch = self.thinking.template_switch()
            outputs = self.llm.chat(
                [self._messages(request) for request in requests],
                sampling_params=params,
                use_tqdm=progress,
                **({"chat_template_kwargs": switch} if switch else {}),
            )
        else:
            outputs = self.llm.generate(
                [request.plain_prompt() for request in requests],
                sampling_params=params,
                use_tqdm=progress,
            )
        return [
            Completion(
                prompt_tokens=len(output.prompt_token_ids or ()),
                completion_tokens=len(output.outputs[0].token_ids),
                # Automatic prefix caching's hits (a RequestOutput of vLLM's v1 engine says so).
                cached_prompt_tokens=getattr(output, "num_cached_tokens", None),
                **self._answer(output.outputs[0]),
            )
            for output in outputs
        ]

    def _answer(self, output: Any) -> dict[str, Any]:
        """A completion's text, and where the model thought, its thought apart: split by
        openai-harmony (gpt-oss) or by vLLM's own reasoning parser, the one the engine used."""
        tokens = list(output.token_ids)
        if self.harmony:
            thought, answer, ended, reasoning = _harmony.parse(tokens)
        elif self.thinking.on:
            thought, answer, ended, reasoning = self._split(output.text, tokens)
        else:
            return {"text": output.text}
        budget = self.thinking.budget
        return {
            "text": answer,
            "thinking": None if thought is None else thought.strip(),
            "reasoning_tokens": reasoning,
            # vLLM writes the end for a thought at its budget: the thought before it that long.
            "thinking_cut": bool(budget) and ended and reasoning - 1 >= budget,
            "thinking_ended": ended,
        }

    def _split(self, text: str, tokens: list[int]) -> tuple[str | None, str, bool, int]:
        """(thought, answer, ended, thinking tokens) of an output: ended where its tokens hold
        the parser's end of thinking (its tokens up to and with it are the thought's), the
        texts as vLLM's own parser class splits them."""
        tokenizer = self.llm.get_tokenizer()
        if self._parser is None:
            from vllm.reasoning import ReasoningParserManager

            parser = ReasoningParserManager.get_reasoning_parser(self.reasoning_parser)
            self._parser = parser(tokenizer)
            end = getattr(self._parser, "reasoning_end_str", None) or THINK_TAGS.end
            self._end_id = tokenizer.get_vocab().get(end)
        thought, content = self._parser.extract_reasoning(text, None)
        if self._end_id is None:  # an end of more than one token: as the parser says
            return thought, (content or "").strip(), content is not None, 0
        if self._end_id not in tokens:
            return thought, "", False, len(tokens)
        return thought, (content or "").strip(), True, tokens.index(self._end_id) + 1

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


def _switch_as_think(think: str | None, enable_thinking: bool | None) -> str | None:
    """`think` (as on or off), from the earlier `enable_thinking` switch where only that was
    given."""
    think = as_setting(think)
    if enable_thinking is None:
        return think
    alias = "on" if enable_thinking else "off"
    if think is not None and think != alias:
        raise FinReflectError(f"think={think} and enable_thinking={enable_thinking}: give one")
    return alias


def _import_vllm() -> Any:
    """The vllm package; one line naming the extra where it is missing, or older than 0.12."""
    try:
        import vllm

        # Imported only to fail here, before a model loads, on a vLLM older than 0.12.
        from vllm.sampling_params import StructuredOutputsParams  # noqa: F401
    except ImportError:
        raise FinReflectError(
            f"the vllm backend needs vLLM >= 0.12: {install_hint('vllm')} "
            "(GPU only; separate environment)"
        ) from None
    return vllm
