"""The judge stage: a panel of LLM judges votes on every extracted triple and span.

Each judge answers one call per (criterion, span): for faithfulness, precision and relevance an
array with exactly one verdict per triple, in order; for comprehensiveness one verdict for the
span. Verdicts come first in the output schema, then the reasoning (commit, then justify).
In-process judges run one model at a time (judges that share a model share one load), judges
behind endpoints run concurrently, every call is cached, and the votes are written into the
samples the extraction left, so `score` needs nothing else.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    model_validator,
)

from finreflect_eval._util.errors import FinReflectError, first_invalid_field
from finreflect_eval._util.redaction import redact
from finreflect_eval._util.resources import load_yaml, tasks_dir
from finreflect_eval.models import (
    LM,
    GenerationRequest,
    GenerationResult,
    ModelSpec,
    check_spec,
    get_backend,
    load_model,
)
from finreflect_eval.models._thinking import as_setting
from finreflect_eval.pipeline.cascade import grounded_triples, spread_votes, unjudged
from finreflect_eval.pipeline.extraction import model_call
from finreflect_eval.protocol.criteria import COMPREHENSIVENESS_LEVELS, CRITERIA, TRIPLE_CRITERIA
from finreflect_eval.records import JudgeMember, Judging, PlainName, SampleRecord, Vote
from finreflect_eval.records.samples import FAILED_CALL_VOTE, NO_TRIPLES_VOTE, answer_votes, fill
from finreflect_eval.runs.store import Run
from finreflect_eval.scoring.compute import PanelFile
from finreflect_eval.tasks.config import GenerationKwargs, Task

logger = logging.getLogger(__name__)

T = TypeVar("T")
REASONING_CHARS = 160  # room for the 15 words the prompt asks for
WARNING_CHARS = 60
MODEL_NOTES = ("gated", "licence_url", "weights_gb")  # JudgeSpec's facts about its model
# What a panel file says that a run's record holds as it ran (`provenance`) or not at all.
PANEL_ONLY = (*MODEL_NOTES, "chat_template_sha")


class TripleVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verdict: Literal[0, 1]
    reasoning: str = Field(max_length=REASONING_CHARS)
    warning: str = Field(max_length=WARNING_CHARS)


class SpanVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verdict: Literal[COMPREHENSIVENESS_LEVELS]  # type: ignore[valid-type]
    reasoning: str = Field(max_length=REASONING_CHARS)
    warning: str = Field(max_length=WARNING_CHARS)


@cache
def triple_verdicts_model(n_triples: int) -> type[BaseModel]:
    """`{"verdicts": [...]}` with exactly one verdict per triple, the count enforced while
    decoding; one class (one output schema) per triple count, each compiled in milliseconds by
    the default engines (README, Performance)."""
    return create_model(
        f"TripleVerdicts{n_triples}",
        __config__=ConfigDict(extra="forbid"),
        verdicts=(list[TripleVerdict], Field(min_length=n_triples, max_length=n_triples)),
    )


# The model args that say how a judge thinks (`models._thinking`).
THINK_ARGS = ("think", "think_budget", "reasoning_effort")


class JudgeSpec(BaseModel):
    """One judge of a panel: a model, its backend and arguments, and its own generation
    overrides; `system_prefix` goes before the system prompt (e.g. "/no_think")."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    model: str
    backend: str = "hf"
    model_args: dict[str, Any] = {}
    generation_kwargs: dict[str, Any] = {}
    system_prefix: str = ""
    revision: str | None = Field(None, pattern=r"^[0-9a-f]{40}$")
    """The commit of the model's Hub repo to load (an official panel pins each judge's)."""
    chat_template_sha: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    """The sha256 of the chat template that revision's tokenizer gives, where the panel pins
    it: an official run must have rendered its prompts with it."""
    # Facts about the model, for `run --check` offline (not recorded with a run): the Hub repo
    # is gated (its licence page: `licence_url`, default the repo's page), and the approximate
    # size of its weights download in GB.
    gated: bool = False
    licence_url: str | None = Field(None, pattern=r"^https://")
    weights_gb: float | None = Field(None, gt=0)

    # A model the caller loaded (Panel.from_models): used as it is, never loaded or freed here.
    _loaded: LM | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _licence_of_gated(self) -> JudgeSpec:
        if self.licence_url and not self.gated:
            raise ValueError("licence_url is for a gated model: add gated: true")
        return self

    @property
    def model_spec(self) -> ModelSpec:
        pinned = {"revision": self.revision} if self.revision else {}
        return ModelSpec(self.model, self.backend, {**pinned, **self.model_args})

    @property
    def source(self) -> ModelSpec | LM:
        """What `load_model` takes for this judge."""
        return self._loaded or self.model_spec

    @property
    def remote(self) -> bool:
        return self._loaded.remote if self._loaded else get_backend(self.backend).remote


