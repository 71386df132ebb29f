"""Reasoning models on the vllm backend, against the real vLLM package (no engine): the engine
arguments `think=on` builds, with each family's reasoning parser, accepted by vLLM's own config
classes; recorded outputs of each family split into thought and answer by vLLM's own parser
classes; and gpt-oss in its harmony format, rendered and parsed by the real openai-harmony, the
final channel alone held to the schema by a structural tag that xgrammar compiles."""

import json
import shutil
from typing import ClassVar

import pytest
from support.tiny_model import THINKING_TEMPLATE
from support.vllm_engineless import EnginelessLLM

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models import GenerationRequest, ModelSpec
from finreflect_eval.models.vllm import VLLMModel
from finreflect_eval.pipeline.judging import load_panel

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
ANSWER = json.dumps({"answer": "ok"})
# Outputs as each family writes them with thinking on (the text vLLM returns offline).
RECORDED = {
    # Qwen3: the model opens its think block itself.
    "qwen3": f"<think>\nThe span says AAPL makes the iPhone.\n</think>\n\n{ANSWER}",
    # DeepSeek-R1 distills: the chat template opened it; the output only closes it.
    "deepseek_r1": f"The span says AAPL makes the iPhone.\n</think>\n\n{ANSWER}",
}
UNCLOSED = "<think>\nThe span says AAPL makes"


@pytest.fixture(scope="module")
def thinker_dir(tmp_path_factory):
    from support.tiny_model import build_tiny_qwen3_thinker

    return build_tiny_qwen3_thinker(tmp_path_factory.mktemp("tiny-qwen3-thinker"))


@pytest.fixture
def recorded_llm(real_vllm, engine_args_of, thinker_dir, monkeypatch):
    """`vllm.LLM` with a fake engine that answers `Recorded.outputs` in turn, as real
    `RequestOutput`s, with the thinker's real `ModelConfig` and tokenizer."""
    import os

    from vllm.config import ModelConfig
    from vllm.tokenizers import get_tokenizer

    folders = [os.path.dirname(real_vllm.__path__[0]), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(folder for folder in folders if folder))
    model_config = ModelConfig(model=str(thinker_dir))
    tokenizer = get_tokenizer(str(thinker_dir))
    real_llm = real_vllm.LLM

    class Recorded(EnginelessLLM):
        chat_template = THINKING_TEMPLATE
        outputs: ClassVar[list] = []  # (text, token ids) or text, answered in turn
        made = 0  # engines made (a refusal before the weights load makes none)

        def __init__(self, **kwargs):
            type(self).made += 1
            super().__init__(real_llm, model_config, tokenizer, **kwargs)

        def completion(self, index):
            output = self.outputs[index % len(self.outputs)]
            if isinstance(output, str):
                return output, tokenizer(output, add_special_tokens=False).input_ids
            return output

    monkeypatch.setattr(real_vllm, "LLM", Recorded)
    return Recorded


def request(max_tokens=64):
    messages = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "A span."}]
    return GenerationRequest.chat(messages, schema=SCHEMA, max_tokens=max_tokens)


def test_think_on_gives_vllm_the_family_s_reasoning_parser(engine_args_of, thinker_dir):
    """The engine arguments `think=on` builds: the parser by family name (qwen3) or as named,
    accepted by vLLM and merged into its own structured-outputs config, where the grammar waits
    for the thought to end; `think=off` asks for none."""
    on = engine_args_of(ModelSpec(str(thinker_dir), "vllm", {"think": "on"}))
    assert on.reasoning_parser == "qwen3"
    assert on.create_structured_outputs_config().reasoning_parser == "qwen3"
    named = engine_args_of(
        ModelSpec(str(thinker_dir), "vllm", {"think_budget": 32, "reasoning_parser": "deepseek_r1"})
    )
    assert named.create_structured_outputs_config().reasoning_parser == "deepseek_r1"
    off = engine_args_of(ModelSpec(str(thinker_dir), "vllm", {"think": "off"}))
    assert not off.reasoning_parser and not off.create_structured_outputs_config().reasoning_parser
    paper = {judge.name: judge for judge in load_panel("paper").judges}
    gpt_oss = engine_args_of(paper["gpt-oss-120b"].model_spec)  # always thinks: its parser
    assert gpt_oss.create_structured_outputs_config().reasoning_parser == "openai_gptoss"
    qwen = engine_args_of(paper["qwen3-235b-a22b"].model_spec)  # think: off
    assert not qwen.reasoning_parser


