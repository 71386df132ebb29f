"""One hash for texts everywhere (span texts, templates, instructions, lm-eval's sample hashes):
the sha256 of the text's UTF-8, in hex, which is also lm-eval's `hash_string`."""

import hashlib


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
