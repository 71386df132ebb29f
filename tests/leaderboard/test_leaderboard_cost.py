"""What an entry's model calls used, on the leaderboard: judge calls, tokens and money per 1,000
triples over its tasks, as columns of leaderboard.json, .csv and the page (not in Overall, not
ranked; money only where the run was priced, else —, never 0), from the results' `cost` block
that `verify` recomputes from the samples; sortable in Chromium; a tampered cost figure, or a
price table edited after scoring, is refused like any other number.
"""

import csv
import io
import json
import re

import pytest
from support.browser import Browser, require_browser
from support.runs import TRIPLES, candidate_file, panel_file

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard import bundle_run, submit
from finreflect_eval.leaderboard.rows import COST_COLUMNS
from finreflect_eval.models import ModelSpec
from finreflect_eval.pipeline.evaluator import evaluate
from finreflect_eval.pipeline.judging import load_panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.records import Prices, Results, read

TASKS = ("finreflect_smoke_single_pass", "finreflect_smoke_multi_pass")
PRICES = {
    "currency": "EUR",
    "models": {
        "acme/kg-cost": {"input": 3.0, "output": 15.0, "device_hour": 2.0},
        "scripted": {"input": 0.5, "output": 1.5, "cached": 0.25},  # every judge's model
    },
}
ONE_TRIPLE = {"triples": TRIPLES["triples"][:1]}


def smoke_run(folder, model, answer, prices, judges=("accepts_all", "gold_labels", "rejects_all")):
    """A complete smoke run of two modes on the sample, priced with `prices`."""
    panel = panel_file(folder, *judges)
    config = RunConfig(
        model=ModelSpec(model, "scripted", {"responses": str(candidate_file(folder, answer))}),
        tasks=list(TASKS),
        dataset="sample",
        output_path=folder / "out",
        cache=folder / "out" / "cache.sqlite",
        prices=None if prices is None else Prices.model_validate(prices),
    )
    run, results = evaluate(config, load_panel(panel))
    return run.store.results_path(results.run, results.judges.panel)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A priced run, and one of another model (a triple a span) scored without prices."""
    root = tmp_path_factory.mktemp("cost-board")
    return {
        "priced": smoke_run(root / "priced", "acme/kg-cost", TRIPLES, PRICES),
        "unpriced": smoke_run(root / "unpriced", "acme/kg-lean", ONE_TRIPLE, None),
    }


@pytest.fixture(scope="module")
def board(runs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("board") / "board"
    for results in runs.values():
        submit(results, folder)
    return folder


def bundle(results_file) -> dict:
    return bundle_run(results_file).model_dump(mode="json", by_alias=True)


def expected_columns(results: Results) -> dict:
    """The cost columns, from the results' own block (what `verify` recomputed and compared)."""
    blocks = [results.cost[task] for task in TASKS]
    triples = sum(block.triples for block in blocks)
    judge_calls = sum(j.calls + j.cache_hits for block in blocks for j in block.judging.values())
    tokens = sum(
        block.total.prompt_tokens + block.total.completion_tokens + block.total.cache_hit_tokens
        for block in blocks
    )
    money = [block.total.money for block in blocks]
    priced = None not in money
    hits = sum(block.total.cache_hits for block in blocks)
    return {
        "cost_triples": triples,
        "cost_judge_calls_per_1k": round(1000 * judge_calls / triples, 1),
        "cost_tokens_per_1k": round(1000 * tokens / triples, 1),
        "cost_money_per_1k": round(1000 * sum(money) / triples, 6) if priced else None,
        "cost_money_at_least": bool(priced and hits),
        "cost_currency": "EUR" if priced else None,
        "cost_cache_hits": sum(block.total.cache_hits for block in blocks),
    }


def rows_by_model(board) -> dict[str, dict]:
    return {row["model"]: row for row in json.loads((board / "leaderboard.json").read_text())}


