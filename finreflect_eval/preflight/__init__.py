"""A dry run (`run --check`, `extract --check`): what a run needs, checked before any weight is
downloaded or any model runs; the plan of the run, or one line per need that is not met.

May import `pipeline` and the rooms below it.
"""

from finreflect_eval.preflight._check import Preflight, check_run

__all__ = ["Preflight", "check_run"]
