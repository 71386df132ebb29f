"""The files a run writes, as types: every producer writes through these models and every reader
(the next stage, the leaderboard) validates with them.

A run folder (`OUTPUT_PATH/<model>/`) holds a `Manifest` (`manifest_<run>.json`), one
`SampleRecord` per span and task (`samples_<task>_<run>.jsonl`), and per judge panel the
`Results` (`results_<run>_<panel>.json`) and the review queues (`ReviewItem` lines in
`review_<task>_<panel>.jsonl`, and the same as CSV). `audit-judges` writes a `JudgeAudit`; a
leaderboard entry is a `Submission`.

Every file (every line of a JSONL file) carries `format_version`; a file of another version is a
one-line error (`finreflect-eval upgrade` converts runs written before versions existed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from finreflect_eval.criteria import CRITERIA, METRIC_NAMES, Aggregation, CriterionName, Label
from finreflect_eval.errors import FinReflectError, first_invalid_field, first_line
from finreflect_eval.modes import ModeName
from finreflect_eval.schema import Triple

FORMAT_VERSION = 2
Percent = float | None  # scores are percentages (0..100); None where undefined

# Names read from run files that become parts of file names: a run folder is input (someone else
# may hand it over), so each is checked against its pattern where it is read, never joined as is.
RunId = Annotated[
    str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(-[0-9a-f]{4})?$")
]
"""A run's start time, UTC, and a random part (`2026-12-03T07-16-18-9f2c`; format 1: no part)."""
PlainName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
"""A task, group or panel name: letters, digits, `.`, `_`, `-` (one file-name part)."""
SamplesName = Annotated[str, StringConstraints(pattern=r"^samples_[A-Za-z0-9._-]{1,250}\.jsonl$")]
"""A samples file of the run's own folder."""


class Record(BaseModel):
    """A part of a file: unknown fields are refused, fields are documented in place."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class FileRecord(Record):
    """A whole file (or one line of a JSONL file)."""

    format_version: Literal[2] = FORMAT_VERSION
    """The version of these file schemas that wrote the file."""


# --- the manifest ---


class SliceSpec(Record):
    """A deterministic, stratified selection of a split's spans: in every stratum (company and
    10-K section), the `per_stratum` spans whose ids hash lowest (sha256 of `salt:span_id`).
    The same span list gives the same slice, on any machine."""

    name: PlainName
    per_stratum: int = Field(ge=1)
    salt: str
    """Changes the selection; part of the slice's definition."""


class DatasetInfo(Record):
    id: str
    """`sample`, a local path or a Hub id."""
    config: str | None = None
    """The dataset's config (lm-eval's `dataset_name`), for row data on the Hub."""
    split: str
    revision: str | None = None
    """The Hub revision the data came from, if pinned."""
    fingerprint: str
    """A hash of the whole split's content (spans, reference triples, judgments)."""
    slice: SliceSpec | None = None
    """The task's slice of the split (None: every span)."""
    limit: int | None = None
    """`--limit`: only the first N spans (of the slice) were run."""
    size: int | None = None
    """Spans in the whole split, or in the slice (None: unknown, e.g. row data streamed under a
    limit)."""


class SpanList(Record):
    """What identifies a task's whole span list (before sharding)."""

    count: int
    sha256: str
    """A hash of the span ids in order."""


class ShardInfo(Record):
    index: int = Field(ge=0)
    count: int = Field(ge=1)


class ModelInfo(Record):
    """The candidate model."""

    name: str
    """Model id, path or alias, as given."""
    backend: str
    args: dict[str, Any] = {}
    """Backend arguments (`--model-args`)."""
    sha: str | None = None
    """The commit of the Hub repo the weights were loaded from (the revision resolved), where
    the backend knows it."""


