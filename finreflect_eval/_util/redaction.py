"""Secrets are never written or shown: the credentials of a URL (`user:password@`, or a key in
its query), and the values of arguments named like secrets (`api_key`, `hf_token`, `password`),
are replaced by `***` wherever an argument or a URL is recorded (manifest, results, submissions)
or shown (error lines, logs). A run's identity is built from the redacted values, so it never
depends on a secret. `find_secret` is what `submit` refuses a bundle for.
"""

from __future__ import annotations

import logging
import re
from typing import Any

REDACTED = "***"
# A URL in free text (an error line, a log record): up to the next space or quote.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# `name=value` in free text where the name is a key's (`api_key=sk-...` in a `k=v,...` list).
_KEY_VALUE = re.compile(
    r"(?P<name>(?:^|[,;\s'\"])(?:api[_-]?key|token|hf[_-]?token|access[_-]?token|secret"
    r"|client[_-]?secret|password)=)(?P<value>[^,;\s\"']+)",
    re.IGNORECASE,
)
# Arguments that hold a secret, by name (not by pattern: `pad_token` or `max_tokens` are no
# secrets, and hiding them would merge two runs that differ in them).
SECRET_NAMES = frozenset(
    {
        *("api_key", "apikey", "x_api_key", "key", "subscription_key"),
        *("token", "hf_token", "access_token", "auth_token", "use_auth_token", "bearer_token"),
        *("auth", "authorization", "bearer", "credentials"),
        *("password", "passwd", "pwd", "secret", "client_secret"),
        *("access_key", "secret_key", "private_key"),
    }
)
_SECRET_SUFFIXES = tuple(
    f"_{name}"
    for name in (
        "api_key",
        "password",
        "secret",
        "secret_key",
        "access_key",
        "private_key",
        "access_token",
        "auth_token",
    )
)
# In a URL's query, any parameter named like these holds a key (`?key=`, `?X-Amz-Signature=`).
_QUERY_SECRET_PARTS = ("key", "token", "secret", "sig", "auth", "pass", "credential")


def is_secret(name: Any, value: Any) -> bool:
    """An argument `name=value` that holds a secret (`use_auth_token=True` holds none)."""
    if not isinstance(name, str) or not isinstance(value, str) or value in ("", REDACTED):
        return False
    name = name.lower().replace("-", "_")
    return name in SECRET_NAMES or name.endswith(_SECRET_SUFFIXES)


def redact_url(url: str) -> str:
    """`url` without its credentials: the userinfo (everything before the last `@` of the
    authority, as HTTP clients read it) and the values of key-like query parameters."""
    scheme, rest = url.split("://", 1)
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        authority = f"{REDACTED}@{authority.rsplit('@', 1)[1]}"
    path, question, query = tail.partition("?")
    if question:
        query, hash_, fragment = query.partition("#")
        parameters = []
        for parameter in query.split("&"):
            name, equals, _ = parameter.partition("=")
            secret = equals and any(part in name.lower() for part in _QUERY_SECRET_PARTS)
            parameters.append(f"{name}={REDACTED}" if secret else parameter)
        tail = f"{path}?{'&'.join(parameters)}{hash_}{fragment}"
    return f"{scheme}://{authority}{tail}"


def redact_text(text: str) -> str:
    """`text` with every URL in it without credentials (`redact_url`), and every
    `api_key=...`-like value replaced by `***`."""
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group()), text)
    if "=" in text:
        text = _KEY_VALUE.sub(lambda m: f"{m['name']}{REDACTED}", text)
    return text


def redact(value: Any) -> Any:
    """A copy of parsed JSON-like `value` without secrets: a string that is a URL loses its
    credentials (spaces and all), other strings as `redact_text`, and the value of a key named
    like a secret becomes `***`."""
    if isinstance(value, str):
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", value):
            return redact_url(value)
        return redact_text(value)
    if isinstance(value, dict):
        return {
            key: REDACTED if is_secret(key, item) else redact(item) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact(item) for item in value)
    return value


def find_secret(value: Any, where: str = "") -> str | None:
    """Where in `value` a secret is (`path.to.field`), or None."""
    if isinstance(value, str):
        return (where or "(value)") if redact(value) != value else None
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if is_secret(key, item):
                return path
            found = find_secret(item, path)
            if found:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = find_secret(item, f"{where}[{index}]")
            if found:
                return found
    return None


class RedactingFilter(logging.Filter):
    """Takes the credentials out of every log record (httpx logs the URLs it requests)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
