import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_10K = REPO.parent / "shared" / "data" / "10k_text"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the installed command line in a child process, offline (as a user would)."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "finreflect_eval", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def filings() -> list[Path]:
    files = sorted(SHARED_10K.glob("*_10-K-*.txt"))
    if not files:
        pytest.skip(f"real 10-K text not found in {SHARED_10K}")
    return files


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A random-weight Llama with a byte-level BPE tokenizer trained here on schema words: every
    code path of the hf backend, in seconds, offline."""
    pytest.importorskip("transformers", reason="needs the [hf] extra")
    import json

    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from finreflect_eval.schema import load_schema

    schema = load_schema()
    corpus = [
        json.dumps({"subject": "AAPL", "subject_type": t, "relation": r, "object_type": t})
        for t in schema.entity_types
        for r in schema.relations
    ]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=400, special_tokens=["<pad>", "</s>"])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, eos_token="</s>", pad_token="<pad>"
    )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=16384,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
