"""Scripted judges for tests, named in panel YAML as `scripted_judges:<function>`: each answers
a judge request from its output schema alone (how many triples, which criterion)."""

import hashlib
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


def broken_now_and_then(request):
    """Invalid on about one call in eight (chosen by the request's content, the same in every
    process): a judge that fails now and then (an abstention), within the failure share."""
    digest = hashlib.sha256(json.dumps(request.messages).encode()).digest()
    return "not json" if digest[0] % 8 == 0 else _answer(request, 1, "good")


_GOLD = {}


def _gold():
    """Gold labels of the bundled sample, keyed as a judge prompt shows the items."""
    if not _GOLD:
        from finreflect_eval.data import load_benchmark

        sample = load_benchmark("sample", split="test")
        spans = {span.span_id: span for span in sample.spans}
        for j in sample.judgments:
            span = spans[j.span_id]
            if j.criterion == "comprehensiveness":
                _GOLD[frozenset(span.text.split("\n\n"))] = j.label
            else:
                t = j.triple
                line = f"{t.subject}, {t.subject_type}, {t.relation}, {t.object}, {t.object_type}"
                _GOLD[(span.ticker, j.criterion, line)] = int(j.label)
    return _GOLD


def gold_labels(request):
    """Answers with the gold label of each item (0 for anything not in the gold set)."""
    import re

    from finreflect_eval.pipeline.audit import VERBOSE_SUFFIX

    user = request.messages[-1]["content"]
    criterion = re.search(r"Criterion: ([A-Z]+)\.", user).group(1).lower()
    ticker = re.search(r"Company ticker: (\S+)", user).group(1)
    text = user.split("Text:\n", 1)[1].split("\n\nCriterion:", 1)[0]
    listed = user.split("Now judge the chunk above.\nTriples:\n", 1)[1]
    numbered = re.findall(r"^\d+\. \((.*)\)$", listed, re.M)
    lines = [line.replace(VERBOSE_SUFFIX, "") for line in numbered]
    gold = _gold()
    if "verdicts" in request.schema["properties"]:
        items = [
            {"verdict": gold.get((ticker, criterion, line), 0), "reasoning": "gold", "warning": ""}
            for line in lines
        ]
        return json.dumps({"verdicts": items})
    level = gold.get(frozenset(text.split("\n\n")), "poor")
    return json.dumps({"verdict": level, "reasoning": "gold", "warning": ""})


def reference_triples(request):
    """A candidate that answers an extraction request with the span's reference triples from
    the bundled sample (as many as the schema allows), so runs have realistic, varied triples.
    A reflection critic finds nothing to fix."""
    from finreflect_eval.data import load_benchmark

    _count_call()
    if "feedback" in request.schema["properties"]:
        return json.dumps({"feedback": []})
    user = request.messages[-1]["content"]
    sample = load_benchmark("sample", split="test")
    triples = sample.triples_by_span()
    span = next(s for s in sample.spans if f"Text:\n{s.text}" in user)
    most = request.schema["properties"]["triples"].get("maxItems", 40)
    found = [t.triple.model_dump() for t in triples[span.span_id]][:most]
    return json.dumps({"triples": found})


WORDY = "the text states this fact plainly in its second sentence, so the triple is well supported"


def wordy(request):
    """Accepts everything, with a justification of 16 words: over the protocol's 15."""
    properties = request.schema["properties"]
    item = {"verdict": 1, "reasoning": WORDY, "warning": ""}
    if "verdicts" in properties:
        return json.dumps({"verdicts": [item] * properties["verdicts"]["minItems"]})
    return json.dumps({**item, "verdict": "good"})


def reasons_first(request):
    """Accepts everything, but writes each reasoning before its verdict (justify, then
    commit: what the protocol's order rules out; a server may not enforce the key order)."""
    properties = request.schema["properties"]
    item = {"reasoning": "stated", "verdict": 1, "warning": ""}
    if "verdicts" in properties:
        return json.dumps({"verdicts": [item] * properties["verdicts"]["minItems"]})
    return json.dumps({**item, "verdict": "good"})


def broken_on_spans(request):
    """Accepts every triple; its comprehensiveness answers are never valid (every span call
    fails)."""
    if "verdicts" in request.schema["properties"]:
        return _answer(request, 1, "good")
    return "not json"


def considered_answer(schema: dict, user: str) -> str:
    """A judge whose verdicts vary from item to item and span to span, and are the same for
    the same prompt in every process and behind every backend (a scripted model or a scripted
    server): what an honest, deterministic judge looks like to an audit."""
    digest = hashlib.sha256(user.encode()).digest()
    reply = {"reasoning": "scripted", "warning": ""}
    if "verdicts" in schema["properties"]:
        n = schema["properties"]["verdicts"]["minItems"]
        verdicts = [{"verdict": int(digest[i % 32] % 3 != 0), **reply} for i in range(n)]
        return json.dumps({"verdicts": verdicts})
    return json.dumps({"verdict": ("good", "partial", "poor")[digest[0] % 3], **reply})


def considered(request):
    _count_call()
    return considered_answer(request.schema, request.messages[-1]["content"])