class Panel(BaseModel):
    """A judge panel file (`tasks/judges/<name>.yaml`)."""

    model_config = ConfigDict(extra="forbid")

    panel: PlainName  # in file names
    official: bool = False
    description: str = ""
    generation_kwargs: GenerationKwargs = GenerationKwargs()
    judges: list[JudgeSpec] = Field(min_length=1)
    _source: Path | None = PrivateAttr(default=None)  # the file it was read from

    @model_validator(mode="after")
    def _unique_names(self) -> Panel:
        names = [judge.name for judge in self.judges]
        if len(set(names)) < len(names):
            raise ValueError(f"judge names must be unique, got {names}")
        return self

    def at_endpoints(self, endpoints: dict[str, str]) -> Panel:
        """The panel with the named judges served elsewhere: each an OpenAI-compatible endpoint
        (`vllm serve MODEL`, which may span GPUs or nodes), given as `{judge name: base URL}`.
        The judge keeps its name, model, prompts and generation settings, and its thinking
        (`think`, `think_budget`, gpt-oss's `reasoning_effort`), which the server is asked for
        (`models._thinking`)."""
        names = {judge.name for judge in self.judges}
        unknown = sorted(set(endpoints) - names)
        if unknown:
            raise FinReflectError(
                f"--judge-endpoints: panel '{self.panel}' has no judge '{unknown[0]}'; "
                f"its judges: {', '.join(sorted(names))}"
            )
        judges = []
        for judge in self.judges:
            if judge.name not in endpoints:
                judges.append(judge)
                continue
            args: dict[str, Any] = {
                "base_url": endpoints[judge.name],
                **think_args(judge.model_args),
            }
            judges.append(judge.model_copy(update={"backend": "openai", "model_args": args}))
        return self.model_copy(update={"judges": judges})

    @classmethod
    def from_models(cls, models: Mapping[str, LM] | Sequence[LM], name: str = "custom") -> Panel:
        """A panel of models already loaded, by judge name (a list: `judge-0`, `judge-1`, ...),
        with the default generation settings."""
        if not isinstance(models, Mapping):
            models = {f"judge-{number}": lm for number, lm in enumerate(models)}
        judges = []
        try:
            for judge_name, lm in models.items():
                spec = JudgeSpec(name=judge_name, model=lm.model, backend=lm.backend)
                spec._loaded = lm
                judges.append(spec)
            return cls(panel=name, judges=judges)
        except ValidationError as exc:
            raise FinReflectError(f"judges: {first_invalid_field(exc)}") from None

    def check(self) -> None:
        """What can be checked before any model loads: at least two judges (an item is
        scored on two valid votes), each judge's backend and model args. Errors name the
        panel's file and the judge."""
        problem = self.size_problem()
        if problem:
            raise FinReflectError(problem)
        for judge in self.judges:
            try:
                check_spec(judge.source)
            except FinReflectError as exc:
                raise FinReflectError(f"{self.described}, judge {judge.name}: {exc}") from None

    def size_problem(self) -> str | None:
        """Why the panel cannot score a run, if it has fewer than two judges."""
        if len(self.judges) >= 2:
            return None
        return (
            f"{self.described}: {len(self.judges)} judge, but an item is scored on two valid "
            "votes or more, so no score could be given: the panel needs at least two judges"
        )

    @property
    def described(self) -> str:
        """`panel 'name'`, with the file it was read from."""
        return f"panel '{self.panel}'" + (f" ({self._source})" if self._source else "")

    def generation(self, judge: JudgeSpec) -> GenerationKwargs:
        return GenerationKwargs.model_validate(
            {**self.generation_kwargs.model_dump(), **judge.generation_kwargs}
        )


def available_panels() -> list[str]:
    return sorted(path.stem for path in (tasks_dir() / "judges").glob("*.yaml"))


def load_panel(name_or_path: str | Path) -> Panel:
    """A bundled panel by name (`paper`, `small`, `demo`) or a panel YAML file."""
    path = Path(name_or_path)
    if not path.is_file():
        if is_panel_file(name_or_path):
            raise FinReflectError(f"judge panel file {path} does not exist")
        path = tasks_dir() / "judges" / f"{name_or_path}.yaml"
        if not path.is_file():
            raise FinReflectError(
                f"unknown judge panel '{name_or_path}'; bundled: {', '.join(available_panels())}"
                " (or give a panel YAML file)"
            )
    raw = load_yaml(path, "judge panel")
    try:
        panel = Panel.model_validate(raw)
    except ValidationError as exc:
        raise FinReflectError(f"{path}: {first_invalid_field(exc)}") from exc
    for judge in panel.judges:
        try:
            panel.generation(judge)
        except ValidationError as exc:
            raise FinReflectError(
                f"{path}: judge {judge.name}: generation_kwargs: {first_invalid_field(exc)}"
            ) from exc
    panel._source = path
    return panel


