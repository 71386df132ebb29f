"""gpt-oss's own chat format (harmony), through the `openai-harmony` package: a request rendered
as harmony's prompt tokens, with the model's reasoning effort in its system message and our
system prompt as its developer instructions; a completion parsed into the analysis channel's
thought and the final channel's answer; and the structural tag that lets the model reason in
its analysis channel and holds only the final channel to the JSON schema (vLLM's guided decoding
of the whole generation, the shape vLLM's own server builds for gpt-oss).

The encoding reads the o200k vocabulary, downloaded on first use; offline, point
`TIKTOKEN_ENCODINGS_BASE` at a folder holding `o200k_base.tiktoken`.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, Literal

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval.models._requests import GenerationRequest, JsonSchema, closed_schema

ReasoningEffort = Literal["low", "medium", "high"]
CHANNEL = "<|channel|>"  # a harmony tokenizer's token (how the hf backend tells one)
ANALYSIS = "<|channel|>analysis<|message|>"
FINAL = "<|channel|>final<|message|>"
END = "<|end|>"


@cache
def encoding() -> Any:
    """harmony's gpt-oss encoding (loaded once); one line if its vocabulary cannot be read."""
    from openai_harmony import HarmonyEncodingName, HarmonyError, load_harmony_encoding

    try:
        return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    except HarmonyError as exc:
        raise FinReflectError(
            f"gpt-oss's harmony encoding cannot load its vocabulary: {first_line(exc)} "
            "(offline: set TIKTOKEN_ENCODINGS_BASE to a folder holding o200k_base.tiktoken)"
        ) from None


def render(request: GenerationRequest, effort: ReasoningEffort) -> list[int]:
    """The request as harmony's prompt tokens, up to the assistant's turn."""
    from openai_harmony import (
        Conversation,
        DeveloperContent,
        Message,
        Role,
        SystemContent,
    )
    from openai_harmony import ReasoningEffort as Effort

    system = SystemContent.new().with_reasoning_effort(Effort[effort.upper()])
    messages = [Message.from_role_and_content(Role.SYSTEM, system)]
    turns = list(request.messages) or [{"role": "user", "content": request.plain_prompt()}]
    for turn in turns:
        if turn["role"] == "system":
            instructions = DeveloperContent.new().with_instructions(turn["content"])
            messages.append(Message.from_role_and_content(Role.DEVELOPER, instructions))
        else:
            messages.append(Message.from_role_and_content(Role(turn["role"]), turn["content"]))
    conversation = Conversation.from_messages(messages)
    return list(encoding().render_conversation_for_completion(conversation, Role.ASSISTANT))


def parse(tokens: list[int]) -> tuple[str | None, str, bool, int]:
    """(thought, answer, ended, thinking tokens) of a completion's tokens: the analysis
    channel's text, the final channel's, whether a final message came (no final: the thought
    did not end), and the tokens before the final message (all of them, if none came)."""
    from openai_harmony import HarmonyError, Role

    try:
        messages = encoding().parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)
    except HarmonyError:  # cut off inside a message: what it wrote is a thought not ended
        return encoding().decode(tokens), "", False, len(tokens)
    text = {"analysis": [], "final": []}
    for message in messages:
        if message.channel in text:
            text[message.channel] += [part.text for part in message.content]
    thought = "\n".join(text["analysis"]) or None
    if not text["final"]:
        return thought, "", False, len(tokens)
    # The final message starts after the analysis's `<|end|><|start|>` (or at once).
    starts = [i for i, token in enumerate(tokens) if token == _start_token()]
    return thought, "".join(text["final"]), True, starts[-1] if starts else 0


@cache
def _start_token() -> int:
    """harmony's `<|start|>` token (a new message begins)."""
    [token] = encoding().encode("<|start|>", allowed_special="all")
    return token


def stop_tokens() -> list[int]:
    """The tokens that end an assistant's turn in harmony (`<|return|>`, `<|call|>`)."""
    return list(encoding().stop_tokens_for_assistant_actions())


def structural_tag(schema: JsonSchema) -> str:
    """vLLM's `structural_tag` (xgrammar's format) for gpt-oss: an optional analysis message in
    free text, then the final channel holding JSON that follows `schema`."""
    analysis = {
        "type": "optional",
        "content": {
            "type": "sequence",
            "elements": [
                {"type": "tag", "begin": ANALYSIS, "content": {"type": "any_text"}, "end": END},
                {"type": "const_string", "value": "<|start|>assistant"},
            ],
        },
    }
    final = {
        "type": "tag",
        "begin": FINAL,
        "content": {"type": "json_schema", "json_schema": closed_schema(schema)},
        "end": "",  # the turn's stop token ends it (a grammar may not hold a stop token)
    }
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [analysis, final]}}
    return json.dumps(tag)
