"""The leaderboard's rows: one flat row per submission (its scores per mode and criterion, the
judges' agreement, its place among the entries it is compared with, its data version), and one
row per judge of each judge audit. What `render` writes as JSON, CSV and the page."""

from __future__ import annotations

import math
from typing import Any

from finreflect_eval.leaderboard import ranking
from finreflect_eval.leaderboard.entries import AuditEntry, RunEntry
from finreflect_eval.leaderboard.ranking import Contender, Standing
from finreflect_eval.leaderboard.validity import downstream_columns
from finreflect_eval.pipeline.audit import PANEL_ROW
from finreflect_eval.protocol.criteria import COMPREHENSIVENESS_LEVELS, CRITERIA, level_shares
from finreflect_eval.protocol.modes import MODE_NAMES
from finreflect_eval.records import DatasetInfo, Results, Submission

LETTERS = {name: criterion.letter for name, criterion in CRITERIA.items()}
MODES = MODE_NAMES


SECTIONS = ("official", "community", "smoke")
HUMAN_COLUMNS = (  # an entry's audit by people (`_human`): None where it has none
    "human_audit",
    "human_labels",
    "human_annotators",
    "human_accuracy",
    "human_kappa",
    "human_ppi",
    "human_panel",
    "human_ppi_covers",
    "human",
)
GRAPH_COLUMNS = (  # the graph its triples make, over the entry's tasks (`_graph`)
    "graph_entities",
    "graph_fragmented_share",
    "graph_contradictions",
    "graph_duplicate_triples",
    "graph_checked",
    "graph_grounded",
    "graph_grounded_share",
    "graph",
)
COST_COLUMNS = (  # what its model calls used, over the entry's tasks (`_cost`)
    "cost_triples",
    "cost_judge_calls_per_1k",
    "cost_tokens_per_1k",
    "cost_money_per_1k",
    "cost_money_at_least",
    "cost_currency",
    "cost_cache_hits",
    "cost",
)
VERSION_ORDER = {True: 0, None: 1, False: 2}  # the pinned data version, none pinned, another


def rows_of(entries: list[RunEntry]) -> list[dict[str, Any]]:
    """One flat row per submission, ordered by section, comparison group and Overall: the
    overall score with its CI, its place among the entries it is compared with (`ranking`: rank
    range, ties, the difference to the next entry with its paired interval, the ranking's
    stability without each judge), the score per mode, per-criterion detail per mode, the
    judges' α per criterion with its interval, the agreement gate, its data version
    (`data_version.*`: dataset id, commit, fingerprint, slice, and whether it is the pinned
    version), and its audit by people where the submission carried their labels (`human*`:
    `_human`; None, never 0, without), the graph its triples make (`graph*`: `_graph`) and
    what its model calls used (`cost*`: `_cost`), and its downstream measures (`downstream_*`:
    `validity.downstream_columns`, each averaged over its downstream tasks; None without).
    A downstream task (multi-hop QA over its graph) is no mode's: its scores are its own.
    Official rows on the pinned data version get a `rank`, unless their re-judging audit failed
    (on a version no pin names, or another one, they are shown, compared, never ranked);
    community and smoke rows are compared, never ranked."""
    rows, contenders = [], []
    for entry in entries:
        results = entry.shown.results  # (with the graph block recomputed where it had none)
        # (A downstream task runs a mode too: the main task of that mode is the mode's.)
        main = [task for task in results.tasks if task not in results.downstream]
        by_mode = {results.details[task].mode: task for task in main}
        # An entry whose audit failed is compared apart: it takes no place among the ranked.
        failed = entry.audit is not None and entry.audit["state"] == "failed"
        contenders.append(
            Contender.of(entry.run_id, ranking.AUDIT_FAILED if failed else entry.section, results)
        )
        row = _entry_row(entry, contenders[-1]) | _mode_scores(results, by_mode)
        row |= _agreement(results, by_mode) | _output_means(results, main)
        row |= _human(entry.submission, by_mode) | _graph(results, by_mode)
        row |= _worth(results, by_mode)
        rows.append(row | _cost(results, by_mode) | downstream_columns(results))
    standing = ranking.standings(contenders)
    _place(rows, standing)
    return _board_order(rows, standing)