class MetricSpec(Record):
    """One item of a task's `metric_list` (lm-eval's field)."""

    metric: str
    """A judge criterion or an extraction metric (finreflect_eval.criteria)."""
    aggregation: Aggregation | None = None
    """For a criterion: micro (over items) or macro (over spans); None keeps its default."""
    higher_is_better: bool | None = None
    """Informational; the criteria module decides."""

    def model_post_init(self, _context: Any) -> None:
        if self.metric not in METRIC_NAMES:
            raise ValueError(f"unknown metric '{self.metric}'; known: {', '.join(METRIC_NAMES)}")
        if self.aggregation is not None and self.metric not in CRITERIA:
            raise ValueError(f"'{self.metric}' is not averaged over items: no aggregation")


class TaskManifest(Record):
    mode: ModeName
    version: Any = None
    """The task's `metadata.version`."""
    hash: str
    """Changes when the task's config, prompts or schema change."""
    config: dict[str, Any]
    """The task's whole configuration (lm-eval's `configs`)."""
    generation_kwargs: dict[str, Any]
    metric_list: list[MetricSpec]
    """What the results report for this task (and which criteria the judges answer)."""
    samples: SamplesName
    """The samples file's name (in the run's folder)."""
    seconds: float = 0.0
    dataset: DatasetInfo
    span_list: SpanList
    fewshot: list[str] = []
    """The span ids of the few-shot examples in the prompt."""


class JudgeMember(Record):
    """One judge of a panel, as it ran."""

    name: str
    model: str
    backend: str
    model_args: dict[str, Any] = {}
    generation_kwargs: dict[str, Any] = {}
    system_prefix: str = ""


class Judging(Record):
    """One panel's judging of the run."""

    panel: PlainName
    official: bool = False
    description: str = ""
    judges: list[JudgeMember]
    criteria: list[CriterionName]
    """The criteria the judges were asked about (from the tasks' metric_list)."""
    task_hashes: dict[str, str]
    seconds: dict[str, float] = {}
    """Per judge: wall seconds of its calls."""

    @field_validator("judges")
    @classmethod
    def _each_judge_once(cls, judges: list[JudgeMember]) -> list[JudgeMember]:
        names = [judge.name for judge in judges]
        if len(set(names)) < len(names):
            raise ValueError(f"a judge is named twice: {names}")
        return judges


class Manifest(FileRecord):
    """`manifest_<run>.json`: what a run is, and the files it consists of."""

    run: RunId
    """The run's id: its start time, UTC, and a random part (`2026-12-03T07-16-18-9f2c`); in
    every file name."""
    status: Literal["extracting", "extracted"] = "extracting"
    """`extracting` until every span of every task is done (a killed run resumes)."""
    model: ModelInfo
    tasks: dict[PlainName, TaskManifest]
    groups: dict[str, list[str]] = {}
    """Groups and tags asked for, with their tasks."""
    group_versions: dict[str, Any] = {}
    seed: int | None = None
    """`--seed`: overrides the tasks' generation seed."""
    shard: ShardInfo | None = None
    dataset: DatasetInfo
    cache: str | None = None
    """The response cache the extraction used: relative to the run folder where it lies in the
    output path (`../cache.sqlite`), else its absolute path."""
    finreflect_eval_version: str
    git_hash: str | None = None
    seconds: float = 0.0
    """Wall seconds of the extraction."""
    judging: dict[PlainName, Judging] = {}
    """By panel name: every panel that judged this run (each panel's votes are kept apart)."""


# --- samples ---


class Feedback(Record):
    """One item of a reflection critic's feedback."""

    triple_index: int = Field(ge=0)
    issue: str = Field(max_length=300)
    suggestion: str = Field(max_length=300)


class ModelCall(Record):
    """One model call about a span (an extraction step or a judge's criterion), as kept."""

    step: str
    """`extract`, `normalize`, `critic`, `correct`, or `judge:<criterion>`."""
    model: str | None = None
    """The judge's name, for judge calls."""
    iteration: int = 0
    text: str | None
    """The accepted output (None when the call failed in transport)."""
    raw_outputs: list[str] = []
    """Every output, including those that failed validation and were retried."""
    error: str | None = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_hash: str = ""
    """sha256 of the request (messages, schema and sampling settings)."""

    @property
    def transport_failed(self) -> bool:
        """The call failed before the model answered (server unreachable, timed out, malformed
        reply): not the model's failure, never cached, retried on rerun."""
        return self.error is not None and not self.raw_outputs


