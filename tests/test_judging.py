"""`run`, `judge` and `score` end to end with scripted models (control flow only; no weights)."""

import contextlib
import csv
import json
import time
from pathlib import Path

import pytest
import yaml

from finreflect_eval.errors import FinReflectError
from finreflect_eval.judging import load_panel, triple_verdicts_model

TESTS = Path(__file__).parent
TRIPLES = {"triples": [
    {"subject": "AAPL", "subject_type": "ORG", "relation": "Produces", "object": "iPhone",
     "object_type": "PRODUCT"},
    {"subject": "AAPL", "subject_type": "ORG", "relation": "Operates_In", "object": "China",
     "object_type": "GPE"},
]}  # fmt: skip


@pytest.fixture
def env(tmp_path):
    return {"PYTHONPATH": str(TESTS), "SCRIPTED_JUDGE_LOG": str(tmp_path / "judge_calls.log")}


def panel_file(tmp_path, *responders, batch_size=8):
    lines = ["panel: scripted-test", "judges:"]
    for number, responder in enumerate(responders):
        lines += [f"  - name: judge-{number}", "    model: scripted", "    backend: scripted",
                  f"    model_args: {{responses: 'scripted_judges:{responder}', "
                  f"batch_size: {batch_size}}}"]  # fmt: skip
    path = tmp_path / "panel.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_args(tmp_path, panel, *tasks):
    outputs = tmp_path / "candidate.json"
    outputs.write_text(json.dumps([json.dumps(TRIPLES)]))
    return ["run", "--model", "candidate", "--backend", "scripted",
            "--model-args", f"responses={outputs}", "--tasks", *tasks, "--dataset", "sample",
            "--limit", "3", "--judges", str(panel),
            "--output-path", str(tmp_path / "out")]  # fmt: skip


