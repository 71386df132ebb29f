"""Judge reliability (`audit-judges`): agreement of each judge and of the panel majority with gold
labels, and bias probes that measure what the judge prompts only ask for.

Cases are judge calls: a span, a criterion and a list of items (triples, or the span's triple set
for comprehensiveness). Gold cases come from the dataset's `judgments`; each probe derives cases
from them deterministically (seeded):

- position: the triple list shuffled (seeded); span_order: the span's paragraphs rotated;
  verbosity: every object restated at greater length, same meaning. Reported as the share of a
  judge's verdicts that differ from its verdict on the same item in the gold case (flip rate).
- leniency: unsupported triples planted about the filer; world_knowledge: triples true in the
  world but absent from the span. Both must get 0 on faithfulness; the flip rate is the share
  accepted (false accepts).

Rates come with a 95% Wilson interval. The audit file keeps every case and verdict, so its
report can be recomputed (and is, when it is submitted to the leaderboard).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.resources import load_yaml, tasks_dir
from finreflect_eval._util.tables import markdown_table
from finreflect_eval._util.version import __version__
from finreflect_eval.data import Benchmark
from finreflect_eval.models import LM
from finreflect_eval.pipeline.judging import JudgeSpec, Panel, judge_request, run_judges, votes_of
from finreflect_eval.pipeline.summary import alpha_text
from finreflect_eval.protocol.criteria import CRITERIA, TRIPLE_CRITERIA, Label
from finreflect_eval.protocol.schema import Triple
from finreflect_eval.records import Case, JudgeAudit, ProbeSpan
from finreflect_eval.runs.store import run_id, write_atomic
from finreflect_eval.stats.agreement import ALPHA_GATE
from finreflect_eval.stats.metrics import Item, aggregate, krippendorff_alpha
from finreflect_eval.tasks.config import Task

PROBES = ("position", "span_order", "verbosity", "leniency", "world_knowledge")
PLANTED = ("leniency", "world_knowledge")  # probes whose items must all get 0
VERBOSE_SUFFIX = " (as stated in this filing)"
PANEL_ROW = "panel (majority)"
Verdicts = list[list[Label | None]]  # a judge's verdicts: per case, per item
GoldPositions = dict[tuple[str, str, str], tuple[int, int]]


# --- cases ---


def gold_cases(benchmark: Benchmark) -> list[Case]:
    """One case per (span, criterion) with gold labels; comprehensiveness judges the span's
    reference triples (that is what its gold label is about)."""
    spans = {span.span_id: span for span in benchmark.spans}
    references = benchmark.triples_by_span()
    grouped: dict[tuple[str, str], list[Any]] = {}
    for judgment in benchmark.judgments:
        if judgment.span_id in spans:
            grouped.setdefault((judgment.span_id, judgment.criterion), []).append(judgment)
    cases = []
    order = list(CRITERIA)
    for (span_id, criterion), judgments in sorted(
        grouped.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))
    ):
        span = spans[span_id]
        view = ProbeSpan(span_id=span_id, ticker=span.ticker, section=span.section, text=span.text)
        if criterion in TRIPLE_CRITERIA:
            judgments = sorted(judgments, key=lambda j: j.triple_id)
            triples = [j.triple for j in judgments]
            keys = [j.triple_id for j in judgments]
            expected: list[Label | None] = [int(j.label) for j in judgments]
        elif references.get(span_id):
            triples = [t.triple for t in references[span_id]]
            keys, expected = [span_id], [judgments[0].label]
        else:
            continue
        cases.append(
            Case(
                probe="gold",
                criterion=criterion,
                span=view,
                triples=triples,
                keys=keys,
                expected=expected,
            )
        )
    return cases


def probe_cases(gold: Sequence[Case], probes: Sequence[str], seed: int) -> list[Case]:
    """The probe cases derived from the gold cases, the same for the same seed."""
    material = load_yaml(tasks_dir() / "judges" / "probes" / "probes.yaml", "probe material")

    # One generator per probe and span: a probe's items do not depend on the other probes chosen.
    def rng(probe: str, span_id: str) -> random.Random:
        return random.Random(f"{seed}:{probe}:{span_id}")

    cases: list[Case] = []
    for case in gold:
        per_triple = case.criterion in TRIPLE_CRITERIA
        if "position" in probes and len(case.triples) > 1:
            # One seeded shuffle that moves the list (for two triples: the reversal).
            order = list(range(len(case.triples)))
            shuffled = order[::-1]
            shuffler = rng(f"position:{case.criterion}", case.span.span_id)
            while len(order) > 2 and shuffled in (order, order[::-1]):
                shuffler.shuffle(shuffled)
            cases.append(_permuted(case, shuffled, per_triple))
        if "span_order" in probes:
            paragraphs = case.span.text.split("\n\n")
            if len(paragraphs) > 1:
                moved = paragraphs[1:] + paragraphs[:1]  # a rotation: every paragraph moves
                span = case.span.model_copy(update={"text": "\n\n".join(moved)})
                cases.append(case.model_copy(update={"probe": "span_order", "span": span}))
        if "verbosity" in probes:
            longer = [
                t.model_copy(update={"object": t.object + VERBOSE_SUFFIX}) for t in case.triples
            ]
            cases.append(case.model_copy(update={"probe": "verbosity", "triples": longer}))
    spans = {case.span.span_id: case.span for case in gold}
    for span in spans.values():
        text = span.text.lower()
        absent = {
            relation: [o for o in spec["objects"] if o.lower() not in text] or [""]
            for relation, spec in material["leniency"].items()
        }
        planted = {
            "leniency": [
                (relation, rng("leniency", span.span_id).choice(absent[relation]), spec["type"])
                for relation, spec in material["leniency"].items()
            ],
            "world_knowledge": [
                tuple(fact)
                for fact in material["world_knowledge"].get(span.ticker, [])
                if str(fact[1]).lower() not in text
            ],
        }
        for probe in PLANTED:
            triples = [
                Triple(subject=span.ticker, subject_type="ORG", relation=r, object=o, object_type=t)
                for r, o, t in planted[probe]
                if o
            ]
            if probe in probes and triples:
                keys = [f"{probe}:{span.span_id}:{i}" for i in range(len(triples))]
                case = Case(
                    probe=probe,
                    criterion="faithfulness",
                    span=span,
                    triples=triples,
                    keys=keys,
                    expected=[0] * len(triples),
                )
                cases.append(case)
    return cases


def _permuted(case: Case, order: list[int], per_triple: bool) -> Case:
    return case.model_copy(
        update={
            "probe": "position",
            "triples": [case.triples[i] for i in order],
            "keys": [case.keys[i] for i in order] if per_triple else case.keys,
            "expected": [case.expected[i] for i in order] if per_triple else case.expected,
        }
    )


# --- running ---


def run_audit(
    panel: Panel,
    task: Task,
    benchmark: Benchmark,
    *,
    probes: Sequence[str] = PROBES,
    seed: int = 1234,
    limit: int | None = None,
    cache_path: Path | None = None,
) -> JudgeAudit:
    """Judge every case with every judge; returns the audit (cases, verdicts, report)."""
    unknown = sorted(set(probes) - set(PROBES))
    if unknown:
        raise FinReflectError(f"unknown probe '{unknown[0]}'; known: {', '.join(PROBES)}")
    if not task.config.judge_prompts:
        raise FinReflectError(f"{task.path}: field 'judge_prompts': the task has none")
    gold = gold_cases(benchmark)
    if not gold:
        raise FinReflectError(f"dataset {benchmark.dataset} has no gold judgments to audit with")
    cases = gold + probe_cases(gold, probes, seed)

    def ask(spec: JudgeSpec, lm: LM) -> tuple[list[list[Label | None]], dict[str, float]]:
        started = time.perf_counter()
        generation = panel.generation(spec)
        requests = [
            judge_request(task, case.criterion, case.span, case.triples, spec, generation)
            for case in cases
        ]
        results = lm.generate(requests, desc=f"audit {spec.name}")
        verdicts = [
            [vote.verdict for vote in votes_of(case.criterion, len(case.triples), result)]
            for case, result in zip(cases, results, strict=True)
        ]
        return verdicts, {
            "n_calls": len(results),
            "failed_calls": sum(not r.ok for r in results),
            "seconds": round(time.perf_counter() - started, 3),
            "prompt_tokens": sum(r.prompt_tokens for r in results),
            "completion_tokens": sum(r.completion_tokens for r in results),
        }

    answers = run_judges(panel, cache_path, ask)
    verdicts = {name: answer[0] for name, answer in answers.items()}
    calls = {name: answer[1] for name, answer in answers.items()}
    audit = JudgeAudit(
        date=run_id(),
        panel={
            "panel": panel.panel,
            "official": panel.official,
            "members": [j.model_dump() for j in panel.judges],
        },
        task={"name": task.name, "hash": task.hash},
        dataset=benchmark.info(limit),
        probes=list(probes),
        seed=seed,
        finreflect_eval_version=__version__,
        cases=cases,
        verdicts=verdicts,
        calls=calls,
        report={},
    )
    audit.report = compute_report(audit)
    return audit


# --- the report: a pure function of cases, verdicts and call counts ---


def cohen_kappa(pairs: Sequence[tuple[Label, Label]]) -> float | None:
    """Cohen's κ of (judge, gold) label pairs; None when undefined (no pairs, or chance
    agreement is 1, i.e. both sides always give the same single label)."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    labels = {label for pair in pairs for label in pair}
    expected = sum(
        (sum(a == label for a, _ in pairs) / n) * (sum(b == label for _, b in pairs) / n)
        for label in labels
    )
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> list[float] | None:
    """95% Wilson score interval of a proportion."""
    if n == 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def rate(hits: int, n: int) -> dict[str, Any]:
    """A share with its 95% Wilson interval and its count, rounded to 4 digits."""
    interval = wilson_interval(hits, n)
    return {
        "rate": _round(hits / n) if n else None,
        "ci": interval and [_round(v) for v in interval],
        "n": n,
    }


