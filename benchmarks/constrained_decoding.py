"""What constrained decoding costs per token on the embedded model (Gemma 3 270M, hf backend),
measured so that the backends can be told apart:

- every request decodes exactly --tokens new tokens: the model's `generation_config.min_new_tokens`
  keeps EOS away, and the schema (at least 32 triples) cannot close sooner, so every backend runs
  the same number of decoding steps;
- the cost per token is the marginal one, (t(N) - t(1)) / (N - 1): the prefill and the per-request
  set-up (a fresh grammar state) cancel out;
- the backends run interleaved, the order rotated each repetition, and the median is reported.

Prints a Markdown table: compile seconds, ms per generated token, and the ratio to unconstrained
decoding. Ratios within one run are what to compare; absolute times depend on the machine.

    python benchmarks/constrained_decoding.py [--tokens 256] [--repeats 5] [--batch 4]
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import ExitStack

from finreflect_eval._util.tables import markdown_table
from finreflect_eval.data import load_benchmark
from finreflect_eval.models import GenerationRequest, ModelSpec, load_model
from finreflect_eval.protocol.schema import load_schema

# outlines_core compiles this schema for minutes (its automaton grows with the item count): ask
# for it with --backends.
BACKENDS = ("llguidance", "xgrammar")
UNCONSTRAINED = "unconstrained"


def long_schema() -> dict:
    """The extraction shape with at least 32 triples: far more than --tokens can close."""
    return load_schema().triple_list_model(64, min_triples=32).model_json_schema()


def requests(batch: int, schema: dict | None, max_tokens: int) -> list[GenerationRequest]:
    """One request per sample span: distinct prompts, so none is answered as a duplicate."""
    return [
        GenerationRequest(
            prompt=f"Extract knowledge graph triples from this 10-K text as JSON.\n\n"
            f"{span.text[:600]}\n",
            schema=schema,
            max_tokens=max_tokens,
        )
        for span in load_benchmark("sample", limit=batch).spans
    ]


def seconds_for(lm, schema: dict | None, batch: int, tokens: int) -> tuple[float, int]:
    """Wall time of one batch decoding exactly `tokens` new tokens per request, and the model's
    forward passes (a check that every backend ran as many steps: one per new token)."""
    lm.hf_model.generation_config.min_new_tokens = tokens
    forward, steps = lm.hf_model.forward, [0]

    def counted(*args, **kwargs):
        steps[0] += 1
        return forward(*args, **kwargs)

    lm.hf_model.forward = counted
    try:
        started = time.perf_counter()
        lm.generate(requests(batch, schema, tokens))
        return time.perf_counter() - started, steps[0]
    finally:
        lm.hf_model.forward = forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--tokens", type=int, default=256, help="new tokens per request")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=4, help="requests per generate call")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    args = parser.parse_args()

    schema = long_schema()
    names = [UNCONSTRAINED, *args.backends.split(",")]
    compile_seconds: dict[str, float] = {}
    with ExitStack() as stack:
        models = {}
        for name in names:
            model_args = {"batch_size": args.batch, "max_retries": 0}
            if name != UNCONSTRAINED:
                model_args["structured_backend"] = name
            models[name] = stack.enter_context(load_model(ModelSpec(args.model, "hf", model_args)))
            started = time.perf_counter()
            models[name].prepare(None if name == UNCONSTRAINED else schema)
            compile_seconds[name] = time.perf_counter() - started
        per_token: dict[str, list[float]] = {name: [] for name in names}
        steps: dict[str, set[int]] = {name: set() for name in names}
        for name in names:  # warm-up: first-call costs are not per-token costs
            seconds_for(models[name], None if name == UNCONSTRAINED else schema, args.batch, 8)
        for repeat in range(args.repeats):
            order = names[repeat % len(names) :] + names[: repeat % len(names)]
            for name in order:
                lm, own_schema = models[name], None if name == UNCONSTRAINED else schema
                first, _ = seconds_for(lm, own_schema, args.batch, 1)
                whole, forwards = seconds_for(lm, own_schema, args.batch, args.tokens)
                per_token[name].append(1000 * (whole - first) / ((args.tokens - 1) * args.batch))
                steps[name].add(forwards)
            print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)

    baseline = statistics.median(per_token[UNCONSTRAINED])
    rows = []
    for name in names:
        median = statistics.median(per_token[name])
        spread = f"{min(per_token[name]):.2f}–{max(per_token[name]):.2f}"
        rows.append(
            [
                name,
                "-" if name == UNCONSTRAINED else f"{compile_seconds[name]:.2f}",
                "/".join(str(n) for n in sorted(steps[name])),
                f"{median:.2f}",
                spread,
                f"{median / baseline:.3f}",
            ]
        )
    print(
        f"\n### Constrained decoding, {args.model}, batch {args.batch}, {args.tokens} new tokens "
        f"per request, median of {args.repeats}\n"
    )
    header = ["backend", "compile s", "decoding steps", "ms/token", "range", "× unconstrained"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
