"""The command line as a user runs it: offline, in a child process."""

import hashlib

import datasets
import pytest

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
