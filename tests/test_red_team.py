"""Our own red team: bad input to every command, as a careless or hostile user gives it. Each case
asserts the exit code (1 bad input, 2 usage), a one-line message naming the cause, that it ends
within 30 s, and that no file that existed before changed. The prepared runs are built once."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import SHARED_10K, TESTS
from support.chat_server import (
    Reply,
    ScriptedServer,
    answer,
    closed_port,
    judge_answer,
    silent_server,
)
from support.runs import TRIPLES, candidate_file, panel_file, run_args, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.models import ModelSpec
from finreflect_eval.pipeline.evaluator import evaluate
from finreflect_eval.pipeline.judging import load_panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.scoring.failures import FailurePolicy

DISK_FULL = TESTS / "support" / "disk_full"
SUPPORT = {"PYTHONPATH": str(TESTS)}  # the scripted judges
JUDGES_MAY_FAIL = FailurePolicy(max_judge_failure_share=1)


@dataclass
class Context:
    """What the cases point at: prepared runs, files and servers under one folder."""

    root: Path
    urls: dict[str, str] = field(default_factory=dict)
    count: int = 0

    def fresh(self) -> Path:
        """A new, empty output folder for one case."""
        self.count += 1
        return self.root / "fresh" / str(self.count)

    def file(self, name: str, content: str | bytes) -> Path:
        path = self.root / "inputs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path

    @property
    def done(self) -> Path:
        return self.root / "done" / "out" / "candidate"

    @property
    def failed(self) -> Path:
        return self.root / "failed" / "out" / "m"

    @property
    def brokenjudge(self) -> Path:
        return self.root / "brokenjudge" / "out" / "candidate"


@pytest.fixture(scope="module")
def ctx(tmp_path_factory) -> Context:
    root = tmp_path_factory.mktemp("red_team")
    context = Context(root)
    (root / "done").mkdir()
    panel = panel_file(root / "done", "accepts_all", "accepts_all", "rejects_all")
    scripted_run(root / "done", "candidate", None, panel)  # a complete, scored run
    # A run whose extraction failed in transport (a server answering garbage), scored anyway.
    with ScriptedServer.running([Reply(body="<html>garbage</html>")]) as server:
        config = RunConfig(
            model=ModelSpec("m", "openai", {"base_url": server.url, "http_retries": 0}),
            tasks=["finreflect_smoke_single_pass"],
            dataset="sample",
            output_path=root / "failed" / "out",
            cache=None,
        )
        with pytest.raises(FinReflectError, match="failed in transport"):
            evaluate(config, load_panel(panel))
        _, results = evaluate(config, load_panel(panel), FailurePolicy(allow_failures=True))
        assert results.config.allow_failures
    context.file("panel.yaml", panel.read_text())
    broken = panel_file(root / "brokenjudge", "accepts_all", "accepts_all", "broken")
    context.file("panel-broken.yaml", broken.read_text())
    # A run scored although a judge failed every call (as --max-judge-failure-share 1 allows).
    scripted_run(root / "brokenjudge", "candidate", None, broken, policy=JUDGES_MAY_FAIL)
    return context


@pytest.fixture(scope="module")
def servers(ctx) -> dict[str, str]:
    """Loopback servers that misbehave: garbage, `content` as an object, never answering, an
    answer of 8 MiB (valid triples and JSON whitespace: a server that ignored max_tokens)."""
    object_content = {"choices": [{"message": {"content": {"triples": []}}}]}
    huge_answer = json.dumps(answer(json.dumps(TRIPLES) + " " * 8 * 2**20)).encode()
    with (
        ScriptedServer.running([Reply(body="<html>proxy login</html>")]) as garbage,
        ScriptedServer.running([Reply(body=object_content)]) as objects,
        ScriptedServer.running([Reply(status=500, body={"error": "down"})]) as failing,
        ScriptedServer.running([Reply(body=huge_answer)]) as huge,
        silent_server() as silent,
    ):
        yield {
            "closed": closed_port(),
            "garbage": garbage.url,
            "object": objects.url,
            "failing": failing.url,
            "huge": huge.url,
            "silent": silent,
        }


def openai_run(backend_url: str, *extra: str) -> Callable[[Context], list[str]]:
    def args(c: Context) -> list[str]:
        return [
            *("run", "--model", "m", "--backend", "openai"),
            *("--model-args", f"base_url={c.urls[backend_url]},http_retries=1,backoff=0.1"),
            *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample", "--limit", "2"),
            *("--judges", str(c.root / "inputs" / "panel.yaml"), "--no-cache"),
            *("--output-path", str(c.fresh()), *extra),
        ]

    return args


def scripted(
    *extra: str | Callable[[Context], str], command: str = "run"
) -> Callable[[Context], list[str]]:
    """A scripted-candidate command on the sample, with `extra` arguments (`{done}` etc.
    filled in)."""

    def args(c: Context) -> list[str]:
        given = [part(c) if callable(part) else fill(part, c) for part in extra]
        base = [
            *(command, "--model", "candidate", "--backend", "scripted"),
            *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample", "--limit", "1"),
            *("--output-path", str(c.fresh())),
        ]
        if "--model-args" not in given:
            base += ["--model-args", f"responses={candidate_file(c.root / 'inputs')}"]
        if command == "run" and "--judges" not in given:
            base += ["--judges", str(c.root / "inputs" / "panel.yaml")]
        return base + given

    return args


def raw(*parts: str | Callable[[Context], str]) -> Callable[[Context], list[str]]:
    return lambda c: [part(c) if callable(part) else fill(part, c) for part in parts]


def fill(text: str, c: Context) -> str:
    return text.format(root=c.root, done=c.done, failed=c.failed, fresh=c.fresh())


def inputs(name: str, content: str | bytes) -> Callable[[Context], str]:
    return lambda c: str(c.file(name, content))


def task_dir(yaml_text: str) -> Callable[[Context], str]:
    def make(c: Context) -> str:
        c.count += 1
        folder = c.root / "tasks" / str(c.count)
        folder.mkdir(parents=True)
        (folder / "bad.yaml").write_bytes(
            yaml_text if isinstance(yaml_text, bytes) else yaml_text.encode()
        )
        return str(folder)

    return make


def copy_of_done(change: Callable[[Path], None]) -> Callable[[Context], str]:
    """A copy of the complete run with one file broken by `change`."""

    def make(c: Context) -> str:
        c.count += 1
        folder = c.root / "copies" / str(c.count)
        folder.mkdir(parents=True)
        for path in c.done.iterdir():
            if path.is_file():
                (folder / path.name).write_bytes(path.read_bytes())
        change(folder)
        return str(folder)

    return make


def first(folder: Path, pattern: str) -> Path:
    return sorted(folder.glob(pattern))[0]


def break_manifest(folder: Path) -> None:
    first(folder, "manifest_*.json").write_text("{not json")


def break_samples(folder: Path) -> None:
    path = first(folder, "samples_*.jsonl")
    path.write_text(path.read_text() + '{"span_id": 3}\n')


def drop_a_span(folder: Path) -> None:
    path = first(folder, "samples_*.jsonl")
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))


def cut_mid_line(folder: Path) -> None:
    path = first(folder, "samples_*.jsonl")
    path.write_bytes(path.read_bytes()[:-200])


def repeat_a_span(folder: Path) -> None:
    path = first(folder, "samples_*.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:-1], lines[0]]))


def results_of_fewer_spans(folder: Path) -> None:
    path = first(folder, "results_*.json")
    data = json.loads(path.read_text())
    for row in data["results"].values():
        row["sample_len"] = row.get("sample_len", 0) - 1
    path.write_text(json.dumps(data))


def judge_panel(name: str, *judges: dict) -> Callable[[Context], str]:
    """A panel file of judges, each a scripted judge accepting everything unless its dict names
    another `backend` and `model`; the dict's other keys are model args."""
    panel = {"panel": "bad", "judges": []}
    for number, extra in enumerate(judges):
        args = {k: v for k, v in extra.items() if k not in ("backend", "model")}
        if "backend" not in extra:
            args = {"responses": "support.scripted_judges:accepts_all", **args}
        judge = {"name": f"j{number}", "model": "scripted", "backend": "scripted"}
        judge |= {k: v for k, v in extra.items() if k in ("backend", "model")}
        panel["judges"].append({**judge, "model_args": args})
    return inputs(name, yaml.safe_dump(panel))


