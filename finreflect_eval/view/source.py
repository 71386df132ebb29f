"""What a report is made of: a scored run's manifest, one panel's results, its samples read a
span at a time (a run folder's samples can be gigabytes; only what the report shows is kept),
people's labels of its items where it has any (`review import`), and the panel's downstream
files where the run has any (multi-hop questions answered from its graph)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.chunking import token_counter
from finreflect_eval.downstream.graph import ModelGraph, subgraph
from finreflect_eval.protocol.criteria import CRITERION_NAMES
from finreflect_eval.records import HumanLabel, Manifest, Results, SampleRecord, Submission, read
from finreflect_eval.records.downstream import DownstreamFile
from finreflect_eval.records.reading import parse
from finreflect_eval.runs.consistency import check_results, check_samples, check_spans
from finreflect_eval.runs.store import RunStore, newest, not_a_link
from finreflect_eval.scoring.compute import PanelFile, choose_panel


@dataclass
class ViewRun:
    """A scored run as a report reads it."""

    manifest: Manifest
    results: Results
    records: Callable[[str], Iterator[SampleRecord]]
    """A task's sample records, in the order they are stored."""
    where: str
    """The folder or file it came from (in messages)."""
    human_labels: dict[str, list[HumanLabel]] = field(default_factory=dict)
    """Per task with any, people's labels of its items (`review import`)."""
    downstream: dict[str, DownstreamFile] = field(default_factory=dict)
    """Per downstream task with one, the panel's downstream file, as it is (scoring checked
    it against the samples)."""

    @property
    def panel(self) -> str:
        return self.results.judges.panel

    @property
    def judges(self) -> list[str]:
        """The panel's judges, in the order the manifest lists them (the votes' keys)."""
        judging = self.manifest.judging.get(self.panel)
        if judging is None:
            return [member.name for member in self.results.judges.members]
        return [member.name for member in judging.judges]

    @property
    def tasks(self) -> list[str]:
        """The tasks scored (a results file's `details`), in its order."""
        return list(self.results.details)

    def criteria(self, task: str) -> list[str]:
        """The criteria the panel judged on the task, in the criteria's order."""
        judged = self.results.details[task].criteria
        return [name for name in CRITERION_NAMES if name in judged]

    @property
    def label(self) -> str:
        """How the report names the run: its model, panel and run id."""
        return f"{self.results.config.model_name} · {self.panel} · {self.results.run}"

    @classmethod
    def of_submission(cls, submission: Submission, where: str = "submission") -> ViewRun:
        """A leaderboard entry (its records are in memory)."""
        samples = submission.samples
        return cls(
            submission.manifest,
            submission.results,
            lambda task: check_samples(where, task, samples.get(task, [])),
            where,
            submission.human_labels,
            {
                task: with_subgraphs(file, samples.get(task, []))
                for task, file in submission.downstream.items()
            },
        )


def with_subgraphs(file: DownstreamFile, records: list) -> DownstreamFile:
    """A submitted downstream file (carried without subgraphs) with each question's subgraph
    made again from the entry's samples, as the stage made it (retrieval is deterministic)."""
    graph = ModelGraph.of_records(records)
    count = token_counter()
    qa = file.qa
    questions = [
        q
        if q.subgraph
        else q.model_copy(
            update={
                "subgraph": subgraph(
                    q.question, graph, qa.neighbourhood_hops, qa.budget_tokens, count
                )
            }
        )
        for q in file.questions
    ]
    return file.model_copy(update={"questions": questions})


