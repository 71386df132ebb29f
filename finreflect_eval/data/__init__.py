"""Benchmark data: typed records, loading (sample, folder, Hub, EvalBench rows), building and
publishing dataset folders."""

from finreflect_eval.data._build import (
    DEFAULT_MAX_TOKENS,
    build_spans,
    push_dataset,
    section_slug,
    write_card,
    write_dataset_folder,
)
from finreflect_eval.data._evalbench import evalbench_to_benchmark, is_evalbench
from finreflect_eval.data._info import describe, markdown_table
from finreflect_eval.data._load import SAMPLE, available_splits, load_benchmark, resolve_dataset
from finreflect_eval.data._records import (
    COMPREHENSIVENESS_LEVELS,
    CONFIGS,
    CRITERIA,
    FEATURES,
    TRIPLE_CRITERIA,
    Benchmark,
    Criterion,
    Judgment,
    ReferenceTriple,
    Span,
    text_sha256,
)

__all__ = [
    "COMPREHENSIVENESS_LEVELS",
    "CONFIGS",
    "CRITERIA",
    "DEFAULT_MAX_TOKENS",
    "FEATURES",
    "SAMPLE",
    "TRIPLE_CRITERIA",
    "Benchmark",
    "Criterion",
    "Judgment",
    "ReferenceTriple",
    "Span",
    "available_splits",
    "build_spans",
    "describe",
    "evalbench_to_benchmark",
    "is_evalbench",
    "load_benchmark",
    "markdown_table",
    "push_dataset",
    "resolve_dataset",
    "section_slug",
    "text_sha256",
    "write_card",
    "write_dataset_folder",
]