def nan_score(data: dict) -> None:
    task = next(iter(data["results"]["results"]))
    data["results"]["results"][task]["faithfulness,none"] = float("nan")


def old_version(folder: Path) -> None:
    path = first(folder, "manifest_*.json")
    data = json.loads(path.read_text())
    data["format_version"] = 99
    path.write_text(json.dumps(data))


def bundle(c: Context, change: Callable[[dict], object] | None = None, run: str = "done") -> dict:
    folder = getattr(c, run)
    results = json.loads(first(folder, "results_*.json").read_text())
    manifest = json.loads(first(folder, "manifest_*.json").read_text())
    samples = {
        task: [json.loads(line) for line in first(folder, f"samples_{task}_*.jsonl").open()]
        for task in results["results"]
    }
    data = {"format_version": 2, "results": results, "manifest": manifest, "samples": samples}
    if change is not None:
        change(data)
    return data


def submission(
    name: str, change: Callable[[dict], object], run: str = "done"
) -> Callable[[Context], str]:
    return lambda c: str(c.file(name, json.dumps(bundle(c, change, run))))


def nested(depth: int) -> str:
    return '{"results": ' + "[" * depth + "]" * depth + "}"


def set_model_name(name: str) -> Callable[[dict], object]:
    return lambda data: data["results"]["config"].update(model_name=name)


# --- round two helpers: hostile run folders, credentials ---

SECRET = "PASSWORD-9f8e7d"  # a password in URLs below: it must appear in no output, no file


def with_password(url: str) -> str:
    return url.replace("http://", f"http://user:{SECRET}@")


def manifest_changed(change: Callable[[dict, Path], None]) -> Callable[[Path], None]:
    """Change a copied run's manifest (`change(data, folder)`), as a hostile sender could."""

    def apply(folder: Path) -> None:
        path = first(folder, "manifest_*.json")
        data = json.loads(path.read_text())
        change(data, folder)
        path.write_text(json.dumps(data))

    return apply


def run_id_escaping(data: dict, folder: Path) -> None:
    """A run id that climbs out of its folder: `results_r/../../../elsewhere/x` is
    `<root>/elsewhere/x_<panel>.json` once the folders it names exist (the sender ships them)."""
    data["run"] = "r/../../../elsewhere/x"
    (folder / "results_r").mkdir()
    for task in data["tasks"]:
        (folder / f"review_{task}_r").mkdir()
    (folder.parents[1] / "elsewhere").mkdir(exist_ok=True)


def samples_elsewhere(data: dict, folder: Path) -> None:
    """Samples named by a path into another run folder."""
    for info in data["tasks"].values():
        info["samples"] = f"../../done/out/candidate/{info['samples']}"


def format1(change: Callable[[dict, Path], None]) -> Callable[[Context], str]:
    """A run folder of format 1 (the test archive) with its manifest changed."""

    def make(c: Context) -> str:
        c.count += 1
        target = c.root / "format1" / str(c.count)
        with tarfile.open(TESTS / "fixtures" / "run_d167a05.tar.gz") as archive:
            archive.extractall(target, filter="data")
        manifest_changed(change)(target / "candidate")
        return str(target / "candidate")

    return make


def date_escaping(data: dict, folder: Path) -> None:
    data["date"] = f"{data['date']}/../../../elsewhere/x"
    (folder / f"manifest_{data['date'].split('/')[0]}").mkdir()
    (folder.parents[1] / "elsewhere").mkdir(exist_ok=True)


def linked(
    name: str, target: str, content: str = "keep me\npartial line"
) -> Callable[[Path], None]:
    """A run folder whose `name` (a glob; the lock or the score index if absent) is a link to
    `<root>/victims/<target>`, which holds `content` (a folder if `content` is None)."""

    def change(folder: Path) -> None:
        victim = folder.parents[1] / "victims" / f"{folder.name}-{target}"
        victim.parent.mkdir(exist_ok=True)
        if content is None:
            victim.mkdir()
            (victim / "precious.arrow").write_text("precious")
        else:
            victim.write_text(content)
        found = sorted(folder.glob(name))
        path = found[0] if found else folder / name
        path.unlink(missing_ok=True)
        path.symlink_to(victim)

    return change


def extracting(folder: Path) -> None:
    """The run marked unfinished (a resumed run rewrites its samples' last line)."""
    manifest_changed(lambda data, _: data.update(status="extracting"))(folder)


def nested_entry(c: Context) -> str:
    board = c.root / "boards" / str(c.fresh().name)
    nested = board / "submissions" / "acme__kg" / "x" / "y.json"
    nested.parent.mkdir(parents=True)
    nested.write_text("{}")
    return str(board)


def drop_judge_calls(judge: str) -> Callable[[dict], None]:
    """The judge's failed calls taken out of the samples (its abstentions kept)."""

    def change(data: dict) -> None:
        for records in data["samples"].values():
            for record in records:
                for panel, calls in record["judge_calls"].items():
                    record["judge_calls"][panel] = [c for c in calls if c["model"] != judge]

    return change


def local_task_paths(data: dict) -> None:
    """Task files recorded as an earlier version did: by the submitter's absolute paths."""
    for config in data["results"]["configs"].values():
        config.pop("files", None)
        config["schema"] = "/home/someone/finreflect-eval/tasks/schema.yaml"


def with_secret(data: dict) -> None:
    args = {"responses": "x.json", "base_url": with_password("http://127.0.0.1:1/v1")}
    data["results"]["config"]["model_args"] = args
    data["manifest"]["model"]["args"] = args


BOARD = "{root}/board"
# What a run that failed in transport keeps: its manifest and the samples of finished spans.
SAVED_WORK = r"^fresh/\d+/m/(manifest|samples)_"
# What a run stopped after its extraction keeps: the extraction's files and answers.
EXTRACTED_WORK = r"^fresh/\d+/(cache\.sqlite|candidate/(manifest_|samples_|\.score-index/))"


@dataclass(frozen=True)
class Case:
    id: str
    args: Callable[[Context], list[str]]
    code: int
    says: str  # a regular expression the one line must match
    disk_full: bool = False  # every file written into place fails with ENOSPC
    leaves: str = ""  # a regular expression: new files it may leave (completed work kept)
    secret: str = ""  # in no output and in no file written or changed


def base_yaml() -> str:
    from finreflect_eval._util.resources import tasks_dir

    return str(tasks_dir() / "finreflect" / "_base.yaml")


def task_yaml(body: str) -> Callable[[Context], str]:
    return task_dir(f"include: {base_yaml()}\ntask: t\n{body}")


