"""The seeded re-judging audit of a leaderboard entry (`leaderboard audit`).

Provenance (`provenance`) checks what a run says of its judges; this checks the votes. A
sample of the entry's judged items is drawn, stratified by task and criterion, with a seed taken
from the sha256 of the stored entry's bytes: the submitter cannot choose it, anyone can redraw
it, and any change to the entry changes it. Every judge prompt is rebuilt from the task
definition and the submitted extraction (the span's text and triples; never from prompt text in
the submission), the maintainers' panel answers it, and each judge's verdicts are compared with
the same judge's in the entry.

The tolerance is measured: `--calibrate` runs the panel twice on the same sample and records how
often each judge repeats itself. A judge passes when its agreement with the entry is not
significantly below that (Fisher's exact test, one-sided, at the false-reject rate shared out
over the judges): an honest entry whose judges agree as a re-run does fails at most that often.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scipy.stats import fisher_exact

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.pipeline.audit import rate
from finreflect_eval.pipeline.cascade import grounded_triples
from finreflect_eval.pipeline.judging import (
    Panel,
    judge_request,
    provenance,
    run_judges,
    votes_of,
)
from finreflect_eval.protocol.criteria import CRITERIA, TRIPLE_CRITERIA, Label
from finreflect_eval.records import AuditItem, SampleRecord, Submission, Vote
from finreflect_eval.records.samples import item_scores
from finreflect_eval.tasks.config import TaskIndex

FALSE_REJECT = 0.01  # the chance an honest entry fails its audit (shared out over the judges)
DEFAULT_SIZE = 200
Verdicts = dict[str, list[Label | None]]  # per judge: one verdict per drawn item


def seed_of(entry_sha256: str) -> int:
    """The draw's seed: the first 64 bits of the entry's sha256."""
    return int(entry_sha256[:16], 16)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def judged_items(submission: Submission) -> dict[tuple[str, str], list[AuditItem]]:
    """Every item the entry's judges voted on, by stratum (task, criterion), in the samples'
    order; items voted by rule (a span without triples, the grounding cascade) are left out:
    no judge cast those votes."""
    panel = submission.results.judges.panel
    strata: dict[tuple[str, str], list[AuditItem]] = {}
    for task in sorted(submission.samples):
        for record in submission.samples[task]:
            by_criterion = record.votes.get(panel, {})
            for criterion in (c for c in CRITERIA if c in by_criterion):
                casts = list(by_criterion[criterion].values())
                n_items = max((len(cast) for cast in casts), default=0)
                for index in range(n_items):
                    if any(cast[index].synthetic for cast in casts):
                        continue
                    item = AuditItem(
                        task=task, span_id=record.span_id, criterion=criterion, index=index
                    )
                    strata.setdefault((task, criterion), []).append(item)
    return strata


def draw(submission: Submission, seed: int, size: int) -> list[AuditItem]:
    """`size` items (all, where the entry has fewer), shared out over the strata in proportion
    to their sizes (largest remainders), each stratum's drawn without replacement by a
    generator seeded with the seed and the stratum; in the samples' order."""
    strata = judged_items(submission)
    total = sum(len(items) for items in strata.values())
    if total <= size:
        return [item for items in strata.values() for item in items]
    quotas = {key: size * len(items) / total for key, items in strata.items()}
    taken = {key: math.floor(quota) for key, quota in quotas.items()}
    by_remainder = sorted(quotas, key=lambda key: (taken[key] - quotas[key], key))
    for key in by_remainder[: size - sum(taken.values())]:
        taken[key] += 1
    drawn = []
    for key, items in strata.items():
        generator = random.Random(f"{seed}:{key[0]}:{key[1]}")
        chosen = sorted(generator.sample(range(len(items)), taken[key]))
        drawn += [items[index] for index in chosen]
    return drawn


