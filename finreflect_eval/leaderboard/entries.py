"""Storing the leaderboard: verified entries under `<leaderboard>/submissions/<org__model>/` and
`<leaderboard>/audits/<panel>/`, one JSON file each, re-verified whenever they are read."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from finreflect_eval._util.errors import FinReflectError, Refusal, first_line
from finreflect_eval.leaderboard.verify import (
    MAX_SUBMISSION_BYTES,
    Section,
    bundle_run,
    verify,
    verify_audit,
)
from finreflect_eval.records import (
    GraphScores,
    JudgeAudit,
    Submission,
    TaskCost,
    parse,
    read_json,
)
from finreflect_eval.runs.store import write_atomic

UNSAFE_CHARACTER = re.compile(r"[^A-Za-z0-9._-]")
REPORTS = "reports"  # <leaderboard>/reports/<org__model>/<run id>/: each entry's report


@dataclass
class RunEntry:
    """A verified submission of a run, the section of the page it belongs in, and whether its
    data is the pinned version of its dataset (None: none is pinned)."""

    submission: Submission
    section: Section
    pinned: bool | None = None
    kind: Literal["submissions"] = "submissions"
    graph: dict[str, GraphScores] | None = None
    """The results' `graph` block as recomputed, where the submitted results have none (scored
    before there was one): the entry is shown with it (`shown`) and stored as submitted."""
    cost: dict[str, TaskCost] | None = None
    """The same for the `cost` block."""
    community: tuple[str, ...] = ()
    """Why it is a community entry though its data is official (`Verdict.community`)."""
    audit: dict[str, Any] | None = None
    """Its re-judging audit as its row shows it (`audited.audit_cell`); None: not audited."""
    stored: Path | None = None
    """The file it was read from (`load_entries`); None: not stored yet."""

    @property
    def shown(self) -> Submission:
        """The submission as its row and its report show it: with the recomputed `graph` and
        `cost` blocks where it was submitted without them."""
        recomputed = {"graph": self.graph, "cost": self.cost}
        recomputed = {name: block for name, block in recomputed.items() if block is not None}
        if not recomputed:
            return self.submission
        results = self.submission.results.model_copy(update=recomputed)
        return self.submission.model_copy(update={"results": results})

    @property
    def model(self) -> str:
        return self.submission.results.config.model_name

    @property
    def folder(self) -> Path:
        """`submissions/org__name`, with any character unsafe in a file name replaced by `_`."""
        return Path(self.kind) / UNSAFE_CHARACTER.sub("_", self.model.replace("/", "__"))

    @property
    def run_id(self) -> str:
        return _run_id(self.submission.model_dump_json(), self.submission.results.run)

    @property
    def path(self) -> str:
        """Where it is stored, relative to the leaderboard folder."""
        return (self.folder / f"{self.run_id}.json").as_posix()

    @property
    def report_folder(self) -> Path:
        """Where its report goes, relative to the leaderboard folder:
        `reports/<org__model>/<run id>` (the names of its stored file, made safe again)."""
        name, run = (UNSAFE_CHARACTER.sub("_", part) for part in (self.folder.name, self.run_id))
        if {name, run} & {"", ".", ".."}:
            raise FinReflectError(f"refused: {self.describe()} has no usable report folder name")
        return Path(REPORTS) / name / run

    def describe(self) -> str:
        return f"a submission of {self.model} with panel '{self.submission.results.judges.panel}'"

    def duplicate_key(self) -> tuple:
        """What makes two entries the same: the model at its revision, thinking as it did (a
        model thinking and not thinking are two entries), the panel and the data."""
        results = self.submission.results
        dataset = results.dataset
        return (
            self.model,
            results.config.model_revision,
            results.config.thinking(),
            results.judges.panel,
            dataset.fingerprint,
            dataset.split,
            dataset.limit,
            tuple(sorted((task, str(v)) for task, v in results.versions.items())),
        )


@dataclass
class AuditEntry:
    """A verified judge audit (`audit-judges` output), for the Judges view."""

    audit: JudgeAudit
    official: bool
    kind: Literal["audits"] = "audits"

    @property
    def panel(self) -> str:
        return str(self.audit.panel["panel"])

    @property
    def folder(self) -> Path:
        return Path(self.kind) / UNSAFE_CHARACTER.sub("_", self.panel)

    @property
    def run_id(self) -> str:
        return _run_id(self.audit.model_dump_json(), self.audit.date)

    def describe(self) -> str:
        return f"an audit of panel '{self.panel}'"

    def duplicate_key(self) -> tuple:
        audit = self.audit
        return (
            json.dumps(audit.panel, sort_keys=True),
            audit.dataset.model_dump_json(),
            tuple(audit.probes),
            audit.seed,
            audit.task.get("hash"),
        )


Entry = RunEntry | AuditEntry


def _run_id(content: str, date: str) -> str:
    """The date and a digest of the content: two different files never share a name."""
    return f"{date}_{hashlib.sha256(content.encode()).hexdigest()[:8]}"


def entry_of(
    content: Submission | JudgeAudit, leaderboard: Path, others: Sequence[Submission] = ()
) -> Entry:
    """The verified entry of a submission (`others`: the entries already stored, earliest
    first) or of an audit; a refusal when it fails."""
    if isinstance(content, JudgeAudit):
        return AuditEntry(content, verify_audit(content, leaderboard))
    verdict = verify(content, leaderboard, others)
    return RunEntry(
        content,
        verdict.section,
        verdict.pinned,
        graph=verdict.graph,
        cost=verdict.cost,
        community=verdict.community,
    )


def load_entries(leaderboard: Path, kind: str) -> list[Entry]:
    """Every stored submission (`submissions`, earliest run first: the first on a data version
    fixes its span list) or audit (`audits`), re-verified: a file edited in place is an error
    naming it."""
    model = Submission if kind == "submissions" else JudgeAudit
    stored = []
    for path in sorted((leaderboard / kind).rglob("*.json")):
        if path.parent.parent != leaderboard / kind:  # never shown, so never stored
            raise FinReflectError(
                f"{path}: an entry must be {kind}/<name>/<run>.json, nothing else"
            )
        try:
            stored.append((path, parse(model, read_json(path, MAX_SUBMISSION_BYTES), path)))
        except FinReflectError as exc:
            if str(exc).startswith(str(path)):  # named once, whoever named it first
                raise
            raise _naming(exc, path) from exc
    if kind == "submissions":
        stored.sort(key=lambda item: (item[1].results.run, item[0]))
    entries: list[Entry] = []
    for path, content in stored:
        earlier = [e.submission for e in entries if isinstance(e, RunEntry)]
        try:
            entry = entry_of(content, leaderboard, earlier)
        except FinReflectError as exc:
            if str(exc).startswith(str(path)):  # named once, whoever named it first
                raise
            raise _naming(exc, path) from exc
        if isinstance(entry, RunEntry):
            entry.stored = path
        entries.append(entry)
    return entries


def _naming(exc: FinReflectError, path: Path) -> FinReflectError:
    """The error, naming the stored file; a refusal keeps its reasons, a line each."""
    if isinstance(exc, Refusal):
        return Refusal(exc.reasons, where=f"{path}: ")
    return FinReflectError(f"{path}: {exc}")


@dataclass
class Added:
    """What `add_entry` did: the verified entry, the entries stored before it, where it was (or
    would be) written, and the pull request's URL (None: none was opened)."""

    entry: Entry
    stored: list[Entry]
    target: Path
    pull_request: str | None = None


