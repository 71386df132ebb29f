"""The static leaderboard: verified submissions in, one self-contained page out.

A submission is a bundle of a run's results, manifest and samples (with every vote), stored as
`<leaderboard>/submissions/<org__model>/<run-id>.json`. `submit` accepts one only when every score
recomputed from its samples equals the submitted score, its tasks and dataset are known, and it
is not a duplicate; a panel that is not a known official one makes a community entry. `build`
renders `index.html` (data inline, no network), `leaderboard.json` and `leaderboard.csv`.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from finreflect_eval.audit import FORMAT as AUDIT_FORMAT
from finreflect_eval.audit import PANEL_ROW, Case, compute_report
from finreflect_eval.data import CRITERIA, TRIPLE_CRITERIA, load_benchmark
from finreflect_eval.errors import FinReflectError, first_invalid_field, first_line
from finreflect_eval.judging import available_panels, load_panel
from finreflect_eval.metrics import LETTERS
from finreflect_eval.resources import newest, spreadsheet_safe, write_atomic
from finreflect_eval.samples import SampleRecord, SavedRun
from finreflect_eval.tasks import TaskIndex

FORMAT = "finreflect-eval-submission/1"
MODES = ("single_pass", "multi_pass", "reflection")
UNSAFE_CHARACTER = re.compile(r"[^A-Za-z0-9._-]")
RUN_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}$")


# --- what a results file must look like (value ranges included) ---

Percent = float | None
_percent = Field(default=None, ge=0, le=100)


class _TaskResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    mode: str
    faithfulness: Percent = _percent
    precision: Percent = _percent
    relevance: Percent = _percent
    comprehensiveness: Percent = _percent
    check_rules: Percent = _percent
    triples_per_span: float | None = Field(default=None, ge=0)
    n_spans: int = Field(ge=1)

    def model_post_init(self, _context: Any) -> None:
        for criterion in CRITERIA:
            ci = getattr(self, f"{criterion}_ci", None)
            if ci is not None and not (
                isinstance(ci, list) and len(ci) == 2 and 0 <= ci[0] <= ci[1] <= 100
            ):
                raise ValueError(f"{criterion}_ci must be [low, high] within 0..100, got {ci}")


class _Agreement(BaseModel):
    alpha: float | None = Field(ge=-1, le=1)
    reason: str | None
    n_items: int = Field(ge=0)


class _Results(BaseModel):
    model_config = ConfigDict(extra="allow")

    results: dict[str, _TaskResult] = Field(min_length=1)
    config: dict[str, Any]
    date: str = Field(pattern=RUN_DATE.pattern)
    task_hashes: dict[str, str]
    versions: dict[str, Any]
    agreement: dict[str, dict[str, _Agreement]]
    judges: dict[str, Any]
    dataset: dict[str, Any]


LABELS = (0, 1, "good", "partial", "poor", None)


class _Audit(BaseModel):
    model_config = ConfigDict(extra="allow")

    date: str = Field(pattern=RUN_DATE.pattern)
    panel: dict[str, Any]
    task: dict[str, str]

    def model_post_init(self, _context: Any) -> None:
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", str(self.panel.get("panel"))):
            raise ValueError("panel.panel must be a plain name (letters, digits, . _ -)")

    dataset: dict[str, Any]
    probes: list[str]
    seed: int
    cases: list[dict[str, Any]]
    verdicts: dict[str, list[list[Any]]] = Field(min_length=1)
    calls: dict[str, dict[str, float]]
    report: dict[str, Any]


@dataclass
class Submission:
    """A verified bundle and where it lives."""

    bundle: dict[str, Any]
    official: bool

    @property
    def results(self) -> dict[str, Any]:
        return self.bundle["results"]

    @property
    def model(self) -> str:
        return self.results["config"]["model"]

    @property
    def folder(self) -> Path:
        """`submissions/org__name`, with any character unsafe in a file name replaced by `_`."""
        return Path("submissions") / UNSAFE_CHARACTER.sub("_", self.model.replace("/", "__"))

    def describe(self) -> str:
        return f"a submission of {self.model} with panel '{self.results['judges']['panel']}'"

    @property
    def run_id(self) -> str:
        return _run_id(self.bundle, self.results["date"])

    def duplicate_key(self) -> tuple:
        config, results = self.results["config"], self.results
        return (
            self.model,
            config.get("model_args", {}).get("revision"),
            results["judges"]["panel"],
            *(results["dataset"].get(key) for key in ("fingerprint", "split", "limit")),
            tuple(sorted((task, str(v)) for task, v in results["versions"].items())),
        )


@dataclass
class AuditEntry:
    """A verified judge audit (`audit-judges` output) for the Judges view."""

    bundle: dict[str, Any]
    official: bool

    @property
    def panel(self) -> str:
        return str(self.bundle["panel"]["panel"])

    @property
    def folder(self) -> Path:
        return Path("audits") / UNSAFE_CHARACTER.sub("_", self.panel)

    @property
    def run_id(self) -> str:
        return _run_id(self.bundle, self.bundle["date"])

    def describe(self) -> str:
        return f"an audit of panel '{self.panel}'"

    def duplicate_key(self) -> tuple:
        audit = self.bundle
        return (
            json.dumps(audit["panel"], sort_keys=True),
            json.dumps(audit["dataset"], sort_keys=True),
            tuple(audit["probes"]),
            audit["seed"],
            audit["task"]["hash"],
        )


def _run_id(bundle: dict[str, Any], date: str) -> str:
    """The date and a digest of the content: two different files never share a name."""
    digest = hashlib.sha256(json.dumps(bundle, sort_keys=True).encode()).hexdigest()
    return f"{date}_{digest[:8]}"


# --- bundling and verification ---


def bundle_run(path: Path) -> dict[str, Any]:
    """The submission bundle of a results file, a run folder (its newest results), or a bundle."""
    path = newest(Path(path), "results_*.json", "run `score` first")
    data = _read_json(path)
    if isinstance(data, dict) and data.get("format") in (FORMAT, AUDIT_FORMAT):
        return data
    date = data.get("date") if isinstance(data, dict) else None
    if not isinstance(date, str) or not RUN_DATE.match(date):
        raise FinReflectError(f"{path}: not a results file (field 'date' missing or malformed)")
    run = SavedRun.load(path.parent / f"manifest_{date}.json")
    return {
        "format": FORMAT,
        "results": data,
        "manifest": run.manifest,
        "samples": {
            task: [r.model_dump(mode="json") for r in rs] for task, rs in run.records.items()
        },
    }


def _malformed_is_one_line(check: Any) -> Any:
    """A submission is hostile input: whatever is wrong with it is a one-line refusal, never a
    traceback (and never a broken `leaderboard build`)."""

    def checked(data: Any, leaderboard: Path) -> Any:
        try:
            return check(data, leaderboard)
        except FinReflectError:
            raise
        except Exception as exc:
            raise FinReflectError(f"refused: malformed submission ({first_line(exc)})") from exc

    return checked


@_malformed_is_one_line
def verify(bundle: dict[str, Any], leaderboard: Path) -> Submission:
    """Every check a submission must pass; the first failure is a one-line error."""
    from finreflect_eval.evaluator import compute_results

    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        raise FinReflectError(f"not a submission bundle (expected format {FORMAT})")
    for key in ("results", "manifest", "samples"):
        if not isinstance(bundle.get(key), dict):
            raise FinReflectError(f"submission: field '{key}' is missing or not an object")
    try:
        _Results.model_validate(bundle["results"])
    except ValidationError as exc:
        raise FinReflectError(f"results: {first_invalid_field(exc)}") from exc
    results = bundle["results"]
    check_model_name(results["config"].get("model"))
    if results["config"].get("shard") or bundle["manifest"].get("shard"):
        raise FinReflectError(
            "refused: these are one shard's results; merge every shard first "
            "(finreflect-eval score --samples SHARD_FOLDER...) and submit the merged run"
        )

    _check_tasks(results)
    _check_dataset(results["dataset"], leaderboard)
    official = _is_official(results["judges"])

    # Every number must follow from the submitted samples.
    try:
        records = {
            task: [SampleRecord.model_validate(r) for r in rows]
            for task, rows in bundle["samples"].items()
        }
    except (ValidationError, TypeError, AttributeError) as exc:
        detail = first_invalid_field(exc) if isinstance(exc, ValidationError) else str(exc)
        raise FinReflectError(f"samples: {detail}") from exc
    manifest = bundle["manifest"]
    if set(records) != set(manifest.get("tasks", {})) or set(records) != set(results["results"]):
        raise FinReflectError("samples, manifest and results name different tasks")
    _check_spans(records, results["dataset"])
    _check_votes(records, [judge["name"] for judge in manifest["judging"]["judges"]])
    recomputed = compute_results(SavedRun(Path("."), manifest, records))
    difference = first_difference(results, recomputed)
    if difference:
        raise FinReflectError(f"refused: {difference}")
    return Submission(bundle, official)


def check_model_name(model: Any) -> None:
    """A model name becomes a folder name: nothing in it may point outside the submissions
    folder. (Any other text is allowed; the page escapes it.)"""
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise FinReflectError(f"model name {model!r} must be a non-empty string")
    parts = model.split("/")
    if (
        model.startswith(("/", "~"))
        or "\\" in model
        or any(part in ("", ".", "..") for part in parts)
        or len(parts) > 2
        or any(ord(char) < 32 for char in model)
    ):
        raise FinReflectError(
            f"refused: model name {model!r} is not a Hub id (org/name) or a plain name; "
            "path parts such as '..', '/' at the start or '\\' are not allowed"
        )


def _check_spans(records: dict[str, list[SampleRecord]], dataset: dict[str, Any]) -> None:
    """Every task covers the dataset slice's spans, each once (no cherry-picking). The span list
    of the bundled sample is known here; for a registered dataset, each span must be unique."""
    expected = None
    if dataset.get("id") == "sample":
        benchmark = load_benchmark("sample", split=dataset["split"], limit=dataset.get("limit"))
        expected = [(span.span_id, span.text) for span in benchmark.spans]
    for task, rows in records.items():
        spans = [(record.span_id, record.text) for record in rows]
        if len({span_id for span_id, _ in spans}) < len(spans):
            raise FinReflectError(f"refused: task {task} lists a span twice")
        if expected is not None and spans != expected:
            raise FinReflectError(
                f"refused: task {task} does not cover exactly the spans of the dataset slice"
            )


def _check_votes(records: dict[str, list[SampleRecord]], judges: list[str]) -> None:
    """Each item has one vote from each panel member and nobody else, with a valid label."""
    for task, rows in records.items():
        for record in rows:
            for criterion in CRITERIA:
                votes = record.votes.get(criterion, {})
                per_triple = criterion in TRIPLE_CRITERIA
                n_items = len(record.triples) if per_triple else 1
                allowed = (0, 1, None) if per_triple else ("good", "partial", "poor", None)
                if per_triple and not record.triples and not any(votes.values()):
                    continue  # no triples: nothing to vote on
                if sorted(votes) != sorted(judges) or any(
                    len(cast) != n_items or any(v.verdict not in allowed for v in cast)
                    for cast in votes.values()
                ):
                    raise FinReflectError(
                        f"refused: task {task}, span {record.span_id}, {criterion}: the votes "
                        "are not one valid vote per item from each panel judge"
                    )


@_malformed_is_one_line
def verify_audit(audit: dict[str, Any], leaderboard: Path) -> AuditEntry:
    """A submitted judge audit: known task and dataset, well-formed cases and verdicts, and a
    report equal to the one recomputed from them."""
    try:
        _Audit.model_validate(audit)
        cases = [Case.model_validate(case) for case in audit["cases"]]
    except ValidationError as exc:
        raise FinReflectError(f"audit: {first_invalid_field(exc)}") from exc
    for judge, verdicts in audit["verdicts"].items():
        shapes = [len(v) for v in verdicts] == [len(case.keys) for case in cases]
        if not shapes or any(label not in LABELS for v in verdicts for label in v):
            raise FinReflectError(f"audit: verdicts of judge {judge!r} do not match the cases")
    task = TaskIndex().tasks.get(audit["task"]["name"])
    if task is None or task.hash != audit["task"]["hash"]:
        raise FinReflectError(f"audit: task {audit['task']} is not a task of this leaderboard")
    _check_dataset(audit["dataset"], leaderboard)
    difference = first_difference(audit["report"], compute_report(audit), "report")
    if difference:
        raise FinReflectError(f"refused: {difference}")
    return AuditEntry(audit, _is_official(audit["panel"]))


def _check_tasks(results: dict[str, Any]) -> None:
    index = TaskIndex()
    for task, version in results["versions"].items():
        known = index.tasks.get(task)
        if known is None:
            raise FinReflectError(f"task '{task}' is not a task of this leaderboard")
        if known.config.version != version:
            raise FinReflectError(
                f"task '{task}' version {version} is not the current {known.config.version}"
            )
        if results["task_hashes"].get(task) != known.hash:
            raise FinReflectError(
                f"task '{task}' hash {results['task_hashes'].get(task)} differs from this "
                f"leaderboard's {known.hash} (its prompts, schema or settings changed)"
            )


def _check_dataset(dataset: dict[str, Any], leaderboard: Path) -> None:
    """The bundled sample is checked by recomputing its fingerprint; other datasets must be
    listed in `<leaderboard>/datasets.json` (`[{"id", "revision", "fingerprint"}]`)."""
    if dataset.get("id") == "sample":
        expected = load_benchmark(
            "sample", split=dataset.get("split", "test"), limit=dataset.get("limit")
        ).fingerprint
        if dataset.get("fingerprint") != expected:
            raise FinReflectError(
                f"dataset fingerprint {dataset.get('fingerprint')} does not match the bundled "
                f"sample's {expected}"
            )
        return
    registry = leaderboard / "datasets.json"
    known = _read_json(registry) if registry.exists() else []
    for entry in known if isinstance(known, list) else []:
        if isinstance(entry, dict) and entry.get("fingerprint") == dataset.get("fingerprint"):
            return
    raise FinReflectError(
        f"dataset {dataset.get('id')!r} with fingerprint {dataset.get('fingerprint')} is not "
        f"registered in {registry}"
    )


def _is_official(judges: dict[str, Any]) -> bool:
    """Official only when the panel is a bundled official one with the same members (name and
    model; the engine that served a judge, in-process vLLM or an endpoint, does not matter)."""
    name = judges.get("panel")
    if name not in available_panels():
        return False
    panel = load_panel(name)
    members = [(m.get("name"), m.get("model")) for m in judges.get("members", [])]
    return panel.official and members == [(j.name, j.model) for j in panel.judges]


def first_difference(submitted: Any, recomputed: Any, path: str = "") -> str | None:
    """`path: submitted X, recomputed Y` for the first value that differs, else None."""
    if isinstance(submitted, dict) and isinstance(recomputed, dict):
        for key in sorted(set(submitted) | set(recomputed), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in submitted or key not in recomputed:
                return f"{where}: present in only one of the submitted and recomputed results"
            found = first_difference(submitted[key], recomputed[key], where)
            if found:
                return found
        return None
    if isinstance(submitted, list) and isinstance(recomputed, list):
        if len(submitted) != len(recomputed):
            return f"{path}: submitted {len(submitted)} values, recomputed {len(recomputed)}"
        for index, (a, b) in enumerate(zip(submitted, recomputed, strict=True)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return None
    if submitted != recomputed or type(submitted) is not type(recomputed):
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool)
                      for v in (submitted, recomputed))  # fmt: skip
        if numbers and submitted == recomputed:  # 1 and 1.0
            return None
        return f"{path}: submitted {submitted!r}, recomputed from the samples {recomputed!r}"
    return None


# --- storing ---


def load_entries(leaderboard: Path, kind: str) -> list[Any]:
    """Every stored submission (`submissions`) or audit (`audits`), re-verified: a file edited
    in place is an error naming it."""
    check = verify if kind == "submissions" else verify_audit
    entries = []
    for path in sorted((leaderboard / kind).glob("*/*.json")):
        try:
            entries.append(check(_read_json(path), leaderboard))
        except FinReflectError as exc:
            raise FinReflectError(f"{path}: {exc}") from exc
    return entries


def submit(
    source: Path, leaderboard: Path, *, hub_repo: str | None = None, dry_run: bool = False
) -> Path:
    """Verify a run (or a judge audit) and add it to the leaderboard (and rebuild the page), or
    open a pull request with it on a Hub repo. Returns where it was (or would be) written."""
    data = bundle_run(source)
    entry = (
        verify_audit(data, leaderboard)
        if data.get("format") == AUDIT_FORMAT
        else verify(data, leaderboard)
    )
    kind = entry.folder.parts[0]
    if any(e.duplicate_key() == entry.duplicate_key() for e in load_entries(leaderboard, kind)):
        raise FinReflectError(
            f"refused: {entry.describe()}, this dataset and these task versions is already "
            "on the leaderboard"
        )
    relative = entry.folder / f"{entry.run_id}.json"
    target = (leaderboard / relative).resolve()
    if (leaderboard / kind).resolve() not in target.parents:
        raise FinReflectError(f"refused: {entry.describe()} would leave the {kind} folder")
    if dry_run:
        return target
    payload = json.dumps(entry.bundle, indent=1, ensure_ascii=False) + "\n"
    if hub_repo:
        _open_pull_request(hub_repo, relative.as_posix(), payload, entry.describe())
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, payload)
    build(leaderboard)
    return target


def _open_pull_request(repo: str, path_in_repo: str, payload: str, what: str) -> None:
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
        raise FinReflectError(f"cannot open a pull request on {repo}: {_one_line(exc)}") from exc
    print(f"opened {commit.pr_url}")


# --- rendering ---


def rows_of(submissions: list[Submission]) -> list[dict[str, Any]]:
    """One flat row per submission: per-mode scores, the overall score and the rest."""
    rows = []
    for submission in submissions:
        results = submission.results
        by_mode = {entry["mode"]: entry for entry in results["results"].values()}
        row: dict[str, Any] = {
            "model": submission.model,
            "hub_url": f"https://huggingface.co/{submission.model}" if "/" in submission.model
            else None,
            "official": submission.official,
            "panel": results["judges"]["panel"],
            "dataset": _dataset_label(results["dataset"]),
            "date": results["date"][:10],
            "run_id": submission.run_id,
        }  # fmt: skip
        for mode in MODES:
            entry = by_mode.get(mode, {})
            for criterion, short in LETTERS.items():
                row[f"{mode}.{short}"] = entry.get(criterion)
                row[f"{mode}.{short}_ci"] = entry.get(f"{criterion}_ci")
        row["overall"] = overall_score(by_mode.values())
        for criterion, short in LETTERS.items():
            alphas = [a[criterion]["alpha"] for a in results["agreement"].values()]
            row[f"alpha.{short}"] = _mean(alphas, digits=4)
        row["triples_per_span"] = _mean([e["triples_per_span"] for e in by_mode.values()])
        row["check_rules"] = _mean([e["check_rules"] for e in by_mode.values()])
        rows.append(row)
    return rows


def overall_score(entries: Any) -> float | None:
    """The mean of F, P, R and C over every mode the submission ran (missing values skipped)."""
    values = [e[c] for e in entries for c in CRITERIA if e.get(c) is not None]
    return _mean(values)


def _mean(values: list[Any], digits: int = 2) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), digits) if present else None


def _dataset_label(dataset: dict[str, Any]) -> str:
    label = str(dataset.get("id"))
    if dataset.get("revision"):
        label += f"@{str(dataset['revision'])[:10]}"
    if dataset.get("limit"):
        label += f" (first {dataset['limit']})"
    return f"{label} {str(dataset.get('fingerprint'))[:8]}"


def judge_rows(audits: list[AuditEntry]) -> list[dict[str, Any]]:
    """One row per judge (and panel majority) per audit: accuracy and κ per criterion, flip
    rate per probe, α of the panel."""
    rows = []
    for audit in audits:
        report = audit.bundle["report"]
        for judge, entry in report["judges"].items():
            row: dict[str, Any] = {
                "panel": audit.panel,
                "official": audit.official,
                "judge": judge,
                "dataset": _dataset_label(audit.bundle["dataset"]),
                "date": audit.bundle["date"][:10],
            }
            for criterion, short in LETTERS.items():
                values = entry["criteria"][criterion]
                row[f"accuracy.{short}"] = values["accuracy"]
                row[f"kappa.{short}"] = values["kappa"]
                agreement = report["agreement"][criterion]["alpha"]
                row[f"alpha.{short}"] = agreement if judge == PANEL_ROW else None
            for probe, values in entry["probes"].items():
                row[f"flip.{probe}"] = values["rate"]
            rows.append(row)
    return rows


def build(leaderboard: Path) -> list[Path]:
    """Render `index.html`, `leaderboard.json`, `leaderboard.csv` and `judges.json` from the
    stored submissions and judge audits."""
    leaderboard.mkdir(parents=True, exist_ok=True)
    rows = rows_of(load_entries(leaderboard, "submissions"))
    rows.sort(key=lambda r: -math.inf if r["overall"] is None else r["overall"], reverse=True)
    judges = judge_rows(load_entries(leaderboard, "audits"))
    names = ("index.html", "leaderboard.json", "leaderboard.csv", "judges.json")
    paths = [leaderboard / name for name in names]
    texts = [render_html(rows, judges), json.dumps(rows, indent=2, ensure_ascii=False) + "\n",
             _csv(rows), json.dumps(judges, indent=2, ensure_ascii=False) + "\n"]  # fmt: skip
    for path, text in zip(paths, texts, strict=True):
        write_atomic(path, text)
    return paths


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    columns = list(rows[0]) if rows else ["model"]
    writer = csv.DictWriter(buffer, columns)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, list) else spreadsheet_safe(v)
                         for k, v in row.items()})  # fmt: skip
    return buffer.getvalue()


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def render_html(rows: list[dict[str, Any]], judge_rows_: list[dict[str, Any]]) -> str:
    """The page: every value from a submission goes through `html.escape`."""
    e = html.escape
    letters = LETTERS.values()
    columns = [(f"{mode}.{short}", short, mode) for mode in MODES for short in letters]
    head_modes = "".join(
        f'<th scope="colgroup" colspan="4">{e(mode.replace("_", "-"))}</th>' for mode in MODES
    )

    def sortable(key: str, label: str, title: str) -> str:
        return (f'<th scope="col" aria-sort="none"><button type="button" data-key="{e(key)}" '
                f'title="{e(title)}">{e(label)}</button></th>')  # fmt: skip

    header = "".join(sortable(k, label, f"{label} ({mode})") for k, label, mode in columns)
    header += sortable("overall", "Overall", "mean of F, P, R and C over the modes run")
    header += "".join(sortable(f"alpha.{s}", f"α {s}", f"Krippendorff's α, {s}")
                      for s in LETTERS.values())  # fmt: skip
    header += sortable("triples_per_span", "Triples/span", "triples per span")
    header += sortable("check_rules", "CheckRules", "share of triples passing all rules")

    body = []
    for row in rows:
        model = e(row["model"])
        link = f'<a href="{e(row["hub_url"])}">{model}</a>' if row["hub_url"] else model
        badge = ('<span class="badge official">official</span>' if row["official"]
                 else '<span class="badge community">community</span>')  # fmt: skip
        cells = [f'<th scope="row">{link} {badge}</th>']
        for key, _, _ in columns:
            ci = row[f"{key}_ci"]
            detail = f"<small>[{_number(ci[0])}, {_number(ci[1])}]</small>" if ci else ""
            cells.append(_cell(key, row[key], _number(row[key]) + detail))
        cells.append(
            _cell("overall", row["overall"], f"<strong>{_number(row['overall'])}</strong>")
        )
        for short in LETTERS.values():
            alpha = row[f"alpha.{short}"]
            cells.append(_cell(f"alpha.{short}", alpha, "—" if alpha is None else f"{alpha:.2f}"))
        cells.append(_cell("triples_per_span", row["triples_per_span"],
                           _number(row["triples_per_span"])))  # fmt: skip
        cells.append(_cell("check_rules", row["check_rules"], _number(row["check_rules"])))
        cells += [f"<td>{e(row['panel'])}</td>", f"<td>{e(row['dataset'])}</td>",
                  f"<td>{e(row['date'])}</td>"]  # fmt: skip
        body.append(f'<tr data-panel="{e(row["panel"])}" data-dataset="{e(row["dataset"])}">'
                    + "".join(cells) + "</tr>")  # fmt: skip

    def options(key: str) -> str:
        values = sorted({row[key] for row in rows})
        return "".join(f'<option value="{e(v)}">{e(v)}</option>' for v in values)

    plots = "".join(_plot(rows, criterion, short) for criterion, short in LETTERS.items())
    return PAGE.format(
        judges=_judges_table(judge_rows_),
        n=len(rows),
        head_modes=head_modes,
        header=header,
        body="\n".join(body) or '<tr><td colspan="24">No submissions yet.</td></tr>',
        panels=options("panel"),
        datasets=options("dataset"),
        plots=plots,
        script=SCRIPT,
        style=STYLE,
    )


def _judges_table(rows: list[dict[str, Any]]) -> str:
    e = html.escape
    if not rows:
        return "<p>No judge audits submitted yet.</p>"
    keys = [key for key in rows[0] if "." in key]
    header = "".join(
        f'<th scope="col" aria-sort="none"><button type="button" data-key="{e(k)}">'
        f"{e(_judge_column(k))}</button></th>"
        for k in keys
    )
    body = []
    for row in rows:
        badge = ('<span class="badge official">official</span>' if row["official"]
                 else '<span class="badge community">community</span>')  # fmt: skip
        cells = [f'<th scope="row">{e(row["judge"])}</th>',
                 f"<td>{e(row['panel'])} {badge}</td>"]  # fmt: skip
        for key in keys:
            value = row.get(key)
            text = "—" if value is None else f"{value:.2f}"
            cells.append(_cell(key, value, text))
        cells += [f"<td>{e(row['dataset'])}</td>", f"<td>{e(row['date'])}</td>"]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<div class="table-wrap"><table id="judges" class="sortable">'
        "<caption>Judge audits: accuracy and Cohen's κ against gold labels per criterion, "
        "flip rates under each bias probe (0 is best), α within the panel</caption>"
        f'<thead><tr><th scope="col">Judge</th><th scope="col">Panel</th>{header}'
        '<th scope="col">Dataset</th><th scope="col">Date</th></tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _judge_column(key: str) -> str:
    kind, _, name = key.partition(".")
    prefix = {"accuracy": "acc", "kappa": "κ", "alpha": "α", "flip": "flip"}[kind]
    return f"{prefix} {name.replace('_', ' ')}"


def _cell(key: str, value: float | None, text: str) -> str:
    sort_value = "" if value is None else repr(float(value))
    return f'<td data-key="{html.escape(key)}" data-value="{sort_value}">{text}</td>'


def _plot(rows: list[dict[str, Any]], criterion: str, short: str) -> str:
    """A bar per submission: the criterion averaged over the modes it ran (inline SVG)."""
    e = html.escape
    bars = []
    for row in rows:
        values = [row[f"{mode}.{short}"] for mode in MODES]
        bars.append((row["model"], row["dataset"], _mean(values)))
    height = 24 * max(len(bars), 1) + 24
    parts = [f'<figure><figcaption>{e(criterion.capitalize())} (mean over modes)</figcaption>'
             f'<svg viewBox="0 0 470 {height}" role="img" aria-label="{e(criterion)} by '
             f'submission" width="100%">']  # fmt: skip
    for index, (model, dataset, value) in enumerate(bars):
        y = 12 + 24 * index
        width = 0 if value is None else 2 * value
        parts.append(
            f'<text x="0" y="{y + 12}" class="label">{e(model[:20])} · {e(dataset[:20])}</text>'
            f'<rect x="200" y="{y}" width="{width:.1f}" height="16" class="bar"/>'
            f'<text x="{204 + width:.1f}" y="{y + 12}" class="value">{_number(value)}</text>'
        )
    parts.append("</svg></figure>")
    return "".join(parts)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise FinReflectError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise FinReflectError(f"{path}: not valid JSON ({exc})") from exc


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;padding:1rem;color:#1b1b1b}
h1{font-size:1.4rem;margin:.2rem 0}p{max-width:60rem}
.controls{display:flex;flex-wrap:wrap;gap:1rem;margin:1rem 0}
.table-wrap{overflow-x:auto;-webkit-overflow-scrolling:touch;border:1px solid #ccc}
table{border-collapse:collapse;font-size:.85rem;min-width:100%}
th,td{padding:.3rem .45rem;border-bottom:1px solid #e3e3e3;text-align:right;white-space:nowrap}
th[scope=row]{text-align:left;position:sticky;left:0;background:#fff}
thead th{background:#f3f4f6;position:sticky;top:0}
thead tr:first-child th:first-child{left:0;z-index:2}
th button{font:inherit;font-weight:600;background:none;border:0;cursor:pointer;padding:0}
th button:focus-visible{outline:2px solid #1d4ed8}
th[aria-sort=ascending] button::after{content:" ▲"}
th[aria-sort=descending] button::after{content:" ▼"}
small{color:#555;margin-left:.25rem}
caption{text-align:left;padding:.4rem;font-size:.85rem}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
.badge{font-size:.7rem;padding:.05rem .35rem;border-radius:.6rem;margin-left:.3rem}
.official{background:#dcfce7;color:#14532d}.community{background:#fef3c7;color:#78350f}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(18rem,1fr));gap:1rem}
figure{margin:0}figcaption{font-weight:600;margin:.5rem 0}
.bar{fill:#2563eb}.label,.value{font-size:11px;fill:#1b1b1b}
@media (max-width:600px){body{padding:.5rem}table{font-size:.78rem}}
"""

