"""What a run cost (`results["cost"][task]`): per stage, per judge and per criterion, the calls
made, the tokens read and written, the seconds spent, and, with a price table (`--prices
FILE`), the money. Every figure is a sum over the samples' model calls, so it is recomputed from
them like every other number; an answer from the run's own cache costs nothing and is counted
apart (`cache_hits`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval.records.base import Record

PER_TOKENS = 1_000_000  # prices are per million tokens, as providers state them


class Usage(Record):
    """What some model calls used (a stage's, a judge's, one criterion's)."""

    calls: int = 0
    """Calls answered by the model (each with its retries of an invalid output)."""
    cache_hits: int = 0
    """Calls answered from the run's response cache: nothing spent."""
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    """Of `prompt_tokens`, those the backend did not compute again (prompt-prefix reuse, a
    server's prompt cache), where the backend says so."""
    completion_tokens: int = 0
    seconds: float = 0.0
    """Wall seconds the model spent on the calls (models that ran at once count each theirs)."""
    device_seconds: float | None = None
    """Seconds × devices an in-process model held for them (None: only servers answered)."""
    money: float | None = None
    """In the price table's currency; None without a price for every model that answered."""


class JudgeUsage(Usage):
    """One judge's calls, with its model and each criterion's share."""

    model: str
    criteria: dict[str, Usage] = {}


class StageUsage(Usage):
    """The extraction's calls, with the model that made them."""

    model: str


class UsageRate(Record):
    """A `Usage` per 1,000 final triples: the counts as fractions."""

    calls: float
    cache_hits: float
    prompt_tokens: float
    cached_prompt_tokens: float
    completion_tokens: float
    seconds: float
    device_seconds: float | None = None
    money: float | None = None


class TaskCost(Record):
    """One task's cost."""

    extraction: StageUsage
    judging: dict[str, JudgeUsage] = {}
    """Per judge of the panel scored."""
    total: Usage
    triples: int
    """The task's final triples."""
    per_1k_triples: UsageRate | None
    """`total` per 1,000 final triples (None: no triple); the counts as fractions."""
    currency: str | None = None
    unpriced: list[str] = []
    """Models that answered calls but have no price in the table (so no total money)."""


class ModelPrice(Record):
    """A model's prices, per million tokens (and per device-hour, for a model run in-process)."""

    input: float = Field(0.0, ge=0, allow_inf_nan=False)
    output: float = Field(0.0, ge=0, allow_inf_nan=False)
    cached: float | None = Field(None, ge=0, allow_inf_nan=False)
    """Per million cached prompt tokens (default: the `input` price)."""
    device_hour: float = Field(0.0, ge=0, allow_inf_nan=False)
    """Per hour of one device (a GPU) held by an in-process model."""

    def money(self, usage: Usage) -> float:
        """The price of `usage` (calls from the run's cache are not in it)."""
        cached = self.input if self.cached is None else self.cached
        fresh = usage.prompt_tokens - usage.cached_prompt_tokens
        tokens = fresh * self.input + usage.cached_prompt_tokens * cached
        tokens += usage.completion_tokens * self.output
        return tokens / PER_TOKENS + (usage.device_seconds or 0.0) / 3600 * self.device_hour


class Prices(Record):
    """A price table (`--prices FILE`, YAML): a currency and each model's prices, by the model
    id the run names it by (the candidate's `--model`, a judge's `model`). None is built in:
    prices are the user's to state."""

    currency: str = Field("USD", min_length=1, max_length=16)
    models: dict[str, ModelPrice]

    @classmethod
    def load(cls, path: str | Path) -> Prices:
        """The table in the YAML file at `path`; anything wrong is one line naming the file."""
        import yaml

        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise FinReflectError(f"cannot read price table {path}: {first_line(exc)}") from None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "(top)"
            raise FinReflectError(
                f"price table {path}: {where}: {error['msg']} (expected `currency: USD` and "
                "`models: {MODEL: {input: ..., output: ..., cached: ..., device_hour: ...}}`, "
                "per million tokens)"
            ) from None
