"""How a reply ended, normalized across wire formats (issue 14 item 6): refusals, length,
content filters and Responses ``incomplete`` are told apart from a finished answer."""

from __future__ import annotations

from typing import Any

import pytest

from gramagent._models.chat_reply import parse_chat_reply
from gramagent._models.chat_stream import assemble_chat_chunks
from gramagent._models.responses import parse_responses_reply


def chat(message: dict[str, Any], finish: str | None = "stop") -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": finish}]}


def test_chat_refusal_is_the_text_and_the_reason() -> None:
    turn = parse_chat_reply(chat({"content": None, "refusal": "I can't help with that."}))
    assert (turn.text, turn.finish_reason) == ("I can't help with that.", "refusal")


def test_streamed_refusal_is_assembled() -> None:
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "refusal": "I can"}}]},
              {"choices": [{"index": 0, "delta": {"refusal": "'t."}, "finish_reason": "stop"}]}]
    turn = parse_chat_reply(assemble_chat_chunks(chunks))
    assert (turn.text, turn.finish_reason) == ("I can't.", "refusal")


@pytest.mark.parametrize("finish", ["length", "content_filter", "stop"])
def test_chat_finish_reasons_pass_through(finish: str) -> None:
    assert parse_chat_reply(chat({"content": "x"}, finish)).finish_reason == finish


def responses(output: list[dict[str, Any]], status: str = "completed",
              reason: str | None = None) -> dict[str, Any]:
    return {"status": status, "output": output,
            "incomplete_details": {"reason": reason} if reason else None}


def test_responses_refusal() -> None:
    turn = parse_responses_reply(responses([{"type": "message", "content": [
        {"type": "refusal", "refusal": "No."}]}]))
    assert (turn.text, turn.finish_reason) == ("No.", "refusal")


@pytest.mark.parametrize(("reason", "expected"), [("max_output_tokens", "length"),
                                                   (None, "length"),
                                                   ("content_filter", "content_filter")])
def test_responses_incomplete(reason: str | None, expected: str) -> None:
    turn = parse_responses_reply(responses([{"type": "message", "content": [
        {"type": "output_text", "text": "partial"}]}], "incomplete", reason))
    assert (turn.text, turn.finish_reason) == ("partial", expected)
