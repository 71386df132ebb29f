"""A random-weight Llama with a byte-level BPE tokenizer trained here on schema words: every code
path of the hf backend, in seconds, offline (the tests' and the benchmarks' model)."""

from __future__ import annotations

import json
from pathlib import Path


def build_tiny_llama(folder: Path) -> Path:
    """Write the model and its tokenizer into `folder` (the same weights every time)."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from finreflect_eval.schema import load_schema

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
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=16384,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
