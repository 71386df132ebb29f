"""Prompt-prefix reuse for the hf backend: the saving of vLLM's automatic prefix caching, for
transformers.

Judge prompts share a long start (the system part; then, for a span's criteria, the span text),
and extraction prompts share their instructions. A `PrefixCache` keeps the key/value states of
recent prompts, per loaded model, and builds for each batch a ready cache holding every prompt
position but the last, so `generate` computes only that one; each prompt's new positions are
computed on top of the longest prefix it shares with a kept prompt.

The same computation as `generate`'s own, up to floating-point rounding (the matrix products
have other shapes): a row's states are computed unpadded, at positions 0..n-1, which is what
`generate` gives a left-padded row (positions come from the attention mask), and are then
left-padded into the batch. Left padding keeps every row contiguous, so sliding-window layers
see the same keys either way; their full states are kept here and cropped to the window by the
batch cache (built from the model's config, as `generate` would build it).
"""

from __future__ import annotations

import inspect
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

# Prompt positions computed per forward pass: a long prompt's progress shows as it goes (seconds a
# chunk on a CPU), and its activations stay small.
PREFILL_CHUNK = 512


@dataclass
class _Entry:
    tokens: Any  # 1-D LongTensor on the CPU
    states: list[tuple[Any, Any]]  # per layer (keys, values), each [1, heads, tokens, dim]