def rejudge(
    submission: Submission, items: Sequence[AuditItem], panel: Panel, cache_path: Path | None
) -> tuple[Verdicts, dict[str, dict[str, Any]]]:
    """The panel's verdict on each item, per judge, from prompts rebuilt from the task
    definitions and the entry's extraction; and each judge's `provenance`."""
    records = {(t, r.span_id): r for t, rows in submission.samples.items() for r in rows}
    manifest = submission.manifest
    index = TaskIndex()
    cascade = manifest.judging[submission.results.judges.panel].cascade is not None
    groups: dict[tuple[str, str, str], list[int]] = {}
    for number, item in enumerate(items):
        groups.setdefault((item.task, item.span_id, item.criterion), []).append(number)
    tasks = {}
    for name in {item.task for item in items}:
        task = index.tasks.get(name)
        if task is None or task.hash != manifest.tasks[name].hash:
            raise FinReflectError(
                f"the entry's task {name} (hash {manifest.tasks[name].hash}) is not this "
                "package's: audit it with the finreflect-eval version it was run with"
            )
        tasks[name] = task

    def asked_about(record: SampleRecord, criterion: str) -> list[int]:
        """The triples the entry's judges were asked about in this call (the cascade's)."""
        if criterion not in TRIPLE_CRITERIA:
            return list(range(len(record.triples)))
        return grounded_triples(record) if cascade else list(range(len(record.triples)))

    asked = {key: asked_about(records[key[:2]], key[2]) for key in groups}

    def work(spec: Any, lm: Any) -> tuple[list[Label | None], dict[str, Any]]:
        generation = panel.generation(spec)
        requests = [
            judge_request(
                tasks[task],
                criterion,
                records[(task, span)],
                [records[(task, span)].triples[i] for i in asked[(task, span, criterion)]],
                spec,
                generation,
            )
            for task, span, criterion in groups
        ]
        results = lm.generate(requests, desc=f"audit: judge {spec.name}")
        verdicts: list[Label | None] = [None] * len(items)
        for (key, numbers), result in zip(groups.items(), results, strict=True):
            votes = votes_of(key[2], len(asked[key]), result)
            for number in numbers:
                position = asked[key].index(items[number].index) if key[2] in TRIPLE_CRITERIA else 0
                verdicts[number] = votes[position].verdict
        return verdicts, provenance(lm)

    ran = run_judges(panel, cache_path, work)
    return {name: verdicts for name, (verdicts, _) in ran.items()}, {
        name: facts for name, (_, facts) in ran.items()
    }


def entry_verdicts(submission: Submission, items: Sequence[AuditItem]) -> dict[str, list[Vote]]:
    """Per judge of the entry, its vote on each item."""
    panel = submission.results.judges.panel
    records = {(t, r.span_id): r for t, rows in submission.samples.items() for r in rows}
    judges = [judge.name for judge in submission.manifest.judging[panel].judges]
    votes: dict[str, list[Vote]] = {judge: [] for judge in judges}
    for item in items:
        record = records.get((item.task, item.span_id))
        cast = record.votes.get(panel, {}).get(item.criterion, {}) if record else {}
        for judge in judges:
            mine = cast.get(judge, [])
            if item.index >= len(mine):
                raise FinReflectError(
                    f"the entry has no vote of judge {judge} on {item.task}, span "
                    f"{item.span_id}, {item.criterion}, item {item.index}"
                )
            votes[judge].append(mine[item.index])
    return votes


