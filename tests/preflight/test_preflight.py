"""`run --check`: a dry run that checks what a run needs before any weight is downloaded; the
Hub is either offline or the loopback fake of `support.hub_models`."""

import json
import shutil
import socket
import time
from pathlib import Path

import pytest
import yaml
from conftest import require
from support.hub_models import model_hub

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.pipeline.judging import load_panel

GB = 10**9


def hub_env(tmp_path, **more):
    """An empty Hub cache of the test's own, and no token unless given."""
    home = tmp_path / "hf"
    return {"HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"), "HF_TOKEN": "", **more}


def unmet(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("unmet: ")]


def nothing_downloaded(tmp_path) -> None:
    files = [p for p in (tmp_path / "hf").rglob("*") if p.is_file()]
    assert not [p for p in files if "models--" in str(p)], files


def write_panel(folder, judges: list[dict]) -> str:
    path = folder / "panel.yaml"
    path.write_text(yaml.safe_dump({"panel": "check-test", "judges": judges}))
    return str(path)


def test_offline_one_gpu_command_names_each_unmet_need(cli, tmp_path):
    out = tmp_path / "out"
    result = cli(
        *("run", "--model", "google/gemma-3-4b-it", "--backend", "hf", "--tasks", "finreflect"),
        *("--judges", "small", "--check", "--output-path", str(out)),
        env=hub_env(tmp_path),
    )
    assert result.returncode == 1, result.stderr
    lines = unmet(result)
    assert len(lines) == len(set(lines))
    dataset = [line for line in lines if "domyn/FinReflectKG-EvalBench" in line]
    assert len(dataset) == 1 and "--dataset sample" in dataset[0]
    (gemma,) = [line for line in lines if "judge gemma-3-27b-it (google/gemma-3-27b-it)" in line]
    assert "not in the local Hub cache, and offline (HF_HUB_OFFLINE=1)" in gemma
    assert (
        "gated: accept the licence at https://huggingface.co/google/gemma-3-27b-it and set "
        "HF_TOKEN (HF_TOKEN is not set)"
    ) in gemma
    assert any(line.startswith("unmet: candidate (google/gemma-3-4b-it): ") for line in lines)
    # The panel's estimates (about 114 GB) against the disk the Hub cache would be on.
    disk = [line for line in lines if line.startswith("unmet: disk: ")]
    assert bool(disk) == (shutil.disk_usage(tmp_path).free < 113.8 * GB)
    assert result.stderr.splitlines()[-1] == (
        f"finreflect-eval: error: --check: {len(lines)} need(s) unmet, listed above; nothing "
        "was downloaded"
    )
    assert not out.exists()
    nothing_downloaded(tmp_path)


def cache_model(tmp_path, repo_id: str, shards: int, present: int) -> None:
    """A model in the test's Hub cache as huggingface_hub lays it out (refs/main names the
    snapshot), with `present` of its `shards` safetensors shards."""
    sha = "a" * 40
    folder = tmp_path / "hf" / "hub" / f"models--{repo_id.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(sha)
    snapshot = folder / "snapshots" / sha
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    index = {"weight_map": {f"layer.{i}": name for i, name in enumerate(names)}}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    for name in names[:present]:
        (snapshot / name).write_bytes(b"weights")


