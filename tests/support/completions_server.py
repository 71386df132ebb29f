"""Scripted OpenAI-compatible `/v1/completions` servers for tests: `completion_answer` is an
answer as vLLM serve sends it, and `LlamaCppServer` answers `GET /v1/models` as llama.cpp's
llama-server does (`owned_by: llamacpp`), which is how the backend tells where the JSON schema
goes on that endpoint."""

from __future__ import annotations

import json

from support.chat_server import ScriptedServer, _Handler


def completion_answer(text: str | None, prompt_tokens: int = 5, completion_tokens: int = 2) -> dict:
    """A completions response body (vLLM's required fields; the tests check it against vLLM's
    own CompletionResponse)."""
    return {
        "id": "cmpl-scripted",
        "object": "text_completion",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# The fields of llama-server's `GET /v1/models` answer that matter here (measured on the
# llama-server the tests build: `owned_by` is llama.cpp's constant "llamacpp").
LLAMA_CPP_MODELS = {
    "models": [{"name": "model.gguf", "model": "model.gguf"}],
    "object": "list",
    "data": [{"id": "model.gguf", "object": "model", "owned_by": "llamacpp"}],
}


class _LlamaCppHandler(_Handler):
    def do_GET(self) -> None:
        data = json.dumps(LLAMA_CPP_MODELS).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LlamaCppServer(ScriptedServer):
    """A `ScriptedServer` that introduces itself as llama.cpp's llama-server."""

    def __init__(self) -> None:
        super().__init__()
        self.RequestHandlerClass = _LlamaCppHandler  # read per request by socketserver