def compare(
    submission: Submission,
    items: Sequence[AuditItem],
    verdicts: Verdicts,
    rerun: Mapping[str, Sequence[int]],
    false_reject: float = FALSE_REJECT,
) -> dict[str, Any]:
    """How far the maintainers' verdicts agree with the entry's: per judge (and per criterion)
    the share of items where both gave the same verdict, with its Wilson interval; the score
    difference on the sample (the entry's panel majority minus the maintainers', ×100, with a
    paired 95% interval), per criterion and overall; and whether the audit passed: every
    judge's agreement not significantly below its re-run agreement (`rerun`: per judge, the
    calibration's `[same, n]`; `agreement_test` at `false_reject` shared out over the
    judges)."""
    theirs = entry_verdicts(submission, items)
    if sorted(theirs) != sorted(verdicts):
        raise FinReflectError(
            f"the entry's judges ({', '.join(theirs)}) are not the auditing panel's "
            f"({', '.join(verdicts)}): audit an entry with the panel it claims"
        )
    level = false_reject / len(verdicts)
    judges, failed = {}, []
    for judge, mine in verdicts.items():
        pairs = [
            (vote.verdict, again)
            for vote, again in zip(theirs[judge], mine, strict=True)
            if again is not None or vote.verdict is not None
        ]
        same = sum(a == b for a, b in pairs)
        if judge not in rerun:
            raise FinReflectError(f"the calibration has no re-run of judge {judge}")
        rerun_same, rerun_n = rerun[judge]
        tail, passed = agreement_test(same, len(pairs), rerun_same, rerun_n, level)
        per_criterion = {}
        for criterion in CRITERIA:
            picked = [
                vote.verdict == again
                for item, vote, again in zip(items, theirs[judge], mine, strict=True)
                if item.criterion == criterion and (again is not None or vote.verdict is not None)
            ]
            if picked:
                per_criterion[criterion] = rate(sum(picked), len(picked))
        judges[judge] = {**rate(same, len(pairs)), "p_value": _round(tail), "passed": passed}
        judges[judge]["criteria"] = per_criterion
        if not passed:
            share = judges[judge]
            failed.append(
                f"judge {judge} gives the entry's verdict on {same} of {len(pairs)} items "
                f"({_percent(share['rate'])}% [{_percent(share['ci'][0])}, "
                f"{_percent(share['ci'][1])}]), significantly below its re-run agreement "
                f"{_percent(rerun_same / rerun_n)}% ({rerun_same} of {rerun_n}; p = "
                f"{share['p_value']:.2g} < {level:.2g})"
            )
    agreed = sum(round(j["rate"] * j["n"]) for j in judges.values() if j["n"])
    n = sum(j["n"] for j in judges.values())
    return {
        "items": len(items),
        "agreement": rate(agreed, n),
        "judges": judges,
        "difference": _differences(items, theirs, verdicts),
        "passed": not failed,
        "reasons": failed,
    }


def agreement_test(
    same: int, n: int, rerun_same: int, rerun_n: int, level: float
) -> tuple[float, bool]:
    """One judge's audit: is its agreement with the entry (`same` of `n`) below its agreement
    with itself on a re-run (`rerun_same` of `rerun_n`)? Fisher's exact test, one-sided; the
    p-value, and whether it is above `level` (passed). Exact, so an honest entry fails at most
    `level` of the time whatever the calibration's size."""
    if not n or not rerun_n:
        return 1.0, True
    table = [[same, n - same], [rerun_same, rerun_n - rerun_same]]
    tail = float(fisher_exact(table, alternative="less").pvalue)
    return tail, tail > level


def _differences(
    items: Sequence[AuditItem], theirs: dict[str, list[Vote]], mine: Verdicts
) -> dict[str, Any]:
    """The entry's panel score minus the maintainers' on the drawn items (the majority of each
    panel, as scoring takes it; items either leaves unscored are left out), ×100, with a paired
    normal 95% interval; per criterion and over every item."""
    pairs: dict[str, list[float]] = {}
    for number, item in enumerate(items):
        entry = item_scores({judge: [votes[number]] for judge, votes in theirs.items()})[0]
        again = {judge: [Vote(verdict=verdicts[number])] for judge, verdicts in mine.items()}
        audit = item_scores(again)[0]
        if entry is not None and audit is not None:
            for key in (item.criterion, "overall"):
                pairs.setdefault(key, []).append(entry - audit)
    return {key: _mean_interval(values) for key, values in pairs.items()}


def _mean_interval(values: list[float]) -> dict[str, Any]:
    n = len(values)
    mean = sum(values) / n
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = 1.959964 * spread / math.sqrt(n)
    return {
        "score": round(100 * mean, 2),
        "ci": [round(100 * (mean - half), 2), round(100 * (mean + half), 2)],
        "n": n,
    }


def rerun_agreement(runs: Sequence[Mapping[str, list[Label | None]]]) -> dict[str, Any]:
    """A calibration's report: per judge, how often the first run's verdict repeats in every
    later run (items a run abstained on are left out), with its Wilson interval and its counts
    (`same`, `n`): what that judge's audits are compared with (`agreement_test`)."""
    judges = {}
    for judge in runs[0]:
        pairs = [
            (first, other[judge][number])
            for other in runs[1:]
            for number, first in enumerate(runs[0][judge])
            if first is not None and other[judge][number] is not None
        ]
        same = sum(a == b for a, b in pairs)
        judges[judge] = {**rate(same, len(pairs)), "same": same}
    if not any(j["n"] for j in judges.values()):
        raise FinReflectError("calibration: no item got a verdict in every run")
    return {"judges": judges}


def _round(value: float) -> float:
    return round(value, 4)


def _percent(value: float) -> str:
    return f"{100 * value:.1f}"
