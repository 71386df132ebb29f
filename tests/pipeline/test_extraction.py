"""Control flow of the three modes, with a scripted model (its outputs are given, not generated)."""

import json

import pytest
from support.runs import multi_pass_with_normalizer

from finreflect_eval.data import load_benchmark
from finreflect_eval.models import ModelSpec
from finreflect_eval.models.scripted import ScriptedModel
from finreflect_eval.pipeline.evaluator import extract
from finreflect_eval.pipeline.extraction import TaskRun
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.tasks.config import TaskIndex


def triples(*objects):
    return json.dumps(
        {
            "triples": [
                {
                    "subject": "AAPL",
                    "subject_type": "ORG",
                    "relation": "Produces",
                    "object": obj,
                    "object_type": "PRODUCT",
                }
                for obj in objects
            ]
        }
    )


FEEDBACK = json.dumps(
    {"feedback": [{"triple_index": 0, "issue": "wrong product", "suggestion": "use iPhone"}]}
)
NO_FEEDBACK = json.dumps({"feedback": []})


def step_of(request):
    system = request.messages[0]["content"]
    for step, opening in (
        ("extract", "You extract"),
        ("normalize", "You normalise"),
        ("critic", "You review"),
        ("correct", "You correct"),
    ):
        if system.startswith(opening):
            return step
    raise AssertionError(system[:80])


class Scripted(ScriptedModel):
    """Answers by step; `critic` answers come from a list, one per critic call of a span."""

    def __init__(self, critic_answers, **kwargs):
        self.calls = []
        self.critic_calls: dict[str, int] = {}

        def respond(request):
            step = step_of(request)
            self.calls.append(step)
            if step == "critic":
                span = request.messages[1]["content"].split("\n\nTriples:")[0]
                n = self.critic_calls.get(span, 0)
                self.critic_calls[span] = n + 1
                return critic_answers[min(n, len(critic_answers) - 1)]
            return {"extract": triples("Mac"), "correct": triples("iPhone")}[step]

        super().__init__(responses=respond, **kwargs)


@pytest.fixture(scope="module")
def sample():
    return load_benchmark("sample", limit=2), load_benchmark("sample", split="dev")


def task_run(name, sample, **overrides):
    """A task's run over the sample's first spans, and its new records."""
    task = TaskIndex().tasks[name]
    if overrides:
        task.config = task.config.model_copy(update=overrides)
    doc_ids = {span.span_id: i for i, span in enumerate(sample[0].spans)}
    run = TaskRun(task, sample[0], sample[1], task.config.generation_kwargs, doc_ids)
    return run, run.new_records()


def test_reflection_stops_on_empty_feedback(sample):
    run, records = task_run("finreflect_reflection", sample)
    lm = Scripted([FEEDBACK, NO_FEEDBACK])
    run.extract(lm, records)
    run.reflect(lm, records)
    for record in records:
        assert record.iterations == 1 and record.converged is True
        assert [len(f) for f in record.feedback_trail] == [1, 0]
        assert [t.object for t in record.triples] == ["iPhone"]
        assert [s.step for s in record.steps] == ["extract", "critic", "correct", "critic"]
    assert lm.calls.count("critic") == 4 and lm.calls.count("correct") == 2


def test_reflection_stops_at_max_iterations(sample):
    run, records = task_run("finreflect_reflection", sample, max_iterations=2)
    lm = Scripted([FEEDBACK])  # never satisfied
    run.extract(lm, records)
    run.reflect(lm, records)
    for record in records:
        assert record.iterations == 2 and record.converged is False
        assert len(record.feedback_trail) == 2
    assert lm.calls.count("critic") == 4 and lm.calls.count("correct") == 4


def test_prompts_put_shared_content_first(sample):
    run, records = task_run("finreflect_single_pass", sample)
    lm = Scripted([NO_FEEDBACK])
    run.extract(lm, records)
    systems = {request.messages[0]["content"] for request in lm.requests}
    assert len(systems) == 1  # one shared system prompt: a cacheable prefix for every span
    users = [request.messages[1]["content"] for request in lm.requests]
    assert all(span.text in user for span, user in zip(sample[0].spans, users, strict=True))
    assert "Example 2" in next(iter(systems))  # two few-shot examples from the dev split


def test_failed_extraction_is_kept_with_zero_triples(sample):
    run, records = task_run("finreflect_reflection", sample)
    lm = ScriptedModel(responses=["not json", triples("Mac")], max_retries=0)
    run.extract(lm, records)
    run.reflect(lm, records)
    failed, ok = records
    assert failed.failed and failed.triples == [] and "extract: invalid JSON" in failed.failures[0]
    assert failed.steps[0].raw_outputs == ["not json"]
    assert [s.step for s in failed.steps] == ["extract"]  # not reflected upon
    assert not ok.failed


def test_multi_pass_calls_the_second_model(tmp_path):
    normalizer_outputs = tmp_path / "normalizer.json"
    normalizer_outputs.write_text(json.dumps([triples("Normalised")]))
    tasks = multi_pass_with_normalizer(tmp_path, "normalizer", normalizer_outputs)
    candidate_outputs = tmp_path / "candidate.json"
    candidate_outputs.write_text(json.dumps([triples("Mac")]))
    config = RunConfig(
        model=ModelSpec("candidate", "scripted", {"responses": str(candidate_outputs)}),
        tasks=["mp_two_models"],
        dataset="sample",
        limit=2,
        output_path=tmp_path / "out",
        include_paths=[tasks],
    )
    out = extract(config).folder
    (samples,) = out.glob("samples_mp_two_models_*.jsonl")
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(records) == 2
    for record in records:
        assert [s["step"] for s in record["steps"]] == ["extract", "normalize"]
        assert [t["object"] for t in record["triples"]] == ["Normalised"]
    (manifest,) = out.glob("manifest_*.json")
    info = json.loads(manifest.read_text())
    assert info["tasks"]["mp_two_models"]["mode"] == "multi_pass"
    assert info["dataset"]["fingerprint"] == load_benchmark("sample").fingerprint
    assert info["status"] == "extracted" and info["format_version"] == 2
    assert [r["doc_id"] for r in records] == [0, 1]


def test_feedback_about_missing_triples_is_dropped_and_counted(sample):
    run, records = task_run("finreflect_reflection", sample)
    out_of_range = json.dumps(
        {"feedback": [{"triple_index": 99, "issue": "x", "suggestion": "drop"}]}
    )
    lm = Scripted([out_of_range])
    run.extract(lm, records)
    run.reflect(lm, records)
    for record in records:
        assert record.converged is True and record.iterations == 0
        assert record.feedback_trail == [[]]
        assert "out of range" in record.failures[0]