def panel_choice(name_or_path: str | Path | None) -> str | PanelFile | None:
    """`--judges` where a run's votes are read: a panel's name (None: the latest) as it is, a
    panel file as its name and judges (see `scoring.compute.choose_panel`)."""
    if name_or_path is None:
        return None
    if not is_panel_file(name_or_path):
        return str(name_or_path)
    given = load_panel(name_or_path)
    return PanelFile(str(name_or_path), given.panel, tuple(judge.name for judge in given.judges))


def is_panel_file(name_or_path: str | Path) -> bool:
    """Whether `--judges` gives a panel file (a file, or a path or YAML name), not a name."""
    path = Path(name_or_path)
    return path.is_file() or path.suffix in (".yaml", ".yml") or len(path.parts) > 1


def judge_request(
    task: Task,
    criterion: str,
    span: Any,
    triples: list[Any],
    judge: JudgeSpec,
    generation: GenerationKwargs,
) -> GenerationRequest:
    """One judge's call about a span (anything with ticker, section and text) on a criterion."""
    system, user = task.render(criterion, span=span, triples=triples)
    if judge.system_prefix:
        system = f"{judge.system_prefix}\n{system}"
    schema = triple_verdicts_model(len(triples)) if criterion in TRIPLE_CRITERIA else SpanVerdict
    return generation.chat_request(system, user, schema)


def judge_requests(
    task: Task,
    record: SampleRecord,
    judge: JudgeSpec,
    generation: GenerationKwargs,
    judged: Sequence[int] | None = None,
) -> dict[str, GenerationRequest]:
    """The calls of one judge about one span, by criterion (those of the task's metric list).
    A span without triples gets no call (see NO_TRIPLES_VOTE). `judged`: the triples to ask
    about per triple (the grounding cascade's; None: all), no such call where there is none."""
    if not record.triples:
        return {}
    asked = record.triples if judged is None else [record.triples[i] for i in judged]
    return {
        criterion: judge_request(
            task,
            criterion,
            record,
            asked if criterion in TRIPLE_CRITERIA else record.triples,
            judge,
            generation,
        )
        for criterion in task.criteria
        if asked or criterion not in TRIPLE_CRITERIA
    }


def provenance(lm: LM) -> dict[str, Any]:
    """Who cast a judge's votes, as its record keeps it (`records.JudgeMember`): the commit its
    weights came from, the engine that ran it, and the chat template its prompts were rendered
    with."""
    return {
        "sha": lm.commit,
        "engine": lm.engine(),
        "chat_template_sha": lm.resolved().get("chat_template_sha"),
    }


def judge_member(panel: Panel, spec: JudgeSpec, facts: dict[str, Any]) -> JudgeMember:
    """A judge as a record keeps it: the panel's settings for it (secrets redacted) and what
    ran it (`provenance`)."""
    return JudgeMember(
        **redact(spec.model_dump(exclude={"generation_kwargs", *PANEL_ONLY})),
        generation_kwargs=panel.generation(spec).model_dump(),
        **facts,
    )


def votes_of(criterion: str, n_triples: int, result: GenerationResult) -> list[Vote]:
    """One vote per item; a failed call is an abstention on each of its items."""
    if not result.ok:
        items = n_triples if criterion in TRIPLE_CRITERIA else 1
        return [FAILED_CALL_VOTE] * items
    return answer_votes(criterion, result.parsed)


def run_judges(
    panel: Panel, cache_path: Path | None, work: Callable[[JudgeSpec, LM], T]
) -> dict[str, T]:
    """`work(judge, model)` for every judge of the panel; the results by judge name, in panel
    order. Judges behind endpoints (a server runs the model: vLLM serve, possibly across GPUs or
    nodes) all work at once, beside the in-process judges, whose models load one at a time
    (judges that share a model, like the demo panel's, share one load). `work` runs in a thread
    for endpoint judges, so it must only return its results, not change shared state."""

    def at_endpoint(spec: JudgeSpec) -> T:
        with load_model(spec.source, cache_path=cache_path) as lm:
            return work(spec, lm)

    endpoints = [spec for spec in panel.judges if spec.remote]
    by_model: dict[str, list[JudgeSpec]] = {}
    for spec in panel.judges:
        if spec not in endpoints:
            key = json.dumps(
                [spec.model, spec.backend, spec.model_args, id(spec._loaded)], sort_keys=True
            )
            by_model.setdefault(key, []).append(spec)
    done: dict[str, T] = {}
    pool = ThreadPoolExecutor(max_workers=max(len(endpoints), 1), thread_name_prefix="judge")
    try:
        futures = {spec.name: pool.submit(at_endpoint, spec) for spec in endpoints}
        for judges in by_model.values():
            with load_model(judges[0].source, cache_path=cache_path) as lm:
                for spec in judges:
                    done[spec.name] = work(spec, lm)
        for name, future in futures.items():
            done[name] = future.result()
    finally:
        pool.shutdown(cancel_futures=True)
    return {spec.name: done[spec.name] for spec in panel.judges}


