"""The `hf` backend: any transformers causal LM (local folder, Hub id, GGUF file or embedded
alias), with JSON-schema-constrained decoding through outlines and batched generation."""

from __future__ import annotations

import importlib.util
import json
import logging
import time
import warnings
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval.models import _harmony
from finreflect_eval.models._base import LM, AtLeastOne, AtLeastZero, ReplicaPlan, hub_commit
from finreflect_eval.models._batch_size import largest_batch
from finreflect_eval.models._cache import ResponseCache
from finreflect_eval.models._chat import ChatTemplate, added_bos, tokenizer_info
from finreflect_eval.models._generate_args import each_step, row_limits, sampling_args, until
from finreflect_eval.models._gguf import checkpoint_source
from finreflect_eval.models._grammar import StructuredBackend, compile_generator, grammar_engine
from finreflect_eval.models._hf_checks import (
    FULL_PRECISION,
    LOAD_ERRORS,
    checked_settings,
    require_libraries,
)
from finreflect_eval.models._output_layer import use_rows_first
from finreflect_eval.models._prefix import PrefixCache, why_no_prefix_reuse
from finreflect_eval.models._requests import Completion, GenerationRequest, JsonSchema
from finreflect_eval.models._thinking import (
    THINK_TAGS,
    ThinkSetting,
    resolve_thinking,
    template_thinking,
)

logger = logging.getLogger(__name__)

# What a prompt position weighs in the progress bar, against a row's decoding step: positions
# are computed many at once (on 2 CPU cores, ~1/20-1/40 of a step of the embedded model).
PROMPT_WEIGHT = 1 / 32

# Batch sizes `auto` found, by checkpoint, dtype, device and max_batch_size: {tokens: size}.
FITTED_BATCHES: dict[tuple, dict[int, int]] = {}


