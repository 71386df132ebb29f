"""The Python API, as lm-eval's: `simple_evaluate` runs the benchmark and `evaluate_run` judges and
scores a saved run; `run_config` checks their arguments.

May import `pipeline` and every room below it."""

from finreflect_eval.api.evaluate import evaluate_run, run_config, simple_evaluate

__all__ = ["evaluate_run", "run_config", "simple_evaluate"]
