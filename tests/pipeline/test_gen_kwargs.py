"""lm-eval's common `--gen_kwargs` (`top_p`, `top_k`, `do_sample`): validated once, carried by
every request into its cache key, and honoured by each backend: hf's generate, vLLM's
SamplingParams, an endpoint's request body."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from conftest import require
from pydantic import ValidationError
from support.chat_server import Reply, ScriptedServer, answer
from support.completions_server import completion_answer

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models import GenerationRequest, ModelSpec, ResponseCache, load_model
from finreflect_eval.pipeline.run_config import RunConfig, generation_kwargs
from finreflect_eval.tasks.config import GenerationKwargs, TaskIndex

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


# --- GenerationKwargs ---


def test_lm_evals_help_example_is_read():
    kwargs = GenerationKwargs.model_validate({"temperature": 0.8, "top_p": 0.95, "top_k": 40})
    assert (kwargs.temperature, kwargs.top_p, kwargs.top_k) == (0.8, 0.95, 40)


@pytest.mark.parametrize(
    ("given", "field", "problem"),
    [
        ({"top_p": 0}, "top_p", "greater than 0"),  # keeps no token
        ({"top_p": 1.5}, "top_p", "less than or equal to 1"),
        ({"top_p": float("nan")}, "top_p", "finite number"),
        ({"top_k": -1}, "top_k", "greater than or equal to 0"),  # vLLM's old "off": 0 is off
        ({"top_k": 2.5}, "top_k", "valid integer"),
        ({"do_sample": "yes"}, "do_sample", "valid boolean"),
    ],
)
def test_out_of_range_sampling_names_the_field(given, field, problem):
    with pytest.raises(ValidationError, match=rf"\n{field}\n  Input should be a? ?{problem}"):
        GenerationKwargs.model_validate(given)


def test_do_sample_false_is_greedy_as_in_lm_eval():
    kwargs = GenerationKwargs.model_validate({"do_sample": False, "temperature": 0.8})
    assert kwargs.temperature == 0.0


def test_do_sample_true_needs_a_temperature():
    """At temperature 0 sampling is greedy: refused, not silently greedy (transformers refuses
    it too; vLLM would decode greedily)."""
    with pytest.raises(ValidationError, match=r"temperature\n.*do_sample=True samples: give"):
        GenerationKwargs.model_validate({"do_sample": True})
    assert GenerationKwargs.model_validate({"do_sample": True, "temperature": 0.7}).temperature


def test_unset_sampling_keys_stay_out_of_the_record():
    """A run without top_p/top_k records (and resumes) as before these keys existed; do_sample
    is never kept: the temperature says it."""
    plain = {"max_gen_toks": 2048, "temperature": 0.0, "seed": 1234}
    assert GenerationKwargs(do_sample=False).model_dump() == plain
    assert GenerationKwargs(top_p=0.9, top_k=0).model_dump() == {**plain, "top_p": 0.9, "top_k": 0}


def test_an_unknown_gen_kwarg_is_one_line_naming_the_accepted_ones():
    task = TaskIndex().tasks["finreflect_smoke_single_pass"].config
    config = RunConfig(model=ModelSpec("m"), tasks=[], gen_kwargs={"top_q": 0.5})
    accepted = "do_sample, max_gen_toks, seed, temperature, top_k, top_p"
    with pytest.raises(
        FinReflectError, match=rf"^--gen-kwargs: unknown key 'top_q'; accepted: {accepted}$"
    ):
        generation_kwargs(config, task)
    config = RunConfig(
        model=ModelSpec("m"), tasks=[], gen_kwargs={"temperature": 0.8, "top_p": 0.95}
    )
    generation = generation_kwargs(config, task)
    assert (generation.temperature, generation.top_p, generation.top_k) == (0.8, 0.95, None)


# --- the request and its cache key ---


def test_top_p_and_top_k_are_in_the_cache_key_only_when_set():
    base = GenerationRequest(prompt="x", schema=SCHEMA)
    # Unset, the key is the one of earlier versions: caches written before them still answer.
    old_fields = {
        "messages": [],
        "prompt": "x",
        "schema": SCHEMA,
        "max_tokens": 1024,
        "temperature": 0.0,
        "seed": 0,
    }
    blob = json.dumps(old_fields, sort_keys=True, ensure_ascii=False)
    assert base.digest() == hashlib.sha256(blob.encode()).hexdigest()
    digests = {
        GenerationRequest(prompt="x", schema=SCHEMA, **sampling).digest()
        for sampling in ({}, {"top_p": 0.9}, {"top_p": 0.5}, {"top_k": 5}, {"top_k": 0})
    }
    assert len(digests) == 5


# --- endpoints: the request body ---


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.mark.parametrize(
    ("backend", "reply"),
    [("openai", answer('{"a": 1}')), ("openai-completions", completion_answer('{"a": 1}'))],
)
def test_top_p_and_top_k_reach_the_body_and_change_the_cache_key(backend, reply, tmp_path):
    def sampled(**sampling: Any) -> GenerationRequest:
        return GenerationRequest(prompt="x", schema=SCHEMA, temperature=0.7, **sampling)

    with ScriptedServer.running([Reply(body=reply)]) as server:
        spec = ModelSpec("m", backend, {"base_url": server.url})
        with load_model(spec, cache_path=tmp_path / "cache.sqlite") as lm:
            lm.generate([sampled(top_p=0.9, top_k=5)])
            lm.generate([sampled(top_p=0.5, top_k=5)])  # another top_p: not from the cache
            lm.generate([sampled(top_p=0.5, top_k=5), sampled()])  # one cached, one new
    bodies = [sent["body"] for sent in server.requests]
    assert [(body.get("top_p"), body.get("top_k")) for body in bodies] == [
        (0.9, 5),
        (0.5, 5),
        (None, None),  # unset: not sent, the server's default
    ]
    assert "top_p" not in bodies[2] and "top_k" not in bodies[2]
    assert len(ResponseCache(tmp_path / "cache.sqlite")) == 3


def test_top_k_is_refused_for_openais_api_before_any_call():
    """api.openai.com has no top_k: one line, before anything is sent (nothing listens here)."""
    from finreflect_eval.models.openai import OpenAIModel

    lm = OpenAIModel("gpt-4o-mini", base_url="https://api.openai.com/v1")
    with pytest.raises(FinReflectError, match=r"^top_k is not a parameter of OpenAI's API"):
        lm.generate([GenerationRequest(prompt="x", temperature=0.7, top_k=5)])
    lm.close()


def test_gen_kwargs_reach_the_candidates_requests_and_the_record(tmp_path):
    """`--gen_kwargs temperature=0.8 top_p=0.95 top_k=40` on a run: every extraction request
    carries them, and the manifest records them with the task."""
    from support.runs import TRIPLES, panel_file

    from finreflect_eval.pipeline.evaluator import evaluate
    from finreflect_eval.pipeline.judging import load_panel

    with ScriptedServer.running([Reply(body=answer(json.dumps(TRIPLES)))]) as server:
        config = RunConfig(
            model=ModelSpec("m", "openai", {"base_url": server.url}),
            tasks=["finreflect_smoke_single_pass"],
            dataset="sample",
            limit=2,
            output_path=tmp_path / "out",
            gen_kwargs={"temperature": 0.8, "top_p": 0.95, "top_k": 40},
        )
        evaluate(config, load_panel(panel_file(tmp_path, *["accepts_all"] * 3)))
    sampling = {
        (s["body"]["temperature"], s["body"]["top_p"], s["body"]["top_k"]) for s in server.requests
    }
    assert len(server.requests) == 2 and sampling == {(0.8, 0.95, 40)}
    (manifest,) = (tmp_path / "out").rglob("manifest*.json")
    recorded = json.loads(manifest.read_text())["tasks"]["finreflect_smoke_single_pass"]
    assert recorded["generation_kwargs"] == {
        "max_gen_toks": recorded["generation_kwargs"]["max_gen_toks"],
        "temperature": 0.8,
        "seed": 1234,
        "top_p": 0.95,
        "top_k": 40,
    }


# --- in-process backends ---


def free_text(seed: int, **sampling: Any) -> GenerationRequest:
    return GenerationRequest(prompt="Revenue grew in", max_tokens=12, seed=seed, **sampling)


@pytest.mark.parametrize("keep_one", [{"top_k": 1}, {"top_p": 1e-6}])
def test_hf_samples_within_top_k_and_top_p(tiny_model_dir, keep_one):
    """Sampling hot (temperature 2) from a random model wanders off the greedy path; keeping one
    token (top_k=1, or a tiny top_p) puts it back on it, whatever the seed."""
    require("outlines", "[hf] extra")
    spec = ModelSpec(str(tiny_model_dir), "hf", {"batch_size": 4})
    with load_model(spec) as lm:
        [greedy] = lm.generate([free_text(0)])
        hot = lm.generate([free_text(seed, temperature=2.0) for seed in range(4)])
        kept = lm.generate([free_text(seed, temperature=2.0, **keep_one) for seed in range(4)])
    assert any(result.text != greedy.text for result in hot)
    assert [result.text for result in kept] == [greedy.text] * 4


def test_hf_greedy_ignores_top_p_and_top_k(tiny_model_dir):
    require("outlines", "[hf] extra")
    with load_model(ModelSpec(str(tiny_model_dir), "hf")) as lm:
        [plain] = lm.generate([free_text(0)])
        [with_sampling] = lm.generate([free_text(0, top_p=0.5, top_k=3)])
    assert with_sampling.text == plain.text


def test_vllm_sampling_params_carry_top_p_and_top_k(real_vllm):
    from finreflect_eval.models.vllm import sampling_params

    params = sampling_params(free_text(3, temperature=0.7, top_p=0.9, top_k=5))
    assert (params.temperature, params.top_p, params.top_k, params.seed) == (0.7, 0.9, 5, 3)
    default = sampling_params(free_text(3, temperature=0.7))
    expected = real_vllm.SamplingParams()
    assert (default.top_p, default.top_k) == (expected.top_p, expected.top_k)  # vLLM's own
    off = sampling_params(free_text(3, temperature=0.7, top_k=0))
    assert off.top_k in (0, -1)  # 0 is "off" for vLLM too
