"""Secrets out of everything recorded or shown: URL credentials (an `@` or a space in the
password included), keys in a URL's query, arguments named like secrets (and only those)."""

import logging

import pytest

from finreflect_eval._util.redaction import (
    REDACTED,
    RedactingFilter,
    find_secret,
    redact,
    redact_text,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:PASSWORD@host:8000/v1", "http://***@host:8000/v1"),
        ("http://user:p@ssPASSWORD@host/v1", "http://***@host/v1"),  # as httpx reads it
        ("http://user:pa ssPASSWORD@host/v1", "http://***@host/v1"),
        ("https://hf_TOKEN@host/v1", "https://***@host/v1"),
        ("https://host/v1?api-version=2024&key=KEY", "https://host/v1?api-version=2024&key=***"),
        ("https://host/v1?X-Amz-Signature=SIG#top", "https://host/v1?X-Amz-Signature=***#top"),
        (
            "https://host/v1?hf_token=T&client_secret=S",
            "https://host/v1?hf_token=***&client_secret=***",
        ),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ],
)
def test_a_url_loses_its_credentials_and_nothing_else(url, shown):
    assert redact(url) == shown
    assert find_secret({"base_url": url}) == (None if url == shown else "base_url")
    assert find_secret({"base_url": shown}) is None  # redacted once is redacted


def test_arguments_named_like_secrets_and_only_those():
    args = {
        "api_key": "sk-KEY",
        "hf_token": "hf_TOKEN",
        "extra_body": {"auth": "A", "private_key": "P", "headers": {"Authorization": "Bearer B"}},
        "use_auth_token": True,  # a switch, no secret
        "api_key_env": "OPENAI_API_KEY",  # the name of a variable
        "pad_token": "<pad>",  # a token of the vocabulary: two runs differing here differ
        "max_tokens": 64,
    }
    assert redact(args) == {
        "api_key": REDACTED,
        "hf_token": REDACTED,
        "extra_body": {
            "auth": REDACTED,
            "private_key": REDACTED,
            "headers": {"Authorization": REDACTED},
        },
        "use_auth_token": True,
        "api_key_env": "OPENAI_API_KEY",
        "pad_token": "<pad>",
        "max_tokens": 64,
    }
    assert find_secret({"model": {"args": args}}) == "model.args.api_key"
    assert find_secret(redact(args)) is None


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "cannot reach http://u:p@ss@127.0.0.1:1/v1: refused",
            "cannot reach http://***@127.0.0.1:1/v1: refused",
        ),
        ("['api_key=sk-KEY', 1]", "['api_key=***', 1]"),
        ("api_key=sk-KEY,token=hf_T", "api_key=***,token=***"),
        ("--gen_kwargs item 'temperature' is not key=value", None),
        ("max_tokens=5,pad_token=<pad>", None),
    ],
)
def test_free_text_loses_urls_credentials_and_key_values(text, shown):
    assert redact_text(text) == (shown or text)


def test_log_records_are_redacted(caplog):
    logger = logging.getLogger("test.redaction")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="test.redaction"):
        logger.info("HTTP Request: POST %s", "http://user:PASSWORD@host/v1/chat/completions")
    assert "PASSWORD" not in caplog.text and "http://***@host/v1" in caplog.text