class HFModel(LM):
    """A transformers model.

    Args (besides those of `LM`):
        gguf_file: file name of a GGUF checkpoint inside `model` (a folder or Hub repo); also
            implied when `model` is a path to a `.gguf` file or an embedded alias. Converted once
            to a cached safetensors folder, so later loads skip the slow dequantisation.
        dtype: torch dtype name or "auto": float32 on CPU; on a GPU the checkpoint's dtype, but
            bfloat16 for a float32 (or unstated) one where the GPU supports it.
        batch_size: requests per generate call, or "auto": the largest batch whose forward pass
            over the longest prompt plus max_tokens fits in memory, found as lm-eval does
            (accelerate's `find_executable_batch_size` from `max_batch_size` down), again when
            longer requests come.
        max_batch_size: where "auto" starts (lm-eval's default, 64).
        device: where the model runs (lm-eval's `--device`: cuda, cuda:0, cpu, mps).
        device_map: accelerate device map; default "auto" when CUDA is present, else CPU.
        trust_remote_code: run code from the model repo (off unless asked).
        structured_backend: outlines backend compiling the JSON schema into a logits processor.
        prefix_cache_tokens: prompt positions whose key/value states are kept for reuse by
            later prompts that start the same way (see `_prefix`); 0 turns reuse off.
        attn_implementation: transformers' attention kernel; None: flash_attention_2 on a GPU
            where flash-attn is installed, else transformers' default (SDPA).
        think, think_budget: a reasoning model's thinking (`_thinking`): on, in two phases in
            one sequence, a free thought, then the answer held to the schema.
    """

    backend = "hf"
    engine_package = "transformers"

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        cache: ResponseCache | None = None,
        batch_size: AtLeastOne | Literal["auto"] = 8,
        max_batch_size: AtLeastOne = 64,
        max_retries: AtLeastZero = 2,
        gguf_file: str | None = None,
        dtype: str = "auto",
        device: str | None = None,
        device_map: str | None = None,
        trust_remote_code: bool = False,
        structured_backend: StructuredBackend = "llguidance",
        prefix_cache_tokens: int = 16384,
        attn_implementation: str | None = None,
        think: ThinkSetting | bool | None = None,
        think_budget: AtLeastOne | None = None,
    ) -> None:
        self.auto_batch = batch_size == "auto"
        super().__init__(
            model,
            revision=revision,
            cache=cache,
            batch_size=max_batch_size if self.auto_batch else batch_size,
            max_retries=max_retries,
        )
        self.max_batch_size = max_batch_size
        self._fitted_length = 0  # the request length the automatic batch size was found for
        # Settings, then libraries, before anything is converted, downloaded or loaded.
        dtype = checked_settings(dtype, device, device_map, prefix_cache_tokens)
        require_libraries(structured_backend)
        self.structured_backend = structured_backend
        self.trust_remote_code = trust_remote_code
        source, self.checkpoint_id = checkpoint_source(model, gguf_file, revision)
        self._load_model(source, dtype, device, device_map, attn_implementation)
        self._load_tokenizer(source)
        self.commit = hub_commit(source, revision)
        self._set_up_structured_decoding()
        self._set_up_prefix_reuse(prefix_cache_tokens)
        vocabulary = self.tokenizer.get_vocab()
        if _harmony.CHANNEL in vocabulary:  # gpt-oss: its channels are not split here
            raise FinReflectError(
                f"{model} writes gpt-oss's harmony format, which the hf backend does not split: "
                "run it on the vllm backend, or behind a server (docs/reasoning.md)"
            )
        self.thinking = resolve_thinking(
            think, think_budget, model=model, **template_thinking(self.chat_template, vocabulary)
        )
        self._think_end_id = vocabulary.get(THINK_TAGS.end)
        # What ends the model's turn: its generation config's end tokens (Qwen3 has two), else
        # the tokenizer's.
        configured = self.hf_model.generation_config.eos_token_id
        ends = configured if isinstance(configured, list) else [configured]
        self._turn_ends = [t for t in ends if t is not None] or [self.tokenizer.eos_token_id]

    @classmethod
    def replica_plan(
        cls, args: dict[str, Any], cluster: Mapping[str, float], replicas: int
    ) -> ReplicaPlan:
        """A GPU per replica where the cluster has GPUs (and the model is not asked onto the
        CPU): Ray shows each replica its own GPU alone. On CPUs, an equal share of them: Ray
        sets a replica's torch threads to the CPUs it reserves."""
        if cluster.get("GPU") and "cpu" not in (args.get("device"), args.get("device_map")):
            return ReplicaPlan(bundles=({"CPU": 1.0, "GPU": 1.0},), actor_gpus=1.0)
        return ReplicaPlan(bundles=({"CPU": float(max(1, cluster.get("CPU", 1) // replicas))},))

    def identity(self) -> dict[str, Any]:
        return {
            **super().identity(),
            "checkpoint": self.checkpoint_id,
            "dtype": self.dtype,
            "structured_backend": self.structured_backend,
            **(self.chat_template.identity() if self.chat_template else {}),
            **self.thinking.identity(),
        }

    def resolved(self) -> dict[str, Any]:
        template = self.chat_template
        spread = getattr(self.hf_model, "hf_device_map", None)
        return {
            **super().resolved(),
            "device": str(self.hf_model.device),
            "device_map": spread and {part: str(where) for part, where in spread.items()},
            "attn_implementation": getattr(self.hf_model.config, "_attn_implementation", None),
            "dtype": str(self.hf_model.dtype).removeprefix("torch."),
            "num_parameters": self.hf_model.num_parameters(),
            **tokenizer_info(self.tokenizer, template and template.text, self.context_length),
            **self.thinking.record(),
        }

    # --- loading ---

    def _load_model(
        self,
        source: str,
        dtype: str,
        device: str | None,
        device_map: str | None,
        attn_implementation: str | None,
    ) -> None:
        """Load the weights from `source`, in the dtype and with the attention kernel that
        `dtype` and `attn_implementation` resolve to on this machine."""
        import torch
        import transformers

        cuda = torch.cuda.is_available()
        on_gpu = cuda and (device or device_map) != "cpu"
        self.dtype = dtype if dtype != "auto" or on_gpu else "float32"
        if attn_implementation is None and on_gpu and importlib.util.find_spec("flash_attn"):
            attn_implementation = "flash_attention_2"
        optional = {"attn_implementation": attn_implementation} if attn_implementation else {}
        try:
            if self.dtype == "auto" and on_gpu and torch.cuda.is_bf16_supported():
                # A float32 checkpoint on a GPU runs in bfloat16, as vLLM's "auto" halves one.
                config = transformers.AutoConfig.from_pretrained(
                    source, revision=self.revision, trust_remote_code=self.trust_remote_code
                )
                if str(getattr(config, "dtype", None)).removeprefix("torch.") in FULL_PRECISION:
                    self.dtype = "bfloat16"
            self.hf_model = transformers.AutoModelForCausalLM.from_pretrained(
                source,
                revision=self.revision,
                dtype=self.dtype,
                device_map=device_map or device or ("auto" if cuda else None),
                trust_remote_code=self.trust_remote_code,
                **optional,
            )
        except LOAD_ERRORS as exc:
            raise FinReflectError(f"cannot load model '{self.model}': {first_line(exc)}") from exc
        self.hf_model.eval()
        use_rows_first(self.hf_model)
        self.context_length = getattr(self.hf_model.config, "max_position_embeddings", None)
        # The GPUs a device map spreads the weights over (each waits while another computes).
        spread = (getattr(self.hf_model, "hf_device_map", None) or {}).values()
        self.devices = max(1, len({str(d) for d in spread if str(d) not in ("cpu", "disk")}))

    def _load_tokenizer(self, source: str) -> None:
        """Load the tokenizer from `source`; one without a pad token pads with its EOS token."""
        import transformers

        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                source, revision=self.revision, trust_remote_code=self.trust_remote_code
            )
        except LOAD_ERRORS as exc:
            raise FinReflectError(f"cannot load model '{self.model}': {first_line(exc)}") from exc
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def _set_up_structured_decoding(self) -> None:
        """Wrap the model for outlines, whose generators hold outputs to a JSON schema (each
        compiled on first use, see `_generator`)."""
        import outlines

        self.outlines_model = outlines.from_transformers(self.hf_model, self.tokenizer)
        self.has_chat_template = self.outlines_model.type_adapter.has_chat_template
        self.chat_template = ChatTemplate(self.tokenizer) if self.has_chat_template else None
        # `model_input` renders the template: outlines' own rendering would be read with 2 BOS.
        self.outlines_model.type_adapter.has_chat_template = False
        self._added_bos = added_bos(self.tokenizer)
        self._generators: dict[str, Any] = {}  # one compiled generator per distinct schema
        self._grammar_engine: Any = None  # see `_engine`

    def _set_up_prefix_reuse(self, positions: int) -> None:
        """Keep up to `positions` prompt positions for later prompts that start the same way,
        where the model allows it (see `_prefix`)."""
        self.prefix_cache: PrefixCache | None = None
        if positions > 0:
            obstacle = why_no_prefix_reuse(self.hf_model)
            if obstacle is None:
                self.prefix_cache = PrefixCache(self.hf_model, positions)
            else:
                logger.warning(
                    "%s: prompt prefix reuse is off, every prompt is computed whole: %s",
                    self.model,
                    obstacle,
                )

    # --- generation ---

    def prepare(self, schema: JsonSchema | None) -> None:
        """Compile a schema ahead of its first request (e.g. to time compilation apart)."""
        self._generator(schema)

    def _generator(self, schema: JsonSchema | None) -> Any:
        """The compiled generator for a schema, built on first use and reused after."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._generators:
            started = time.perf_counter()
            self._generators[key] = self._compile(schema)
            self.stats["grammar_seconds"] += time.perf_counter() - started
        return self._generators[key]

    def _compile(self, schema: JsonSchema | None) -> Any:
        return compile_generator(self.outlines_model, schema, self.structured_backend, self._engine)

    def _engine(self) -> Any:
        """The grammar engine for this model's tokenizer, looked up once (see `_grammar`)."""
        if self._grammar_engine is None:
            self._grammar_engine = grammar_engine(
                self.outlines_model, self.tokenizer, self.structured_backend
            )
        return self._grammar_engine

    def model_input(self, request: GenerationRequest) -> str:
        """The prompt outlines gets: a chat model's request through its template (a BOS the
        template writes is left to the tokenizer, which adds one), else the plain prompt."""
        if self.chat_template is None:
            return request.plain_prompt()
        switch = self.thinking.template_switch()
        return self.chat_template.render(request, **switch).removeprefix(self._added_bos)

    def _complete(self, requests: list[GenerationRequest]) -> list[Completion]:
        # Requests that share a schema and sampling parameters run as one batch.
        groups: dict[tuple, list[int]] = {}
        for index, request in enumerate(requests):
            key = (
                json.dumps(request.schema, sort_keys=True),
                request.max_tokens,
                request.temperature,
                request.seed,
                request.top_p,
                request.top_k,
            )
            groups.setdefault(key, []).append(index)
        completions: list[Completion | None] = [None] * len(requests)
        with warnings.catch_warnings():
            # llguidance complains about the padding fed to rows of a batch that have already
            # finished; the finished rows are complete, and every output is validated anyway.
            warnings.filterwarnings("ignore", message="Error in LLMatcher")
            for indices in groups.values():
                group = self._complete_group([requests[i] for i in indices])
                for index, completion in zip(indices, group, strict=True):
                    completions[index] = completion
        return completions  # type: ignore[return-value]

    def _complete_group(self, group: list[GenerationRequest]) -> list[Completion]:
        """One batched generate call for requests with the same schema and sampling (two for a
        model that thinks: the thoughts, then the answers)."""
        # The grammar first (a new tokenizer's engine takes seconds): its wait and the first
        # step's (llguidance compiles its kernel) come apart, the prompts' progress between.
        generator = self._generator(group[0].schema)
        prompts = [self.model_input(request) for request in group]
        if self.thinking.on:
            return self._think_then_answer(group, prompts, generator)
        texts, read, reused = self._batch(group[0], prompts, generator)
        return [
            Completion(
                text=text,
                prompt_tokens=tokens,
                completion_tokens=self._length(text),
                cached_prompt_tokens=cached,
            )
            for tokens, text, cached in zip(read, texts, reused, strict=True)
        ]

    def _think_then_answer(
        self, group: list[GenerationRequest], prompts: list[str], generator: Any
    ) -> list[Completion]:
        """Each request's thought, free, until its end-of-thinking token or the budget (where
        the end is written for it), then its answer held to the schema in the same sequence
        (the prompt's cached positions reused), within what is left of `max_tokens`."""
        first, budget, tags = group[0], self.thinking.budget, THINK_TAGS
        limit = min(first.max_tokens, budget or first.max_tokens)
        thoughts, read, reused = self._batch(first, prompts, None, limit, stop=self._think_end_id)
        completions: list[Completion | None] = [None] * len(group)
        answering: list[int] = []
        for row, ids in enumerate(thoughts):
            # The end tag kept, though a tokenizer mark it special; its end of turn left out.
            text = self.tokenizer.decode(ids[:-1] if ids and ids[-1] in self._turn_ends else ids)
            # Ended with room for an answer; or cut at a budget below max_tokens (the end is
            # written for it); else it did not end (max_tokens, or an end of turn inside it).
            ended = bool(ids) and ids[-1] == self._think_end_id and len(ids) < first.max_tokens
            cut = not ended and budget is not None and len(ids) >= budget < first.max_tokens
            thinking, _, _ = tags.split(text if ended else text + tags.end)
            completions[row] = Completion(
                text=None if ended or cut else "",
                prompt_tokens=read[row],
                completion_tokens=len(ids),
                cached_prompt_tokens=reused[row],
                thinking=thinking,
                reasoning_tokens=len(ids),
                thinking_cut=cut,
                thinking_ended=ended or cut,
            )
            if ended or cut:
                prompts[row] += text + ("" if ended else f"\n{tags.end}") + tags.after
                answering.append(row)
        if answering:
            left = [first.max_tokens - len(thoughts[row]) for row in answering]
            answers, _, _ = self._batch(
                first, [prompts[row] for row in answering], generator, max(left), limits=left
            )
            for row, answer in zip(answering, answers, strict=True):
                done = completions[row]
                completions[row] = replace(
                    done,
                    text=answer,
                    completion_tokens=done.completion_tokens + self._length(answer),
                )
        return completions  # type: ignore[return-value]

    def _batch(
        self,
        first: GenerationRequest,
        prompts: list[str],
        generator: Any,
        max_new_tokens: int | None = None,
        *,
        stop: int | None = None,
        limits: list[int] | None = None,
    ) -> tuple[list[Any], list[int], list[int]]:
        """Generate for `prompts` with `first`'s sampling, up to `max_new_tokens` (default its
        `max_tokens`; `limits`: each row's own, lower): through the outlines `generator` (the
        texts), or, without one, free up to the `stop` token (each row's new token ids). Also
        each row's prompt tokens as the model reads them, and those reused from the cache."""
        import torch
        from transformers import StoppingCriteriaList

        max_new_tokens = first.max_tokens if max_new_tokens is None else max_new_tokens
        sampling = sampling_args(first)
        # The same tokens outlines will pass to generate (it tokenizes the same way).
        input_ids, attention_mask = self.outlines_model.tokenizer.encode(prompts)
        prompt_tokens = int(attention_mask.sum())
        # The work: the prompts, then one unit a row each decoding step, up to max_new_tokens.
        on_work = self.decoding_progress(
            len(prompts), prompt_tokens * PROMPT_WEIGHT + len(prompts) * max_new_tokens
        )
        on_prompt = on_work and (lambda tokens: on_work(tokens * PROMPT_WEIGHT))
        prefilled = self.prefix_cache and self.prefix_cache.batch_cache(
            input_ids, attention_mask, on_prompt
        )
        self.stats["prompt_tokens"] += prompt_tokens
        read = [int(n) for n in attention_mask.sum(1)]  # each row's prompt, as the model reads it
        reused = [0] * len(prompts)
        if prefilled:
            prefilled_cache, computed = prefilled
            sampling[self.prefix_cache.keyword] = prefilled_cache
            self.stats["prompt_tokens_computed"] += sum(computed) + len(prompts)  # + each last
            # All but each row's last prompt token are cached: those not computed were reused.
            reused = [n - 1 - new for n, new in zip(read, computed, strict=True)]
        else:
            self.stats["prompt_tokens_computed"] += input_ids.numel()  # padding included
        criteria = []
        if on_work is not None:
            # The first step computes what the prefix cache left: each row's last prompt token.
            prompt_left = (len(prompts) if prefilled else prompt_tokens) * PROMPT_WEIGHT
            criteria.append(each_step(on_work, len(prompts), prompt_left))
        if limits is not None:
            criteria.append(row_limits(limits, input_ids.shape[1]))
        if criteria:
            sampling["stopping_criteria"] = StoppingCriteriaList(criteria)
        torch.manual_seed(first.seed)
        with torch.inference_mode():
            if generator is not None:
                outputs = generator.batch(
                    prompts,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=self.tokenizer.pad_token_id,
                    **sampling,
                )
                return outputs, read, reused
            device = self.hf_model.device
            generated = self.hf_model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                max_new_tokens=max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=[stop, *self._turn_ends],
                **sampling,
            )
        new = generated[:, input_ids.shape[1] :].tolist()
        ends = {stop, *self._turn_ends, self.tokenizer.pad_token_id}
        return [until(row, ends) for row in new], read, reused

    def _length(self, text: str) -> int:
        """The tokens of a generated text."""
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def fit_batch_size(self, requests: list[GenerationRequest]) -> None:
        if not self.auto_batch or not requests:
            return
        longest = max(self.prompt_length(r) + r.max_tokens for r in requests)
        if longest <= self._fitted_length:
            return
        # A size found for as long requests by an earlier load of this checkpoint here (the
        # candidate, then judges on the same model) holds: models of a run load one at a time.
        found = FITTED_BATCHES.setdefault(
            (self.checkpoint_id, self.dtype, str(self.hf_model.device), self.max_batch_size), {}
        )
        known = [length for length in found if length >= longest]
        if known:
            self.batch_size = found[min(known)]
        else:
            self.batch_size = found[longest] = self._largest_batch(longest)
        self._fitted_length = longest
        logger.info("batch size %d for requests up to %d tokens", self.batch_size, longest)

    def _largest_batch(self, length: int) -> int:
        return largest_batch(self.hf_model, length, self.max_batch_size, self.model)

    def prompt_length(self, request: GenerationRequest) -> int:
        # As outlines encodes it for generation: with the tokenizer's special tokens (a BOS).
        return len(self.tokenizer(self.model_input(request)).input_ids)

    def close(self) -> None:
        self._generators.clear()
        self.prefix_cache = None
        for name in ("outlines_model", "hf_model"):
            if hasattr(self, name):
                delattr(self, name)