SCRIPT = """
(function () {
  document.querySelectorAll("table.sortable").forEach(function (table) {
  var tbody = table.tBodies[0];
  table.querySelectorAll("thead button").forEach(function (button) {
    button.addEventListener("click", function () {
      var th = button.parentElement;
      var descending = th.getAttribute("aria-sort") !== "descending";
      table.querySelectorAll("thead th").forEach(function (h) {
        if (h.hasAttribute("aria-sort")) h.setAttribute("aria-sort", "none");
      });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      var key = button.dataset.key;
      var rows = Array.prototype.slice.call(tbody.rows);
      function value(row) {
        var cell = row.querySelector('td[data-key="' + key + '"]');
        var text = cell ? cell.dataset.value : "";
        return text === "" ? -Infinity : parseFloat(text);
      }
      rows.sort(function (a, b) { return descending ? value(b) - value(a) : value(a) - value(b); });
      rows.forEach(function (row) { tbody.appendChild(row); });
    });
  });
  });
  var tbody = document.getElementById("board").tBodies[0];
  var panel = document.getElementById("panel-filter");
  var dataset = document.getElementById("dataset-filter");
  function filter() {
    Array.prototype.forEach.call(tbody.rows, function (row) {
      var show = (!panel.value || row.dataset.panel === panel.value) &&
                 (!dataset.value || row.dataset.dataset === dataset.value);
      row.hidden = !show;
    });
  }
  panel.addEventListener("change", filter);
  dataset.addEventListener("change", filter);
})();
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>FinReflectKG-EvalBench leaderboard</title>
<style>{style}</style>
</head>
<body>
<header>
<h1>FinReflectKG-EvalBench leaderboard</h1>
<p>Knowledge-graph extraction from SEC 10-K filings, scored by a panel of three LLM judges:
faithfulness (F), precision (P), relevance (R) per triple and comprehensiveness (C) per span, ×100,
with 95% bootstrap intervals. <strong>Overall</strong> is the mean of F, P, R and C over the
extraction modes a submission ran. α is Krippendorff's nominal agreement of the judges (mean over
modes). <span class="badge official">official</span> rows use a known official judge panel;
<span class="badge community">community</span> rows do not, and are not comparable with them.
{n} submission(s); every score was recomputed from the submitted votes.</p>
</header>
<main>
<div class="controls">
<label>Judge panel <select id="panel-filter"><option value="">all</option>{panels}</select></label>
<label>Dataset <select id="dataset-filter"><option value="">all</option>{datasets}</select></label>
</div>
<div class="table-wrap">
<table id="board" class="sortable">
<caption class="visually-hidden">Submissions; click a column header to sort</caption>
<thead>
<tr><th scope="col" rowspan="2">Model</th>{head_modes}
<th scope="colgroup" colspan="7">All modes</th>
<th scope="col" rowspan="2">Judge panel</th><th scope="col" rowspan="2">Dataset</th>
<th scope="col" rowspan="2">Date</th></tr>
<tr>{header}</tr>
</thead>
<tbody>
{body}
</tbody>
</table>
</div>
<section class="plots" aria-label="Scores per criterion">{plots}</section>
<section aria-labelledby="judges-title">
<h2 id="judges-title">Judges</h2>
<p>How far each judge panel can be trusted: <code>finreflect-eval audit-judges</code> runs a
panel on gold labels and on controlled perturbations (triple order, paragraph order, longer
wording, planted unsupported triples, world knowledge absent from the text). Every number was
recomputed from the submitted verdicts.</p>
{judges}
</section>
</main>
<script>{script}</script>
</body>
</html>
"""
