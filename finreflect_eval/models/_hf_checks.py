"""What the hf backend checks before it imports or loads anything: its settings (one line
each), and the libraries it needs, with the extra that brings them."""

from __future__ import annotations

import importlib.util

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import install_hint

DTYPES = ("auto", "float32", "float16", "bfloat16")
DTYPE_ALIASES = {"float": "float32", "half": "float16"}  # torch's names, as lm-eval users write
FULL_PRECISION = ("float32", "None")  # a config without a dtype means float32 weights
# Missing files, an unknown architecture, a device this machine lacks (torch asserts).
LOAD_ERRORS = (OSError, ValueError, RuntimeError, AssertionError)


def checked_settings(
    dtype: str, device: str | None, device_map: str | None, prefix_cache_tokens: int
) -> str:
    """Check the settings that need no library (a one-line error before anything is imported or
    loaded); `dtype` under our name for it (torch's `float` and `half` are float32, float16)."""
    if device and device_map:
        raise FinReflectError(f"give device ({device}) or device_map ({device_map}), not both")
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    if dtype not in DTYPES:
        raise FinReflectError(f"dtype '{dtype}' is not one of {', '.join(DTYPES)}")
    if prefix_cache_tokens < 0:
        raise FinReflectError(
            f"prefix_cache_tokens={prefix_cache_tokens}: give 0 (no reuse) or more positions"
        )
    return dtype


def require_libraries(structured_backend: str) -> None:
    """A one-line error naming the extra to install where a library the backend needs (or the
    one `structured_backend` names) is missing."""
    try:
        import outlines  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise FinReflectError(
            f"the hf backend needs {exc.name}: {install_hint('hf')} "
            "(on a CPU-only machine: pip install torch==2.13.0 first)"
        ) from None
    if importlib.util.find_spec(structured_backend) is None:  # each is its module's name
        extra = "xgrammar" if structured_backend == "xgrammar" else "hf"
        raise FinReflectError(
            f"structured_backend '{structured_backend}' needs {structured_backend}: "
            f"{install_hint(extra)}"
        )
