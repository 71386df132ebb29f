"""Reasoning models on the hf backend: a tiny Qwen3 that thinks (its chat template has Qwen3's
`enable_thinking` switch) runs with thinking on (free text, then schema-valid JSON in the same
sequence), off (no think block), with a budget (the end written for it at the budget), and
with a thought that never ends (an invalid answer with its own reason)."""

import pytest
from conftest import require
from support.tiny_model import THOUGHT

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models import GenerationRequest, ModelSpec, load_model
from finreflect_eval.protocol.schema import load_schema

require("outlines", "[hf] extra")

TRIPLES = load_schema().triple_list_model(3, max_entity_chars=20)
THOUGHT_TOKENS = len(THOUGHT) + 2  # <think>, the words, </think>


@pytest.fixture(scope="module")
def thinker_dir(tmp_path_factory):
    from support.tiny_model import build_tiny_qwen3_thinker

    return build_tiny_qwen3_thinker(tmp_path_factory.mktemp("tiny-qwen3-thinker"))


def spec(folder, **args):
    return ModelSpec(str(folder), "hf", {"batch_size": 3, "max_retries": 0, **args})


def requests(n=3, max_tokens=400):
    return [
        GenerationRequest.chat(
            [
                {"role": "system", "content": "Extract triples."},
                {"role": "user", "content": f"{i}"},
            ],
            schema=TRIPLES,
            max_tokens=max_tokens,
        )
        for i in range(n)
    ]


def test_think_on_thinks_freely_then_answers_in_the_schema(thinker_dir):
    with load_model(spec(thinker_dir, think="on")) as lm:
        results = lm.generate(requests())
        recorded = lm.resolved()
    assert recorded["think"] == "on" and recorded["think_default"] is False
    for result in results:
        assert result.ok, result.error
        assert result.thinking == " ".join(THOUGHT)  # the free text, without its tags
        TRIPLES.model_validate(result.parsed)
        assert result.text.startswith("{") and "<think>" not in result.text
        assert result.reasoning_tokens == THOUGHT_TOKENS and not result.thinking_cut
        assert result.completion_tokens > result.reasoning_tokens  # the answer's tokens too


def test_think_off_gives_no_think_block(thinker_dir):
    with load_model(spec(thinker_dir, think="off")) as lm:
        prompt = lm.model_input(requests(1)[0])
        results = lm.generate(requests())
    assert prompt.endswith("<think>\n\n</think>\n\n")  # the template's switch, off
    for result in results:
        assert result.ok, result.error
        assert result.thinking is None and result.reasoning_tokens == 0
        assert "<think>" not in result.text and "</think>" not in result.text


def test_a_template_with_a_switch_defaults_to_off_and_says_so(thinker_dir, tiny_model_dir):
    with load_model(spec(thinker_dir)) as lm:
        assert lm.resolved()["think"] == "off" and lm.resolved()["think_default"] is True
        off_key = lm.cache_key(requests(1)[0])
    with load_model(spec(thinker_dir, think="on")) as lm:
        assert lm.cache_key(requests(1)[0]) != off_key  # think is part of the cache key
    with load_model(spec(tiny_model_dir)) as lm:  # no template: the model does not think
        assert lm.resolved()["think"] == "none" and "think" not in lm.identity()
    with (
        pytest.raises(FinReflectError, match="has no thinking format"),
        load_model(spec(tiny_model_dir, think="on")),
    ):
        pass


def test_a_budget_stops_thinking_and_still_yields_valid_json(thinker_dir):
    with load_model(spec(thinker_dir, think_budget=16)) as lm:
        assert lm.resolved()["think"] == "on" and lm.resolved()["think_budget"] == 16
        results = lm.generate(requests())
    for result in results:
        assert result.ok, result.error
        assert result.thinking_cut and result.reasoning_tokens == 16
        assert result.thinking == " ".join(THOUGHT[:15])  # <think> and 15 words
        TRIPLES.model_validate(result.parsed)


def test_a_thought_that_never_ends_is_an_invalid_answer(thinker_dir, tmp_path):
    with load_model(spec(thinker_dir, think="on"), cache_path=tmp_path / "cache.sqlite") as lm:
        results = lm.generate(requests(2, max_tokens=20))
        assert lm.stats["failures"] == 2
        again = lm.generate(requests(2, max_tokens=20))  # the same from the cache
    for result in [*results, *again]:
        assert not result.ok and result.parsed is None
        assert result.error == "thinking did not end within 20 tokens"
        assert result.thinking == " ".join(THOUGHT[:19]) and result.reasoning_tokens == 20
    assert all(result.cached for result in again)


def test_gpt_oss_s_harmony_is_refused_on_hf(tiny_model_dir, tmp_path):
    """A tokenizer with harmony's channels (gpt-oss's): its format is not split on hf."""
    import shutil

    from transformers import AutoTokenizer

    folder = shutil.copytree(tiny_model_dir, tmp_path / "harmony")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|channel|>"]})
    tokenizer.save_pretrained(folder)
    with (
        pytest.raises(FinReflectError, match="harmony format, which the hf backend does not"),
        load_model(spec(folder)),
    ):
        pass


def test_an_unquoted_yaml_off_is_off(thinker_dir):
    """YAML reads `think: off` as false (and `on` as true): the same settings."""
    import yaml

    args = yaml.safe_load("think: off")
    assert args == {"think": False}
    with load_model(spec(thinker_dir, **args)) as lm:
        assert lm.resolved()["think"] == "off" and lm.resolved()["think_default"] is False


def test_think_settings_that_cannot_hold_are_one_line(thinker_dir):
    for args, message in [
        ({"think": "off", "think_budget": 8}, "a budget is for a model that thinks"),
        ({"think": "maybe"}, "think='maybe' for backend 'hf': Input should be 'off' or 'on'"),
        ({"think_budget": 0}, "think_budget=0 .*greater than or equal to 1"),
    ]:
        with pytest.raises(FinReflectError, match=message), load_model(spec(thinker_dir, **args)):
            pass
