"""What a server answers about a thought (`models._answers.parse_answer`): the thought apart
(`reasoning_content` or `reasoning`), a think block a server left inline split off, OpenAI's
count of reasoning tokens, and a reply cut off inside its thought."""

import json

import httpx

from finreflect_eval.models._answers import parse_answer

ANSWER = json.dumps({"answer": "ok"})


def reply(message: dict, usage: dict | None = None, finish: str = "stop") -> httpx.Response:
    body = {"choices": [{"message": message, "finish_reason": finish}], "usage": usage or {}}
    return httpx.Response(200, json=body)


def content(choice):
    return choice["message"]["content"]


def test_a_thought_returned_apart_is_kept_apart():
    for field in ("reasoning_content", "reasoning"):
        usage = {"completion_tokens": 40, "completion_tokens_details": {"reasoning_tokens": 31}}
        done = parse_answer(reply({"content": ANSWER, field: " Weighing it. "}, usage), content)
        assert (done.text, done.thinking, done.thinking_ended) == (ANSWER, "Weighing it.", True)
        assert (done.completion_tokens, done.reasoning_tokens) == (40, 31)


def test_a_think_block_left_inline_is_split_off():
    done = parse_answer(reply({"content": f"<think>\nWeighing it.\n</think>\n\n{ANSWER}"}), content)
    assert (done.text, done.thinking, done.thinking_ended) == (ANSWER, "Weighing it.", True)
    plain = parse_answer(reply({"content": ANSWER}), content)  # no thought: as it came
    assert (plain.text, plain.thinking, plain.reasoning_tokens) == (ANSWER, None, 0)


def test_a_reply_cut_off_inside_its_thought_has_not_ended():
    cut = reply({"content": None, "reasoning_content": "Still weighing"}, finish="length")
    done = parse_answer(cut, content)
    assert (done.text, done.thinking, done.thinking_ended, done.error) == (
        "",
        "Still weighing",
        False,
        None,
    )
    inline = parse_answer(reply({"content": "<think>Still weighing"}, finish="length"), content)
    assert (inline.text, inline.thinking, inline.thinking_ended) == ("", "Still weighing", False)


def test_counts_a_server_gets_wrong_do_not_pass():
    usage = {"completion_tokens": 10, "completion_tokens_details": {"reasoning_tokens": 99}}
    done = parse_answer(reply({"content": ANSWER, "reasoning": "x"}, usage), content)
    assert done.reasoning_tokens == 10  # never more than the completion's
    bad = {"completion_tokens": 10, "completion_tokens_details": {"reasoning_tokens": True}}
    assert parse_answer(reply({"content": ANSWER}, bad), content).reasoning_tokens == 0


def test_json_that_quotes_a_think_tag_stays_whole():
    quoted = json.dumps({"answer": "the span says </think> here"})
    done = parse_answer(reply({"content": quoted}), content)
    assert (done.text, done.thinking, done.thinking_ended) == (quoted, None, True)


def test_a_budget_the_server_counted_to_is_a_cut():
    usage = {"completion_tokens": 90, "completion_tokens_details": {"reasoning_tokens": 64}}
    message = {"content": ANSWER, "reasoning_content": "x"}
    assert parse_answer(reply(message, usage), content, budget=64).thinking_cut
    assert not parse_answer(reply(message, usage), content, budget=65).thinking_cut
    assert not parse_answer(reply(message, usage), content).thinking_cut
