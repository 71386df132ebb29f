"""Scripted models that keep every request they receive, with the state of Python's and numpy's
global generators at the first one: a test compares what a run's files say ran with what the
backend was actually asked (`support.recording:candidate` and `:judge` in model args)."""

from __future__ import annotations

import json
import random

import numpy as np

from support.runs import TRIPLES
from support.scripted_judges import accepts_all

RECEIVED: dict[str, list] = {"candidate": [], "judge": []}
GLOBAL_STATE: dict[str, object] = {}


def reset() -> None:
    for requests in RECEIVED.values():
        requests.clear()
    GLOBAL_STATE.clear()


def candidate(request) -> str:
    if not GLOBAL_STATE:
        GLOBAL_STATE["random"] = random.getstate()
        GLOBAL_STATE["numpy"] = np.random.get_state(legacy=False)
    RECEIVED["candidate"].append(request)
    return json.dumps(TRIPLES)


def judge(request) -> str:
    RECEIVED["judge"].append(request)
    return accepts_all(request)
