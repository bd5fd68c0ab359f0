"""Tests of Tool, @tool, ToolLibrary and binding (late binding, A/B libraries)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, TypedDict

import pytest
from runtime_support import GREETING, hello_library

from gramagent._runtime.library import BoundAgent, Tool, ToolContext, ToolLibrary, tool
from gramagent._spec.model import Agent, Param, Signature, ToolSpec
from gramagent.errors import ToolError


def hello_spec(*, description: str = GREETING, name_type: str = "string") -> ToolSpec:
    """The sayHello spec as a gram file would give it: (personName::String {default})."""
    signature = Signature(params=(Param(
        name="personName", schema={"type": name_type, "default": "world"}, required=False),))
    return ToolSpec.create("sayHello", description, signature)


def agent_with(*specs: ToolSpec) -> Agent:
    return Agent(name="hello_world_agent", model="openai/gpt-4o-mini",
                 instruction="Greet the user with sayHello.", tools=specs)


def test_tool_decorator_derives_the_gram_contract() -> None:
    """@tool gives the description, the schema and the gram signature of the spec."""

    @tool
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting
        message for the given name.
        """
        return f"Hello, {personName}! Nice to meet you."

    spec = hello_spec()
    assert isinstance(sayHello, Tool)
    assert sayHello.name == "sayHello"
    assert sayHello.description == GREETING
    assert sayHello.schema == spec.schema
    assert sayHello.signature == spec.signature
    assert sayHello.signature is not None
    assert sayHello.signature.to_gram() == spec.signature.to_gram()
    assert sayHello(personName="Alice") == "Hello, Alice! Nice to meet you."
    assert not sayHello.is_async and sayHello.context_param is None


def test_tool_decorator_called_form_and_async_detection() -> None:
    """@tool(name=..., description=..., timeout=...) overrides; async functions are detected."""

    @tool(name="greet", description="Greets.", timeout=2.5)
    async def anything(who: str, ctx: ToolContext) -> str:
        return who

    assert anything.name == "greet" and anything.description == "Greets."
    assert anything.timeout == 2.5
    assert anything.is_async
    assert anything.context_param == "ctx"
    assert list(anything.schema["properties"]) == ["who"]
    assert anything.schema["required"] == ["who"]
    assert asyncio.run(anything.invoke(who="x", ctx=None)) == "x"


class SeriesDict(TypedDict):
    name: str
    y_field: str


@dataclass
class Range:
    low: int
    high: int = 10


def test_nested_types_reach_the_schema_and_dataclasses_are_rebuilt() -> None:
    """TypedDict and dataclass parameters become nested objects; converters rebuild them."""

    @tool
    def chart(series: list[SeriesDict], kind: Literal["bar", "line"], span: Range) -> str:
        """Draw a chart."""
        return f"{kind}:{len(series)}:{span.low}-{span.high}"

    props = chart.schema["properties"]
    assert props["series"]["items"]["required"] == ["name", "y_field"]
    assert props["kind"] == {"type": "string", "enum": ["bar", "line"]}
    assert props["span"]["properties"]["high"] == {"type": "integer", "default": 10}
    assert chart.signature is not None  # expressible as gram
    assert chart.converters["span"]({"low": 1}) == Range(low=1, high=10)


def test_tool_without_docstring_is_refused() -> None:
    """A tool needs a description: ToolError names the function and its file."""
    with pytest.raises(ToolError, match="no description") as info:

        @tool
        def nameless(x: int) -> int:
            return x

    assert "test_library.py" in str(info.value)


