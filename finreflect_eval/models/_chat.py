"""How a request becomes what a chat model reads, the same on every backend that renders a
tokenizer's chat template here (hf, vllm, openai-completions): its messages (a refused system
turn folded into the first user turn), the template's text and sha (part of each model's
identity), the BOS a tokenizer adds, and lm-eval's tokenizer record."""

from __future__ import annotations

from typing import Any

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.models._requests import GenerationRequest, Message

SYSTEM_FIRST = ["system", "user"]


def chat_messages(request: GenerationRequest, fold_system: bool = False) -> list[Message]:
    """The request's messages (a bare prompt as one user turn). With `fold_system` (a template
    that refuses a system turn, as Gemma 2's does), a leading system turn's text starts the first
    user turn instead, where Gemma 3's template puts it."""
    if not request.messages:
        return [{"role": "user", "content": request.plain_prompt()}]
    messages = list(request.messages)
    if fold_system and len(messages) > 1 and [m["role"] for m in messages[:2]] == SYSTEM_FIRST:
        system, user, *rest = messages
        return [{"role": "user", "content": f"{system['content']}\n\n{user['content']}"}, *rest]
    return messages


class ChatTemplate:
    """A tokenizer's chat template as every backend applies it: the `default` one of named
    templates (Command-R's, Hermes'), and where it refuses a system turn (Gemma 2's), the system
    text at the start of the first user turn. A template that refuses a prompt is one line."""

    def __init__(self, tokenizer: Any) -> None:
        from jinja2 import TemplateError

        self.tokenizer = tokenizer
        self.text: str = tokenizer.get_chat_template()
        probe = [{"role": role, "content": "x"} for role in SYSTEM_FIRST]
        try:
            tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
            self.fold_system = False
        except TemplateError:
            self.fold_system = True

    def identity(self) -> dict[str, str]:
        """What of the template changes the outputs, for a model's identity (the cache key)."""
        return {"chat_template_sha": text_sha256(self.text)}

    def messages(self, request: GenerationRequest) -> list[Message]:
        return chat_messages(request, self.fold_system)

    def opens_thought(self, start: str) -> bool:
        """Whether the generation prompt opens a thought itself (DeepSeek-R1's ends in
        `<think>`): such a model always thinks."""
        probe = [{"role": "user", "content": "x"}]
        prompt = self.tokenizer.apply_chat_template(
            probe, tokenize=False, add_generation_prompt=True
        )
        return prompt.rstrip().endswith(start)

    def render(self, request: GenerationRequest, **switch: bool) -> str:
        """The request up to the assistant's turn, as text (`switch`: the template's thinking
        keyword, `_thinking.Thinking.template_switch`)."""
        from jinja2 import TemplateError

        try:
            return self.tokenizer.apply_chat_template(
                self.messages(request), tokenize=False, add_generation_prompt=True, **switch
            )
        except TemplateError as exc:
            name = getattr(self.tokenizer, "name_or_path", "the tokenizer")
            raise FinReflectError(
                f"the chat template of {name} refuses the prompt: {first_line(exc)}"
            ) from None


def added_bos(tokenizer: Any) -> str:
    """The BOS token the tokenizer puts before the text it encodes; "" if it puts none."""
    bos = tokenizer.bos_token
    adds = tokenizer("x").input_ids[:1] == [tokenizer.bos_token_id]
    return bos if bos and adds else ""


def tokenizer_info(tokenizer: Any, chat_template: str | None, max_length: int | None) -> dict:
    """lm-eval's tokenizer information (`[token, id]` pairs) and the chat template used, as
    `records.LoadedModel`'s fields."""

    def pair(name: str) -> list[str] | None:
        token = getattr(tokenizer, f"{name}_token", None)
        return None if token is None else [str(token), str(getattr(tokenizer, f"{name}_token_id"))]

    return {
        "chat_template": chat_template,
        "chat_template_sha": chat_template and text_sha256(chat_template),
        "tokenizer_pad_token": pair("pad"),
        "tokenizer_eos_token": pair("eos"),
        "tokenizer_bos_token": pair("bos"),
        "eot_token_id": getattr(tokenizer, "eos_token_id", None),
        "max_length": max_length,
    }
