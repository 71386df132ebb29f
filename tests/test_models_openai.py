"""The openai backend against a real HTTP server on 127.0.0.1, answering from a per-test script."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.chat_server import Reply, ScriptedServer, answer, closed_port, silent_server

from finreflect_eval.errors import FinReflectError
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
    "args",
    [{"base_url": "localhost:8000/v1"}, {"extra_body": "enable_thinking"}, {"max_concurrency": 0}],
)
def test_bad_settings_are_user_errors(args):
    with pytest.raises(FinReflectError):
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
    "args",
    [{"base_url": "http://[::1/v1"}, {"backoff": -1.0}, {"max_backoff": float("nan")}],
)
def test_bad_endpoint_settings_are_one_line(args):
    with pytest.raises(FinReflectError):
        OpenAIModel("m", **args)
