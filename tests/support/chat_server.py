"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for tests: it answers each
request from a script (status, body, delay) and records the requests it got."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def answer(content: str | None, prompt_tokens: int = 5, completion_tokens: int = 2) -> dict:
    """A chat-completions response body, as vLLM serve returns it (its required fields; the
    tests check it against vLLM's own ChatCompletionResponse)."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@dataclass
class Reply:
    """One scripted reply; `body` is JSON (dict), raw text (str), raw bytes or a function of the
    request."""

    status: int = 200
    body: dict | str | bytes | Callable[[dict], dict] = field(
        default_factory=lambda: answer('{"a": 1}')
    )
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    trickle: float = 0.0  # seconds between bytes of the body: a server that never quite stalls


class ScriptedServer(ThreadingHTTPServer):
    """Answers each POST with the next reply of `script` (the last one repeats) and records the
    requests and the most requests it held at once."""

    daemon_threads = True  # a handler still sleeping on a hang must not block teardown

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self.script: list[Reply] = [Reply()]
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.peak = 0
        self.lock = threading.Lock()

    def start(self, path: str, headers: dict[str, str], body: dict) -> Reply:
        with self.lock:
            reply = self.script[min(len(self.requests), len(self.script) - 1)]
            self.requests.append({"path": path, "headers": headers, "body": body})
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        return reply

    def end(self) -> None:
        with self.lock:
            self.in_flight -= 1

    @classmethod
    def running(cls, script: list[Reply] | None = None) -> contextlib.AbstractContextManager:
        """A started server, shut down on exit."""
        server = cls()
        if script is not None:
            server.script = script
        return serving(server)


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def do_GET(self) -> None:  # `GET /v1/models`: the client's first check that we are there
        data = json.dumps({"object": "list", "data": [{"id": "test-model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        headers = {key.lower(): value for key, value in self.headers.items()}
        reply = self.server.start(self.path, headers, body)
        try:
            time.sleep(reply.delay)
        finally:
            self.server.end()
        payload = reply.body(body) if callable(reply.body) else reply.body
        if not isinstance(payload, bytes):
            payload = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        data = payload
        # The client may have timed out and left.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not reply.trickle:
                self.wfile.write(data)
            for byte in data if reply.trickle else b"":
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(reply.trickle)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A `/v1` URL on 127.0.0.1 where connections are accepted and never answered."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


def closed_port() -> str:
    """A `/v1` URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


@contextlib.contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator:
    # A short poll interval keeps shutdown (and so every test) fast.
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def judge_answer(body: dict[str, Any], verdict: int = 1, level: str = "good") -> dict[str, Any]:
    """A valid judge answer for the request's response schema: every triple gets `verdict`,
    the span `level`."""
    schema = body["response_format"]["json_schema"]["schema"]
    reply = {"reasoning": "scripted", "warning": ""}
    if "verdicts" in schema["properties"]:
        count = schema["properties"]["verdicts"]["minItems"]
        content = {"verdicts": [{"verdict": verdict, **reply}] * count}
    else:
        content = {"verdict": level, **reply}
    return answer(json.dumps(content))


class RecordingProxy(ThreadingHTTPServer):
    """Forwards every POST to a real server (`upstream`, a `/v1` URL) and keeps each request
    body with the status it got, the answer and its `usage`: what the real server received and
    counted, for the test to log and check."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = upstream.rstrip("/")
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self.exchanges: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @classmethod
    def running(cls, upstream: str) -> contextlib.AbstractContextManager:
        return serving(cls(upstream))


class _Forward(BaseHTTPRequestHandler):
    server: RecordingProxy

    def do_GET(self) -> None:
        status, reply = self._forward(None)
        self._reply(status, reply)

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers["Content-Length"]))
        status, reply = self._forward(data)
        try:
            answer = json.loads(reply)
            usage = answer.get("usage")
        except (ValueError, AttributeError):
            answer = usage = None
        with self.server.lock:
            self.server.exchanges.append(
                {
                    "path": self.path,
                    "body": json.loads(data),
                    "status": status,
                    "usage": usage,
                    "response": answer,
                }
            )
        self._reply(status, reply)

    def _forward(self, data: bytes | None) -> tuple[int, bytes]:
        path = self.path.removeprefix("/v1")
        forward = urllib.request.Request(
            self.server.upstream + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(forward, timeout=600) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def _reply(self, status: int, reply: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass
