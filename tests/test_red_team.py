"""Our own red team: bad input to every command, as a careless or hostile user gives it. Each case
asserts the exit code (1 bad input, 2 usage), a one-line message naming the cause, that it ends
within 30 s, and that no file that existed before changed. The prepared runs are built once."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.chat_server import Reply, ScriptedServer, answer, closed_port, silent_server
from support.runs import TRIPLES, candidate_file, panel_file, scripted_run

from finreflect_eval.errors import FinReflectError
from finreflect_eval.evaluator import RunConfig, evaluate
from finreflect_eval.judging import load_panel
from finreflect_eval.models import ModelSpec
from finreflect_eval.scoring import FailurePolicy

DISK_FULL = Path(__file__).parent / "support" / "disk_full"
SHARED_10K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "10k_text"


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
    return context


@pytest.fixture(scope="module")
def servers(ctx) -> dict[str, str]:
    """Loopback servers that misbehave: garbage, `content` as an object, never answering."""
    object_content = {"choices": [{"message": {"content": {"triples": []}}}]}
    with (
        ScriptedServer.running([Reply(body="<html>proxy login</html>")]) as garbage,
        ScriptedServer.running([Reply(body=object_content)]) as objects,
        ScriptedServer.running([Reply(status=500, body={"error": "down"})]) as failing,
        silent_server() as silent,
    ):
        yield {
            "closed": closed_port(),
            "garbage": garbage.url,
            "object": objects.url,
            "failing": failing.url,
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


BOARD = "{root}/board"


@dataclass(frozen=True)
class Case:
    id: str
    args: Callable[[Context], list[str]]
    code: int
    says: str  # a regular expression the one line must match
    disk_full: bool = False  # every file written into place fails with ENOSPC


def base_yaml() -> str:
    from finreflect_eval.resources import tasks_dir

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
    Case("server-garbage", openai_run("garbage"), 1, r"failed in transport .*malformed response"),
    Case(
        "server-content-object",
        openai_run("object"),
        1,
        r"failed in transport .*malformed response",
    ),
    Case("server-500", openai_run("failing"), 1, r"failed in transport .*HTTP 500"),
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
        r"refused: model name",
    ),
    Case(
        "submit-path-name",
        raw("submit", submission("path.json", set_model_name("../../etc")), "--leaderboard", BOARD),
        1,
        r"refused: model name",
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
    Case("disk-full-on-run", scripted(), 1, r"no space left on the device", disk_full=True),
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
]


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in root.rglob("*")
        if path.is_file() and path.name != ".finreflect-eval.lock" and "fresh" not in path.parts
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
    before = snapshot(prepared.root)
    args = case.args(prepared)
    started = time.monotonic()
    paths = [Path(__file__).parent, *([DISK_FULL] if case.disk_full else [])]
    result = cli(*args, env={"PYTHONPATH": ":".join(map(str, paths))})
    elapsed = time.monotonic() - started
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    print(f"\nRED-TEAM | {case.id} | {result.returncode} | {errors[-1] if errors else ''} |")
    assert result.returncode == case.code, result.stderr[-2000:]
    assert len(errors) == 1, result.stderr[-2000:]
    assert result.stderr.rstrip().splitlines()[-1] == errors[0]  # the last thing printed
    assert re.search(case.says, errors[0]), errors[0]
    assert elapsed < 30
    after = snapshot(prepared.root)
    assert {path: after.get(path) for path in before} == before


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
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "HF_HUB_OFFLINE": "1"}
        first_run = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(0.3)
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