def _entry_row(entry: RunEntry, contender: Contender) -> dict[str, Any]:
    """A row's first columns: the entry, its data version, its overall score (place: `_place`)."""
    results, model = entry.submission.results, entry.model
    return {
        "section": entry.section,
        "rank": None,
        "rank_range": None,
        "model": model,
        "hub_url": f"https://huggingface.co/{model}" if "/" in model else None,
        "panel": results.judges.panel,
        "panel_note": results.judges.note() or _community_note(entry),
        "community_reasons": list(entry.community),
        "model_revision": results.config.model_revision,
        "think": results.config.thinking(),
        "think_recorded": results.config.think is not None,
        "model_sha": entry.submission.manifest.model.sha,
        "audit": entry.audit,
        "dataset": dataset_label(results.dataset),
        "data_version.id": results.dataset.id,
        "data_version.revision": results.dataset.revision,
        "data_version.fingerprint": results.dataset.fingerprint,
        "data_version.slice": results.dataset.slice.name if results.dataset.slice else None,
        "data_version.pinned": entry.pinned,
        "date": results.run[:10],
        "run_id": entry.run_id,
        "json": entry.path,
        "report": (entry.report_folder / "index.html").as_posix(),
        "overall": results.overall.score,
        "overall_ci": results.overall.ci,
        "overall_ci_reliable": results.overall.ci_reliable,
        "comparison_group": ranking.describe_group(contender.group),
        "group_size": 1,
        "tied_with": [],
        "tied_with_runs": [],
        "next_difference": None,
        "next_difference_ci": None,
        "ranking_stability": {},
    }


def _community_note(entry: RunEntry) -> str | None:
    """Why an entry whose panel claims to be official is not (`provenance`)."""
    if not entry.community:
        return None
    return f"a community entry: {'; '.join(entry.community)}"


def _mode_scores(results: Results, by_mode: dict[str, str]) -> dict[str, Any]:
    """Per mode: its score, each criterion's score with its CI, and the shares of spans at each
    comprehensiveness level (None: a mode not run)."""
    columns: dict[str, Any] = {}
    for mode in MODES:
        task = by_mode.get(mode)
        columns[mode] = results.overall.tasks.get(task) if task else None
        scores = results.results.get(task, {}) if task else {}
        criteria = results.details[task].criteria if task else {}
        for criterion, short in LETTERS.items():
            columns[f"{mode}.{short}"] = scores.get(f"{criterion},none")
            detail = criteria.get(criterion)
            columns[f"{mode}.{short}_ci"] = detail.ci if detail else None
        detail = criteria.get("comprehensiveness")
        shares = level_shares(detail.level_counts if detail else None) or {}
        for level in COMPREHENSIVENESS_LEVELS:  # the shares of spans at each level, in %
            share = shares.get(level)
            columns[f"{mode}.C_{level}"] = None if share is None else round(share, 2)
    return columns


def _agreement(results: Results, by_mode: dict[str, str]) -> dict[str, Any]:
    """Per mode and criterion, the judges' α with its interval (and ordinal α where ordered); per
    criterion, its mean over the modes; `below_gate`, the `mode.criterion`s under the gate."""
    columns: dict[str, Any] = {}
    gated = []
    for mode in MODES:
        task = by_mode.get(mode)
        agreement = results.agreement.get(task, {}) if task else {}
        for criterion, short in LETTERS.items():
            found = agreement.get(criterion)
            columns[f"{mode}.alpha_{short}"] = found.alpha if found else None
            columns[f"{mode}.alpha_{short}_ci"] = found.ci if found else None
            if CRITERIA[criterion].ordered:
                columns[f"{mode}.alpha_{short}_ordinal"] = found.ordinal if found else None
                columns[f"{mode}.alpha_{short}_ordinal_ci"] = found.ordinal_ci if found else None
            if found and found.below_gate:
                gated.append(f"{mode}.{criterion}")
    for short in LETTERS.values():
        columns[f"alpha_{short}"] = mean_of([columns[f"{m}.alpha_{short}"] for m in MODES], 4)
    columns["below_gate"] = gated
    return columns


