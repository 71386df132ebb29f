"""GGUF checkpoints for the hf backend: converted once to a safetensors folder, so that later
loads skip transformers' slow dequantisation."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError

logger = logging.getLogger(__name__)


def convert_gguf(source: str | Path, gguf_file: str, target: Path, revision: str | None) -> None:
    """Convert `gguf_file` of `source` (a folder or Hub repo at `revision`) to a float32
    safetensors folder `target`, with its tokenizer."""
    import transformers

    logger.info("converting %s to safetensors in %s (once)", gguf_file, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed: a concurrent or killed conversion leaves no
    # half-written folder behind.
    scratch = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        kwargs = {"gguf_file": gguf_file, "revision": revision}
        with _gguf_parsed_once():
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(source), dtype="float32", **kwargs
            )
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(source), **kwargs)
        # The weights are dequantised to float32 by now; transformers still keeps the GGUF
        # quantizer attached, which refuses to save. Drop it unless packed layers remain.
        if any(type(module).__name__.startswith("Gguf") for module in model.modules()):
            raise FinReflectError(f"{gguf_file}: packed GGUF layers cannot be converted")
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        del model
        with contextlib.suppress(OSError):  # another process finished first
            os.replace(scratch, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """transformers parses a GGUF file three times to load it (config, weights, tokenizer), and
    parsing a 262k-token vocabulary in gguf's Python reader takes seconds each (~14 s on 2 CPU
    cores for the embedded model): parse each file once while this lasts."""
    import gguf

    reader_class, readers = gguf.GGUFReader, {}

    def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = (str(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader_class(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader = reader  # transformers imports it from gguf on every load
    try:
        yield
    finally:
        gguf.GGUFReader = reader_class