def compute_report(audit: JudgeAudit) -> dict[str, Any]:
    """Per judge and for the panel majority: accuracy, κ, false accept/reject per criterion,
    flip rate per probe, call costs; and α per criterion. A pure function of the audit's cases,
    verdicts and calls."""
    # The panel majority is one more "judge" for every measure.
    rows = {**audit.verdicts, PANEL_ROW: _panel_majority(audit)}
    gold = _gold_positions(audit.cases)
    return {
        "judges": {
            name: _judge_report(audit, verdicts, gold, audit.calls.get(name))
            for name, verdicts in rows.items()
        },
        "agreement": {criterion: _agreement(audit, criterion) for criterion in CRITERIA},
    }


def _panel_majority(audit: JudgeAudit) -> Verdicts:
    """The panel's majority verdict on every item of every case."""
    return [
        [
            aggregate({judge: verdicts[c][i] for judge, verdicts in audit.verdicts.items()}).label
            for i in range(len(case.keys))
        ]
        for c, case in enumerate(audit.cases)
    ]


def _gold_positions(cases: Sequence[Case]) -> GoldPositions:
    """Where each item of the gold cases is (case, item), by criterion, span and item key: the
    verdict a probe's item is compared with."""
    return {
        (case.criterion, case.span.span_id, key): (c, i)
        for c, case in enumerate(cases)
        if case.probe == "gold"
        for i, key in enumerate(case.keys)
    }


