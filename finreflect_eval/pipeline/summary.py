"""The Markdown summaries the command line prints: after an extraction, one row per task; after
scoring, lm-eval's settings line, then one row per task and group with each criterion's CI and
the judges' α, and the overall score."""

from __future__ import annotations

from typing import Any

from finreflect_eval._util.tables import markdown_table
from finreflect_eval.protocol.criteria import (
    COMPREHENSIVENESS_LEVELS,
    CRITERIA,
    REASONING_WORDS,
    level_shares,
)
from finreflect_eval.records import Results
from finreflect_eval.records.cost import Usage, UsageRate, figure_text
from finreflect_eval.records.downstream import CONDITIONS, Measure
from finreflect_eval.runs.store import Run
from finreflect_eval.stats.agreement import ALPHA_GATE

_C = list(CRITERIA).index("comprehensiveness")  # its column among the criteria's


def extraction_table(run: Run) -> str:
    """The extraction's summary: one row per task."""
    rows = []
    for task, records in run.records.items():
        n = len(records)
        seconds = run.manifest.tasks[task].seconds
        rows.append(
            [
                task,
                run.manifest.tasks[task].mode,
                n,
                sum(r.failed for r in records),
                f"{sum(len(r.triples) for r in records) / max(n, 1):.1f}",
                f"{sum(r.iterations for r in records) / max(n, 1):.1f}",
                sum(r.prompt_tokens + r.completion_tokens for r in records),
                f"{seconds / max(n, 1):.1f}",
            ]
        )
    header = ["task", "mode", "spans", "failed", "triples/span", "iterations", "tokens", "s/span"]
    return "\n" + markdown_table(header, rows) + "\n"


def settings_line(results: Results) -> str:
    """lm-eval's line above its table: model, model args, gen_kwargs, limit, num_fewshot and
    batch size (with the sizes `auto` found), then the replicas of a data-parallel run."""
    config = results.config
    args = ",".join(f"{key}={value}" for key, value in config.model_args.items())
    model = f"{config.model} ({args})" if args else config.model
    gen_kwargs = ",".join(f"{key}={value}" for key, value in config.gen_kwargs.items())
    shots = set(results.n_shot[task] for task in results.tasks)
    found = f" ({','.join(map(str, config.batch_sizes))})" if config.batch_sizes else ""
    chosen = ""  # how a run on part of the data chose its spans (not in lm-eval's line)
    if config.sections:
        chosen += f", sections: {','.join(config.sections)}"
    if config.samples is not None:
        counts = ",".join(f"{task}={len(ids)}" for task, ids in config.samples.items())
        chosen += f", samples: ({counts})"
    thinking = f", think: {config.thinking()}" if config.thinking() else ""
    replicas = ""
    if config.replicas:  # data parallel: how the requests were shared out
        shares = " + ".join(str(replica.requests) for replica in config.replicas)
        replicas = f", replicas: {config.data_parallel_size} ({shares} requests)"
    return (
        f"{model}, gen_kwargs: ({gen_kwargs or None}), limit: {config.limit}{chosen}, num_fewshot: "
        f"{shots.pop() if len(shots) == 1 else None}, batch_size: {config.batch_size}{found}"
        f"{thinking}{replicas}"
    )


def results_table(results: Results) -> str:
    """The scores' summary: the settings line, then one row per group and task, like lm-eval's
    table but with each criterion's CI and the judges' α, then the overall score."""
    letters = {name: criterion.letter for name, criterion in CRITERIA.items()}
    rows = []
    for name in results.results:
        if name in results.details:
            rows.append(_task_row(results, name, letters))
        else:  # a group: its tasks' means
            entry = results.results[name]
            subtasks = results.group_subtasks[name]
            cells = [_with_ci(entry.get(f"{c},none"), None) for c in letters]
            cells[_C] += shares_text(results, subtasks)
            spans = max(results.details[t].n_spans for t in subtasks)
            rows.append([name, "group", spans, *cells, *_extraction_cells(entry)])
    header = ["task", "mode", "spans", *letters.values(), "triples/span", "CheckRules"]
    header[3 + _C] += f" ({'/'.join(COMPREHENSIVENESS_LEVELS)} %)"
    panel = results.judges.panel
    note = results.judges.note()
    note = f" ({note})" if note else ""
    overall = results.overall
    filings = len(results.filings.ids) if results.filings else None
    by_span = f"; resampling spans: {_with_ci(overall.score, overall.ci_span)}"
    return (
        f"\n{settings_line(results)}\njudges: {panel}{note}\n"
        + markdown_table(header, rows)
        + f"\noverall: {_overall_text(overall, filings, by_span)}\n"
        + few_filings_line(overall)
        + agreement_table(results)
        + influence_line(results)
        + protocol_line(results)
        + failed_calls_line(results)
        + always_agree_line(results)
        + graph_lines(results)
        + human_table(results)
        + worth_table(results)
        + downstream_table(results)
        + cost_table(results)
    )


