"""Tests of the Harmony parser: golden files, limits, robustness, and streaming == batch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._models.harmony_parse import (
    MAX_PAYLOAD_BYTES,
    HarmonyDelta,
    HarmonyMessage,
    HarmonyStreamParser,
    parse_harmony,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "harmony"
CASES = sorted(p.stem for p in FIXTURES.glob("*.txt"))
UPDATE = os.environ.get("GRAMAGENT_UPDATE_GOLDEN") == "1"


def _role(name: str) -> str | None:
    """Fixtures named ``transcript_*`` are whole conversations; the rest are completions."""
    return None if name.startswith("transcript_") else "assistant"


def _text(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", CASES)
def test_golden(name: str) -> None:
    """Each fixture parses to the messages recorded (and reviewed) in its .json file."""
    got = [m.to_dict() for m in parse_harmony(_text(name), role=_role(name))]
    expected_file = FIXTURES / f"{name}.json"
    if UPDATE:
        expected_file.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n",
                                 encoding="utf-8")
    assert got == json.loads(expected_file.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", CASES)
def test_golden_streamed_one_character_at_a_time(name: str) -> None:
    """Feeding a fixture one character at a time gives the batch messages."""
    text = _text(name)
    parser = HarmonyStreamParser(role=_role(name))
    for char in text:
        parser.feed(char)
    parser.finish()
    assert parser.messages == parse_harmony(text, role=_role(name))


def test_every_fixture_has_expectations() -> None:
    """No fixture is left without its expected messages (and no stale expectations)."""
    assert CASES, "no fixtures found"
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == CASES


# -- forms --------------------------------------------------------------------------------------


def test_completion_with_call() -> None:
    """The documented tool-call completion: chain of thought, then a call to a function."""
    text = (
        "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"location":"San Francisco"}<|call|>'
    )
    thought, call = parse_harmony(text)
    assert (thought.role, thought.channel, thought.content, thought.ended_by) == (
        "assistant", "analysis", "Need to use function get_weather.", "end")
    assert not thought.is_tool_call
    assert (call.channel, call.recipient, call.content_type) == (
        "commentary", "functions.get_weather", "<|constrain|>json")
    assert (call.name, call.arguments, call.ended_by) == (
        "get_weather", '{"location":"San Francisco"}', "call")
    assert call.error_type is None and call.warnings == () and call.complete
    assert call.offset == text.index("<|start|>")


@pytest.mark.parametrize(
    ("header", "recipient", "content_type"),
    [
        ("<|channel|>commentary to=functions.f <|constrain|>json", "functions.f",
         "<|constrain|>json"),
        ("<|channel|>commentary to=functions.f<|constrain|>json", "functions.f",
         "<|constrain|>json"),
        (" to=functions.f<|channel|>commentary <|constrain|>json", "functions.f",
         "<|constrain|>json"),
        ("assistant to=functions.f<|channel|>commentary json", "functions.f", "json"),
        ("<|channel|>commentary to=functions.f", "functions.f", None),
        ("<|channel|>commentary functions.f", "functions.f", None),
    ],
)
def test_recipient_and_content_type_positions(header: str, recipient: str,
                                              content_type: str | None) -> None:
    """The recipient may be in the role part or after the channel, glued or spaced."""
    (message,) = parse_harmony(header + '<|message|>{"x": 1}<|call|>')
    assert (message.channel, message.recipient, message.content_type) == (
        "commentary", recipient, content_type)
    assert (message.name, message.arguments) == ("f", '{"x": 1}')


def test_payload_limit_is_utf8_bytes() -> None:
    """The limit counts UTF-8 bytes: 8192 bytes pass, 8193 do not, multi-byte text counted."""
    def call(payload: str) -> HarmonyMessage:
        (message,) = parse_harmony(
            f"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{payload}<|call|>")
        return message

    filler = 'x' * (MAX_PAYLOAD_BYTES - len('{"a":""}'))
    at_limit = '{"a":"' + filler + '"}'
    assert len(at_limit.encode()) == MAX_PAYLOAD_BYTES
    assert call(at_limit).arguments == at_limit
    over = '{"a":"' + filler + 'x"}'
    assert call(over).error_type == "tool_payload_too_large"
    wide = '{"a":"' + "é" * 4095 + '"}'  # 4103 characters, 8198 bytes
    assert len(wide) < MAX_PAYLOAD_BYTES < len(wide.encode())
    rejected = call(wide)
    assert rejected.error_type == "tool_payload_too_large" and rejected.arguments is None
    assert "8198" in (rejected.error or "")


def test_oversized_payload_is_not_parsed() -> None:
    """Oversized malformed JSON is reported as too large (size is checked first)."""
    (message,) = parse_harmony(
        "<|channel|>commentary to=functions.f<|message|>{" + "x" * 9000 + "<|call|>")
    assert message.error_type == "tool_payload_too_large"


def test_errors_never_echo_arguments() -> None:
    """A rejected payload's error text does not contain argument values."""
    (message,) = parse_harmony(
        '<|channel|>commentary to=functions.f<|message|>{"secret": "hunter2",<|call|>')
    assert message.error_type == "tool_payload_parse_error"
    assert "hunter2" not in (message.error or "")