class Vote(Record):
    """One judge's verdict on one item; `verdict` None is an abstention (the call failed)."""

    verdict: Literal[0, 1, "good", "partial", "poor"] | None
    """0/1 for triple criteria, good/partial/poor for comprehensiveness."""
    reasoning: str = ""
    warning: str = ""
    synthetic: bool = False
    """Given by rule, not by the judge (a span without triples is `poor`)."""


Votes = dict[str, dict[str, list[Vote]]]  # criterion -> judge -> one vote per item


class SampleRecord(FileRecord):
    """Everything about one span of one task: one line of `samples_<task>_<run>.jsonl`."""

    doc_id: int = Field(ge=0, lt=2**63)
    """The span's position in the task's span list (lm-eval's `doc_id`)."""
    task: str
    mode: ModeName
    span_id: str
    ticker: str
    section: str
    text: str
    doc_hash: str
    """sha256 of the span text."""
    prompt_hash: str = ""
    """sha256 of the first extraction request."""
    arguments: dict[str, dict[str, Any]] = {}
    """The rendered prompt of each extraction step, as lm-eval logs it:
    `gen_args_<i>: {arg_0: messages, arg_1: generation settings}`."""
    reference: list[Triple] = []
    triples: list[Triple] = []
    """The final triples."""
    rule_checks: list[dict[str, bool]] = []
    """CheckRules per final triple."""
    failed: bool = False
    """The extraction failed (after retries): the span counts with no triples."""
    failures: list[str] = []
    steps: list[ModelCall] = []
    iterations: int = 0
    converged: bool | None = None
    feedback_trail: list[list[Feedback]] = []
    prompt_tokens: int = 0
    completion_tokens: int = 0
    votes: dict[str, Votes] = {}
    """By panel: criterion -> judge -> one vote per item (per triple for faithfulness,
    precision and relevance; one for comprehensiveness)."""
    judge_calls: dict[str, list[ModelCall]] = {}
    """By panel: every judge call about this span."""


# --- results ---


class SampleCount(Record):
    original: int | None
    """Spans in the dataset split (None when unknown)."""
    effective: int
    """Spans run (after --limit and --shard)."""


class RunSettings(Record):
    """lm-eval's `config` block."""

    model: str
    """The backend (lm-eval's model type: hf, vllm, openai, ...)."""
    model_args: dict[str, Any]
    model_name: str
    model_revision: str | None = None
    model_sha: str | None = None
    model_dtype: str | None = None
    batch_size: int | str | None = None
    limit: int | None = None
    seed: int | None = None
    shard: str | None = None
    """`i/N` when these are one shard's results."""
    bootstrap_iters: int
    bootstrap_seed: int
    judges: str
    """The judge panel's name."""
    allow_failures: bool = False
    """Scored with `--allow-failures` despite failed calls (never a leaderboard entry)."""


class Agreement(Record):
    alpha: float | None = Field(ge=-1, le=1)
    """Krippendorff's α (nominal) across the judges; None when undefined."""
    reason: str | None
    n_items: int = Field(ge=0)


class ItemCounts(Record):
    n_items: int
    n_scored: int
    """Items with at least two valid votes."""
    unanimous: int
    split: int
    """Items the judges disagreed on (in the review queue)."""
    no_majority: int
    abstentions: int


class CriterionDetail(Record):
    aggregation: Literal["micro", "macro"]
    ci: list[float] | None
    """95% bootstrap interval (resampling spans)."""
    items: ItemCounts
    per_judge: dict[str, Percent]
    """Each judge's own score on the items it judged."""


