"""Tasks as data: YAML files (with `include`), typed and validated, and their Jinja2 prompts.

A task or group file is any `*.yaml` under a tasks folder, except `_*.yaml` (bases for
`include`), `schema.yaml`, and the `judges/`, `prompts/` and `qa/` folders. Later folders
(`--include-path`) override earlier ones by name, with a notice. A file that does not parse or
validate is an error naming the file and the field; nothing is skipped silently.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
)
from pydantic_core import PydanticCustomError

from finreflect_eval._util.errors import FinReflectError, first_invalid_field
from finreflect_eval._util.redaction import redact
from finreflect_eval._util.resources import load_yaml, tasks_dir
from finreflect_eval.models import GenerationRequest
from finreflect_eval.protocol.criteria import CRITERIA, CriterionName
from finreflect_eval.protocol.modes import MODES, ModeName
from finreflect_eval.protocol.schema import KGSchema, load_schema
from finreflect_eval.records import MetricSpec, PlainName, SliceSpec

logger = logging.getLogger(__name__)

RESERVED = {"schema.yaml", "judges", "prompts", "qa"}
_PATH_FIELDS = ("schema",)


class GenerationKwargs(BaseModel):
    """Sampling settings, in the ranges every backend accepts (finite numbers only), with
    lm-eval's common keys. `do_sample=False` is greedy: temperature 0, as lm-eval and
    transformers read it. `do_sample=True` needs a temperature above 0: sampling at 0 would be
    greedy (transformers refuses it, vLLM silently decodes greedily), so it is refused. Without
    `do_sample` the temperature decides. `top_p` and `top_k` apply when sampling; unset (None)
    leaves each backend's default (the checkpoint's generation config on hf, vLLM's, the
    server's), and `top_k=0` turns top-k off everywhere."""

    model_config = ConfigDict(extra="forbid", strict=True)

    # Before `temperature`, whose validator reads it; not kept (the temperature says it).
    do_sample: bool | None = Field(None, exclude=True)
    max_gen_toks: int = Field(2048, gt=0, le=1_000_000)
    temperature: float = Field(0.0, ge=0, le=10, allow_inf_nan=False, validate_default=True)
    seed: int = Field(1234, ge=0, lt=2**63)
    top_p: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    top_k: int | None = Field(None, ge=0, lt=2**31)

    @field_validator("temperature")
    @classmethod
    def _greedy_or_sampled(cls, temperature: float, info: ValidationInfo) -> float:
        do_sample = info.data.get("do_sample")
        if do_sample is False:
            return 0.0
        if do_sample and temperature == 0:  # (a custom error: no "Value error," before it)
            raise PydanticCustomError(
                "do_sample", "do_sample=True samples: give a temperature above 0 (0 is greedy)"
            )
        return temperature

    @model_serializer(mode="wrap")
    def _without_unset_sampling(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A run without top_p/top_k records, and so resumes, as before these keys existed.
        return {
            key: value
            for key, value in handler(self).items()
            if value is not None or key not in ("top_p", "top_k")
        }

    def chat_request(self, system: str, user: str, schema: Any) -> GenerationRequest:
        """A system + user chat request under these settings, its output held to `schema`."""
        return GenerationRequest.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            schema=schema,
            max_tokens=self.max_gen_toks,
            temperature=self.temperature,
            seed=self.seed,
            top_p=self.top_p,
            top_k=self.top_k,
        )


class ModelRef(BaseModel):
    """Another model a task uses (multi-pass normaliser): loaded in turn, after the candidate."""

    model_config = ConfigDict(extra="forbid")

    model: str
    backend: str = "hf"
    model_args: dict[str, Any] = {}


DEFAULT_METRICS = [
    MetricSpec(metric=name) for name in (*CRITERIA, "check_rules", "triples_per_span")
]


# The task fields a run may set (lm-eval's flags); the manifest keeps them in each task's config.
TASK_OVERRIDES = ("num_fewshot", "system_instruction")


class DownstreamSpec(BaseModel):
    """A task's downstream QA track (`downstream`): its questions answered from the graph its
    triples make (see docs/downstream.md)."""

    model_config = ConfigDict(extra="forbid")

    qa: str = "reference"
    """The fixed QA model: a file of `tasks/qa/` by name, or a QA model YAML file."""
    max_hops: int = Field(3, ge=1, le=3)
    """Path connectivity: the question's start and end within this many edges."""


