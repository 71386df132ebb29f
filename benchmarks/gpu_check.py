"""Does the hf backend earn its GPU hours? One script, no weights to download: it builds a
random-weight model from a config and tokenizer (default: the embedded Gemma 3 270M's; any
`config.json` + tokenizer folder, e.g. a 1-8B Llama or Qwen config you write out), then measures
on the device, per decoding step, at each batch size:

  (a) bare transformers `model.generate` (greedy, the same prompt tokens, no grammar),
  (b) our hf backend, unconstrained, (c) constrained to a JSON schema,
  (d) (b) without prompt-prefix reuse, and the prefill (one new token) with and without it;

plus the fixed costs of a run (loading, the grammar's set-up, the batch-size search) and the
peak GPU memory. Every call decodes exactly --tokens new tokens (EOS is held off and the schema
cannot close sooner); the cost per step is the marginal one, (t(N) - t(1)) / (N - 1), so prefill
cancels out; the median of --repeats is reported. Ratios within one run are what to compare.

    python benchmarks/gpu_check.py                          # on the GPU: batch 1, 8, 32, auto
    python benchmarks/gpu_check.py --device cpu             # small sizes (what CI runs)
    python benchmarks/gpu_check.py --config DIR --batches 8,32 --tokens 128
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from finreflect_eval._util import progress
from finreflect_eval._util.tables import markdown_table
from finreflect_eval.data import load_benchmark
from finreflect_eval.models import GenerationRequest, ModelSpec, load_model
from finreflect_eval.protocol.schema import load_schema

CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "special_tokens_map.json")


def embedded_config() -> Path:
    """The embedded model's converted folder (its config and tokenizer; converted once)."""
    from finreflect_eval._util.resources import cache_root

    with load_model(ModelSpec("gemma-3-270m", "hf", {"prefix_cache_tokens": 0})) as lm:
        return cache_root() / "converted" / lm.checkpoint_id


