"""What a submission's samples and people's labels must hold before any number is recomputed
from them: every task covers the same spans, each once, and all of them; each item has one valid
vote from each panel judge; each sample holds together (its votes are what its judge calls
answered, its derived fields follow from its others); and each person's label is of this run,
of a span it has, made on that span's very text."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from finreflect_eval.data import load_benchmark, span_list
from finreflect_eval.leaderboard.registry import RegisteredDataset
from finreflect_eval.pipeline.cascade import UNGROUNDED_VOTE, grounded_triples
from finreflect_eval.protocol.criteria import CRITERIA, TRIPLE_CRITERIA
from finreflect_eval.records import DatasetInfo, HumanLabel, Manifest, SampleRecord, Submission
from finreflect_eval.runs.consistency import sample_problem
from finreflect_eval.scoring.failures import FailurePolicy
from finreflect_eval.scoring.label_checks import label_problems as checked_labels
from finreflect_eval.scoring.span_facts import SpanFacts
from finreflect_eval.scoring.votes import VoteTable


def span_problems(
    records: dict[str, list[SampleRecord]],
    dataset: DatasetInfo,
    registered: RegisteredDataset | None,
    others: Sequence[Submission],
) -> list[str]:
    """Every task covers the same spans, each once, and all of them (no cherry-picking): for the
    bundled sample its span list is recomputed here; for a recorded data version the span
    count and list hash must be the recorded ones. For another version (the leaderboard does
    not download it) what can be checked is: at most the slice's `per_stratum` spans of a
    company's 10-K section, and the span list of the entries already on that version."""
    problems = []
    lists = {task: [record.span_id for record in rows] for task, rows in records.items()}
    first_task, first = next(iter(lists.items()), ("", []))
    for task, ids in lists.items():
        if len(set(ids)) < len(ids):
            problems.append(f"task {task} lists a span twice")
        if ids != first:
            problems.append(
                f"task {task} covers other spans than task {first_task}: every task of a run "
                "covers the same span list; submit the complete run"
            )
    if dataset.id == "sample":
        benchmark = load_benchmark("sample", split=dataset.split, slice=dataset.slice)
        expected = [(span.span_id, span.text) for span in benchmark.spans]
        for task, rows in records.items():
            if [(record.span_id, record.text) for record in rows] != expected:
                problems.append(
                    f"task {task} does not cover exactly the spans of the dataset slice"
                )
        return problems
    if registered is not None and registered.fingerprint == dataset.fingerprint:
        recorded = (("count", registered.spans), ("sha256", registered.span_list_sha256))
        for task, ids in lists.items():
            listed = span_list(ids)
            for key, value in recorded:
                if value is not None and listed[key] != value:
                    problems.append(
                        f"task {task} does not cover exactly the {registered.spans} spans of "
                        f"'{registered.name}' (span list {key} {listed[key]}, registered {value})"
                    )
        return problems
    if dataset.slice is not None:
        for task, rows in records.items():
            strata = Counter((record.ticker, record.section) for record in rows)
            crowded = [(key, n) for key, n in strata.items() if n > dataset.slice.per_stratum]
            if crowded:
                (key, n), *_ = crowded
                problems.append(
                    f"task {task} has {n} spans of stratum {key} (company, section): slice "
                    f"{dataset.slice.name} takes at most {dataset.slice.per_stratum} of each; "
                    "submit the run of the slice"
                )
    version = data_version(dataset)
    reference = next((o for o in others if data_version(o.results.dataset) == version), None)
    if reference is not None:  # the first entry on this version fixed its span list
        ours = span_list(first)
        theirs = span_list([record.span_id for record in next(iter(reference.samples.values()))])
        if ours != theirs:
            problems.append(
                f"the span list ({ours['count']} spans, sha256 {str(ours['sha256'])[:12]}) is "
                f"not the one of the entries on data version {dataset.fingerprint} "
                f"({theirs['count']} spans, sha256 {str(theirs['sha256'])[:12]}, fixed by the "
                f"first of them, {reference.results.config.model_name}'s run "
                f"{reference.results.run}); submit the run of the whole slice"
            )
    return problems


def data_version(dataset: DatasetInfo) -> tuple:
    """What a run's data is, for ranking: its content (fingerprint), split and slice. Runs on
    one data version cover the same spans."""
    return (
        dataset.fingerprint,
        dataset.split,
        dataset.slice.model_dump_json() if dataset.slice else None,
    )