def open_run(path: Path | str, panel: str | PanelFile | None = None) -> ViewRun:
    """A scored run from its folder (its newest manifest), a `manifest_*.json` or a
    `results_*.json` file; `panel` picks among the panels that scored it (default: a results
    file's own, else the run's last panel; by name or by its file, see `choose_panel`).
    Whatever is missing is a one-line error."""
    path = Path(path)
    if not path.exists():
        raise FinReflectError(f"{path}: no such run folder")
    results_path = None
    if path.is_dir():
        if not any(path.glob("manifest_*.json")):
            raise FinReflectError(
                f"{path} is not a run folder (no manifest_*.json in it): give the folder that "
                "`finreflect-eval run` wrote (OUTPUT_PATH/MODEL)"
            )
        manifest_path = not_a_link(newest(path, "manifest_*.json"))
        folder = path
    elif path.name.startswith("results_") and path.suffix == ".json":
        results_path, folder = path, path.parent
        results = read(Results, path)
        manifest_path = folder / f"manifest_{results.run}.json"
        if not manifest_path.exists():
            raise FinReflectError(
                f"{path}: its run's manifest {manifest_path.name} is not beside it"
            )
        panel = panel or results.judges.panel
    elif path.name.startswith("manifest_") and path.suffix == ".json":
        manifest_path, folder = path, path.parent
    else:
        raise FinReflectError(
            f"{path} is not a run: give a run folder, a manifest_*.json or a results_*.json"
        )
    manifest = read(Manifest, manifest_path)
    store = RunStore(folder)
    if not manifest.judging:
        scored = _scored_beside(folder, manifest.model.name)
        raise FinReflectError(
            f"{folder}: run {manifest.run} has no votes yet; run `finreflect-eval judge` and "
            "`finreflect-eval score` first"
            + (f" (a scored run of {manifest.model.name} is at {scored})" if scored else "")
        )
    try:
        panel = choose_panel(manifest, panel)
    except FinReflectError as exc:
        raise FinReflectError(f"{folder}: {exc}") from None
    results_path = results_path or store.results_path(manifest.run, panel)
    if not results_path.exists():
        raise FinReflectError(
            f"{folder}: run {manifest.run} has no results for panel '{panel}'; run "
            f"`finreflect-eval score --samples {folder} --judges {panel}` first"
        )
    results = read(Results, results_path)
    check_results(results_path, results, manifest, {})

    def records(task: str) -> Iterator[SampleRecord]:
        """The task's records, each holding together (`check_samples`); once all are read,
        they must be the spans the manifest lists and the results scored (a report never shows
        samples beside other samples' scores)."""
        path = store.samples_path(manifest, task)
        doc_ids, span_ids = [], []
        for record in check_samples(path, task, _read_records(path)):
            doc_ids.append(record.doc_id)
            span_ids.append(record.span_id)
            yield record
        check_spans(manifest, path, task, doc_ids, span_ids)
        check_results(results_path, results, manifest, {task: len(doc_ids)})

    downstream = store.downstream(manifest, panel)
    return ViewRun(
        manifest, results, records, str(folder), store.human_labels(manifest), downstream
    )


def _scored_beside(folder: Path, model: str) -> Path | None:
    """The manifest of the newest scored run of `model` in the run folder `folder` or a folder
    beside it (`OUTPUT_PATH/<model>/`, shards' `shard-<i>-of-<N>/`): what to view instead of a
    run that was only extracted. None if there is none."""
    try:
        beside = sorted(p for p in folder.parent.iterdir() if p.is_dir() and p != folder)
    except OSError:  # a folder that cannot be read: no hint (it is a courtesy)
        beside = []
    for place in [folder, *beside]:
        store = RunStore(place)
        for path in sorted(place.glob("manifest_*.json"), reverse=True):  # run ids: newest last
            try:
                manifest = read(Manifest, path)
                results = [store.results_path(manifest.run, panel) for panel in manifest.judging]
            except (FinReflectError, OSError):  # not a run's manifest: not the one to point to
                continue
            if manifest.model.name == model and any(path.exists() for path in results):
                return path
    return None


def _read_records(path: Path) -> Iterator[SampleRecord]:
    """A samples file's records one at a time (pydantic's own JSON parser); errors name the
    file and line."""
    import json

    if not path.exists():
        raise FinReflectError(f"{path}: the run's samples file is missing")
    with path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield SampleRecord.model_validate_json(line)
            except ValueError:
                try:
                    data = json.loads(line)
                except ValueError:
                    if not line.endswith(b"\n"):
                        continue  # the line a killed run was writing
                    raise FinReflectError(f"{path} line {number}: not JSON") from None
                yield parse(SampleRecord, data, f"{path} line {number}")