def _judge_report(
    audit: JudgeAudit, verdicts: Verdicts, gold: GoldPositions, calls: dict[str, float] | None
) -> dict[str, Any]:
    """One judge's (or the majority's) row: per criterion its agreement with the gold labels,
    per probe its flip rate, and the cost of its calls (a judge that made any)."""
    report: dict[str, Any] = {
        "criteria": {c: _gold_agreement(audit.cases, verdicts, c) for c in CRITERIA},
        "probes": {p: _flip_rate(audit.cases, verdicts, p, gold) for p in audit.probes},
    }
    if calls:
        per_call = max(calls["n_calls"], 1)
        report["calls"] = {
            "failure_rate": _round(calls["failed_calls"] / per_call),
            "seconds_per_judgment": _round(calls["seconds"] / per_call),
            "tokens_per_judgment": _round(
                (calls["prompt_tokens"] + calls["completion_tokens"]) / per_call
            ),
        }
    return report


def _gold_agreement(cases: Sequence[Case], verdicts: Verdicts, criterion: str) -> dict[str, Any]:
    """A judge's verdicts on one criterion's gold items against their labels: accuracy, κ,
    failed verdicts and, per triple, the false accept and reject rates."""
    pairs, failures = [], 0
    for c, case in enumerate(cases):
        if case.probe != "gold" or case.criterion != criterion:
            continue
        for verdict, gold in zip(verdicts[c], case.expected, strict=True):
            if verdict is None:
                failures += 1
            elif gold is not None:
                pairs.append((verdict, gold))
    entry: dict[str, Any] = {
        "n": len(pairs) + failures,
        "accuracy": _round(sum(a == b for a, b in pairs) / len(pairs)) if pairs else None,
        "kappa": _round(cohen_kappa(pairs)),
        "failures": failures,
    }
    if criterion in TRIPLE_CRITERIA:
        flawed = [a for a, b in pairs if b == 0]
        good = [a for a, b in pairs if b == 1]
        entry["false_accept"] = rate(sum(a == 1 for a in flawed), len(flawed))
        entry["false_reject"] = rate(sum(a == 0 for a in good), len(good))
    return entry