def build_random_model(config: Path, folder: Path, dtype: str) -> Path:
    """A random-weight model of `config`'s architecture, with its tokenizer, in `folder`."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    for name in CONFIG_FILES + TOKENIZER_FILES:
        if (config / name).is_file():
            shutil.copy(config / name, folder / name)
    if (config / "tokenizer.json.xz").is_file():  # how a large tokenizer travels in 64 MiB
        (folder / "tokenizer.json").write_bytes(
            lzma.decompress((config / "tokenizer.json.xz").read_bytes())
        )
    torch.manual_seed(0)
    architecture = transformers.AutoConfig.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_config(architecture, dtype=getattr(torch, dtype))
    model.save_pretrained(folder)
    return folder


def requests(count: int, tokens: int, schema: dict | None) -> list[GenerationRequest]:
    """Distinct prompts that share their instructions (as a stage's do), `tokens` new each."""
    spans = load_benchmark("sample").spans
    return [
        GenerationRequest(
            prompt="Extract knowledge graph triples from this 10-K text as JSON.\n\n"
            f"{spans[number % len(spans)].text[:600]}\n",
            schema=schema,
            max_tokens=tokens,
        )
        for number in range(count)
    ]


def timed(lm, batch: list[GenerationRequest], bare: bool) -> float:
    """Seconds for one batch through the backend, or through bare `generate` on the same
    prompt tokens."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else lambda: None
    tokens = batch[0].max_tokens
    lm.hf_model.generation_config.min_new_tokens = tokens  # every call runs `tokens` steps
    sync()
    started = time.perf_counter()
    if bare:
        format_input = lm.outlines_model.type_adapter.format_input
        prompts = [format_input(lm.model_input(request)) for request in batch]
        ids, mask = lm.outlines_model.tokenizer.encode(prompts)
        with torch.inference_mode():
            lm.hf_model.generate(
                input_ids=ids.to(lm.hf_model.device),
                attention_mask=mask.to(lm.hf_model.device),
                max_new_tokens=tokens,
                do_sample=False,
                pad_token_id=lm.tokenizer.pad_token_id,
            )
    else:
        results = lm.generate(batch)
        assert all(result.text is not None for result in results)
    sync()
    return time.perf_counter() - started


def per_step(lm, size: int, tokens: int, schema: dict | None, repeats: int, **how) -> tuple:
    """Median ms per decoding step (marginal) and median ms of a one-token call (the prefill).
    A first call primes the prompt-prefix cache, so that both timed calls find it alike."""
    steps, prefills = [], []
    timed(lm, requests(size, 1, schema), **how)
    for _ in range(repeats):
        first = timed(lm, requests(size, 1, schema), **how)
        whole = timed(lm, requests(size, tokens, schema), **how)
        steps.append(1000 * (whole - first) / (tokens - 1))
        prefills.append(1000 * first)
    return statistics.median(steps), statistics.median(prefills)


def main() -> None:
    with progress.progress_bars(False):  # the table is the output
        check()


def check() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="config + tokenizer folder (default: embedded)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    parser.add_argument("--batches", default=None, help="default: 1,8,32,auto (cpu: 1,2)")
    parser.add_argument("--tokens", type=int, default=None, help="default: 64 (cpu: 16)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_gpu = device.startswith("cuda")
    batches = (args.batches or ("1,8,32,auto" if on_gpu else "1,2")).split(",")
    tokens = args.tokens or (64 if on_gpu else 16)
    dtype = "bfloat16" if on_gpu and torch.cuda.is_bf16_supported() else "float32"
    schema = load_schema().triple_list_model(64, min_triples=32).model_json_schema()
    fixed: dict[str, float] = {}
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        folder = build_random_model(args.config or embedded_config(), Path(scratch), dtype)
        fixed["build random weights"] = time.perf_counter() - started
        model_args = {"max_retries": 0, "device": device, "dtype": dtype, "batch_size": 1}
        started = time.perf_counter()
        with load_model(ModelSpec(str(folder), "hf", model_args)) as lm:
            fixed["load"] = time.perf_counter() - started
            started = time.perf_counter()
            lm.prepare(schema)  # the grammar engine for the tokenizer, then the schema
            fixed["grammar set-up"] = time.perf_counter() - started
            timed(lm, requests(1, 2, None), bare=True)  # warm-up: first-call costs
            for batch in batches:
                if batch == "auto":
                    lm.auto_batch, lm._fitted_length = True, 0
                    started = time.perf_counter()
                    lm.fit_batch_size(requests(lm.max_batch_size, tokens, schema))
                    fixed["batch-size search"] = time.perf_counter() - started
                    size, lm.auto_batch = lm.batch_size, False
                else:
                    size = lm.batch_size = int(batch)
                bare, _ = per_step(lm, size, tokens, None, args.repeats, bare=True)
                ours, prefill = per_step(lm, size, tokens, None, args.repeats, bare=False)
                constrained, _ = per_step(lm, size, tokens, schema, args.repeats, bare=False)
                reuse, lm.prefix_cache = lm.prefix_cache, None
                whole, whole_prefill = per_step(lm, size, tokens, None, args.repeats, bare=False)
                lm.prefix_cache = reuse
                rows.append(
                    [
                        f"{batch} ({size})" if batch == "auto" else batch,
                        f"{bare:.2f}",
                        f"{ours:.2f}",
                        f"{ours / bare:.3f}",
                        f"{constrained:.2f}",
                        f"{constrained / ours:.3f}",
                        f"{whole:.2f}",
                        f"{prefill:.1f} / {whole_prefill:.1f}" + ("" if reuse else " (reuse off)"),
                    ]
                )
                print(f"batch {batch} done", flush=True)
    peak = torch.cuda.max_memory_allocated() / 2**30 if on_gpu else None
    name = args.config.name if args.config else "gemma-3-270m (embedded)"
    print(f"\n### hf backend vs bare generate: {name}, random weights, {device}, {dtype}, ")
    print(f"{tokens} new tokens per request, median of {args.repeats}\n")
    header = [
        "batch",
        "(a) bare ms/step",
        "(b) ours",
        "(b)/(a)",
        "(c) constrained",
        "(c)/(b)",
        "(d) ours, no reuse",
        "prefill ms: reuse / none",
    ]
    print(markdown_table(header, rows))
    print("\n### Fixed costs\n")
    costs = [[f"{what} (s)", f"{seconds:.2f}"] for what, seconds in fixed.items()]
    costs.append(["peak GPU memory (GiB)", "-" if peak is None else f"{peak:.2f}"])
    print(markdown_table(["fixed cost", "value"], costs))


if __name__ == "__main__":
    main()
