"""Tests for gramagent._spec.model: the spec objects and the data model's validation rules."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from gramagent._spec.model import Agent, GramDocument, ModelRef, Param, Signature, ToolSpec
from gramagent.errors import SpecError


def tool(name: str = "sayHello", description: str = "Greets") -> ToolSpec:
    return ToolSpec.create(name, description, '(personName::String {default:"world"})'
                                              "==>(::String)")


# --------------------------------------------------------------------------------------------
# ModelRef
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "provider", "name"), [
    ("openai/gpt-4o-mini", "openai", "gpt-4o-mini"),
    ("local/qwen2.5-coder-0.5b", "local", "qwen2.5-coder-0.5b"),
    ("gpt-4o", "openai", "gpt-4o"),
    ("local/models/x.gguf", "local", "models/x.gguf"),
    ("  openai/m  ", "openai", "m"),
])
def test_model_ref_parse(text: str, provider: str, name: str) -> None:
    """provider/name, the openai default, and only the first '/' separating."""
    ref = ModelRef.parse(text)
    assert (ref.provider, ref.name) == (provider, name)
    assert ModelRef.parse(str(ref)) == ref


@pytest.mark.parametrize("text", ["", "  ", "openai/", "/gpt-4o"])
def test_model_ref_parse_rejects_incomplete_text(text: str) -> None:
    """Empty text, or an empty provider or name, is a SpecError."""
    with pytest.raises(SpecError):
        ModelRef.parse(text)


# --------------------------------------------------------------------------------------------
# ToolSpec
# --------------------------------------------------------------------------------------------

def test_tool_spec_create_generates_the_schema() -> None:
    """The schema comes from the signature, given as text or as a Signature."""
    spec = tool()
    assert spec.schema == {"type": "object", "properties": {
        "personName": {"type": "string", "default": "world"}}}
    assert ToolSpec.create(spec.name, spec.description, spec.signature) == spec
    assert spec.signature.params == (Param(name="personName",
                                           schema={"type": "string", "default": "world"},
                                           required=False),)


def test_tool_spec_needs_a_name_and_a_description() -> None:
    """Empty (or blank) names and descriptions are refused at construction, both reported,
    whichever way the spec is built."""
    assert tool().problems() == []
    expected = ["tool name must not be empty", "tool ' ': description must not be empty"]
    with pytest.raises(SpecError) as info:
        tool(name=" ", description="")
    assert [d.message for d in info.value.diagnostics] == expected
    with pytest.raises(SpecError) as info:
        ToolSpec(name=" ", description="\n", signature=Signature())
    assert [d.message for d in info.value.diagnostics] == expected
    with pytest.raises(SpecError, match="description must not be empty"):
        dataclasses.replace(tool(), description="")
    with pytest.raises(SpecError, match="tool name must not be empty"):
        ToolSpec.from_dict({**tool().to_dict(), "name": ""})


def test_tool_spec_schema_is_derived_from_the_signature() -> None:
    """The schema cannot be given, and follows the signature through every change."""
    spec = tool()
    with pytest.raises(TypeError):
        ToolSpec(name="t", description="d", signature=Signature(),  # type: ignore[call-arg]
                 schema={"type": "object", "properties": {"other": {}}})
    other = Signature.parse("(n::Integer)==>(::String)")
    changed = dataclasses.replace(spec, signature=other)
    assert changed.schema == other.to_schema() == {
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_tool_spec_dict_round_trip() -> None:
    """to_dict holds the gram signature and the schema; from_dict rebuilds an equal spec."""
    spec = tool()
    data = spec.to_dict()
    assert data["signature"] == '(personName::String {default: "world"})==>(::String)'
    assert ToolSpec.from_dict(data) == spec


def test_signature_helpers() -> None:
    """Signature.parse / to_gram / to_schema are the signature module's functions."""
    sig = Signature.parse("(a::Int)==>(::Text)")
    assert sig == Signature(params=(Param(name="a", schema={"type": "integer"}),),
                            returns={"type": "string"})
    assert sig.to_gram() == "(a::Integer)==>(::String)"
    assert sig.to_schema() == {"type": "object", "properties": {"a": {"type": "integer"}},
                               "required": ["a"]}
    assert Signature().keywords == {}


# --------------------------------------------------------------------------------------------
# Agent
# --------------------------------------------------------------------------------------------

def test_agent_accepts_model_text_and_tool_lists() -> None:
    """model may be given as text, tools as any sequence."""
    agent = Agent(name="a", model="local/m", instruction="Hi.", tools=[tool()])  # type: ignore[arg-type]
    assert agent.model == ModelRef(provider="local", name="m")
    assert agent.tools == (tool(),)
    assert agent.tool("sayHello") == tool()
    with pytest.raises(KeyError):
        agent.tool("nope")


def test_agent_reports_every_rule_it_breaks() -> None:
    """Empty name, empty instruction and a duplicate tool are all in one SpecError."""
    with pytest.raises(SpecError) as info:
        Agent(name="", model=ModelRef.parse("m"), instruction="  ",
              tools=(tool(), tool(description="Other"), tool(name="other")))
    assert [d.message for d in info.value.diagnostics] == [
        "agent name must not be empty",
        "agent '<unnamed>': instruction must not be empty",
        "agent '<unnamed>': duplicate tool name 'sayHello'",
    ]


def test_tool_free_agent_is_valid() -> None:
    """An agent without tools is fine."""
    assert Agent(name="a", model=ModelRef.parse("m"), instruction="x").tools == ()


def test_agent_dict_round_trip() -> None:
    """to_dict / from_dict give back an equal agent; the description is optional."""
    agent = Agent(name="a", model=ModelRef.parse("openai/m"), instruction="Do.",
                  tools=(tool(),))
    data = agent.to_dict()
    assert "description" not in data
    assert data["model"] == "openai/m"
    assert Agent.from_dict(data) == agent
    described = Agent(name="b", model=ModelRef.parse("m"), instruction="x", description="D")
    assert Agent.from_dict(described.to_dict()) == described


def test_spec_errors_pickle() -> None:
    """Spec errors keep their diagnostics through pickling."""
    with pytest.raises(SpecError) as info:
        Agent(name="", model=ModelRef.parse("m"), instruction="")
    again = pickle.loads(pickle.dumps(info.value))
    assert again.diagnostics == info.value.diagnostics


# --------------------------------------------------------------------------------------------
# GramDocument
# --------------------------------------------------------------------------------------------

def test_gram_document_lookups() -> None:
    """agent() with and without a name, tool() by name, and their errors."""
    one = Agent(name="one", model=ModelRef.parse("m"), instruction="x")
    two = Agent(name="two", model=ModelRef.parse("m"), instruction="y")
    document = GramDocument(agents=(one, two), tools=(tool(),))
    assert document.agent("two") is two
    assert document.tool("sayHello") == tool()
    with pytest.raises(KeyError):
        document.tool("missing")
    with pytest.raises(SpecError, match="declares 2 agents"):
        document.agent()
    with pytest.raises(SpecError, match="no agent named 'three'"):
        document.agent("three")
    with pytest.raises(SpecError, match="declares no agent"):
        GramDocument().agent()
    assert GramDocument(agents=(one,)).agent() is one