def test_malformed_message_keeps_neighbours() -> None:
    """One malformed header becomes one error item; the messages on both sides survive."""
    messages = parse_harmony(
        "<|channel|>analysis<|message|>before<|end|>"
        "<|start|>assistant<|channel|><|message|>broken<|end|>"
        "<|start|>assistant<|channel|>final<|message|>after<|return|>")
    assert [m.kind for m in messages] == ["message", "error", "message"]
    assert [m.content for m in messages] == ["before", "broken", "after"]
    assert messages[1].error_type == "malformed_header"
    assert messages[2].ended_by == "return"


def test_call_cut_off_at_end_of_text_is_flagged() -> None:
    """A call with no <|call|> before the end of the text is incomplete and says so."""
    (message,) = parse_harmony('<|channel|>commentary to=functions.f<|message|>{"a": 1}')
    assert message.is_tool_call and not message.complete and message.ended_by == "eof"
    assert any("not to be executed" in w for w in message.warnings)


def test_stub_form_of_the_adr() -> None:
    """The ADR's pseudo-marker form is a call to the named tool with its arguments."""
    (message,) = parse_harmony(
        '<|channel|>tool<|message|>{"tool":"sayHello","arguments":{"personName":"Ada"}}<|end|>')
    assert (message.name, message.arguments, message.ended_by) == (
        "sayHello", '{"personName":"Ada"}', "end")


@pytest.mark.parametrize(
    ("recipient", "channel", "name", "warned"),
    [
        ("functions.f", "commentary", "f", False),
        ("functions.f", "analysis", "f", True),
        ("functions.f", "final", "f", True),
        ("browser.open", "analysis", "browser.open", False),
        ("python", "analysis", "python", False),
        ("get_weather", "commentary", "get_weather", True),
    ],
)
def test_call_recipients(recipient: str, channel: str, name: str, warned: bool) -> None:
    """Function calls on any channel (warned off commentary), built-ins, bare names."""
    (message,) = parse_harmony(f"<|channel|>{channel} to={recipient}<|message|>{{}}<|call|>")
    assert message.name == name
    assert bool(message.warnings) is warned


@pytest.mark.parametrize("recipient", ["assistant", "all", "user"])
def test_non_call_recipients(recipient: str) -> None:
    """Messages addressed to the assistant, everyone or the user are not calls."""
    (message,) = parse_harmony(f"<|channel|>final to={recipient}<|message|>hi<|return|>")
    assert not message.is_tool_call and message.recipient == recipient


def test_tool_output_is_not_a_call() -> None:
    """A tool's output message has role tool and the tool as author, and is no call."""
    (message,) = parse_harmony(
        "<|start|>functions.f to=assistant<|channel|>commentary<|message|>42<|end|>", role=None)
    assert (message.role, message.author_name, message.recipient) == (
        "tool", "functions.f", "assistant")
    assert not message.is_tool_call


def test_empty_text() -> None:
    """Nothing in, nothing out."""
    assert parse_harmony("") == []
    assert parse_harmony("", role=None) == []


def test_to_dict_fields() -> None:
    """The JSON form has the documented fields, and call fields only for calls."""
    plain, call = parse_harmony(
        "<|channel|>analysis<|message|>a<|end|>"
        '<|start|>assistant<|channel|>commentary to=functions.f<|message|>{"a":1}<|call|>')
    assert set(plain.to_dict()) == {
        "role", "channel", "recipient", "content_type", "content", "ended_by", "offset"}
    assert call.to_dict()["name"] == "f" and call.to_dict()["arguments"] == '{"a":1}'


# -- streaming ------------------------------------------------------------------------------------


def _stream(text: str, cuts: list[int], role: str | None = "assistant"
            ) -> tuple[list[HarmonyMessage], list[HarmonyDelta | HarmonyMessage]]:
    parser = HarmonyStreamParser(role=role)
    items: list[HarmonyDelta | HarmonyMessage] = []
    bounds = [0, *sorted(set(cuts)), len(text)]
    for start, stop in zip(bounds, bounds[1:], strict=False):
        items.extend(parser.feed(text[start:stop]))
    items.extend(parser.finish())
    return parser.messages, items


