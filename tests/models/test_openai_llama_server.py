"""`run` with the openai backend against a real OpenAI-compatible server: llama.cpp's
`llama-server` serving the embedded Gemma 3 270M GGUF on 127.0.0.1, for the candidate and for the
demo panel's three judges as endpoints (`--judge-endpoints`), with `response_format` json_schema.
A recording proxy in front of the server logs every request body the server received."""

import json
from pathlib import Path

import pytest
from support.chat_server import RecordingProxy

pytestmark = pytest.mark.slow


def smoke_run(cli, proxy: RecordingProxy, out: Path, *model: str):
    """`run` of the smoke task on 2 spans with the candidate `model` (its flags), the demo
    panel's three judges (greedy, two sampled seeds) each pointed at the server's chat path."""
    judges = ("gemma-270m-greedy", "gemma-270m-sample-1", "gemma-270m-sample-2")
    endpoints = ",".join(f"{judge}={proxy.url}" for judge in judges)
    return cli(
        *("run", *model, "--tasks", "finreflect_smoke_single_pass"),
        *("--dataset", "sample", "--limit", "2", "--judges", "demo", "--no-cache"),
        *("--judge-endpoints", endpoints, "--output-path", str(out)),
    )


def test_run_against_llama_server(llama_server, cli, tmp_path):
    out = tmp_path / "out"
    with RecordingProxy.running(llama_server) as proxy:
        result = smoke_run(
            cli,
            proxy,
            out,
            *("--model", "gemma-3-270m", "--backend", "openai"),
            *("--model-args", f"base_url={proxy.url}"),
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

    # The cost block counts what the server said it counted, cached prompt tokens included
    # (`usage.prompt_tokens_details.cached_tokens`); a server's time is not the run's devices'.
    cost = json.loads(results.read_text())["cost"]["finreflect_smoke_single_pass"]
    usage = [e["usage"] for e in proxy.exchanges]
    total = cost["total"]
    assert total["calls"] == len(usage) and total["cache_hits"] == 0
    assert total["prompt_tokens"] == sum(u["prompt_tokens"] for u in usage)
    assert total["completion_tokens"] == sum(u["completion_tokens"] for u in usage)
    server_cached = sum(
        (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) for u in usage
    )
    assert total["cached_prompt_tokens"] == server_cached > 0  # the judges' shared prefix
    assert total["device_seconds"] is None and total["seconds"] > 0


def test_lm_evals_local_completions_against_llama_server(llama_server, cli, tmp_path):
    """lm-eval's `--model local-completions` with its endpoint URL: the extractions go to
    /v1/completions as one plain prompt, constrained by llama-server's own `json_schema` field
    (it ignores response_format there), and every output is valid."""
    out = tmp_path / "out"
    with RecordingProxy.running(llama_server) as proxy:
        result = smoke_run(
            cli,
            proxy,
            out,
            *("--model", "local-completions", "--model_args"),
            # lm-eval's own args; timeout: a busy 2-core machine must not cause retries
            f"model=gemma-3-270m,base_url={proxy.url}/completions,tokenized_requests=False,"
            "timeout=900",
        )
    assert result.returncode == 0, result.stderr[-3000:]
    extractions = [e for e in proxy.exchanges if e["path"] == "/v1/completions"]
    print(f"\n{len(proxy.exchanges)} requests, {len(extractions)} to /v1/completions:")
    for exchange in extractions:
        body = exchange["body"]
        print(f"  HTTP {exchange['status']} fields={sorted(body)} prompt={body['prompt'][:60]!r}")
    # The candidate's on /v1/completions (a text prompt, llama-server's schema field), the
    # judges' on chat; a request retried after a judge's timeout may appear twice.
    assert {e["path"] for e in proxy.exchanges} == {"/v1/completions", "/v1/chat/completions"}
    assert len(extractions) == 2
    for exchange in extractions:
        body = exchange["body"]
        assert exchange["status"] == 200 and "messages" not in body
        assert "<start_of_turn>" not in body["prompt"]  # plain: no chat template (Gemma's)
        assert body["json_schema"]["properties"] and "response_format" not in body
    (samples,) = (out / "gemma-3-270m").glob("samples_finreflect_smoke_single_pass_*.jsonl")
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    steps = [call for r in records for call in r["steps"]]
    judge_calls = [call for r in records for call in r["judge_calls"]["demo"]]
    assert len(steps) == 2 and len(judge_calls) == 3 * 4 * sum(bool(r["triples"]) for r in records)
    assert [call["error"] for call in steps + judge_calls] == [None] * (
        len(steps) + len(judge_calls)
    )
    (manifest,) = (out / "gemma-3-270m").glob("manifest_*.json")
    model = json.loads(manifest.read_text())["model"]
    assert (model["backend"], model["name"]) == ("openai-completions", "gemma-3-270m")
