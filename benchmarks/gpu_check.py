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
Before it exits, it checks the tables it printed: a timing that no run of this code can give (a
time below zero, a ratio that is not its two times', see `impossible`) fails it in one line.

    python benchmarks/gpu_check.py                          # on the GPU: batch 1, 8, 32, auto
    python benchmarks/gpu_check.py --device cpu             # small sizes (what CI runs)
    python benchmarks/gpu_check.py --config DIR --batches 8,32 --tokens 128
"""

from __future__ import annotations

import argparse
import lzma
import re
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
        prompts = [lm.model_input(request) for request in batch]  # the text our hf encodes
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
    args = arguments()
    with progress.progress_bars(False):  # the table is the output
        output = check(args)
    print(output)
    problems = impossible(output)
    if problems:  # nothing this code measures can give them: say so in one line, and fail
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SystemExit(f"gpu_check: impossible timings: {problems[0]}{more}")


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; settings under which no step can be timed are refused."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="config + tokenizer folder (default: embedded)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    parser.add_argument("--batches", default=None, help="default: 1,8,32,auto (cpu: 1,2)")
    parser.add_argument("--tokens", type=int, default=None, help="default: 64 (cpu: 16)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.tokens is not None and args.tokens < 2:
        parser.error("--tokens must be at least 2 (a step's time is that of N tokens less 1's)")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    for batch in (args.batches or "auto").split(","):
        if batch != "auto" and not (batch.isdigit() and int(batch) >= 1):
            parser.error(f"--batches: {batch!r} is not a batch size (a positive count, or auto)")
    return args


def check(args: argparse.Namespace) -> str:
    """Measure, and return the two tables (Markdown, with their headings)."""
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
                label = f"{batch} ({size})" if batch == "auto" else batch
                rows.append(batch_row(lm, label, size, tokens, schema, args.repeats))
                print(f"batch {batch} done", flush=True)
    peak = torch.cuda.max_memory_allocated() / 2**30 if on_gpu else None
    name = args.config.name if args.config else "gemma-3-270m (embedded)"
    heading = f"{name}, random weights, {device}, {dtype}, \n{tokens} new tokens per request"
    return render(f"{heading}, median of {args.repeats}", rows, fixed, peak)


def batch_row(lm, label: str, size: int, tokens: int, schema: dict, repeats: int) -> list[str]:
    """A batch size's row: (a)-(d) in ms per step, the ratios, the prefills."""
    bare, _ = per_step(lm, size, tokens, None, repeats, bare=True)
    ours, prefill = per_step(lm, size, tokens, None, repeats, bare=False)
    constrained, _ = per_step(lm, size, tokens, schema, repeats, bare=False)
    reuse, lm.prefix_cache = lm.prefix_cache, None
    whole, whole_prefill = per_step(lm, size, tokens, None, repeats, bare=False)
    lm.prefix_cache = reuse
    return [
        label,
        f"{bare:.2f}",
        f"{ours:.2f}",
        f"{ours / bare:.3f}",
        f"{constrained:.2f}",
        f"{constrained / ours:.3f}",
        f"{whole:.2f}",
        f"{prefill:.1f} / {whole_prefill:.1f}" + ("" if reuse else " (reuse off)"),
    ]


COLUMNS = [
    "batch",
    "(a) bare ms/step",
    "(b) ours",
    "(b)/(a)",
    "(c) constrained",
    "(c)/(b)",
    "(d) ours, no reuse",
    "prefill ms: reuse / none",
]
STEPS = ("(a) bare ms/step", "(b) ours", "(c) constrained", "(d) ours, no reuse")
RATIOS = {"(b)/(a)": ("(b) ours", "(a) bare ms/step"), "(c)/(b)": ("(c) constrained", "(b) ours")}
SEARCH = "batch-size search (s)"
PEAK = "peak GPU memory (GiB)"
HEADING = re.compile(
    r"^### hf backend vs bare generate: .*, random weights, (\S+), \S+, *\n"
    r"(\d+) new tokens per request, median of \d+",
    re.M,
)
PREFILL = re.compile(r"(\S+) / (\S+)( \(reuse off\))?")
AUTO = re.compile(r"auto \((\d+)\)")


def render(heading: str, rows: list[list[str]], fixed: dict[str, float], peak) -> str:
    """The timings and the fixed costs as Markdown tables, under their headings."""
    costs = [[f"{what} (s)", f"{seconds:.2f}"] for what, seconds in fixed.items()]
    costs.append([PEAK, "-" if peak is None else f"{peak:.2f}"])
    return (
        f"\n### hf backend vs bare generate: {heading}\n\n{markdown_table(COLUMNS, rows)}\n\n"
        f"### Fixed costs\n\n{markdown_table(['fixed cost', 'value'], costs)}"
    )


# --- what the tables can hold ---


def impossible(output: str) -> list[str]:
    """What in the GPU check's printed tables no run of this code can give, one line each: a
    time (a step's, a prefill's, a fixed cost's) below zero, or a step's or prefill's at zero;
    a ratio that is not the quotient of the two times it divides (swapped columns); a peak GPU
    memory on a CPU, or none on a GPU; a batch-size search without an `auto` row (or the
    reverse); a batch that is not a positive size; per-step times over fewer than 2 tokens.
    Empty when the tables are possible (which says nothing of whether they are right)."""
    heading = HEADING.search(output)
    if heading is None:
        return ["no '### hf backend vs bare generate' heading: not the GPU check's output"]
    device, tokens = heading[1], int(heading[2])
    problems = []
    if tokens < 2:
        problems.append(
            f"{tokens} new tokens per request: per-step times need at least 2 new tokens "
            "(a step's time is that of a call of N tokens less that of a call of 1)"
        )
    rows = _table(output, COLUMNS[0])
    if not rows:
        return [*problems, "no table of timings (its header row '| batch | ...' is missing)"]
    for row in rows:
        problems += _row_problems(row)
    costs = {cells[0]: cells[1] for cells in _table(output, "fixed cost") if len(cells) == 2}
    if not costs:
        return [*problems, "no table of fixed costs"]
    for name, value in costs.items():
        seconds = _number(value)
        if name.endswith("(s)") and (seconds is None or seconds < 0):
            problems.append(f"{name} is {value}: seconds cannot be negative (or not a number)")
    problems += _peak_problems(costs.get(PEAK), device)
    autos = [row[0] for row in rows if row[0].startswith("auto")]
    if (SEARCH in costs) != bool(autos):
        problems.append(
            "a batch-size search but no auto row (the search runs only for batch auto)"
            if SEARCH in costs
            else f"batch {autos[0]} without a batch-size search (batch auto runs one)"
        )
    return problems


def _table(output: str, first: str) -> list[list[str]]:
    """The rows (as cells) of the Markdown table whose header starts with `first`."""
    lines = output.splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith(f"| {first} |")), None)
    if start is None:
        return []
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _row_problems(cells: list[str]) -> list[str]:
    label = cells[0]
    auto = AUTO.fullmatch(label)
    if not (label.isdigit() and int(label) >= 1) and not (auto and int(auto[1]) >= 1):
        return [f"batch {label!r} is not a batch (a positive size, or 'auto (size)')"]
    if len(cells) != len(COLUMNS):
        return [f"batch {label}: {len(cells)} cells, not {len(COLUMNS)}"]
    row = dict(zip(COLUMNS, cells, strict=True))
    problems = []
    for column in [*STEPS, *RATIOS]:
        if _number(row[column]) is None:
            problems.append(f"batch {label}: {column} is {row[column]!r}, not a number")
    for column in STEPS:
        value = _number(row[column])
        if value is not None and value <= 0:
            problems.append(
                f"batch {label}: {column} is {row[column]} ms, not a step's time (a step takes "
                "time; below 0, a call of N tokens timed shorter than one of 1)"
            )
    for ratio, (top, bottom) in RATIOS.items():
        values = [_number(row[column]) for column in (ratio, top, bottom)]
        if None not in values and values[1] > 0 and values[2] > 0:
            problems += _ratio_problem(label, ratio, row, *values)
    prefill = PREFILL.fullmatch(row[COLUMNS[-1]])
    values = [_number(part) for part in prefill.groups()[:2]] if prefill else [None]
    if None in values:
        problems.append(f"batch {label}: the prefill {row[COLUMNS[-1]]!r} is not 'ms / ms'")
    for value, how in zip(values, ("with", "without"), strict=False):
        if value is not None and value <= 0:
            problems.append(
                f"batch {label}: the prefill {how} reuse is {value} ms: a call takes time"
            )
    return problems


def _ratio_problem(label: str, ratio: str, row: dict, value: float, top: float, bottom: float):
    """A ratio as printed (3 decimals) must be within rounding of its two times (2 decimals)."""
    low = (top - 0.005) / (bottom + 0.005)
    high = (top + 0.005) / (bottom - 0.005) if bottom > 0.005 else float("inf")
    if low - 0.0005 <= value <= high + 0.0005:
        return []
    over, under = ratio.split("/")
    top_column, bottom_column = RATIOS[ratio]
    return [
        f"batch {label}: {ratio} is {row[ratio]}, but {over} {row[top_column]} / {under} "
        f"{row[bottom_column]} is {top / bottom:.3f}: swapped columns, or not their ratio"
    ]


def _peak_problems(peak: str | None, device: str) -> list[str]:
    if peak is None:
        return [f"no {PEAK} row in the fixed costs"]
    gigabytes = _number(peak)
    if device.startswith("cuda"):
        if gigabytes is None or gigabytes <= 0:
            return [f"no peak GPU memory on {device} (it reads {peak!r})"]
    elif peak != "-":
        return [f"peak GPU memory on {device} ({peak} GiB): a run off the GPU measures none"]
    return []


if __name__ == "__main__":
    main()
