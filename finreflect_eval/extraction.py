"""The three extraction modes as steps over all spans of a task, each step one batched call.

single_pass: extract. multi_pass: extract, then normalise (possibly with another model, run
after the candidate is freed). reflection: extract, then rounds of critic feedback and
correction until the feedback is empty or `max_iterations` is reached. A span whose extraction
fails validation after retries keeps a record with zero triples and the failure: never dropped.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from finreflect_eval.data import Benchmark, Span
from finreflect_eval.models import LM, GenerationRequest, GenerationResult
from finreflect_eval.samples import Feedback, SampleRecord
from finreflect_eval.schema import Triple, check_triple
from finreflect_eval.tasks import GenerationKwargs, Task

MAX_FEEDBACK = 40


class CriticOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    feedback: list[Feedback] = Field(max_length=MAX_FEEDBACK)


class TaskRun:
    """The records of one task over a benchmark split, and the steps that fill them in."""

    def __init__(
        self,
        task: Task,
        benchmark: Benchmark,
        fewshot: Benchmark | None,
        generation: GenerationKwargs,
    ) -> None:
        self.task = task
        self.benchmark = benchmark
        self.generation = generation
        self.spans = {span.span_id: span for span in benchmark.spans}
        references = benchmark.triples_by_span()
        self.records = [
            SampleRecord(
                task=task.name,
                mode=task.config.mode,
                span_id=span.span_id,
                ticker=span.ticker,
                section=span.section,
                text=span.text,
                reference=[t.triple for t in references.get(span.span_id, [])],
            )
            for span in benchmark.spans
        ]
        self.fewshot = _fewshot_examples(fewshot, task.config.num_fewshot)
        # One output schema for extraction, normalisation and correction: compiled once.
        self.output = task.schema.triple_list_model(
            task.config.max_triples, min_triples=task.config.min_triples
        )

    def request(self, step: str, span: Span, schema: type[BaseModel], **context: Any):
        system, user = self.task.render(step, span=span, fewshot=self.fewshot, **context)
        return GenerationRequest.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            schema=schema,
            max_tokens=self.generation.max_gen_toks,
            temperature=self.generation.temperature,
            seed=self.generation.seed,
        )

    def _call(
        self, lm: LM, step: str, records: list[SampleRecord], schema, iteration: int = 0, **per
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
        for record, result in zip(records, results, strict=True):
            record.add_step(step, result, iteration)
        return results

    # --- steps ---

    def extract(self, lm: LM) -> None:
        results = self._call(lm, "extract", self.records, self.output)
        for record, result in zip(self.records, results, strict=True):
            self._set_triples(record, result, on_failure="fail")

    def normalize(self, lm: LM) -> None:
        todo = [record for record in self.records if not record.failed]
        results = self._call(lm, "normalize", todo, self.output, triples=lambda r: r.triples)
        for record, result in zip(todo, results, strict=True):
            self._set_triples(record, result, on_failure="fail")

    def reflect(self, lm: LM) -> None:
        active = [record for record in self.records if not record.failed]
        for iteration in range(1, self.task.config.max_iterations + 1):
            if not active:
                break
            results = self._call(
                lm, "critic", active, CriticOutput, iteration, triples=lambda r: r.triples
            )
            to_correct = []
            for record, result in zip(active, results, strict=True):
                if not result.ok:  # no usable feedback: keep the current triples and stop
                    record.converged = False
                    continue
                feedback = CriticOutput.model_validate(result.parsed).feedback
                known = [item for item in feedback if item.triple_index < len(record.triples)]
                if len(known) < len(feedback):  # about triples that don't exist: unusable
                    record.failures.append(
                        f"critic #{iteration}: {len(feedback) - len(known)} feedback item(s) "
                        "name a triple index out of range (dropped)"
                    )
                feedback = known
                record.feedback_trail.append(feedback)
                if not feedback:
                    record.converged = True
                    continue
                to_correct.append(record)
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

    def _set_triples(self, record: SampleRecord, result: GenerationResult, on_failure: str) -> bool:
        if result.ok:
            record.triples = [Triple.model_validate(triple) for triple in result.parsed["triples"]]
        elif on_failure == "fail":
            record.failed, record.triples = True, []
        # CheckRules are kept per final triple, so scoring needs no schema file.
        record.rule_checks = [check_triple(t, self.task.schema) for t in record.triples]
        return result.ok


def _fewshot_examples(fewshot: Benchmark | None, n: int) -> list[dict[str, Any]]:
    if not n or fewshot is None:
        return []
    triples = fewshot.triples_by_span()
    return [{"span": span, "triples": triples.get(span.span_id, [])} for span in fewshot.spans[:n]]
