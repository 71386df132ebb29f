"""JSON-schema-constrained decoding for the hf backend, through outlines: one grammar engine per
structured backend and tokenizer, shared by the models that use it, and a generator compiled
from it for each schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from finreflect_eval.models._requests import JsonSchema, closed_schema

StructuredBackend = Literal["outlines_core", "xgrammar", "llguidance"]
# Constrained output may only put single spaces between JSON tokens: a model could otherwise
# pad with whitespace until max_tokens and never close the JSON.
WHITESPACE = r"[ ]?"

# Grammar engines by structured backend and tokenizer. Setting one up reads the whole vocabulary
# (4-6 s for a 262k one, once per loaded model before), and the models of a run often share a
# tokenizer: the demo panel is the embedded model three times, beside the same candidate. An
# engine holds what it made of the vocabulary, not the model, so it outlives the model freely.
GRAMMAR_ENGINES: dict[tuple, Any] = {}
MAX_GRAMMAR_ENGINES = 4


def grammar_engine(outlines_model: Any, tokenizer: Any, structured_backend: str) -> Any:
    """The outlines backend for `structured_backend` and `tokenizer`, made once per tokenizer
    (see `GRAMMAR_ENGINES`)."""
    from outlines.backends import LLGuidanceBackend, OutlinesCoreBackend, XGrammarBackend

    engines = {
        "llguidance": LLGuidanceBackend,
        "outlines_core": OutlinesCoreBackend,
        "xgrammar": XGrammarBackend,
    }
    key = (
        structured_backend,
        type(tokenizer).__name__,
        tokenizer.name_or_path,
        len(tokenizer),
        tokenizer.eos_token_id,
    )
    if key not in GRAMMAR_ENGINES:
        while len(GRAMMAR_ENGINES) >= MAX_GRAMMAR_ENGINES:
            GRAMMAR_ENGINES.pop(next(iter(GRAMMAR_ENGINES)))  # the oldest
        GRAMMAR_ENGINES[key] = engines[structured_backend](outlines_model)
    return GRAMMAR_ENGINES[key]


def compile_generator(
    outlines_model: Any,
    schema: JsonSchema | None,
    structured_backend: str,
    engine: Callable[[], Any],
) -> Any:
    """An outlines generator whose output follows `schema` (None: unconstrained), compiled by
    the grammar engine that `engine()` returns (asked for only when there is a schema)."""
    # Each structured backend must be kept from padding JSON with whitespace: a model could
    # otherwise emit blanks until max_tokens and never close the JSON.
    import outlines
    from outlines.generator import SteerableGenerator
    from outlines.types import JsonSchema as OutlinesJsonSchema

    if schema is None:
        return outlines.Generator(outlines_model, None)
    schema = closed_schema(schema)
    backend = engine()
    if structured_backend == "outlines_core":
        term = OutlinesJsonSchema(json.dumps(schema), whitespace_pattern=WHITESPACE)
        processor = backend.get_json_schema_logits_processor(term.schema, term.whitespace_pattern)
    elif structured_backend == "llguidance":
        compact = {**schema, "x-guidance": {"whitespace_flexible": False}}
        term = OutlinesJsonSchema(json.dumps(compact))
        processor = backend.get_json_schema_logits_processor(term.schema)
    else:  # xgrammar: outlines does not pass `any_whitespace`, so compile it here
        from outlines.backends.xgrammar import XGrammarLogitsProcessor

        grammar = backend.grammar_compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False
        )
        processor = XGrammarLogitsProcessor(grammar, outlines_model.tensor_library_name)
    return SteerableGenerator.from_processor(outlines_model, processor)