def cache_keyword(model: Any) -> str:
    """The keyword that hands a cache to the model's forward and to `generate`: `cache` from
    transformers 5.24 on (where `past_key_values` is deprecated), `past_key_values` before."""
    parameters = inspect.signature(model.base_model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def why_no_prefix_reuse(model: Any) -> str | None:
    """Why `PrefixCache` cannot serve this model with this transformers, or None when it can.
    It needs every layer plain attention, full or sliding window (not recurrent or indexed
    state, which subclass these), a `DynamicCache` that can be filled from tensors with the
    model's layer types, a forward that takes a cache, and a generation config that lets
    `generate` use a given cache as it is (one sequence per prompt, no cache of its own)."""
    import transformers
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    parameters = inspect.signature(DynamicCache.__init__).parameters
    if not {"ddp_cache_data", "config"} <= parameters.keys():
        return (
            f"transformers {transformers.__version__} has no "
            "DynamicCache(ddp_cache_data=, config=) to build a batch cache with"
        )
    if cache_keyword(model) not in inspect.signature(model.base_model.forward).parameters:
        return f"{type(model.base_model).__name__}.forward takes no cache"
    generation = model.generation_config
    if generation.use_cache is False:
        return "its generation config turns the cache off (use_cache=False)"
    if generation.cache_implementation not in (None, "hybrid"):  # "hybrid": dropped by generate
        return f"its generation config asks for a {generation.cache_implementation} cache"
    if (generation.num_beams or 1) > 1:
        return f"its generation config asks for beam search (num_beams={generation.num_beams})"
    if (generation.num_return_sequences or 1) > 1:
        sequences = generation.num_return_sequences
        return f"its generation config asks for {sequences} sequences per prompt"
    # transformers 5.2 gives such a model a DynamicCache of plain layers, but marks it stateful.
    if getattr(model, "_is_stateful", False):
        return "not all of its layers are plain attention: it keeps recurrent state"
    plain = (DynamicLayer, DynamicSlidingWindowLayer)
    layers = DynamicCache(config=model.config).layers
    other = sorted({type(layer).__name__ for layer in layers if type(layer) not in plain})
    if other:
        return f"not all of its layers are plain attention: {', '.join(other)}"
    return None


class PrefixCache:
    """Key/value states of recent prompts of one loaded model, least recently used dropped
    first once more than `max_tokens` positions are kept (the newest is always kept). Each entry
    holds its whole prompt: a shared system part is stored once per entry, not shared as
    vLLM's blocks are."""

    def __init__(self, model: Any, max_tokens: int) -> None:
        self.model, self.max_tokens = model, max_tokens
        self.keyword = cache_keyword(model)  # how forward and `generate` take a cache
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next_id = 0
        self._kept = 0

    def batch_cache(
        self,
        input_ids: Any,
        attention_mask: Any,
        on_tokens: Callable[[int], None] | None = None,
    ) -> tuple[Any, list[int]] | None:
        """A cache for a left-padded batch holding every position but the last of each row,
        and the prompt positions the model computed to build it, per row; None for a batch
        it cannot serve (right padding, a prompt of one token). `on_tokens` hears of the
        positions ready as they are: each row's kept prefix, then each chunk computed."""
        import torch
        from transformers import DynamicCache

        if not attention_mask[:, -1].all() or attention_mask.sum(dim=1).min() < 2:
            return None
        width = input_ids.shape[1] - 1
        with torch.inference_mode():
            rows, computed = [], []
            for ids, mask in zip(input_ids, attention_mask, strict=True):
                states, new = self._states(ids[mask.bool()][:-1].cpu(), on_tokens)
                rows.append(states)
                computed.append(new)
            layers = []
            for layer in range(len(rows[0])):
                keys, values = rows[0][layer]
                shape = (len(rows), keys.shape[1], width, keys.shape[3])
                batch_keys = keys.new_zeros(shape)
                batch_values = values.new_zeros((*shape[:3], values.shape[3]))
                for row, states in enumerate(rows):
                    row_keys, row_values = states[layer]
                    start = width - row_keys.shape[2]
                    batch_keys[row, :, start:] = row_keys[0]
                    batch_values[row, :, start:] = row_values[0]
                layers.append((batch_keys, batch_values))
            return DynamicCache(ddp_cache_data=layers, config=self.model.config), computed

    def _states(
        self, tokens: Any, on_tokens: Callable[[int], None] | None = None
    ) -> tuple[list[tuple[Any, Any]], int]:
        """The states of `tokens` (each layer [1, heads, n, dim]) and how many positions had to
        be computed for them."""
        from transformers import DynamicCache

        entry, shared = self._longest_match(tokens)
        if on_tokens is not None and shared:
            on_tokens(shared)
        if entry is not None and shared == len(tokens):
            return [(k[:, :, :shared], v[:, :, :shared]) for k, v in entry.states], 0
        cache = DynamicCache()  # full layers only: later prompts may need any part of it
        if entry is not None and shared:
            for layer, (keys, values) in enumerate(entry.states):
                cache.update(keys[:, :, :shared], values[:, :, :shared], layer)
        for start in range(shared, len(tokens), PREFILL_CHUNK):
            chunk = tokens[start : start + PREFILL_CHUNK]
            # The decoder without its head: logits for the prompt positions are not needed.
            self.model.base_model(
                input_ids=chunk.unsqueeze(0).to(self.model.device),
                use_cache=True,
                **{self.keyword: cache},
            )
            if on_tokens is not None:
                on_tokens(len(chunk))
        states = [(layer.keys, layer.values) for layer in cache.layers]
        self._keep(tokens, states)
        return states, len(tokens) - shared

    def _longest_match(self, tokens: Any) -> tuple[_Entry | None, int]:
        best, best_shared = None, 0
        for key, entry in self._entries.items():
            shared = _common_prefix(entry.tokens, tokens)
            if shared > best_shared:
                best, best_shared, best_key = entry, shared, key
        if best is not None:
            self._entries.move_to_end(best_key)
        return best, best_shared

    def _keep(self, tokens: Any, states: list[tuple[Any, Any]]) -> None:
        # A kept prompt that is a prefix of this one adds nothing once this one is kept.
        covered = [
            k for k, e in self._entries.items() if _common_prefix(e.tokens, tokens) == len(e.tokens)
        ]
        for key in covered:
            self._kept -= len(self._entries.pop(key).tokens)
        self._entries[self._next_id] = _Entry(tokens, states)
        self._next_id += 1
        self._kept += len(tokens)
        while self._kept > self.max_tokens and len(self._entries) > 1:
            self._kept -= len(self._entries.popitem(last=False)[1].tokens)


def _common_prefix(a: Any, b: Any) -> int:
    """Length of the longest common prefix of two 1-D token tensors."""
    n = min(len(a), len(b))
    differs = (a[:n] != b[:n]).nonzero()
    return int(differs[0]) if len(differs) else n