def vote_problems(
    records: dict[str, list[SampleRecord]], panel: str, judges: list[str]
) -> list[str]:
    """Each item has one vote from each panel member and nobody else, with a valid label; and
    no judge abstained on more than the failure policy's share of its items (its failed calls
    are counted from the samples' calls too, but the votes say it whatever the calls say)."""
    problems = []
    limit = FailurePolicy.max_judge_failure_share
    for task, rows in records.items():
        items, abstained = Counter[str](), Counter[str]()
        malformed = None
        for record in rows:
            for criterion, votes in record.votes.get(panel, {}).items():
                per_triple = CRITERIA[criterion].per == "triple"
                n_items = len(record.triples) if per_triple else 1
                allowed = (*CRITERIA[criterion].labels, None)
                if per_triple and not record.triples and not any(votes.values()):
                    continue  # no triples: nothing to vote on
                if sorted(votes) != sorted(judges) or any(
                    len(cast) != n_items or any(v.verdict not in allowed for v in cast)
                    for cast in votes.values()
                ):
                    malformed = malformed or f"span {record.span_id}, {criterion}"
                    continue
                for judge, cast in votes.items():
                    items[judge] += sum(not vote.synthetic for vote in cast)
                    abstained[judge] += sum(v.verdict is None and not v.synthetic for v in cast)
        if malformed:  # then the abstentions are not counted right either
            problems.append(
                f"task {task}, {malformed}: the votes are not one valid vote per item from each "
                "panel judge"
            )
            continue
        for judge in judges:
            if abstained[judge] > limit * items[judge]:
                problems.append(
                    f"task {task}: judge {judge} abstained on {abstained[judge]} of its "
                    f"{items[judge]} items (more than {limit * 100:g}%): a failed judge; rerun "
                    "the same command to retry its calls"
                )
    return problems


def derived_problems(records: dict[str, list[SampleRecord]]) -> list[str]:
    """Each sample holds together as `load`, `score`, `view` and `review` require it
    (`runs.consistency.sample_problem`): its votes are what its judge calls answered, and its
    lm-eval hashes and per-sample metrics are what its other fields give, so that the task
    hashes recomputed from them are of the samples submitted (the first such sample of each
    task)."""
    problems = []
    for task, rows in records.items():
        for record in rows:
            problem = sample_problem(record)
            if problem:
                problems.append(f"task {task}, span {record.span_id}: {problem}")
                break
    return problems


def label_problems(
    labels: dict[str, list[HumanLabel]], manifest: Manifest, records: dict[str, list[SampleRecord]]
) -> list[str]:
    """People's labels (`Submission.human_labels`): under tasks of the run, and each of them as
    scoring takes it (`scoring.label_checks`: of this run and task, of a span the samples hold,
    made on its text, an audit label drawn by the audit it names). The first problem of each
    task; what scoring makes of them (the results' `human` block) is recomputed after."""
    problems = []
    for task, task_labels in labels.items():
        if task not in records or task not in manifest.tasks:
            problems.append(
                f"human labels of task '{task}', which the run does not have; submit the run's "
                "own human_labels files"
            )
            continue
        facts = SpanFacts.from_records(records[task], [])
        problems += checked_labels(
            manifest, task, facts, task_labels, _votes_of(manifest, records[task])
        )[:1]
    return problems


def cascade_problems(
    records: dict[str, list[SampleRecord]], manifest: Manifest, panel: str
) -> list[str]:
    """The grounding cascade's votes are what it gives, where it gives them: a rule's
    `ungrounded` vote only on a triple whose figures its span lacks (checked again here), and
    the manifest's cascade counts those the samples hold (a run under the cascade says so)."""
    said = manifest.judging[panel].cascade if panel in manifest.judging else None
    for task, rows in records.items():
        skipped = 0
        for record in rows:
            ungrounded = set(range(len(record.triples))) - set(grounded_triples(record))
            for criterion, votes in record.votes.get(panel, {}).items():
                for judge, cast in votes.items():
                    marked = {i for i, vote in enumerate(cast) if vote.warning == "ungrounded"}
                    if criterion not in TRIPLE_CRITERIA:
                        ungrounded_here: set[int] = set()
                    else:
                        ungrounded_here = ungrounded
                    wrong = [i for i in marked if cast[i] != UNGROUNDED_VOTE]
                    expected = ungrounded_here if said is not None else marked & ungrounded_here
                    if marked - ungrounded_here or wrong or marked != expected:
                        return [
                            f"task {task}, span {record.span_id}, {criterion} ({judge}): the "
                            "grounding cascade's votes are not on the triples whose figures the "
                            "span lacks"
                        ]
                    if criterion == "faithfulness" and judge == next(iter(votes)):
                        skipped += len(marked)
        if said is None and skipped:
            return [f"task {task}: votes of the grounding cascade, but the run does not say so"]
        if said is not None and said.get(task, {}).get("triples_skipped") != skipped:
            return [f"task {task}: the grounding cascade's counts are not what the samples hold"]
    return []


def _votes_of(manifest: Manifest, records: list[SampleRecord]) -> Callable[[str], VoteTable | None]:
    """A panel's vote table of the task, by its name (what a confidence-driven audit was drawn
    on); None for a panel the run does not record."""

    def votes(panel: str) -> VoteTable | None:
        judging = manifest.judging.get(panel)
        if judging is None:
            return None
        return VoteTable.from_records(records, panel, [judge.name for judge in judging.judges])

    return votes
