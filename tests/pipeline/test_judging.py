"""`run`, `judge` and `score` end to end with scripted models (control flow only; no weights)."""

import contextlib
import csv
import json
import time
from pathlib import Path

import pytest
import yaml
from support.runs import candidate_file, panel_file, run_args

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.pipeline.judging import load_panel, triple_verdicts_model

PANEL = "scripted-test"


def test_run_writes_results_samples_and_review_queue_and_score_reproduces_it(cli, tmp_path, env):
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    tasks = ("finreflect_single_pass", "finreflect_multi_pass")
    result = cli(*run_args(tmp_path, panel, *tasks), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| finreflect_single_pass | single_pass | 3 | 100.0 [100.0, 100.0] |" in result.stdout
    folder = tmp_path / "out" / "candidate"
    (results_file,) = folder.glob(f"results_*_{PANEL}.json")
    results = json.loads(results_file.read_text())
    task = "finreflect_single_pass"
    entry, details = results["results"][task], results["details"][task]
    # two judges accept, one rejects: the majority accepts every triple; C: good, good, partial
    for criterion in ("faithfulness", "precision", "relevance", "comprehensiveness"):
        assert entry[f"{criterion},none"] == 100.0
    assert entry["triples_per_span,none"] == 2.0 and entry["sample_len"] == 3
    counts = {
        "n_items": 6,
        "n_scored": 6,
        "unanimous": 0,
        "split": 6,
        "no_majority": 0,
        "abstentions": 0,
    }
    assert details["criteria"]["faithfulness"]["items"] == counts
    assert details["criteria"]["precision"]["per_judge"]["judge-2"] == 0
    assert results["judges"]["panel"] == PANEL and not results["judges"]["official"]
    assert results["agreement"][task]["faithfulness"]["n_items"] == 6
    lm_eval_keys = {
        *("results", "group_subtasks", "configs", "versions", "n-shot"),  # no group: no groups
        *("higher_is_better", "n-samples", "config", "git_hash", "date", "task_hashes"),
        *("total_evaluation_time_seconds", "model_name"),
    }
    assert set(results) >= lm_eval_keys | {"agreement", "judges", "dataset", "details"}
    assert "groups" not in results
    assert results["dataset"]["fingerprint"] and results["format_version"] == 2

    # every split item is queued for review with each judge's verdict and reasoning
    (review,) = folder.glob(f"review_{task}_*_{PANEL}.jsonl")
    rows = [json.loads(line) for line in review.open()]
    assert len(rows) == 3 * (2 * 3 + 1)
    assert rows[0]["votes"]["judge-2"]["verdict"] == 0 and "span_text" not in rows[0]
    (spans,) = folder.glob(f"review_spans_{task}_*_{PANEL}.jsonl")
    texts = {span["span_id"]: span["text"] for span in map(json.loads, spans.open())}
    assert len(texts) == 3 and all(texts[row["span_id"]] for row in rows)
    with review.with_suffix(".csv").open() as file:
        assert len(list(csv.DictReader(file))) == len(rows)

    # the samples carry every vote; score recomputes the same numbers from them alone
    (samples,) = folder.glob(f"samples_{task}_*.jsonl")
    record = json.loads(samples.read_text().splitlines()[0])
    assert set(record["votes"][PANEL]["faithfulness"]) == {"judge-0", "judge-1", "judge-2"}
    assert len(record["judge_calls"][PANEL]) == 3 * 4
    results_file.unlink()
    rescored = cli("score", "--samples", str(folder), env=env)
    assert rescored.returncode == 0, rescored.stderr[-2000:]
    assert json.loads(results_file.read_text()) == results


def test_a_failing_judge_abstains_and_is_counted(cli, tmp_path, env):
    """Beyond --max-judge-failure-share a judge's failures stop scoring; within it (here: the
    share raised to 1) each failed call is an abstention, counted."""
    panel = panel_file(tmp_path, "accepts_all", "rejects_all", "broken")
    args = run_args(tmp_path, panel, "finreflect_single_pass")
    stopped = cli(*args, env=env)
    assert stopped.returncode == 1
    line = stopped.stderr.strip().splitlines()[-1]
    assert line.startswith(
        "finreflect-eval: error: task finreflect_single_pass: judge judge-2 failed 12 of its "
        "12 calls (more than --max-judge-failure-share 20%)"
    )
    assert not list((tmp_path / "out" / "candidate").glob("results_*.json"))
    result = cli(*args, "--max-judge-failure-share", "1", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(list((tmp_path / "out" / "candidate").glob("manifest_*.json"))) == 1  # resumed
    (results_file,) = (tmp_path / "out" / "candidate").glob("results_*.json")
    results = json.loads(results_file.read_text())
    entry = results["results"]["finreflect_single_pass"]
    details = results["details"]["finreflect_single_pass"]
    # 1-1 with an abstention: no majority, the conservative label (0) is taken
    assert entry["faithfulness,none"] == 0.0 and entry["comprehensiveness,none"] == 50.0
    assert details["criteria"]["faithfulness"]["items"]["abstentions"] == 6
    assert details["criteria"]["faithfulness"]["items"]["no_majority"] == 6
    assert details["judge_failures"] == 3 * 4


def test_a_killed_run_resumes_without_redoing_completed_calls(cli, tmp_path, env):
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all", batch_size=2)
    args = run_args(tmp_path, panel, "finreflect_single_pass")
    killed = cli(*args, env={**env, "SCRIPTED_JUDGE_DIE_AFTER": "5"})
    assert killed.returncode == 137  # died inside the third batch of the first judge
    resumed = cli(*args, env=env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    # 12 calls per judge; the first two batches (4 calls) of judge-0 were cached before the kill;
    # judge-1 is the same scripted model as judge-0, so the cache answers all of its calls
    calls = Path(env["SCRIPTED_JUDGE_LOG"]).read_text().count("call")
    assert calls == 5 + (12 - 4) + 0 + 12
    folder = tmp_path / "out" / "candidate"
    (samples,) = folder.glob("samples_finreflect_single_pass_*.jsonl")  # the same run continued
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert not any(step["cached"] for r in records for step in r["steps"])  # kept, not re-asked
    assert sum(call["cached"] for r in records for call in r["judge_calls"][PANEL]) == 4 + 12


def test_score_before_judge_says_what_to_do(cli, tmp_path, env):
    extracted = cli(
        *("extract", "--model", "candidate", "--backend", "scripted", "--model-args"),
        *(f"responses={candidate_file(tmp_path)}", "--tasks", "finreflect_single_pass"),
        *("--dataset", "sample", "--limit", "1", "--output-path", str(tmp_path / "out")),
        env=env,
    )
    assert extracted.returncode == 0, extracted.stderr[-2000:]
    result = cli("score", "--samples", str(tmp_path / "out" / "candidate"), env=env)
    assert result.returncode == 1 and "run `finreflect-eval judge" in result.stderr
    assert result.stderr.count("\n") == 1


def test_bundled_panels_load_and_an_unknown_one_is_named(tmp_path):
    paper = load_panel("paper")
    assert paper.official and len(paper.judges) == 3
    assert {j.model for j in paper.judges} == {
        "Qwen/Qwen3-235B-A22B",
        "openai/gpt-oss-120b",
        "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5",
    }
    assert len({j.model.split("/")[0] for j in load_panel("small").judges}) == 3
    assert not load_panel("demo").official
    with pytest.raises(Exception, match="unknown judge panel 'nope'"):
        load_panel("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("panel: x\njudges: [{name: a, model: m, temprature: 0}]\n")
    with pytest.raises(Exception, match=r"bad.yaml: field 'judges.0.temprature'"):
        load_panel(bad)


def test_verdict_schema_commits_before_it_justifies():
    schema = triple_verdicts_model(3).model_json_schema()
    verdicts = schema["properties"]["verdicts"]
    assert verdicts["minItems"] == verdicts["maxItems"] == 3
    item = schema["$defs"]["TripleVerdict"]
    assert list(item["properties"]) == ["verdict", "reasoning", "warning"]
    assert item["properties"]["reasoning"]["maxLength"] <= 160  # ~15 words, bounded


def test_endpoint_judges_run_concurrently(tmp_path, capsys):
    """Three judges behind three endpoints that each answer after a fixed delay: judging takes
    about as long as the slowest judge, not the sum of the three."""
    from support.chat_server import Reply, ScriptedServer, judge_answer

    from finreflect_eval.models import ModelSpec
    from finreflect_eval.pipeline import evaluator
    from finreflect_eval.pipeline.run_config import RunConfig

    config = RunConfig(
        model=ModelSpec("candidate", "scripted", {"responses": str(candidate_file(tmp_path))}),
        tasks=["finreflect_single_pass"],
        dataset="sample",
        limit=2,
        output_path=tmp_path / "out",
        cache=None,
    )
    extracted = evaluator.extract(config)
    delays = (0.4, 0.3, 0.2)  # per request; each judge makes 2 spans x 4 criteria = 8 calls
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(ScriptedServer.running([Reply(body=judge_answer, delay=delay)]))
            for delay in delays
        ]
        judges = [
            {
                "name": f"judge-{number}",
                "model": "m",
                "backend": "openai",
                "model_args": {"base_url": server.url, "max_concurrency": 1},
            }
            for number, server in enumerate(servers)
        ]
        panel = tmp_path / "endpoints.yaml"
        panel.write_text(yaml.safe_dump({"panel": "endpoints", "judges": judges}))
        started = time.perf_counter()
        run = evaluator.judge(extracted, load_panel(panel), cache=None)
        wall = time.perf_counter() - started
    seconds = run.manifest.judging["endpoints"].seconds
    assert [len(server.requests) for server in servers] == [8, 8, 8]
    assert all(server.peak == 1 for server in servers)  # max_concurrency per endpoint
    slowest, total = max(seconds.values()), sum(seconds.values())
    with capsys.disabled():
        print(
            f"\njudging wall {wall:.2f}s; slowest judge {slowest:.2f}s; sum {total:.2f}s; "
            f"wall/slowest {wall / slowest:.2f}; wall/sum {wall / total:.2f}"
        )
    assert slowest >= 8 * delays[0]
    assert wall < 1.25 * slowest < total


def test_paper_panel_at_three_endpoints_stays_official():
    """The docs/scaling.md recipe: each `paper` judge served by `vllm serve`, named by its URL."""
    from finreflect_eval.leaderboard.verify import is_official

    urls = {
        "qwen3-235b-a22b": "http://node1:8000/v1",
        "gpt-oss-120b": "http://node2:8000/v1",
        "nemotron-super-49b-v1.5": "http://node3:8000/v1",
    }
    paper = load_panel("paper")
    served = paper.at_endpoints(urls)
    assert [judge.backend for judge in served.judges] == ["openai"] * 3
    qwen, gpt_oss, nemotron = served.judges
    # Each judge's thinking goes with it: the server is asked for it (models._thinking).
    assert qwen.model_args == {"base_url": "http://node1:8000/v1", "think": "off"}
    assert gpt_oss.model_args == {"base_url": "http://node2:8000/v1", "reasoning_effort": "medium"}
    assert nemotron.system_prefix == "/no_think" and nemotron.model == paper.judges[2].model
    assert served.generation(qwen) == paper.generation(paper.judges[0])
    members = [judge.model_dump() for judge in served.judges]
    assert is_official("paper", members)
    assert not is_official("paper", members[:2])
    with pytest.raises(FinReflectError, match="has no judge 'qwen'"):
        paper.at_endpoints({"qwen": "http://x/v1"})


def test_judging_with_another_panel_writes_beside_the_first(tmp_path):
    from support.runs import scripted_run

    from finreflect_eval.pipeline import evaluator
    from finreflect_eval.runs.store import load_run

    first_panel = panel_file(tmp_path / "a", "accepts_all", "accepts_all", "rejects_all", name="a")
    first = scripted_run(tmp_path, "candidate", 2, first_panel)
    before = {path.name: path.read_bytes() for path in first.parent.glob("results_*")}
    second_panel = load_panel(
        panel_file(tmp_path / "b", "rejects_all", "rejects_all", "accepts_all", name="b")
    )
    run = load_run(next(first.parent.glob("manifest_*.json")))
    judged = evaluator.judge(run, second_panel, cache=None)
    evaluator.score(judged, "b")
    for name, content in before.items():  # panel a's results are untouched
        assert (first.parent / name).read_bytes() == content
    assert {p.name.rsplit("_", 1)[-1] for p in first.parent.glob("results_*.json")} == {
        "a.json",
        "b.json",
    }
    for record in load_run(next(first.parent.glob("manifest_*.json"))).records[
        "finreflect_smoke_single_pass"
    ]:
        assert set(record.judge_calls) == {"a", "b"}
