"""The `openai` backend: any OpenAI-compatible `/v1/chat/completions` server (vLLM serve, SGLang,
hosted APIs) over plain httpx, with bounded concurrency and transport retries with backoff.
Servers may ignore the JSON-schema constraint (vLLM's legacy `guided_json` is silently dropped),
so `LM.generate` validates every output; transport failures come back as errors, never as text.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.redaction import REDACTED, redact, redact_text, redact_url
from finreflect_eval.models._answers import one_line, owner, parse_answer
from finreflect_eval.models._base import LM, AtLeastOne, AtLeastZero, PositiveSeconds, Seconds
from finreflect_eval.models._cache import ResponseCache
from finreflect_eval.models._endpoint import api_root, endpoint_slots, require_httpx
from finreflect_eval.models._requests import (
    Completion,
    GenerationRequest,
    JsonSchema,
    closed_schema,
)
from finreflect_eval.models._thinking import (
    Thinking,
    ThinkSetting,
    one_way_to_think,
    resolve_thinking,
)

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

LLAMA_CPP = "llamacpp"  # llama-server's `owned_by` in `GET /v1/models` (a constant of its own)
BUDGET_FIELDS = {LLAMA_CPP: "thinking_budget_tokens"}  # else vLLM's name for a thought's budget

PROBE_TIMEOUT = 10.0  # seconds for the first `GET /models`: any server answers it at once
# An answer's size limit: a generous bound per token asked for (long tokens, JSON-escaped as
# \uXXXX, stay well under 64 bytes on average) plus room for the rest of the body. A larger answer
# comes from a server that ignored max_tokens: reading stops at the limit and the call fails in
# transport, so the body is kept nowhere (samples, cache). The in-process backends (hf, vllm)
# generate at most max_tokens tokens themselves and need no such bound.
ANSWER_BYTES_PER_TOKEN = 64
ANSWER_SLACK_BYTES = 2**20


class OpenAIModel(LM):
    """A model behind an OpenAI-compatible chat-completions endpoint.

    Args (besides those of `LM`):
        base_url: the API root ending in `/v1` (or lm-eval's `.../v1/chat/completions`); default
            `$OPENAI_BASE_URL`, else a local vLLM server (`http://localhost:8000/v1`). Part of the
            cache identity.
        api_key_env: name of the environment variable holding the API key, sent as a bearer
            token when set. The key itself is never stored in the identity or logged.
        max_concurrency: requests in flight at once to this `base_url`, shared by every model
            of this process that uses the same endpoint (judges on one server run concurrently).
        timeout: seconds allowed for connecting, and for each read or write.
        http_retries: extra attempts after HTTP 408/429/5xx, connection errors and timeouts.
        backoff: first retry delay in seconds, doubled on each attempt; a numeric `Retry-After`
            header replaces it. Either is capped at `max_backoff`.
        max_backoff: the longest wait between attempts, in seconds.
        deadline: seconds one request may take in all, attempts and waits included, however
            the server behaves (a server trickling bytes is cut off too); then it fails.
            An answer is also cut off, and fails, past `answer_limit(max_tokens)` bytes.
        failure_budget: after this many requests in a row failed in transport (each after its
            retries), the endpoint is given up: the remaining requests fail at once instead of
            each waiting out its retries against a dead server.
        extra_body: fields merged into every request body (over the standard ones), e.g.
            `{"chat_template_kwargs": {"enable_thinking": False}}`. Part of the cache identity.
        think, think_budget: a reasoning model's thinking (`_thinking`), as the server's chat
            template switch (`enable_thinking`) and its budget field (vLLM's
            `thinking_token_budget`, llama-server's `thinking_budget_tokens`). Unset: the
            model's own way. Whatever the setting, a thought the server returns apart
            (`reasoning_content`, `reasoning`: `vllm serve --reasoning-parser`, llama-server's
            `--reasoning-format`) is kept apart from the answer.
        reasoning_effort: the effort a reasoning model is asked for (OpenAI's field: gpt-oss
            behind `vllm serve` reads it into its harmony system message).
    """

    backend = "openai"
    remote = True
    devices = None  # the server's: its time is not this run's to count
    endpoint_path = "/chat/completions"  # under base_url; the completions backend has its own

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        cache: ResponseCache | None = None,
        batch_size: AtLeastOne = 32,
        max_retries: AtLeastZero = 2,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: AtLeastOne = 8,
        timeout: PositiveSeconds = 120.0,
        http_retries: AtLeastZero = 5,
        backoff: Seconds = 1.0,
        max_backoff: Seconds = 30.0,
        deadline: PositiveSeconds = 600.0,
        failure_budget: AtLeastOne = 3,
        extra_body: dict[str, Any] | None = None,
        think: ThinkSetting | bool | None = None,
        think_budget: AtLeastOne | None = None,
        reasoning_effort: Literal["low", "medium", "high"] | None = None,
    ) -> None:
        super().__init__(
            model, revision=revision, cache=cache, batch_size=batch_size, max_retries=max_retries
        )
        require_httpx()
        url, auth = self._resolve_base_url(base_url)
        # Model args come from the command line, where a value that is not a literal stays a str.
        if extra_body is not None and not isinstance(extra_body, dict):
            raise FinReflectError(f"extra_body must be a dict, got {extra_body!r}")
        self.extra_body = extra_body or {}
        # A server's template is not seen here: what is asked is what is recorded.
        self.thinking = resolve_thinking(
            think, think_budget, model=model, switch=True, always=False, can_think=True
        )
        if think is None and think_budget is None:
            self.thinking = Thinking("native", default=True)
        self.reasoning_effort = reasoning_effort
        one_way_to_think(self.extra_body, think, think_budget, reasoning_effort)
        self._set_limits(
            max_concurrency, http_retries, failure_budget, backoff, max_backoff, timeout, deadline
        )
        self._reachable = False
        # Which server answers (the `owned_by` of `GET /models`: llamacpp, vllm, ...), once
        # reached: servers read some fields under their own names.
        self.served_by: str | None = None
        self._state = threading.Lock()
        self._open_client(api_key_env, url, auth)

    def _resolve_base_url(self, base_url: str | None) -> tuple[httpx.URL, httpx.BasicAuth | None]:
        """Set `base_url` (the API root, without credentials) and `endpoint` (as shown); the
        URL as given, and the basic auth its credentials make, if it holds any."""
        import httpx

        root = api_root(base_url, self.endpoint_path)
        try:
            url = httpx.URL(root)
            url.copy_with()  # a malformed host or port is refused here
        except (httpx.InvalidURL, UnicodeError) as exc:
            raise FinReflectError(
                f"base_url '{redact_text(root)}' is not a URL: {redact_text(str(exc))}"
            ) from None
        # Credentials in the URL (`http://user:password@host/v1`) go as basic auth, and out of
        # the URL: no message, log line, record or cache key holds them.
        auth = httpx.BasicAuth(url.username, url.password) if url.userinfo else None
        self.base_url = str(url.copy_with(username=None, password=None)) if auth else root
        self.endpoint = redact_url(self.base_url)  # as shown: no key in its query either
        return url, auth

    def _set_limits(
        self,
        max_concurrency: int,
        http_retries: int,
        failure_budget: int,
        backoff: float,
        max_backoff: float,
        timeout: float,
        deadline: float,
    ) -> None:
        """Check and keep the limits on requests in flight, retries and time, and start the
        count of failures in a row that `failure_budget` bounds."""
        if max_concurrency < 1 or http_retries < 0 or failure_budget < 1:
            raise FinReflectError(
                "max_concurrency and failure_budget must be at least 1, http_retries at least 0"
            )
        if not all(0 <= value < float("inf") for value in (backoff, max_backoff)):
            raise FinReflectError(
                f"backoff and max_backoff must be seconds ≥ 0 ({backoff}, {max_backoff})"
            )
        if not all(0 < value < float("inf") for value in (timeout, deadline)):
            raise FinReflectError(
                f"timeout and deadline must be positive seconds ({timeout}, {deadline})"
            )
        self.max_concurrency = max_concurrency
        self._slots = endpoint_slots(self.endpoint, max_concurrency)
        self.http_retries = http_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.deadline = deadline
        self.failure_budget = failure_budget
        self._failures_in_row = 0
        self._last_failure = ""

    def _open_client(self, api_key_env: str, url: httpx.URL, auth: httpx.BasicAuth | None) -> None:
        """The HTTP client: the key in `$api_key_env` as a bearer token (unless the URL's
        credentials go as basic auth), one connection per request in flight."""
        import httpx

        api_key = os.environ.get(api_key_env)
        if api_key is not None and not api_key.isascii():
            raise FinReflectError(f"${api_key_env} holds characters an HTTP header cannot carry")
        if api_key and auth:
            logger.warning(
                "base_url holds credentials: they are sent (basic auth), not $%s", api_key_env
            )
        # What a server might echo back (an error body quoting the request): never kept.
        self._secrets = [s for s in (api_key, url.password, url.username) if s and len(s) >= 8]
        slots = self.max_concurrency
        self._client = httpx.Client(
            auth=auth,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            timeout=self.timeout,
            limits=httpx.Limits(max_connections=slots, max_keepalive_connections=slots),
        )

    def identity(self) -> dict[str, Any]:
        # Without secrets (a key in the URL's query or in extra_body): the cache key too.
        return {
            **super().identity(),
            "base_url": self.endpoint,
            "extra_body": redact(self.extra_body),
            **self.thinking.identity(),
            **({"reasoning_effort": self.reasoning_effort} if self.reasoning_effort else {}),
        }

    def resolved(self) -> dict[str, Any]:
        return {
            **super().resolved(),
            **self.thinking.record(),
            "reasoning_effort": self.reasoning_effort,
        }

    def close(self) -> None:
        self._client.close()

    def _complete(self, requests: list[GenerationRequest]) -> list[Completion]:
        # (`LM.generate` uses `_complete_as_done`; this is the same, in request order.)
        completions: list[Completion | None] = [None] * len(requests)
        for arrived in self._complete_as_done(requests):
            for index, completion in arrived:
                completions[index] = completion
        return completions  # type: ignore[return-value]

    def _complete_as_done(
        self, requests: list[GenerationRequest]
    ) -> Iterator[list[tuple[int, Completion]]]:
        """Each answer as it arrives (`LM.generate` caches it at once: a run killed now keeps
        every answer it received)."""
        self._refuse_unsupported(requests)
        self._check_reachable()
        pool = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(requests)))
        try:
            futures = {pool.submit(self._send, request): i for i, request in enumerate(requests)}
            waiting = set(futures)
            while waiting:  # every answer that has come in since the last group, as one group
                done, waiting = wait(waiting, return_when=FIRST_COMPLETED)
                yield [(futures[future], future.result()) for future in done]
        finally:
            # On Ctrl-C, start none of the queued requests; those in flight end within `timeout`.
            pool.shutdown(cancel_futures=True)

    def request_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body for one request: top_p and top_k only where set (llama-server, vLLM
        and SGLang take top_k; api.openai.com does not, see `_refuse_unsupported`)."""
        body: dict[str, Any] = {
            "model": self.model,
            **self._input(request),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
            **request.sampling_options(),
        }
        if request.schema is not None:
            body.update(self._constraint(request.schema))
        body.update(self._thinking_fields())
        extra = dict(self.extra_body)
        given = extra.get("chat_template_kwargs")
        if "chat_template_kwargs" in body and isinstance(given, dict):
            extra["chat_template_kwargs"] = {**body["chat_template_kwargs"], **given}
        return {**body, **extra}

    def _thinking_fields(self) -> dict[str, Any]:
        """The body's thinking fields: the server's chat-template switch, and the budget under
        the name the server reads it by."""
        fields: dict[str, Any] = {}
        if self.reasoning_effort:
            fields["reasoning_effort"] = self.reasoning_effort
        switch = self.thinking.template_switch()
        if switch:
            fields["chat_template_kwargs"] = switch
        if self.thinking.budget:
            fields[BUDGET_FIELDS.get(self.served_by, "thinking_token_budget")] = (
                self.thinking.budget
            )
        return fields

    def _input(self, request: GenerationRequest) -> dict[str, Any]:
        """The body's prompt fields: chat messages (a bare prompt is one user turn)."""
        return {"messages": list(request.messages) or [{"role": "user", "content": request.prompt}]}

    def _constraint(self, schema: JsonSchema) -> dict[str, Any]:
        """The body's structured-output field: `response_format` json_schema, which OpenAI,
        vLLM, SGLang and llama-server all read on chat. Strict mode (OpenAI) rejects schemas
        with open objects, and a constrained decoder must not invent extra keys; the output is
        still validated against the original."""
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": closed_schema(schema), "strict": True},
            }
        }

    @staticmethod
    def _answer_text(choice: dict[str, Any]) -> Any:
        """The generated text in one choice of an answer."""
        return choice["message"]["content"]

    def _refuse_unsupported(self, requests: list[GenerationRequest]) -> None:
        """OpenAI's API answers 400 to every request with top_k: one line before any call."""
        import httpx

        if httpx.URL(self.base_url).host == "api.openai.com" and any(
            request.top_k is not None for request in requests
        ):
            raise FinReflectError(
                "top_k is not a parameter of OpenAI's API (api.openai.com): leave it out of "
                "--gen-kwargs (top_p is one)"
            )

    def _check_reachable(self) -> None:
        """Once, before the first request: a one-line error when nothing answers at `base_url`
        (a closed port, a wrong host, a server that hangs), instead of every request waiting
        out its retries. Any HTTP answer to `GET /models` counts as reachable."""
        import httpx

        with self._state:
            if self._reachable:
                return
            try:
                response = self._client.get(
                    f"{self.base_url}/models", timeout=min(self.timeout, PROBE_TIMEOUT)
                )
            except httpx.HTTPError as exc:
                raise FinReflectError(
                    f"cannot reach the endpoint {self.endpoint}: {one_line(_describe(exc))}"
                ) from None
            self.served_by = owner(response)
            self._reachable = True

    def _send(self, request: GenerationRequest) -> Completion:
        """One request, retried on transient failures within `deadline`; an error completion
        when it can't succeed. Counts against the endpoint's failure budget."""
        with self._state:
            given_up = self._failures_in_row >= self.failure_budget
        if given_up:
            return Completion(
                text=None,
                error=f"endpoint given up after {self.failure_budget} failed requests in a row "
                f"(last: {self._last_failure})",
            )
        completion = self._scrubbed(self._attempts(self.request_body(request), request.max_tokens))
        with self._state:
            if completion.error is None:
                self._failures_in_row = 0
            else:
                self._failures_in_row += 1
                self._last_failure = completion.error
        return completion

    def _scrubbed(self, completion: Completion) -> Completion:
        """The completion without any of this model's secrets in its text, thought or error."""
        fields = {
            "text": completion.text,
            "thinking": completion.thinking,
            "error": completion.error,
        }
        for secret in self._secrets:
            fields = {
                key: value and value.replace(secret, REDACTED) for key, value in fields.items()
            }
        return replace(completion, **fields)

    def _attempts(self, body: dict[str, Any], max_tokens: int) -> Completion:
        import httpx

        limit = answer_limit(max_tokens)
        url = f"{self.base_url}{self.endpoint_path}"
        deadline = None  # starts once the request has a slot: queueing behind others is free
        for attempt in range(self.http_retries + 1):
            retry_after = None
            try:
                with self._slots:
                    deadline = deadline or time.monotonic() + self.deadline
                    response = self._post(url, body, deadline, limit)
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                problem = one_line(_describe(exc))
            except _DeadlinePassed:
                return Completion(
                    text=None, error=f"no answer within the {self.deadline:g} s deadline"
                )
            except _AnswerTooLarge:  # not retried: the server would send it again
                return Completion(
                    text=None,
                    error=f"answer larger than the limit of {limit:,} bytes "
                    f"(max_tokens {max_tokens}); not kept",
                )
            except httpx.HTTPError as exc:  # e.g. an unsupported URL: retrying cannot help
                return Completion(text=None, error=one_line(_describe(exc)))
            else:
                if response.is_success:
                    return parse_answer(response, self._answer_text, self.thinking.budget)
                problem = one_line(f"HTTP {response.status_code}: {response.text}")
                # Retry what the OpenAI SDK retries; other 4xx (bad request, auth) will not change.
                if response.status_code not in (408, 429) and response.status_code < 500:
                    return Completion(text=None, error=problem)
                retry_after = _retry_after(response)
            if attempt < self.http_retries:
                delay = min(
                    retry_after if retry_after is not None else self.backoff * 2**attempt,
                    self.max_backoff,
                )
                if time.monotonic() + delay >= deadline:
                    return Completion(
                        text=None, error=f"{problem} (deadline of {self.deadline:g} s reached)"
                    )
                logger.warning(
                    "%s; retry %d/%d in %.1fs", problem, attempt + 1, self.http_retries, delay
                )
                time.sleep(delay)
        return Completion(text=None, error=f"{problem} (after {self.http_retries + 1} attempts)")

    def _post(self, url: str, body: dict[str, Any], deadline: float, limit: int) -> httpx.Response:
        """POST and read the answer as a stream, so that the deadline holds even against a
        server that sends a byte now and then (each read would stay within `timeout`), and an
        answer over `limit` bytes (decoded) is dropped as soon as it passes the limit."""
        import httpx

        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _DeadlinePassed
        with self._client.stream(
            "POST", url, json=body, timeout=min(self.timeout, remaining)
        ) as response:
            content = bytearray()
            for chunk in response.iter_bytes():
                content += chunk
                if len(content) > limit:
                    raise _AnswerTooLarge
                if time.monotonic() > deadline:
                    raise _DeadlinePassed
        # The body is decoded already: the new response must not decode it again.
        headers = [
            (key, value)
            for key, value in response.headers.items()
            if key.lower() not in ("content-encoding", "content-length")
        ]
        return httpx.Response(response.status_code, headers=headers, content=bytes(content))


class _DeadlinePassed(Exception):
    """A request's total deadline passed."""


class _AnswerTooLarge(Exception):
    """An answer passed its size limit."""


def answer_limit(max_tokens: int) -> int:
    """The most bytes an answer to a request for `max_tokens` tokens may take."""
    return max_tokens * ANSWER_BYTES_PER_TOKEN + ANSWER_SLACK_BYTES


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _retry_after(response: httpx.Response) -> float | None:
    """A numeric `Retry-After` in seconds; None when absent or an HTTP date."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None  # also rejects NaN
