"""The results' `cost` block: every call counted (checked against what the scripted models were
asked and answered, counted here on their own), the money worked out by hand, a rerun from the
cache at zero new calls, and the block recomputed from the samples alone."""

import json
import subprocess
import sys

import pytest
import yaml
from support.runs import TRIPLES, candidate_file, multi_pass_with_normalizer
from support.scripted_judges import accepts_all, gold_labels, rejects_all

from finreflect_eval import simple_evaluate
from finreflect_eval._util.errors import ArgumentValueError, FinReflectError
from finreflect_eval.models.scripted import ScriptedModel
from finreflect_eval.pipeline.summary import cost_table
from finreflect_eval.records import ModelPrice, Prices, Results, Usage

TASK = "finreflect_smoke_single_pass"
PRICES = {
    "currency": "EUR",
    "models": {
        "cand": {"input": 2.0, "output": 4.0},
        "judge-a": {"input": 0.5, "output": 1.5, "cached": 0.25},
        "judge-b": {"input": 1.0, "output": 3.0},
    },
}


def words(text: str) -> int:
    """The scripted backend's tokens: words (it is not a model)."""
    return len(text.split())


def test_money_worked_out_by_hand():
    price = ModelPrice(input=0.5, output=1.5, cached=0.25, device_hour=2.0)
    usage = Usage(
        calls=7,
        prompt_tokens=1_200_000,
        cached_prompt_tokens=200_000,
        completion_tokens=300_000,
        device_seconds=1800,
    )
    # 1.0M fresh × 0.5 + 0.2M cached × 0.25 + 0.3M out × 1.5, per million; half an hour × 2.0
    assert price.money(usage) == pytest.approx(0.5 + 0.05 + 0.45 + 1.0)
    # No cached price: cached tokens cost the input price.
    assert ModelPrice(input=0.5).money(usage) == pytest.approx(1_200_000 * 0.5 / 1e6)


def test_a_run_counts_every_call_and_prices_it(tmp_path):
    """Scripted candidate and judges, loaded here so that their requests can be counted: the
    block's calls and tokens are those requests' and answers' (counted here), the money is
    worked out from them by hand, and `score` recomputes the block from the samples alone."""
    answer = json.dumps(TRIPLES)
    candidate = ScriptedModel("cand", responses=[answer])
    judges = {
        "judge-0": ScriptedModel("judge-a", responses=accepts_all),
        "judge-1": ScriptedModel("judge-b", responses=rejects_all),
        "judge-2": ScriptedModel("judge-b", responses=gold_labels),
    }
    results = simple_evaluate(
        candidate,
        tasks=TASK,
        dataset="sample",
        limit=3,
        judges=judges,
        output_path=tmp_path,
        prices=PRICES,
        bootstrap_iters=0,
    )
    cost = results["cost"][TASK]
    asked = {"cand": candidate, **judges}
    counted = {
        name: {
            "calls": len(lm.requests),
            "prompt_tokens": sum(words(r.plain_prompt()) for r in lm.requests),
            "completion_tokens": sum(
                words(lm.responses(r) if callable(lm.responses) else answer) for r in lm.requests
            ),
        }
        for name, lm in asked.items()
    }
    stages = {"cand": cost["extraction"], **cost["judging"]}
    for name, usage in stages.items():
        assert {key: usage[key] for key in counted[name]} == counted[name], name
        assert usage["cache_hits"] == 0 and usage["cached_prompt_tokens"] == 0
        assert usage["seconds"] >= 0 and usage["device_seconds"] is not None  # in-process
    assert counted["cand"]["calls"] == 3 and all(counted[j]["calls"] for j in judges)
    for name, usage in cost["judging"].items():  # the criteria add up to the judge
        assert set(usage["criteria"]) == {
            "faithfulness",
            "precision",
            "relevance",
            "comprehensiveness",
        }
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            assert sum(c[key] for c in usage["criteria"].values()) == usage[key], (name, key)

    def by_hand(name: str, input_price: float, output_price: float) -> float:
        return (
            counted[name]["prompt_tokens"] * input_price
            + counted[name]["completion_tokens"] * output_price
        ) / 1_000_000

    money = {
        "cand": by_hand("cand", 2.0, 4.0),
        "judge-0": by_hand("judge-0", 0.5, 1.5),
        "judge-1": by_hand("judge-1", 1.0, 3.0),
        "judge-2": by_hand("judge-2", 1.0, 3.0),
    }
    for name, usage in stages.items():
        assert usage["money"] == pytest.approx(money[name], abs=1e-6), name
    total = cost["total"]
    assert total["money"] == pytest.approx(sum(money.values()), abs=1e-6)
    assert total["calls"] == sum(c["calls"] for c in counted.values())
    triples = results["details"][TASK]["n_triples"]
    assert cost["triples"] == triples > 0
    assert cost["per_1k_triples"]["calls"] == pytest.approx(total["calls"] * 1000 / triples, 0.01)
    assert cost["per_1k_triples"]["money"] == pytest.approx(
        total["money"] * 1000 / triples, abs=1e-6
    )
    assert cost["currency"] == "EUR" and cost["unpriced"] == []
    assert results["config"]["prices"]["models"]["judge-a"]["cached"] == 0.25

    # `score` recomputes the same block from the samples (and the recorded prices) alone.
    folder = tmp_path / "cand"
    rescored = subprocess.run(
        [
            sys.executable,
            "-m",
            "finreflect_eval",
            "score",
            "--samples",
            str(folder),
            "--bootstrap_iters",
            "0",
            "--prices",
            str(price_file(tmp_path)),
        ],
        capture_output=True,
        text=True,
    )
    assert rescored.returncode == 0, rescored.stderr[-2000:]
    (path,) = folder.glob("results_*.json")
    again = json.loads(path.read_text())
    assert again["cost"] == results["cost"]
    assert "| cost | stage | model |" in rescored.stdout


