"""The openai-completions backend (lm-eval's `local-completions` and `openai-completions`) against
a scripted server on 127.0.0.1, and lm-eval's backend names: each one is ours, or one line that
says which of ours covers it."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lm_eval.api.registry
import lm_eval.models  # registers lm-eval's backend names
import pytest
from conftest import require
from support.chat_server import Reply, ScriptedServer
from support.completions_server import LlamaCppServer, completion_answer

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models import BACKENDS, GenerationRequest, ModelSpec, get_backend, load_model
from finreflect_eval.models._registry import LM_EVAL_BACKENDS, LM_EVAL_ONLY

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
CLOSED = {**SCHEMA, "additionalProperties": False}
MESSAGES = [{"role": "system", "content": "Extract."}, {"role": "user", "content": "Span."}]
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def request(**kwargs: Any) -> GenerationRequest:
    return GenerationRequest.chat(MESSAGES, schema=SCHEMA, max_tokens=20, seed=3, **kwargs)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer.running([Reply(body=completion_answer('{"a": 1}'))]) as scripted:
        yield scripted


@pytest.fixture
def connect(server: ScriptedServer) -> Iterator[Callable[..., Any]]:
    """Completions models on the scripted server, closed after the test."""
    from finreflect_eval.models.completions import CompletionsModel

    models: list[CompletionsModel] = []

    def make(**kwargs: Any) -> CompletionsModel:
        models.append(CompletionsModel("test-model", base_url=server.url, **kwargs))
        return models[-1]

    yield make
    for model in models:
        model.close()


def test_messages_become_one_plain_prompt_at_v1_completions(server, connect):
    server.script = [
        Reply(body=completion_answer('{"a": 7}', prompt_tokens=11, completion_tokens=4))
    ]
    lm = connect()
    [result] = lm.generate([request()])
    assert result.ok and result.parsed == {"a": 7}
    assert (result.prompt_tokens, result.completion_tokens) == (11, 4)
    [sent] = server.requests
    assert sent["path"] == "/v1/completions"
    body = sent["body"]
    # The hf and vllm backends' rendering for a base model: the contents, blank-line separated.
    assert body["prompt"] == "Extract.\n\nSpan." and "messages" not in body
    assert (body["model"], body["max_tokens"], body["temperature"], body["seed"]) == (
        "test-model",
        20,
        0.0,
        3,
    )
    # vLLM and SGLang read the chat path's response_format on /v1/completions too.
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": CLOSED, "strict": True},
    }
    assert "json_schema" not in body
    assert lm.identity()["prompt_format"] == "plain"


def test_llama_server_gets_the_schema_in_the_field_it_reads_there():
    """llama-server ignores response_format on /v1/completions (measured): its own json_schema."""
    from finreflect_eval.models.completions import CompletionsModel

    with LlamaCppServer.running([Reply(body=completion_answer('{"a": 2}'))]) as server:
        lm = CompletionsModel("m", base_url=server.url)
        [result] = lm.generate([request()])
        lm.close()
    assert result.ok and result.parsed == {"a": 2}
    [sent] = server.requests
    assert sent["body"]["json_schema"] == CLOSED and "response_format" not in sent["body"]


def test_a_malformed_completion_is_a_transport_failure(server, connect):
    server.script = [Reply(body={"choices": [{"message": {"content": '{"a": 1}'}}]})]
    [result] = connect().generate([request()])
    assert not result.ok and "malformed response" in result.error and result.attempts == 0


@pytest.mark.parametrize("name", ["local-completions", "openai-completions"])
def test_lm_evals_completions_names_run_on_our_completions_backend(server, name):
    args = f"model=m,base_url={server.url}/completions,num_concurrent=2,max_retries=1"
    # lm-eval's own request-path args, where they mean what we do: dropped.
    dropped = "tokenized_requests=False,tokenizer_backend=huggingface"
    spec = ModelSpec.from_cli(name, model_args=f"{args},{dropped}")
    assert spec == ModelSpec(
        "m",
        "openai-completions",
        {"base_url": f"{server.url}/completions", "max_concurrency": 2, "http_retries": 1},
    )
    with load_model(spec) as lm:  # lm-eval's base_url names the endpoint: read as the /v1 root
        [result] = lm.generate([request()])
    assert result.ok and [sent["path"] for sent in server.requests] == ["/v1/completions"]


@pytest.mark.parametrize(
    "arg", ["tokenized_requests=True", "tokenized_requests=[1]", "tokenizer_backend=tiktoken"]
)
def test_lm_evals_token_requests_are_refused(arg):
    key = re.escape(arg.split("=")[0])
    with pytest.raises(FinReflectError, match=rf"^model arg {key}=.* is not supported$"):
        ModelSpec.from_cli("local-completions", model_args=f"model=m,{arg}")


@pytest.fixture
def template_tokenizer(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """The tiny model's tokenizer with a chat template (and a BOS token the template writes)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = TEMPLATE
    tokenizer.bos_token = "</s>"
    tokenizer.save_pretrained(tmp_path / "templated")
    return tmp_path / "templated"


