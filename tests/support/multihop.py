"""The downstream track's test fixtures: FinReflectKG-MultiHop's sample questions (read from
../shared, never copied here), a task folder pointing a downstream task at them, and scripted
models: a candidate that extracts a chosen share of the gold hops, a QA model that answers
from the gold path when its context holds it, and a panel judge that also scores answers."""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cache
from pathlib import Path

import yaml
from conftest import REPO, missing

QA_SAMPLE = REPO.parent / "shared" / "data" / "multihop_qa_sample" / "qa.jsonl"
TASKS = REPO / "tasks"
NO_ANSWER = "The context does not hold the answer."


def qa_sample() -> Path:
    if not QA_SAMPLE.is_file():
        missing(f"the multi-hop QA sample is missing: {QA_SAMPLE}")
    return QA_SAMPLE


@cache
def questions() -> list[dict]:
    return [json.loads(line) for line in qa_sample().read_text().splitlines() if line.strip()]


def task_folder(folder: Path, qa: Path | str = "demo", name: str = "mh_test") -> Path:
    """A tasks folder with `<name>`: the single-pass downstream task on the sample questions,
    answered by `qa` (a QA model file or a bundled name)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = TASKS / "finreflect_multihop" / "finreflect_multihop_single_pass.yaml"
    config = {
        "include": str(base),
        "task": name,
        "dataset_path": str(qa_sample()),
        "dataset_revision": None,
        "num_fewshot": 0,
        "downstream": {"qa": str(qa), "max_hops": 3},
    }
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(config))
    return folder


def qa_file(folder: Path, responder: str = "answers_from_gold", budget: int = 1024) -> Path:
    """A scripted QA model file (this module's `responder`), with the bundled prompts."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "qa.yaml"
    config = {
        "name": "scripted-qa",
        "model": "scripted-qa",
        "backend": "scripted",
        "model_args": {"responses": f"support.multihop:{responder}"},
        "prompt": str(TASKS / "qa" / "answer.jinja"),
        "judge_prompt": str(TASKS / "qa" / "judge_correctness.jinja"),
        "budget_tokens": budget,
        "neighbourhood_hops": 2,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _rank(text: str) -> float:
    """A fixed place in [0, 1) for a text (the same in every process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def _gold_hops(user: str) -> list[dict]:
    """The gold hop triples of the chunk an extraction prompt shows, each once; a relation
    outside the schema (MultiHop's `Guarantees`, `Capitalizes`) as `Related_To`, as a model
    held to the schema would write it."""
    from finreflect_eval.protocol.schema import load_schema

    schema = load_schema()
    found = {}
    for question in questions():
        for hop in question["hops"]:
            if f"Text:\n{hop['chunk_text'].strip()}" in user or hop["chunk_text"] in user:
                triple = {
                    "subject": hop["head"],
                    "subject_type": hop["head_type"],
                    "relation": schema.canonical_relation(hop["relationship"]) or "Related_To",
                    "object": hop["tail"],
                    "object_type": hop["tail_type"],
                }
                found[json.dumps(triple, sort_keys=True)] = triple
    return list(found.values())


def extracts_share(share: float):
    """A candidate extracting the gold hops ranked below `share` (a nested choice: a larger
    share keeps every hop a smaller one keeps); the others become a wrong triple. On the
    bundled sample's spans it does the same with their reference triples."""

    def respond(request) -> str:
        if "feedback" in request.schema["properties"]:
            return json.dumps({"feedback": []})
        user = request.messages[-1]["content"]
        gold = _gold_hops(user) or _sample_triples(user)
        triples = [t if _rank(json.dumps(t, sort_keys=True)) < share else _wrong(t) for t in gold]
        most = request.schema["properties"]["triples"].get("maxItems", 40)
        return json.dumps({"triples": triples[:most]})

    respond.__qualname__ = f"extracts_share_{int(share * 100)}"
    return respond


def _wrong(triple: dict) -> dict:
    return {**triple, "object": f"Unrelated item {_rank(triple['object']):.6f}"}


def _sample_triples(user: str) -> list[dict]:
    from finreflect_eval.data import load_benchmark

    sample = load_benchmark("sample", split="test")
    span = next((s for s in sample.spans if f"Text:\n{s.text}" in user), None)
    if span is None:
        return []
    return [t.triple.model_dump() for t in sample.triples_by_span()[span.span_id]]


# (The sample questions' gold hops all rank above 0.36: 0% and 20% extract none of them, and
# 50% lies between 40% and 60% in both its hops and the sample's reference triples.)
SHARES = (0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0)
for _share in SHARES:
    globals()[f"extracts_share_{int(_share * 100)}"] = extracts_share(_share)


def answers_from_gold(request) -> str:
    """A QA model that gives the gold answer when every gold hop of the question is in its
    context (as a triple, or its chunk is), else says it cannot."""
    user = request.messages[-1]["content"]
    asked = user.rsplit("Question: ", 1)[1].strip()
    question = next(q for q in questions() if q["question"].strip() == asked)
    held = all(
        f"{h['head']} -[{h['relationship']}]-> {h['tail']}".casefold() in user.casefold()
        or h["chunk_text"].strip() in user
        for h in question["hops"]
    )
    return json.dumps({"answer": question["answer"] if held else NO_ANSWER})


def answers_or_fails_first(request) -> str:
    """`answers_from_gold`, logging each call to $MULTIHOP_QA_LOG; with $MULTIHOP_QA_FAIL set,
    an invalid output for the first sample question (a QA model that failed on it)."""
    log = os.environ.get("MULTIHOP_QA_LOG")
    if log:
        with Path(log).open("a") as file:
            file.write("call\n")
    if os.environ.get("MULTIHOP_QA_FAIL") and questions()[0]["question"].strip() in str(
        request.messages[-1]["content"]
    ):
        return "not json"
    return answers_from_gold(request)


def judge(request) -> str:
    """A panel judge: the gold label of the sample's triples (`scripted_judges.gold_labels`),
    and for an answer 10 where it is the gold answer, 0 where it is not."""
    from support.scripted_judges import gold_labels

    if "score" not in request.schema["properties"]:
        return gold_labels(request)
    user = request.messages[-1]["content"]
    gold = re.search(r"Ground-truth answer: (.*?)\n\nModel answer: ", user, re.S).group(1)
    answer = user.rsplit("Model answer: ", 1)[1]
    score = 10 if answer.strip() == gold.strip() else 0
    return json.dumps({"score": score, "reasoning": "scripted", "warning": ""})
