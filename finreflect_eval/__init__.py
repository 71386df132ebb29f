"""finreflect-eval: KG extraction from 10-K filings, scored by a panel of LLM judges.

`simple_evaluate(model=..., tasks=..., judges=...)` runs the benchmark from Python (as lm-eval's
does); `evaluate_run(samples)` judges and scores a saved run.
"""

import logging

from finreflect_eval._util.version import __version__

# A library logs to its callers' handlers only: without one, Python would print its warnings
# to stderr. The command line sets up logging itself.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["__version__", "evaluate_run", "simple_evaluate"]


def __getattr__(name: str):
    # Imported on first use: the command line's `--help` must not pay for the pipeline's imports.
    if name in ("simple_evaluate", "evaluate_run"):
        from finreflect_eval.api import evaluate

        return getattr(evaluate, name)
    raise AttributeError(f"module 'finreflect_eval' has no attribute {name!r}")
