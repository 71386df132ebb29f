"""The model interface: one abstract backend method, and what every backend shares around it.

A backend implements `_complete(requests) -> completions` for a batch (the request and result
types are in `_requests`). Everything else that every backend needs — the cache, batching with
checkpoints, output validation and bounded retries, call counting — lives once, in `LM.generate`.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field
from tqdm.auto import tqdm

from finreflect_eval._util import progress
from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval._util.version import installed_version
from finreflect_eval.models._cache import ResponseCache
from finreflect_eval.models._requests import (
    Completion,
    GenerationRequest,
    GenerationResult,
    JsonSchema,
    validate_output,
)
from finreflect_eval.models._thinking import THINKING_DID_NOT_END

logger = logging.getLogger(__name__)

# Model args with a range: `check_spec` refuses a value outside it before any model loads (a
# judge's typo must not surface after hours of extraction).
AtLeastOne = Annotated[int, Field(ge=1)]
AtLeastZero = Annotated[int, Field(ge=0)]
Seconds = Annotated[float | int, Field(ge=0, allow_inf_nan=False)]
PositiveSeconds = Annotated[float | int, Field(gt=0, allow_inf_nan=False)]

# A retry of an invalid output samples with a new seed: greedy decoding would repeat it exactly.
RETRY_TEMPERATURE = 0.3

# tqdm's default bar, with the percentage to one decimal and the count of requests to two: it
# moves by fractions of a request while a batch runs (see `RequestBar`).
BAR_FORMAT = (
    "{desc}: {percentage:5.1f}%|{bar}| {n:.2f}/{total} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
)


@dataclass(frozen=True)
class ReplicaPlan:
    """What one data-parallel replica of a backend reserves on a Ray cluster (see `replicas`):
    the bundles of its placement group (its actor runs in the first), the GPUs the actor holds
    itself, environment variables for the actor, and model args the replica adds."""

    bundles: tuple[dict[str, float], ...] = ({"CPU": 1.0},)
    actor_gpus: float = 0.0
    env: dict[str, str] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)
    # Bundles of one replica on one node (tensor parallel needs one machine's interconnect).
    strategy: str = "STRICT_PACK"

    @property
    def gpus(self) -> float:
        return sum(bundle.get("GPU", 0.0) for bundle in self.bundles)


def hub_commit(model: str, revision: str | None = None) -> str | None:
    """The commit sha a Hub model id at `revision` (default: main) resolves to, read from the
    local Hub cache that loading it went through; None for a local folder or an uncached id."""
    if Path(model).expanduser().exists():
        return None
    from huggingface_hub import try_to_load_from_cache

    try:
        path = try_to_load_from_cache(model, "config.json", revision=revision)
    except ValueError:  # not a repo id
        return None
    return Path(path).parent.name if isinstance(path, str) else None


class LM(ABC):
    """A loaded model. Subclasses implement `_complete` (a backend whose answers arrive one by
    one, a server, also `_complete_as_done`); callers use `generate`.

    Args:
        model: model id, path or alias.
        revision: Hub revision, part of the cache key.
        cache: response cache, or None for no caching.
        batch_size: requests per backend call; each final answer is cached as it arrives (after
            each batch in process), so an interrupted run resumes with only what is missing.
        max_retries: extra attempts for an output that fails validation.
    """

    backend: str = ""
    # True where the model runs in another process (a server): loading it takes no memory here,
    # so it can work while other models load (judges behind endpoints run concurrently).
    remote: bool = False
    # The most tokens (prompt and output) the model takes, where the backend knows it: longer
    # requests are refused before anything is generated (see `check_context`).
    context_length: int | None = None
    # The commit of the Hub repo the weights came from, where the backend resolved one.
    commit: str | None = None
    # The library that runs the model in this process (its version goes into the record).
    engine_package: str | None = None
    # Replicas that run batches at once (`replicas.ReplicatedLM`).
    data_parallel_size: int = 1
    # The devices an in-process model holds while it computes (its GPUs; 1: the CPU): its
    # calls' device seconds are their wall seconds times this. None for a server's model.
    devices: int | None = 1
    # The progress bar of the `generate` under way, where one is shown.
    _bar: RequestBar | None = None

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        cache: ResponseCache | None = None,
        batch_size: AtLeastOne = 8,
        max_retries: AtLeastZero = 2,
    ) -> None:
        if batch_size < 1 or max_retries < 0:
            raise FinReflectError(
                f"batch_size must be ≥ 1 and max_retries ≥ 0 (got {batch_size}, {max_retries})"
            )
        self.model = model
        self.revision = revision
        self.cache = cache
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.stats: Counter[str] = Counter()
        self.batch_sizes: list[int] = []  # as used, in order of first use (see `resolved`)

    @classmethod
    def replica_plan(
        cls, args: dict[str, Any], cluster: Mapping[str, float], replicas: int
    ) -> ReplicaPlan:
        """What each of `replicas` replicas of this backend, loaded with `args`, reserves on a
        Ray cluster of `cluster` resources in all: one CPU, unless the backend needs more."""
        return ReplicaPlan()

    @abstractmethod
    def _complete(self, requests: list[GenerationRequest]) -> list[Completion]:
        """Generate one completion per request, in order (one batch)."""

    def identity(self) -> dict[str, Any]:
        """What identifies this model's outputs in the cache (backend, model, revision, and any
        setting that changes outputs)."""
        return {"backend": self.backend, "model": self.model, "revision": self.revision}

    def engine(self) -> str:
        """What ran the model, for the record: the library and its version where it runs in
        this process (`vllm 0.33.0`), `<backend> server` behind a server, else the backend."""
        if self.remote or not self.engine_package:
            return f"{self.backend} server" if self.remote else self.backend
        return f"{self.engine_package} {installed_version(self.engine_package)}"

    def resolved(self) -> dict[str, Any]:
        """What loading and running resolved, as `records.LoadedModel`'s fields: the batch
        sizes used here; a backend that knows more (device, dtype, tokenizer) adds it."""
        return {"batch_sizes": list(self.batch_sizes)}

    def close(self) -> None:  # noqa: B027 - an optional hook, not an abstract method
        """Free the model (weights, engine, connections)."""

    def prompt_length(self, request: GenerationRequest) -> int:
        """The request's prompt in tokens, as the model sees it (backends with a
        `context_length` implement it)."""
        raise NotImplementedError

    def fit_batch_size(self, requests: list[GenerationRequest]) -> None:  # noqa: B027
        """A hook to choose `batch_size` for these requests before they run (hf's "auto")."""

    def check_context(self, requests: Sequence[GenerationRequest]) -> None:
        """The documented rule for inputs longer than the model's context: nothing is truncated;
        a request whose prompt plus `max_tokens` exceeds `context_length` stops the stage with a
        one-line error before any of the batch is generated (work saved earlier stays)."""
        if self.context_length is None:
            return
        for request in requests:
            length = self.prompt_length(request)
            if length + request.max_tokens > self.context_length:
                text = request.messages[-1]["content"] if request.messages else request.prompt
                raise FinReflectError(
                    f"a prompt of {length} tokens plus max_tokens {request.max_tokens} is over "
                    f"the {self.context_length}-token context of {self.model} "
                    f"({' '.join(str(text).split())[:60]!r}…); use shorter spans "
                    "(dataset build --max-tokens) or a model with a longer context"
                )

    def cache_key(self, request: GenerationRequest) -> str:
        payload = {"model": self.identity(), "request": request.cache_fields()}
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
        return text_sha256(blob)

    def generate(
        self, requests: Sequence[GenerationRequest], *, desc: str | None = None
    ) -> list[GenerationResult]:
        """Results for every request, in order: cached ones first, the rest generated in batches,
        validated against their schema and retried (bounded) when invalid."""
        keys = [self.cache_key(request) for request in requests]
        results: list[GenerationResult | None] = [None] * len(requests)
        if self.cache is not None:
            for index, hit in enumerate(self.cache.get_many(keys)):
                if hit is not None:
                    results[index] = self._from_cache(hit, requests[index].schema)
        # Identical requests (e.g. two modes that ended with the same triples) run once.
        first_of: dict[str, int] = {}
        pending = [
            i
            for i, result in enumerate(results)
            if result is None and first_of.setdefault(keys[i], i) == i
        ]
        self.stats["cache_hits"] += sum(result is not None for result in results)
        self.check_context([requests[i] for i in pending])
        self.fit_batch_size([requests[i] for i in pending])
        if pending and self.batch_size not in self.batch_sizes:
            self.batch_sizes.append(self.batch_size)
        if pending and progress.shown():
            self._bar = RequestBar(len(pending), desc or f"{self.backend}:{self.model}")
        try:
            # Each result is cached once final, as it comes: a killed run keeps every answer it
            # received. Transport failures are not cached: retried on a rerun.
            for positions, outcomes, done in self._generate_batches([requests[i] for i in pending]):
                if self.cache is not None:
                    self.cache.put_many(
                        (keys[pending[positions[i]]], outcomes[i].to_cache())
                        for i in done
                        if outcomes[i].attempts
                    )
                for i in done:
                    results[pending[positions[i]]] = outcomes[i]
                if self._bar is not None:
                    self._bar.answered(len(done))
        finally:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
        for index, key in enumerate(keys):
            if results[index] is None:  # a duplicate: a copy of the first one's result
                first = results[first_of[key]]
                results[index] = replace(
                    first,
                    cached=True,
                    raw_outputs=list(first.raw_outputs),
                    seconds=0.0,
                    device_seconds=None,
                )
        return results  # type: ignore[return-value]

    def _generate_batches(self, requests: list[GenerationRequest]) -> Iterator[Progress]:
        """Generate `requests` in batches of `batch_size`, one after the other; yields each
        batch's progress as its answers arrive (a replica set runs several batches at once)."""
        for start in range(0, len(requests), self.batch_size):
            positions = list(range(start, min(start + self.batch_size, len(requests))))
            batch = Attempts([requests[i] for i in positions], self.max_retries)
            while attempt := batch.next_attempt():
                self.count_call(attempt)
                if self._bar is not None:
                    self._bar.call(len(attempt))
                clock = time.perf_counter()
                for arrived in self._complete_as_done(attempt):
                    # The time since the last answers (or the call), shared by those now here.
                    seconds, clock = time.perf_counter() - clock, time.perf_counter()
                    held = self.devices and seconds * self.devices
                    yield positions, batch.results, batch.receive(arrived, seconds, held)
            self.stats["failures"] += batch.failures()

    def decoding_progress(self, rows: int, work: float) -> Callable[[float], None] | None:
        """For a backend that computes `rows` requests of the current call together, in at most
        `work` units (one a row each decoding step; prompt positions as much as they cost): a
        function to call with each amount of work done, which moves the progress bar within the
        batch. None where no bar is shown: then there is nothing to call."""
        if self._bar is None:
            return None
        return partial(self._bar.advance, rows / work)

    def count_call(self, requests: list[GenerationRequest]) -> None:
        """Count one backend call of `requests`."""
        self.stats["backend_calls"] += 1
        self.stats["requests_generated"] += len(requests)

    def _complete_as_done(
        self, requests: list[GenerationRequest]
    ) -> Iterator[list[tuple[int, Completion]]]:
        """The completions of `requests` by position, in groups as they arrive; a backend that
        answers requests one by one (a server) yields each as it comes, so that it is cached
        at once."""
        yield list(enumerate(self._complete(requests)))

    def _from_cache(self, hit: dict[str, Any], schema: JsonSchema | None) -> GenerationResult:
        result = GenerationResult(cached=True, **hit)
        if result.error is None and result.text is not None:
            result.parsed, result.error = validate_output(result.text, schema)
        return result


# (positions of a batch's requests in the list given, the batch's results, those now final)
Progress = tuple[list[int], list[GenerationResult], list[int]]


class RequestBar:
    """The progress bar of one `LM.generate`: it counts final results and, between them, moves
    with the work a backend reports done (`LM.decoding_progress`), so that a long batch shows
    progress, a rate and an ETA while it runs.

    Of `rows` requests that take at most `work` units (one a row each decoding step, up to
    max_new_tokens m, and their prompts' share p), each unit moves it by rows / work of a
    request: a decoding step of b rows by b²/(p + b·m) ≤ b/m. So the bar shows a lower bound of
    the work done (a row that ends early is credited when its results arrive), and its ETA
    counts only finished requests (`_FinishedRateBar`). The bar never moves back, nor past the
    current backend call's requests before they are answered; a retry shares what its batch has
    left, and at a batch's end the bar stands at the number of final results.
    """

    def __init__(self, total: int, desc: str) -> None:
        # miniters=0: a redraw whenever tqdm's mininterval has passed, however small the move.
        self.bar = _FinishedRateBar(
            total=total, desc=desc, miniters=0, unit="req", bar_format=BAR_FORMAT
        )
        self.final = 0  # results final so far
        self.ceiling = 0.0  # as far as the current call's steps may move the bar
        self.share = 1.0  # how far one request of the current call may move the bar

    def call(self, requests: int) -> None:
        """A backend call of `requests` starts: its batch's requests not yet final."""
        self.ceiling = self.final + requests
        self.share = (self.ceiling - self.bar.n) / requests

    def advance(self, per_unit: float, units: float) -> None:
        """`units` more work done, each worth `per_unit` requests of a first attempt."""
        self._move_to(min(self.ceiling, self.bar.n + units * per_unit * self.share))

    def answered(self, final: int) -> None:
        """`final` more results are final."""
        self.final += final
        self.bar.finished = self.final
        # Steps stop at the ceiling, which is the final count at the batch's end: the bar stands
        # there exactly then, and holds (never moves back) while the batch's retries remain.
        self._move_to(self.final)

    def close(self) -> None:
        self.bar.close()

    def _move_to(self, n: float) -> None:
        if n > self.bar.n:
            self.bar.update(n - self.bar.n)  # tqdm's rate and ETA follow its updates
            self.bar.n = n  # exact, whatever the rounding of the sum


class _FinishedRateBar(tqdm):
    """A bar whose rate, and so its ETA, counts only finished requests: within a batch the bar
    moves by a lower bound of the work done (a row that ends early is credited when its result
    comes), and a rate of that would promise hours for minutes. Before the first result: `?`."""

    finished = 0

    @property
    def format_dict(self) -> dict[str, Any]:
        shown = super().format_dict
        elapsed = shown["elapsed"]
        # 0, not None: tqdm computes a rate of its own from None, and shows `?` for 0.
        shown["rate"] = self.finished / elapsed if self.finished and elapsed else 0
        return shown


class Attempts:
    """One batch on its way to final results: each output validated against its schema, an
    invalid one asked again with a new seed (at most `max_retries` times). The caller sends
    `next_attempt()` to the model and hands back what arrives to `receive`."""

    def __init__(self, requests: list[GenerationRequest], max_retries: int) -> None:
        self.requests = requests
        self.results = [GenerationResult(text=None) for _ in requests]
        self.max_retries = max_retries
        self.attempt = -1
        self.todo: list[int] = []  # the current attempt's requests, by index in the batch
        self.retry: list[int] = []

    def next_attempt(self) -> list[GenerationRequest]:
        """The requests of the next attempt, in request order (empty: every result is final)."""
        self.attempt += 1
        self.todo = list(range(len(self.requests))) if self.attempt == 0 else sorted(self.retry)
        self.retry = []
        return self.current()

    def current(self) -> list[GenerationRequest]:
        """The current attempt's requests (again, for a replica that died before answering)."""
        return [_retry_request(self.requests[i], self.attempt) for i in self.todo]

    def receive(
        self,
        arrived: list[tuple[int, Completion]],
        seconds: float = 0.0,
        device_seconds: float | None = None,
    ) -> list[int]:
        """Record completions by position in the current attempt, with the wall `seconds` they
        took and the `device_seconds` their model held its devices for them (each shared
        equally; None: a server's); the indices now final."""
        final = []
        for position, completion in arrived:
            index = self.todo[position]
            result = self.results[index]
            result.prompt_tokens += completion.prompt_tokens
            result.completion_tokens += completion.completion_tokens
            cached = completion.cached_prompt_tokens
            known = cached is not None and result.cached_prompt_tokens is not None
            result.cached_prompt_tokens = result.cached_prompt_tokens + cached if known else None
            result.seconds += seconds / len(arrived)
            if device_seconds is not None:
                result.device_seconds = (result.device_seconds or 0.0) + device_seconds / len(
                    arrived
                )
            if completion.error is not None:  # transport failure: report, don't cache
                # Even after an invalid output: the whole call is asked again on a rerun.
                result.error, result.attempts, result.raw_outputs = completion.error, 0, []
                final.append(index)
                continue
            result.attempts += 1
            result.text = completion.text or ""
            result.raw_outputs.append(result.text)
            result.reasoning_tokens += completion.reasoning_tokens
            result.thinking, result.thinking_cut = completion.thinking, completion.thinking_cut
            if completion.thinking_ended:
                schema = self.requests[index].schema
                result.parsed, result.error = validate_output(result.text, schema)
            else:  # never parsed: there is no answer
                result.parsed = None
                result.error = (
                    f"{THINKING_DID_NOT_END} within {self.requests[index].max_tokens} tokens"
                )
            invalid = result.error is not None
            (self.retry if invalid and self.attempt < self.max_retries else final).append(index)
        return final

    def failures(self) -> int:
        return sum(not result.ok for result in self.results)


def _retry_request(request: GenerationRequest, attempt: int) -> GenerationRequest:
    if attempt == 0:
        return request
    return replace(
        request,
        seed=request.seed + attempt,
        temperature=max(request.temperature, RETRY_TEMPERATURE),
    )