def add_entry(
    source: Path, leaderboard: Path, *, hub_repo: str | None = None, dry_run: bool = False
) -> Added:
    """Verify a run (or a judge audit) and store it in the leaderboard folder, or open a pull
    request with it on a Hub repo."""
    content = bundle_run(source)
    stored = load_entries(
        leaderboard, "audits" if isinstance(content, JudgeAudit) else "submissions"
    )
    entry = entry_of(
        content, leaderboard, [e.submission for e in stored if isinstance(e, RunEntry)]
    )
    if any(e.duplicate_key() == entry.duplicate_key() for e in stored):
        raise FinReflectError(
            f"refused: {entry.describe()}, this dataset and these task versions is already "
            "on the leaderboard"
        )
    relative = entry.folder / f"{entry.run_id}.json"
    target = (leaderboard / relative).resolve()
    if (leaderboard / entry.kind).resolve() not in target.parents:
        raise FinReflectError(f"refused: {entry.describe()} would leave the {entry.kind} folder")
    content = entry.submission if isinstance(entry, RunEntry) else entry.audit
    payload = content.model_dump_json(by_alias=True, indent=1) + "\n"
    added = Added(entry, stored, target)
    if dry_run:
        return added
    if hub_repo:
        added.pull_request = _open_pull_request(
            hub_repo, relative.as_posix(), payload, entry.describe()
        )
        return added
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, payload)
    return added


def _open_pull_request(repo: str, path_in_repo: str, payload: str, what: str) -> str:
    from huggingface_hub import CommitOperationAdd, HfApi

    try:
        commit = HfApi().create_commit(
            repo_id=repo,
            repo_type="dataset",
            operations=[CommitOperationAdd(path_in_repo, payload.encode("utf-8"))],
            commit_message=f"Submit {what}",
            create_pr=True,
        )
    except Exception as exc:  # offline, no token, no such repo: one line, nothing written
        raise FinReflectError(f"cannot open a pull request on {repo}: {first_line(exc)}") from exc
    return str(commit.pr_url)
