"""Random-weight models with a byte-level BPE tokenizer trained here on schema words: every code
path of the hf backend, in seconds, offline (the tests' and the benchmarks' models)."""

from __future__ import annotations

import json
from pathlib import Path


def build_tiny_llama(folder: Path) -> Path:
    """Write a tiny Llama and its tokenizer into `folder` (the same weights every time)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return _build(folder, LlamaForCausalLM, LlamaConfig, max_position_embeddings=16384)


def build_tiny_gemma3(folder: Path) -> Path:
    """A tiny Gemma 3 text model: sliding-window layers (window 8) between full-attention ones,
    as in the embedded model, so prompts far longer than the window are cheap to test."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    return _build(
        folder,
        Gemma3ForCausalLM,
        Gemma3TextConfig,
        head_dim=8,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        query_pre_attn_scalar=8,
        max_position_embeddings=16384,
    )


def _build(folder: Path, model_class, config_class, **config) -> Path:
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    from finreflect_eval.protocol.schema import load_schema

    schema = load_schema()
    corpus = [
        json.dumps({"subject": "AAPL", "subject_type": t, "relation": r, "object_type": t})
        for t in schema.entity_types
        for r in schema.relations
    ]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=400, special_tokens=["<pad>", "</s>"])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, eos_token="</s>", pad_token="<pad>"
    )
    layers = len(config.get("layer_types", ())) or 2
    model_config = config_class(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **config,
    )
    torch.manual_seed(0)
    model_class(model_config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