def test_a_tokenizers_chat_template_renders_the_prompt(
    server, connect, template_tokenizer, tmp_path
):
    lm = connect(tokenizer=str(template_tokenizer))
    [result] = lm.generate([request()])
    assert result.ok
    # The server adds the BOS token when it tokenizes a prompt: the rendering leaves it out.
    assert server.requests[0]["body"]["prompt"] == "<|system|>Extract.<|user|>Span.<|assistant|>"
    identity = lm.identity()
    assert identity["prompt_format"] == "chat_template"
    assert identity["tokenizer"] == str(template_tokenizer)
    assert identity["chat_template_sha"] == hashlib.sha256(TEMPLATE.encode()).hexdigest()
    assert lm.resolved()["chat_template"] == TEMPLATE
    # The rendering changes the outputs: another key than the plain prompt's.
    assert lm.cache_key(request()) != connect().cache_key(request())


def test_named_chat_templates_render_with_the_default_one(
    server, connect, tiny_model_dir, tmp_path
):
    """A tokenizer with several named templates (Command-R, Hermes): the default one renders
    the prompt and is the one the identity and the record name."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = {"default": TEMPLATE, "tool_use": "{{ tools }}"}
    tokenizer.bos_token = "</s>"
    tokenizer.save_pretrained(tmp_path / "named")
    lm = connect(tokenizer=str(tmp_path / "named"))
    [result] = lm.generate([request()])
    assert result.ok
    assert server.requests[0]["body"]["prompt"] == "<|system|>Extract.<|user|>Span.<|assistant|>"
    assert lm.identity()["chat_template_sha"] == hashlib.sha256(TEMPLATE.encode()).hexdigest()
    assert lm.resolved()["chat_template"] == TEMPLATE


def test_a_tokenizer_without_a_chat_template_gives_the_plain_prompt(
    server, connect, tiny_model_dir
):
    lm = connect(tokenizer=str(tiny_model_dir))
    lm.generate([request()])
    assert server.requests[0]["body"]["prompt"] == "Extract.\n\nSpan."
    assert lm.identity()["prompt_format"] == "plain"
    assert lm.cache_key(request()) == connect().cache_key(request())  # the same prompts


def test_a_tokenizer_that_cannot_load_is_one_line(tmp_path):
    from finreflect_eval.models.completions import CompletionsModel

    require("transformers", "[hf] extra")
    with pytest.raises(FinReflectError, match=r"^cannot load tokenizer '.*missing': "):
        CompletionsModel("m", base_url="http://127.0.0.1:9/v1", tokenizer=str(tmp_path / "missing"))


def test_every_completions_body_is_one_vllm_serve_takes_whole(server, connect, real_vllm):
    """vLLM's CompletionRequest parses each body (no field it would ignore) into the sampling
    parameters asked for, the schema as its structured output."""
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    lm = connect()
    lm.generate([request(top_p=0.9, top_k=5, temperature=0.7)])
    body = server.requests[0]["body"]
    fields = CompletionRequest.model_fields
    known = set(fields) | {field.alias for field in fields.values() if field.alias}
    assert set(body) <= known, f"vLLM would ignore {sorted(set(body) - known)}"
    params = CompletionRequest.model_validate(body).to_sampling_params(body["max_tokens"], {})
    assert (params.top_p, params.top_k, params.temperature, params.seed) == (0.9, 5, 0.7, 3)
    assert params.structured_outputs.json == CLOSED


def test_the_fake_servers_answer_is_a_vllm_completion(real_vllm):
    from vllm.entrypoints.openai.completion.protocol import CompletionResponse

    parsed = CompletionResponse.model_validate(completion_answer('{"a": 1}', 5, 2))
    assert parsed.choices[0].text == '{"a": 1}' and parsed.usage.total_tokens == 7


# --- lm-eval's backend names ---


@pytest.mark.parametrize("name", sorted(lm_eval.api.registry.MODEL_REGISTRY))
def test_every_lm_eval_backend_name_is_ours_or_one_line(name):
    """A backend name lm-eval gains fails here until it is mapped to ours or given its line."""
    if name in LM_EVAL_BACKENDS:
        _, key, _ = LM_EVAL_BACKENDS[name]
        spec = ModelSpec.from_cli(name, model_args=f"{key}=org/m")
        assert spec.model == "org/m" and get_backend(spec.backend)
        return
    assert name in LM_EVAL_ONLY, f"lm-eval's backend {name!r} is neither mapped nor explained"
    ours = re.escape(", ".join(sorted(BACKENDS)))  # hf, openai, openai-completions, ...
    line = (
        rf"^--model {re.escape(name)} is lm-eval's backend, not one of ours\b[^\n]*; ours: {ours}$"
    )
    with pytest.raises(FinReflectError, match=line):
        ModelSpec.from_cli(name, model_args="pretrained=org/m")
    with pytest.raises(FinReflectError, match=line.replace("--model", "--backend")):
        get_backend(name)


@pytest.mark.parametrize(
    ("name", "covered_by"),
    [
        ("gguf", "llama.cpp's llama-server: --model local-completions or local-chat-completions"),
        ("ggml", "llama.cpp's llama-server: --model local-completions or local-chat-completions"),
        ("sglang", "SGLang's server: --model local-chat-completions"),
        ("vllm-vlm", "our tasks are text: --model vllm"),
        ("dummy", "--backend scripted"),
    ],
)
def test_the_line_says_which_of_ours_covers_it(name, covered_by):
    with pytest.raises(FinReflectError, match=re.escape(covered_by)):
        ModelSpec.from_cli(name)
