"""A dry run (`run --check`, `extract --check`, `judge --check`): what a run (or its judging)
needs, checked before any weight is downloaded or any model runs; the plan, or one line per
need that is not met.

May import `pipeline` and the rooms below it.
"""

from finreflect_eval.preflight._check import Preflight, check_judging, check_run

__all__ = ["Preflight", "check_judging", "check_run"]