def test_hand_written_tool_gets_its_signature_from_the_schema() -> None:
    """Tool(name, description, schema, invoke) derives the signature from the schema."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    t = Tool("double", "Doubles n.", schema, lambda n: 2 * n)
    assert t.signature == Signature(params=(Param(name="n", schema={"type": "integer"}),))
    assert t(n=4) == 8


def test_invoke_must_be_callable() -> None:
    """A non-callable invoke is a ToolError at construction."""
    with pytest.raises(ToolError, match="callable"):
        Tool("x", "X.", {"type": "object", "properties": {}}, "not a function")  # type: ignore[arg-type]


def test_register_as_decorator_lookup_and_names() -> None:
    """register works bare, called and with Tool objects; duplicates need replace=True."""
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        return personName

    @library.register(name="echo")
    def echo_impl(text: str) -> str:
        """Echo."""
        return text

    assert library.names() == ("sayHello", "echo")
    assert library.lookup("echo") is echo_impl
    assert library.lookup("missing") is None
    assert "sayHello" in library and len(library) == 2
    with pytest.raises(ToolError, match="registered already"):
        library.register(sayHello)
    library.register(sayHello, replace=True)


def test_bind_builds_definitions_and_validators_once() -> None:
    """A bound agent holds definitions (with strict schemas) and compiled validators."""
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        return personName

    bound = library.bind(agent_with(hello_spec()))
    assert isinstance(bound, BoundAgent)
    assert bound.tools["sayHello"] is sayHello
    (definition,) = bound.definitions
    assert definition.name == "sayHello" and definition.description == GREETING
    assert definition.parameters == hello_spec().schema
    assert definition.strict_parameters is not None
    assert definition.strict_parameters["required"] == ["personName"]
    assert definition.strict_parameters["additionalProperties"] is False
    assert bound.validators["sayHello"]({"personName": 3}) != []
    assert bound.validators["sayHello"]({}) == []


def test_bind_reports_every_problem_at_once() -> None:
    """Missing tools (with near names), description and schema mismatches: one ToolError."""
    library = ToolLibrary()

    @library.register
    def sayHello(personName: int = 0) -> str:
        """Says hello."""
        return str(personName)

    @library.register
    def getWeather(city: str) -> str:
        """Weather."""
        return city

    specs = (
        hello_spec(),
        ToolSpec.create("getWether", "Weather.", Signature()),
        ToolSpec.create("translate", "Translate.", Signature()),
    )
    with pytest.raises(ToolError) as info:
        library.bind(agent_with(*specs))
    problems = info.value.problems
    assert len(problems) == 4, problems
    text = str(info.value)
    assert "4 tool binding problems" in text
    assert "'getWether'" in text and "did you mean 'getWeather'?" in text
    assert "'translate'" in text and "has no implementation" in text
    assert "description differs" in text and "Says hello." in text
    assert "schema differs" in text
    assert "/properties/personName/type: spec \"string\" vs implementation \"integer\"" in text


def test_check_description_false_ignores_descriptions_only() -> None:
    """Descriptions (tool and parameter) may differ; the schema must still match."""
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Something else entirely.

        Args:
            personName: a parameter description the spec does not have.
        """
        return personName

    agent = agent_with(hello_spec())
    with pytest.raises(ToolError):
        library.bind(agent)
    assert library.bind(agent, check_description=False).tools["sayHello"] is sayHello
    with pytest.raises(ToolError, match="schema differs"):
        library.bind(agent_with(hello_spec(name_type="integer")), check_description=False)


def test_schemas_compare_canonically() -> None:
    """Key order and the order of `required` do not make schemas differ."""
    spec = ToolSpec.create("pair", "Pair.", Signature(params=(
        Param(name="a", schema={"type": "string"}), Param(name="b", schema={"type": "integer"}),
    )))
    schema = {"required": ["b", "a"], "properties": {"b": {"type": "integer"},
                                                     "a": {"type": "string"}}, "type": "object"}
    library = ToolLibrary([Tool("pair", "Pair.", schema, lambda a, b: (a, b))])
    assert library.bind(agent_with(spec)).tools["pair"].name == "pair"


def test_two_libraries_bind_the_same_agent() -> None:
    """A/B: the same spec binds to different implementations from different libraries."""
    agent = agent_with(hello_spec())
    bound_a, bound_b = hello_library("Hello").bind(agent), hello_library("Howdy").bind(agent)
    assert bound_a.agent is bound_b.agent is agent
    assert bound_a.definitions == bound_b.definitions
    assert bound_a.tools["sayHello"](personName="Al") == "Hello, Al!"
    assert bound_b.tools["sayHello"](personName="Al") == "Howdy, Al!"


def test_tool_spec_round_trip_from_python() -> None:
    """Tool.spec() gives a spec that binds back to the same tool."""

    @tool
    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    library = ToolLibrary([add])
    bound = library.bind(agent_with(add.spec()))
    assert bound.tools["add"] is add