def _human(submission: Submission, by_mode: dict[str, str]) -> dict[str, Any]:
    """The entry's audit by people, from the results' `human` block (which `verify` recomputed
    from the labels the submission carried; None throughout without them, never 0):
    `human_audit` (items of the random audit with a label, over every mode and criterion),
    `human_labels` (every labelled item: audit and flagged), `human_annotators`; the panel's
    agreement with people on the audit, `human_accuracy` (pooled over its items) and
    `human_kappa` (Cohen's κ, the mean over the criteria); `human_ppi`, the mean of the
    prediction-powered estimates, beside `human_panel`, the panel's mean score on the same
    criteria (`human_ppi_covers`: which, `<mode>.<criterion>`); and `human`, per mode and
    criterion letter, each check's figures. Not part of Overall or the ranking."""
    checks = {
        (mode, name): check
        for mode, task in by_mode.items()
        for name, check in submission.results.human.get(task, {}).items()
    }
    columns: dict[str, Any] = dict.fromkeys(HUMAN_COLUMNS)
    if not checks:
        return columns
    audited = [c for c in checks.values() if c.agreement_on == "audit"]
    pooled = [(c.panel_agreement.accuracy, c.panel_agreement.n) for c in audited]
    pooled = [(value, n) for value, n in pooled if value is not None and n]
    with_ppi = {key: c for key, c in checks.items() if c.ppi is not None}
    annotators = {label.annotator for rows in submission.human_labels.values() for label in rows}
    columns |= {
        "human_audit": sum(c.audit_labels for c in checks.values()),
        "human_labels": sum(c.labels for c in checks.values()),
        "human_annotators": len(annotators),
        "human_accuracy": round(sum(v * n for v, n in pooled) / sum(n for _, n in pooled), 4)
        if pooled
        else None,
        "human_kappa": mean_of([c.panel_agreement.kappa for c in audited], 4),
        "human_ppi": mean_of([c.ppi for c in with_ppi.values()]),
        "human_panel": mean_of([c.panel for c in with_ppi.values()]) if with_ppi else None,
        "human_ppi_covers": [f"{mode}.{name}" for mode, name in with_ppi],
        "human": {},
    }
    for (mode, name), check in checks.items():
        agreement = check.panel_agreement
        columns["human"].setdefault(mode, {})[LETTERS[name]] = {
            "audit": check.audit_labels,
            "labels": check.labels,
            "unresolved": check.unresolved,
            "panel": check.panel,
            "ppi": check.ppi,
            "ppi_ci": check.ppi_ci,
            "agreement_on": check.agreement_on,
            "accuracy": agreement.accuracy,
            "accuracy_ci": agreement.accuracy_ci,
            "kappa": agreement.kappa,
            "kappa_ci": agreement.kappa_ci,
        }
    return columns


def _worth(results: Results, by_mode: dict[str, str]) -> dict[str, Any]:
    """What the entry's judges' votes are worth (the results' `judges_worth`, recomputed by
    `verify`): `judges_effective`, the mean over modes and criteria of Kish's effective number
    of judges, against people where they labeled, else against the other judges
    (`judges_effective_against`: people, panel or both); `judges_best_as_good`, the
    `<mode>.<criterion>: <judge>` where the best judge alone agrees with people as well as the
    panel. None where the results have no block (scored before it was computed)."""
    found = [
        (mode, name, worth)
        for mode, task in by_mode.items()
        for name, worth in results.judges_worth.get(task, {}).items()
    ]
    if not found:
        return dict.fromkeys(
            ("judges_effective", "judges_effective_against", "judges_best_as_good")
        )
    against = {"people" if worth.people else "panel" for _, _, worth in found}
    return {
        "judges_effective": mean_of(
            [(worth.people or worth.panel).effective_judges for _, _, worth in found], 2
        ),
        "judges_effective_against": "both" if len(against) > 1 else against.pop(),
        "judges_best_as_good": [
            f"{mode}.{name}: {worth.people.best_judge}"
            for mode, name, worth in found
            if worth.people and worth.people.best_as_good
        ],
    }


