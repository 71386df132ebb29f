"""Random-weight models with a byte-level BPE tokenizer trained here on schema words: every code
path of the hf backend, in seconds, offline (the tests' and the benchmarks' models)."""

from __future__ import annotations

import itertools
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

    tokenizer = _bpe_tokenizer(_schema_corpus(), ["<pad>", "</s>"], vocab_size=400)
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


# A chat template with Qwen3's thinking switch (written here; the same keyword and layout): with
# `enable_thinking=false` the assistant turn starts with an empty think block, so the model
# answers at once; otherwise it starts bare and the model writes `<think>` … `</think>` first.
THINKING_TEMPLATE = (
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n"
    "{{ message.content }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
THOUGHT = [
    "AAPL", "revenue", "grew", "because", "iPhone", "demand", "rose", "in", "every", "region",
    "we", "report", "so", "this", "triple", "links", "Apple", "to", "its", "product", "line",
    "with", "a", "figure",
]  # fmt: skip


def build_tiny_qwen3_thinker(folder: Path) -> Path:
    """A tiny Qwen3 that thinks: random weights, except that its layers add nothing to the
    residual stream and its output head is wired as a bigram chain, so that greedy decoding
    after the assistant turn's first line writes `<think>`, the `THOUGHT` words (24, one token
    each), then `</think>`. Its tokenizer has Qwen3's think tags (added, not special) and a
    chat template with Qwen3's `enable_thinking` switch."""
    import torch
    from tokenizers import AddedToken
    from transformers import Qwen3Config, Qwen3ForCausalLM

    # The thought repeated, so that each of its words (after a space) becomes one token.
    corpus = [*_schema_corpus(), *[" " + " ".join(THOUGHT)] * 50]
    tokenizer = _bpe_tokenizer(corpus, ["<pad>", "</s>", "<|im_end|>"])
    tokenizer.add_tokens(
        [AddedToken(tag, special=False, normalized=False) for tag in ("<think>", "</think>")]
    )
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tokenizer.chat_template = THINKING_TEMPLATE
    hidden = 64
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=16384,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(" " + word)) for word in THOUGHT]
    assert all(len(word) == 1 for word in ids), "each thought word must be one token"
    newline = tokenizer("\n", add_special_tokens=False).input_ids
    chain = [*newline, tokenizer.convert_tokens_to_ids("<think>")]
    chain += [word[0] for word in ids] + [tokenizer.convert_tokens_to_ids("</think>")]
    with torch.no_grad():
        for layer in model.model.layers:  # each layer adds nothing: the stream is the token
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        for position, (token, following) in enumerate(itertools.pairwise(chain)):
            direction = torch.zeros(hidden)
            direction[position] = 1.0
            model.model.embed_tokens.weight[token] = direction
            model.lm_head.weight[following] += 10 * direction
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _schema_corpus() -> list[str]:
    """Triples' JSON over every entity type and relation of the schema: the words a tokenizer
    trained on it makes tokens of."""
    from finreflect_eval.protocol.schema import load_schema

    schema = load_schema()
    return [
        json.dumps({"subject": "AAPL", "subject_type": t, "relation": r, "object_type": t})
        for t in schema.entity_types
        for r in schema.relations
    ]


def _bpe_tokenizer(corpus: list[str], special_tokens: list[str], vocab_size: int = 500):
    """A byte-level BPE tokenizer trained on `corpus`; its first special token pads, its last
    ends a sequence."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=vocab_size, special_tokens=special_tokens)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, eos_token=special_tokens[-1], pad_token=special_tokens[0]
    )
