"""Where an OpenAI-compatible server is, and whether it answers: the default API root, and
`GET /models` (cheap, changes nothing) to ask before any work depends on it."""

from __future__ import annotations

import os
from dataclasses import dataclass

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval._util.redaction import redact_url
from finreflect_eval._util.resources import install_hint

DEFAULT_BASE_URL = "http://localhost:8000/v1"


@dataclass(frozen=True)
class EndpointProbe:
    """What a server's `GET /models` said: its API root as shown (no credentials), and the
    HTTP status, or why no answer came (`error`)."""

    shown: str
    status: int | None = None
    error: str | None = None


def probe(base_url: str | None, endpoint_path: str, timeout: float) -> EndpointProbe:
    """Ask the server at `base_url` (else $OPENAI_BASE_URL, else the default; lm-eval's full
    URL, ending in `endpoint_path`, is taken too) `GET /models`: cheap, changes nothing, and
    any HTTP answer shows the server is there."""
    require_httpx()
    import httpx

    root = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    root = str(root).rstrip("/").removesuffix(endpoint_path)
    shown = redact_url(root)
    try:
        answer = httpx.get(f"{root}/models", timeout=timeout)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return EndpointProbe(shown, error=f"no answer at {shown}/models ({first_line(exc)})")
    return EndpointProbe(shown, status=answer.status_code)


def require_httpx() -> None:
    """A one-line error naming the extra to install where httpx is missing."""
    try:
        import httpx  # noqa: F401
    except ImportError:
        raise FinReflectError(f"the openai backend needs httpx: {install_hint('api')}") from None
