"""What a backend is asked and what it answers: the request, a backend's completion and the
validated result, with the JSON schemas that constrain an output and the check an output must
pass (`validate_output`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from finreflect_eval._util.hashing import text_sha256

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}
JsonSchema = dict[str, Any]


def json_schema_of(schema: type[BaseModel] | JsonSchema | None) -> JsonSchema | None:
    """A JSON schema dict from a pydantic model class or a dict."""
    if schema is None or isinstance(schema, dict):
        return schema
    return schema.model_json_schema()


def closed_schema(schema: JsonSchema) -> JsonSchema:
    """The schema with `additionalProperties: false` on every object that leaves it open: a
    constrained decoder must not invent extra keys (it could ramble on inside them)."""
    if isinstance(schema, list):
        return [closed_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: closed_schema(value) for key, value in schema.items()}
    if closed.get("type") == "object" or "properties" in closed:
        closed.setdefault("additionalProperties", False)
    return closed


@dataclass(frozen=True)
class GenerationRequest:
    """What to generate: chat messages (or a plain prompt for a model without a chat template),
    the JSON schema the output must follow, and the sampling parameters."""

    messages: tuple[Message, ...] = ()
    prompt: str | None = None
    schema: JsonSchema | None = None
    max_tokens: int = 1024
    temperature: float = 0.0
    seed: int = 0
    top_p: float | None = None  # None: the backend's default (see `sampling_options`)
    top_k: int | None = None

    def __post_init__(self) -> None:
        if not self.messages and self.prompt is None:
            raise ValueError("a request needs messages or a prompt")
        object.__setattr__(self, "messages", tuple(dict(m) for m in self.messages))
        object.__setattr__(self, "schema", json_schema_of(self.schema))

    @classmethod
    def chat(cls, messages: Sequence[Message], **kwargs: Any) -> GenerationRequest:
        return cls(messages=tuple(messages), **kwargs)

    def __hash__(self) -> int:  # the dict fields are not hashable themselves
        return hash(json.dumps(self.cache_fields(), sort_keys=True))

    def plain_prompt(self) -> str:
        """The request as plain text, for base models: the prompt, or the messages' contents."""
        if self.prompt is not None:
            return self.prompt
        return "\n\n".join(message["content"] for message in self.messages)

    def digest(self) -> str:
        """sha256 of everything about the request that changes the output."""
        blob = json.dumps(self.cache_fields(), sort_keys=True, ensure_ascii=False, default=str)
        return text_sha256(blob)

    def cache_fields(self) -> dict[str, Any]:
        """Everything about the request that changes the output. `top_p`/`top_k` only when set,
        so that a request without them keeps the key of earlier versions (and its cached answer)."""
        return {
            "messages": list(self.messages),
            "prompt": self.prompt,
            "schema": self.schema,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            **self.sampling_options(),
        }

    def sampling_options(self) -> dict[str, Any]:
        """`top_p` and `top_k` where set, by the names transformers, vLLM and OpenAI-compatible
        servers share; unset, each backend keeps its own default."""
        options = {"top_p": self.top_p, "top_k": self.top_k}
        return {name: value for name, value in options.items() if value is not None}


@dataclass(frozen=True)
class Completion:
    """What a backend returns for one request: text, or a transport error (not the model's fault,
    so never cached), with token counts."""

    text: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    cached_prompt_tokens: int | None = 0
    """Prompt tokens the backend did not compute again (prefix reuse, a server's prompt cache);
    None where it does not say."""
    thinking: str | None = None
    """The model's thought before its answer (`text`), where it thought (see `_thinking`)."""
    reasoning_tokens: int = 0
    """Of `completion_tokens`, those of the thought."""
    thinking_cut: bool = False
    """The thought reached its `think_budget`: its end was written for the model."""
    thinking_ended: bool = True
    """False: the thought never ended within `max_tokens` (an invalid answer, no `text`)."""


@dataclass
class GenerationResult:
    """The outcome of one request: the raw text, the parsed JSON (or why it failed), token counts
    and whether it came from the cache."""

    text: str | None
    parsed: Any = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int | None = 0  # None: the backend did not say
    cached: bool = False
    attempts: int = 0
    raw_outputs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    """Its share of the wall time its model spent generating (none for a cache hit)."""
    device_seconds: float | None = None
    """Its share of the time its in-process model held its devices (None: a server's)."""
    thinking: str | None = None
    """The thought before the accepted output (None: the model did not think)."""
    reasoning_tokens: int = 0
    """Of `completion_tokens`, those spent thinking (every attempt's)."""
    thinking_cut: bool = False
    """The thought was ended at its `think_budget`."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_cache(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "attempts": self.attempts,
            "raw_outputs": self.raw_outputs,
            # Only where there is one: an entry earlier versions can read stays as it was.
            **(
                {
                    "thinking": self.thinking,
                    "reasoning_tokens": self.reasoning_tokens,
                    "thinking_cut": self.thinking_cut,
                }
                if self.thinking is not None or self.reasoning_tokens
                else {}
            ),
        }


def validate_output(text: str, schema: JsonSchema | None) -> tuple[Any, str | None]:
    """Parse `text` as JSON and check it against `schema`: (value, None) or (None, reason)."""
    if schema is None:
        return text, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} at character {exc.pos}"
    import jsonschema  # a core dependency; imported here to keep `--help` fast

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        return None, f"output does not match the schema at {where}: {exc.message}"
    return value, None
