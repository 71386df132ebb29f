"""The `scripted` backend: returns outputs it is given, for tests of control flow and for dry
runs of a pipeline. It is not a model; its outputs mean nothing."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models._base import LM, AtLeastOne, AtLeastZero
from finreflect_eval.models._cache import ResponseCache
from finreflect_eval.models._requests import Completion, GenerationRequest

Responder = Callable[[GenerationRequest], str]


class ScriptedModel(LM):
    """Answers each request with the next scripted output (the last one repeats), or with
    `responses(request)` when given a function. `requests` keeps every request it saw.

    Args (besides those of `LM`):
        responses: outputs in order, a function of the request, the path of a JSON list, or
            `"package.module:function"` naming a function of the request (usable from YAML).
    """

    backend = "scripted"

    def __init__(
        self,
        model: str = "scripted",
        *,
        revision: str | None = None,
        cache: ResponseCache | None = None,
        batch_size: AtLeastOne = 8,
        max_retries: AtLeastZero = 0,
        responses: Sequence[str] | Responder | str = ("{}",),
    ) -> None:
        super().__init__(
            model, revision=revision, cache=cache, batch_size=batch_size, max_retries=max_retries
        )
        if isinstance(responses, str):
            reference, responses = responses, _load_responses(responses)
        else:
            module = getattr(responses, "__module__", "")
            reference = f"{module}.{getattr(responses, '__qualname__', '')}"
        # Two scripted models answer differently: what they answer is part of the cache identity
        # (the outputs themselves, or the responder function's name).
        self.source = reference if callable(responses) else list(responses)
        self.responses = responses
        self.requests: list[GenerationRequest] = []

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "responses": self.source}

    def _complete(self, requests: list[GenerationRequest]) -> list[Completion]:
        completions = []
        for request in requests:
            if callable(self.responses):
                text = self.responses(request)
            else:
                text = self.responses[min(len(self.requests), len(self.responses) - 1)]
            self.requests.append(request)
            # Not a model: its "tokens" are the words of the prompt and of the answer.
            words = len(request.plain_prompt().split())
            completions.append(
                Completion(text=text, prompt_tokens=words, completion_tokens=len(text.split()))
            )
        return completions


def _load_responses(reference: str) -> Sequence[str] | Responder:
    module, sep, name = reference.partition(":")
    if sep and not Path(reference).exists():
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise FinReflectError(f"cannot import scripted responder {reference}: {exc}") from exc
    try:
        return json.loads(Path(reference).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FinReflectError(f"cannot read scripted responses {reference}: {exc}") from exc