class Failures(Record):
    """What failed in a task: transport failures (the server, not the model) and invalid
    outputs after retries."""

    transport_spans: int = 0
    """Spans whose extraction failed in transport (unreachable, timed out, malformed reply)."""
    invalid_spans: int = 0
    """Spans whose extraction output stayed invalid after retries (the model's failure)."""
    judge_transport_calls: int = 0
    """Judge calls that failed in transport (their items lost a vote)."""
    judge_calls_each: int = 0
    """The calls each judge of the panel was asked (all are asked the same)."""
    judge_failed_calls: dict[str, int] = {}
    """Per judge with any: its calls that failed, in transport or with invalid output after
    retries (each an abstention on the call's items)."""
    first: str = ""
    """The first failure's message."""


class Tokens(Record):
    prompt: int = 0
    completion: int = 0


class TaskDetails(Record):
    """What a task's lm-eval metric row does not hold."""

    mode: ModeName
    metrics: list[str]
    """The metrics reported (the task's metric_list)."""
    criteria: dict[str, CriterionDetail]
    n_spans: int
    n_triples: int
    check_rules_detail: dict[str, Percent]
    failed_extractions: int
    judge_failures: int
    failures: Failures
    tokens: dict[str, Tokens]
    """`extract` and `judge`."""
    seconds: dict[str, float]


class Overall(Record):
    """One number per run: the mean of every judged criterion of every task (mode)."""

    score: Percent
    ci: list[float] | None
    """95% bootstrap interval, resampling the spans jointly for every task and criterion."""
    tasks: dict[str, Percent]
    """Per task: the mean of its judged criteria."""


class JudgesInfo(Record):
    panel: PlainName
    official: bool
    members: list[JudgeMember]
    seconds: dict[str, float]


class Results(FileRecord):
    """`results_<run>_<panel>.json`, shaped like lm-eval's results file (its `make_table` reads
    it), plus our own blocks: `details`, `agreement`, `judges`, `dataset`."""

    model_config = ConfigDict(populate_by_name=True)

    results: dict[str, dict[str, Any]]
    """Per task: `name`, `alias`, `sample_len`, and `<metric>,none` / `<metric>_stderr,none`
    (percent; the stderr is the bootstrap's standard deviation)."""
    groups: dict[str, dict[str, Any]] = {}
    """Per group: the unweighted mean of each metric over its tasks."""
    group_subtasks: dict[str, list[str]] = {}
    configs: dict[str, dict[str, Any]]
    versions: dict[str, Any]
    n_shot: dict[str, int] = Field(alias="n-shot")
    higher_is_better: dict[str, dict[str, bool | None]]
    n_samples: dict[str, SampleCount] = Field(alias="n-samples")
    config: RunSettings
    model_name: str
    model_name_sanitized: str
    model_source: str
    git_hash: str | None
    date: float
    """Unix time the run started (lm-eval's `date`)."""
    run: RunId
    """The run's id (its start time), as in the file names."""
    task_hashes: dict[str, str]
    total_evaluation_time_seconds: str
    details: dict[str, TaskDetails]
    overall: Overall
    agreement: dict[str, dict[str, Agreement]]
    """Per task and criterion."""
    judges: JudgesInfo
    dataset: DatasetInfo
    finreflect_eval_version: str
    samples: dict[str, SamplesName]
    """Per task: the samples file."""

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


class ReviewItem(FileRecord):
    """One line of `review_<task>_<panel>.jsonl`: an item the panel split on, could not score,
    or had no majority for, with every judge's vote."""

    task: str
    span_id: str
    criterion: CriterionName
    triple_index: int | None
    triple: list[str] | None
    label: Label | None
    """The label taken (None: unscored)."""
    reason: str
    votes: dict[str, Vote]
    span_text: str


# --- judge audits and submissions ---


class ProbeSpan(Record):
    """What a judge prompt shows of a span."""

    span_id: str
    ticker: str
    section: str
    text: str


class Case(Record):
    """One judge call of an audit and what its verdicts are compared with."""

    probe: str
    """`gold`, or the probe that made it."""
    criterion: CriterionName
    span: ProbeSpan
    triples: list[Triple]
    keys: list[str]
    """Per item: the gold item it restates (triple_id; span_id for C), or a new id."""
    expected: list[Label | None]
    """The gold label per item (0 for planted triples)."""


