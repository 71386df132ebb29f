"""The parts of the model layer that need no model: args, schemas, validation, the cache."""

import multiprocessing
import threading

import pytest

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models import (
    LM,
    Completion,
    GenerationRequest,
    ModelSpec,
    ResponseCache,
    parse_model_args,
    validate_output,
)
from finreflect_eval.models._requests import closed_schema

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_model_args_are_literals_split_at_top_level_commas():
    args = parse_model_args('batch_size=4,dtype=float32,extra_body={"a": 1, "b": [1, 2]},x=True')
    assert args == {
        "batch_size": 4,
        "dtype": "float32",
        "extra_body": {"a": 1, "b": [1, 2]},
        "x": True,
    }
    assert parse_model_args("") == {} and parse_model_args(None) == {}
    # lower-case booleans are booleans: "false" must never turn remote code on
    assert parse_model_args("trust_remote_code=false,a=TRUE,b=none") == {
        "trust_remote_code": False,
        "a": True,
        "b": None,
    }
    assert parse_model_args("b=don't,c=1") == {"b": "don't", "c": 1}
    with pytest.raises(FinReflectError, match="'oops' is not key=value"):
        parse_model_args("a=1,oops")
    assert ModelSpec.from_cli("m", "hf", "revision=main").args == {"revision": "main"}


def test_closed_schema_closes_every_object_but_keeps_explicit_choices():
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"properties": {"x": {}}}}},
        "$defs": {"Open": {"type": "object", "additionalProperties": True}},
    }
    closed = closed_schema(schema)
    assert closed["additionalProperties"] is False
    assert closed["properties"]["items"]["items"]["additionalProperties"] is False
    assert closed["$defs"]["Open"]["additionalProperties"] is True
    assert "additionalProperties" not in schema  # the input is not changed


def test_validate_output():
    assert validate_output('{"a": 1}', SCHEMA) == ({"a": 1}, None)
    value, error = validate_output('{"a": "x"}', SCHEMA)
    assert value is None and "does not match the schema at a" in error
    value, error = validate_output('{"a": 1', SCHEMA)
    assert value is None and error.startswith("invalid JSON")
    assert validate_output("free text", None) == ("free text", None)


def test_request_takes_a_pydantic_model_or_a_dict():
    from pydantic import BaseModel

    class Answer(BaseModel):
        a: int

    request = GenerationRequest(prompt="p", schema=Answer)
    assert request.schema["properties"]["a"]["type"] == "integer"
    with pytest.raises(ValueError, match="messages or a prompt"):
        GenerationRequest()
    chat = GenerationRequest.chat(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    )
    assert chat.plain_prompt() == "S\n\nU"


def test_cache_is_shared_by_threads(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")

    def write(worker):
        for i in range(50):
            cache.put_many([(f"{worker}-{i}", {"text": str(i)})])

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 200
    assert cache.get_many(["3-49", "missing"]) == [{"text": "49"}, None]


def _write_from_process(path, worker):
    cache = ResponseCache(path)
    for i in range(30):
        cache.put_many([(f"{worker}-{i}", {"n": i})])
    cache.close()


def test_cache_is_shared_by_processes(tmp_path):
    path = tmp_path / "c.sqlite"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_from_process, args=(path, w)) for w in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    assert len(ResponseCache(path)) == 90


def test_unwritable_cache_is_a_one_line_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(FinReflectError, match="cannot open cache"):
        ResponseCache(blocker / "c.sqlite")


def test_identical_requests_in_one_call_are_generated_once():
    from finreflect_eval.models.scripted import ScriptedModel

    lm = ScriptedModel(responses=["a", "b"])
    same = GenerationRequest(prompt="p")
    results = lm.generate([same, GenerationRequest(prompt="q"), same])
    assert [r.text for r in results] == ["a", "b", "a"]
    assert len(lm.requests) == 2 and results[2].cached and not results[0].cached


