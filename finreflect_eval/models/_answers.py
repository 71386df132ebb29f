"""What an OpenAI-compatible server answers (the `openai` and `openai-completions` backends):
the completion in a response, with the thought a reasoning model's server returns apart, the
token counts the server reports, and which server it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from finreflect_eval.models._requests import Completion
from finreflect_eval.models._thinking import THINK_TAGS

if TYPE_CHECKING:
    import httpx

EXCERPT_CHARS = 200


def parse_answer(
    response: httpx.Response, answer_text: Callable[[Any], Any], budget: int | None = None
) -> Completion:
    """The completion in a server's answer (`answer_text`: where its text is in a choice):
    the text, a thought the server returned apart or left inline, the token counts (the thought
    cut at its `budget` where the server counts its tokens); a malformed answer is a transport
    error, in one line."""
    try:
        data = response.json()
        choice = data["choices"][0]
        text = answer_text(choice)
    except (ValueError, KeyError, IndexError, TypeError):
        choice, text = None, None
    thought = _thought(choice)
    if text is None and thought is not None:  # all thought, no answer (cut at max_tokens)
        text = ""
    if not isinstance(text, str):  # e.g. `content` as an object, or a null answer
        return Completion(text=None, error=one_line(f"malformed response: {response.text}"))
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    cached = usage.get("prompt_tokens_details")
    completion_tokens = _count(usage.get("completion_tokens"))
    ended = True
    if thought is None and _inline_thought(text):  # a server that leaves the thought inline
        thought, text, ended = THINK_TAGS.split(text)
    elif thought is not None:
        ended = bool(text.strip()) or choice.get("finish_reason") != "length"
    details = usage.get("completion_tokens_details")
    # OpenAI's count of them; a server that does not say counts none apart.
    counted = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
    reasoning = min(completion_tokens, counted)
    return Completion(
        text=text.strip() if thought is not None else text,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=completion_tokens,
        # OpenAI's field for prompt tokens served from the server's prompt cache (vLLM's with
        # --enable-prompt-tokens-details, llama-server's).
        cached_prompt_tokens=_cached(cached, _count(usage.get("prompt_tokens"))),
        thinking=thought,
        reasoning_tokens=reasoning,
        thinking_cut=bool(budget) and reasoning >= budget,
        thinking_ended=ended,
    )


def _inline_thought(text: str) -> bool:
    """Whether an answer starts with a thought a server left in it: a think block first, or an
    end of one before an answer that is not JSON's start (JSON that quotes `</think>` in a
    string stays whole)."""
    start = text.lstrip()
    return start.startswith(THINK_TAGS.start) or (
        THINK_TAGS.end in text and not start.startswith(("{", "["))
    )


def _thought(choice: Any) -> str | None:
    """The thought a server returns beside the answer: `reasoning_content` (vLLM's
    `--reasoning-parser`, llama-server's `--reasoning-format`, DeepSeek's API) or `reasoning`
    (newer vLLM, OpenRouter); None where there is none."""
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return None
    for name in ("reasoning_content", "reasoning"):
        if isinstance(message.get(name), str) and message[name]:
            return message[name].strip()
    return None


def _cached(details: Any, prompt_tokens: int) -> int | None:
    """The prompt tokens a server says it served from its cache (at most the prompt's); None
    where it does not say."""
    if not isinstance(details, dict) or details.get("cached_tokens") is None:
        return None
    return min(_count(details["cached_tokens"]), prompt_tokens)


def owner(response: httpx.Response) -> str | None:
    """The `owned_by` of the first model a `GET /models` answer lists, or None."""
    try:
        owner = response.json()["data"][0]["owned_by"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return owner if isinstance(owner, str) else None


def _count(value: Any) -> int:
    """A token count from a server, or 0 for anything that is not a plain count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def one_line(text: str) -> str:
    """`text` on one line, cut to `EXCERPT_CHARS` (an error's excerpt of a server's answer)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"