def judge(
    run: Run,
    panel: Panel,
    *,
    cache_path: Path | None,
    tasks: dict[str, Task],
    skip_ungrounded: bool = False,
) -> Run:
    """Add every judge's votes on the criteria of each task's metric list to the run's records,
    kept under the panel's name (another panel's votes stay beside them), and save the run.
    `tasks`: the run's tasks by name, as loaded now. `skip_ungrounded`: the grounding cascade
    (triples whose numbers or dates their span lacks score 0 by rule, unjudged)."""
    panel.check()
    for name, info in run.manifest.tasks.items():
        task = tasks[name]
        if not task.config.judge_prompts:
            raise FinReflectError(f"{task.path}: field 'judge_prompts': the task has none")
        if task.hash != info.hash:
            logger.warning(
                "task %s changed since extraction (hash %s, was %s)", name, task.hash, info.hash
            )
    if panel.panel in run.manifest.judging:
        logger.warning(
            "panel '%s' judges this run again: its earlier votes are replaced", panel.panel
        )
    records = [record for name in run.manifest.tasks for record in run.records[name]]
    judged = {id(r): grounded_triples(r) for r in records} if skip_ungrounded else {}
    for record in records:
        criteria = tasks[record.task].criteria
        record.votes[panel.panel] = {criterion: {} for criterion in criteria}
        record.judge_calls[panel.panel] = []
        if not record.triples and "comprehensiveness" in criteria:
            no_triples = {judge.name: [NO_TRIPLES_VOTE] for judge in panel.judges}
            record.votes[panel.panel]["comprehensiveness"] = no_triples

    def vote(spec: JudgeSpec, lm: LM) -> tuple[list[tuple], list[GenerationResult], float, dict]:
        started = time.perf_counter()
        generation = panel.generation(spec)
        calls = [
            (record, criterion, request)
            for record in records
            for criterion, request in judge_requests(
                tasks[record.task], record, spec, generation, judged.get(id(record))
            ).items()
        ]
        results = lm.generate([c[2] for c in calls], desc=f"judge {spec.name}")
        return calls, results, time.perf_counter() - started, provenance(lm)

    seconds: dict[str, float] = {}
    ran: dict[str, dict[str, Any]] = {}  # each judge's `provenance`
    for name, (calls, results, elapsed, facts) in run_judges(panel, cache_path, vote).items():
        ran[name] = facts
        for (record, criterion, request), result in zip(calls, results, strict=True):
            asked = judged.get(id(record))
            if asked is None or criterion not in TRIPLE_CRITERIA:
                votes = votes_of(criterion, len(record.triples), result)
            else:
                votes = spread_votes(
                    votes_of(criterion, len(asked), result), asked, len(record.triples)
                )
            record.votes[panel.panel][criterion][name] = votes
            call = model_call(f"judge:{criterion}", result, request, model=name)
            record.judge_calls[panel.panel].append(call)
        seconds[name] = round(elapsed, 3)
    cascade = unjudged(records, judged, tasks, panel) if skip_ungrounded else None
    for record in records:  # the panel's per-sample metric values, from its votes
        fill(record)

    run.manifest.judging[panel.panel] = Judging(
        panel=panel.panel,
        official=panel.official,
        description=panel.description,
        judges=[judge_member(panel, spec, ran[spec.name]) for spec in panel.judges],
        criteria=[c for c in CRITERIA if any(c in tasks[t].criteria for t in run.manifest.tasks)],
        task_hashes={name: tasks[name].hash for name in run.manifest.tasks},
        seconds=seconds,
        cascade=cascade,
    )
    run.store.save(run)
    return run


def think_args(model_args: Mapping[str, Any]) -> dict[str, Any]:
    """A judge's thinking settings as any backend takes them (`think`, `think_budget`,
    `reasoning_effort`), the earlier `enable_thinking` switch as `think`."""
    args = {key: model_args[key] for key in THINK_ARGS if model_args.get(key) is not None}
    if "think" in args:  # YAML's unquoted `off` is false
        args["think"] = as_setting(args["think"])
    switch = model_args.get("enable_thinking")
    if switch is not None:
        alias = "on" if switch else "off"
        given = args.setdefault("think", alias)
        if given != alias:  # both, disagreeing: as given (a backend refuses such a pair)
            args["think"] = f"{given} with enable_thinking {switch}"
    return args
