"""Model backends behind one small interface (`LM.generate`), registered by name.

May import `_util` only: a backend knows nothing of the benchmark.
"""

from finreflect_eval.models._base import LM
from finreflect_eval.models._cache import ResponseCache
from finreflect_eval.models._registry import (
    BACKENDS,
    ModelSpec,
    check_spec,
    get_backend,
    load_model,
    parse_batch_size,
    parse_model_args,
    probe_endpoint,
    register_backend,
)
from finreflect_eval.models._requests import (
    Completion,
    GenerationRequest,
    GenerationResult,
    json_schema_of,
    validate_output,
)

__all__ = [
    "BACKENDS",
    "LM",
    "Completion",
    "GenerationRequest",
    "GenerationResult",
    "ModelSpec",
    "ResponseCache",
    "check_spec",
    "get_backend",
    "json_schema_of",
    "load_model",
    "parse_batch_size",
    "parse_model_args",
    "probe_endpoint",
    "register_backend",
    "validate_output",
]
