"""`run` with the openai backend against a real OpenAI-compatible server: llama.cpp's
`llama-server` serving the embedded Gemma 3 270M GGUF on 127.0.0.1, for the candidate and for the
demo panel's three judges as endpoints (`--judge-endpoints`), with `response_format` json_schema.
A recording proxy in front of the server logs every request body the server received."""

import json

import pytest
from support.chat_server import RecordingProxy

pytestmark = pytest.mark.slow


def test_run_against_llama_server(llama_server, cli, tmp_path):
    out = tmp_path / "out"
    with RecordingProxy.running(llama_server) as proxy:
        # The demo panel's three judges (greedy, two sampled seeds), each pointed at the server.
        judges = ("gemma-270m-greedy", "gemma-270m-sample-1", "gemma-270m-sample-2")
        endpoints = ",".join(f"{judge}={proxy.url}" for judge in judges)
        result = cli(
            *("run", "--model", "gemma-3-270m", "--backend", "openai"),
            *("--model-args", f"base_url={proxy.url}", "--tasks", "finreflect_smoke_single_pass"),
            *("--dataset", "sample", "--limit", "2", "--judges", "demo", "--no-cache"),
            *("--judge-endpoints", endpoints, "--output-path", str(out)),
        )
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(json.dumps(exchange) + "\n" for exchange in proxy.exchanges))
    print(f"\n{len(proxy.exchanges)} requests received by llama-server, bodies in {log}:")
    for exchange in proxy.exchanges:
        body = exchange["body"]
        schema = body["response_format"]["json_schema"]["schema"]
        print(
            f"  HTTP {exchange['status']} seed={body['seed']} temperature={body['temperature']}"
            f" max_tokens={body['max_tokens']} schema={sorted(schema['properties'])}"
            f" user={body['messages'][-1]['content'][:50]!r}"
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "HTTP Request" not in result.stderr  # httpx's per-request INFO lines stay quiet

    # Every request asked for a JSON schema, and the server answered each one.
    assert all(e["body"]["response_format"]["type"] == "json_schema" for e in proxy.exchanges)
    assert all(e["status"] == 200 for e in proxy.exchanges)
    (samples,) = (out / "gemma-3-270m").glob("samples_finreflect_smoke_single_pass_*.jsonl")
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(records) == 2
    calls = [call for r in records for call in r["steps"] + r["judge_calls"]["demo"]]
    # 2 extractions, then 3 judges x 4 criteria for each span with triples
    judged = sum(bool(r["triples"]) for r in records)
    assert len(calls) == len(proxy.exchanges) == 2 + 3 * 4 * judged
    # every output was valid against its schema (LM.generate validates each one)
    assert [call["error"] for call in calls] == [None] * len(calls)
    (results,) = (out / "gemma-3-270m").glob("results_*_demo.json")
    details = json.loads(results.read_text())["details"]["finreflect_smoke_single_pass"]
    assert details["judge_failures"] == 0