def _graph(results: Results, by_mode: dict[str, str]) -> dict[str, Any]:
    """The graph the entry's triples make, from the results' `graph` block (which `verify`
    recomputed from the samples), over its tasks: `graph_entities` (summed over tasks and
    filings), `graph_fragmented_share` (entities seen under more than one surface form, 0-1,
    of all the tasks' entities), `graph_contradictions` and `graph_duplicate_triples` (summed),
    the grounding checks (`graph_checked`, `graph_grounded`, and `graph_grounded_share`, None
    where no triple held a number, amount or date), and `graph`, per mode, its own figures.
    Not part of Overall or the ranking; None throughout where the results have no block."""
    blocks = {mode: results.graph[task] for mode, task in by_mode.items() if task in results.graph}
    columns: dict[str, Any] = dict.fromkeys(GRAPH_COLUMNS)
    if not blocks:
        return columns
    entities = sum(block.overall.entities for block in blocks.values())
    fragmented = sum(
        (block.overall.fragmented_share or 0) * block.overall.entities for block in blocks.values()
    )
    checked = sum(block.grounding.checked for block in blocks.values())
    grounded = sum(block.grounding.grounded for block in blocks.values())
    columns |= {
        "graph_entities": entities,
        "graph_fragmented_share": round(fragmented / entities, 4) if entities else None,
        "graph_contradictions": sum(block.overall.contradictions for block in blocks.values()),
        "graph_duplicate_triples": sum(
            block.overall.duplicate_triples for block in blocks.values()
        ),
        "graph_checked": checked,
        "graph_grounded": grounded,
        "graph_grounded_share": round(grounded / checked, 4) if checked else None,
        "graph": {
            mode: {
                **block.overall.model_dump(),
                "checked": block.grounding.checked,
                "grounded": block.grounding.grounded,
            }
            for mode, block in blocks.items()
        },
    }
    return columns


def _cost(results: Results, by_mode: dict[str, str]) -> dict[str, Any]:
    """What the entry's model calls used, from the results' `cost` block (which `verify`
    recomputed from the samples), over its tasks, per 1,000 of their final triples:
    `cost_judge_calls_per_1k` (every judge's calls),
    `cost_tokens_per_1k` (prompt and completion tokens of every stage) and
    `cost_money_per_1k` (in `cost_currency`; None where the results were not priced, or a model
    that answered has no price: never 0 for unknown); `cost_triples`, `cost_cache_hits` (calls
    answered from the run's cache, in none of the figures: nothing spent), and `cost`, per mode,
    its own totals. Not part of Overall or the ranking; None throughout where the results have
    no block, the rates None where there is no triple. Calls and tokens count the answers from
    the cache as the calls they were (what the method asks, cached or not); money is what the
    run spent: where the cache answered calls (a mode's request another mode asked too, or an
    earlier run's answers), a lower bound of what they cost (`cost_money_at_least`)."""
    blocks = {mode: results.cost[task] for mode, task in by_mode.items() if task in results.cost}
    columns: dict[str, Any] = dict.fromkeys(COST_COLUMNS)
    if not blocks:
        return columns
    triples = sum(block.triples for block in blocks.values())
    # What the method asks of its models: answers from the cache count as the calls they were.
    judge_calls = sum(
        judge.calls + judge.cache_hits
        for block in blocks.values()
        for judge in block.judging.values()
    )
    tokens = sum(
        block.total.prompt_tokens + block.total.completion_tokens + block.total.cache_hit_tokens
        for block in blocks.values()
    )
    money = [block.total.money for block in blocks.values()]
    prices = results.config.prices
    currency = prices.currency if prices is not None and None not in money else None

    cache_hits = sum(block.total.cache_hits for block in blocks.values())

    def per_1k(value: float, digits: int) -> float | None:
        return round(1000 * value / triples, digits) if triples else None

    columns |= {
        "cost_triples": triples,
        "cost_judge_calls_per_1k": per_1k(judge_calls, 1),
        "cost_tokens_per_1k": per_1k(tokens, 1),
        "cost_money_per_1k": per_1k(sum(m or 0.0 for m in money), 6) if currency else None,
        # What the run spent: where the cache answered calls, less than the calls would cost.
        "cost_money_at_least": bool(currency and cache_hits),
        "cost_currency": currency,
        "cost_cache_hits": cache_hits,
        "cost": {
            mode: {
                "triples": block.triples,
                "extraction_calls": block.extraction.calls,
                "judge_calls": sum(judge.calls for judge in block.judging.values()),
                **block.total.model_dump(),
                "currency": block.currency,
            }
            for mode, block in blocks.items()
        },
    }
    return columns


def _output_means(results: Results, tasks: list[str]) -> dict[str, float | None]:
    """`triples_per_span` and `check_rules`, averaged over the run's main tasks."""
    return {
        name: mean_of([results.results[task].get(f"{name},none") for task in tasks])
        for name in ("triples_per_span", "check_rules")
    }


