"""Token counting: a fast offline regex counter, or a Hugging Face tokenizer by name."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import install_hint

logger = logging.getLogger(__name__)

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text; see `token_counter`."""


_REGEX_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_regex_tokens(text: str) -> int:
    # Words and single punctuation marks: BPE vocabularies hold most English words whole and
    # split punctuation off, so this over-estimates prose slightly, which is safe for a limit.
    # subn counts the matches without building a list of them: twice as fast as findall.
    return _REGEX_TOKEN.subn("", text)[1]


def token_counter(name: str = "regex") -> TokenCounter:
    """Returns a token counter.

    Args:
        name: "regex" (fast, offline, the default) or a Hugging Face tokenizer name or local
            path, loaded with `transformers.AutoTokenizer` (needs the `[hf]` extra).

    Raises:
        FinReflectError: transformers is not installed, or the tokenizer cannot be loaded.
    """
    if name == "regex":
        return count_regex_tokens
    try:
        # Imported here: transformers is an optional extra and slow to import.
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise FinReflectError(
            f"tokenizer {name!r} needs transformers: {install_hint('hf')} "
            "or use the default 'regex' token counter"
        ) from exc
    source = str(Path(name).expanduser()) if name.startswith("~") else name
    if name.startswith(("/", "./", "../", "~")) and not Path(source).exists():
        # Otherwise transformers takes the path for a Hub id and reports an invalid repo id.
        raise FinReflectError(f"cannot load tokenizer {name!r}: no such directory")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except Exception as exc:  # OSError, ValueError, HFValidationError, ... depending on the cause
        cause = " ".join(str(exc).split()) or type(exc).__name__
        raise FinReflectError(f"cannot load tokenizer {name!r}: {cause}") from exc

    def count(text: str) -> int:
        # verbose=False: we only count, so the "longer than the model's maximum" warning is noise.
        return len(tokenizer(text, add_special_tokens=False, verbose=False).input_ids)

    return count