SAMPLE = (
    "<|channel|>analysis<|message|>Think <|st about it.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"location": "Zürich"}<|call|>'
    "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{}<|end|>"
    "junk<|start|>assistant<|channel|><|message|>bad<|end|>"
    '<|start|>assistant<|channel|>tool<|message|>{"tool":"t","arguments":{}}<|end|>'
    "<|start|>assistant<|channel|>final<|message|>Done <|ret<|return|>"
    "<|start|>assistant<|channel|>final<|message|>cut off"
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(SAMPLE)), max_size=40))
def test_stream_equals_batch_on_random_chunkings(cuts: list[int]) -> None:
    """Any chunking yields the batch messages, and each message's deltas join to its content."""
    messages, items = _stream(SAMPLE, cuts)
    assert messages == parse_harmony(SAMPLE)
    assert [i for i in items if isinstance(i, HarmonyMessage)] == messages
    for message in messages:
        if message.kind == "message":
            deltas = [i.text for i in items
                      if isinstance(i, HarmonyDelta) and i.offset == message.offset]
            assert "".join(deltas) == message.content


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from([
            "<|start|>", "<|end|>", "<|call|>", "<|return|>", "<|message|>", "<|channel|>",
            "<|constrain|>", "assistant", "user", "functions.f to=assistant", " to=functions.f",
            "analysis", "final", "commentary", " json", '{"a": 1}', "[1]", "text", " ", "\n",
            "<|", "|>", "<", "é",
        ]),
        max_size=30,
    ),
    st.lists(st.integers(min_value=0, max_value=400), max_size=20),
    st.sampled_from(["assistant", None]),
)
def test_stream_equals_batch_on_random_text(pieces: list[str], cuts: list[int],
                                            role: str | None) -> None:
    """Token soup, cut anywhere: the streaming parser agrees with the batch parser, and each
    message's deltas, all released before it, join to its content."""
    text = "".join(pieces)
    messages, items = _stream(text, [c for c in cuts if c <= len(text)], role)
    assert messages == parse_harmony(text, role=role)
    pending: list[str] = []
    for item in items:
        if isinstance(item, HarmonyDelta):
            pending.append(item.text)
        else:
            if item.kind == "message":
                assert "".join(pending) == item.content
            pending = []
    assert pending == []


def test_deltas_hold_back_partial_tokens() -> None:
    """A chunk ending in the first characters of an end token releases the text before it."""
    parser = HarmonyStreamParser()
    assert parser.feed("<|channel|>final<|message|>Hel") == [
        HarmonyDelta(text="Hel", role="assistant", channel="final", recipient=None, offset=0)]
    assert [d.text for d in parser.feed("lo<|ret")] == ["lo"]  # type: ignore[union-attr]
    (message,) = parser.feed("urn|>")
    assert isinstance(message, HarmonyMessage) and message.content == "Hello"
    assert parser.finish() == []


def test_held_back_text_is_released_at_the_end() -> None:
    """Text that looked like the start of a token when the stream ended is content after all."""
    parser = HarmonyStreamParser()
    assert [d.text for d in parser.feed("<|channel|>final<|message|>abc<|re")] == ["abc"]  # type: ignore[union-attr]
    delta, message = parser.finish()
    assert isinstance(delta, HarmonyDelta) and delta.text == "<|re"
    assert isinstance(message, HarmonyMessage) and message.content == "abc<|re"
    assert parser.messages == [message] == parse_harmony("<|channel|>final<|message|>abc<|re")


def test_delta_of_text_that_only_looks_like_a_token() -> None:
    """Held-back characters are released once they turn out not to be a token."""
    parser = HarmonyStreamParser()
    parser.feed("<|channel|>final<|message|>a<|")
    assert [d.text for d in parser.feed("x")] == ["<|x"]  # type: ignore[union-attr]


STUB_LINE = ('<|start|>assistant<|channel|>tool<|message|>'
             '{"tool":"sayHello","arguments":{"personName":"Alice"}}<|end|>')
"""The ADR's stub marker line, written with its own ``<|start|>``."""


def test_a_completion_that_opens_with_start_has_no_implied_empty_message() -> None:
    """The stub marker line parsed as a completion is one message, the call, with no
    warnings (it gave an empty assistant message with two warnings first)."""
    expected = parse_harmony(STUB_LINE, role=None)
    for role in ("assistant", None):
        messages = parse_harmony(STUB_LINE, role=role)
        assert messages == expected
        assert len(messages) == 1
        assert messages[0].name == "sayHello" and not messages[0].warnings
    for cut in range(len(STUB_LINE) + 1):  # the stream parser agrees at every split
        parser = HarmonyStreamParser()
        parser.feed(STUB_LINE[:cut])
        parser.feed(STUB_LINE[cut:])
        parser.finish()
        assert parser.messages == expected, cut


def test_text_before_a_start_is_still_the_implied_message() -> None:
    messages = parse_harmony("hi<|start|>assistant<|message|>x<|end|>")
    assert [m.content for m in messages] == ["hi", "x"]
