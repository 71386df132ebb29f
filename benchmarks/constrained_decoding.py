"""What constrained decoding costs on the embedded model (Gemma 3 270M, hf backend, CPU or GPU).

For each structured backend: the time to compile the extraction schema, and decode tokens per
second against unconstrained greedy decoding on the same prompts; then how throughput scales with
the batch size. Prints a Markdown table. Ratios within one run are what to compare; absolute
times depend on the machine.

    python benchmarks/constrained_decoding.py [--spans 3] [--max-tokens 64] [--batch-sizes 1,2,4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from finreflect_eval.data import load_benchmark
from finreflect_eval.models import GenerationRequest, ModelSpec, load_model
from finreflect_eval.schema import load_schema
from finreflect_eval.tables import markdown_table

BACKENDS = ("outlines_core", "xgrammar", "llguidance")


def extraction_schema() -> dict:
    """The shape extraction asks for: a bounded list of schema-typed triples."""
    return load_schema().triple_list_model(8, min_triples=1).model_json_schema()


def requests(n: int, schema: dict | None, max_tokens: int) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            prompt=f"Extract knowledge graph triples from this 10-K text as JSON.\n\n{span.text}\n",
            schema=schema,
            max_tokens=max_tokens,
        )
        for span in load_benchmark("sample", limit=n).spans
    ]


def decode_rate(lm, batch: list[GenerationRequest]) -> tuple[float, int]:
    """Generated tokens per second over a batch (no cache, no retries)."""
    start = time.perf_counter()
    results = lm.generate(batch)
    seconds = time.perf_counter() - start
    tokens = sum(result.completion_tokens for result in results)
    return tokens / seconds, tokens


def measure(model: str, backend: str | None, spans: int, max_tokens: int) -> dict:
    """Compile time and decode rate of one structured backend (None: unconstrained)."""
    schema = extraction_schema() if backend else None
    model_args = {"batch_size": 1, "max_retries": 0}
    if backend:
        model_args["structured_backend"] = backend
    with load_model(ModelSpec(model, "hf", model_args)) as lm:
        start = time.perf_counter()
        lm.prepare(schema)
        compile_seconds = time.perf_counter() - start
        rate, tokens = decode_rate(lm, requests(spans, schema, max_tokens))
    return {"compile": compile_seconds, "tokens": tokens, "rate": rate}


def measure_in_child(args: argparse.Namespace, backend: str | None) -> dict | None:
    """Each backend in its own process, so a compile that runs away can be stopped."""
    command = [sys.executable, __file__, "--model", args.model, "--spans", str(args.spans)]
    command += ["--max-tokens", str(args.max_tokens), "--one", backend or "none"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise SystemExit(f"{backend}: failed\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--spans", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--batch-sizes", default="1,2,4")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per backend")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one backend
    args = parser.parse_args()
    if args.one:
        backend = None if args.one == "none" else args.one
        print(json.dumps(measure(args.model, backend, args.spans, args.max_tokens)))
        return

    rows, rates = [], {}
    for backend in (None, *BACKENDS):
        result = measure_in_child(args, backend)
        name = backend or "unconstrained"
        if result is None:
            rows.append([name, f"> {args.timeout:.0f} (stopped)", "-", "-"])
            continue
        rates[name] = result["rate"]
        rows.append([name, f"{result['compile']:.2f}", result["tokens"], f"{result['rate']:.2f}"])
    for row in rows:
        rate = rates.get(row[0])
        row.append(f"{rate / rates['unconstrained']:.2f}" if rate else "-")
    print(f"\n### Decode speed, {args.model}, {args.spans} spans, {args.max_tokens} max tokens\n")
    print(
        markdown_table(
            ["structured backend", "compile s", "tokens", "tokens/s", "× unconstrained"], rows
        )
    )

    fastest = max((n for n in rates if n != "unconstrained"), key=rates.get)
    sizes = [int(size) for size in args.batch_sizes.split(",")]
    scaling = []
    schema = extraction_schema()
    with load_model(
        ModelSpec(args.model, "hf", {"structured_backend": fastest, "max_retries": 0})
    ) as lm:
        lm.prepare(schema)
        batch = requests(max(sizes), schema, args.max_tokens)
        for size in sizes:
            lm.batch_size = size
            rate, tokens = decode_rate(lm, batch)
            scaling.append([size, tokens, f"{rate:.2f}"])
    print(f"\n### Batch-size scaling ({fastest}, {max(sizes)} requests)\n")
    print(markdown_table(["batch size", "tokens", "tokens/s"], scaling))


if __name__ == "__main__":
    main()