def downstream_table(results: Results) -> str:
    """Per downstream task (`downstream`): its questions' evidence recall, path connectivity
    and KG-QA score per condition, each with its filing interval."""
    rows = [
        [
            task,
            block.questions,
            _measure(block.evidence_recall),
            _measure(block.evidence_recall_entities),
            _measure(block.path_connected),
            *(_measure(block.qa.get(c)) for c in CONDITIONS),
        ]
        for task, block in results.downstream.items()
    ]
    if not rows:
        return ""
    header = ["downstream", "questions", "evidence recall", "(entities)", "path ≤ k"]
    header += [f"QA: {c.replace('_', ' ')}" for c in CONDITIONS]
    return "\n" + markdown_table(header, rows)


def _measure(measure: Measure | None) -> str:
    return "—" if measure is None else _with_ci(measure.value, measure.ci)


def cost_table(results: Results) -> str:
    """Per task, what the extraction and each judge used (`cost`): calls, answers from the
    cache, tokens (of the prompt's, those cached), seconds, device seconds, money; the total,
    and per 1,000 triples."""
    rows = []
    for task, cost in results.cost.items():
        parts = [("extraction", cost.extraction), ("normalizer", cost.normalizer)]
        parts += [*cost.judging.items(), ("total", cost.total)]
        for stage, usage in parts:
            if usage is None:  # no normaliser of its own
                continue
            model = getattr(usage, "model", "")
            rows.append([task, stage, model, *_usage_cells(usage, cost.currency)])
        if cost.per_1k_triples is not None:
            rows.append(
                [task, "per 1k triples", "", *_usage_cells(cost.per_1k_triples, cost.currency)]
            )
    if not rows:
        return ""
    header = ["cost", "stage", "model", "calls", "from cache", "prompt tokens (cached)"]
    header += ["completion tokens (thinking)", "seconds", "device s", "money"]
    lines = [f"\ncost:\n{markdown_table(header, rows)}\n"]
    for task, cost in results.cost.items():
        if cost.total.cache_hits and not cost.total.calls:
            lines.append(
                f"{task}: all {cost.total.cache_hits} calls answered from the response cache: "
                "nothing new spent\n"
            )
        if cost.unpriced:
            lines.append(f"{task}: no price for {', '.join(cost.unpriced)}: no total money\n")
    return "".join(lines)


def _usage_cells(usage: Usage | UsageRate, currency: str | None) -> list[str]:
    """A usage's figures as the results hold them: the cached prompt tokens after the prompt's,
    the thinking tokens after the completion's."""
    rate = isinstance(usage, UsageRate)
    keys = ("calls", "cache_hits", "prompt_tokens", "cached_prompt_tokens", "completion_tokens")
    keys += ("reasoning_tokens", "seconds", "device_seconds", "money")
    calls, hits, prompt, cached, completion, thinking, *rest = (
        figure_text(key, getattr(usage, key), currency, rate) for key in keys
    )
    return [calls, hits, f"{prompt} ({cached})", f"{completion} ({thinking})", *rest]


def graph_lines(results: Results) -> str:
    """Per task, the graph its triples make and the figures its spans ground (`graph`)."""
    lines = []
    for task, graph in results.graph.items():
        quality, grounding = graph.overall, graph.grounding
        share = quality.fragmented_share
        lines.append(
            f"graph {task}: {quality.entities} entities, {quality.edges} edges, "
            f"{'n/a' if share is None else f'{100 * share:.0f}%'} fragmented, "
            f"{quality.duplicate_triples} duplicate(s), {quality.contradictions} "
            f"contradiction(s), {quality.invalid_type_pairs} type conflict(s); figures grounded: "
            f"{grounding.grounded} of {grounding.checked}"
        )
        if graph.cascade:
            lines[-1] += (
                f"; cascade: {graph.cascade['triples_skipped']} ungrounded triple(s) scored 0 "
                f"unjudged, {graph.cascade['judge_calls_saved']} judge call(s) saved"
            )
    return "".join(f"{line}\n" for line in lines)