def price_file(folder, prices=PRICES):
    path = folder / "prices.yaml"
    path.write_text(yaml.safe_dump(prices))
    return path


def panel_of_models(folder):
    """A panel of scripted judges on two judge models (`judge-a`, `judge-b`), by file."""
    judges = [
        {
            "name": f"judge-{n}",
            "model": model,
            "backend": "scripted",
            "model_args": {"responses": f"support.scripted_judges:{responder}"},
        }
        for n, (model, responder) in enumerate(
            [("judge-a", "accepts_all"), ("judge-b", "rejects_all"), ("judge-b", "gold_labels")]
        )
    ]
    path = folder / "panel.yaml"
    path.write_text(yaml.safe_dump({"panel": "cost-test", "judges": judges}))
    return path


def run_cli(cli, env, folder, output, cache, *extra):
    return cli(
        *("run", "--model", "cand", "--backend", "scripted", "--model-args"),
        f"responses={candidate_file(folder)}",
        *("--tasks", TASK, "--dataset", "sample", "--limit", "3", "--bootstrap_iters", "0"),
        *("--judges", str(panel_of_models(folder)), "--output-path", str(output)),
        *("--cache", str(cache), *extra),
        env=env,
    )


def test_a_rerun_from_the_cache_makes_no_new_call_and_says_so(cli, env, tmp_path):
    log = tmp_path / "judge-calls.log"
    env = {**env, "SCRIPTED_JUDGE_LOG": str(log)}
    cache = tmp_path / "cache.sqlite"
    prices = str(price_file(tmp_path))
    first = run_cli(cli, env, tmp_path, tmp_path / "first", cache, "--prices", prices)
    assert first.returncode == 0, first.stderr[-3000:]
    calls = len(log.read_text().splitlines())
    assert calls > 0
    second = run_cli(cli, env, tmp_path, tmp_path / "second", cache, "--prices", prices)
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(log.read_text().splitlines()) == calls  # no judge was asked again
    costs = [
        json.loads(next((tmp_path / run / "cand").glob("results_*.json")).read_text())["cost"][TASK]
        for run in ("first", "second")
    ]
    before, after = costs[0]["total"], costs[1]["total"]
    assert after["calls"] == 0 and after["cache_hits"] == before["calls"] > 0
    assert after["prompt_tokens"] == after["completion_tokens"] == 0
    assert after["money"] == 0 and after["seconds"] == 0 and after["device_seconds"] is None
    assert f"all {before['calls']} calls answered from the response cache" in second.stdout


def test_no_total_money_without_a_price_for_every_model(tmp_path):
    prices = {"models": {"cand": {"input": 1.0}}}  # no judge priced
    judges = [ScriptedModel("judge-a", responses=accepts_all) for _ in range(2)]
    results = Results.model_validate(
        simple_evaluate(
            ScriptedModel("cand", responses=[json.dumps(TRIPLES)]),
            tasks=TASK,
            dataset="sample",
            limit=2,
            judges=judges,
            prices=prices,
            bootstrap_iters=0,
            log_samples=False,
        )
    )
    cost = results.cost[TASK]
    assert cost.extraction.money is not None and cost.extraction.money > 0
    assert all(judge.money is None for judge in cost.judging.values())
    assert cost.total.money is None and cost.per_1k_triples.money is None
    assert cost.unpriced == ["judge-a"] and cost.currency == "USD"
    assert "no price for judge-a: no total money" in cost_table(results)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("models: {m: {input: -1}}", "models.m.input: Input should be greater than or equal"),
        ("models: {m: {inputs: 1}}", "models.m.inputs: Extra inputs are not permitted"),
        ("currency: EUR", "models: Field required"),
        ("models: [", "cannot read price table"),
        # A model listed twice: PyYAML alone would keep the last prices silently.
        ("models:\n  m: {input: 1}\n  m: {input: 2}\n", "key 'm' given twice"),
    ],
)
def test_a_wrong_price_table_is_one_line_before_any_call(cli, env, tmp_path, content, message):
    bad = tmp_path / "prices.yaml"
    bad.write_text(content)
    with pytest.raises(FinReflectError, match=message):
        Prices.load(bad)
    with pytest.raises(ArgumentValueError, match="prices: "):
        simple_evaluate(ScriptedModel("cand"), tasks=TASK, dataset="sample", prices=str(bad))
    output = tmp_path / "out"
    result = run_cli(cli, env, tmp_path, output, tmp_path / "cache.sqlite", "--prices", str(bad))
    assert result.returncode == 1 and message.split(":")[0] in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not output.exists()  # refused before the run began