def test_offline_cached_model_needs_nothing_and_the_disk_need_is_estimated(cli, tmp_path):
    cache_model(tmp_path, "example-org/candidate", shards=2, present=2)
    cache_model(tmp_path, "example-org/half-cached", shards=2, present=1)
    cached = sorted((tmp_path / "hf").rglob("*"))
    free = shutil.disk_usage(tmp_path).free
    big = {"name": "big", "model": "example-org/big-judge", "weights_gb": round(2 * free / GB)}
    half = {"name": "half", "model": "example-org/half-cached"}
    panel = write_panel(tmp_path, [big, half])
    result = cli(
        *("run", "--model", "example-org/candidate", "--tasks", "finreflect_single_pass"),
        *("--dataset", "sample", "--limit", "1", "--judges", panel, "--check"),
        *("--output-path", str(tmp_path / "out")),
        env=hub_env(tmp_path),
    )
    assert result.returncode == 1, result.stderr
    lines = unmet(result)
    assert not any("candidate" in line for line in lines)  # complete in the cache
    assert any(
        line.startswith("unmet: judge half (example-org/half-cached): not in") for line in lines
    )
    (disk,) = [line for line in lines if line.startswith("unmet: disk: ")]
    assert f"need at least {big['weights_gb']:.1f} GB, but {tmp_path / 'hf' / 'hub'} has " in disk
    assert "set HF_HOME (or HF_HUB_CACHE) to a folder on a larger disk" in disk
    assert not any("dataset" in line for line in lines)  # the bundled sample needs nothing
    assert len(lines) == 3, lines  # the big judge, the half-cached one, the disk
    assert sorted((tmp_path / "hf").rglob("*")) == cached

    # Without the judges, every need is met: the plan, with the cached commit.
    result = cli(
        *("extract", "--model", "example-org/candidate", "--tasks", "finreflect_single_pass"),
        *("--dataset", "sample", "--limit", "1", "--check"),
        *("--output-path", str(tmp_path / "out")),
        env=hub_env(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    row = (
        f"| candidate | example-org/candidate | hf | main | {'a' * 40} | local Hub cache | 0.0 GB |"
    )
    assert row in result.stdout
    assert (
        "Hub: offline (HF_HUB_OFFLINE=1); what it would confirm came from the local"
        in result.stdout
    )
    assert not (tmp_path / "out").exists()


def models(hub, granted: bool) -> dict[str, str]:
    """The candidate (sharded safetensors, and a consolidated copy it does not load), a judge
    with PyTorch weights only, and a gated judge: their commit shas."""
    return {
        "example-org/candidate-7b": hub.add_model(
            "example-org/candidate-7b",
            {
                "config.json": 700,
                "model.safetensors.index.json": 30_000,
                "model-00001-of-00002.safetensors": 5 * GB,
                "model-00002-of-00002.safetensors": 2 * GB,
                "consolidated.safetensors": 7 * GB,
            },
        ),
        "example-org/judge-bin": hub.add_model(
            "example-org/judge-bin", {"config.json": 700, "pytorch_model.bin": 3 * GB}
        ),
        "example-org/judge-gated": hub.add_model(
            "example-org/judge-gated",
            {"config.json": 700, "model.safetensors": 1 * GB},
            gated=True,
            granted=granted,
        ),
    }


def online_panel(tmp_path, hub) -> str:
    return write_panel(
        tmp_path,
        [
            {"name": "bin", "model": "example-org/judge-bin"},
            {"name": "gated", "model": "example-org/judge-gated"},
            {
                "name": "served",
                "model": "some/served-model",
                "backend": "openai",
                "model_args": {"base_url": f"{hub.url}/v1"},
            },
        ],
    )


def online(tmp_path, hub) -> dict[str, str]:
    return hub_env(
        tmp_path,
        HF_ENDPOINT=hub.url,
        HF_HUB_OFFLINE="0",
        HF_DATASETS_OFFLINE="0",
        HF_TOKEN="hf_fake_token",
    )


def test_the_plan_of_a_run_with_the_grounding_cascade_bounds_the_judge_calls(cli, tmp_path):
    """With --skip-judging-ungrounded a span whose triples all fail the grounding check gets no
    judge call: the judges' calls are an upper bound, and the plan says so."""
    cache_model(tmp_path, "example-org/candidate", shards=1, present=1)
    cache_model(tmp_path, "example-org/judge", shards=1, present=1)
    judges = [{"name": name, "model": "example-org/judge"} for name in ("j1", "j2")]
    panel = write_panel(tmp_path, judges)
    args = ["run", "--model", "example-org/candidate", "--tasks", "finreflect_single_pass"]
    args += ["--dataset", "sample", "--limit", "2", "--judges", panel, "--check"]
    args += ["--output-path", str(tmp_path / "out")]
    plain = cli(*args, env=hub_env(tmp_path))
    cascade = cli(*args, "--skip-judging-ungrounded", env=hub_env(tmp_path))
    for result in (plain, cascade):
        assert result.returncode == 0, result.stderr
    # 2 spans, 1 extraction call and 4 calls of each judge (one per criterion) each.
    assert "| finreflect_single_pass | single_pass | sample |" in plain.stdout
    assert " | 2 | 2 | 8 | 8 |" in plain.stdout
    assert "| total |  |  |  | 2 | 2 | 8 | 8 |" in plain.stdout
    assert "Calls: 2 extraction, 16 by the judges" in plain.stdout
    assert " | 2 | 2 | ≤ 8 | ≤ 8 |" in cascade.stdout
    assert "| total |  |  |  | 2 | 2 | ≤ 8 | ≤ 8 |" in cascade.stdout
    assert "Calls: 2 extraction, ≤ 16 by the judges" in cascade.stdout
    assert "(nor one whose triples all fail the grounding check)." in cascade.stdout


def test_online_plan_against_the_loopback_hub(cli, tmp_path):
    for module in ("torch", "transformers", "outlines"):
        require(module, "[hf] extra")  # what the hf backend loads: the check asks for them
    out = tmp_path / "out"
    with model_hub() as hub:
        shas = models(hub, granted=True)
        result = cli(
            *("run", "--model", "example-org/candidate-7b", "--tasks", "finreflect"),
            *("--dataset", "sample", "--limit", "2", "--judges", online_panel(tmp_path, hub)),
            *("--check", "--output-path", str(out)),
            env=online(tmp_path, hub),
        )
        extract = cli(
            *("extract", "--model", "example-org/candidate-7b", "--tasks", "finreflect"),
            *("--dataset", "sample", "--limit", "2", "--check", "--output-path", str(out)),
            env=online(tmp_path, hub),
        )
        paths = list(hub.paths)
    assert result.returncode == 0, result.stderr
    plan = result.stdout
    candidate = shas["example-org/candidate-7b"]
    # The model-*.safetensors shards (7 GB), not the consolidated copy.
    assert (
        f"| candidate | example-org/candidate-7b | hf | main | {candidate} | Hub | 7.0 GB |" in plan
    )
    assert (
        f"| judge bin | example-org/judge-bin | hf | main | {shas['example-org/judge-bin']}" in plan
    )
    assert "| judge gated | example-org/judge-gated | hf | main |" in plan
    assert (
        f"| judge served | some/served-model | openai |  |  | endpoint {hub.url}/v1 (HTTP 404)"
        in plan
    )
    header = "| task | mode | dataset | version | spans | extraction calls | judge bin calls | "
    assert header + "judge gated calls | judge served calls |" in plan
    # 2 spans each; 4 criteria per span and judge; reflection at most 1 + 2 x 3 calls a span.
    assert "| finreflect_single_pass | single_pass | sample | bundled with finreflect-eval" in plan
    assert " | 2 | 2 | 8 | 8 | 8 |" in plan
    assert " | 2 | 4 | 8 | 8 | 8 |" in plan
    assert " | 2 | ≤ 14 | 8 | 8 | 8 |" in plan
    assert "| total |  |  |  | 6 | ≤ 20 | 24 | 24 | 24 |" in plan
    assert "Download: 11.0 GB of weights into " in plan
    assert extract.returncode == 0, extract.stderr
    assert "judge" not in extract.stdout and " | 2 | ≤ 14 |" in extract.stdout
    # Metadata and access checks only: no file was asked for (`/ORG/NAME/resolve/REV/FILE`).
    assert "/api/models/example-org/judge-gated/auth-check" in paths
    assert not [path for path in paths if "/resolve/" in path], paths
    assert not out.exists()
    nothing_downloaded(tmp_path)


def test_online_gated_without_access_missing_repo_and_a_file_as_output(cli, tmp_path):
    taken = tmp_path / "results.txt"
    taken.write_text("not a folder")
    with model_hub() as hub:
        models(hub, granted=False)
        result = cli(
            *("run", "--model", "example-org/no-such-model", "--tasks", "finreflect_single_pass"),
            *("--dataset", "sample", "--limit", "1", "--judges", online_panel(tmp_path, hub)),
            *("--check", "--output-path", str(taken / "out")),
            env=online(tmp_path, hub),
        )
    assert result.returncode == 1, result.stderr
    lines = unmet(result)
    assert (
        "unmet: judge gated (example-org/judge-gated): gated: your token has not been granted "
        "access: accept the licence at https://huggingface.co/example-org/judge-gated"
    ) in lines
    assert (
        "unmet: candidate (example-org/no-such-model): not found on the Hub, or private: check "
        "the id (a private repo needs HF_TOKEN)"
    ) in lines
    assert any(f"cannot be a folder: {taken} is a file" in line for line in lines)
    nothing_downloaded(tmp_path)


def test_an_unreachable_hub_is_like_offline(cli, tmp_path):
    with socket.socket() as free:  # a port where nothing listens
        free.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{free.getsockname()[1]}"
    result = cli(
        *("run", "--model", "example-org/candidate", "--tasks", "finreflect_single_pass"),
        *("--dataset", "sample", "--limit", "1", "--judges", "small", "--check"),
        *("--output-path", str(tmp_path / "out")),
        env=hub_env(tmp_path, HF_ENDPOINT=closed, HF_HUB_OFFLINE="0", HF_DATASETS_OFFLINE="0"),
    )
    assert result.returncode == 1, result.stderr
    (candidate,) = [line for line in unmet(result) if "example-org/candidate" in line]
    assert "not in the local Hub cache, and the Hub is unreachable (" in candidate
    assert any("gated: accept the licence at" in line for line in unmet(result))
    # Hub data is not loaded once the Hub did not answer (its client would retry for a minute)
    started = time.monotonic()
    result = cli(
        *("run", "--model", "example-org/candidate", "--tasks", "finreflect_single_pass"),
        *("--limit", "1", "--judges", "small", "--check", "--output-path", str(tmp_path / "out")),
        env=hub_env(tmp_path, HF_ENDPOINT=closed, HF_HUB_OFFLINE="0", HF_DATASETS_OFFLINE="0"),
    )
    assert result.returncode == 1 and time.monotonic() - started < 30, result.stderr
    (data,) = [line for line in unmet(result) if "domyn/FinReflectKG-EvalBench" in line]
    assert "the Hub is unreachable (" in data and "commit and spans cannot be checked" in data


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"gatd": True}, "gatd"),
        ({"licence_url": "https://example.org/licence"}, "licence_url is for a gated model"),
        ({"weights_gb": 0}, "weights_gb"),
    ],
)
def test_panel_notes_are_validated(tmp_path, entry, message):
    panel = write_panel(tmp_path, [{"name": "j", "model": "org/name", **entry}])
    with pytest.raises(FinReflectError, match=message):
        load_panel(panel)


def test_the_plan_estimates_the_thinking_of_each_model_a_vllm_judge_too(cli, tmp_path, real_vllm):
    """A candidate thinking within a budget, a gpt-oss judge (it always thinks, at its effort)
    and a judge with thinking off: the plan's thinking tokens per call are the budget, the
    family's stated assumption, and none."""
    cache_model(tmp_path, "example-org/qwen3-candidate", shards=1, present=1)
    cache_model(tmp_path, "example-org/gpt-oss-judge", shards=1, present=1)
    cache_model(tmp_path, "example-org/qwen3-judge", shards=1, present=1)
    judges = [
        {
            "name": "oss",
            "model": "example-org/gpt-oss-judge",
            "backend": "vllm",
            "model_args": {"reasoning_effort": "low"},
        },
        {"name": "qwen", "model": "example-org/qwen3-judge", "model_args": {"think": "off"}},
    ]
    args = ["run", "--model", "example-org/qwen3-candidate", "--model-args", "think_budget=512"]
    args += ["--tasks", "finreflect_single_pass", "--dataset", "sample", "--limit", "2"]
    args += ["--judges", write_panel(tmp_path, judges), "--check"]
    vllm_folder = str(Path(real_vllm.__path__[0]).parent)  # the vllm backend's package
    env = hub_env(tmp_path, PYTHONPATH=vllm_folder)
    result = cli(*args, "--output-path", str(tmp_path / "out"), env=env)
    assert result.returncode == 0, result.stderr
    table = result.stdout.split("Thinking (an estimate")[1]
    candidate = "| candidate | example-org/qwen3-candidate | ≤ 512 | its think_budget (512) |"
    assert f"{candidate} 2 | ≤ 1,024 |" in table  # 2 extraction calls
    judge = "| judge oss | example-org/gpt-oss-judge | ≈ 300 | assumed for openai_gptoss, effort"
    assert f"{judge} low | 8 | ≈ 2,400 |" in table  # 4 criteria × 2 spans
    assert "judge qwen" not in table  # thinking off: no thought to count


@pytest.mark.skipif(not Path("/proc/1").is_dir(), reason="needs Linux's /proc")
def test_an_output_folder_that_cannot_be_written_is_said_so_once_with_the_os_reason(cli, tmp_path):
    """/proc/1 exists but takes no new folder (the OS answers ENOENT, even to root): the need
    names the output folder and the OS's reason, once (the cache would be in it too)."""
    result = cli(
        *("run", "--model", "cand", "--backend", "scripted", "--dataset", "sample"),
        *("--tasks", "finreflect_smoke_single_pass", "--limit", "1", "--judges", "demo"),
        *("--check", "--output-path", "/proc/1"),
        env=hub_env(tmp_path),
    )
    assert result.returncode == 1
    # (the demo judges' package may be missing too, as at the lowest versions: another need)
    assert [need for need in unmet(result) if "/proc/1" in need] == [
        "unmet: output: the output folder /proc/1/cand cannot be written: the OS refused a new "
        "folder in /proc/1 (No such file or directory); choose another --output-path"
    ]
