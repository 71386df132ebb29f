"""GGUF checkpoints for the hf backend: converted once to a safetensors folder, so that later
loads skip transformers' slow dequantisation."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import cache_root
from finreflect_eval.models.embedded import EMBEDDED_MODELS

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


def checkpoint_source(model: str, gguf_file: str | None, revision: str | None) -> tuple[str, str]:
    """The folder or Hub id the hf backend loads for `model` (an embedded alias, a `.gguf` file,
    a folder or Hub id with an optional `gguf_file` in it), and the checkpoint's id for the
    model's identity. GGUF checkpoints are converted once and cached."""
    embedded = EMBEDDED_MODELS.get(model)
    if embedded is not None:
        checksum = embedded.sha256()
        converted = cache_root() / "converted" / f"{model}-{(checksum or 'unknown')[:16]}"
        if not (converted / "config.json").exists():
            gguf_path = embedded.gguf_path()
            convert_gguf(gguf_path.parent, gguf_path.name, converted, revision)
        return str(converted), converted.name
    path = Path(model).expanduser()
    if model.startswith(("/", "./", "../", "~")) and not path.exists():  # a path, not an id
        raise FinReflectError(f"cannot load model '{model}': no such file or folder")
    if path.suffix == ".gguf" and path.is_file():
        model, gguf_file = str(path.parent), path.name
    checkpoint_id = str(Path(model).resolve()) if Path(model).exists() else model
    if gguf_file is None:
        return checkpoint_id, checkpoint_id
    stat = (Path(model) / gguf_file).stat() if Path(model).exists() else None
    facts = [checkpoint_id, gguf_file, revision, stat and stat.st_size, stat and stat.st_mtime_ns]
    key = hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]
    converted = cache_root() / "converted" / f"{Path(gguf_file).stem}-{key}"
    if not (converted / "config.json").exists():
        convert_gguf(model, gguf_file, converted, revision)
    return str(converted), f"{checkpoint_id}/{gguf_file}"
