"""Benchmark data: typed records, loading (sample, folder, Hub, EvalBench rows, multi-hop QA
rows), building and publishing dataset folders.

May import `chunking`, `graph` (entity keys), `records`, `protocol` and `_util`.
"""

import importlib
from typing import Any

from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.data._evalbench import evalbench_to_benchmark, is_evalbench
from finreflect_eval.data._info import describe, describe_slice
from finreflect_eval.data._load import (
    SAMPLE,
    available_splits,
    commits_remembered,
    load_benchmark,
    resolve_dataset,
)
from finreflect_eval.data._multihop import is_multihop, multihop_to_benchmark, questions_within
from finreflect_eval.data._records import (
    CONFIGS,
    Benchmark,
    Judgment,
    ReferenceTriple,
    Span,
)
from finreflect_eval.data._slice import (
    section_slug,
    select_samples,
    select_sections,
    select_slice,
    span_list,
)

__all__ = [
    "CONFIGS",
    "DEFAULT_MAX_TOKENS",
    "FEATURES",
    "SAMPLE",
    "Benchmark",
    "Judgment",
    "ReferenceTriple",
    "Span",
    "available_splits",
    "build_spans",
    "check_output_folder",
    "commits_remembered",
    "describe",
    "describe_slice",
    "evalbench_to_benchmark",
    "is_evalbench",
    "is_multihop",
    "load_benchmark",
    "multihop_to_benchmark",
    "push_dataset",
    "questions_within",
    "resolve_dataset",
    "section_slug",
    "select_samples",
    "select_sections",
    "select_slice",
    "span_list",
    "text_sha256",
    "write_card",
    "write_dataset_folder",
]

# Imported on first use: building and publishing (and the columns' `datasets.Features`) pull in
# `datasets` and the Hub client, seconds that a command reading a run folder never needs.
_LAZY = {
    "DEFAULT_MAX_TOKENS": "_build",
    "build_spans": "_build",
    "check_output_folder": "_build",
    "push_dataset": "_build",
    "write_card": "_build",
    "write_dataset_folder": "_build",
    "FEATURES": "_records",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
