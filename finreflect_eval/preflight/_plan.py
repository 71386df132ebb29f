"""The plan a passed check prints: the models with their versions and downloads, and per task
its data, spans and the model calls of each stage, in Markdown tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from finreflect_eval._util.tables import markdown_table
from finreflect_eval.models import ModelSpec
from finreflect_eval.models._thinking import expected_thought
from finreflect_eval.pipeline.judging import Panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.preflight._models import ModelCheck, free_bytes, gigabytes, hub_cache
from finreflect_eval.tasks.config import Task


@dataclass
class TaskData:
    task: Task
    dataset: str
    version: str
    spans: int | None  # None: the data did not load


def extraction_calls(task: Task, spans: int) -> int:
    """The extraction's calls on a task (candidate and normaliser), before retries of invalid
    outputs: 1 per span single pass, 2 multi pass; reflection at most 1 + 2 per iteration
    (critic, correction), fewer when the critic runs out of feedback."""
    per_span = {"single_pass": 1, "multi_pass": 2}.get(
        task.config.mode, 1 + 2 * task.config.max_iterations
    )
    return per_span * spans


def judge_calls(task: Task, spans: int) -> int:
    """One judge's calls on a task (`judging.judge_requests`): one per criterion of the task's
    metric list and span, all of a span's triples in one call; none for a span without triples."""
    return len(task.criteria) * spans


def render_plan(
    config: RunConfig,
    data: list[TaskData],
    models: list[ModelCheck],
    panel: Panel | None,
    offline: str | None,
) -> str:
    judges = panel.judges if panel else []
    # The grounding cascade scores a triple whose figures its span lacks 0 without a judge.
    cascade = "≤ " if config.skip_judging_ungrounded else ""
    rows: list[list[object]] = []
    totals = [0, 0, *(0 for _ in judges)]
    for item in data:
        spans = item.spans or 0
        calls = [
            extraction_calls(item.task, spans),
            *(judge_calls(item.task, spans) for _ in judges),
        ]
        totals = [a + b for a, b in zip(totals, [spans, *calls], strict=True)]
        at_most = "≤ " if item.task.config.mode == "reflection" else ""
        first = [item.task.name, item.task.config.mode, item.dataset, item.version, spans]
        rows.append([*first, f"{at_most}{calls[0]}", *(f"{cascade}{n}" for n in calls[1:])])
    reflection = any(item.task.config.mode == "reflection" for item in data)
    total = ["total", "", "", "", totals[0], f"{'≤ ' if reflection else ''}{totals[1]}"]
    rows.append([*total, *(f"{cascade}{n}" for n in totals[2:])])
    header = ["task", "mode", "dataset", "version", "spans", "extraction calls"]
    header += [f"judge {judge.name} calls" for judge in judges]
    lines = [
        "Plan (checked: no model ran, no weight was downloaded)",
        "",
        model_table(models),
        "",
        markdown_table(header, rows),
        "",
        f"Calls: {'≤ ' if reflection else ''}{totals[1]} extraction"
        + (f", {cascade}{sum(totals[2:])} by the judges" if judges else "")
        + ", before retries of invalid outputs"
        + ("; a span without triples gets no judge call" if judges else "")
        + (" (nor one whose triples all fail the grounding check)." if cascade else "."),
        download_line(models),
        f"Output: {config.output_dir}",
    ]
    thinking = thinking_rows(config, data, panel, totals[1:])
    if thinking:
        lines += [
            "",
            "Thinking (an estimate: a thought's tokens are the model's to choose; without a "
            "budget, an assumption per family, docs/reasoning.md):",
            "",
            markdown_table(
                ["role", "model", "thought per call", "from", "calls", "thinking tokens"],
                thinking,
            ),
        ]
    if offline:
        lines.append(f"Hub: {offline}; what it would confirm came from the local cache.")
    return "\n".join(lines)


def render_judging_plan(
    folder: Path,
    tasks: dict[str, Task],
    spans: dict[str, tuple[int, int]],
    models: list[ModelCheck],
    panel: Panel,
    cascade: bool,
    offline: str | None,
) -> str:
    """`judge --check`'s plan: the judges' models, and per task of the saved run its spans
    (`spans`: all, and those with triples, which alone get calls) and each judge's calls."""
    bound = "≤ " if cascade else ""
    rows: list[list[object]] = []
    totals = [0, 0, *(0 for _ in panel.judges)]
    for name, task in tasks.items():
        counts = [*spans[name], *(judge_calls(task, spans[name][1]) for _ in panel.judges)]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        rows.append([name, task.config.mode, *counts[:2], *(f"{bound}{n}" for n in counts[2:])])
    rows.append(["total", "", *totals[:2], *(f"{bound}{n}" for n in totals[2:])])
    header = ["task", "mode", "spans", "spans with triples"]
    header += [f"judge {judge.name} calls" for judge in panel.judges]
    lines = [
        "Plan of the judging (checked: no model ran, no weight was downloaded)",
        "",
        model_table(models),
        "",
        markdown_table(header, rows),
        "",
        f"Calls: {bound}{sum(totals[2:])} by the judges, before retries of invalid outputs; "
        "fewer where the cache or the panel's earlier votes answer"
        + (", or a span's triples all fail the grounding check." if cascade else "."),
        download_line(models),
        f"Votes of panel '{panel.panel}' into the samples in {folder}",
    ]
    if offline:
        lines.append(f"Hub: {offline}; what it would confirm came from the local cache.")
    return "\n".join(lines)


def model_table(models: list[ModelCheck]) -> str:
    """The models checked: where each one's weights come from, and what they download."""
    rows = [
        [
            check.role,
            check.spec.model,
            check.spec.backend,
            check.spec.args.get("revision") or ("main" if check.sha else ""),
            check.sha or "",
            check.source,
            gigabytes(check.download),
        ]
        for check in models
    ]
    header = ["role", "model", "backend", "revision", "commit", "weights from", "download"]
    return markdown_table(header, rows)


def download_line(models: list[ModelCheck]) -> str:
    download = sum(check.download or 0 for check in models)
    unknown = any(check.download is None for check in models)
    return (
        f"Download: {'at least ' if unknown else ''}{gigabytes(download)} of weights into "
        f"{hub_cache()} ({gigabytes(free_bytes(hub_cache()))} free)."
    )


def thinking_rows(
    config: RunConfig, data: list[TaskData], panel: Panel | None, calls: list[int]
) -> list[list[object]]:
    """A row for each model of the run that will think: the tokens one call's thought is
    expected to take (`_thinking.expected_thought`: at most its budget, else about the
    family's assumption), its calls (`calls`: the candidate's, then each judge's), and their
    product."""
    models = []
    if isinstance(config.model, ModelSpec) and data:
        longest = max(item.task.config.generation_kwargs.max_gen_toks for item in data)
        models.append(("candidate", config.model, longest, calls[0]))
    for judge, n in zip(panel.judges if panel else [], calls[1:], strict=True):
        if isinstance(judge.source, ModelSpec):  # not a model the caller loaded
            longest = panel.generation(judge).max_gen_toks
            models.append((f"judge {judge.name}", judge.model_spec, longest, n))
    rows: list[list[object]] = []
    for role, spec, max_tokens, n in models:
        expected = expected_thought(spec.model, spec.args, max_tokens)
        if expected is not None:
            per_call, why = expected
            bound = "≤" if "budget" in why else "≈"
            rows.append(
                [role, spec.model, f"{bound} {per_call:,}", why, n, f"{bound} {per_call * n:,}"]
            )
    return rows