def test_a_registered_backend_with_unannotated_or_unusual_args_loads():
    from finreflect_eval.models import check_spec, register_backend

    register_backend("plain", "test_models_base:PlainBackend")
    check_spec(ModelSpec("m", "plain", {"foo": 1, "event": threading.Event()}))
    with pytest.raises(FinReflectError, match="unknown model arg 'bar'"):
        check_spec(ModelSpec("m", "plain", {"bar": 1}))


class PlainBackend(LM):
    def __init__(self, model, *, foo=0, event: threading.Event | None = None, **kwargs):
        super().__init__(model, **kwargs)

    def _complete(self, requests):
        return []


class SteppingModel(LM):
    """Reports its work as a decoding backend does: two steps (a unit a row each) of at most
    four; the first attempt of every even request is not JSON (so it is retried)."""

    backend = "stepping"

    def __init__(self, trace: list[tuple[str, float]], **kwargs):
        super().__init__("stepping", batch_size=3, **kwargs)
        self.trace = trace

    def _complete(self, requests):
        on_work = self.decoding_progress(len(requests), 4 * len(requests))
        if on_work is None:  # no bar shown
            self.trace.append(("no bar", 0))
        else:
            for _ in range(2):
                on_work(len(requests))
                self.trace.append(("step", self._bar.bar.n))
            self.trace.append(("answer", self._bar.bar.n))
        return [
            Completion(text="not json" if r.seed == 0 and int(r.prompt) % 2 == 0 else '{"a": 1}')
            for r in requests
        ]


def test_the_bar_moves_within_a_batch_never_back_nor_past_its_batch(monkeypatch):
    from finreflect_eval._util import progress
    from finreflect_eval.models._base import RequestBar

    trace: list[tuple[str, float]] = []
    answered = RequestBar.answered

    def record(bar, final):
        answered(bar, final)
        trace.append(("final", bar.bar.n))

    monkeypatch.setattr(RequestBar, "answered", record)
    requests = [GenerationRequest(prompt=str(i), schema=SCHEMA) for i in range(5)]
    with progress.progress_bars(True):
        results = SteppingModel(trace).generate(requests)
    assert all(result.ok for result in results)
    n = [value for _, value in trace]
    assert n == sorted(n) and n[-1] == 5  # never back, exactly at the end
    # Two steps of four: half of the batch's three requests, then the retry of the two even ones
    # shares what is left of the batch (1.5 of 3), half of it for its two steps.
    first_batch = [(event, value) for event, value in trace if value <= 3]
    assert first_batch == [
        ("step", 0.75),
        ("step", 1.5),
        ("answer", 1.5),
        ("final", 1.5),  # one is final: the bar holds while the two retries run
        ("step", 1.875),
        ("step", 2.25),
        ("answer", 2.25),
        ("final", 3),  # the batch's end: exactly its final count
    ]
    assert trace[-1] == ("final", 5) and all(value > 3 for _, value in trace[8:])


def test_without_a_shown_bar_a_backend_has_nothing_to_call():
    from finreflect_eval._util import progress

    trace: list[tuple[str, float]] = []
    with progress.progress_bars(False):
        SteppingModel(trace).generate([GenerationRequest(prompt=str(i)) for i in range(5)])
    assert trace == [("no bar", 0)] * 2  # one a batch


def test_the_bar_s_eta_counts_only_finished_requests():
    """Ten minutes into a batch of eight whose steps moved the bar to 0.2 (a lower bound: rows
    end before max_tokens), no request has finished: the ETA is `?`, not the 6 h 30 min a rate
    of 0.2 in 10 min promises. Once four have finished in 10 min, 10 min more for the rest."""
    from tqdm import tqdm

    from finreflect_eval.models._base import RequestBar

    bar = RequestBar(8, "judge x")
    try:
        bar.call(8)
        bar.advance(1.0, 0.2)
        bar.bar.start_t -= 600  # ten minutes ago
        shown = tqdm.format_meter(**bar.bar.format_dict)
        assert "0.20/8 [10:00<?, ?req/s]" in shown, shown
        bar.answered(4)
        shown = tqdm.format_meter(**bar.bar.format_dict)
        assert "4.00/8 [10:00<10:00, " in shown, shown
    finally:
        bar.close()
