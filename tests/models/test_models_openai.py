"""The openai backend against a real HTTP server on 127.0.0.1, answering from a per-test script."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.chat_server import Reply, ScriptedServer, answer, closed_port, silent_server

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models import GenerationRequest, ModelSpec, ResponseCache, load_model
from finreflect_eval.models.openai import OpenAIModel

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def request(seed: int = 3) -> GenerationRequest:
    return GenerationRequest.chat(
        [{"role": "user", "content": "hi"}], schema=SCHEMA, max_tokens=20, seed=seed
    )


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer.running() as scripted:
        yield scripted


@pytest.fixture
def connect(server: ScriptedServer) -> Iterator[Callable[..., OpenAIModel]]:
    """Models on the scripted server with fast retries, closed after the test."""
    models: list[OpenAIModel] = []

    def make(**kwargs: Any) -> OpenAIModel:
        settings = {"base_url": server.url, "backoff": 0.01, "timeout": 5.0, **kwargs}
        models.append(OpenAIModel("test-model", **settings))
        return models[-1]

    yield make
    for model in models:
        model.close()


def test_request_body_answer_and_key(server, connect, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    server.script = [Reply(body=answer('{"a": 7}', prompt_tokens=11, completion_tokens=4))]
    lm = connect()
    [result] = lm.generate([request()])
    assert result.ok and result.parsed == {"a": 7}
    assert (result.prompt_tokens, result.completion_tokens) == (11, 4)
    [sent] = server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer sk-secret"
    body = sent["body"]
    assert body["model"] == "test-model"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (20, 0.0, 3)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "output",
            "schema": {**SCHEMA, "additionalProperties": False},
            "strict": True,
        },
    }
    assert "sk-secret" not in json.dumps(lm.identity())
    assert lm.identity()["base_url"] == server.url


def test_a_key_echoed_into_a_thought_is_not_kept(server, connect, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-key")
    echoed = answer('{"a": 7}')
    echoed["choices"][0]["message"]["reasoning_content"] = "my key is sk-secret-key"
    server.script = [Reply(body=echoed)]
    [result] = connect(think="on").generate([request()])
    assert result.ok and result.thinking == "my key is ***"  # redacted
    [sent] = server.requests
    assert sent["body"]["chat_template_kwargs"] == {"enable_thinking": True}


def test_thinking_is_asked_for_once(connect):
    body = {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "high"}
    with pytest.raises(FinReflectError, match="extra_body asks for reasoning_effort, think too"):
        connect(think="off", extra_body=body)
    connect(extra_body=body)  # thinking given once, in extra_body: as a server reads it


def test_no_authorization_header_without_a_key(server, connect):
    connect().generate([request()])
    assert "authorization" not in server.requests[0]["headers"]


def test_plain_prompt_and_extra_body(server, connect):
    server.script = [Reply(body=answer("free text"))]
    extra = {"chat_template_kwargs": {"enable_thinking": False}}
    lm = connect(extra_body=extra)
    [result] = lm.generate([GenerationRequest(prompt="hello")])
    assert result.ok and result.parsed == "free text"
    body = server.requests[0]["body"]
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert "response_format" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert lm.identity()["extra_body"] == extra


@pytest.mark.parametrize(
    "failure",
    [
        Reply(429, {"error": "rate limited"}, headers={"Retry-After": "0"}),
        Reply(500, {"error": "boom"}),
        Reply(503, "<html>overloaded</html>"),
    ],
)
def test_transient_status_is_retried(server, connect, failure):
    server.script = [failure, Reply(body=answer('{"a": 2}'))]
    [result] = connect().generate([request()])
    assert result.ok and result.parsed == {"a": 2}
    assert len(server.requests) == 2


def test_retry_after_replaces_the_backoff(server, connect):
    server.script = [Reply(429, {}, headers={"Retry-After": "0"}), Reply()]
    start = time.monotonic()
    [result] = connect(backoff=5.0).generate([request()])
    assert result.ok
    assert time.monotonic() - start < 2.0


def test_exhausted_retries_report_the_last_error(server, connect):
    server.script = [Reply(503, {"error": "still warming up"})]
    [result] = connect(http_retries=2).generate([request()])
    assert not result.ok and result.attempts == 0
    assert "HTTP 503" in result.error and "still warming up" in result.error
    assert "after 3 attempts" in result.error
    assert len(server.requests) == 3


def test_a_closed_port_is_one_line_at_once():
    lm = OpenAIModel("m", base_url=closed_port(), backoff=0.01)
    start = time.monotonic()
    with pytest.raises(FinReflectError, match=r"cannot reach the endpoint .*ConnectError"):
        lm.generate([request()])
    assert time.monotonic() - start < 5
    lm.close()


def test_a_server_that_never_answers_is_one_line():
    with silent_server() as url:
        lm = OpenAIModel("m", base_url=url, timeout=1.0)
        with pytest.raises(FinReflectError, match=r"cannot reach .*Timeout"):
            lm.generate([request()])
        lm.close()


def test_the_deadline_cuts_off_a_trickling_server(server, connect):
    # Each byte comes well within the read timeout; only the total deadline can stop it.
    server.script = [Reply(trickle=0.05)]
    lm = connect(timeout=1.0, deadline=0.5, http_retries=3)
    start = time.monotonic()
    [result] = lm.generate([request()])
    assert not result.ok and "deadline" in result.error
    assert time.monotonic() - start < 2.0


def test_a_server_failing_every_request_is_given_up(server, connect):
    server.script = [Reply(503, {"error": "down"})]
    lm = connect(http_retries=1, failure_budget=2, max_concurrency=1)
    results = lm.generate([request(seed) for seed in range(6)])
    assert not any(result.ok for result in results)
    assert len(server.requests) == 4  # two requests of two attempts each, then no more
    assert "given up after 2 failed requests in a row" in results[-1].error


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [{"message": {"content": {"a": 1}}}]},
        {"choices": [{"message": {"content": None}}]},
        {"choices": []},
        [1, 2, 3],
        "null",
    ],
)
def test_a_malformed_answer_is_a_transport_failure(server, connect, body):
    server.script = [Reply(body=body)]
    [result] = connect().generate([request()])
    assert not result.ok and "malformed response" in result.error and result.attempts == 0


def test_hang_times_out_and_is_not_cached(server, connect, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    lm = connect(timeout=0.3, http_retries=1, cache=cache)
    server.script = [Reply(delay=2.0)]
    start = time.monotonic()
    [result] = lm.generate([request()])
    assert time.monotonic() - start < 1.5
    assert not result.ok and "timeout" in result.error.lower()
    assert len(server.requests) == 2
    assert len(cache) == 0
    # A rerun asks again, and a good answer is cached.
    server.script = [Reply(body=answer('{"a": 5}'))]
    [result] = lm.generate([request()])
    assert result.ok and result.parsed == {"a": 5} and len(cache) == 1
    cache.close()


def test_invalid_json_is_retried_and_cached_as_failure(server, connect, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    lm = connect(max_retries=2, cache=cache)
    server.script = [Reply(body=answer("not json"))]
    [result] = lm.generate([request()])
    assert not result.ok and "invalid JSON" in result.error
    assert result.raw_outputs == ["not json"] * 3
    assert [sent["body"]["seed"] for sent in server.requests] == [3, 4, 5]  # retries resample
    assert len(cache) == 1
    [again] = lm.generate([request()])
    assert again.cached and not again.ok and len(server.requests) == 3
    cache.close()


def test_client_error_is_not_retried(server, connect):
    server.script = [Reply(400, {"error": {"message": "schema not supported"}})]
    [result] = connect().generate([request()])
    assert not result.ok
    assert "HTTP 400" in result.error and "schema not supported" in result.error
    assert len(server.requests) == 1


def test_malformed_success_is_an_error(server, connect):
    server.script = [Reply(body="<html>proxy login</html>")]
    [result] = connect().generate([request()])
    assert not result.ok and "malformed response" in result.error and result.attempts == 0


def test_requests_run_concurrently_in_order(server, connect):
    server.script = [Reply(delay=0.2, body=lambda body: answer(json.dumps({"a": body["seed"]})))]
    lm = connect(max_concurrency=4)
    start = time.monotonic()
    results = lm.generate([request(seed) for seed in range(8)])
    assert time.monotonic() - start < 1.0  # 8 × 0.2 s one at a time
    assert [result.parsed["a"] for result in results] == list(range(8))
    assert server.peak == 4


def test_load_model_uses_the_env_base_url(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    with load_model(ModelSpec("m", "openai", {"backoff": 0.01})) as lm:
        [result] = lm.generate([request()])
    assert result.ok and result.parsed == {"a": 1}


def test_unknown_model_arg_is_named(server):
    spec = ModelSpec("m", "openai", {"base_url": server.url, "bogus": 1})
    with pytest.raises(FinReflectError, match="bogus"), load_model(spec):
        pass


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"base_url": "localhost:8000/v1"}, "base_url 'localhost:8000/v1' must start with http"),
        ({"extra_body": "enable_thinking"}, "extra_body must be a dict, got 'enable_thinking'"),
        ({"max_concurrency": 0}, "max_concurrency and failure_budget must be at least 1"),
    ],
)
def test_bad_settings_are_user_errors(args, message):
    with pytest.raises(FinReflectError, match=re.escape(message)):
        OpenAIModel("m", **args)


def test_a_gzip_compressed_answer_is_read_once(server, connect):
    import gzip

    data = gzip.compress(json.dumps(answer('{"a": 9}')).encode())
    server.script = [Reply(body=data, headers={"Content-Encoding": "gzip"})]
    [result] = connect().generate([request()])
    assert result.ok and result.parsed == {"a": 9}


def test_a_transport_failure_after_an_invalid_output_is_a_transport_failure(server, connect):
    server.script = [Reply(body=answer("not json")), Reply(400, {"error": "gone"})]
    [result] = connect(max_retries=1).generate([request()])
    assert not result.ok and result.attempts == 0 and result.raw_outputs == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"base_url": "http://[::1/v1"}, r"^base_url 'http://\[::1/v1' is not a URL: "),
        ({"backoff": -1.0}, r"^backoff and max_backoff must be seconds ≥ 0 \(-1\.0, "),
        ({"max_backoff": float("nan")}, r"^backoff and max_backoff must be seconds ≥ 0 \(.*nan\)"),
    ],
)
def test_bad_endpoint_settings_are_one_line(args, message):
    with pytest.raises(FinReflectError, match=message) as error:
        OpenAIModel("m", **args)
    assert "\n" not in str(error.value)


def oversized(padding: int, content: str = '{"a": 1}') -> bytes:
    """A valid answer (`content` and JSON whitespace) of about `padding` bytes: a server that
    ignored max_tokens."""
    return json.dumps(answer(content + " " * padding)).encode()


def test_an_answer_over_the_size_limit_is_cut_off_and_not_kept(server, connect, tmp_path):
    """max_tokens 20 allows 20 × 64 bytes + 1 MiB: a 64 MiB answer is never read whole, fails in
    transport naming the limit (not retried: the server would send it again), and nothing of it
    reaches the cache."""
    import tracemalloc

    server.script = [Reply(body=oversized(64 * 2**20))]
    cache = ResponseCache(tmp_path / "c.sqlite")
    lm = connect(cache=cache, http_retries=2)
    tracemalloc.start()
    try:
        [result] = lm.generate([request()])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not result.ok and result.attempts == 0 and result.raw_outputs == []
    assert "answer larger than the limit of 1,049,856 bytes (max_tokens 20)" in result.error
    assert len(server.requests) == 1 and len(cache) == 0
    assert peak < 16 * 2**20, f"{peak:,} bytes held"
    cache.close()


def test_an_answer_within_the_size_limit_is_read(server, connect):
    server.script = [Reply(body=oversized(2**20 - 4096))]
    [result] = connect().generate([request()])
    assert result.ok and result.parsed == {"a": 1}


def test_an_oversized_answer_reaches_neither_the_samples_nor_the_cache(server, tmp_path):
    from support.runs import TRIPLES, panel_file

    from finreflect_eval.pipeline.evaluator import evaluate
    from finreflect_eval.pipeline.judging import load_panel
    from finreflect_eval.pipeline.run_config import RunConfig

    server.script = [Reply(body=oversized(8 * 2**20, json.dumps(TRIPLES)))]
    config = RunConfig(
        model=ModelSpec("m", "openai", {"base_url": server.url, "http_retries": 0}),
        tasks=["finreflect_smoke_single_pass"],
        dataset="sample",
        limit=2,
        output_path=tmp_path / "out",
        cache=tmp_path / "out" / "cache.sqlite",
    )
    panel = load_panel(panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all"))
    with pytest.raises(
        FinReflectError, match=r"failed in transport .*answer larger than the limit"
    ):
        evaluate(config, panel)
    sizes = {str(path): path.stat().st_size for path in tmp_path.rglob("*") if path.is_file()}
    assert max(sizes.values()) < 2**20, sizes


# --- Checked against vLLM's own OpenAI-server models (the real wheel: conftest's real_vllm) ---


def vllm_failure(kind: str) -> dict:
    """The error body `vllm serve` answers one of its own failures with: its exception through
    its own error handler, as its router serialises it (`model_dump()`)."""
    from http import HTTPStatus

    from vllm.entrypoints.serve.exception_handling.error_response import create_error_response
    from vllm.exceptions import (
        GracefulHTTPError,
        QueueOverflowError,
        RetryableRequestError,
        VLLMValidationError,
    )
    from vllm.v1.engine.exceptions import EngineDeadError

    failures = {
        "queue full": QueueOverflowError,  # 503
        "retryable": RetryableRequestError,  # 503
        "engine dead": EngineDeadError,  # 500
        "rate limited": lambda: GracefulHTTPError("Slow down", HTTPStatus.TOO_MANY_REQUESTS),
        "bad schema": lambda: VLLMValidationError(
            "The schema is not supported", parameter="response_format"
        ),  # 400
    }
    return create_error_response(failures[kind]()).model_dump()


def vllm_answer(content: str, prompt_tokens: int, completion_tokens: int) -> dict:
    """A chat completion as `vllm serve` sends it, made with its own response model."""
    from vllm.entrypoints.openai.chat_completion.protocol import (
        ChatCompletionResponse,
        ChatCompletionResponseChoice,
        ChatMessage,
    )
    from vllm.entrypoints.serve.engine.protocol import UsageInfo

    message = ChatMessage(role="assistant", content=content)
    usage = UsageInfo(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )
    choice = ChatCompletionResponseChoice(index=0, message=message)
    return ChatCompletionResponse(model="test-model", choices=[choice], usage=usage).model_dump()


def vllm_checked(sent: dict[str, Any]) -> Any:
    """vLLM's sampling parameters for one request our backend sent, after the checks `vllm
    serve` makes: a JSON content type, a body its ChatCompletionRequest parses, and no field it
    would ignore (it only logs those, so a misnamed one would be lost without a word)."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    body = sent["body"]
    assert sent["headers"]["content-type"] == "application/json"
    fields = ChatCompletionRequest.model_fields
    known = set(fields) | {field.alias for field in fields.values() if field.alias}
    assert set(body) <= known, f"vLLM would ignore {sorted(set(body) - known)}"
    parsed = ChatCompletionRequest.model_validate(body)
    return parsed, parsed.to_sampling_params(body["max_tokens"], {})


def test_every_request_body_is_one_vllm_serve_takes_whole(server, connect, real_vllm):
    """A constrained chat, its resampled retry and a plain prompt, with extra_body: vLLM
    parses each into the sampling parameters asked for, the schema as its structured output."""
    replies = ["not json", '{"a": 1}', "free text"]
    server.script = [Reply(body=answer(content)) for content in replies]
    lm = connect(max_retries=1, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    messages = [{"role": "system", "content": "Extract."}, {"role": "user", "content": "hi"}]
    [constrained] = lm.generate([GenerationRequest.chat(messages, schema=SCHEMA, seed=3)])
    [plain] = lm.generate([GenerationRequest(prompt="hello")])
    assert constrained.ok and plain.ok
    closed = {**SCHEMA, "additionalProperties": False}
    # seed and temperature (a retry resamples), schema, messages
    expected = [(3, 0.0, closed, 2), (4, 0.3, closed, 2), (0, 0.0, None, 1)]
    for sent, (seed, temperature, schema, n_messages) in zip(
        server.requests, expected, strict=True
    ):
        parsed, params = vllm_checked(sent)
        assert (params.seed, params.temperature) == (seed, temperature)
        assert (params.structured_outputs.json if params.structured_outputs else None) == schema
        assert len(parsed.messages) == n_messages
        assert parsed.chat_template_kwargs == {"enable_thinking": False}


def test_every_request_of_a_run_is_one_vllm_serve_takes_whole(tmp_path, real_vllm):
    """A run with the candidate and all three judges behind endpoints: each extraction and
    judge request it sends (the real prompts and schemas) passes vLLM's request checks."""
    import yaml
    from support.chat_server import judge_answer
    from support.runs import TRIPLES

    from finreflect_eval.pipeline import evaluator
    from finreflect_eval.pipeline.judging import load_panel
    from finreflect_eval.pipeline.run_config import RunConfig

    with (
        ScriptedServer.running([Reply(body=answer(json.dumps(TRIPLES)))]) as candidate,
        ScriptedServer.running([Reply(body=judge_answer)]) as judges,
    ):
        config = RunConfig(
            model=ModelSpec("candidate", "openai", {"base_url": candidate.url}),
            tasks=["finreflect_smoke_single_pass"],
            dataset="sample",
            limit=2,
            output_path=tmp_path / "out",
            cache=None,
        )
        members = [
            {"name": f"judge-{n}", "model": "m", "backend": "openai"}
            | {"model_args": {"base_url": judges.url}}
            for n in range(3)
        ]
        panel = tmp_path / "endpoints.yaml"
        panel.write_text(yaml.safe_dump({"panel": "endpoints", "judges": members}))
        evaluator.evaluate(config, load_panel(panel))
    assert len(candidate.requests) == 2 and len(judges.requests) == 3 * 2 * 4
    for sent in candidate.requests + judges.requests:
        _, params = vllm_checked(sent)
        assert (
            params.structured_outputs.json
            == sent["body"]["response_format"]["json_schema"]["schema"]
        )


def test_the_fake_servers_answer_is_a_vllm_chat_completion(real_vllm):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionResponse

    parsed = ChatCompletionResponse.model_validate(answer('{"a": 1}', 5, 2))
    assert parsed.choices[0].message.content == '{"a": 1}'
    assert (parsed.usage.prompt_tokens, parsed.usage.total_tokens) == (5, 7)


@pytest.mark.parametrize("kind", ["queue full", "retryable", "engine dead", "rate limited"])
def test_vllms_own_transient_failures_are_retried(server, connect, real_vllm, kind):
    """vLLM's 503s, 500 and a 429, each body as vLLM writes it, with a Retry-After of 0 (the
    5 s backoff would be slower): retried once, then vLLM's own answer is read."""
    failure = vllm_failure(kind)
    server.script = [
        Reply(failure["error"]["code"], failure, headers={"Retry-After": "0"}),
        Reply(body=vllm_answer('{"a": 2}', prompt_tokens=9, completion_tokens=3)),
    ]
    start = time.monotonic()
    [result] = connect(backoff=5.0).generate([request()])
    assert time.monotonic() - start < 2.0
    assert result.ok and result.parsed == {"a": 2}
    assert (result.prompt_tokens, result.completion_tokens) == (9, 3)
    assert len(server.requests) == 2


def test_vllms_own_bad_request_is_not_retried_and_its_message_kept(server, connect, real_vllm):
    server.script = [Reply(400, vllm_failure("bad schema"))]
    [result] = connect(http_retries=2).generate([request()])
    assert not result.ok and len(server.requests) == 1
    assert result.error.startswith("HTTP 400: ")
    assert '"message": "The schema is not supported' in result.error


def test_a_dead_vllm_engine_is_given_up_naming_its_message(server, connect, real_vllm):
    server.script = [Reply(500, vllm_failure("engine dead"))]
    [result] = connect(http_retries=2).generate([request()])
    assert not result.ok and len(server.requests) == 3
    assert "The server had an error while processing your request." in result.error
    assert result.error.startswith("HTTP 500: ") and "(after 3 attempts)" in result.error


def test_a_trickled_vllm_answer_is_read_whole(server, connect, real_vllm):
    """A byte at a time, each well within the read timeout: slow but steady is not a hang."""
    server.script = [Reply(body=vllm_answer('{"a": 3}', 9, 3), trickle=0.001)]
    [result] = connect(timeout=1.0, deadline=30.0).generate([request()])
    assert result.ok and result.parsed == {"a": 3} and result.completion_tokens == 3