def test_the_cost_columns_come_from_the_cost_block_and_are_on_the_page(runs, board):
    rows = rows_by_model(board)
    for name, model in (("priced", "acme/kg-cost"), ("unpriced", "acme/kg-lean")):
        results = read(Results, runs[name])
        row = rows[model]
        assert {key: row[key] for key in COST_COLUMNS if key != "cost"} == expected_columns(results)
        for task, mode in zip(TASKS, ("single_pass", "multi_pass"), strict=True):
            block = results.cost[task]
            assert row["cost"][mode]["judge_calls"] == sum(
                judge.calls for judge in block.judging.values()
            )
            assert row["cost"][mode]["prompt_tokens"] == block.total.prompt_tokens
            assert row["cost"][mode]["money"] == block.total.money
    priced, unpriced = rows["acme/kg-cost"], rows["acme/kg-lean"]
    # Multi-pass's first pass asks what single-pass asked: answered from the run's cache, so
    # the money is what the run spent, at least (see below).
    assert priced["cost_cache_hits"] > 0 and priced["cost_money_at_least"]
    assert priced["cost_money_per_1k"] > 0 and unpriced["cost_money_per_1k"] is None
    # More triples a span: fewer judge calls per triple (comprehensiveness is per span).
    assert priced["cost_judge_calls_per_1k"] < unpriced["cost_judge_calls_per_1k"]
    assert priced["overall"] == read(Results, runs["priced"]).overall.score  # not in Overall
    lines = {line["model"]: line for line in csv.DictReader(io.StringIO(_text(board, "csv")))}
    assert float(lines["acme/kg-cost"]["cost_money_per_1k"]) == priced["cost_money_per_1k"]
    assert lines["acme/kg-lean"]["cost_money_per_1k"] == ""  # unknown: empty, never 0

    # The page: three sortable optional columns, each header's title saying what it counts.
    page = _text(board, "html")
    for key, words in (
        ("cost_judge_calls_per_1k", "Judge calls per 1,000 final triples"),
        ("cost_tokens_per_1k", "Tokens per 1,000 final triples: prompt and completion"),
        ("cost_money_per_1k", "Money per 1,000 final triples"),
    ):
        header = re.search(
            rf'<th scope="col" aria-sort="none" class="optional cost"><button type="button" '
            rf'data-key="{key}" title="([^"]*)">',
            page,
        )
        assert header and header.group(1).startswith(words), key
        assert "not part of Overall or the ranking" in header.group(1)
        assert f'<td data-key="{key}" data-value="{float(priced[key])}" class="optional cost">' in (
            page
        )
    assert '<td data-key="cost_money_per_1k" data-value="" class="optional cost">—</td>' in page
    money = f"≥ {priced['cost_money_per_1k']:.6g} <small>EUR</small>"
    assert f'class="optional cost">{money}</td>' in page
    tokens = f'class="optional cost">{priced["cost_tokens_per_1k"]:.1f}</td>'
    assert tokens in page
    assert page.count('<table class="criteria cost">') == 2  # per mode, under Details
    single = priced["cost"]["single_pass"]
    assert (
        f'<tr><th scope="row">single-pass</th><td>{single["triples"]}</td>'
        f"<td>{single['extraction_calls']}</td><td>{single['judge_calls']}</td>" in page
    )


def _text(board, kind: str) -> str:
    name = "leaderboard.csv" if kind == "csv" else "index.html"
    return (board / name).read_text(encoding="utf-8")


def test_the_cost_columns_sort_in_chromium(board):
    require_browser()
    from playwright.sync_api import sync_playwright

    rows = rows_by_model(board)
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page = chromium.page()
        page.goto((board / "index.html").as_uri())
        table = "#board-community"

        def models() -> list[str]:
            return [
                m.text_content().strip()
                for m in page.locator(f"{table} tr.entry th[scope=row] > a:first-child").all()
            ]

        for key in ("cost_judge_calls_per_1k", "cost_tokens_per_1k", "cost_money_per_1k"):
            button = page.locator(f'{table} button[data-key="{key}"]')
            assert button.is_visible() and "per 1,000 final triples" in button.get_attribute(
                "title"
            )
            for direction in ("descending", "ascending"):
                button.click()
                header = page.locator(f'{table} th:has(button[data-key="{key}"])')
                assert header.get_attribute("aria-sort") == direction
                values = [rows[model][key] for model in models()]
                known = sorted(
                    (v for v in values if v is not None), reverse=direction == "descending"
                )
                unknown = [None] * (len(values) - len(known))
                # An unknown figure counts as the lowest, as elsewhere on the board.
                assert values == (known + unknown if direction == "descending" else unknown + known)
        chromium.browser.close()
    assert not chromium.errors, chromium.errors


