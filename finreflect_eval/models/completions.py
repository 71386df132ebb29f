"""The `openai-completions` backend: an OpenAI-compatible `/v1/completions` endpoint (text in,
text out), what lm-eval's `local-completions` and `openai-completions` talk to: vLLM serve,
llama.cpp's llama-server, SGLang. Transport, retries, limits and secrets are the openai
backend's; only the prompt, the schema's field and the answer's text differ."""

from __future__ import annotations

import logging
from typing import Any

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval._util.resources import install_hint
from finreflect_eval.models._chat import ChatTemplate, tokenizer_info
from finreflect_eval.models._requests import GenerationRequest, JsonSchema, closed_schema
from finreflect_eval.models.openai import LLAMA_CPP, OpenAIModel

logger = logging.getLogger(__name__)


class CompletionsModel(OpenAIModel):
    """A model behind an OpenAI-compatible completions endpoint.

    Our prompts are chat messages; the endpoint takes one prompt string. With `tokenizer`, its
    chat template renders them (with the generation prompt), as lm-eval does with a Hugging
    Face tokenizer and `--apply_chat_template`; the BOS token the template writes is left out,
    since the server adds one when it tokenizes a prompt. Without a tokenizer, or with one that
    has no chat template, the prompt is the messages' contents joined by blank lines: what the
    hf and vllm backends give a base model. Which rendering ran changes the outputs: it is in
    `identity()` (so in the cache key and the run's record) as `prompt_format`, `plain` or
    `chat_template` with the template's sha256.

    The JSON schema goes where the server reads it on this endpoint: llama-server ignores
    `response_format` there and reads its own `json_schema` (it is recognised by its answer to
    `GET /models`); vLLM and SGLang read `response_format`, as on chat.

    Args (besides those of `OpenAIModel`):
        base_url: as for `openai`; lm-eval's `.../v1/completions` is read as its `/v1` root.
        tokenizer: a Hugging Face tokenizer (Hub id or folder; lm-eval's `tokenizer`) whose
            chat template renders the messages; loaded at `revision`, as lm-eval does. Needs
            the [hf] extra.
        trust_remote_code: run code from the tokenizer's repo (off unless asked).
    """

    backend = "openai-completions"
    endpoint_path = "/completions"

    def __init__(
        self,
        model: str,
        *,
        tokenizer: str | None = None,
        trust_remote_code: bool = False,
        **kwargs: Any,
    ) -> None:
        if any(kwargs.get(arg) for arg in ("think_budget", "reasoning_effort")) or (
            kwargs.get("think") == "on"
        ):
            raise FinReflectError(
                "think=on: openai-completions holds the whole completion to the schema from its "
                "first token; use the openai backend (chat), whose server starts it after the "
                "thought (a budget or an effort too)"
            )
        # Before the connection pool opens: a tokenizer that cannot load leaves nothing open.
        loaded = _load_tokenizer(tokenizer, kwargs.get("revision"), trust_remote_code)
        super().__init__(model, **kwargs)
        self._tokenizer = loaded
        has_template = getattr(loaded, "chat_template", None) is not None
        self.chat_template = ChatTemplate(loaded) if has_template else None
        # The rendering, as the identity (and so the cache key and the record) names it.
        self.prompt_format: dict[str, Any] = {"prompt_format": "plain"}
        if self.chat_template is None:
            logger.info(
                "%s: prompts go as plain text (the messages joined by blank lines)%s",
                model,
                "" if tokenizer else "; give tokenizer=ORG/NAME to apply a chat template",
            )
        else:
            self.prompt_format = {
                "prompt_format": "chat_template",
                "tokenizer": tokenizer,
                **self.chat_template.identity(),
            }

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), **self.prompt_format}

    def resolved(self) -> dict[str, Any]:
        if self._tokenizer is None:
            return super().resolved()
        template = self.chat_template and self.chat_template.text
        return {**super().resolved(), **tokenizer_info(self._tokenizer, template, None)}

    def render(self, request: GenerationRequest) -> str:
        """The one prompt string the request becomes (see the class docstring)."""
        if self.chat_template is None:
            return request.plain_prompt()
        text = self.chat_template.render(request, **self.thinking.template_switch())
        bos = self._tokenizer.bos_token
        return text.removeprefix(bos) if bos else text

    def _thinking_fields(self) -> dict[str, Any]:
        return {}  # the switch is in the prompt rendered here

    def _input(self, request: GenerationRequest) -> dict[str, Any]:
        return {"prompt": self.render(request)}

    def _constraint(self, schema: JsonSchema) -> dict[str, Any]:
        if self.served_by == LLAMA_CPP:
            return {"json_schema": closed_schema(schema)}
        return super()._constraint(schema)

    @staticmethod
    def _answer_text(choice: dict[str, Any]) -> Any:
        return choice["text"]


def _load_tokenizer(name: str | None, revision: str | None, trust_remote_code: bool) -> Any:
    if name is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise FinReflectError(f"tokenizer= needs transformers: {install_hint('hf')}") from None
    try:
        return AutoTokenizer.from_pretrained(
            name, revision=revision, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError) as exc:  # not found, offline, not a tokenizer
        raise FinReflectError(f"cannot load tokenizer '{name}': {first_line(exc)}") from None
