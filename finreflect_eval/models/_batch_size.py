"""lm-eval's `batch_size=auto` for the hf backend: the largest batch whose forward pass over the
longest request fits in memory, found as lm-eval finds it."""

from __future__ import annotations

from typing import Any

from finreflect_eval._util.errors import FinReflectError


def largest_batch(hf_model: Any, length: int, max_batch_size: int, name: str) -> int:
    """The largest batch of `length`-token requests `hf_model` runs a forward pass on without
    running out of memory: accelerate's `find_executable_batch_size` from `max_batch_size`
    down; one line naming the model `name` where none fits."""
    import torch
    from accelerate.utils import find_executable_batch_size

    @find_executable_batch_size(starting_batch_size=max_batch_size)
    def forward(batch_size: int) -> int:
        tokens = torch.ones((batch_size, length), dtype=torch.long, device=hf_model.device)
        with torch.inference_mode():
            hf_model(tokens)
        return batch_size

    try:
        return forward()
    except RuntimeError as exc:
        if "reached zero" not in str(exc):
            raise
        raise FinReflectError(
            f"no batch of requests of {length} tokens fits in memory for {name}"
        ) from None
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