def _flip_rate(
    cases: Sequence[Case], verdicts: Verdicts, probe: str, gold: GoldPositions
) -> dict[str, Any]:
    """The share of a probe's items where the judge's verdict differs from its verdict on the
    same gold item (a planted item's reference is 0: the share accepted)."""
    flips = n = 0
    for c, case in enumerate(cases):
        if case.probe != probe:
            continue
        for i, key in enumerate(case.keys):
            verdict = verdicts[c][i]
            if probe in PLANTED:
                reference = 0
            else:
                where = gold.get((case.criterion, case.span.span_id, key))
                reference = None if where is None else verdicts[where[0]][where[1]]
            if verdict is None or reference is None:
                continue
            n += 1
            flips += verdict != reference
    return rate(flips, n)


def _agreement(audit: JudgeAudit, criterion: str) -> dict[str, Any]:
    """The judges' α on one criterion's gold items, with its interval."""
    # Resampling companies: a probe span shows its ticker, not its year, so a company's filings
    # stay together (which can only widen the interval).
    items = [
        Item(
            case.span.span_id,
            criterion,
            i,
            {judge: verdicts[c][i] for judge, verdicts in audit.verdicts.items()},
            filing=case.span.ticker,
        )
        for c, case in enumerate(audit.cases)
        if case.probe == "gold" and case.criterion == criterion
        for i in range(len(case.keys))
    ]
    return krippendorff_alpha(items, list(audit.verdicts), seed=audit.seed)


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def audit_table(audit: JudgeAudit) -> str:
    """Rows: each judge and the panel majority; columns: accuracy and κ per criterion, flip rate
    per probe, and α within the panel (panel row)."""
    report = audit.report
    header = ["judge"]
    for criterion in CRITERIA.values():
        header += [f"acc {criterion.letter}", f"κ {criterion.letter}"]
    header += [f"flip {p}" for p in audit.probes] + ["α F/P/R/C"]
    alphas = " / ".join(alpha_text(a) for a in report["agreement"].values())
    rows = []
    for name, entry in report["judges"].items():
        row = [name]
        for criterion in CRITERIA:
            values = entry["criteria"][criterion]
            kappa = values["kappa"]
            row += [_percent(values["accuracy"]), "—" if kappa is None else f"{kappa:.2f}"]
        row += [_percent(entry["probes"][p]["rate"]) for p in audit.probes]
        row.append(alphas if name == PANEL_ROW else "")
        rows.append(row)
    note = "" if audit.panel["official"] else " (not an official panel)"
    gated = [c for c, a in report["agreement"].items() if a.get("below_gate")]
    gate = (
        f"\nα below {ALPHA_GATE} (its interval's upper end) on {', '.join(gated)}: this panel "
        "agrees too little there for its scores to be trusted; a run it judges is flagged on "
        "the leaderboard.\n"
        if gated
        else ""
    )
    return (
        f"\njudge audit: panel {audit.panel['panel']}{note}\n" + markdown_table(header, rows) + gate
    )


def write_audit(audit: JudgeAudit, output_path: Path) -> Path:
    output_path.mkdir(parents=True, exist_ok=True)
    path = output_path / f"judge_audit_{audit.date}.json"
    write_atomic(path, audit.model_dump_json(indent=1) + "\n")
    write_atomic(output_path / f"judge_audit_{audit.date}.md", audit_table(audit) + "\n")
    return path
