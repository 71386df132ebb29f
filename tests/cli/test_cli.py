"""The command line as a user runs it: offline, in a child process."""

import hashlib
import os
import time

import datasets
import pytest
from support.runs import panel_file, run_args

from finreflect_eval.data import load_benchmark

ITEM_HTML = """<html><body>
<div style="display:none"><ix:header>amzn-20241231 false 2024 FY</ix:header></div>
<p><b>Item 7. Management's Discussion and Analysis</b></p>
<p>Net sales increased 11% to $638.0 billion in 2024.</p>
<table>
<tr><td>Segment</td><td>2023</td><td>2024</td></tr>
<tr><td>North America</td><td>352.8</td><td>387.5</td></tr>
<tr><td>International</td><td>131.2</td><td>142.9</td></tr>
<tr><td>AWS</td><td>90.8</td><td>107.6</td></tr>
</table>
<p>Operating income grew in every segment.</p>
<p><b>Item 8. Financial Statements</b></p>
<p>The consolidated statements follow.</p>
</body></html>"""


def digests(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_dataset_info_on_the_sample(cli):
    result = cli("dataset", "info", "--dataset", "sample")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "| test | " in out and "| dev | " in out
    for needle in ("per company", "per section", "| Item 1A |", "| faithfulness | 0 |", "| AAPL |"):
        assert needle in out


@pytest.mark.parametrize("max_tokens", [2048, 512])
def test_dataset_build_on_real_filings_is_deterministic(cli, filings, tmp_path, max_tokens):
    outputs = [tmp_path / "first", tmp_path / "second"]
    for output in outputs:
        args = ["--output", str(output), "--max-tokens", str(max_tokens)]
        result = cli("dataset", "build", *map(str, filings), *args)
        assert result.returncode == 0, result.stderr
    assert digests(outputs[0]) == digests(outputs[1])

    bench = load_benchmark(str(outputs[0]))
    assert {s.ticker for s in bench.spans} == {"AMZN", "GOOGL", "NVDA"}
    assert {(s.ticker, s.fiscal_year) for s in bench.spans} == {
        ("AMZN", 2024),
        ("GOOGL", 2024),
        ("NVDA", 2025),
    }
    for ticker in ("AMZN", "GOOGL", "NVDA"):
        sections = {s.section for s in bench.spans if s.ticker == ticker}
        assert {"Item 1", "Item 1A", "Item 7", "Item 8"} <= sections, (ticker, sections)
    assert all(s.n_tokens <= max_tokens for s in bench.spans if s.content_type == "text")
    ids = [s.span_id for s in bench.spans]
    assert len(ids) == len(set(ids))
    assert ids[0].startswith("AMZN_2024_")


def test_dataset_build_keeps_an_html_table_whole(cli, tmp_path):
    filing = tmp_path / "AMZN_10-K-2025-02-07.htm"
    filing.write_text(ITEM_HTML)
    result = cli("dataset", "build", str(filing), "--output", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    spans = datasets.load_dataset(str(tmp_path / "out"), "spans", split="test")
    tables = [row for row in spans if row["content_type"] == "table"]
    assert len(tables) == 1
    for cell in ("North America", "387.5", "AWS", "107.6", "International"):
        assert cell in tables[0]["text"]
    assert {row["section"] for row in spans} == {"Item 7", "Item 8"}
    assert all(row["ticker"] == "AMZN" and row["fiscal_year"] == 2024 for row in spans)
    # the card describes this data, not the bundled sample; spans is the default config
    card = (tmp_path / "out" / "README.md").read_text()
    assert "bundled sample" not in card and "filings of AMZN (fiscal years 2024)" in card
    assert "default: true" in card and f"num_examples: {len(spans)}" in card
    assert "arxiv.org/abs/2510.05710" in card
    default = datasets.load_dataset(str(tmp_path / "out"), split="test")
    assert default["span_id"] == spans["span_id"]


def test_dataset_build_needs_a_ticker_it_cannot_infer(cli, tmp_path):
    filing = tmp_path / "filing.md"
    filing.write_text("## Item 1. Business\n\nWe sell things.\n")
    result = cli("dataset", "build", str(filing), "--output", str(tmp_path / "out"))
    assert result.returncode == 1
    assert "pass --ticker" in result.stderr and "Traceback" not in result.stderr
    result = cli(
        "dataset",
        "build",
        str(filing),
        "--output",
        str(tmp_path / "out"),
        "--ticker",
        "abc",
        "--fiscal-year",
        "2024",
    )
    assert result.returncode == 0, result.stderr


def test_dataset_build_writes_into_an_existing_empty_folder(cli, tmp_path):
    filing = tmp_path / "NVDA_10-K-2025-02-26.md"
    filing.write_text("## Item 7. MD&A\n\nRevenue grew.\n")
    (tmp_path / "out").mkdir()
    result = cli("dataset", "build", str(filing), "--output", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert len(load_benchmark(str(tmp_path / "out")).spans) == 1


def test_dataset_push_offline_fails_clearly(cli, tmp_path):
    filing = tmp_path / "NVDA_10-K-2025-02-26.md"
    filing.write_text("## Item 7. MD&A\n\nRevenue grew.\n")
    assert cli("dataset", "build", str(filing), "--output", str(tmp_path / "out")).returncode == 0
    result = cli("dataset", "push", str(tmp_path / "out"), "--repo-id", "someone/finreflect")
    assert result.returncode == 1
    assert (
        result.stderr.count("\n") == 1
        and "cannot push to Hub dataset 'someone/finreflect'" in result.stderr
    )


def test_hub_dataset_offline_says_what_to_use(cli):
    result = cli("dataset", "info", "--dataset", "domyn/FinReflectKG-EvalBench")
    assert result.returncode == 1
    assert "--dataset sample" in result.stderr and result.stderr.count("\n") == 1


def test_help_everywhere(cli):
    for command in (["--help"], ["dataset", "--help"], ["dataset", "build", "--help"]):
        result = cli(*command)
        assert result.returncode == 0 and "usage:" in result.stdout


def test_a_rebuilt_folder_is_not_loaded_stale(cli, filings, tmp_path):
    # datasets caches local folders by name; a rebuild in place must still load the new rows
    output = tmp_path / "bench"
    counts = []
    for max_tokens in ("2048", "512"):
        result = cli(
            *("dataset", "build", str(filings[0]), "--output", str(output)),
            *("--max-tokens", max_tokens, "--replace"),
        )
        assert result.returncode == 0, result.stderr
        counts.append(len(load_benchmark(str(output)).spans))
    assert counts[1] > counts[0]


def test_run_files_follow_the_umask_and_keep_a_mode_set_by_hand(cli, env, tmp_path):
    """Every file of a run gets the mode an ordinary write gives it (0644 under umask 022), and
    a rewrite keeps the mode a user gave a file (as `open(path, "w")` does)."""
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    folder = tmp_path / "out" / "candidate"
    previous = os.umask(0o022)
    try:
        result = cli(*run_args(tmp_path, panel, "finreflect_smoke_single_pass", limit=2), env=env)
        assert result.returncode == 0, result.stderr
        modes = {
            str(path.relative_to(tmp_path)): oct(path.stat().st_mode & 0o777)
            for path in (tmp_path / "out").rglob("*")
            if path.is_file()
        }
        (results,) = folder.glob("results_*.json")
        results.chmod(0o640)
        result = cli("score", "--samples", str(folder), env=env)
        assert result.returncode == 0, result.stderr
    finally:
        os.umask(previous)
    assert any("samples_" in name for name in modes) and set(modes.values()) == {"0o644"}, modes
    assert oct(results.stat().st_mode & 0o777) == "0o640"


def test_key_value_lists_refuse_a_key_twice_naming_the_flag():
    from finreflect_eval._util.errors import FinReflectError
    from finreflect_eval.models import parse_model_args

    for text in ("temperature=0,temperature=1", '{"temperature": 0, "temperature": 1}'):
        with pytest.raises(
            FinReflectError, match=r"^--gen_kwargs: key 'temperature' given twice \(0 and 1\)"
        ):
            parse_model_args(text, flag="--gen_kwargs")
    with pytest.raises(FinReflectError, match=r"^-a: key 'seed' given twice"):
        parse_model_args("seed=1,seed=1", flag="-a")  # within one value, even the same value
    # Across values (lm-eval's `--model_args a=1 --model_args b=2`): merged, unless they differ.
    assert parse_model_args(["a=1,b=2", "a=1"], flag="-a") == {"a": 1, "b": 2}
    with pytest.raises(FinReflectError, match=r"^--model_args: key 'a' given twice \(1 and 2\)"):
        parse_model_args(["a=1", "a=2"], flag="--model_args")
    with pytest.raises(FinReflectError, match=r"^--hf_hub_log_args item '=' is not key=value"):
        parse_model_args("=", flag="--hf_hub_log_args")
    with pytest.raises(FinReflectError, match="given twice") as error:  # never a secret
        parse_model_args("api_key=sk-1,base_url=http://u:pw@h/v1,api_key=sk-2,base_url=x")
    with pytest.raises(FinReflectError, match="given twice") as url_error:
        parse_model_args(["base_url=http://u:pw@h/v1", "base_url=x"])
    assert "('***' and '***')" in str(error.value) and "sk-" not in str(error.value)
    assert "('http://***@h/v1' and 'x')" in str(url_error.value)


@pytest.mark.parametrize(("given", "expected"), [("8", 8), ("auto", "auto"), ("auto:4", "auto")])
def test_batch_size_is_n_auto_or_auto_n(given, expected):
    from finreflect_eval.cli.parser import parse_args

    assert parse_args(["run", "--batch_size", given]).batch_size == expected


@pytest.mark.parametrize("given", ["auto:x", "auto:0", "auto:", "auto4", "0", "-1", "2.5"])
def test_a_malformed_batch_size_is_a_usage_error(given, capsys):
    from finreflect_eval.cli.parser import parse_args

    with pytest.raises(SystemExit, match=r"^2$"):  # the usage error's exit code
        parse_args(["run", "--batch_size", given])
    assert f"must be N, auto or auto:N (N ≥ 1), got {given}" in capsys.readouterr().err


def test_repeated_key_value_flags_are_merged_key_by_key(cli, env, tmp_path):
    """lm-eval's `--model_args a=1 --model_args b=2`: both count; a key given two different
    values is refused, naming the flag as typed."""
    from support.runs import candidate_file

    responses = f"responses={candidate_file(tmp_path)}"
    base = [
        *("extract", "--model", "m", "--backend", "scripted", "--dataset", "sample"),
        *("--tasks", "finreflect_smoke_single_pass", "--limit", "1"),
        *("--output-path", str(tmp_path / "out"), "--no-cache"),
    ]
    result = cli(*base, "--model_args", responses, "--model_args", "batch_size=2", env=env)
    assert result.returncode == 0, result.stderr
    result = cli(*base, "-a", responses, "-a", "batch_size=2,batch_size=3", env=env)
    assert result.returncode == 1
    assert result.stderr.strip().endswith("-a: key 'batch_size' given twice (2 and 3): keep one")


def test_score_knows_the_panel_that_judged_the_run_by_its_file_as_by_its_name(cli, env, tmp_path):
    panel = panel_file(tmp_path / "p", "accepts_all", "rejects_all", name="file-panel")
    result = cli(*run_args(tmp_path, panel, "finreflect_smoke_single_pass", limit=1), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    folder = str(tmp_path / "out" / "candidate")
    samples = ("score", "--samples", folder, "--judges")
    # Every command that reads one panel's votes of a run takes the panel's file as its name.
    readers = [
        samples,
        ("review", "plan", folder, "--halfwidth", "10", "--judges"),
        ("review", "export", folder, "--audit-sample", "1", "--judges"),
        ("graph", "export", folder, "--format", "jsonl", "--judges"),
        ("view", folder, "--judges"),
    ]
    for command in readers:
        for given in ("file-panel", str(panel)):
            result = cli(*command, given, env=env)
            assert result.returncode == 0, (command, result.stderr[-2000:])
    other = panel_file(tmp_path / "q", "accepts_all", "rejects_all", name="other-panel")
    result = cli(*samples, str(other), env=env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "finreflect-eval: error: panel 'other-panel' has not judged this run (judged by: "
        "file-panel)"
    ]
    # The name of the panel that judged, but other judges: another panel, refused.
    renamed = panel_file(tmp_path / "r", "accepts_all", name="file-panel")
    result = cli(*samples, str(renamed), env=env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"finreflect-eval: error: {renamed}: panel 'file-panel' judged this run with the judges "
        "judge-0, judge-1; this file has judge-0"
    ]


def test_a_model_path_that_does_not_exist_fails_first_and_fast(cli, tmp_path):
    """Before the tasks' Hub data, the judges and the model library load: one line, in
    seconds (offline, the default data would be the first error otherwise)."""
    started = time.monotonic()
    result = cli(
        *("run", "--model", "/nonexistent/model", "--backend", "hf"),
        *("--output-path", str(tmp_path / "out")),
        env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "finreflect-eval: error: cannot load model '/nonexistent/model': no such file or folder"
    )
    assert elapsed < 15, elapsed
    assert not (tmp_path / "out").exists()
