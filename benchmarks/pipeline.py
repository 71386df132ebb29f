"""Where the pipeline's time goes, as one Markdown table (ratios within one run are what count;
absolute times depend on the machine):

(a) harness vs model time of a whole `simple_evaluate` run on a tiny random model (the harness:
    everything but the model's own `_complete`);
(b) prompt tokens sent vs computed per stage on the hf backend, without and with prefix reuse
    (and, with --demo, on the quickstart's run: the embedded model and the demo panel, timed
    against llama.cpp's llama-server serving the same GGUF where one is built);
(c) `finreflect-eval score` seconds and peak memory on synthetic judged runs of 100k and 500k
    triples (3 modes, 3 judges, ~86% of items unanimous, or with --split-share that share of
    items split 2–1 and the rest unanimous), reading the score index the judge stage writes, and
    scoring it again (the review queues left as they are), and reading the samples alone (a run
    judged before the index existed), with the size of the review files `score` writes;
(d) grammars compiled per run (distinct output schemas per loaded model).

    python benchmarks/pipeline.py [--triples 100000,500000] [--split-share 0.33] [--spans 2]
                                  [--skip-run] [--demo]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from finreflect_eval.data import span_list
from finreflect_eval.records import SampleRecord
from finreflect_eval.records.samples import fill
from finreflect_eval.runs.store import SCORE_INDEX, RunStore

# The tests' tiny model and llama-server helpers.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from finreflect_eval._util.tables import markdown_table

JUDGES = ("judge-0", "judge-1", "judge-2")
PANEL = "synthetic"
TASKS = (
    "finreflect_smoke_single_pass",
    "finreflect_smoke_multi_pass",
    "finreflect_smoke_reflection",
)
TRIPLES_PER_SPAN = 40
SPANS_PER_FILING = 40  # the bootstrap resamples filings: ~100 of them at 500k triples
REASONING = "The chunk states this fact directly in its second paragraph; the types fit."


# --- (a), (b), (d): a whole run on a tiny random model ---


class Meter:
    """Time inside a loaded hf model's `_complete` (the rest of a run is the harness's)."""

    def __init__(self, lm) -> None:
        self.seconds = 0.0
        complete = lm._complete

        def timed(requests):
            started = time.perf_counter()
            try:
                return complete(requests)
            finally:
                self.seconds += time.perf_counter() - started

        lm._complete = timed


def prompt_tokens(stage: str, stats: dict, reuse: str) -> list[str]:
    """A row (b): prompt positions the model computed against those it was sent (the backend
    counts both; padding is computed too)."""
    computed, sent = stats["prompt_tokens_computed"], stats["prompt_tokens"]
    return [
        f"(b) prompt tokens, {stage} (hf, {reuse})",
        f"{computed:,} computed / {sent:,} sent",
        f"{computed / max(sent, 1):.2f}",
    ]


def whole_run(folder: Path, spans: int, prefix_cache_tokens: int) -> list[list[str]]:
    """Rows (a), (b), (d): `simple_evaluate` of all three modes with the tiny model as the
    candidate and as each of three judges."""
    from support.tiny_model import build_tiny_llama

    import finreflect_eval
    from finreflect_eval.models import ModelSpec, load_model
    from finreflect_eval.pipeline.judging import Panel

    tiny = build_tiny_llama(folder / "tiny")
    args = {"batch_size": 8, "max_retries": 0, "prefix_cache_tokens": prefix_cache_tokens}
    reuse = "prefix reuse" if prefix_cache_tokens else "no reuse"
    spec = ModelSpec(str(tiny), "hf", args)
    with load_model(spec) as candidate, load_model(spec) as judge:
        meters = [Meter(candidate), Meter(judge)]
        started = time.perf_counter()
        finreflect_eval.simple_evaluate(
            candidate,
            tasks=list(TASKS),
            judges=Panel.from_models(dict.fromkeys(JUDGES, judge), PANEL),
            dataset="sample",
            limit=spans,
            gen_kwargs={"max_gen_toks": 512},
            output_path=folder / "out",
            use_cache=False,
            max_invalid_share=1.0,
            allow_failures=True,
        )
        wall = time.perf_counter() - started
        model = sum(meter.seconds for meter in meters)
        return [
            [
                f"(a) harness vs model time, {spans} spans × 3 modes, 3 judges, {reuse}",
                f"{wall - model:.1f} s harness / {model:.1f} s model",
                f"harness {100 * (wall - model) / wall:.0f}% of {wall:.1f} s",
            ],
            prompt_tokens("extraction", candidate.stats, reuse),
            prompt_tokens("judging", judge.stats, reuse),
            grammars("", candidate, judge),
        ]


def grammars(run: str, candidate, judge) -> list[str]:
    """A row (d): output schemas compiled (one generator each) and the seconds it took."""
    seconds = candidate.stats["grammar_seconds"] + judge.stats["grammar_seconds"]
    return [
        f"(d) grammars compiled per run{run}",
        f"{len(candidate._generators) + len(judge._generators)}",
        f"extraction {len(candidate._generators)}, judging {len(judge._generators)}; "
        f"{seconds:.2f} s to compile",
    ]


def demo_run(folder: Path, spans: int) -> list[list[str]]:
    """Rows (b) of the quickstart's run: the embedded model extracting, the `demo` panel (the
    embedded model three times) judging, every prompt through the hf backend's defaults; then,
    where a `llama-server` is built (tests/support/llama_server.py), the same run with that
    server serving the same GGUF to the candidate and the three judges (the openai backend)."""
    import finreflect_eval
    from finreflect_eval.models.embedded import EMBEDDED_MODELS
    from finreflect_eval.models.hf import HFModel
    from finreflect_eval.pipeline.judging import load_panel

    stats: list[dict] = []  # one per loaded model, the candidate first
    close = HFModel.close

    def counted_close(self) -> None:
        stats.append({**self.stats, "grammars": len(self._generators)})
        close(self)

    def timed_run(**options) -> float:
        started = time.perf_counter()
        finreflect_eval.simple_evaluate(
            tasks=["finreflect_smoke_single_pass"],
            dataset="sample",
            limit=spans,
            output_path=folder / "out",
            use_cache=False,
            **options,
        )
        return time.perf_counter() - started

    HFModel.close = counted_close
    try:
        hf_seconds = timed_run(model="gemma-3-270m", judges="demo")
    finally:
        HFModel.close = close
    keys = {key for one in stats for key in one}
    candidate, judging = (
        {key: sum(s.get(key, 0) for s in part) for key in keys} for part in (stats[:1], stats[1:])
    )
    rows = [
        [f"demo run, {spans} spans, extraction + 3 judges, hf", f"{hf_seconds:.0f} s", "CPU"],
        prompt_tokens("extraction, demo run", candidate, "prefix reuse"),
        prompt_tokens("judging, demo run", judging, "prefix reuse"),
        [
            "(d) grammars compiled, demo run",
            f"{candidate['grammars'] + judging['grammars']}",
            f"extraction {candidate['grammars']}, judging {judging['grammars']}; "
            f"{candidate['grammar_seconds'] + judging['grammar_seconds']:.2f} s to compile",
        ],
    ]
    from support import llama_server

    binary = llama_server.binary()
    if binary is None:
        return rows
    gguf = EMBEDDED_MODELS["gemma-3-270m"].gguf_path()
    with llama_server.serve(binary, gguf, folder / "llama-server.log") as url:
        panel = load_panel("demo")
        server_seconds = timed_run(
            model="gemma-3-270m",
            backend="openai",
            model_args={"base_url": url},
            judges=panel.at_endpoints({judge.name: url for judge in panel.judges}),
        )
    rows.append(
        [
            f"demo run, {spans} spans, extraction + 3 judges, llama-server (openai backend)",
            f"{server_seconds:.0f} s",
            f"hf takes {hf_seconds / server_seconds:.2f}× as long",
        ]
    )
    return rows


# --- (c) scoring at scale ---


def template_run(folder: Path) -> Path:
    """A real judged run of one span per mode (scripted candidate and judges): the shapes the
    synthetic records copy."""
    import finreflect_eval
    from finreflect_eval.models.scripted import ScriptedModel
    from finreflect_eval.pipeline.judging import Panel

    def judge(request):
        properties = request.schema["properties"]
        if "verdicts" in properties:
            item = {"verdict": 1, "reasoning": REASONING, "warning": ""}
            return json.dumps({"verdicts": [item] * properties["verdicts"]["minItems"]})
        return json.dumps({"verdict": "good", "reasoning": REASONING, "warning": ""})

    triple = {
        "subject": "AAPL",
        "subject_type": "ORG",
        "relation": "Produces",
        "object": "iPhone",
        "object_type": "PRODUCT",
    }
    candidate = ScriptedModel("synthetic", responses=[json.dumps({"triples": [triple]})])
    panel = Panel.from_models({name: ScriptedModel(responses=judge) for name in JUDGES}, PANEL)
    finreflect_eval.simple_evaluate(
        candidate,
        tasks=list(TASKS),
        judges=panel,
        dataset="sample",
        limit=1,
        output_path=folder,
        use_cache=False,
    )
    return folder / "synthetic"


def synthetic_run(
    folder: Path, n_triples: int, seed: int = 0, split_share: float | None = None
) -> Path:
    """A judged run of `n_triples` triples over the three modes (40 per span), with votes that
    agree on ~86% of items (see `synthetic_record` for `split_share`), written as the pipeline
    writes them (JSONL records, a manifest)."""
    template = template_run(folder / "template")
    rng = random.Random(seed)
    manifest_path = next(template.glob("manifest_*.json"))
    manifest = json.loads(manifest_path.read_text())
    spans = max(1, n_triples // (TRIPLES_PER_SPAN * len(TASKS)))
    target = folder / "run"
    target.mkdir(parents=True)
    for task in TASKS:
        samples = template / manifest["tasks"][task]["samples"]
        record = json.loads(samples.read_text().splitlines()[0])
        span_ids = []
        with (target / samples.name).open("w") as out:
            for index in range(spans):
                made = synthetic_record(record, index, rng, split_share)
                line = SampleRecord.model_validate(made)
                fill(line)  # its per-sample metrics and hashes, as the judge stage leaves them
                span_ids.append(line.span_id)
                out.write(line.model_dump_json() + "\n")
        manifest["tasks"][task]["span_list"] = span_list(span_ids)  # as the run's manifest says
        manifest["tasks"][task]["dataset"]["size"] = spans
    manifest["dataset"]["size"] = spans
    (target / manifest_path.name).write_text(json.dumps(manifest))
    store = RunStore(target)
    store.save(store.load())  # as the judge stage leaves a run: samples and their score index
    return target


def synthetic_record(
    record: dict, index: int, rng: random.Random, split_share: float | None = None
) -> dict:
    """A span's record with 40 triples (40 spans a filing) and every judge's vote on each item:
    each judge gives the item's label with probability 0.95 (~86% of items unanimous), or, with
    `split_share`, that share of items split 2–1 (one judge, drawn at random, gives another
    label) and the rest unanimous."""
    triple = record["triples"][0]
    triples = [
        {**triple, "object": f"Product {index}-{number}"} for number in range(TRIPLES_PER_SPAN)
    ]
    ticker = f"SYN{index // SPANS_PER_FILING:04d}"
    record = {
        **record,
        "doc_id": index,
        "span_id": f"{ticker}_2024_{index:06d}",
        "ticker": ticker,
        "doc": {**record["doc"], "ticker": ticker, "company": ticker, "fiscal_year": 2024},
        "triples": triples,
        "rule_checks": [record["rule_checks"][0]] * len(triples),
    }
    votes, calls = {}, []
    template_call = record["judge_calls"][PANEL][0]
    for criterion in ("faithfulness", "precision", "relevance", "comprehensiveness"):
        per_triple = criterion != "comprehensiveness"
        levels = (0, 1) if per_triple else ("poor", "partial", "good")
        by_judge = {judge: [] for judge in JUDGES}
        for _ in range(len(triples) if per_triple else 1):
            agreed = rng.choice(levels)
            if split_share is None:  # ~86% unanimous
                verdicts = [agreed if rng.random() < 0.95 else rng.choice(levels) for _ in JUDGES]
            else:
                verdicts = [agreed] * len(JUDGES)
                if rng.random() < split_share:
                    others = [level for level in levels if level != agreed]
                    verdicts[rng.randrange(len(JUDGES))] = rng.choice(others)
            for judge, verdict in zip(JUDGES, verdicts, strict=True):
                by_judge[judge].append(
                    {"verdict": verdict, "reasoning": REASONING, "warning": "", "synthetic": False}
                )
        votes[criterion] = by_judge
        for judge in JUDGES:
            shown = [
                {k: v[k] for k in ("verdict", "reasoning", "warning")} for v in by_judge[judge]
            ]
            text = json.dumps({"verdicts": shown} if per_triple else shown[0])
            calls.append(
                {
                    **template_call,
                    "step": f"judge:{criterion}",
                    "model": judge,
                    "text": text,
                    "raw_outputs": [text],
                }
            )
    record["votes"] = {PANEL: votes}
    record["judge_calls"] = {PANEL: calls}
    return record


def score_cost(run: Path) -> tuple[float, float]:
    """Seconds and peak resident memory (GB) of `finreflect-eval score` on a run folder, run by
    a fresh parent (whose only child it is, so the peak is the command's own)."""
    command = [sys.executable, "-m", "finreflect_eval", "score", "--samples", str(run)]
    measure = (
        "import resource, subprocess, sys, time; started = time.perf_counter(); "
        f"done = subprocess.run({command!r}, capture_output=True, text=True); "
        "print(time.perf_counter() - started, "
        "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode); "
        "sys.stderr.write(done.stderr[-2000:])"
    )
    result = subprocess.run([sys.executable, "-c", measure], capture_output=True, text=True)
    seconds, peak_kb, code = result.stdout.split()
    if code != "0":
        raise SystemExit(result.stderr)
    return float(seconds), int(peak_kb) / 1024**2


def run_sizes(text: str) -> list[int]:
    """`--triples`: comma-separated positive sizes, checked before any minutes are spent."""
    try:
        sizes = [int(n) for n in text.split(",") if n.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of triple counts: {text!r}") from None
    if any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"triple counts must be positive: {text!r}")
    return sizes


def share(text: str) -> float:
    """`--split-share`: a share of items, from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"not a share from 0 to 1: {text!r}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--triples",
        type=run_sizes,
        default="100000,500000",
        help='synthetic run sizes ("" for none)',
    )
    parser.add_argument(
        "--split-share",
        type=share,
        default=None,
        help="(c): the share of items the judges split on (default: each judge agrees with "
        "probability 0.95, ~14%% split)",
    )
    parser.add_argument("--spans", type=int, default=2, help="spans of the tiny-model run")
    parser.add_argument("--skip-run", action="store_true", help="only (c)")
    parser.add_argument(
        "--demo", action="store_true", help="also (b) on the quickstart's run (minutes on a CPU)"
    )
    args = parser.parse_args()
    rows = []
    if not args.skip_run:
        for prefix_cache_tokens in (0, 16384):
            with tempfile.TemporaryDirectory() as scratch:
                rows += whole_run(Path(scratch), args.spans, prefix_cache_tokens)
    if args.demo:
        with tempfile.TemporaryDirectory() as scratch:
            rows += demo_run(Path(scratch), args.spans)
    splits = "~14% split" if args.split_share is None else f"{args.split_share:.0%} split"
    for size in args.triples:
        with tempfile.TemporaryDirectory() as scratch:
            run = synthetic_run(Path(scratch), size, split_share=args.split_share)
            megabytes = sum(f.stat().st_size for f in run.glob("samples_*.jsonl")) / 1024**2
            # Scored again: the review queues, unchanged, are left as they are.
            for reads in ("score index", "score index, scored again", "samples only"):
                if reads == "samples only":  # a run judged before the score index existed
                    shutil.rmtree(run / SCORE_INDEX)
                seconds, peak = score_cost(run)
                review = sum(f.stat().st_size for f in run.glob("review_*")) / 1024**2
                rows.append(
                    [
                        f"(c) score, {size:,} triples ({megabytes:,.0f} MB of samples, "
                        f"{splits}), {reads}",
                        f"{seconds:.1f} s",
                        f"{peak:.2f} GB peak; review files {review:,.0f} MB",
                    ]
                )
    print(markdown_table(["measure", "value", "detail"], rows))


if __name__ == "__main__":
    main()
