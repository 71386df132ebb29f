"""The openai backend reading a thought that a real server returns apart: llama.cpp's
`llama-server` serving the embedded Gemma 3 270M GGUF with a chat template that thinks (written
here: Gemma's turns, with Qwen3's `enable_thinking` switch; the assistant's turn opens a think
block, as DeepSeek-R1's template does) and `--reasoning-format deepseek`. No small reasoning
GGUF is on PyPI: Gemma 270M thinks in whatever words it has, and never closes its thought by
itself, so the budget (`thinking_budget_tokens`, llama-server's per-request field) closes it
and the server's JSON grammar starts after it."""

import json

import pytest
from conftest import llama_server_files
from support.chat_server import RecordingProxy

from finreflect_eval.models import GenerationRequest
from finreflect_eval.models.openai import OpenAIModel

pytestmark = pytest.mark.slow

# An assistant turn's `reasoning_content` is written back inside its think block: from that
# llama-server's template analysis knows the template thinks (without it, a think block is
# left in the content, and the grammar holds the whole output).
THINKING_GEMMA = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'assistant' -%}{{- '<start_of_turn>model\\n' -}}"
    "{%- if message.reasoning_content -%}"
    "{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' -}}{%- endif -%}"
    "{%- else -%}{{- '<start_of_turn>user\\n' -}}{%- endif -%}"
    "{{- message.content + '<end_of_turn>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)
SCHEMA = {"type": "object", "properties": {"prime": {"type": "boolean"}}, "required": ["prime"]}


@pytest.fixture(scope="module")
def thinking_server(tmp_path_factory):
    """llama-server with the thinking template and `--reasoning-format deepseek`, behind a
    recording proxy (every request body it received)."""
    from support import llama_server

    binary, gguf = llama_server_files()
    folder = tmp_path_factory.mktemp("thinking-llama-server")
    template = folder / "thinking.jinja"
    template.write_text(THINKING_GEMMA)
    flags = ("--chat-template-file", str(template), "--reasoning-format", "deepseek")
    with (
        llama_server.serve(binary, gguf, folder / "server.log", slots=2, flags=flags) as url,
        RecordingProxy.running(url) as proxy,
    ):
        yield proxy


def ask(proxy, max_tokens=96, **args):
    lm = OpenAIModel("gemma-3-270m", base_url=proxy.url, max_retries=0, **args)
    try:
        request = GenerationRequest.chat(
            [{"role": "user", "content": "Is 17 prime? Answer as JSON."}],
            schema=SCHEMA,
            max_tokens=max_tokens,
        )
        [result] = lm.generate([request])
    finally:
        lm.close()
    return result, proxy.exchanges[-1]


def test_a_budget_closes_the_thought_and_the_answer_is_json(thinking_server):
    result, exchange = ask(thinking_server, think_budget=16)
    body, answer = exchange["body"], exchange["response"]
    assert body["thinking_budget_tokens"] == 16  # llama-server's name for it
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    message = answer["choices"][0]["message"]
    assert message["reasoning_content"]  # the server returned the thought apart
    assert result.ok, result.error
    assert result.thinking == message["reasoning_content"].strip()
    assert isinstance(result.parsed["prime"], bool) and "<think>" not in result.text
    assert result.completion_tokens == answer["usage"]["completion_tokens"]


def test_think_off_gets_no_thought(thinking_server):
    result, exchange = ask(thinking_server, think="off")
    assert exchange["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert "reasoning_content" not in exchange["response"]["choices"][0]["message"]
    assert result.ok and result.thinking is None and result.reasoning_tokens == 0


def test_a_thought_cut_off_by_max_tokens_is_an_invalid_answer(thinking_server):
    result, exchange = ask(thinking_server, max_tokens=24, think="on")
    choice = exchange["response"]["choices"][0]
    assert choice["finish_reason"] == "length" and not choice["message"].get("content")
    assert result.error == "thinking did not end within 24 tokens" and result.parsed is None
    assert result.thinking == choice["message"]["reasoning_content"].strip()
    print(json.dumps(choice["message"])[:300])
