"""Hostile markup in every field of a run that a page shows, for the browser tests.

A payload names its field and calls `xss(field)`: markup that would run if a page set it as
HTML (an `<img>`'s onerror, a `<script>` after one it closes, an `<svg>`'s onload after an
attribute it closes, a `javascript:` URL). A page test defines `pwned` to record its calls
(`support.browser.TRAP`), so a leak names the field it came through.

`hostile_run` carries one in every field it can: through the pipeline where the pipeline lets
the text through (the dataset's spans and reference triples, the model's name, the candidate's
entities and its failures, the judges' reasoning and warnings), and written into its files where
only a run folder handed over by someone else can hold it (judge names, relations and entity
types, CheckRules names, the dataset's id): the report reads such a folder as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

VECTORS = (
    "\"><img src=x onerror=xss('{0}')>",
    "</script><script data-pwn>xss('{0}')</script>",
    "'><svg onload=xss('{0}')>",
    "javascript:xss('{0}')",
)
FAIL = "FAIL-THIS-SPAN"  # a span whose text holds it gets a candidate answer that fails
TASKS = ("finreflect_smoke_single_pass", "finreflect_smoke_multi_pass")
N_SPANS = 4
JUDGES = ("judge-0", "judge-1", "judge-2")
RESPONDERS = ("judge_yes", "judge_no", "judge_yes")


def payload(field: str) -> str:
    """Every vector, calling `xss(field)`: 150 characters for "reasoning" (a judge's
    reasoning may have 160, a leaderboard's judge name 200)."""
    return " ".join(vector.format(field) for vector in VECTORS)


def entity(field: str) -> str:
    """A payload short enough for an extracted entity (60 characters) or a judge's warning (60):
    it closes an attribute and a script, then an `<img>` runs `xss(field)`."""
    return f"\"'></script><img src=x onerror=xss('{field}')>"


JUDGE_NAMES = {judge: payload(f"judge name {number}") for number, judge in enumerate(JUDGES)}
"""What `hand_over` (or `rename`) calls the panel's judges."""


# --- the scripted candidate and judges (named in YAML as support.hostile:<function>) ---


def candidate(request) -> str:
    """Two triples whose subject and object are markup; a schema failure quoting markup on the
    span marked FAIL; no feedback from a reflection critic."""
    if "feedback" in request.schema["properties"]:
        return json.dumps({"feedback": []})
    if FAIL in request.messages[-1]["content"]:
        return json.dumps({"triples": entity("failure")})  # not a list: the message quotes it
    triple = {"subject_type": "ORG", "relation": "Produces", "object_type": "PRODUCT"}
    return json.dumps(
        {
            "triples": [
                {**triple, "subject": entity("subject"), "object": entity("object")},
                {**triple, "subject": "Apple", "object": "iPhone"},
            ]
        }
    )


def _judge(request, verdict: int, level: str) -> str:
    item = {"verdict": verdict, "reasoning": payload("reasoning"), "warning": entity("warning")}
    properties = request.schema["properties"]
    if "verdicts" in properties:
        return json.dumps({"verdicts": [item] * properties["verdicts"]["minItems"]})
    return json.dumps({**item, "verdict": level})


def judge_yes(request) -> str:
    return _judge(request, 1, "good")


def judge_no(request) -> str:
    return _judge(request, 0, "poor")


# --- the run ---


def hostile_dataset(folder: Path) -> Path:
    """The sample's first N_SPANS test spans: the first one's id, ticker, company, section and
    text are markup (its text holds the object the candidate extracts, so the page marks it),
    and so is each field of one of its reference triples; the second span's candidate fails."""
    from finreflect_eval.data import load_benchmark, text_sha256, write_dataset_folder

    test, dev = (load_benchmark("sample", split=split) for split in ("test", "dev"))
    spans = list(test.spans[:N_SPANS])
    first, second = spans[0], spans[1]
    text = f"{payload('span text')} {entity('object')} {first.text}"
    spans[0] = first.model_copy(
        update={
            "span_id": payload("span id"),
            "ticker": payload("ticker"),
            "company": payload("company"),
            "section": payload("section"),
            "text": text,
            "sha256": text_sha256(text),
        }
    )
    text = f"{second.text} {FAIL}"
    spans[1] = second.model_copy(update={"text": text, "sha256": text_sha256(text)})
    kept = {span.span_id for span in test.spans[:N_SPANS]}
    triples = [t for t in test.reference_triples if t.span_id in kept]
    for number, triple in enumerate(triples):
        if triple.span_id == first.span_id:
            triples[number] = triple.model_copy(update={"span_id": spans[0].span_id})
    at = next(n for n, t in enumerate(triples) if t.span_id == spans[0].span_id)
    triples[at] = triples[at].model_copy(
        update={
            name: payload(f"reference {name}")
            for name in ("subject", "subject_type", "relation", "object", "object_type")
        }
    )
    tables = {
        "spans": {"test": spans, "dev": dev.spans},
        "reference_triples": {"test": triples, "dev": dev.reference_triples},
    }
    return write_dataset_folder(folder, tables)


def hostile_panel(folder: Path, name: str = "hostile-panel") -> Path:
    """Three scripted judges (yes, no, yes: every item split) whose reasoning and warnings are
    markup."""
    judges = [
        {
            "name": judge,
            "model": "scripted",
            "backend": "scripted",
            "model_args": {"responses": f"support.hostile:{responder}"},
        }
        for judge, responder in zip(JUDGES, RESPONDERS, strict=True)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "panel.yaml"
    path.write_text(yaml.safe_dump({"panel": name, "judges": judges}))
    return path


def hostile_run(root: Path, model: str, tasks: tuple[str, ...] = TASKS) -> Path:
    """A scored scripted run on the hostile dataset, then handed over (`hand_over`); returns its
    run folder. `model` is the model's name (markup, as a user may give it)."""
    from finreflect_eval.models import ModelSpec
    from finreflect_eval.pipeline.evaluator import evaluate
    from finreflect_eval.pipeline.judging import load_panel
    from finreflect_eval.pipeline.run_config import RunConfig
    from finreflect_eval.scoring.failures import FailurePolicy

    dataset = root / "dataset"
    if not dataset.exists():
        hostile_dataset(dataset)
    folder = root / f"run-{len(list(root.glob('run-*')))}"
    responses = {"responses": "support.hostile:candidate"}
    config = RunConfig(
        model=ModelSpec(model, "scripted", responses),
        tasks=list(tasks),
        dataset=str(dataset),
        output_path=folder,
        cache=folder / "cache.sqlite",
    )
    policy = FailurePolicy(max_invalid_share=0.5)  # the span marked FAIL fails
    run, results = evaluate(config, load_panel(hostile_panel(folder)), policy)
    run_folder = run.store.results_path(results.run, results.judges.panel).parent
    hand_over(run_folder, {str(dataset): payload("dataset id")})
    return run_folder


def hand_over(folder: Path, renames: dict[str, str] | None = None) -> None:
    """Write markup into the run's files where only someone else's run folder can hold it: the
    judges' names and a CheckRule's name (`rename`), the first triple's relation and entity types
    (every span; that triple fails every rule), and `renames`."""
    rename(folder, {**JUDGE_NAMES, "subject_reference": payload("rule name"), **(renames or {})})
    for path in folder.glob("samples_*.jsonl"):
        lines = path.read_text(encoding="utf-8").splitlines()
        path.write_text("".join(_hostile_triples(line) + "\n" for line in lines), encoding="utf-8")


def rename(folder: Path, renames: dict[str, str]) -> None:
    """Replace whole JSON strings (values and keys) in every JSON and JSONL file of `folder`."""
    for path in [*folder.glob("*.json"), *folder.glob("*.jsonl")]:
        text = path.read_text(encoding="utf-8")
        for old, new in renames.items():
            text = text.replace(json.dumps(old), json.dumps(new))
        path.write_text(text, encoding="utf-8")


def _hostile_triples(line: str) -> str:
    """A samples line whose first triple's relation and types are markup (failing every
    CheckRule, so the report lists their names), and whose extraction thought is markup (a
    reasoning model's thought, which the span browser shows)."""
    record = json.loads(line)
    record["steps"][0]["thinking"] = payload("thinking")
    if record["triples"]:
        record["triples"][0].update(
            subject_type=entity("subject type"),
            relation=entity("relation"),
            object_type=entity("object type"),
        )
        record["rule_checks"][0] = dict.fromkeys(record["rule_checks"][0], False)
        record["metrics"]["check_rules"][0] = 0  # its per-sample metric follows (a run's would)
    return json.dumps(record, ensure_ascii=False)