class TaskConfig(BaseModel):
    """One extraction task (field names follow lm-eval where the meaning is the same)."""

    model_config = ConfigDict(extra="forbid")

    task: PlainName  # in file names
    tag: list[str] = []
    dataset_path: str = "sample"
    dataset_name: str | None = None  # the dataset's config, for row data on the Hub (lm-eval)
    dataset_revision: str | None = None
    # The task's selection of the split's spans (None: every span); applied before --limit.
    slice: SliceSpec | None = None
    test_split: str = "test"
    fewshot_dataset: str | None = None  # where few-shot examples come from; None: dataset_path
    fewshot_split: str | None = "dev"
    num_fewshot: int = Field(0, ge=0)
    # lm-eval's --system_instruction: put before the system part of every extraction prompt.
    system_instruction: str | None = None
    mode: ModeName
    schema_path: str = Field(alias="schema")
    prompts: dict[str, str]
    judge_prompts: dict[CriterionName, str] = {}  # one template per criterion, for `judge`
    max_triples: int = Field(40, gt=0)
    min_triples: int = Field(0, ge=0)  # >0 makes the decoder commit to some triples
    generation_kwargs: GenerationKwargs = GenerationKwargs()
    max_iterations: int = Field(3, ge=1)
    normalizer_model: ModelRef | None = None
    judges: str = "paper"
    # What the results report; the judges answer the criteria among them.
    metric_list: list[MetricSpec] = Field(
        default_factory=lambda: list(DEFAULT_METRICS), min_length=1
    )
    metadata: dict[str, Any] = Field(default_factory=lambda: {"version": 0})
    downstream: DownstreamSpec | None = None

    def model_post_init(self, _context: Any) -> None:
        missing = [step for step in MODES[self.mode].prompts if step not in self.prompts]
        if missing:
            raise ValueError(f"mode {self.mode} needs a '{missing[0]}' prompt")
        missing = [c for c in self.criteria if self.judge_prompts and c not in self.judge_prompts]
        if missing:
            raise ValueError(f"judge_prompts needs a '{missing[0]}' template")
        if self.min_triples > self.max_triples:
            raise ValueError("min_triples must not exceed max_triples")
        if self.num_fewshot and not self.fewshot_split:
            raise ValueError("num_fewshot needs a fewshot_split")

    @field_validator("metric_list")
    @classmethod
    def _each_metric_once(cls, specs: list[MetricSpec]) -> list[MetricSpec]:
        names = [spec.metric for spec in specs]
        if len(set(names)) < len(names):
            raise ValueError(f"a metric is listed twice: {names}")
        return specs

    @property
    def version(self) -> Any:
        return self.metadata.get("version")

    @property
    def criteria(self) -> list[str]:
        """The judge criteria of the metric list, in the criteria's order."""
        wanted = {spec.metric for spec in self.metric_list}
        return [name for name in CRITERIA if name in wanted]


class GroupConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group: str
    task: list[str] = Field(min_length=1)
    metadata: dict[str, Any] = {}


@dataclass
class Task:
    """A validated task with its source file, schema and prompt templates."""

    config: TaskConfig
    path: Path

    @property
    def name(self) -> str:
        return self.config.task

    @property
    def criteria(self) -> list[str]:
        """The judge criteria the task reports (from its metric list)."""
        return self.config.criteria

    @cached_property
    def schema(self) -> KGSchema:
        return load_schema(self.config.schema_path)

    @property
    def templates(self) -> dict[str, str]:
        """Prompt template per step: extraction steps and judge criteria."""
        return {**self.config.prompts, **self.config.judge_prompts}

    @cached_property
    def _environments(self) -> dict[Path, jinja2.Environment]:
        """One environment per prompt folder: a template (and what it imports) is always taken
        from its own folder, even when another folder has a file of the same name."""
        return {
            folder: jinja2.Environment(
                loader=jinja2.FileSystemLoader(folder),
                undefined=jinja2.StrictUndefined,  # a typo in a template is an error, not ""
                autoescape=False,  # prompts are plain text, not HTML
            )
            for folder in {Path(p).parent for p in self.templates.values()}
        }

    def render(self, step: str, **context: Any) -> tuple[str, str]:
        """(system, user) texts of a step's prompt."""
        path = self.templates[step]
        try:
            template = self._environments[Path(path).parent].get_template(Path(path).name)
            module = template.make_module({"schema": self.schema, **context})
            return str(module.system()).strip(), str(module.user()).strip()
        except (jinja2.TemplateError, AttributeError, TypeError) as exc:
            raise FinReflectError(f"prompt template {path} ({step}): {exc}") from exc

    def recorded_config(self) -> dict[str, Any]:
        """The config as run files record it: every file it names (schema, prompt templates, a
        panel file) by its name in the tasks folder it comes from, with the file's sha256 under
        `files`; never by its absolute path, which would publish the user's folders and make
        the record depend on where the package is installed. Secrets are redacted."""
        config = self.config.model_dump(mode="json", by_alias=True)
        files: dict[str, str] = {}

        def record(path: str) -> str:
            name = self._file_name(Path(path))
            files[name] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            return name

        config["schema"] = record(config["schema"])
        for key in ("prompts", "judge_prompts"):
            config[key] = {step: record(path) for step, path in config[key].items()}
        if config["judges"].endswith((".yaml", ".yml")):  # a panel file, not a bundled name
            config["judges"] = record(config["judges"])
        if config["downstream"] is None:  # added later: unset, recorded as before
            del config["downstream"]
        elif config["downstream"]["qa"].endswith((".yaml", ".yml")):  # a file, not a name
            config["downstream"]["qa"] = record(config["downstream"]["qa"])
        config["files"] = dict(sorted(files.items()))
        return redact(config)

    def _file_name(self, path: Path) -> str:
        """`path` relative to the bundled tasks folder, or else to the task file's folder, or
        else its bare name."""
        for root in (tasks_dir(), self.path.parent):
            if path.resolve().is_relative_to(root.resolve()):
                return path.resolve().relative_to(root.resolve()).as_posix()
        return path.name

    @cached_property
    def hash(self) -> str:
        """Changes when the config, a prompt template or the schema file changes."""
        # File paths differ between installs; the files' contents are hashed below instead.
        config = self.config.model_dump(mode="json", by_alias=True)
        for added in ("system_instruction", "downstream"):  # added later: unset, as before
            if config[added] is None:
                del config[added]
        if "downstream" in config:
            config["downstream"]["qa"] = Path(config["downstream"]["qa"]).name
        config["schema"] = Path(config["schema"]).name
        for key in ("prompts", "judge_prompts"):
            config[key] = {step: Path(p).name for step, p in config[key].items()}
        digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
        folders = {Path(p).parent for p in self.templates.values()}
        files = sorted(f for folder in folders for f in folder.glob("*.jinja"))
        for file in [*files, Path(self.config.schema_path)]:
            digest.update(file.read_bytes())
        return digest.hexdigest()[:16]


