"""Where an OpenAI-compatible server is, and whether it answers: the default API root,
`GET /models` (cheap, changes nothing) to ask before any work depends on it, and the bound on
the requests in flight to it that every model of this process shares."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval._util.redaction import redact_text
from finreflect_eval._util.resources import install_hint

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "http://localhost:8000/v1"


@dataclass(frozen=True)
class EndpointProbe:
    """What a server's `GET /models` said: its API root as shown (no credentials), and the
    HTTP status, or why no answer came (`error`)."""

    shown: str
    status: int | None = None
    error: str | None = None


def api_root(base_url: str | None, endpoint_path: str) -> str:
    """The API root a model's server is asked at: `base_url`, else $OPENAI_BASE_URL, else the
    default; lm-eval's full URL (ending in `endpoint_path`) is taken too. One that is not an
    http(s) URL is a one-line error."""
    root = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    root = str(root).rstrip("/").removesuffix(endpoint_path)
    if not root.startswith(("http://", "https://")):
        raise FinReflectError(f"base_url '{redact_text(root)}' must start with http:// or https://")
    return root


def probe(base_url: str | None, endpoint_path: str, timeout: float) -> EndpointProbe:
    """Ask the server at `base_url` (see `api_root`) `GET /models`: cheap, changes nothing.
    Only a connection that cannot be made is no answer: a server that is there but slow to
    list its models (a busy vLLM) is there."""
    require_httpx()
    import httpx

    root = api_root(base_url, endpoint_path)
    shown = redact_text(root)
    try:
        answer = httpx.get(f"{root}/models", timeout=timeout)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
        return EndpointProbe(shown, error=f"no answer at {shown}/models ({first_line(exc)})")
    except (httpx.InvalidURL, UnicodeError) as exc:
        return EndpointProbe(shown, error=f"base_url '{shown}' is not a URL ({first_line(exc)})")
    except httpx.HTTPError:  # connected; the listing did not come in time
        return EndpointProbe(shown)
    return EndpointProbe(shown, status=answer.status_code)


def require_httpx() -> None:
    """A one-line error naming the extra to install where httpx is missing."""
    try:
        import httpx  # noqa: F401
    except ImportError:
        raise FinReflectError(f"the openai backend needs httpx: {install_hint('api')}") from None


_SLOTS: dict[str, tuple[int, threading.Semaphore]] = {}  # base_url -> (size, slots)
_SLOTS_LOCK = threading.Lock()


def endpoint_slots(base_url: str, size: int) -> threading.Semaphore:
    """One bound on the requests in flight per endpoint, whichever models of this process use
    it; the first model to use an endpoint sets its size."""
    with _SLOTS_LOCK:
        first_size, slots = _SLOTS.setdefault(base_url, (size, threading.Semaphore(size)))
    if first_size != size:
        logger.warning(
            "%s already allows %d requests at once; max_concurrency=%d is ignored",
            base_url,
            first_size,
            size,
        )
    return slots
