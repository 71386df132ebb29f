"""Backends by name, model specs from the command line, and the one-model-at-a-time lifecycle."""

from __future__ import annotations

import ast
import difflib
import gc
import importlib
import inspect
import json
import logging
import sys
import typing
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.redaction import REDACTED, redact, redact_text
from finreflect_eval.models._base import LM
from finreflect_eval.models._cache import ResponseCache
from finreflect_eval.models.replicas import REPLICA_ARGS, ReplicatedLM, Replication

if TYPE_CHECKING:
    from finreflect_eval.models._endpoint import EndpointProbe

logger = logging.getLogger(__name__)

# name -> "module:Class"; imported only when used, so a missing optional extra hurts no one else.
BACKENDS: dict[str, str] = {
    "hf": "finreflect_eval.models.hf:HFModel",
    "vllm": "finreflect_eval.models.vllm:VLLMModel",
    "openai": "finreflect_eval.models.openai:OpenAIModel",
    "openai-completions": "finreflect_eval.models.completions:CompletionsModel",
    "scripted": "finreflect_eval.models.scripted:ScriptedModel",
}


def register_backend(name: str, target: str) -> None:
    """Add a backend, as `"package.module:ClassName"` (a subclass of `LM`)."""
    BACKENDS[name] = target


def get_backend(name: str) -> type[LM]:
    if name in LM_EVAL_ONLY and name not in BACKENDS:
        raise _not_ours("--backend", name)
    if name not in BACKENDS:
        close = difflib.get_close_matches(name, BACKENDS, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise FinReflectError(
            f"unknown backend '{name}'{hint}; available: {', '.join(sorted(BACKENDS))}"
        )
    module_name, class_name = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


_WORDS = {"true": True, "false": False, "none": None, "null": None}


def parse_model_args(
    text: str | Sequence[str] | dict[str, Any] | None, flag: str = "--model-args"
) -> dict[str, Any]:
    """`k=v,k2=v2` → dict; also a JSON object, several such items (lm-eval's `--model_args a=1
    b=2`, merged key by key), or a dict. Values are Python literals where they parse (`4`,
    `0.9`, `{...}`); `true`/`false`/`none` in any case are booleans and None (as lm-eval users
    write them). A key given twice in one item, or with two different values in two items, is
    an error; errors name `flag`, the option as the user typed it."""
    if isinstance(text, dict):
        return dict(text)
    if not isinstance(text, str):
        args: dict[str, Any] = {}
        for item in text or ():
            for key, value in parse_model_args(item, flag).items():
                if key in args and args[key] != value:
                    raise _given_twice(flag, key, args[key], value)
                args[key] = value
        return args
    if text.strip().startswith("{"):
        return _json_object(text, flag)
    args = {}
    for item in filter(None, (part.strip() for part in _split_top_level(text))):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key:
            raise FinReflectError(f"{flag} item '{_shown(item)}' is not key=value")
        parsed = _literal(value)
        if key in args:
            raise _given_twice(flag, key, args[key], parsed)
        args[key] = parsed
    return args


def parse_batch_size(value: int | str) -> int | str:
    """`N`, `auto`, or lm-eval's `auto:N` (which re-detects the size N times: read as `auto`),
    with N ≥ 1; the one reading of a batch size, for the command line and the Python API."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    text = str(value)
    number = text.removeprefix("auto:")
    if text != "auto" and not (number.isascii() and number.isdigit() and int(number) >= 1):
        raise FinReflectError(f"must be N, auto or auto:N (N ≥ 1), got {value}")
    return int(text) if text.isdigit() else "auto"


def _literal(value: str) -> Any:
    if value.lower() in _WORDS:
        return _WORDS[value.lower()]
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def _json_object(text: str, flag: str) -> dict[str, Any]:
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in pairs:
            if key in found:
                raise _given_twice(flag, key, found[key], value)
            found[key] = value
        return found

    # The text is not echoed: it may hold a key, and a cut excerpt defeats redaction.
    try:
        parsed = json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise FinReflectError(
            f"{flag}: not a JSON object ({exc.msg} at character {exc.pos})"
        ) from None
    if not isinstance(parsed, dict):
        raise FinReflectError(f"{flag}: not a JSON object")
    return parsed


def _shown(item: str) -> str:
    """An item of a key=value list as an error shows it: a piece of a URL that a comma cut
    (`pa,ssword@host`) is shown from its `@` on, and keys are redacted."""
    if "@" in item and "://" not in item:
        item = f"{REDACTED}@{item.rsplit('@', 1)[1]}"
    return redact_text(item)


def _given_twice(flag: str, key: str, first: Any, second: Any) -> FinReflectError:
    # The values may be secrets (`api_key=...`, a URL with a password): shown redacted.
    first, second = (redact({key: value})[key] for value in (first, second))
    return FinReflectError(f"{flag}: key '{key}' given twice ({first!r} and {second!r}): keep one")


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets and quoted values, so `extra_body={"a": 1, "b": 2}`
    stays whole; a quote counts only at the start of a value or inside brackets."""
    parts, depth, quote, start = [], 0, "", 0
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"" and (depth or text[index - 1 : index] == "="):
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return [*parts, text[start:]]


# lm-eval's model types: our backend, the model arg naming the model, and the renames of its
# other model args: our name, or the values an arg of lm-eval's own request path may have
# because they mean what we do anyway (it is dropped; any other value is refused).
Renames = dict[str, str | tuple[Any, ...]]
_CHAT_COMPLETIONS_ARGS: Renames = {
    "num_concurrent": "max_concurrency",
    "max_retries": "http_retries",  # lm-eval's are HTTP retries; ours re-ask invalid outputs
    "tokenized_requests": (None, False),  # our requests are text, never token ids
    "tokenizer_backend": (None,),
}
# `tokenizer=` on /v1/completions is a Hugging Face tokenizer, lm-eval's `huggingface` backend.
_COMPLETIONS_ARGS: Renames = {
    **_CHAT_COMPLETIONS_ARGS,
    "tokenizer_backend": (None, "huggingface"),
}
LM_EVAL_BACKENDS: dict[str, tuple[str, str, Renames]] = {
    "hf": ("hf", "pretrained", {}),
    "hf-auto": ("hf", "pretrained", {}),
    "huggingface": ("hf", "pretrained", {}),
    "vllm": ("vllm", "pretrained", {}),
    "local-chat-completions": ("openai", "model", _CHAT_COMPLETIONS_ARGS),
    "openai-chat-completions": ("openai", "model", _CHAT_COMPLETIONS_ARGS),
    "local-completions": ("openai-completions", "model", _COMPLETIONS_ARGS),
    "openai-completions": ("openai-completions", "model", _COMPLETIONS_ARGS),
}
_SERVED = "serve the model behind an OpenAI-compatible server and use --model "
_LLAMA_CPP = (
    "for llama.cpp's llama-server: --model local-completions or local-chat-completions with "
    "base_url=http://HOST:PORT/v1; for a .gguf file: --model hf"
)
_SGLANG = "for SGLang's server: --model local-chat-completions with its base_url"
_LITELLM = "with LiteLLM's proxy server: --model local-chat-completions"
_TEXT_HF = "our tasks are text: --model hf"
# lm-eval's other model types (its registry, and older releases' names): what of ours covers
# each, where something does ("": nothing). A name lm-eval adds fails the tests until it is here.
LM_EVAL_ONLY: dict[str, str] = {
    "dummy": "for a run without a model, --backend scripted answers with given outputs",
    "gguf": _LLAMA_CPP,
    "ggml": _LLAMA_CPP,
    "sglang": _SGLANG,
    "sglang-generate": _SGLANG,
    "vllm-vlm": "our tasks are text: --model vllm",
    "hf-multimodal": _TEXT_HF,
    "hf-audiolm-qwen": _TEXT_HF,
    "hf-mistral3": _TEXT_HF,
    "mamba_ssm": "transformers runs Mamba checkpoints (the *-hf ones): --model hf",
    "litellm": _LITELLM,
    "litellm-chat": _LITELLM,
    "litellm-chat-completions": _LITELLM,
    "trtllm": f"for TensorRT-LLM: {_SERVED}local-chat-completions (trtllm-serve)",
    "openvino": f"for OpenVINO: {_SERVED}local-chat-completions (OpenVINO Model Server)",
    "neuronx": f"for AWS Neuron: {_SERVED}local-chat-completions",
    "habana": f"for Intel Gaudi: {_SERVED}local-chat-completions",
    "ipex": f"for Intel CPUs and GPUs: {_SERVED}local-chat-completions",
    "onnxruntime": f"for ONNX Runtime: {_SERVED}local-chat-completions",
    "onnxruntime-genai": f"for ONNX Runtime: {_SERVED}local-chat-completions",
    "winml": f"for Windows ML: {_SERVED}local-chat-completions",
    "megatron_lm": f"for Megatron-LM: {_SERVED}local-chat-completions",
    "nemo_lm": f"for NeMo: {_SERVED}local-chat-completions",
    "anthropic-chat": "",
    "anthropic-chat-completions": "",
    "anthropic-completions": "",
    "steered": "",
    "watsonx_llm": "",
    "textsynth": "",
    "sparseml": "",
    "deepsparse": "",
    "optimum-causal": "",
}


def _not_ours(flag: str, name: str) -> FinReflectError:
    """One line for a backend name of lm-eval's that we do not have: which of ours covers it,
    and the ones we have."""
    covered = f" ({LM_EVAL_ONLY[name]})" if LM_EVAL_ONLY[name] else ""
    return FinReflectError(
        f"{flag} {name} is lm-eval's backend, not one of ours{covered}; "
        f"ours: {', '.join(sorted(BACKENDS))}"
    )


@dataclass(frozen=True)
class ModelSpec:
    """A model to load: backend name, model id/path/alias, and backend arguments."""

    model: str
    backend: str = "hf"
    args: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_cli(
        cls,
        model: str,
        backend: str | None = None,
        model_args: str | Sequence[str] | dict[str, Any] | None = None,
        **options: Any,
    ) -> ModelSpec:
        """The model of a command line, in our form or lm-eval's (one rule, documented in the
        README): with `--backend`, `--model` is the model. Without it, a `--model` that is a
        backend name (ours or lm-eval's: hf, vllm, local-chat-completions, ...) names the backend
        and the model is the model arg `pretrained` (`model` for the completions backends),
        as in `--model hf --model_args pretrained=ORG/NAME`; another backend name of lm-eval's is
        an error (`LM_EVAL_ONLY`); any other `--model` is the model, on the hf backend.
        `ORG/NAME@REV` pins a revision. `options` are the lm-eval flags that become model args
        (`batch_size`, `device`, `revision`, ...; None: not given)."""
        args = parse_model_args(model_args)
        renames: Renames = {}
        if backend is None and model in LM_EVAL_ONLY and model not in BACKENDS:
            raise _not_ours("--model", model)
        if backend is None and (model in LM_EVAL_BACKENDS or model in BACKENDS):
            backend, key, renames = LM_EVAL_BACKENDS.get(model, (model, "pretrained", {}))
            if key not in args:
                raise FinReflectError(
                    f"--model {model} names a backend: give the model as --model_args "
                    f"{key}=ORG/NAME (lm-eval's form), or as --model ORG/NAME --backend {backend}"
                )
            model = str(args.pop(key))
        elif "pretrained" in args:
            raise FinReflectError(
                f"model arg pretrained= goes with lm-eval's form --model BACKEND (got --model "
                f"{model}): use --model hf --model_args pretrained=..., or --model ORG/NAME"
            )
        for lm_eval_name, ours in renames.items():
            if lm_eval_name in args:
                value = args.pop(lm_eval_name)
                if isinstance(ours, str):
                    args[ours] = value
                elif value not in ours:
                    raise FinReflectError(f"model arg {lm_eval_name}={value} is not supported")
        if backend in (None, "hf") and "parallelize" in args:  # lm-eval: use every GPU
            options = {**options, "device_map": "auto" if args.pop("parallelize") else None}
        hub = (backend or "hf") in ("hf", "vllm")  # elsewhere `@` may be part of a name
        if hub and "@" in model and not Path(model).expanduser().exists():
            model, revision = model.rsplit("@", 1)
            _merge(args, "revision", revision)
        for name, value in options.items():
            _merge(args, name, value)
        return cls(model=model, backend=backend or "hf", args=args)


def _merge(args: dict[str, Any], name: str, value: Any) -> None:
    """A model arg given by a flag too (None: not given); two different values are an error."""
    if value is None:
        return
    if name in args and args[name] != value:
        raise FinReflectError(f"{name} is given twice, as {args[name]!r} and {value!r}: keep one")
    args[name] = value


@contextmanager
def load_model(spec: ModelSpec | LM, *, cache_path: str | Path | None = None) -> Iterator[LM]:
    """Load a model for one stage and free it afterwards, so one GPU can hold the candidate, then
    each judge in turn. A model loaded by the caller (an `LM`) is used as it is (with its own
    cache) and left to the caller to free."""
    if isinstance(spec, LM):
        yield spec
        return
    backend = get_backend(spec.backend)
    _check_args(backend, spec)
    cache = ResponseCache(cache_path) if cache_path is not None else None
    logger.info("loading %s model %s", spec.backend, spec.model)
    args = dict(spec.args)
    replication = Replication.take(args)
    lm = None
    try:
        if replication.on_ray:
            lm = ReplicatedLM(backend, spec.model, args, replication, cache)
        else:
            lm = backend(spec.model, cache=cache, **args)
        yield lm
    finally:
        if lm is not None:
            lm.close()
        if cache is not None:
            cache.close()
        del lm
        # Also after a failed load: a half-built engine must not hold memory the next model needs.
        gc.collect()
        torch = sys.modules.get("torch")  # only if a backend imported it
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()


def check_spec(spec: ModelSpec | LM) -> None:
    """A one-line error for an unknown backend, or a model arg it does not take or of the wrong
    type: checked before any model loads (a judge's mistake must not surface after hours of
    extraction), and a local model path that does not exist (found before the data, the
    judges or the model's library load). A loaded model has nothing left to check."""
    if isinstance(spec, LM):
        return
    backend = get_backend(spec.backend)
    _check_args(backend, spec)
    in_process = backend.engine_package is not None and not backend.remote  # loads weights here
    # Replicas on a Ray cluster it joins load the model on their own machines' disks.
    here = in_process and "ray_address" not in spec.args and is_model_path(spec.model)
    if here and not Path(spec.model).expanduser().exists():
        raise FinReflectError(f"cannot load model '{spec.model}': no such file or folder")


def is_model_path(model: str) -> bool:
    """Whether a model names a local file or folder (not a Hub id or an embedded name)."""
    return model.startswith(("/", "./", "../", "~")) or model.endswith(".gguf")


def probe_endpoint(spec: ModelSpec, timeout: float = 5.0) -> EndpointProbe | None:
    """What the server of a model behind an OpenAI-compatible endpoint answers now (see
    `openai.probe`); None for a model of another backend."""
    backend = get_backend(spec.backend)
    if not hasattr(backend, "endpoint_path"):
        return None
    from finreflect_eval.models._endpoint import probe

    return probe(spec.args.get("base_url"), backend.endpoint_path, timeout)


def _check_args(backend: type[LM], spec: ModelSpec) -> None:
    """Unknown model args are an error naming them and the valid ones, not a TypeError later;
    a value of the wrong type names the arg and the type it takes."""
    accepted: set[str] = set()
    annotations: dict[str, Any] = {}
    for cls in reversed(backend.__mro__):
        if cls.__init__ is object.__init__:
            continue
        accepted.update(inspect.signature(cls.__init__).parameters)
        # Hints that only type checkers resolve: then only the names are checked.
        with suppress(Exception):
            annotations.update(typing.get_type_hints(cls.__init__, include_extras=True))
    accepted -= {"self", "model", "cache", "args", "kwargs"}
    if backend.remote:  # a server runs its own replicas; requests to it go concurrently
        if "data_parallel_size" in spec.args:
            raise FinReflectError(
                f"data_parallel_size is for models run here (hf, vllm); backend "
                f"'{spec.backend}' sends requests to a server: raise max_concurrency instead"
            )
    else:
        accepted.update(REPLICA_ARGS)
        annotations.update(REPLICA_ARGS)
    unknown = sorted(set(spec.args) - accepted)
    if unknown:
        raise FinReflectError(
            f"unknown model arg '{unknown[0]}' for backend '{spec.backend}'; "
            f"valid: {', '.join(sorted(accepted))}"
        )
    for name, value in spec.args.items():
        try:
            adapter = TypeAdapter(annotations[name])
        except Exception:  # unannotated, or a type pydantic cannot check
            continue
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            raise FinReflectError(
                f"model arg {name}={value!r} for backend '{spec.backend}': {exc.errors()[0]['msg']}"
            ) from None
