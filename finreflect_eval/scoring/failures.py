"""The failure policy: when failed model calls stop a run instead of being scored, and each
task's failed calls as the results report them (`Failures`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.records import Failures
from finreflect_eval.scoring.span_facts import SpanFacts


@dataclass(frozen=True)
class FailurePolicy:
    """When failed model calls stop a run instead of being scored: a span whose extraction
    failed in transport (the server, not the model: retried on a rerun, never cached), a judge
    call that failed in transport, more than `max_invalid_share` of a task's spans whose output
    stayed invalid after retries (the model's failure: up to the share, those spans count with
    no triples), or a judge with more than `max_judge_failure_share` of its calls on a task
    failed or invalid after retries (up to the share, its failed calls are abstentions; beyond
    it, the panel is in effect two judges, or one). `allow_failures` scores anyway, and the
    results say so."""

    max_invalid_share: float = 0.2
    max_judge_failure_share: float = 0.2
    allow_failures: bool = False

    def problems(self, span_facts: dict[str, SpanFacts], panel: str | None = None) -> list[str]:
        """One line per task that fails the policy."""
        lines = []
        for task, facts in span_facts.items():
            failed = failures_of(facts, panel)
            counts = []
            if failed.transport_spans:
                counts.append(f"{failed.transport_spans} span(s) failed in transport")
            if failed.invalid_spans > self.max_invalid_share * len(facts):
                counts.append(
                    f"{failed.invalid_spans} of {len(facts)} spans gave invalid output "
                    f"(more than {self.max_invalid_share * 100:g}%)"
                )
            if failed.judge_transport_calls:
                counts.append(f"{failed.judge_transport_calls} judge call(s) failed in transport")
            for judge, n_failed in failed.judge_failed_calls.items():
                if n_failed > self.max_judge_failure_share * failed.judge_calls_each:
                    counts.append(
                        f"judge {judge} failed {n_failed} of its {failed.judge_calls_each} "
                        f"calls (more than --max-judge-failure-share "
                        f"{self.max_judge_failure_share * 100:g}%)"
                    )
            if counts:
                first = f" (first: {failed.first})" if failed.first else ""
                lines.append(f"task {task}: {', '.join(counts)}{first}")
        return lines

    def check(
        self, span_facts: dict[str, SpanFacts], folder: Path, panel: str | None = None
    ) -> None:
        """A one-line error when a run's spans fail the policy (unless failures are allowed);
        `folder` holds its samples."""
        problems = self.problems(span_facts, panel)
        if problems and not self.allow_failures:
            more = f" (and {len(problems) - 1} more task(s))" if len(problems) > 1 else ""
            raise FinReflectError(
                f"{problems[0]}{more}; no results written — rerun the same command to retry "
                f"failed calls (samples are in {folder}), or score with --allow-failures"
            )


def failures_of(facts: SpanFacts, panel: str | None) -> Failures:
    """A task's failed calls: extraction spans failed in transport or with invalid output after
    retries, judge calls of `panel` failed in transport, and each judge's failed calls."""
    transport = facts.column("transport_failed")
    invalid = facts.column("failed") & ~transport
    failures = facts.table.column("failures")
    rows = [*np.flatnonzero(transport).tolist(), *np.flatnonzero(invalid).tolist()]
    messages = [message for row in rows for message in failures[row].as_py()]
    judge_calls = [] if panel is None else facts.python_values(f"judge_transport_failures:{panel}")
    messages += [message for calls in judge_calls for message in calls]
    failed_by: dict[str, int] = {}
    calls_each = 0
    if panel is not None:
        judges = facts.table.column(f"judge_failed:{panel}").combine_chunks().flatten()
        failed_by = {
            str(item["values"]): int(item["counts"]) for item in pc.value_counts(judges).to_pylist()
        }
        calls_each = facts.total(f"judge_calls_each:{panel}")
    return Failures(
        transport_spans=int(transport.sum()),
        invalid_spans=int(invalid.sum()),
        judge_transport_calls=sum(len(calls) for calls in judge_calls),
        judge_calls_each=calls_each,
        judge_failed_calls=dict(sorted(failed_by.items())),
        first=messages[0] if messages else "",
    )