def test_a_model_priced_twice_is_refused_naming_the_model_file_and_lines(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: EUR\nmodels:\n  cand: {input: 1}\n  cand: {input: 2}\n")
    with pytest.raises(FinReflectError) as raised:
        Prices.load(prices)
    assert str(raised.value) == (
        f"cannot read price table {prices}: line 4: key 'cand' given twice (first on line 3)"
    )


def test_a_normaliser_of_its_own_is_its_own_stage_at_its_own_prices(tmp_path):
    """A multi-pass task whose `normalizer_model` is another model: its calls are not the
    candidate's, and are priced at its model's prices (or named as unpriced)."""
    from finreflect_eval.pipeline.evaluator import evaluate
    from finreflect_eval.pipeline.judging import Panel
    from finreflect_eval.pipeline.run_config import RunConfig

    normaliser = tmp_path / "normalizer.json"
    normaliser.write_text(json.dumps([json.dumps(TRIPLES)]))
    tasks = multi_pass_with_normalizer(tmp_path, "norm-model", normaliser)
    config = RunConfig(
        model=ScriptedModel("cand", responses=[json.dumps(TRIPLES)]),
        tasks=["mp_two_models"],
        dataset="sample",
        limit=2,
        output_path=tmp_path / "out",
        include_paths=[tasks],
        bootstrap_iters=0,
        prices=Prices.parse({"models": {"cand": {"input": 1.0}, "judge-a": {"input": 1.0}}}),
    )
    judges = [ScriptedModel("judge-a", responses=accepts_all) for _ in range(2)]
    _, results = evaluate(config, Panel.from_models(judges))
    cost = results.cost["mp_two_models"]
    assert cost.extraction.model == "cand" and cost.extraction.calls == 2  # extract only
    assert cost.normalizer.model == "norm-model" and cost.normalizer.calls == 2
    assert cost.normalizer.money is None and cost.unpriced == ["norm-model"]
    assert cost.total.calls == 4 + sum(judge.calls for judge in cost.judging.values())
    assert cost.total.money is None  # not a partial sum


def test_what_a_call_does_not_know_leaves_the_sum_unknown():
    """A sample written before calls were timed, a server that does not say what it cached:
    the sums are unknown (None), never 0; device seconds are the in-process models' only; a
    call from the cache is a hit with its tokens apart; a count out of range is refused."""
    from pydantic import ValidationError

    from finreflect_eval.records import ModelCall
    from finreflect_eval.scoring.span_facts import usage_rows

    def call(**fields):
        return ModelCall(step="extract", text="{}", prompt_tokens=10, completion_tokens=2, **fields)

    timed = call(seconds=1.5, device_seconds=1.5, cached_prompt_tokens=4)
    (row,) = usage_rows([timed, timed], step=lambda c: c.step)
    assert (row["calls"], row["seconds"], row["device_seconds"]) == (2, 3.0, 3.0)
    assert row["cached_prompt_tokens"] == 8
    old = call()  # before seconds and cached tokens were counted
    (row,) = usage_rows([timed, old], step=lambda c: c.step)
    assert row["seconds"] is None and row["cached_prompt_tokens"] is None
    assert row["device_seconds"] == 1.5 and row["prompt_tokens"] == 20
    hit = call(cached=True, seconds=0.0)
    (row,) = usage_rows([hit], step=lambda c: c.step)
    assert (row["calls"], row["cache_hits"], row["cache_hit_tokens"]) == (0, 1, 12)
    assert row["prompt_tokens"] == 0 and row["seconds"] == 0.0
    for wrong in ({"cached_prompt_tokens": 11}, {"seconds": float("inf")}, {"seconds": -1}):
        with pytest.raises(ValidationError):
            call(**wrong)


def test_a_retried_call_carries_its_wall_and_device_time_alike():
    """An in-process model on one device: each call's device seconds are its wall seconds,
    a retried call's first attempt included; an identical request is a copy, with no time."""
    import time

    from finreflect_eval.models import GenerationRequest

    def slow(request):
        time.sleep(0.05)
        return "not JSON" if request.temperature == 0 else "{}"

    lm = ScriptedModel("m", responses=slow, max_retries=1, batch_size=2)
    asked = [GenerationRequest(prompt=p, schema={"type": "object"}) for p in ("a", "b", "a")]
    first, second, copy = lm.generate(asked)
    for result in (first, second):
        assert result.ok and result.attempts == 2
        assert result.seconds == pytest.approx(result.device_seconds, rel=0.05)
        assert result.seconds >= 0.1  # two answers of 0.05 s each, shared by the batch
    assert copy.cached and copy.seconds == 0 and copy.device_seconds is None
