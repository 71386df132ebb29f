"""A run's configuration, from the command line or Python (`RunConfig`, checked as it is made),
and what its settings make of a task: its overridden fields (`with_overrides`) and its
generation kwargs (`generation_kwargs`)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from finreflect_eval._util.errors import FinReflectError, first_invalid_field, first_line
from finreflect_eval.models import LM, ModelSpec
from finreflect_eval.pipeline.sharding import Shard
from finreflect_eval.records import Prices
from finreflect_eval.stats.uncertainty import BOOTSTRAP_ITERS
from finreflect_eval.tasks.config import Task


@dataclass
class RunConfig:
    """One run of the pipeline, from the command line or Python."""

    model: ModelSpec | LM  # what to load, or a model the caller loaded (and frees)
    tasks: list[str] = field(default_factory=lambda: ["finreflect"])
    dataset: str | None = None  # overrides every task's dataset_path
    dataset_revision: str | None = None  # overrides the tasks' dataset_revision (Hub data)
    limit: int | float | None = None  # the first N spans of each task, or a fraction (0-1)
    sections: list[str] | None = None  # only the spans of these 10-K sections (item1, item7)
    samples: dict[str, list[int | str]] | None = None  # lm-eval's: spans by index or id, by task
    output_path: Path = Path("results")
    cache: Path | None = None  # the response cache file; None: no cache
    include_paths: list[Path] = field(default_factory=list)
    seed: int | None = None  # the generation seed (lm-eval's torch seed); None: the tasks'
    # lm-eval's other seeds, set before the run (lm-eval's defaults).
    random_seed: int | None = 0
    numpy_seed: int | None = 1234
    fewshot_seed: int | None = 1234
    gen_kwargs: dict[str, Any] = field(default_factory=dict)
    shard: Shard | None = None  # run only this shard of every task's spans
    bootstrap_iters: int = BOOTSTRAP_ITERS  # resamples behind every interval (0: none)
    skip_judging_ungrounded: bool = False  # the grounding cascade (pipeline.cascade)
    prices: Prices | None = None  # the price table of the results' cost block (None: no money)
    qa: str | None = None  # the downstream tasks' QA model, in place of their own (a name, a file)
    # Task fields set for this run (lm-eval's --num_fewshot, --system_instruction).
    num_fewshot: int | None = None
    system_instruction: str | None = None
    # No effect (a warning): our few-shot examples are part of the prompt template, not turns.
    fewshot_as_multiturn: bool = False

    def __post_init__(self) -> None:
        for name, seed in (("random", self.random_seed), ("numpy", self.numpy_seed)):
            if seed is not None and not 0 <= seed < 2**32:  # numpy's range
                raise FinReflectError(f"--seed: the {name} seed must be in 0..2**32-1, got {seed}")
        given = self.gen_kwargs.get("seed", self.seed)
        if self.seed is not None and given != self.seed:  # which would win is a guess
            raise FinReflectError(
                f"--seed gives the generation seed {self.seed}, --gen-kwargs seed={given}: "
                "give one of them"
            )
        if self.sections is not None and not all(name.strip() for name in self.sections):
            raise FinReflectError("--sections: a section name is empty (e.g. item1,item7)")
        if self.samples is not None:
            if self.limit is not None:  # as lm-eval
                raise FinReflectError("--limit and --samples choose spans both: give one of them")
            for task, chosen in self.samples.items():
                if not isinstance(chosen, list) or not all(
                    isinstance(item, str) or (isinstance(item, int) and not isinstance(item, bool))
                    for item in chosen
                ):
                    raise FinReflectError(
                        f"--samples: task {task} must map to a list of span indices or span ids"
                    )
        limit = self.limit
        if isinstance(limit, float) and limit >= 1 and limit.is_integer():
            self.limit = int(limit)  # lm-eval's limit is a float: 2.0 is two spans
        elif limit is not None and not (0 < limit < 1 or (isinstance(limit, int) and limit >= 1)):
            raise FinReflectError(
                f"limit must be a positive count or a fraction between 0 and 1, got {limit}"
            )

    @property
    def output_dir(self) -> Path:
        """`<output_path>/<model name>`, like lm-eval (`org/name` → `org__name`); a shard's
        run goes into `shard-<i>-of-<N>/` under it."""
        model = self.model.model
        name = Path(model).name if Path(model).exists() else model.replace("/", "__")
        folder = self.output_path / name
        return folder / self.shard.name if self.shard else folder

    def output_problems(self) -> list[str]:
        """Why the run folder or the cache's folder could not be created and written, if so
        (`folder_problem`); said once where both are in one folder (the default cache)."""
        folders = {self.output_dir: ("output folder", "--output-path")}
        if self.cache:
            folders.setdefault(self.cache.parent, ("cache's folder", "--cache"))
        problems: dict[Path, str | None] = {}  # by the nearest existing folder
        for folder, (what, flag) in folders.items():
            existing = nearest_folder(folder)
            if existing not in problems:
                problems[existing] = folder_problem(folder, what, flag)
        return [problem for problem in problems.values() if problem]

    def default_cache(self) -> Path:
        """One cache per output path, and one per shard (shards may run on machines sharing a
        network folder, where one SQLite file must not be shared)."""
        name = f"cache-{self.shard.name}.sqlite" if self.shard else "cache.sqlite"
        return self.output_path / name


def nearest_folder(folder: Path) -> Path:
    """`folder`, or the nearest folder above it that exists (where creating it would begin)."""
    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    return existing


def folder_problem(folder: Path, what: str, flag: str) -> str | None:
    """Why `folder` (the `what` of `flag`) could not be created and written, if so: a scratch
    folder is made (and removed) in the nearest one that exists."""
    existing = nearest_folder(folder)
    if not existing.is_dir():
        return f"output: {folder} cannot be a folder: {existing} is a file; choose another {flag}"
    try:
        with tempfile.TemporaryDirectory(prefix=".finreflect-check-", dir=existing):
            pass
    except OSError as exc:  # the OS's reason, said as the answer to making a folder
        return (
            f"output: the {what} {folder} cannot be written: the OS refused a new folder in "
            f"{existing} ({exc.strerror or first_line(exc)}); choose another {flag}"
        )
    return None


def with_overrides(task: Task, overrides: dict[str, Any]) -> Task:
    """The task with these fields set (None: as the task says)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    if not changes:
        return task
    try:
        config = type(task.config).model_validate(
            {**task.config.model_dump(by_alias=True), **changes}
        )
    except ValidationError as exc:
        raise FinReflectError(f"task {task.name}: {first_invalid_field(exc)}") from exc
    return Task(config, task.path)


def generation_kwargs(config: RunConfig, spec: Any) -> Any:
    """The task's generation kwargs with the run's `--gen-kwargs` and `--seed` set."""
    overrides = dict(config.gen_kwargs)
    if config.seed is not None:
        overrides["seed"] = config.seed
    accepted = sorted(type(spec.generation_kwargs).model_fields)
    unknown = sorted(set(overrides) - set(accepted))
    if unknown:  # one line naming what is accepted, not pydantic's "extra inputs" wording
        raise FinReflectError(
            f"--gen-kwargs: unknown key '{unknown[0]}'; accepted: {', '.join(accepted)}"
        )
    try:
        return spec.generation_kwargs.model_validate(
            {**spec.generation_kwargs.model_dump(), **overrides}
        )
    except ValidationError as exc:
        raise FinReflectError(f"--gen-kwargs/--seed: {first_invalid_field(exc)}") from exc