def test_run_writes_results_samples_and_review_queue_and_score_reproduces_it(cli, tmp_path, env):
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    tasks = ("finreflect_single_pass", "finreflect_multi_pass")
    result = cli(*run_args(tmp_path, panel, *tasks), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| finreflect_single_pass | single_pass | 3 | 100.0 [100.0, 100.0] |" in result.stdout
    folder = tmp_path / "out" / "candidate"
    (results_file,) = folder.glob("results_*.json")
    results = json.loads(results_file.read_text())
    entry = results["results"]["finreflect_single_pass"]
    # two judges accept, one rejects: the majority accepts every triple; C: good, good, partial
    assert entry["faithfulness"] == entry["precision"] == entry["relevance"] == 100.0
    assert entry["comprehensiveness"] == 100.0 and entry["triples_per_span"] == 2.0
    counts = {"n_items": 6, "n_scored": 6, "unanimous": 0, "split": 6, "no_majority": 0,
              "abstentions": 0}  # fmt: skip
    assert entry["items"]["faithfulness"] == counts
    assert results["judges"]["per_judge"]["finreflect_single_pass"]["judge-2"]["precision"] == 0
    assert results["judges"]["panel"] == "scripted-test" and not results["judges"]["official"]
    assert results["agreement"]["finreflect_single_pass"]["faithfulness"]["n_items"] == 6
    assert set(results) >= {"results", "groups", "configs", "versions", "n-samples", "config",
                            "git_hash", "date", "task_hashes", "total_evaluation_time_seconds",
                            "agreement", "judges", "dataset"}  # fmt: skip
    assert results["dataset"]["fingerprint"]

    # every split item is queued for review with each judge's verdict and reasoning
    rows = [json.loads(line) for line in (folder / "review_finreflect_single_pass.jsonl").open()]
    assert len(rows) == 3 * (2 * 3 + 1)
    assert rows[0]["votes"]["judge-2"]["verdict"] == 0 and rows[0]["span_text"]
    with (folder / "review_finreflect_single_pass.csv").open() as file:
        assert len(list(csv.DictReader(file))) == len(rows)

    # the samples carry every vote; score recomputes the same numbers from them alone
    (samples,) = folder.glob("samples_finreflect_single_pass_*.jsonl")
    record = json.loads(samples.read_text().splitlines()[0])
    assert set(record["votes"]["faithfulness"]) == {"judge-0", "judge-1", "judge-2"}
    assert len(record["judge_calls"]) == 3 * 4
    results_file.unlink()
    rescored = cli("score", "--samples", str(folder), env=env)
    assert rescored.returncode == 0, rescored.stderr[-2000:]
    assert json.loads(results_file.read_text()) == results


def test_a_failing_judge_abstains_and_is_counted(cli, tmp_path, env):
    panel = panel_file(tmp_path, "accepts_all", "rejects_all", "broken")
    result = cli(*run_args(tmp_path, panel, "finreflect_single_pass"), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    (results_file,) = (tmp_path / "out" / "candidate").glob("results_*.json")
    entry = json.loads(results_file.read_text())["results"]["finreflect_single_pass"]
    # 1-1 with an abstention: no majority, the conservative label (0) is taken
    assert entry["faithfulness"] == 0.0 and entry["comprehensiveness"] == 50.0
    assert entry["items"]["faithfulness"]["abstentions"] == 6
    assert entry["items"]["faithfulness"]["no_majority"] == 6
    assert entry["judge_failures"] == 3 * 4


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
    newest = sorted(folder.glob("samples_finreflect_single_pass_*.jsonl"))[-1]
    records = [json.loads(line) for line in newest.read_text().splitlines()]
    assert all(step["cached"] for r in records for step in r["steps"])  # extraction not redone
    assert sum(call["cached"] for r in records for call in r["judge_calls"]) == 4 + 12


def test_score_before_judge_says_what_to_do(cli, tmp_path, env):
    outputs = tmp_path / "candidate.json"
    outputs.write_text(json.dumps([json.dumps(TRIPLES)]))
    extracted = cli("extract", "--model", "candidate", "--backend", "scripted", "--model-args",
                    f"responses={outputs}", "--tasks", "finreflect_single_pass", "--limit", "1",
                    "--output-path", str(tmp_path / "out"), env=env)  # fmt: skip
    assert extracted.returncode == 0, extracted.stderr[-2000:]
    result = cli("score", "--samples", str(tmp_path / "out" / "candidate"), env=env)
    assert result.returncode == 1 and "run `finreflect-eval judge" in result.stderr
    assert result.stderr.count("\n") == 1


def test_bundled_panels_load_and_an_unknown_one_is_named(tmp_path):
    paper = load_panel("paper")
    assert paper.official and len(paper.judges) == 3
    assert {j.model for j in paper.judges} == {
        "Qwen/Qwen3-235B-A22B", "openai/gpt-oss-120b", "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5"
    }  # fmt: skip
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
    from chat_server import Reply, ScriptedServer, judge_answer

    from finreflect_eval import evaluator
    from finreflect_eval.models import ModelSpec

    outputs = tmp_path / "candidate.json"
    outputs.write_text(json.dumps([json.dumps(TRIPLES)]))
    config = evaluator.RunConfig(
        model=ModelSpec("candidate", "scripted", {"responses": str(outputs)}),
        tasks=["finreflect_single_pass"],
        dataset="sample",
        limit=2,
        output_path=tmp_path / "out",
        cache=None,
    )
    manifest = evaluator.extract(config)
    delays = (0.4, 0.3, 0.2)  # per request; each judge makes 2 spans x 4 criteria = 8 calls
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(ScriptedServer.running([Reply(body=judge_answer, delay=delay)]))
            for delay in delays
        ]
        judges = [
            {"name": f"judge-{number}", "model": "m", "backend": "openai",
             "model_args": {"base_url": server.url, "max_concurrency": 1}}
            for number, server in enumerate(servers)
        ]  # fmt: skip
        panel = tmp_path / "endpoints.yaml"
        panel.write_text(yaml.safe_dump({"panel": "endpoints", "judges": judges}))
        started = time.perf_counter()
        run = evaluator.judge(manifest, str(panel), cache=None)
        wall = time.perf_counter() - started
    seconds = run.manifest["judging"]["seconds"]
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
    """The README recipe: each `paper` judge served by `vllm serve`, named by its base URL."""
    from finreflect_eval.leaderboard import _is_official

    urls = {
        "qwen3-235b-a22b": "http://node1:8000/v1",
        "gpt-oss-120b": "http://node2:8000/v1",
        "nemotron-super-49b-v1.5": "http://node3:8000/v1",
    }
    paper = load_panel("paper")
    served = paper.at_endpoints(urls)
    assert [judge.backend for judge in served.judges] == ["openai"] * 3
    qwen, gpt_oss, nemotron = served.judges
    assert qwen.model_args == {
        "base_url": "http://node1:8000/v1",
        "extra_body": {"chat_template_kwargs": {"enable_thinking": False}},
    }
    assert gpt_oss.model_args == {"base_url": "http://node2:8000/v1"}
    assert nemotron.system_prefix == "/no_think" and nemotron.model == paper.judges[2].model
    assert served.generation(qwen) == paper.generation(paper.judges[0])
    members = [judge.model_dump() for judge in served.judges]
    assert _is_official({"panel": "paper", "members": members})
    assert not _is_official({"panel": "paper", "members": members[:2]})
    with pytest.raises(FinReflectError, match="has no judge 'qwen'"):
        paper.at_endpoints({"qwen": "http://x/v1"})