def test_a_model_without_a_known_parser_must_name_one(real_vllm, tmp_path, thinker_dir):
    folder = shutil.copytree(thinker_dir, tmp_path / "some-reasoner")
    with pytest.raises(FinReflectError, match=r"reasoning_parser=NAME"):
        VLLMModel(str(folder), think="on")


@pytest.mark.parametrize("family", ["qwen3", "deepseek_r1"])
def test_vllm_s_own_parser_splits_each_family_s_output(recorded_llm, thinker_dir, family):
    recorded_llm.outputs = [RECORDED[family], UNCLOSED]
    lm = VLLMModel(str(thinker_dir), think_budget=48, reasoning_parser=family, max_retries=0)
    done, unclosed = lm.generate([request(), request(max_tokens=65)])
    [(method, _, params, kwargs)] = lm.llm.calls[:1]
    assert method == "chat" and kwargs["chat_template_kwargs"] == {"enable_thinking": True}
    assert [p.thinking_token_budget for p in params] == [48, 48]  # vLLM's own field, validated
    assert done.ok and done.parsed == {"answer": "ok"}
    assert done.thinking == "The span says AAPL makes the iPhone."
    tokens = lm.llm.get_tokenizer()(RECORDED[family], add_special_tokens=False).input_ids
    end = lm.llm.get_tokenizer().convert_tokens_to_ids("</think>")
    assert done.reasoning_tokens == tokens.index(end) + 1  # the thought's, its end tag too
    assert done.reasoning_tokens < done.completion_tokens and not done.thinking_cut
    assert unclosed.error == "thinking did not end within 65 tokens" and unclosed.parsed is None
    assert unclosed.thinking == "The span says AAPL makes"
    assert unclosed.reasoning_tokens == unclosed.completion_tokens  # all of it thought
    assert lm.resolved()["reasoning_parser"] == family and lm.resolved()["think_budget"] == 48


def test_a_thought_vllm_ended_at_its_budget_is_recorded_as_cut(recorded_llm, thinker_dir):
    words = " ".join(["weigh"] * 40)
    recorded_llm.outputs = [f"<think>\n{words}\n</think>\n\n{ANSWER}"]
    lm = VLLMModel(str(thinker_dir), think_budget=16, max_retries=0)
    [result] = lm.generate([request(max_tokens=200)])
    assert result.ok and result.thinking_cut and result.reasoning_tokens > 16
    short = VLLMModel(str(thinker_dir), think_budget=500, max_retries=0)
    assert not short.generate([request(max_tokens=200)])[0].thinking_cut


def test_a_family_that_always_thinks_thinks_by_default(recorded_llm, thinker_dir, tmp_path):
    """A DeepSeek-R1 distill (by name): the engine holds the grammar back until its thought
    ends, so the model is recorded thinking, by its default, and its output is split."""
    recorded_llm.outputs = [RECORDED["deepseek_r1"]]
    folder = shutil.copytree(thinker_dir, tmp_path / "tiny-deepseek-r1-distill")
    lm = VLLMModel(str(folder), max_retries=0)
    assert lm.resolved()["think"] == "on" and lm.resolved()["think_default"] is True
    assert lm.llm.engine_args.reasoning_parser == "deepseek_r1"
    [result] = lm.generate([request()])
    assert result.ok and result.thinking == "The span says AAPL makes the iPhone."


def test_think_off_asks_the_template_for_no_thought(recorded_llm, thinker_dir):
    recorded_llm.outputs = [ANSWER]
    lm = VLLMModel(str(thinker_dir), think="off")
    [result] = lm.generate([request()])
    [(_, _, _, kwargs)] = lm.llm.calls
    assert kwargs["chat_template_kwargs"] == {"enable_thinking": False}
    assert result.ok and result.thinking is None and result.reasoning_tokens == 0
    default = VLLMModel(str(thinker_dir))  # a template with a switch: off by default, said so
    assert default.resolved()["think"] == "off" and default.resolved()["think_default"]


