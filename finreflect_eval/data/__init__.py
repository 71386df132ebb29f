"""Benchmark data: typed records, loading (sample, folder, Hub, EvalBench rows), building and
publishing dataset folders.

May import `chunking`, `records`, `protocol` and `_util`.
"""

from finreflect_eval._util.hashing import text_sha256
from finreflect_eval.data._build import (
    DEFAULT_MAX_TOKENS,
    build_spans,
    check_output_folder,
    push_dataset,
    write_card,
    write_dataset_folder,
)
from finreflect_eval.data._evalbench import evalbench_to_benchmark, is_evalbench
from finreflect_eval.data._info import describe, describe_slice
from finreflect_eval.data._load import (
    SAMPLE,
    available_splits,
    commits_remembered,
    load_benchmark,
    resolve_dataset,
)
from finreflect_eval.data._records import (
    CONFIGS,
    FEATURES,
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
    "load_benchmark",
    "push_dataset",
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