def _place(rows: list[dict[str, Any]], standing: dict[str, Standing]) -> None:
    """Each row's place among the entries it is compared with, and its `rank` (see `rows_of`)."""
    models = {row["run_id"]: row["model"] for row in rows}
    for row in rows:
        mine = standing[row["run_id"]]
        row["rank_range"] = mine.rank_range
        row["group_size"] = mine.group_size
        row["tied_with"] = [models[run] for run in mine.tied_with]
        row["tied_with_runs"] = mine.tied_with
        row["next_difference"] = mine.next_difference
        row["next_difference_ci"] = mine.next_difference_ci
        row["ranking_stability"] = mine.stability
        if unranked_reason(row) is None:
            row["rank"] = mine.place


def unranked_reason(row: dict[str, Any]) -> str | None:
    """Why a row gets no `rank` (None: it is ranked; see `rows_of`)."""
    if row["section"] == "smoke":
        return "the bundled sample is never ranked"
    if row["section"] == "community":
        return f"a community entry ({'; '.join(row['community_reasons'])})"
    if row["audit"] is not None and row["audit"]["state"] == "failed":
        return "its re-judging audit failed"
    if row["data_version.pinned"] is None:
        return "no version of its dataset is pinned yet"
    if row["data_version.pinned"] is False:
        return "its data is not the pinned version"
    return None


def standing(row: dict[str, Any]) -> str:
    """A placed row's section and rank, or why it has none, in one line (what `submit` says)."""
    why = unranked_reason(row)
    if why is None and row.get("rank") is None:  # nothing to compare it by
        why = "it has no Overall score to place it by"
    if why is None:
        return (
            f"the {row['section']} section, ranked {row['rank']} of {row['group_size']} on the "
            "pinned data version"
        )
    return f"the {row['section']} section, not ranked: {why}"


def _board_order(rows: list[dict[str, Any]], standing: dict[str, Standing]) -> list[dict[str, Any]]:
    """Sections in order; in one, the pinned data version, then datasets with none pinned, then
    others; in those, comparison groups (the best entry's first), by place (none last), model."""
    by_overall = sorted(rows, key=lambda r: (r["overall"] is None, -(r["overall"] or 0)))
    first_seen: dict[str, int] = {}
    for row in by_overall:
        first_seen.setdefault(row["comparison_group"], len(first_seen))
    rows.sort(
        key=lambda r: (
            SECTIONS.index(r["section"]),
            VERSION_ORDER[r["data_version.pinned"]],
            r["audit"] is not None and r["audit"]["state"] == "failed",  # after the ranked
            first_seen[r["comparison_group"]],
            math.inf if standing[r["run_id"]].place is None else standing[r["run_id"]].place,
            r["model"],
            r["run_id"],
        )
    )
    return rows


def mean_of(values: list[Any], digits: int = 2) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), digits) if present else None


def dataset_label(dataset: DatasetInfo) -> str:
    label = dataset.id
    if dataset.revision:
        label += f"@{dataset.revision[:10]}"
    if dataset.limit:
        label += f" (first {dataset.limit})"
    return f"{label} {dataset.fingerprint[:8]}"


def judge_rows(audits: list[AuditEntry]) -> list[dict[str, Any]]:
    """One row per judge (and panel majority) per audit: accuracy and κ per criterion, flip
    rate per probe, α of the panel."""
    rows = []
    for entry in audits:
        report = entry.audit.report
        for judge, values in report["judges"].items():
            row: dict[str, Any] = {
                "panel": entry.panel,
                "official": entry.official,
                "judge": judge,
                "dataset": dataset_label(entry.audit.dataset),
                "date": entry.audit.date[:10],
            }
            for criterion, short in LETTERS.items():
                scores = values["criteria"][criterion]
                row[f"accuracy.{short}"] = scores["accuracy"]
                row[f"kappa.{short}"] = scores["kappa"]
                agreement = report["agreement"][criterion]["alpha"]
                row[f"alpha.{short}"] = agreement if judge == PANEL_ROW else None
            for probe, rate in values["probes"].items():
                row[f"flip.{probe}"] = rate["rate"]
            rows.append(row)
    return rows