@pytest.mark.parametrize(
    "where",
    [
        ("extraction", "calls"),
        ("extraction", "completion_tokens"),
        ("judging", "judge-1", "criteria", "faithfulness", "prompt_tokens"),
        ("judging", "judge-0", "money"),
        ("total", "money"),
        ("per_1k_triples", "calls"),
        ("triples",),
    ],
)
def test_a_tampered_cost_figure_is_refused_naming_it(runs, tmp_path, where):
    data = bundle(runs["priced"])
    block = data["results"]["cost"][TASKS[0]]
    *path, key = where
    for part in path:
        block = block[part]
    recomputed = block[key]
    value = recomputed / 2 if isinstance(recomputed, float) else recomputed + 1
    block[key] = value
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    name = ".".join(where).replace(".", r"\.")
    with pytest.raises(
        FinReflectError,
        match=rf"^refused: cost\.{TASKS[0]}\.{name}: submitted {value!r}, recomputed from "
        rf"the samples {recomputed!r}$",
    ):
        submit(forged, tmp_path / "board")
    assert not (tmp_path / "board" / "submissions").exists()


def test_a_price_table_edited_after_scoring_is_refused(runs, tmp_path):
    """The money follows from the prices the results name: a cheaper price in the table than
    the one the money was computed with is a difference in the money."""
    data = bundle(runs["priced"])
    data["results"]["config"]["prices"]["models"]["acme/kg-cost"]["output"] = 1.5
    task = min(TASKS)  # the first the comparison meets
    submitted = data["results"]["cost"][task]["extraction"]["money"]
    forged = tmp_path / "cheaper.json"
    forged.write_text(json.dumps(data))
    with pytest.raises(
        FinReflectError,
        match=rf"^refused: cost\.{task}\.extraction\.money: submitted {submitted!r}, "
        r"recomputed from the samples [0-9.]+$",
    ):
        submit(forged, tmp_path / "board")


def test_results_scored_before_the_cost_block_are_accepted_as_submitted(runs, tmp_path):
    """Results written before there was a `cost` block are compared without it, and stored
    as submitted; a block that is there is compared whole (a task left out is refused)."""
    data = bundle(runs["unpriced"])
    del data["results"]["cost"]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(data))
    stored, _ = submit(older, tmp_path / "board")
    assert "cost" not in json.loads(stored.read_text())["results"]
    # ... and shown with the block recomputed from its samples, as the graph is.
    (row,) = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    expected = expected_columns(read(Results, runs["unpriced"]))
    assert {key: row[key] for key in expected} == expected

    data = bundle(runs["unpriced"])
    del data["results"]["cost"][TASKS[1]]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(data))
    with pytest.raises(
        FinReflectError,
        match=rf"cost\.{TASKS[1]}: present in only one of the submitted and recomputed results",
    ):
        submit(partial, tmp_path / "board-partial")


def test_a_currency_with_control_characters_is_refused(runs, tmp_path):
    """The currency is shown beside the money: a bidi override in it (consistent with the
    recomputed block, so that only this check can refuse it) is refused, as in a judge's name."""
    data = bundle(runs["priced"])
    currency = "\u202eRUE"
    data["results"]["config"]["prices"]["currency"] = currency
    for block in data["results"]["cost"].values():
        block["currency"] = currency
    forged = tmp_path / "bidi.json"
    forged.write_text(json.dumps(data))
    with pytest.raises(FinReflectError, match=r"price table currency .* control characters"):
        submit(forged, tmp_path / "board")


def test_a_run_the_cache_answered_in_part_shows_what_it_asks_and_money_at_least(tmp_path):
    """Two judges of one model with the same settings: the second's calls are the first's,
    from the cache. Calls and tokens count them as the calls they were (what the method asks);
    money is what the run spent: shown as a lower bound."""
    results = smoke_run(
        tmp_path, "acme/kg-cost", TRIPLES, PRICES, ("accepts_all", "accepts_all", "rejects_all")
    )
    submit(results, tmp_path / "board")
    (row,) = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert row["cost_cache_hits"] > 0 and row["cost_money_at_least"]
    assert "≥ " in (tmp_path / "board" / "index.html").read_text()
    cost = read(Results, results).cost[TASKS[0]]
    first, second = cost.judging["judge-0"], cost.judging["judge-1"]
    assert second.calls == 0 and second.cache_hits == first.calls > 0
    assert second.cache_hit_tokens == first.prompt_tokens + first.completion_tokens
    assert row == {**row, **expected_columns(read(Results, results))}