def human_table(results: Results) -> str:
    """The panel checked against people's labels (`review import`), where the run has any: per
    task and criterion the labels, the panel's score and the prediction-powered one beside it,
    and the panel's agreement with the people."""
    rows = []
    for task, criteria in results.human.items():
        for name, check in criteria.items():
            agreement = check.panel_agreement
            rows.append(
                [
                    task,
                    CRITERIA[name].letter,
                    f"{check.audit_labels}/{check.labels}"
                    + (f" ({check.unresolved} tied)" if check.unresolved else ""),
                    _with_ci(check.panel, None),
                    _with_ci(check.ppi, check.ppi_ci),
                    _ratio_with_ci(agreement.accuracy, agreement.accuracy_ci),
                    _ratio_with_ci(agreement.kappa, agreement.kappa_ci),
                    alpha_text(check.alpha_with_people),
                ]
            )
    if not rows:
        return ""
    header = ["people", "", "labels (audit/all)", "panel", "PPI", "accuracy", "κ", "α with people"]
    note = "agreement on the audit where it has labels; PPI from the audit only"
    return f"\nchecked against people ({note}):\n" + markdown_table(header, rows) + "\n"


def worth_table(results: Results) -> str:
    """What the panel's votes are worth (`results.judges_worth`): per task and criterion, the
    judges' mean error correlation and effective number, against people where they labeled,
    else against the other judges; and where the best judge alone agrees with people as well
    as the panel, a line saying so."""
    rows, lines = [], []
    for task, criteria in results.judges_worth.items():
        for name, found in criteria.items():
            against = found.people or found.panel
            rows.append(
                [
                    task,
                    CRITERIA[name].letter,
                    "people" if found.people else "the other judges",
                    _ratio_with_ci(
                        against.mean_error_correlation, against.mean_error_correlation_ci
                    ),
                    f"{_ratio_with_ci(against.effective_judges, against.effective_judges_ci)}"
                    f" of {len(against.judges)}",
                ]
            )
            people = found.people
            if people and people.best_as_good:
                ci = people.best_minus_majority_ci
                lines.append(
                    f"{task} {CRITERIA[name].letter}: the best single judge ({people.best_judge}) "
                    f"agrees with people as well as the panel: accuracy "
                    f"{people.best_minus_majority:+.1f} [{ci[0]:+.1f}, {ci[1]:+.1f}] points"
                )
    if not rows:
        return ""
    header = ["judges' worth", "", "errors against", "error correlation", "effective judges"]
    return (
        "\nwhat the judges' votes are worth (errors against people where they labeled; against "
        "the other judges a diagnostic only):\n"
        + markdown_table(header, rows)
        + "".join(f"{line}\n" for line in lines)
    )