def test_harmony_renders_a_judge_prompt_and_parses_analysis_then_final(harmony_vocab):
    from finreflect_eval.models import _harmony

    messages = [
        {"role": "system", "content": "You judge triples."},
        {"role": "user", "content": "Is (AAPL, Produces, iPhone) faithful?"},
    ]
    prompt = _harmony.encoding().decode(_harmony.render(GenerationRequest.chat(messages), "low"))
    assert "Reasoning: low" in prompt and "# Instructions\n\nYou judge triples." in prompt
    assert prompt.endswith(
        "<|start|>user<|message|>Is (AAPL, Produces, iPhone) faithful?<|end|><|start|>assistant"
    )
    completion = (
        "<|channel|>analysis<|message|>The span states it.<|end|>"
        f"<|start|>assistant<|channel|>final<|message|>{ANSWER}<|return|>"
    )
    tokens = _harmony.encoding().encode(completion, allowed_special="all")
    final = _harmony.encoding().encode("<|start|>", allowed_special="all")[0]
    thinking = tokens.index(final)  # the analysis message, its header and end
    assert _harmony.parse(tokens) == ("The span states it.", ANSWER, True, thinking)
    cut = _harmony.encoding().encode(
        "<|channel|>analysis<|message|>The span", allowed_special="all"
    )
    thought, answer, ended, thinking = _harmony.parse(cut)
    assert not ended and answer == "" and "The span" in thought and thinking == len(cut)


def test_the_structural_tag_holds_only_the_final_channel_to_the_schema(harmony_vocab):
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from finreflect_eval.models import _harmony

    grammar = xgrammar.Grammar.from_structural_tag(_harmony.structural_tag(SCHEMA))
    final = f"<|channel|>final<|message|>{ANSWER}"
    assert accepts(grammar, f"<|channel|>analysis<|message|>Free text, anything.<|end|>"
                   f"<|start|>assistant{final}")  # fmt: skip
    assert accepts(grammar, final)  # the analysis is the model's to write or not
    assert not accepts(grammar, '<|channel|>final<|message|>{"verdict": 1}')  # not the schema
    assert not accepts(grammar, ANSWER)  # not outside its channel


def test_gpt_oss_runs_in_harmony_on_vllm(recorded_llm, harmony_vocab, thinker_dir, tmp_path):
    """A gpt-oss model (by name): harmony's prompt tokens go to `LLM.generate`, with the
    structural tag vLLM validates and harmony's stop tokens; the output tokens are parsed by
    openai-harmony into the analysis thought and the final answer."""
    from finreflect_eval.models import _harmony

    completion = (
        "<|channel|>analysis<|message|>The span states it.<|end|>"
        f"<|start|>assistant<|channel|>final<|message|>{ANSWER}"
    )
    tokens = _harmony.encoding().encode(completion, allowed_special="all")
    recorded_llm.outputs = [(completion, tokens)]
    folder = shutil.copytree(thinker_dir, tmp_path / "tiny-gpt-oss")
    lm = VLLMModel(str(folder), reasoning_effort="high")
    assert lm.resolved()["think"] == "on" and lm.resolved()["think_default"]  # always thinks
    [result] = lm.generate([request()])
    [(method, prompts, [params], _)] = lm.llm.calls
    assert method == "generate" and prompts == [
        {"prompt_token_ids": _harmony.render(request(), "high")}
    ]
    assert params.structured_outputs.structural_tag == _harmony.structural_tag(SCHEMA)
    assert sorted(params.stop_token_ids) == sorted(_harmony.stop_tokens())
    assert not params.skip_special_tokens
    assert result.ok and result.parsed == {"answer": "ok"}
    assert result.thinking == "The span states it." and result.reasoning_tokens > 0
    made = recorded_llm.made
    for args in ({"think": "off"}, {"think_budget": 64}, {"structured_backend": "outlines"}):
        with pytest.raises(FinReflectError, match="harmony format, which has no off switch"):
            VLLMModel(str(folder), **args)
    assert recorded_llm.made == made  # each refused before an engine was made


def test_a_model_run_as_before_keeps_its_cache_key(recorded_llm, thinker_dir, monkeypatch):
    """Earlier versions keyed the switch as given (`enable_thinking`): a model that does not
    think, or whose switch was set off, runs as it did and keeps its key (its cached answers);
    any new way of running gets a key of its own."""
    thinking = {
        key: VLLMModel(str(thinker_dir), **args).identity()
        for key, args in {"off": {"think": "off"}, "default": {}, "on": {"think": "on"}}.items()
    }
    assert {k: v for k, v in thinking["off"].items() if "think" in k} == {"enable_thinking": False}
    assert thinking["default"]["think"] == "off" and thinking["default"]["enable_thinking"] is None
    assert thinking["on"]["think"] == "on" and thinking["on"]["enable_thinking"] is True
    monkeypatch.setattr(recorded_llm, "chat_template", "{{ messages }}")  # no switch, no tags
    plain = VLLMModel(str(thinker_dir)).identity()
    assert {k: v for k, v in plain.items() if "think" in k} == {"enable_thinking": None}
