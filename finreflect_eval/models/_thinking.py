"""Reasoning models: the `think` setting every chat backend takes, and where a thought ends.

- `off`: the chat template's thinking switch off (`enable_thinking=False`, as Qwen3's reads it);
  the answer is held to its schema from the first token (the protocol's instruct judges).
- `on`: the model thinks freely, then its answer is held to the schema. Each backend says how
  (hf: two phases; vLLM: a reasoning parser gates the grammar; a server: its reasoning parser).
- `think_budget=N` (implies `on`): at N tokens of thinking the end-of-thinking marker is written
  for the model and the answer starts; the record says the budget was hit.
- unset: the model's own way, stated in the results (`think_default`): `on` for a model that
  always thinks (gpt-oss's harmony format, a template that opens a think block itself), `off`
  where its template has a switch, `none` for a model that does not think.

A thought that does not end within the request's `max_tokens` is an invalid answer
(`THINKING_DID_NOT_END`): retried like any invalid output, counted as a failure, never parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from finreflect_eval._util.errors import FinReflectError

ThinkSetting = Literal["off", "on"]
# vLLM's reasoning parser (`--reasoning-parser`) of a model family, by a part of its name: the
# engine starts the grammar where the parser sees the thought end. Any other reasoning model
# names its parser (`reasoning_parser=`).
FAMILY_PARSERS = (("gpt-oss", "openai_gptoss"), ("qwen3", "qwen3"), ("deepseek-r1", "deepseek_r1"))
HARMONY = "openai_gptoss"  # gpt-oss: rendered and parsed by openai-harmony (`_harmony`)
ALWAYS_THINKING = ("openai_gptoss", "deepseek_r1")  # families whose format always thinks
# The fields of a request body a server reads about thinking (besides the chat-template switch),
# by the model arg that says the same.
BODY_FIELDS = {
    "reasoning_effort": "reasoning_effort",
    "thinking_token_budget": "think_budget",
    "thinking_budget_tokens": "think_budget",
}
# What `run --check` assumes a thought takes, in tokens, where no budget bounds it: a stated
# guess per family (gpt-oss by effort), for the plan's estimate only.
ASSUMED_THOUGHT = {"openai_gptoss": {"low": 300, "medium": 1000, "high": 3000}, "qwen3": 1500}
ASSUMED_OTHER = 2000
THINKING_DID_NOT_END = "thinking did not end"
# What a template's source names when it has a Qwen3-style switch.
SWITCH = "enable_thinking"


@dataclass(frozen=True)
class ThinkMarkers:
    """The text around a thought (`<think>` … `</think>`), and what follows its end before the
    answer (Qwen3's and DeepSeek-R1's templates put a blank line there)."""

    start: str = "<think>"
    end: str = "</think>"
    after: str = "\n\n"

    def split(self, text: str) -> tuple[str | None, str, bool]:
        """(thinking, answer, ended) of a completion that may start with a thought: no end
        marker is a thought that did not end, unless the text never started one."""
        head, found, answer = text.partition(self.end)
        if not found:
            stripped = text.lstrip()
            if stripped.startswith(self.start):
                return stripped.removeprefix(self.start).strip(), "", False
            return None, text, True
        return head.strip().removeprefix(self.start).strip(), answer.strip(), True


THINK_TAGS = ThinkMarkers()


@dataclass(frozen=True)
class Thinking:
    """A model's resolved `think` setting: `mode` on, off or none (the model does not think),
    the budget, and whether the model's default chose it (nothing was set)."""

    mode: Literal["off", "on", "none", "native"]
    """`native`: the model's own way, not known here (a model behind a server)."""
    budget: int | None = None
    default: bool = False

    @property
    def on(self) -> bool:
        return self.mode == "on"

    def identity(self) -> dict[str, Any]:
        """For a model's identity (the cache key, the board's row): nothing for a model that
        does not think, so its earlier cached answers stay valid."""
        if self.mode in ("none", "native"):
            return {}
        return {"think": self.mode, **({"think_budget": self.budget} if self.budget else {})}

    def record(self) -> dict[str, Any]:
        """What the results say of it (`records.LoadedModel`)."""
        return {"think": self.mode, "think_budget": self.budget, "think_default": self.default}

    def template_switch(self) -> dict[str, bool]:
        """The chat-template keyword that turns thinking on or off, where the template has one."""
        return {} if self.mode in ("none", "native") else {SWITCH: self.on}


def as_setting(think: str | bool | None) -> str | None:
    """`think` as on or off: YAML reads an unquoted `think: off` as false (and `on` as true)."""
    return ("on" if think else "off") if isinstance(think, bool) else think


