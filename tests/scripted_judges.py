"""Scripted judges for tests, named in panel YAML as `scripted_judges:<function>`: each answers
a judge request from its output schema alone (how many triples, which criterion)."""

import json
import os
from pathlib import Path


def _answer(request, verdict, level):
    properties = request.schema["properties"]
    if "verdicts" in properties:
        n = properties["verdicts"]["minItems"]
        item = {"verdict": verdict, "reasoning": "scripted", "warning": ""}
        return json.dumps({"verdicts": [item] * n})
    return json.dumps({"verdict": level, "reasoning": "scripted", "warning": ""})


def _count_call():
    """Append to $SCRIPTED_JUDGE_LOG, so a test can count calls made in another process."""
    log = os.environ.get("SCRIPTED_JUDGE_LOG")
    if log:
        with Path(log).open("a") as file:
            file.write("call\n")
    if os.environ.get("SCRIPTED_JUDGE_DIE_AFTER"):  # simulate a killed run
        calls = len(Path(log).read_text().splitlines())
        if calls >= int(os.environ["SCRIPTED_JUDGE_DIE_AFTER"]):
            os._exit(137)


def accepts_all(request):
    _count_call()
    return _answer(request, 1, "good")


def rejects_all(request):
    _count_call()
    return _answer(request, 0, "partial")


def broken(request):
    return "not json"
