"""What the hf backend gives transformers' `generate`: a request's sampling settings, and
stopping criteria (one that reports each decoding step to the progress bar, one that ends each
row of a batch at its own length). And what the vllm backend gives `vllm.LLM` for its progress
(`finished_requests`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from finreflect_eval.models._requests import GenerationRequest


def sampling_args(request: GenerationRequest) -> dict[str, Any]:
    """`generate`'s sampling arguments for a request: greedy at temperature 0 (the checkpoint's
    sampling defaults kept out), else sampled with its top_p/top_k where set (unset: the
    checkpoint's generation config decides, as in transformers)."""
    if request.temperature > 0:
        return {
            "do_sample": True,
            "temperature": request.temperature,
            **request.sampling_options(),
        }
    return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}


def each_step(on_work: Callable[[float], None], rows: int, prompt_left: float) -> Any:
    """A stopping criterion for transformers' `generate` that never stops but tells `on_work`
    of each decoding step (`rows` units, and `prompt_left` more at the first step). `generate`
    calls it once a step, after the logits processors (outlines' grammar), whatever the batch or
    the sampling. No device sync: they answer with a fresh all-False tensor."""
    import torch
    from transformers import StoppingCriteria

    class EachStep(StoppingCriteria):
        def __init__(self) -> None:
            self.prompt_left = prompt_left

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            on_work(rows + self.prompt_left)
            self.prompt_left = 0.0
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    return EachStep()


def row_limits(limits: list[int], prompt_width: int) -> Any:
    """A stopping criterion that ends row i of a batch after `limits[i]` new tokens (a thought
    used the rest of its `max_tokens`)."""
    import torch
    from transformers import StoppingCriteria

    class RowLimits(StoppingCriteria):
        def __init__(self) -> None:
            self.limits: Any = None  # on the batch's device, once

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            if self.limits is None:
                self.limits = torch.tensor(limits, device=input_ids.device)
            return self.limits <= input_ids.shape[1] - prompt_width

    return RowLimits()


def until(ids: list[int], ends: set[int]) -> list[int]:
    """A row's new tokens up to and including the first that ends it (padding cut off)."""
    for position, token in enumerate(ids):
        if token in ends:
            return ids[: position + 1]
    return ids


def finished_requests(on_work: Callable[[float], None] | None) -> Callable[..., Any] | bool:
    """vLLM's `use_tqdm`: each request vLLM finishes moves the run's own bar (`on_work`, a unit
    a request), rather than the whole call at its end; vLLM's bars for rendering prompts are
    left out. False where no bar is shown."""
    if on_work is None:
        return False

    def progress(iterable: Iterable[Any] | None = None, **_: Any) -> Any:
        return iterable if iterable is not None else _FinishedRequests(on_work)

    return progress


class _FinishedRequests:
    """What `vllm.LLM` asks of the bar it makes with `use_tqdm` while its engine runs: `update`
    as requests finish, and `format_dict["elapsed"]` and `postfix` for its token rates."""

    def __init__(self, on_work: Callable[[float], None]) -> None:
        self.on_work = on_work
        self.n = 0
        self.postfix = ""
        self.started = time.perf_counter()

    @property
    def format_dict(self) -> dict[str, float]:
        return {"elapsed": max(time.perf_counter() - self.started, 1e-9)}

    def update(self, n: float = 1) -> None:
        self.n += n
        self.on_work(n)

    def refresh(self) -> None:
        pass  # the run's bar redraws itself

    def close(self) -> None:
        pass