def family_parser(model: str) -> str | None:
    """The reasoning parser `FAMILY_PARSERS` gives a model id or folder name, if any."""
    name = model.lower()
    return next((parser for part, parser in FAMILY_PARSERS if part in name), None)


def expected_thought(model: str, args: dict[str, Any], max_tokens: int) -> tuple[int, str] | None:
    """What `run --check` expects one call's thought to take, in tokens, and why (the budget,
    or the assumption for the family, within `max_tokens`): None for a model that will not
    think as set (`args`: its model args)."""
    think = as_setting(args.get("think"))
    if think is None and args.get("enable_thinking") is not None:
        think = "on" if args["enable_thinking"] else "off"
    family = args.get("reasoning_parser") or family_parser(model)
    budget = args.get("think_budget")
    if not (think == "on" or budget or (think is None and family in ALWAYS_THINKING)):
        return None
    if budget:
        return min(budget, max_tokens), f"its think_budget ({budget})"
    assumed = ASSUMED_THOUGHT.get(family, ASSUMED_OTHER)
    if isinstance(assumed, dict):
        effort = args.get("reasoning_effort") or "medium"
        assumed, family = assumed[effort], f"{family}, effort {effort}"
    return min(assumed, max_tokens), f"assumed for {family or 'a reasoning model'}"


def resolve_thinking(
    think: str | None,
    think_budget: int | None,
    *,
    model: str,
    switch: bool,
    always: bool,
    can_think: bool,
) -> Thinking:
    """The setting a model runs with: `think` and `think_budget` as given, checked against what
    the model can do (a template `switch`, a format that `always` thinks, and whether it
    `can_think` at all: an end-of-thinking marker the backend knows); one line if it cannot.
    (Each value's own range is checked with the backend's other args, `check_spec`.)"""
    think = as_setting(think)
    if think == "off" and think_budget is not None:
        raise FinReflectError("think=off with a think_budget: a budget is for a model that thinks")
    if think is None and think_budget is not None:
        think = "on"
    if think == "off" and always:
        raise FinReflectError(
            f"{model} always thinks (its format has no off switch): use think=on, with a "
            "think_budget, or reasoning_effort=low for gpt-oss"
        )
    if think == "on" and not can_think:
        raise FinReflectError(
            f"think=on: {model} has no thinking format this backend knows (no {SWITCH} switch in "
            "its chat template, no end-of-thinking token); leave think unset"
        )
    if think is None:
        mode = "on" if always else "off" if switch else "none"
        return Thinking(mode, None, default=True)
    return Thinking(think, think_budget)  # type: ignore[arg-type]


def template_thinking(template: Any, vocabulary: dict[str, int]) -> dict[str, bool]:
    """`resolve_thinking`'s switch, always and can_think of a chat template (a
    `_chat.ChatTemplate`, or None) with a tokenizer `vocabulary`: an `enable_thinking` switch in
    its source; a generation prompt that opens a think block itself (DeepSeek-R1's); the think
    tags in the vocabulary."""
    tags = THINK_TAGS.start in vocabulary and THINK_TAGS.end in vocabulary
    if template is None:
        return {"switch": False, "always": False, "can_think": False}
    switch = SWITCH in template.text
    always = tags and not switch and template.opens_thought(THINK_TAGS.start)
    return {"switch": switch, "always": always, "can_think": tags}


def body_thinking(extra_body: dict[str, Any]) -> dict[str, Any]:
    """What a request's `extra_body` (which a server reads last) asks about thinking, by the
    model arg that says the same: `think` from a chat-template switch, an effort, a budget."""
    asked = {name: extra_body[field] for field, name in BODY_FIELDS.items() if field in extra_body}
    template_kwargs = extra_body.get("chat_template_kwargs")
    if isinstance(template_kwargs, dict) and "enable_thinking" in template_kwargs:
        switch = template_kwargs["enable_thinking"]
        asked["think"] = "on" if switch is True else "off" if switch is False else switch
    return asked


def one_way_to_think(extra_body: dict[str, Any], *args: Any) -> None:
    """One line where thinking `args` are given (think, think_budget, reasoning_effort) and
    `extra_body` asks about thinking too: run as the one, it would be recorded as the other."""
    asked = body_thinking(extra_body)
    if asked and any(arg is not None for arg in args):
        raise FinReflectError(
            f"extra_body asks for {', '.join(sorted(asked))} too: give thinking once, as think, "
            "think_budget and reasoning_effort"
        )