CASES = [
    # --- tasks ---
    Case(
        "task-yaml-malformed",
        raw("tasks", "validate", "--include-path", task_dir("task: t\nmode: a: b\n")),
        1,
        r"not valid YAML",
    ),
    Case(
        "task-yaml-unknown-field",
        raw(
            "tasks",
            "validate",
            "--include-path",
            task_yaml("mode: single_pass\nmax_iteration: 2\n"),
        ),
        1,
        r"field 'max_iteration'",
    ),
    Case(
        "task-yaml-not-utf8",
        raw("tasks", "validate", "--include-path", task_dir(b"task: t\nmode: \xff\xfe\n")),
        1,
        r"bad\.yaml.*(UTF-8|utf-8)",
    ),
    Case(
        "task-yaml-a-list",
        raw("tasks", "validate", "--include-path", task_dir("- a\n- b\n")),
        1,
        r"bad\.yaml",
    ),
    Case(
        "task-yaml-bad-mode",
        raw("tasks", "validate", "--include-path", task_yaml("mode: sideways\n")),
        1,
        r"field 'mode'",
    ),
    Case(
        "task-missing-template",
        raw(
            "tasks",
            "validate",
            "--include-path",
            task_yaml("mode: single_pass\nprompts: {extract: nope.jinja}\n"),
        ),
        1,
        r"prompts\.extract",
    ),
    Case(
        "task-unknown",
        scripted("--tasks", "finreflect_nosuch"),
        1,
        r"unknown task, group or tag 'finreflect_nosuch'",
    ),
    Case(
        "include-path-missing",
        raw("tasks", "list", "--include-path", "{root}/nowhere"),
        1,
        r"nowhere",
    ),
    # --- datasets ---
    Case("dataset-missing", scripted("--dataset", "{root}/nowhere"), 1, r"nowhere"),
    Case(
        "dataset-empty-jsonl",
        scripted("--dataset", inputs("empty.jsonl", "")),
        1,
        r"empty\.jsonl': it has no rows",
    ),
    Case(
        "dataset-malformed-jsonl",
        scripted("--dataset", inputs("bad.jsonl", '{"span_id": "a", \n')),
        1,
        r"bad\.jsonl",
    ),
    Case(
        "dataset-rows-missing-fields",
        scripted("--dataset", inputs("rows.jsonl", '{"span_id": "a"}\n')),
        1,
        r"rows\.jsonl",
    ),
    Case(
        "dataset-garbage-parquet",
        scripted("--dataset", inputs("bad.parquet", b"PAR1 not really")),
        1,
        r"bad\.parquet",
    ),
    Case(
        "dataset-info-missing", raw("dataset", "info", "--dataset", "{root}/nowhere"), 1, r"nowhere"
    ),
    Case(
        "dataset-hub-offline",
        scripted("--dataset", "acme/no-such-dataset"),
        1,
        r"acme/no-such-dataset",
    ),
    Case("limit-zero", scripted("--limit", "0"), 2, r"--limit"),
    Case("limit-negative", scripted("--limit", "-3"), 2, r"--limit"),
    Case("limit-text", scripted("--limit", "many"), 2, r"--limit"),
    # --- filings ---
    Case(
        "filing-binary",
        raw(
            "dataset",
            "build",
            "/bin/ls",
            "--output",
            "{fresh}",
            "--ticker",
            "X",
            "--fiscal-year",
            "2020",
        ),
        1,
        r"not a text filing",
    ),
    Case(
        "filing-missing",
        raw("dataset", "build", "{root}/nope.txt", "--output", "{fresh}"),
        1,
        r"nope\.txt",
    ),
    Case(
        "filing-empty",
        raw(
            "dataset",
            "build",
            inputs("ACME_10-K-2024-01-01.txt", ""),
            "--output",
            "{fresh}",
            "--fiscal-year",
            "2024",
        ),
        1,
        r"no 10-K text",
    ),
    Case(
        "filing-latin1-noise",
        raw(
            "dataset",
            "build",
            inputs("ACME_10-K-2024-02-01.txt", bytes(range(128, 256)) * 50),
            "--output",
            "{fresh}",
            "--fiscal-year",
            "2024",
        ),
        1,
        r"not UTF-8",
    ),
    Case(
        "filing-no-ticker",
        raw(
            "dataset",
            "build",
            inputs("report.txt", "Item 1. Business\nWe sell.\n"),
            "--output",
            "{fresh}",
        ),
        1,
        r"--ticker|--fiscal-year",
    ),
    Case(
        "filing-max-tokens-zero",
        raw("dataset", "build", "{root}/x.txt", "--output", "{fresh}", "--max-tokens", "0"),
        2,
        r"--max-tokens",
    ),
    Case(
        "filing-onto-a-dataset",
        raw(
            "dataset",
            "build",
            str(SHARED_10K / "NVDA_10-K-2025-02-26.txt"),
            "--output",
            lambda c: str(c.root / "done_dataset"),
        ),
        1,
        r"already holds a dataset",
    ),
    Case(
        "filing-output-is-a-file",
        raw(
            "dataset",
            "build",
            str(SHARED_10K / "NVDA_10-K-2025-02-26.txt"),
            "--output",
            inputs("plain.txt", "x"),
        ),
        1,
        r"plain\.txt",
    ),
    # --- model and generation arguments ---
    Case(
        "backend-unknown",
        scripted("--backend", "hff"),
        1,
        r"unknown backend 'hff' \(did you mean 'hf'\?\)",
    ),
    Case(
        "model-arg-unknown",
        scripted("--model-args", "responses=x.json,bogus=1"),
        1,
        r"unknown model arg 'bogus'",
    ),
    Case("model-arg-not-key-value", scripted("--model-args", "responses"), 1, r"not key=value"),
    Case(
        "model-arg-type",
        raw(
            "run",
            "--model",
            "m",
            "--backend",
            "hf",
            "--model-args",
            "dtype=3",
            "--dataset",
            "sample",
            "--tasks",
            "finreflect_smoke",
            "--judges",
            "demo",
            "--output-path",
            "{fresh}",
        ),
        1,
        r"dtype=3 .*valid string",
    ),
    Case(
        "model-arg-bad-dtype",
        raw(
            "extract",
            "--model",
            "m",
            "--backend",
            "hf",
            "--model-args",
            "dtype=float17",
            "--dataset",
            "sample",
            "--tasks",
            "finreflect_smoke",
            "--output-path",
            "{fresh}",
        ),
        1,
        r"dtype 'float17'",
    ),
    Case(
        "model-arg-batch-zero",
        scripted("--model-args", "responses=x.json,batch_size=0"),
        1,
        r"batch_size",
    ),
    Case(
        "model-missing-folder",
        raw(
            "extract",
            "--model",
            "{root}/no-model",
            "--dataset",
            "sample",
            "--tasks",
            "finreflect_smoke",
            "--output-path",
            "{fresh}",
        ),
        1,
        r"cannot load model",
    ),
    Case(
        "vllm-structured-auto",
        raw(
            "extract",
            "--model",
            "m",
            "--backend",
            "vllm",
            "--model-args",
            "structured_backend=auto",
            "--dataset",
            "sample",
            "--tasks",
            "finreflect_smoke",
            "--output-path",
            "{fresh}",
        ),
        1,
        r"structured_backend='auto'",
    ),
    Case(
        "openai-base-url",
        raw(
            "extract",
            "--model",
            "m",
            "--backend",
            "openai",
            "--model-args",
            "base_url=localhost:8000",
            "--dataset",
            "sample",
            "--tasks",
            "finreflect_smoke",
            "--output-path",
            "{fresh}",
        ),
        1,
        r"must start with http",
    ),
    Case(
        "gen-temperature-nan",
        scripted("--gen-kwargs", "temperature=float('nan')"),
        1,
        r"temperature",
    ),
    Case("gen-temperature-inf", scripted("--gen-kwargs", "temperature=1e999"), 1, r"temperature"),
    Case(
        "gen-max-tokens-negative", scripted("--gen-kwargs", "max_gen_toks=-5"), 1, r"max_gen_toks"
    ),
    Case("gen-max-tokens-float", scripted("--gen-kwargs", "max_gen_toks=1e9"), 1, r"max_gen_toks"),
    Case("gen-unknown", scripted("--gen-kwargs", "top_q=0.5"), 1, r"top_q"),
    Case("seed-negative", scripted("--seed", "-1"), 1, r"seed"),
    # --- panels ---
    Case("panel-unknown", scripted("--judges", "nosuch"), 1, r"nosuch"),
    Case("panel-malformed", scripted("--judges", inputs("p.yaml", "panel: [x\n")), 1, r"p\.yaml"),
    Case(
        "panel-bad-judge-arg",
        scripted(
            "--judges",
            inputs(
                "q.yaml",
                "panel: q\njudges:\n"
                + "".join(
                    f"  - {{name: j{i}, model: m, backend: scripted, model_args: {{bogus: 1}}}}\n"
                    for i in range(3)
                ),
            ),
        ),
        1,
        r"judge j0: unknown model arg 'bogus'",
    ),
    Case(
        "judge-endpoint-unknown",
        scripted("--judges", "demo", "--judge-endpoints", "nobody=http://127.0.0.1:1/v1"),
        1,
        r"nobody",
    ),
    Case("shard-malformed", scripted("--shard", "3/2"), 1, r"--shard must be i/N"),
    # --- servers ---
    Case(
        "server-closed-port", openai_run("closed"), 1, r"cannot reach the endpoint .*ConnectError"
    ),
    Case("server-never-answers", openai_run("silent"), 1, r"cannot reach the endpoint .*Timeout"),
    Case(
        "server-garbage",
        openai_run("garbage"),
        1,
        r"failed in transport .*malformed response",
        leaves=SAVED_WORK,
    ),
    Case(
        "server-content-object",
        openai_run("object"),
        1,
        r"failed in transport .*malformed response",
        leaves=SAVED_WORK,
    ),
    Case(
        "server-500",
        openai_run("failing"),
        1,
        r"failed in transport .*HTTP 500",
        leaves=SAVED_WORK,
    ),
    # --- run folders ---
    Case("score-missing-folder", raw("score", "--samples", "{root}/nowhere"), 1, r"nowhere"),
    Case(
        "score-manifest-not-json",
        lambda c: ["score", "--samples", copy_of_done(break_manifest)(c)],
        1,
        r"manifest_.*not JSON",
    ),
    Case(
        "score-broken-sample-line",
        lambda c: ["score", "--samples", copy_of_done(break_samples)(c)],
        1,
        r"samples_.*line \d+",
    ),
    Case(
        "score-other-format-version",
        lambda c: ["score", "--samples", copy_of_done(old_version)(c)],
        1,
        r"format version 99",
    ),
    # A finished run's parts that disagree: refused by every command that reads them.
    Case(
        "score-samples-lost-a-span",
        lambda c: ["score", "--samples", copy_of_done(drop_a_span)(c)],
        1,
        r"samples_.*holds \d+ of the \d+ spans the manifest lists \(doc_id \d+ is missing\)",
    ),
    Case(
        "score-samples-span-twice",
        lambda c: ["score", "--samples", copy_of_done(repeat_a_span)(c)],
        1,
        r"samples_.*doc_id 0 .* is in it twice",
    ),
    Case(
        "judge-samples-lost-a-span",
        lambda c: [
            *("judge", "--samples", copy_of_done(drop_a_span)(c)),
            *("--judges", str(c.root / "inputs" / "panel.yaml")),
        ],
        1,
        r"samples_.*holds \d+ of the \d+ spans",
    ),
    Case(
        "view-samples-cut-mid-line",
        lambda c: ["view", copy_of_done(cut_mid_line)(c), "--output", str(c.fresh())],
        1,
        r"samples_.*holds \d+ of the \d+ spans the manifest lists",
    ),
    Case(
        "view-results-of-other-span-counts",
        lambda c: ["view", copy_of_done(results_of_fewer_spans)(c), "--output", str(c.fresh())],
        1,
        r"results_.*scored \d+ spans, but its samples hold \d+",
    ),
    Case(
        "submit-samples-lost-a-span",
        lambda c: ["submit", copy_of_done(drop_a_span)(c), "--leaderboard", str(c.fresh())],
        1,
        r"holds \d+ of the \d+ spans",
    ),
    # What can be known before the first model call is checked before it, naming the judge
    # and the panel's file: nothing is extracted, nothing written.
    Case(
        "panel-judge-batch-size-zero",
        scripted("--judges", judge_panel("bs0.yaml", {}, {"batch_size": 0})),
        1,
        r"panel 'bad' \(.*bs0\.yaml\), judge j1: model arg batch_size=0 .*greater than or equal",
    ),
    Case(
        "panel-judge-data-parallel-zero",
        scripted("--judges", judge_panel("dp0.yaml", {"data_parallel_size": 0}, {})),
        1,
        r"dp0\.yaml\), judge j0: model arg data_parallel_size=0 .*greater than or equal to 1",
    ),
    Case(
        "panel-judge-replica-timeout-negative",
        scripted("--judges", judge_panel("rt.yaml", {}, {}, {"replica_timeout": -1})),
        1,
        r"rt\.yaml\), judge j2: model arg replica_timeout=-1 .*greater than 0",
    ),
    Case(
        "panel-judge-infinite-timeout",
        scripted(
            "--judges",
            judge_panel("inf.yaml", {}, {"model": "m", "backend": "openai", "timeout": math.inf}),
        ),
        1,
        r"inf\.yaml\), judge j1: model arg timeout=inf .*finite number",
    ),
    Case(
        "judge-endpoint-without-scheme",
        scripted("--judge-endpoints", "judge-0=localhost:8000/v1"),
        1,
        r"judge judge-0: base_url 'localhost:8000/v1' must start with http:// or https://",
    ),
    Case(
        "panel-of-one-judge",
        scripted("--judges", judge_panel("one.yaml", {})),
        1,
        r"panel 'bad' \(.*one\.yaml\): 1 judge, but an item is scored on two valid votes",
    ),
    Case(
        "judge-command-panel-of-one-judge",
        raw("judge", "--samples", "{done}", "--judges", judge_panel("one-judge.yaml", {})),
        1,
        r"one-judge\.yaml\): 1 judge.*at least two judges",
    ),
    Case(
        "score-with-failures",
        raw("score", "--samples", "{failed}"),
        1,
        r"failed in transport.*--allow-failures",
    ),
    Case(
        "judge-unknown-panel",
        raw("judge", "--samples", "{done}", "--judges", "nosuch"),
        1,
        r"nosuch",
    ),
    Case("upgrade-not-a-run", raw("upgrade", "{root}/inputs"), 1, r"inputs"),
    # --- submissions ---
    Case(
        "submit-not-json",
        raw("submit", inputs("s.json", "{{{"), "--leaderboard", BOARD),
        1,
        r"not JSON",
    ),
    Case(
        "submit-too-large",
        raw("submit", inputs("big.json", b" " * (64 * 2**20 + 1)), "--leaderboard", BOARD),
        1,
        r"MiB is more than the 64 MiB",
    ),
    Case(
        "submit-deeply-nested",
        raw("submit", inputs("deep.json", nested(100_000)), "--leaderboard", BOARD),
        1,
        r"nested more than 64 levels",
    ),
    Case(
        "submit-unknown-field",
        raw(
            "submit",
            submission("junk.json", lambda d: d["results"].update(junk="x" * 100)),
            "--leaderboard",
            BOARD,
        ),
        1,
        r"junk",
    ),
    Case(
        "submit-bidi-name",
        raw(
            "submit",
            submission("bidi.json", set_model_name("acme/kg\u202e7b")),
            "--leaderboard",
            BOARD,
        ),
        1,
        r"model name .* is not a Hub id",
    ),
    Case(
        "submit-path-name",
        raw("submit", submission("path.json", set_model_name("../../etc")), "--leaderboard", BOARD),
        1,
        r"model name .* is not a Hub id",
    ),
    Case(
        "submit-limited-run",
        raw(
            "submit",
            submission("limit.json", lambda d: d["results"]["dataset"].update(limit=1)),
            "--leaderboard",
            BOARD,
        ),
        1,
        r"--limit 1 run",
    ),
    Case(
        "submit-allowed-failures",
        raw(
            "submit",
            submission(
                "allowed.json", lambda d: d["results"]["config"].update(allow_failures=True)
            ),
            "--leaderboard",
            BOARD,
        ),
        1,
        r"--allow-failures",
    ),
    Case(
        "submit-run-with-failures",
        raw("submit", "{failed}", "--leaderboard", BOARD),
        1,
        r"--allow-failures",
    ),
    Case(
        "submit-hidden-failures",
        raw(
            "submit",
            submission(
                "hidden.json",
                lambda d: d["results"]["config"].update(allow_failures=False),
                run="failed",
            ),
            "--leaderboard",
            BOARD,
        ),
        1,
        r"refused: task .* failed in transport",
    ),
    Case(
        "submit-tampered-score",
        raw(
            "submit",
            submission(
                "tampered.json",
                lambda d: d["results"]["results"]["finreflect_smoke_single_pass"].update(
                    {"faithfulness,none": 1.0}
                ),
            ),
            "--leaderboard",
            BOARD,
        ),
        1,
        r"refused: .*faithfulness",
    ),
    # --- usage ---
    Case(
        "disk-full-on-score",
        raw("score", "--samples", "{done}"),
        1,
        r"no space left on the device.*nothing was lost",
        disk_full=True,
    ),
    Case(
        "disk-full-on-run",
        scripted(),
        1,
        r"no space left on the device",
        disk_full=True,
        leaves=r"^fresh/\d+/cache\.sqlite$",  # the answers received: a rerun asks none again
    ),
    Case("unknown-command", raw("runn"), 2, r"invalid choice"),
    Case(
        "unknown-flag",
        raw("run", "--model", "x", "--modle", "y"),
        2,
        r"unrecognized argument --modle \(did you mean --model\?\)",
    ),
    Case(
        "unknown-flag-lm-eval-spelling",
        raw("run", "--model", "x", "--model_argz", "a=1"),
        2,
        r"unrecognized argument --model_argz \(did you mean --model_args\?\)",
    ),
    Case("limit-fraction-above-one", scripted("--limit", "1.5"), 2, r"a fraction between 0 and 1"),
    Case(
        "lm-eval-model-without-pretrained",
        raw("--model", "hf", "--tasks", "finreflect_smoke"),
        1,
        r"--model hf names a backend: give the model as --model_args pretrained=ORG/NAME",
    ),
    Case(
        "hub-log-args-unknown",
        scripted("--hf_hub_log_args", "push_everything=True"),
        1,
        r"--hf_hub_log_args: field 'push_everything'",
    ),
    # --- round two: secrets, run files as input, judge failures (issue 23) ---
    Case(
        "secret-in-url-of-a-closed-port",
        raw(
            *("extract", "--model", "m", "--backend", "openai", "--model-args"),
            lambda c: f"base_url={with_password(c.urls['closed'])}",
            *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample", "--limit", "1"),
            *("--output-path", "{fresh}", "--verbosity", "DEBUG"),
        ),
        1,
        r"cannot reach the endpoint http://127\.0\.0\.1:\d+/v1: ConnectError",
        secret=SECRET,
    ),
    Case(
        "secret-in-url-of-a-failing-server",
        lambda c: [
            arg.replace("base_url=http://", f"base_url=http://user:{SECRET}@")
            for arg in openai_run("failing")(c)
        ],
        1,
        r"failed in transport .*HTTP 500",
        leaves=SAVED_WORK,
        secret=SECRET,
    ),
    Case(
        "secret-in-judge-endpoint",
        scripted(
            "--judge-endpoints",
            lambda c: f"judge-0={with_password(c.urls['closed'])}",
            "--verbosity",
            "DEBUG",
        ),
        1,  # before any extraction: the judge's server does not answer now
        r"judge judge-0: no answer at http://\*\*\*@127\.0\.0\.1:\d+/v1/models .*extract now and",
        secret=SECRET,
    ),
    Case(
        "submit-a-nan-score",
        raw("submit", submission("nan.json", nan_score), "--leaderboard", BOARD),
        1,
        r"nan\.json: results\.results\.\w+\.faithfulness,none is not a number \(NaN",
    ),
    # A name the Hub cannot take is a typo to fix, never "check the network".
    Case(
        "view-push-malformed-repo-id",
        raw("view", "{done}", "--output", "{fresh}", "--push", "my space"),
        2,
        r"--push: 'my space' is not a Hub repo id \(org/name\)",
    ),
    Case(
        "dataset-push-malformed-repo-id",
        raw("dataset", "push", "{root}/done_dataset", "--repo-id", "org/name/extra"),
        2,
        r"--repo-id: 'org/name/extra' is not a Hub repo id",
    ),
    Case(
        "hub-log-malformed-org",
        scripted("--hf_hub_log_args", "hub_results_org=my org,push_results_to_hub=True"),
        1,
        r"--hf_hub_log_args: 'my org/.*' is not a Hub repo id",
    ),
    Case(
        "submit-a-secret",
        raw("submit", submission("secret.json", with_secret), "--leaderboard", BOARD),
        1,
        r"results\.config\.model_args\.base_url holds a secret",
    ),
    Case(
        "submit-task-files-by-local-path",
        raw(
            "submit",
            submission("paths.json", local_task_paths),
            "--leaderboard",
            BOARD,
        ),
        1,
        r"configs\.finreflect_smoke_single_pass records its task files by local path",
    ),
    Case(
        "score-run-id-climbing-out",
        lambda c: ["score", "--samples", copy_of_done(manifest_changed(run_id_escaping))(c)],
        1,
        r"manifest_.*field 'run'",
    ),
    Case(
        "score-samples-of-another-folder",
        lambda c: ["score", "--samples", copy_of_done(manifest_changed(samples_elsewhere))(c)],
        1,
        r"manifest_.*field 'tasks\.finreflect_smoke_single_pass\.samples'",
    ),
    Case(
        "score-run-not-a-run-id",
        lambda c: [
            "score",
            "--samples",
            copy_of_done(manifest_changed(lambda data, _: data.update(run="yesterday")))(c),
        ],
        1,
        r"manifest_.*field 'run'",
    ),
    Case(
        "score-run-of-another-file",
        lambda c: [
            "score",
            "--samples",
            copy_of_done(
                manifest_changed(lambda data, _: data.update(run="2020-01-01T00-00-00-abcd"))
            )(c),
        ],
        1,
        r"field 'run': 2020-01-01T00-00-00-abcd is not the run of its name",
    ),
    Case(
        "upgrade-date-climbing-out",
        lambda c: ["upgrade", format1(date_escaping)(c)],
        1,
        r"manifest_.*field 'date'",
    ),
    Case(
        "upgrade-without-samples",
        lambda c: [
            "upgrade",
            format1(lambda d, _: d["tasks"]["finreflect_single_pass"].pop("samples"))(c),
        ],
        1,
        r"field 'tasks\.finreflect_single_pass\.samples'",
    ),
    Case(
        "upgrade-tasks-a-list",
        lambda c: ["upgrade", format1(lambda d, _: d.update(tasks=list(d["tasks"])))(c)],
        1,
        r"field 'tasks'",
    ),
    Case(
        "submit-run-id-with-a-slash",
        raw(
            "submit",
            submission(
                "slash.json",
                lambda d: d["results"].update(run=d["results"]["run"] + "/x"),
            ),
            "--leaderboard",
            BOARD,
        ),
        1,
        r"field 'results\.run'",
    ),
    Case(
        "leaderboard-nested-entry",
        raw("leaderboard", "build", "--leaderboard", nested_entry),
        1,
        r"x/y\.json: an entry must be submissions/<name>/<run>\.json",
    ),
    Case(
        "run-with-a-judge-failing-every-call",
        scripted("--judges", "{root}/inputs/panel-broken.yaml"),
        1,
        r"judge judge-2 failed 4 of its 4 calls \(more than --max-judge-failure-share 20%\)",
        leaves=EXTRACTED_WORK,
    ),
    Case(
        "submit-a-run-whose-judge-failed",
        raw("submit", lambda c: str(c.brokenjudge), "--leaderboard", BOARD),
        1,
        r"refused: task .*judge judge-2 abstained on \d+ of its \d+ items",
    ),
    Case(
        "submit-a-failed-judge-without-its-failed-calls",
        raw(
            "submit",
            submission("hidden-judge.json", drop_judge_calls("judge-2"), run="brokenjudge"),
            "--leaderboard",
            BOARD,
        ),
        1,
        # Its votes without their calls, and the abstentions they still say.
        r"\(judge-2\): votes without the judge call that cast them\n.*judge judge-2 abstained "
        r"on \d+ of its \d+ items",
    ),
    Case(
        "judge-through-a-linked-lock",
        lambda c: [
            "judge",
            "--samples",
            copy_of_done(linked(".finreflect-eval.lock", "lock"))(c),
            "--judges",
            str(c.root / "inputs" / "panel.yaml"),
        ],
        1,
        r"\.finreflect-eval\.lock is a symbolic link",
    ),
    Case(
        "judge-through-a-linked-score-index",
        lambda c: [
            "judge",
            "--samples",
            copy_of_done(linked(".score-index", "index", content=None))(c),
            "--judges",
            str(c.root / "inputs" / "panel.yaml"),
        ],
        1,
        r"\.score-index is a symbolic link",
    ),
    Case(
        "score-linked-samples",
        lambda c: [
            "score",
            "--samples",
            copy_of_done(lambda f: (linked("samples_*.jsonl", "samples")(f), extracting(f)))(c),
        ],
        1,
        r"samples_.*\.jsonl is a symbolic link",
    ),
    Case(
        "secret-with-an-at-in-the-password",
        raw(
            *("extract", "--model", "m", "--backend", "openai", "--model-args"),
            lambda c: f"base_url={c.urls['closed'].replace('http://', f'http://u:p@{SECRET}@')}",
            *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample", "--limit", "1"),
            *("--output-path", "{fresh}"),
        ),
        1,
        r"cannot reach the endpoint http://127\.0\.0\.1:\d+/v1",
        secret=SECRET,
    ),
    Case(
        "secret-in-malformed-json-model-args",
        scripted("--model-args", lambda c: json.dumps({"api_key": SECRET})[:-1] + ",}"),
        1,
        r"--model-args: not a JSON object",
        secret=SECRET,
    ),
    Case(
        "secret-cut-by-a-comma",
        raw(
            *("extract", "--model", "m", "--backend", "openai", "--model-args"),
            f"base_url=http://u:pa,ss{SECRET}@127.0.0.1:1/v1",
            *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample"),
            *("--output-path", "{fresh}"),
        ),
        1,
        r"item '\*\*\*@127\.0\.0\.1:1/v1' is not key=value",
        secret=SECRET,
    ),
    Case(
        "task-name-not-a-file-name",
        raw(
            *("tasks", "validate", "--include-path"),
            lambda c: task_dir(f"include: {base_yaml()}\ntask: 'my smoke+1'\nmode: single_pass\n")(
                c
            ),
        ),
        1,
        r"field 'task'",
    ),
    # --- round two: file modes, answer sizes, duplicate keys (issue 23) ---
    Case(
        "model-args-key-twice",
        raw(
            *("run", "--model", "candidate", "--backend", "scripted", "-a"),
            "responses={root}/inputs/candidate.json,responses={root}/inputs/./candidate.json",
            *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample", "--limit", "1"),
            *("--judges", "{root}/inputs/panel.yaml", "--output-path", "{fresh}"),
        ),
        1,
        r"error: -a: key 'responses' given twice \('.*candidate\.json' and '.*/\./candidate",
    ),
    Case(
        "model-args-json-key-twice",
        scripted("--model-args", '{{"responses": "{root}/inputs/candidate.json", "responses": 1}}'),
        1,
        r"error: --model-args: key 'responses' given twice",
    ),
    Case(
        "model-args-repeated-flag-differs",
        raw(
            *("run", "--model", "candidate", "--backend", "scripted"),
            *("--model_args", "responses={root}/inputs/candidate.json,batch_size=4"),
            *("--model_args", "batch_size=2"),
            *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample", "--limit", "1"),
            *("--judges", "{root}/inputs/panel.yaml", "--output-path", "{fresh}"),
        ),
        1,
        r"error: --model_args: key 'batch_size' given twice \(4 and 2\)",
    ),
    Case(
        "gen-kwargs-key-twice",
        scripted("--gen_kwargs", "temperature=0,temperature=1"),
        1,
        r"error: --gen_kwargs: key 'temperature' given twice \(0 and 1\)",
    ),
    Case(
        "gen-kwargs-not-key-value",
        scripted("--gen_kwargs", "temperature"),
        1,
        r"error: --gen_kwargs item 'temperature' is not key=value",
    ),
    Case(
        "hub-log-args-not-key-value",
        scripted("--hf_hub_log_args", "="),
        1,
        r"error: --hf_hub_log_args item '=' is not key=value",
    ),
    Case(
        "hub-log-args-key-twice",
        scripted("--hf_hub_log_args", "push_results_to_hub=True,push_results_to_hub=False"),
        1,
        r"error: --hf_hub_log_args: key 'push_results_to_hub' given twice \(True and False\)",
    ),
    Case(
        "judge-endpoints-key-twice",
        scripted(
            *("--judges", "{root}/inputs/panel.yaml", "--judge-endpoints"),
            "judge-0=http://127.0.0.1:1/v1,judge-0=http://127.0.0.1:2/v1",
        ),
        1,
        r"error: --judge-endpoints: key 'judge-0' given twice",
    ),
    Case(
        "task-yaml-key-twice",
        raw(
            *("tasks", "validate", "--include-path"),
            task_yaml("mode: single_pass\nmax_triples: 5\nmax_triples: 50\n"),
        ),
        1,
        r"bad\.yaml: not valid YAML \(line 5\): key 'max_triples' given twice \(first on line 4\)",
    ),
    Case(
        "panel-yaml-key-twice",
        scripted(
            "--judges",
            lambda c: str(
                c.file("twice.yaml", "panel: first\n" + (c.root / "inputs/panel.yaml").read_text())
            ),
        ),
        1,
        r"twice\.yaml: not valid YAML \(line \d+\): key 'panel' given twice \(first on line 1\)",
    ),
    Case(
        "batch-size-auto-not-a-number",
        scripted("--batch_size", "auto:x"),
        2,
        r"--batch-size/-b: must be N, auto or auto:N \(N ≥ 1\), got auto:x",
    ),
    Case(
        "batch-size-auto-zero",
        scripted("--batch_size", "auto:0"),
        2,
        r"--batch-size/-b: must be N, auto or auto:N \(N ≥ 1\), got auto:0",
    ),
    Case(
        "batch-size-zero",
        scripted("--batch_size", "0"),
        2,
        r"--batch-size/-b: must be N, auto or auto:N \(N ≥ 1\), got 0",
    ),
    Case(
        "batch-size-negative",
        scripted("--batch_size", "-1"),
        2,
        r"--batch-size/-b: must be N, auto or auto:N \(N ≥ 1\), got -1",
    ),
    Case(
        "server-huge-answer",
        openai_run("huge"),
        1,
        r"failed in transport .*answer larger than the limit of 1,081,344 bytes \(max_tokens 512\)",
        leaves=SAVED_WORK,
    ),
    # --- round two: dataset build writes only what it owns (issue 23) ---
    Case(
        "filing-onto-a-users-readme",
        raw(
            "dataset",
            "build",
            inputs("NVDA_10-K-2025-02-26.md", "## Item 7. MD&A\n\nRevenue grew.\n"),
            "--output",
            lambda c: str(c.file("users_readme/README.md", "# My project\n").parent),
        ),
        1,
        r"users_readme holds README\.md, which finreflect-eval did not write",
    ),
    Case(
        "filing-replace-onto-a-users-readme",
        raw(
            "dataset",
            "build",
            inputs("NVDA_10-K-2025-02-26.md", "## Item 7. MD&A\n\nRevenue grew.\n"),
            "--output",
            lambda c: str(c.file("replace_readme/README.md", "# My project\n").parent),
            "--replace",
        ),
        1,
        r"replace_readme holds README\.md, which finreflect-eval did not write",
    ),
    Case(
        "filing-onto-a-project-folder-as-dot",
        raw(
            "dataset",
            "build",
            inputs("NVDA_10-K-2025-02-26.md", "## Item 7. MD&A\n\nRevenue grew.\n"),
            "--output",
            lambda c: str(c.file("project/src/app.py", "print('hi')\n").parents[1]) + "/.",
        ),
        1,
        r"project holds src/app\.py, which finreflect-eval did not write",
    ),
    Case(
        "filing-replace-onto-a-project-folder-as-dot",
        raw(
            "dataset",
            "build",
            inputs("NVDA_10-K-2025-02-26.md", "## Item 7. MD&A\n\nRevenue grew.\n"),
            "--output",
            lambda c: str(c.file("replace_project/pyproject.toml", "[project]\n").parent) + "/.",
            "--replace",
        ),
        1,
        r"replace_project holds pyproject\.toml, which finreflect-eval did not write",
    ),
    Case(
        "filing-replace-onto-a-dataset-with-notes",
        raw(
            "dataset",
            "build",
            inputs("NVDA_10-K-2025-02-26.md", "## Item 7. MD&A\n\nRevenue grew.\n"),
            "--output",
            lambda c: str(
                [
                    c.file(
                        "noted/README.md",  # a card as dataset build writes it
                        "---\nconfigs:\n- config_name: spans\n  data_files:\n"
                        "  - split: test\n    path: spans/test-00000-of-00001.parquet\n---\n",
                    ),
                    c.file("noted/spans/test-00000-of-00001.parquet", b"an earlier build"),
                    c.file("noted/notes.txt", "my notes on this build\n"),
                ][0].parent
            ),
            "--replace",
        ),
        1,
        r"noted holds notes\.txt, which finreflect-eval did not write",
    ),
    Case(
        "filing-replace-onto-a-users-parquet",
        raw(
            "dataset",
            "build",
            inputs("NVDA_10-K-2025-02-26.md", "## Item 7. MD&A\n\nRevenue grew.\n"),
            "--output",
            lambda c: str(
                [
                    c.file(
                        "own_parquet/README.md",  # a card as dataset build writes it
                        "---\nconfigs:\n- config_name: spans\n  data_files:\n"
                        "  - split: test\n    path: spans/test-00000-of-00001.parquet\n---\n",
                    ),
                    c.file("own_parquet/spans/mine.parquet", b"the user's table"),
                ][0].parent
            ),
            "--replace",
        ),
        1,
        r"own_parquet holds spans/mine\.parquet, which finreflect-eval did not write",
    ),
]


def snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` (the fresh output folders included) with its hash and mode."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        + oct(path.stat().st_mode)
        for path in root.rglob("*")
        if path.is_file() and path.name != ".finreflect-eval.lock"
    }


@pytest.fixture(scope="module")
def prepared(ctx, servers) -> Context:
    ctx.urls = servers
    done_dataset = ctx.root / "done_dataset" / "spans"
    done_dataset.mkdir(parents=True)
    (done_dataset / "test-00000-of-00001.parquet").write_bytes(b"an earlier dataset")
    ctx.file("candidate.json", json.dumps([json.dumps(TRIPLES)]))
    return ctx


def test_there_are_at_least_fifty_cases():
    assert len(CASES) >= 50 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_line_and_changes_nothing(case, prepared, cli):
    if "filing" in case.id and not SHARED_10K.is_dir():
        pytest.fail(f"real 10-K text not found in {SHARED_10K}")
    args = case.args(prepared)  # (writes the case's input files)
    before = snapshot(prepared.root)
    started = time.monotonic()
    paths = [TESTS, *([DISK_FULL] if case.disk_full else [])]
    result = cli(*args, env={"PYTHONPATH": ":".join(map(str, paths))})
    elapsed = time.monotonic() - started
    lines = result.stderr.rstrip().splitlines()
    errors = [index for index, line in enumerate(lines) if "error:" in line]
    print(f"\nRED-TEAM | {case.id} | {result.returncode} | {lines[errors[-1]] if errors else ''} |")
    assert result.returncode == case.code, result.stderr[-2000:]
    assert len(errors) == 1, result.stderr[-2000:]
    # The last thing printed: the error's line, then (a refused submission) a line per reason.
    message = lines[errors[0] :]
    assert all(line.startswith("- ") for line in message[1:]), result.stderr[-2000:]
    assert re.search(case.says, "\n".join(message)), message
    assert elapsed < 30
    after = snapshot(prepared.root)
    assert {path: after.get(path) for path in before} == before
    new = sorted(set(after) - set(before))
    assert [path for path in new if not (case.leaves and re.search(case.leaves, path))] == []
    if case.secret:
        assert case.secret not in result.stdout + result.stderr
        written = [path for path in after if after[path] != before.get(path)]
        assert [
            p for p in written if case.secret.encode() in (prepared.root / p).read_bytes()
        ] == []


def test_a_refused_run_leaves_no_folder_behind(tmp_path, cli):
    """The run folder is made when the run starts; refused before its first file (here: the
    candidate's server does not answer), it is removed again, with the folders made for it."""
    context = Context(tmp_path, urls={"closed": closed_port()})
    context.file("panel.yaml", panel_file(tmp_path, "accepts_all", "rejects_all").read_text())
    args = openai_run("closed")(context)
    result = cli(*args, env=SUPPORT)
    assert result.returncode == 1 and "cannot reach the endpoint" in result.stderr
    output = Path(args[args.index("--output-path") + 1])
    assert not output.parent.exists() and tmp_path.exists()  # (fresh/1 and fresh: made for it)


def test_two_runs_into_one_folder_never_mix(tmp_path):
    """Two `run`s started together into one output folder: the second is refused at once while
    the first writes, and the first run's files stay whole."""
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    slow = [Reply(delay=0.3, body=lambda body: answer(json.dumps(TRIPLES)))]
    with ScriptedServer.running(slow) as server:
        command = [
            *(sys.executable, "-m", "finreflect_eval", "run", "--model", "m"),
            *("--backend", "openai", "--model-args", f"base_url={server.url}"),
            *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample", "--limit", "4"),
            *("--judges", str(panel), "--output-path", str(tmp_path / "out")),
        ]
        env = {**os.environ, "PYTHONPATH": str(TESTS), "HF_HUB_OFFLINE": "1"}
        first_run = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        lock = tmp_path / "out" / "m" / ".finreflect-eval.lock"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the first run holds the folder
            if lock.exists() and lock.read_text() == f"pid {first_run.pid}":
                break
            time.sleep(0.05)
        second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        _, first_err = first_run.communicate(timeout=300)
    assert first_run.returncode == 0, first_err[-2000:]
    assert second.returncode == 1, second.stderr[-2000:]
    assert "is being written by another finreflect-eval" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    folder = tmp_path / "out" / "m"
    (manifest,) = folder.glob("manifest_*.json")
    (results,) = folder.glob("results_*.json")
    run = json.loads(manifest.read_text())["run"]
    assert json.loads(results.read_text())["run"] == run
    (samples,) = folder.glob("samples_*.jsonl")
    assert len(samples.read_text().splitlines()) == 4
    # Once the first has finished, the same command continues (here: finds) its run.
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]


def test_credentials_are_never_written_or_shown(tmp_path, cli):
    """A password in `--model-args base_url` and in `--judge-endpoints`, an API key in
    $OPENAI_API_KEY, a Hub token in $HF_TOKEN and in `--hf_hub_log_args`: the run uses them and
    succeeds, and none is in its output (at DEBUG), in any file it writes, or in the leaderboard
    entry `submit` stores."""
    secrets = {
        "password": SECRET,
        "key": "sk-test-4a5b6c",
        "token": "hf_test7d8e9f",
        "hub": "hf_0a1b2c",
    }

    def reply(body: dict) -> dict:
        if "verdict" in json.dumps(body["response_format"]["json_schema"]["schema"]):
            return judge_answer(body)
        return answer(json.dumps(TRIPLES))

    panel = panel_file(tmp_path / "inputs", "accepts_all", "accepts_all", "rejects_all")
    output = tmp_path / "out"
    with ScriptedServer.running([Reply(body=reply)]) as server:
        result = cli(
            *("run", "--model", "m", "--backend", "openai"),
            *("--model-args", f"base_url={with_password(server.url)}"),
            *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample"),
            *("--judges", str(panel), "--judge-endpoints", f"judge-0={with_password(server.url)}"),
            *("--hf_hub_log_args", f"token={secrets['hub']}"),
            *("--output-path", str(output), "--verbosity", "DEBUG"),
            env={
                "OPENAI_API_KEY": secrets["key"],
                "HF_TOKEN": secrets["token"],
                "PYTHONPATH": str(TESTS),  # the scripted judges
            },
        )
        assert result.returncode == 0, result.stderr[-3000:]
        sent = {request["headers"].get("authorization") for request in server.requests}
    basic = "Basic " + base64.b64encode(f"user:{SECRET}".encode()).decode()
    assert sent == {basic}  # the credentials were used (and nothing else was sent)
    submitted = cli("submit", str(output / "m"), "--leaderboard", str(tmp_path / "board"))
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    assert list((tmp_path / "board" / "submissions").rglob("*.json"))
    shown = result.stdout + result.stderr + submitted.stdout + submitted.stderr
    assert [name for name, secret in secrets.items() if secret in shown] == []
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert len(files) > 10
    leaks = [
        (str(path.relative_to(tmp_path)), name)
        for path in files
        for name, secret in secrets.items()
        if secret.encode() in path.read_bytes()
    ]
    assert leaks == []


def test_a_run_killed_while_judging_continues_and_asks_nothing_twice(tmp_path):
    """`run` killed (SIGKILL) while its judges are at an endpoint, then the same command: the
    same run continues (one run id), and no judge request that was answered is sent again
    (counted at the loopback endpoint)."""
    kill_at, lock = 15, threading.Lock()
    answered: list[str] = []
    state: dict = {"pid": None, "received": 0}

    def reply(body: dict) -> dict:
        with lock:
            state["received"] += 1
            kill = state["received"] == kill_at and state["pid"] is not None
        if kill:  # the answers before this one have reached the run's cache by now
            time.sleep(0.5)
            os.kill(state["pid"], signal.SIGKILL)
        else:
            with lock:
                answered.append(json.dumps(body, sort_keys=True))
        return judge_answer(body)

    with ScriptedServer.running([Reply(body=reply)]) as server:
        judges = [
            {
                "name": f"judge-{number}",
                "model": f"m{number}",  # three models: three different requests per item
                "backend": "openai",
                "model_args": {"base_url": server.url, "max_concurrency": 1},
            }
            for number in range(3)
        ]
        panel = tmp_path / "endpoints.yaml"
        panel.write_text(json.dumps({"panel": "endpoints", "judges": judges}))
        command = [
            *(
                sys.executable,
                "-m",
                "finreflect_eval",
                *run_args(tmp_path, panel, "finreflect_smoke_single_pass"),
            ),
        ]
        env = {**os.environ, "PYTHONPATH": str(TESTS), "HF_HUB_OFFLINE": "1"}
        killed = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        state["pid"] = killed.pid
        killed.communicate(timeout=300)
        assert killed.returncode == -signal.SIGKILL
        state["pid"] = None
        again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert again.returncode == 0, again.stderr[-3000:]
    folder = tmp_path / "out" / "candidate"
    (manifest,) = folder.glob("manifest_*.json")  # the same run, continued
    (results,) = folder.glob("results_*.json")
    assert json.loads(results.read_text())["run"] == json.loads(manifest.read_text())["run"]
    print(f"\njudge requests answered: {len(answered)} ({len(set(answered))} distinct)")
    assert len(answered) == len(set(answered)) == 3 * 3 * 4  # judges x spans x criteria


def test_judging_never_writes_a_cache_a_run_folder_names_elsewhere(tmp_path, cli):
    """A run folder is input: the cache its manifest names outside its output path is not
    created; judging uses the output path's own cache, and says so."""
    panel = panel_file(tmp_path / "inputs", "accepts_all", "accepts_all", "rejects_all")
    results = scripted_run(tmp_path, "candidate", 1, panel)
    folder = results.parent
    manifest = first(folder, "manifest_*.json")
    data = json.loads(manifest.read_text())
    assert data["cache"] == "../cache.sqlite"  # recorded beside the run, not by a local path
    data["cache"] = str(tmp_path / "elsewhere" / "evil.sqlite")
    manifest.write_text(json.dumps(data))
    judged = cli("judge", "--samples", str(folder), "--judges", str(panel), env=SUPPORT)
    assert judged.returncode == 0, judged.stderr[-2000:]
    assert not (tmp_path / "elsewhere").exists()
    assert "is outside its output path: judging uses" in judged.stderr