class JudgeAudit(FileRecord):
    """`judge_audit_<date>.json` (`audit-judges`): every case and verdict, and the report."""

    date: RunId
    panel: dict[str, Any]
    """`panel`, `official`, `members`."""
    task: dict[str, str]
    """`name` and `hash` of the task whose judge prompts were used."""
    dataset: DatasetInfo
    probes: list[str]
    seed: int
    finreflect_eval_version: str
    cases: list[Case]
    verdicts: dict[str, list[list[Label | None]]] = Field(min_length=1)
    """Per judge: per case, one verdict per item."""
    calls: dict[str, dict[str, float]]
    report: dict[str, Any]
    """Recomputable from cases, verdicts and calls."""


class Submission(FileRecord):
    """A leaderboard entry: a run's results with the manifest and samples they follow from
    (prompts left out; every number is recomputed from the votes)."""

    results: Results
    manifest: Manifest
    samples: dict[str, list[SampleRecord]]


# --- reading ---

M = TypeVar("M", bound=FileRecord)
MAX_DEPTH = 64  # our files nest about 8 levels; JSON deeper than this is refused


def check_version(data: Any, where: str | Path) -> None:
    """A one-line error for a file of another format version (no version: written before
    versions existed)."""
    version = data.get("format_version") if isinstance(data, dict) else None
    if version == FORMAT_VERSION:
        return
    shown = version if isinstance(version, int) else repr(version)  # "2" is not 2
    written = f"format version {shown}" if version is not None else "an older format"
    raise FinReflectError(
        f"{where} is in {written}; this finreflect-eval reads format version {FORMAT_VERSION}"
        " (convert a run folder with `finreflect-eval upgrade DIR`)"
    )


def parse(model: type[M], data: Any, where: str | Path) -> M:
    """`data` (parsed JSON) as `model`, after the version check; errors name `where`."""
    check_version(data, where)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise FinReflectError(f"{where}: {first_invalid_field(exc)}") from exc


def read(model: type[M], path: Path) -> M:
    """A JSON file as `model`."""
    return parse(model, read_json(path), path)


def read_lines(model: type[M], path: Path) -> list[M]:
    """A JSONL file, one `model` per line; errors name the file and the line. Read a line at a
    time: a run's samples can be gigabytes, and only their records are kept."""
    records = []
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:  # pydantic's own JSON parser: about half the time of json.loads + validation
                    records.append(model.model_validate_json(line))
                    continue
                except ValueError:  # (a ValidationError) read it again to say what is wrong
                    pass
                try:
                    data = json.loads(line)
                except ValueError as exc:
                    raise FinReflectError(f"{path}, line {number}: not JSON ({exc})") from exc
                except RecursionError:
                    raise FinReflectError(
                        f"{path}, line {number}: nested more than {MAX_DEPTH} levels deep"
                    ) from None
                records.append(parse(model, data, f"{path}, line {number}"))
    except OSError as exc:
        raise FinReflectError(f"cannot read {path}: {exc.strerror}") from exc
    return records


def read_json(path: Path, max_bytes: int | None = None) -> Any:
    """A JSON file, refused in one line when larger than `max_bytes` or nested deeper than
    MAX_DEPTH (hostile input must not exhaust memory or the stack)."""
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            raise FinReflectError(
                f"{path}: {path.stat().st_size / 2**20:.1f} MiB is more than the "
                f"{max_bytes / 2**20:.0f} MiB allowed"
            )
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FinReflectError(f"cannot read {path}: {exc.strerror}") from exc
    except RecursionError:
        raise FinReflectError(f"{path}: nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        raise FinReflectError(f"{path}: not JSON ({first_line(exc)})") from exc
    if _depth(data) > MAX_DEPTH:
        raise FinReflectError(f"{path}: nested more than {MAX_DEPTH} levels deep")
    return data


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in parsed JSON (iteratively: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack.extend((child, depth + 1) for child in item)
    return deepest
