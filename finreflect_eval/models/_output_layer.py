"""The output layer's product on a CPU, in the order BLAS computes fastest for a decoding step.

A decoding step multiplies a few hidden rows (one per sequence of the batch) by the output
layer's weight, the model's largest matrix (Gemma 3 270M: 262,144 x 640, 62% of its weights).
`linear(x, W)` asks MKL for `x @ W.T`, and for 2 to 128 rows its kernel for that orientation is
1.4 to 4x slower than for `(W @ x.T).T`, the same product (measured on this shape, 2 cores:
2 rows 110 → 33 ms, 8 rows 123 → 54 ms, 128 rows 474 → 346 ms; 1 row the same). On a CPU it
is the larger part of each step's time, so the quickstart's judges decode that much faster."""

from __future__ import annotations

import types
from typing import Any

ROWS_FIRST_UP_TO = 128  # rows measured faster this way; beyond, `linear` as it is


def rows_first(head: Any, hidden: Any) -> Any:
    """`head(hidden)` for a `torch.nn.Linear` head, as `(W @ x.T).T` where `hidden` has at most
    ROWS_FIRST_UP_TO rows (laid out as `linear` lays them out: the logits' copy takes well
    under a millisecond; a kernel that reads them, llguidance's or xgrammar's mask, sees the
    strides it always sees)."""
    import torch

    flat = hidden.reshape(-1, hidden.shape[-1])
    if flat.shape[0] > ROWS_FIRST_UP_TO:
        return torch.nn.functional.linear(hidden, head.weight, head.bias)
    logits = (head.weight @ flat.T).T.contiguous()
    if head.bias is not None:
        logits += head.bias
    return logits.reshape(*hidden.shape[:-1], head.out_features)


def use_rows_first(model: Any) -> None:
    """A float32 model loaded on a CPU whose output layer is a plain `torch.nn.Linear` (no
    hook of accelerate's on it) computes it with `rows_first`, as its own method (its weight,
    tied or not, is the same tensor; a copy of the model computes with its own). Other dtypes
    and devices were not measured: left as they are."""
    import torch

    head = model.get_output_embeddings()
    if (
        type(head) is torch.nn.Linear
        and head.weight.device.type == "cpu"
        and head.weight.dtype == torch.float32
        and not hasattr(head, "_hf_hook")
    ):
        head.forward = types.MethodType(rows_first, head)