class TaskIndex:
    """All tasks and groups found in the bundled folder and the include paths, and those of
    `files`: task files read alone, their folders not searched (`tasks validate --tasks
    x.yaml`); a file an include path already holds, or a base (`_*.yaml`), is not read again."""

    def __init__(
        self, include_paths: list[str | Path] | None = None, files: list[Path] | None = None
    ) -> None:
        self.tasks: dict[str, Task] = {}
        self.groups: dict[str, GroupConfig] = {}
        self._defined_in: dict[str, tuple[Path, Path]] = {}  # name -> (tasks folder, file)
        for folder in [tasks_dir(), *(Path(p) for p in include_paths or [])]:
            if not Path(folder).is_dir():
                raise FinReflectError(f"include path {folder} is not a folder")
            for path in sorted(Path(folder).rglob("*.yaml")):
                if not _is_reserved(path, Path(folder)):
                    self._add(path, Path(folder))
        indexed = {file.resolve() for _, file in self._defined_in.values()}
        for path in files or []:
            if path.resolve() not in indexed and not path.name.startswith("_"):
                self._add(path, path)  # its own "folder": another file's task overrides it
        for group in self.groups.values():
            for name in group.task:
                if name not in self.tasks and name not in self.groups:
                    raise FinReflectError(
                        f"{self._defined_in[group.group][1]}: field 'task': unknown task '{name}'"
                    )

    def _add(self, path: Path, folder: Path) -> None:
        raw = _load_with_includes(path)
        kind, model = ("group", GroupConfig) if "group" in raw else ("task", TaskConfig)
        try:
            config = model.model_validate(raw)
        except ValidationError as exc:
            raise FinReflectError(f"{path}: {first_invalid_field(exc)}") from exc
        name = config.group if kind == "group" else config.task
        previous = self._defined_in.get(name)
        if previous and previous[0] == folder:  # which would win is an accident of file order
            raise FinReflectError(
                f"{path}: field '{kind}': '{name}' is also defined in {previous[1]}"
            )
        self._defined_in[name] = (folder, path)
        if previous:
            logger.warning("%s '%s' from %s overrides an earlier definition", kind, name, path)
            self.tasks.pop(name, None)
            self.groups.pop(name, None)
        if kind == "group":
            self.groups[name] = config
        else:
            self.tasks[name] = Task(config, path)

    @property
    def tags(self) -> dict[str, list[str]]:
        """Each tag (a task's `tag` field, as in lm-eval) with its tasks: a tag selects tasks
        without aggregating them (a group aggregates)."""
        tags: dict[str, list[str]] = {}
        for task in self.tasks.values():
            for tag in task.config.tag:
                tags.setdefault(tag, []).append(task.name)
        return tags

    def name_of(self, path: Path) -> str:
        """The task or group a task file of the index defines (lm-eval's `--tasks x.yaml`)."""
        if not path.is_file():
            raise FinReflectError(f"{path}: no such task file")
        for name, (_, file) in self._defined_in.items():
            if file.resolve() == path.resolve():
                return name
        raise FinReflectError(
            f"{path}: defines no task or group (a file named _*.yaml is a base for `include`; "
            "schema.yaml and the judges/ and prompts/ folders hold none), or is not in the "
            "tasks folders or include paths"
        )

    def resolve(self, names: list[str]) -> list[Task]:
        """Tasks by name (or by task file: `name_of`), groups and tags expanded, in order, each
        once."""
        resolved: dict[str, Task] = {}
        tags = self.tags
        for item in names:
            name = self.name_of(Path(item)) if is_task_file(item) else item
            if name in self.groups:
                for task in self.resolve(self.groups[name].task):
                    resolved.setdefault(task.name, task)
            elif name in self.tasks:
                resolved.setdefault(name, self.tasks[name])
            elif name in tags:
                for task in tags[name]:
                    resolved.setdefault(task, self.tasks[task])
            else:
                known = ", ".join(sorted([*self.tasks, *self.groups, *tags]))
                raise FinReflectError(f"unknown task, group or tag '{name}' (known: {known})")
        return list(resolved.values())