class Closable:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_conversation_state_is_per_conversation_and_bounded() -> None:
    """State dicts are per conversation id; the oldest is forgotten (and closed) first."""
    library = ToolLibrary(max_conversations=2)
    first = library.conversation_state("c1")
    first["session"] = session = Closable()
    assert library.conversation_state("c1") is first
    library.conversation_state("c2")
    library.conversation_state("c3")  # evicts c1, the least recently used
    assert session.closed
    assert library.conversation_state("c1") == {}
    other = library.conversation_state("c2")
    other["s"] = second = Closable()
    library.forget("c2")
    assert second.closed
    library.forget()


WEATHER_GRAM = """
[weather:Agent {
  instruction: "Use tools.",
  model: "openai/gpt-4o-mini"
} |
  [getWeather:Tool {description: "Current weather for a city."} |
    (city::String {description: "City name."})
    ==>(days::DAYS_TYPE {description: "How many days.", default: 3})
    ==>(unit::String {default: "C", enum: ["C", "F"]})
    ==>(::String)
  ]
]
"""


def test_python_function_and_gram_spec_are_compared() -> None:
    """A @tool function binds to the gram spec it matches and not to one that differs."""
    from gramagent._spec.gram.text import load_agent

    @tool
    def getWeather(city: str, days: int = 3, unit: Literal["C", "F"] = "C") -> str:
        """Current weather for a city.

        Args:
            city: City name.
            days: How many days.
        """
        return f"{city}: sunny for {days} days"

    library = ToolLibrary([getWeather])
    agent = load_agent(WEATHER_GRAM.replace("DAYS_TYPE", "Integer"))
    assert library.bind(agent).tools["getWeather"] is getWeather
    assert getWeather.signature == agent.tools[0].signature
    with pytest.raises(ToolError) as info:
        library.bind(load_agent(WEATHER_GRAM.replace("DAYS_TYPE", "Number")))
    assert '/properties/days/type: spec "number" vs implementation "integer"' in str(info.value)


def test_bind_is_cached_per_agent_until_the_library_changes() -> None:
    """Binding the same agent again is free; registering a tool invalidates the cache."""
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        return personName

    agent = agent_with(hello_spec())
    first = library.bind(agent)
    assert library.bind(agent) is first
    assert library.bind(agent, check_description=False) is not first
    assert library.bind(agent_with(hello_spec())) is not first  # an equal but new agent

    @library.register(replace=True, name="sayHello")
    def other(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        return "other"

    rebound = library.bind(agent)
    assert rebound is not first and rebound.tools["sayHello"] is other


def test_check_description_warn_binds_another_docstring_and_reports_it(
        caplog: pytest.LogCaptureFixture) -> None:
    """The A/B case: an implementation documented differently binds, with a warning; the
    model still sees the spec's description; names and schemas stay strict."""
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Greets someone informally."""
        return personName

    agent = agent_with(hello_spec())
    with caplog.at_level("WARNING", logger="gramagent._runtime.library"):
        bound = library.bind(agent, check_description="warn")
    assert bound.tools["sayHello"] is sayHello
    assert bound.definitions[0].description == GREETING
    assert len(bound.warnings) == 1 and "description differs" in bound.warnings[0]
    assert "Greets someone informally." in caplog.text
    assert library.bind(agent_with(hello_spec(description="Greets someone informally.")),
                        check_description="warn").warnings == ()
    with pytest.raises(ToolError, match="schema differs"):
        library.bind(agent_with(hello_spec(name_type="integer")), check_description="warn")


def test_an_unavailable_tool_says_why_when_an_agent_needs_it() -> None:
    """A tool marked unavailable (a missing extra) is reported with its reason, not as an
    unknown name; registering it later clears the mark."""
    from gramagent._spec.gram.text import load_gram

    agent = load_gram(
        '[a:Agent {instruction: "x", model: "openai/m"} |\n'
        '  [t:Tool {description: "T"} | (x::String)==>(::String)]\n]').agents[0]
    library = ToolLibrary()
    library.mark_unavailable("t", "it needs the 'tools' extra: pip install X")
    with pytest.raises(ToolError, match=r"tool 't' of agent 'a' is not available here: it "
                                        r"needs the 'tools' extra: pip install X"):
        library.bind(agent)
    assert dict(library.unavailable) == {"t": "it needs the 'tools' extra: pip install X"}

    @library.register(name="t", description="T")
    def impl(x: str) -> str:
        return x

    assert library.unavailable == {}
    assert library.bind(agent).tools["t"] is impl
