"""Prompt-prefix reuse on the hf backend: the same outputs as computing every prompt whole, for a
fraction of the prompt positions (tiny random models; the embedded model in test_models_gemma)."""

import dataclasses
import json
import logging
import shutil

import pytest

from finreflect_eval.models import GenerationRequest, ModelSpec, _prefix, load_model
from finreflect_eval.models._prefix import why_no_prefix_reuse
from finreflect_eval.protocol.schema import load_schema

pytest.importorskip("outlines", reason="needs the [hf] extra")

# At least one triple: an empty list would read the same whatever the logits were.
TRIPLES = load_schema().triple_list_model(2, max_entity_chars=12, min_triples=1)
SYSTEM = "You judge triples extracted from a 10-K chunk, one criterion at a time. " * 12


def judge_like_requests(temperature: float) -> list[GenerationRequest]:
    """Three spans × three criteria, laid out as the judge prompts are: the shared system part,
    then the span, then what differs per criterion; spans of different lengths, so batches
    are padded."""
    return [
        GenerationRequest.chat(
            [
                {"role": "system", "content": SYSTEM},
                {
                    "role": "user",
                    "content": f"Chunk {span}: revenue grew in segment {span}. " * (4 + 3 * span)
                    + f"Criterion {criterion}: judge each triple. " * (1 + criterion),
                },
            ],
            schema=TRIPLES,
            max_tokens=150,
            temperature=temperature,
            seed=7,
        )
        for span in range(3)
        for criterion in range(3)
    ]


@pytest.fixture(params=["tiny_model_dir", "tiny_gemma_dir"])
def model_dir(request):
    return request.getfixturevalue(request.param)


def extended(request: GenerationRequest) -> GenerationRequest:
    """The same request with more text after its prompt: the original is a prefix of it."""
    system, user = request.messages
    more = {**user, "content": user["content"] + " Judge again, more carefully."}
    return dataclasses.replace(request, messages=(system, more))


# 48 positions a forward pass: the prompts computed in several chunks.
@pytest.mark.parametrize(("temperature", "chunk"), [(0.0, 512), (0.8, 512), (0.0, 48)])
def test_reuse_gives_the_outputs_of_computing_every_prompt_whole(
    model_dir, temperature, chunk, monkeypatch
):
    monkeypatch.setattr(_prefix, "PREFILL_CHUNK", chunk)
    requests = judge_like_requests(temperature)
    outputs, stats = {}, {}
    for tokens in (0, 16384):
        args = {"batch_size": 4, "max_retries": 0, "prefix_cache_tokens": tokens}
        with load_model(ModelSpec(str(model_dir), "hf", args)) as lm:
            # Every supported transformers serves these models: reuse off here is a failure.
            assert (lm.prefix_cache is not None) == (tokens > 0), why_no_prefix_reuse(lm.hf_model)
            texts = [r.text for r in lm.generate(requests)]
            # A prompt extending a kept one (which it then replaces), and that kept one again:
            # every position of the second is already kept.
            texts += [r.text for r in lm.generate([extended(requests[0])])]
            computed = lm.stats["prompt_tokens_computed"]
            texts += [r.text for r in lm.generate([requests[0]])]
            if tokens:  # only the last position, which generate computes
                assert lm.stats["prompt_tokens_computed"] == computed + 1
            outputs[tokens], stats[tokens] = texts, lm.stats
    assert outputs[16384] == outputs[0]
    assert len(set(outputs[0])) > 1
    sent = stats[0]["prompt_tokens"]
    assert stats[16384]["prompt_tokens"] == sent
    assert stats[16384]["prompt_tokens_computed"] < 0.3 * sent


def test_kept_prompts_stay_within_the_budget(tiny_gemma_dir, monkeypatch):
    import torch

    monkeypatch.setattr(_prefix, "PREFILL_CHUNK", 16)
    with load_model(ModelSpec(str(tiny_gemma_dir), "hf", {"prefix_cache_tokens": 60})) as lm:
        cache = lm.prefix_cache
        prompt = torch.arange(3, 43).unsqueeze(0)  # 40 tokens
        ones = torch.ones_like(prompt)
        ready: list[int] = []  # positions reported ready, as they are
        _, computed = cache.batch_cache(prompt, ones, ready.append)
        assert computed == [39]  # all but the last position, which generate computes
        assert ready == [16, 16, 7]  # chunk by chunk
        _, computed = cache.batch_cache(prompt, ones, ready.append)
        assert computed == [0] and ready[3:] == [39]  # the same prompt again: kept
        longer = torch.cat([prompt, torch.arange(50, 60).unsqueeze(0)], dim=1)
        _, computed = cache.batch_cache(longer, torch.ones_like(longer), ready.append)
        assert computed == [10] and ready[4:] == [39, 10]
        assert cache._kept == 49  # the shorter prompt, a prefix of the longer, is not kept twice
        other = torch.arange(100, 140).unsqueeze(0)
        _, computed = cache.batch_cache(other, ones)
        assert computed == [39] and cache._kept == 39  # over budget: the oldest dropped


def test_a_batch_it_cannot_serve_is_computed_whole(tiny_model_dir):
    import torch

    with load_model(ModelSpec(str(tiny_model_dir), "hf", {})) as lm:
        right_padded = torch.tensor([[1, 1, 1], [1, 1, 0]])
        assert lm.prefix_cache.batch_cache(torch.ones_like(right_padded), right_padded) is None
        one_token = torch.tensor([[0, 1], [1, 1]])
        assert lm.prefix_cache.batch_cache(torch.ones_like(one_token), one_token) is None


def test_models_it_cannot_serve_compute_every_prompt(tiny_model_dir):
    """Beams, several sequences per prompt, a cache of the checkpoint's own choosing, recurrent
    layers: `generate` would not use a given cache as it is, so there is no reuse, and the
    reason names what stands in the way."""
    from transformers import AutoModelForCausalLM, FalconH1Config, FalconH1ForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert why_no_prefix_reuse(model) is None
    for setting, value, reason in [
        ("num_beams", 2, "beam search (num_beams=2)"),
        ("num_return_sequences", 2, "2 sequences per prompt"),
        ("cache_implementation", "static", "a static cache"),
        ("use_cache", False, "use_cache=False"),
    ]:
        default = getattr(model.generation_config, setting)
        setattr(model.generation_config, setting, value)
        assert reason in (why_no_prefix_reuse(model) or ""), setting
        setattr(model.generation_config, setting, default)
    hybrid = FalconH1Config(  # attention beside Mamba layers: recurrent state
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        mamba_d_ssm=32,
        mamba_n_heads=4,
        mamba_d_head=8,
        mamba_d_state=8,
        mamba_chunk_size=8,
    )
    reason = why_no_prefix_reuse(FalconH1ForCausalLM(hybrid)) or ""
    assert "not all of its layers are plain attention" in reason


def test_reuse_off_says_why_in_the_log(tiny_model_dir, tmp_path, caplog):
    beams = tmp_path / "beams"
    shutil.copytree(tiny_model_dir, beams)
    config = json.loads((beams / "generation_config.json").read_text())
    (beams / "generation_config.json").write_text(json.dumps({**config, "num_beams": 2}))
    with caplog.at_level(logging.WARNING), load_model(ModelSpec(str(beams), "hf", {})) as lm:
        assert lm.prefix_cache is None
    assert "prompt prefix reuse is off" in caplog.text
    assert "beam search (num_beams=2)" in caplog.text