def is_task_file(name: str) -> bool:
    """A `--tasks` item that names a task file, not a task (as lm-eval tells them; task files
    are `*.yaml`, as the index finds them)."""
    return name.endswith(".yaml")


def _is_reserved(path: Path, root: Path) -> bool:
    relative = path.relative_to(root)
    return path.name.startswith("_") or bool(RESERVED & {relative.parts[0], path.name})


def _load_with_includes(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's mapping over its `include` base or bases (recursively); relative paths
    resolved against the file that states them."""
    path = path.resolve()
    if path in seen:
        raise FinReflectError(f"{seen[-1]}: field 'include': include cycle through {path.name}")
    raw = load_yaml(path, "task file")
    if not isinstance(raw, dict):
        raise FinReflectError(f"{path}: field '(top level)': expected a mapping")
    for field in _PATH_FIELDS:
        if isinstance(raw.get(field), str):
            raw[field] = str((path.parent / raw[field]).resolve())
    dataset = raw.get("dataset_path")
    if isinstance(dataset, str) and dataset.startswith(("./", "../", "~")):
        raw["dataset_path"] = str((path.parent / Path(dataset).expanduser()).resolve())
    for key in ("prompts", "judge_prompts"):
        if not isinstance(raw.get(key), dict):
            continue
        raw[key] = {step: str((path.parent / str(f)).resolve()) for step, f in raw[key].items()}
        for step, file in raw[key].items():
            if not Path(file).is_file():
                raise FinReflectError(f"{path}: field '{key}.{step}': no such file {file}")
    if isinstance(raw.get("judges"), str) and raw["judges"].endswith(".yaml"):
        raw["judges"] = str((path.parent / raw["judges"]).resolve())
    qa = raw.get("downstream", {}).get("qa") if isinstance(raw.get("downstream"), dict) else None
    if isinstance(qa, str) and qa.endswith((".yaml", ".yml")):
        raw["downstream"]["qa"] = str((path.parent / qa).resolve())
    bases = raw.pop("include", None)
    merged: dict[str, Any] = {}
    # One base, or a list merged in order (later bases override earlier ones).
    for base_name in bases if isinstance(bases, list) else [] if bases is None else [bases]:
        base_path = path.parent / str(base_name)
        if not base_path.is_file():
            raise FinReflectError(f"{path}: field 'include': no such file {base_path}")
        merged.update(_load_with_includes(base_path, (*seen, path)))
    return {**merged, **raw}


def validate_task(task: Task, span: Any, fewshot: list[dict[str, Any]]) -> None:
    """Check what a run would need: the schema file, and every prompt rendering on a span.
    Raises an error naming the task file and the field."""
    try:
        task.schema  # noqa: B018 - loading is the check
    except FinReflectError as exc:
        raise FinReflectError(f"{task.path}: field 'schema': {exc}") from exc
    example = [
        {
            "subject": span.ticker,
            "subject_type": "ORG",
            "relation": "Discloses",
            "object": "Net sales",
            "object_type": "FIN_METRIC",
        }
    ]
    feedback = [{"triple_index": 0, "issue": "vague object", "suggestion": "name the metric"}]
    for step in task.templates:
        field = "judge_prompts" if step in task.config.judge_prompts else "prompts"
        try:
            system, user = task.render(
                step, span=span, fewshot=fewshot, triples=example, feedback=feedback
            )
        except FinReflectError as exc:
            raise FinReflectError(f"{task.path}: field '{field}.{step}': {exc}") from exc
        if not system or span.text not in user:
            raise FinReflectError(
                f"{task.path}: field '{field}.{step}': the template must render a non-empty "
                "system() part and put the span text in user()"
            )