def _ratio_with_ci(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _overall_text(overall: Any, filings: int | None, by_span: str) -> str:
    if overall.score is None and overall.unscored:
        return f"n/a (no score for {', '.join(overall.unscored)}: not a mean of the others)"
    spans = by_span if overall.ci_span else ""
    return f"{_with_ci(overall.score, overall.ci)} (95% CI resampling {filings} filing(s){spans})"


def failed_calls_line(results: Results) -> str:
    """Per judge, its failed calls (abstentions) over every task, when any failed."""
    failed: dict[str, int] = {}
    calls = 0
    for details in results.details.values():
        calls += details.failures.judge_calls_each
        for judge, count in details.failures.judge_failed_calls.items():
            failed[judge] = failed.get(judge, 0) + count
    parts = [f"{judge} {count} of {calls}" for judge, count in failed.items() if count]
    return f"⚠ judge calls failed (abstentions): {', '.join(parts)}\n" if parts else ""


def always_agree_line(results: Results) -> str:
    if not results.judges.always_agree:
        return ""
    return (
        "⚠ the judges gave every item the same label: a panel that never disagrees shows "
        "nothing by agreeing (the same model more than once?)\n"
    )


def protocol_line(results: Results) -> str:
    """A warning naming each judge that broke the judge protocol on any task: reasonings over
    `REASONING_WORDS` words, answers with a reasoning before the verdict (votes kept)."""
    totals: dict[str, list[int]] = {}
    for details in results.details.values():
        for judge, kept in details.judge_protocol.items():
            counts = totals.setdefault(judge, [0, 0, 0, 0])
            for position, value in enumerate(
                (kept.long_reasoning, kept.votes, kept.reasoning_first, kept.calls)
            ):
                counts[position] += value
    parts = []
    for judge, (long, votes, first, calls) in totals.items():
        if long:
            parts.append(f"{judge}: {long} of {votes} reasonings over {REASONING_WORDS} words")
        if first:
            parts.append(f"{judge}: reasoning before the verdict in {first} of {calls} answers")
    if not parts:
        return ""
    return f"⚠ judge protocol (votes kept): {'; '.join(parts)}\n"


def few_filings_line(overall: Any) -> str:
    """A warning when the intervals rest on too few filings to be trusted."""
    if overall.ci_reliable is not False:
        return ""
    return (
        f"⚠ intervals unreliable: {overall.n_filings} filing(s) only ({overall.ci_method}); "
        "they cannot show how filings vary\n"
    )


def agreement_table(results: Results) -> str:
    """Krippendorff's α per task and criterion with its interval (the ordinal one beside it for
    ordered labels), and a warning naming any criterion below the gate."""
    letters = {name: criterion.letter for name, criterion in CRITERIA.items()}
    rows, gated = [], {}
    for task, agreement in results.agreement.items():
        rows.append([task, *(alpha_text(agreement[c]) if c in agreement else "—" for c in letters)])
        for criterion, values in agreement.items():
            gated[criterion] = gated.get(criterion, 0) + values.below_gate
    table = "\n" + markdown_table(["α", *letters.values()], rows) + "\n" if rows else ""
    below = [f"{c} ({n} of {len(rows)} tasks)" for c, n in gated.items() if n]
    warning = (
        f"\nα below {ALPHA_GATE} (its interval's upper end) on {', '.join(below)}: the judges "
        "agree too little there for the scores to be trusted.\n"
        if below
        else ""
    )
    return table + warning


def influence_line(results: Results) -> str:
    """Per criterion (and Overall), the judge with the largest influence: the points it adds
    to the score beside the other judges (`CriterionDetail.judge_influence`), with its interval
    and whether that leaves 0 out (the judge moves the score beyond chance)."""
    largest = []
    for name, criterion in CRITERIA.items():
        influences = [
            (value, judge, details.criteria[name].judge_influence_ci.get(judge))
            for details in results.details.values()
            if name in details.criteria
            for judge, value in details.criteria[name].judge_influence.items()
            if value is not None
        ]
        largest.append(_largest(criterion.letter, influences))
    overall = [
        (value, judge, results.overall.judge_influence_ci.get(judge))
        for judge, value in results.overall.judge_influence.items()
        if value is not None
    ]
    shown = [text for text in [*largest, _largest("overall", overall)] if text]
    return f"judge influence, largest: {', '.join(shown)}\n" if shown else ""


def _largest(label: str, moves: list[tuple[float, str, list[float] | None]]) -> str:
    if not moves:
        return ""
    shift, judge, ci = max(moves, key=lambda move: abs(move[0]))
    if ci is None:
        return f"{label} {shift:+.1f} ({judge})"
    verdict = "moves the score" if moves_score(ci) else "within chance"
    return f"{label} {shift:+.1f} [{ci[0]:+.1f}, {ci[1]:+.1f}] ({judge}, {verdict})"


def moves_score(ci: list[float] | None) -> bool:
    """A judge's influence interval leaves 0 out: it moves the score beyond chance."""
    return ci is not None and (ci[0] > 0 or ci[1] < 0)


def alpha_text(agreement: Any) -> str:
    """α with its interval, `0.71 [0.64, 0.78]`, the ordinal one after it where there is one
    (`ord 0.80 [...]`), `n/a` when undefined, `⚠` when below the gate; of an `Agreement` or its
    dict."""
    values = agreement if isinstance(agreement, dict) else agreement.model_dump()
    if values.get("alpha") is None:
        return "n/a"
    text = f"{values['alpha']:.2f}"
    if values.get("ci"):
        text += " [{:.2f}, {:.2f}]".format(*values["ci"])
    if values.get("ordinal") is not None:
        text += f" ord {values['ordinal']:.2f}"
        if values.get("ordinal_ci"):
            text += " [{:.2f}, {:.2f}]".format(*values["ordinal_ci"])
    return text + (" ⚠" if values.get("below_gate") else "")


def shares_text(results: Results, tasks: list[str]) -> str:
    """` (40/35/25)`: the shares of the tasks' scored spans at each comprehensiveness level
    (good/partial/poor, in %), or nothing where none is scored."""
    pooled: dict[str, int] = {}
    for task in tasks:
        detail = results.details[task].criteria.get("comprehensiveness")
        for level, count in ((detail and detail.level_counts) or {}).items():
            pooled[level] = pooled.get(level, 0) + count
    shares = level_shares(pooled)
    return " ({})".format("/".join(f"{s:.0f}" for s in shares.values())) if shares else ""


def _task_row(results: Results, task: str, letters: dict[str, str]) -> list[Any]:
    entry, details = results.results[task], results.details[task]
    cells = []
    for name in letters:
        ci = details.criteria[name].ci if name in details.criteria else None
        cells.append(_with_ci(entry.get(f"{name},none"), ci))
    cells[_C] += shares_text(results, [task])
    in_group = any(task in results.group_subtasks.get(group, []) for group in results.groups)
    name = f" - {task}" if in_group else task  # as lm-eval indents a group's tasks
    return [name, details.mode, details.n_spans, *cells, *_extraction_cells(entry)]


def _extraction_cells(entry: dict[str, Any]) -> list[str]:
    per_span, rules = entry.get("triples_per_span,none"), entry.get("check_rules,none")
    return [
        "—" if per_span is None else f"{per_span:.1f}",
        "—" if rules is None else f"{rules:.1f}",
    ]


def _with_ci(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")
