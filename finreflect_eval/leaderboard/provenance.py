"""Who cast an entry's votes. An entry is official only when its panel is a bundled official
panel and every judge ran as that panel pins it: the same model, on an engine (never a scripted
or test backend), at the pinned commit, with the panel's generation settings, thinking switch,
system prefix and chat template. Any difference makes it a community entry, and the page says
which field differed.

What a run records of its judges is what the submitter's machine wrote: matching the panel shows
that an honest run was set up as the maintainers' is, not that nobody forged the record. The
seeded re-judging audit (`rejudging`) is what tests the votes themselves.
"""

from __future__ import annotations

from typing import Any

from finreflect_eval.models._thinking import body_thinking
from finreflect_eval.pipeline.judging import (
    JudgeSpec,
    Panel,
    available_panels,
    load_panel,
    think_args,
)
from finreflect_eval.records import JudgeMember

# Backends that run a model (in process, or behind an OpenAI-compatible server); `scripted`
# and any test backend answer from a script and cast no judge's vote.
ENGINES = ("hf", "vllm", "openai", "openai-completions")
# Model args that change what a judge answers (placement, batch and connection args do not).
OUTPUT_ARGS = ("dtype", "quantization", "chat", "tokenizer", "reasoning_parser")


def provenance_problems(panel: str, members: list[JudgeMember]) -> list[str]:
    """Why the judges that voted are not the official panel `panel` as it pins them, a line each
    naming the judge and the field (empty: they are)."""
    bundled = load_panel(panel) if panel in available_panels() else None
    if bundled is None or not bundled.official:
        return [f"panel '{panel}' is not a bundled official panel"]
    expected = [(judge.name, judge.model) for judge in bundled.judges]
    given = [(member.name, member.model) for member in members]
    if given != expected:
        return [
            f"its judges {_pairs(given)} are not panel '{panel}''s {_pairs(expected)} (name and "
            "model, in order)"
        ]
    problems = []
    for spec, member in zip(bundled.judges, members, strict=True):
        problems += _judge_problems(bundled, spec, member)
    return problems


def _judge_problems(panel: Panel, spec: JudgeSpec, member: JudgeMember) -> list[str]:
    who = f"judge {member.name}"
    if member.backend not in ENGINES:
        return [f"{who} ran on backend '{member.backend}', not an engine ({', '.join(ENGINES)})"]
    problems = []
    ran_at = ran_revision(member)
    if spec.revision is None:
        problems.append(f"{who}: panel '{panel.panel}' pins no revision of {spec.model}")
    elif ran_at != spec.revision:
        problems.append(
            f"{who} ran {spec.model} at revision {ran_at or 'unknown'}, not the panel's "
            f"{spec.revision}"
        )
    pinned = panel.generation(spec).model_dump()
    for key in sorted(set(pinned) | set(member.generation_kwargs)):
        if member.generation_kwargs.get(key) != pinned.get(key):
            problems.append(
                f"{who} ran with {key} {member.generation_kwargs.get(key)!r}, not the panel's "
                f"{pinned.get(key)!r}"
            )
    ran, pinned_thinking = thinking_of(member.model_args), thinking_of(spec.model_args)
    for key in sorted(set(ran) | set(pinned_thinking)):
        if ran.get(key) != pinned_thinking.get(key):
            problems.append(
                f"{who} ran with {key} {ran.get(key)!r}, not the panel's "
                f"{pinned_thinking.get(key)!r}"
            )
    if member.system_prefix != spec.system_prefix:
        problems.append(
            f"{who} ran with system prefix {member.system_prefix!r}, not the panel's "
            f"{spec.system_prefix!r}"
        )
    for arg in OUTPUT_ARGS:
        if member.model_args.get(arg) != spec.model_args.get(arg):
            problems.append(
                f"{who} ran with {arg} {member.model_args.get(arg)!r}, not the panel's "
                f"{spec.model_args.get(arg)!r}"
            )
    if spec.chat_template_sha and member.chat_template_sha != spec.chat_template_sha:
        problems.append(
            f"{who} rendered its prompts with chat template sha256 "
            f"{member.chat_template_sha or 'unknown'}, not the panel's {spec.chat_template_sha}"
        )
    return problems


def ran_revision(member: JudgeMember) -> str | None:
    """The commit a judge ran at: what its engine resolved, else (a server's model, which does
    not say) the revision it was asked for."""
    return member.sha or member.model_args.get("revision") or member.revision


def thinking_of(model_args: dict[str, Any]) -> dict[str, Any]:
    """How a judge was asked to think (`judging.think_args`), with what its `extra_body` asked
    a server for, which wins there: a chat-template switch (as runs recorded it before `think`)
    counts as `think`, an effort or a budget as theirs; one that disagrees with the model args
    is kept as both, so that it never matches a panel."""
    args = think_args(model_args)
    extra = model_args.get("extra_body")
    for name, value in body_thinking(extra if isinstance(extra, dict) else {}).items():
        given = args.setdefault(name, value)
        if given != value:
            args[name] = f"{given} with extra_body {value!r}"
    return args


def _pairs(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{name} ({model})" for name, model in pairs)
