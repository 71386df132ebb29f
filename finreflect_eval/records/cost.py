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
MAX_PRICE = 1_000_000.0  # per million tokens or per device-hour: anything above is a mistake


class Usage(Record):
    """What some model calls used (a stage's, a judge's, one criterion's)."""

    calls: int = 0
    """Calls answered by the model (each with its retries of an invalid output)."""
    cache_hits: int = 0
    """Calls answered from the run's response cache (or copied from an identical request's
    answer): nothing spent."""
    cache_hit_tokens: int = 0
    """The prompt and completion tokens of those answers, as first counted: what the calls
    would have used, not what this run spent."""
    prompt_tokens: int = 0
    cached_prompt_tokens: int | None = 0
    """Of `prompt_tokens`, those the backend did not compute again (prompt-prefix reuse, a
    server's prompt cache); None where a backend that answered does not say."""
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    """Of `completion_tokens`, those reasoning models spent thinking."""
    seconds: float | None = 0.0
    """Wall seconds the model spent on the calls (models that ran at once count each theirs);
    None where a call's samples were written before it was counted."""
    device_seconds: float | None = None
    """Seconds × devices an in-process model held for them (None: no in-process model's time
    is known: only servers answered)."""
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
    cache_hit_tokens: float
    prompt_tokens: float
    cached_prompt_tokens: float | None
    completion_tokens: float
    reasoning_tokens: float = 0.0
    seconds: float | None
    device_seconds: float | None = None
    money: float | None = None


class TaskCost(Record):
    """One task's cost."""

    extraction: StageUsage
    normalizer: StageUsage | None = None
    """The multi-pass normalisation's calls where a task names a model of its own for it
    (`normalizer_model`); None: the candidate normalised (its calls are in `extraction`)."""
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

    input: float = Field(0.0, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    output: float = Field(0.0, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    cached: float | None = Field(None, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    """Per million cached prompt tokens (default: the `input` price)."""
    device_hour: float = Field(0.0, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    """Per hour of one device (a GPU) held by an in-process model."""

    def money(self, usage: Usage) -> float:
        """The price of `usage` (calls from the run's cache are not in it); prompt tokens a
        backend does not say were cached cost the `input` price."""
        cached_price = self.input if self.cached is None else self.cached
        cached = min(usage.cached_prompt_tokens or 0, usage.prompt_tokens)
        tokens = (usage.prompt_tokens - cached) * self.input + cached * cached_price
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

        from finreflect_eval._util.resources import unique_key_loader, yaml_problem

        try:  # a model listed twice is refused: PyYAML alone keeps the last prices silently
            data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=unique_key_loader())
        except yaml.MarkedYAMLError as exc:
            line, problem = yaml_problem(exc)
            where = f"line {line}: " if line else ""
            raise FinReflectError(f"cannot read price table {path}: {where}{problem}") from None
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise FinReflectError(f"cannot read price table {path}: {first_line(exc)}") from None
        return cls.parse(data, f"price table {path}")

    @classmethod
    def parse(cls, data: object, source: str = "price table") -> Prices:
        """The table in `data` (a YAML file's content); anything wrong is one line naming
        `source`, the field and the rule."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "(top)"
            raise FinReflectError(
                f"{source}: {where}: {error['msg']} (expected `currency: USD` and "
                "`models: {MODEL: {input: ..., output: ..., cached: ..., device_hour: ...}}`, "
                "per million tokens)"
            ) from None


def money_text(value: float) -> str:
    """An amount as the results round it (6 decimals), without trailing zeros."""
    text = f"{value:,.6f}".rstrip("0").rstrip(".")
    return text or "0"


COUNTS = (
    "calls", "cache_hits", "prompt_tokens", "cached_prompt_tokens", "completion_tokens",
    "reasoning_tokens",
)  # fmt: skip


def figure_text(key: str, value: float | None, currency: str | None, rate: bool = False) -> str:
    """A usage figure `key` as the results hold it, with thousands separators: counts whole (to
    2 decimals per 1k triples, `rate`), seconds to 3 decimals, money to 6; "—" where unknown."""
    if value is None:
        return "—"
    if key == "money":
        return f"{money_text(value)} {currency or ''}".strip()
    if key in COUNTS and not rate:
        return f"{int(value):,}"
    return f"{value:,.{2 if key in COUNTS else 3}f}"
