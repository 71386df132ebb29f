"""The extraction steps of the modes (finreflect_eval.protocol.modes), each one batched call over a
group of spans' records.

`extract` fills in the triples; `normalize` rewrites them against the span (multi_pass);
`reflect` runs rounds of critic feedback and correction until the feedback is empty or
`max_iterations` is reached. A span whose extraction fails validation after retries keeps a
record with zero triples and the failure: never dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from finreflect_eval.data import Benchmark, Span
from finreflect_eval.models import LM, GenerationRequest, GenerationResult
from finreflect_eval.protocol.modes import MODES, Role
from finreflect_eval.protocol.schema import Triple, check_triple
from finreflect_eval.records import Feedback, ModelCall, SampleRecord
from finreflect_eval.records.samples import fill
from finreflect_eval.tasks.config import GenerationKwargs, Task

MAX_FEEDBACK = 40


class CriticOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    feedback: list[Feedback] = Field(max_length=MAX_FEEDBACK)


def model_call(
    step: str, result: GenerationResult, request: GenerationRequest, **fields: Any
) -> ModelCall:
    """What a record keeps of one model call."""
    return ModelCall(
        step=step,
        text=result.text,
        raw_outputs=result.raw_outputs,
        error=result.error,
        cached=result.cached,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        reasoning_tokens=result.reasoning_tokens,
        thinking=result.thinking,
        thinking_cut=result.thinking_cut,
        cached_prompt_tokens=result.cached_prompt_tokens,
        seconds=0.0 if result.cached else round(result.seconds, 4),
        device_seconds=None if result.device_seconds is None else round(result.device_seconds, 4),
        prompt_hash=request.digest(),
        **fields,
    )


class TaskRun:
    """One task over a benchmark split: its records, and the steps that fill them in."""

    def __init__(
        self,
        task: Task,
        benchmark: Benchmark,
        fewshot: Benchmark | None,
        generation: GenerationKwargs,
        doc_ids: dict[str, int],
    ) -> None:
        """`doc_ids`: each span's position in the task's whole span list (before sharding)."""
        self.task = task
        self.benchmark = benchmark
        self.generation = generation
        self.mode = MODES[task.config.mode]
        self.spans = {span.span_id: span for span in benchmark.spans}
        self.doc_ids = doc_ids
        self.fewshot = _fewshot_examples(fewshot, task.config.num_fewshot)
        # One output schema for extraction, normalisation and correction: compiled once.
        self.output = task.schema.triple_list_model(
            task.config.max_triples, min_triples=task.config.min_triples
        )

    def new_records(self) -> list[SampleRecord]:
        """One empty record per span, in dataset order."""
        references = self.benchmark.triples_by_span()
        return [
            SampleRecord(
                doc_id=self.doc_ids[span.span_id],
                task=self.task.name,
                mode=self.task.config.mode,
                span_id=span.span_id,
                ticker=span.ticker,
                section=span.section,
                doc=span.model_dump(),
                reference=[t.triple for t in references.get(span.span_id, [])],
            )
            for span in self.benchmark.spans
        ]

    def run(self, role: Role, lm: LM, records: list[SampleRecord], *, shared: bool) -> None:
        """The mode's steps for `role` on `records`, in order; `shared`: the candidate also
        runs the normaliser's steps (no separate normaliser model)."""
        for step in self.mode.steps:
            if step.role == role or (shared and role == "candidate"):
                getattr(self, step.name)(lm, records)
        for record in records:  # lm-eval's fields, from what the steps left
            fill(record)

    def request(self, step: str, span: Span, schema: type[BaseModel], **context: Any):
        system, user = self.task.render(step, span=span, fewshot=self.fewshot, **context)
        if self.task.config.system_instruction:
            system = f"{self.task.config.system_instruction}\n\n{system}"
        return GenerationRequest.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            schema=schema,
            max_tokens=self.generation.max_gen_toks,
            temperature=self.generation.temperature,
            seed=self.generation.seed,
            top_p=self.generation.top_p,
            top_k=self.generation.top_k,
        )

    def _call(
        self,
        lm: LM,
        step: str,
        records: list[SampleRecord],
        schema: type[BaseModel],
        iteration: int = 0,
        **per: Callable[[SampleRecord], Any],
    ) -> list[GenerationResult]:
        """One batched call of `step` for `records`; `per` maps a context name to a function of
        the record (e.g. its current triples)."""
        requests = [
            self.request(
                step,
                self.spans[record.span_id],
                schema,
                **{name: value(record) for name, value in per.items()},
            )
            for record in records
        ]
        label = f"{self.task.name} {step}" + (f" #{iteration}" if iteration else "")
        results = lm.generate(requests, desc=label)
        for record, request, result in zip(records, requests, results, strict=True):
            _add_step(record, step, request, result, iteration)
        return results

    # --- steps ---

    def extract(self, lm: LM, records: list[SampleRecord]) -> None:
        results = self._call(lm, "extract", records, self.output)
        for record, result in zip(records, results, strict=True):
            self._set_triples(record, result, on_failure="fail")

    def normalize(self, lm: LM, records: list[SampleRecord]) -> None:
        todo = [record for record in records if not record.failed]
        results = self._call(lm, "normalize", todo, self.output, triples=lambda r: r.triples)
        for record, result in zip(todo, results, strict=True):
            self._set_triples(record, result, on_failure="fail")

    def reflect(self, lm: LM, records: list[SampleRecord]) -> None:
        active = [record for record in records if not record.failed]
        for iteration in range(1, self.task.config.max_iterations + 1):
            if not active:
                break
            results = self._call(
                lm, "critic", active, CriticOutput, iteration, triples=lambda r: r.triples
            )
            to_correct = [
                record
                for record, result in zip(active, results, strict=True)
                if self._take_feedback(record, result, iteration)
            ]
            results = self._call(
                lm,
                "correct",
                to_correct,
                self.output,
                iteration,
                triples=lambda r: r.triples,
                feedback=lambda r: r.feedback_trail[-1],
            )
            for record, result in zip(to_correct, results, strict=True):
                record.iterations = iteration
                if not self._set_triples(record, result, on_failure="keep"):
                    record.converged = False
            active = [r for r in to_correct if r.converged is None]
        for record in active:
            record.converged = False  # stopped at max_iterations with feedback still open

    def _take_feedback(self, record: SampleRecord, result: GenerationResult, iteration: int):
        """Keep the critic's usable feedback; True when there is something to correct."""
        if not result.ok:  # no usable feedback: keep the current triples and stop
            record.converged = False
            return False
        feedback = CriticOutput.model_validate(result.parsed).feedback
        known = [item for item in feedback if item.triple_index < len(record.triples)]
        if len(known) < len(feedback):  # about triples that don't exist: unusable
            record.failures.append(
                f"critic #{iteration}: {len(feedback) - len(known)} feedback item(s) "
                "name a triple index out of range (dropped)"
            )
        record.feedback_trail.append(known)
        if not known:
            record.converged = True
        return bool(known)

    def _set_triples(self, record: SampleRecord, result: GenerationResult, on_failure: str) -> bool:
        if result.ok:
            record.triples = [Triple.model_validate(triple) for triple in result.parsed["triples"]]
        elif on_failure == "fail":
            record.failed, record.triples = True, []
        # CheckRules are kept per final triple, so scoring needs no schema file.
        record.rule_checks = [check_triple(t, self.task.schema) for t in record.triples]
        return result.ok


def _add_step(
    record: SampleRecord,
    step: str,
    request: GenerationRequest,
    result: GenerationResult,
    iteration: int,
) -> None:
    """Keep a step's call and, as lm-eval logs them, its rendered prompt and settings."""
    record.steps.append(model_call(step, result, request, iteration=iteration))
    settings = {
        "step": step,
        "iteration": iteration,
        "max_gen_toks": request.max_tokens,
        "temperature": request.temperature,
        "seed": request.seed,
        **request.sampling_options(),
    }
    record.arguments[f"gen_args_{len(record.arguments)}"] = {
        "arg_0": list(request.messages),
        "arg_1": settings,
    }
    record.prompt_tokens += result.prompt_tokens
    record.completion_tokens += result.completion_tokens
    if result.error is not None:
        record.failures.append(f"{step}: {result.error}")


def _fewshot_examples(fewshot: Benchmark | None, n: int) -> list[dict[str, Any]]:
    if not n or fewshot is None:
        return []
    triples = fewshot.triples_by_span()
    return [{"span": span, "triples": triples.get(span.span_id, [])} for span in fewshot.spans[:n]]
