"""Where a run ran: the versions of the libraries that shape its outputs and the machine, as the
manifest records them (lm-eval's `pretty_env_info` and `transformers_version`), and lm-eval's
global seeding before a run."""

from __future__ import annotations

import functools
import platform
import random
import sys

from finreflect_eval._util.version import installed_version
from finreflect_eval.records import Environment

# The distributions whose versions can change a run's outputs or numbers.
PACKAGES = (
    "finreflect-eval",
    "torch",
    "transformers",
    "accelerate",
    "vllm",
    "outlines",
    "outlines-core",
    "llguidance",
    "xgrammar",
    "gguf",
    "datasets",
    "huggingface-hub",
    "pyarrow",
    "numpy",
    "pydantic",
    "openai",
    "httpx",
)


@functools.cache
def environment() -> Environment:
    """The environment of this process (read once: package versions do not change while it
    runs). torch is asked about CUDA only where it is imported already: the candidate's
    backend imported it, and importing it here would cost seconds for a server's run."""
    cuda, gpus = None, []
    torch = sys.modules.get("torch")
    if torch is not None:
        cuda = torch.version.cuda
        if torch.cuda.is_available():
            gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return Environment(
        python=sys.version.split()[0],
        platform=platform.platform(),
        packages={name: installed_version(name) for name in PACKAGES},
        cuda=cuda,
        gpus=gpus,
    )


def seed_globals(random_seed: int | None, numpy_seed: int | None) -> None:
    """Seed Python's and numpy's global generators, as lm-eval does before a run (None: left
    alone). Generation seeds torch per request batch itself (the tasks' `seed`)."""
    if random_seed is not None:
        random.seed(random_seed)
    if numpy_seed is not None:
        import numpy as np

        np.random.seed(numpy_seed)
