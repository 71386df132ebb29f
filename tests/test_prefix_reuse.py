"""Prompt-prefix reuse on the hf backend: the same outputs as computing every prompt whole, for a
fraction of the prompt positions (tiny random models; the embedded model in test_models_gemma)."""

import pytest

from finreflect_eval.models import GenerationRequest, ModelSpec, load_model
from finreflect_eval.schema import load_schema

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


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_reuse_gives_the_outputs_of_computing_every_prompt_whole(model_dir, temperature):
    outputs, stats = {}, {}
    for tokens in (0, 16384):
        args = {"batch_size": 4, "max_retries": 0, "prefix_cache_tokens": tokens}
        with load_model(ModelSpec(str(model_dir), "hf", args)) as lm:
            assert (lm.prefix_cache is not None) == (tokens > 0)
            outputs[tokens] = [r.text for r in lm.generate(judge_like_requests(temperature))]
            stats[tokens] = lm.stats
    assert outputs[16384] == outputs[0]
    assert len(set(outputs[0])) > 1
    sent = stats[0]["prompt_tokens"]
    assert stats[16384]["prompt_tokens"] == sent
    assert stats[0]["prompt_tokens_computed"] >= sent  # padding computed too
    assert stats[16384]["prompt_tokens_computed"] < 0.3 * sent


def test_kept_prompts_stay_within_the_budget(tiny_gemma_dir):
    import torch

    with load_model(ModelSpec(str(tiny_gemma_dir), "hf", {"prefix_cache_tokens": 60})) as lm:
        cache = lm.prefix_cache
        prompt = torch.arange(3, 43).unsqueeze(0)  # 40 tokens
        ones = torch.ones_like(prompt)
        _, computed = cache.batch_cache(prompt, ones)
        assert computed == 39  # all but the last position, which generate computes
        _, computed = cache.batch_cache(prompt, ones)
        assert computed == 0  # the same prompt again
        longer = torch.cat([prompt, torch.arange(50, 60).unsqueeze(0)], dim=1)
        _, computed = cache.batch_cache(longer, torch.ones_like(longer))
        assert computed == 10
        assert cache._kept == 49  # the shorter prompt, a prefix of the longer, is not kept twice
        other = torch.arange(100, 140).unsqueeze(0)
        batch, computed = cache.batch_cache(other, ones)
        assert computed == 39 and cache._kept == 39  # over budget: the oldest dropped
        assert batch.get_seq_length() == 39


def test_a_batch_it_cannot_serve_is_computed_whole(tiny_model_dir):
    import torch

    with load_model(ModelSpec(str(tiny_model_dir), "hf", {})) as lm:
        right_padded = torch.tensor([[1, 1, 1], [1, 1, 0]])
        assert lm.prefix_cache.batch_cache(torch.ones_like(right_padded), right_padded) is None
        one_token = torch.tensor([[0, 1], [1, 1]])
        assert lm.prefix_cache.batch_cache(torch.ones_like(one_token), one_token) is None
