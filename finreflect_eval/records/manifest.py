"""`manifest_<run>.json`: what a run is — model, tasks, data, settings as given, environment —
and every panel that judged it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from finreflect_eval.protocol.criteria import (
    COMPREHENSIVENESS_LEVELS,
    CRITERIA,
    METRIC_NAMES,
    Aggregation,
    CriterionName,
)
from finreflect_eval.protocol.modes import ModeName
from finreflect_eval.records.base import (
    FileRecord,
    PlainName,
    Record,
    RunId,
    SamplesName,
)


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
    sections: list[str] | None = None
    """`--sections`: only the spans of these 10-K sections were run."""
    samples: list[str] | None = None
    """`--samples`: only these spans (ids) were run."""
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


class ReplicaInfo(Record):
    """One data-parallel replica (`data_parallel_size`): where it ran and what it did."""

    node: str
    """The IP address of the Ray node its actor ran on."""
    gpus: int = 0
    """GPUs its placement group reserved (tensor × pipeline parallel size; 0: on CPUs)."""
    gpu_ids: list[str] = []
    """The GPUs Ray gave its actor (empty where vLLM's own workers hold them)."""
    batch_sizes: list[int] = []
    requests: int = 0
    """Requests it generated in this load (retries included)."""


class LoadedModel(Record):
    """What the backend resolved when it loaded the model and ran it (lm-eval's
    `get_model_info`, `batch_sizes` and tokenizer information); None where the backend cannot
    know (a server's model)."""

    device: str | None = None
    device_map: dict[str, str] | None = None
    """Where each part of the model ran (accelerate's map), where it was spread by one."""
    attn_implementation: str | None = None
    """transformers' attention kernel (sdpa, flash_attention_2, eager)."""
    dtype: str | None = None
    """The dtype the weights ran in (`auto` resolved)."""
    num_parameters: int | None = None
    batch_sizes: list[int] = []
    """The batch sizes the requests ran at, in order of first use (`auto`: as found)."""
    chat_template: str | None = None
    """The chat template the prompts were rendered with (None: none, or the server's own)."""
    chat_template_sha: str | None = None
    tokenizer_pad_token: list[str] | None = None
    """`[token, id]`, as lm-eval writes them."""
    tokenizer_eos_token: list[str] | None = None
    tokenizer_bos_token: list[str] | None = None
    eot_token_id: int | None = None
    max_length: int | None = None
    """The most tokens (prompt and output) the model takes."""
    data_parallel_size: int = 1
    """Replicas of the model that ran the requests (on Ray)."""
    replicas: list[ReplicaInfo] = []
    think: Literal["off", "on", "none", "native"] | None = None
    """How the model was run to think (`models._thinking`): off, on (a free thought, then the
    answer held to its schema), none (a model that does not think), native (a server's model
    at its own default); None: written before it was recorded."""
    think_budget: int | None = None
    """The tokens a thought could take before its end was written for it."""
    think_default: bool | None = None
    """`think` was the model's default, not set."""
    reasoning_parser: str | None = None
    """vLLM's reasoning parser that ended the thought and split it off (the vllm backend)."""
    reasoning_effort: str | None = None
    """gpt-oss's reasoning effort (its harmony system message)."""


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
    loaded: LoadedModel | None = None
    """What loading resolved (None until the model loads)."""


class RunArguments(Record):
    """The run's settings as given, before the tasks resolve them (what each task's requests
    used is in its `generation_kwargs` and `config`)."""

    limit: int | float | None = None
    """`--limit` as given: a count of spans, or a fraction of them."""
    dataset_revision: str | None = None
    """`--dataset-revision` as given (each task's `dataset.revision` is the commit it read)."""
    sections: list[str] | None = None
    """`--sections` as given."""
    samples: dict[str, list[int | str]] | None = None
    """`--samples` as given (lm-eval's: span indices or ids by task)."""
    gen_kwargs: dict[str, Any] = {}
    """`--gen-kwargs`: set in every task's generation_kwargs."""
    random_seed: int | None = 0
    """lm-eval's seeds: Python's `random` and numpy's global generator are seeded with these
    before the run (None: not seeded); lm-eval's torch seed is the generation seed
    (`Manifest.seed`, else each task's own)."""
    numpy_seed: int | None = 1234
    fewshot_seed: int | None = 1234
    """Recorded only: a task's few-shot examples are the first `num_fewshot` spans of its
    few-shot split, chosen by no random draw."""
    num_fewshot: int | None = None
    """`--num-fewshot`: set in every task's config."""
    system_instruction: str | None = None
    fewshot_as_multiturn: bool = False


class Environment(Record):
    """Where the run ran: the libraries that shape its outputs, and the machine."""

    python: str
    platform: str
    packages: dict[str, str | None]
    """Installed versions (None: not installed)."""
    cuda: str | None = None
    """The CUDA version torch was built with."""
    gpus: list[str] = []

    def pretty(self) -> str:
        """As lm-eval's `pretty_env_info`: one `name: value` line each."""
        lines = [f"Python version: {self.python}", f"Platform: {self.platform}"]
        lines.append(f"CUDA used to build PyTorch: {self.cuda or 'None'}")
        lines.append(f"GPU models: {', '.join(self.gpus) or 'None'}")
        packages = self.packages.items()
        lines += [f"{name}: {version or 'not installed'}" for name, version in packages]
        return "\n".join(lines)


class MetricSpec(Record):
    """One item of a task's `metric_list` (lm-eval's field)."""

    metric: str
    """A judge criterion or an extraction metric (finreflect_eval.protocol.criteria)."""
    aggregation: Aggregation | None = None
    """For a criterion: micro (over items) or macro (over spans); None keeps its default."""
    higher_is_better: bool | None = None
    """Informational; the criteria module decides."""
    levels: dict[Literal["good", "partial", "poor"], float] | None = None
    """For comprehensiveness: the score of each level, from 0 to 1, good ≥ partial ≥ poor and
    good > poor; None keeps 1 / 0.5 / 0. Part of the task's config, so of its hash."""

    def model_post_init(self, _context: Any) -> None:
        if self.metric not in METRIC_NAMES:
            raise ValueError(f"unknown metric '{self.metric}'; known: {', '.join(METRIC_NAMES)}")
        if self.aggregation is not None and self.metric not in CRITERIA:
            raise ValueError(f"'{self.metric}' is not averaged over items: no aggregation")
        if self.levels is not None:
            _check_levels(self.metric, self.levels)

    @model_serializer(mode="wrap")
    def _without_default_levels(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A task without levels records, and hashes, as before the field existed.
        data = handler(self)
        if data.get("levels") is None:
            data.pop("levels", None)
        return data


def _check_levels(metric: str, levels: dict[str, float]) -> None:
    if metric != "comprehensiveness":
        raise ValueError(f"'{metric}' has no levels: only comprehensiveness has")
    if set(levels) != set(COMPREHENSIVENESS_LEVELS):
        raise ValueError(f"levels must give good, partial and poor a score each, not {levels}")
    good, partial, poor = (levels[level] for level in COMPREHENSIVENESS_LEVELS)
    if not (0 <= poor <= partial <= good <= 1 and poor < good):
        raise ValueError(
            f"levels must score 0 ≤ poor ≤ partial ≤ good ≤ 1 with poor < good, not {levels}"
        )


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
    revision: str | None = None
    """The revision the panel pins (a commit), as asked for."""
    sha: str | None = None
    """The commit the weights were loaded from, as the engine resolved it (hf, vllm); None
    where it cannot know (a server's model: then only the revision asked for is known)."""
    engine: str | None = None
    """What ran it: the backend and its library's version (`vllm 0.33.0`), or `server`."""
    chat_template_sha: str | None = None
    """The chat template the prompts were rendered with, where rendered here (None: a
    server's own template, or none)."""


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
    cascade: dict[str, dict[str, int]] | None = None
    """With `--skip-judging-ungrounded` (the judges saw only triples whose numbers and dates
    their span holds; the others scored 0 by rule): per task, `triples_skipped` and
    `judge_calls_saved`. None: the paper's protocol, every triple judged."""

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
    arguments: RunArguments = RunArguments()
    """The run's settings as given."""
    environment: Environment | None = None
    """Library versions and machine (None: written before they were recorded)."""
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
