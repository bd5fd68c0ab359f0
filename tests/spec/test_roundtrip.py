"""Round trips: gram text -> spec objects -> gram text, and spec objects -> JSON -> objects."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gramagent._spec.gram.docreader import DocumentReader
from gramagent._spec.gram.syntax import K_COMMENT, descendants, parse
from gramagent._spec.gram.text import format_gram, load_file, load_gram, to_gram
from gramagent._spec.model import Agent, GramDocument, ModelRef, Param, Signature, ToolSpec
from gramagent._spec.vocabulary import TYPE_NAMES

ROOT = Path(__file__).resolve().parent.parent.parent
GRAM_FILES = sorted([*ROOT.joinpath("examples").glob("*.gram"),
                     *ROOT.joinpath("tests", "fixtures").glob("*.gram")])


@pytest.mark.parametrize("path", GRAM_FILES, ids=lambda p: p.name)
def test_every_example_and_fixture_round_trips(path: Path) -> None:
    """read(write(read(file))) == read(file), and writing is stable."""
    document = load_file(path)
    text = to_gram(document)
    again = load_gram(text)
    assert again == document
    assert to_gram(again) == text


@pytest.mark.parametrize("path", GRAM_FILES, ids=lambda p: p.name)
def test_every_agent_round_trips_through_json(path: Path) -> None:
    """Agent.to_dict -> JSON text -> Agent.from_dict gives an equal agent."""
    for agent in load_file(path).agents:
        data = json.loads(json.dumps(agent.to_dict()))
        assert Agent.from_dict(data) == agent


def test_written_agent_reads_back_alone() -> None:
    """to_gram of one agent writes its tools inline."""
    agent = load_file(ROOT / "examples" / "hello_goodbye.gram").agent()
    text = to_gram(agent)
    assert text.count(":Tool {") == 2
    assert load_gram(text).agent() == agent


def test_tool_spec_round_trips_alone() -> None:
    """to_gram of a tool spec is a stand-alone tool pattern."""
    spec = load_file(ROOT / "tests" / "fixtures" / "chart.gram").tool("chart")
    assert load_gram(to_gram(spec)).tool("chart") == spec
    with pytest.raises(TypeError, match="takes an Agent, ToolSpec or GramDocument"):
        to_gram("text")  # type: ignore[arg-type]


def test_multi_line_instruction_is_fenced_when_exact() -> None:
    """Multi-line instructions are fenced; texts a fence would change are quoted."""
    base = dict(name="a", model=ModelRef.parse("openai/m"))
    fenced = Agent(instruction="Line one.\n  indented\n\nlast", **base)
    assert "instruction: ```\n  Line one.\n    indented\n\n  last\n  ```," in to_gram(fenced)
    for text in ("  all\n  indented", "has ``` inside\nx", "trailing\n", "tab\t\nx"):
        agent = Agent(instruction=text, **base)
        assert load_gram(to_gram(agent)).agent() == agent


# --------------------------------------------------------------------------------------------
# Property-based
# --------------------------------------------------------------------------------------------

_chars = st.characters(blacklist_categories=("Cs",))
_text = st.lists(st.one_of(_chars, st.sampled_from(["\n", "`", "```", "  ", "\t", "\r", '"'])),
                max_size=20).map("".join)
_solid = _text.filter(lambda t: t.strip() != "")
_names = st.one_of(
    st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.\-]{0,10}", fullmatch=True),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
            min_size=1, max_size=8).filter(lambda t: t.strip() != ""),
)
_models = st.builds(
    lambda provider, name: ModelRef(provider=provider, name=name),
    st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9./:_-]{0,20}", fullmatch=True),
)
_leaf_schemas = st.one_of(
    st.builds(dict, type=st.sampled_from(["string", "integer", "number", "boolean", "null"])),
    st.builds(lambda d: {"type": "string", "description": d}, _text),
    st.builds(lambda d: {"type": "integer", "default": d, "minimum": -5},
              st.integers(-5, 10**12)),
    st.builds(lambda e: {"type": "string", "enum": e}, st.lists(_text, min_size=1, max_size=3)),
    st.builds(lambda v: {"type": ["number", "null"], "default": v},
              st.none() | st.floats(allow_nan=False, allow_infinity=False)),
    st.just({}),
)
_schemas = st.recursive(_leaf_schemas, lambda inner: st.one_of(
    st.builds(lambda i, n: {"type": "array", "items": i, "minItems": n}, inner,
              st.integers(0, 3)),
    st.builds(lambda p: {"type": "object", "properties": p, "required": sorted(p)[:1]}
              if p else {"type": "object"}, st.dictionaries(_names, inner, max_size=3)),
), max_leaves=5)


@st.composite
def signatures(draw: st.DrawFn) -> Signature:
    params = draw(st.lists(st.tuples(_names, _schemas, st.booleans()), max_size=4,
                           unique_by=lambda t: t[0]))
    keywords = draw(st.sampled_from([{}, {"additionalProperties": False},
                                     {"description": "args"}]))
    return Signature(params=tuple(Param(name=n, schema=s, required=r) for n, s, r in params),
                     returns=draw(_schemas), keywords=keywords)


_tools = st.builds(lambda name, description, sig, approval: ToolSpec.create(
    name, description, sig, requires_approval=approval),
    _names, _solid, signatures(), st.booleans())


@st.composite
def agents(draw: st.DrawFn, shared: tuple[ToolSpec, ...] = ()) -> Agent:
    tools = draw(st.lists(st.one_of(_tools, st.sampled_from(shared)) if shared else _tools,
                          max_size=3, unique_by=lambda t: t.name))
    return Agent(name=draw(_names), model=draw(_models), instruction=draw(_solid),
                 description=draw(st.none() | _solid), tools=tuple(tools))


@st.composite
def documents(draw: st.DrawFn) -> GramDocument:
    shared = tuple(draw(st.lists(_tools, max_size=3, unique_by=lambda t: t.name)))
    found = draw(st.lists(agents(shared), max_size=3, unique_by=lambda a: a.name))
    return GramDocument(agents=tuple(found), tools=shared)


_settings = settings(max_examples=100, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.slow
@_settings
@given(agents())
def test_generated_agents_survive_write_then_read(agent: Agent) -> None:
    """Any valid agent written as gram reads back equal."""
    assert load_gram(to_gram(agent)).agent() == agent


@pytest.mark.slow
@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(documents())
def test_generated_documents_survive_write_then_read(document: GramDocument) -> None:
    """Documents with shared (referenced) and inline tools read back equal, on the reader's
    fast route and on its tree-walk route."""
    text = to_gram(document)
    assert load_gram(text) == document
    assert DocumentReader(text.encode(), None, fast=False).document() == document


@pytest.mark.slow
@_settings
@given(agents())
def test_generated_agents_survive_json(agent: Agent) -> None:
    """Agent.to_dict / from_dict through JSON text gives an equal agent."""
    data: Any = json.loads(json.dumps(agent.to_dict()))
    assert Agent.from_dict(data) == agent


# --------------------------------------------------------------------------------------------
# Gram texts with user-named types and comments (what `gramagent fmt` gets)
# --------------------------------------------------------------------------------------------

_BUILT_IN = ["String", "Integer", "Number", "Boolean", "Text", "Int"]
_type_names = st.from_regex(r"[A-Z][a-z]{1,5}", fullmatch=True).filter(
    lambda n: n not in TYPE_NAMES and n not in ("Agent", "Tool"))
_member_names = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True).filter(
    lambda n: n not in ("true", "false", "null"))
_comment_text = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")),
                        max_size=12).map(lambda t: ("// " + t).rstrip())


@st.composite
def _use(draw: st.DrawFn, known: list[str], *, result: bool = False) -> str:
    """The labels and record of a node: a built-in type, a named one (maybe with Null, or
    use-site keywords), or an array of either."""
    choice = draw(st.integers(0, 4 if known else 1))
    if choice == 0:
        return draw(st.sampled_from(_BUILT_IN)) + draw(st.sampled_from(["", ' {description: "d"}']))
    if choice == 1:
        return "Array {items: " + draw(st.sampled_from(known + _BUILT_IN)) + "}"
    name = draw(st.sampled_from(known))
    if choice == 2:
        return name
    if choice == 3:
        return name + ' {description: "use"}'
    return name + ":Null" + ("" if result else " {required: false}")


@st.composite
def _type_def(draw: st.DrawFn, name: str, known: list[str], indent: str) -> str:
    """A type pattern: an object with members, an alias of a built-in, or a named type with
    more keywords."""
    kind = draw(st.integers(0, 2 if known else 1))
    if kind == 0:
        return f"[{name}:String {{minLength: 1}}]"
    if kind == 2:
        return f'[{name}:{draw(st.sampled_from(known))} {{description: "based"}}]'
    members = draw(st.lists(_member_names, min_size=1, max_size=3, unique=True))
    lines = [f"{indent}  ({m}::{draw(_use(known))})" for m in members]
    return f"[{name}:Object |\n" + ",\n".join(lines) + f"\n{indent}]"


@st.composite
def _tool_text(draw: st.DrawFn, name: str, file_types: list[str]) -> str:
    local = draw(st.lists(_type_names, max_size=2, unique=True))
    visible = [t for t in file_types if t not in local]
    defs = []
    for i, type_name in enumerate(local):
        defs.append("  " + draw(_type_def(type_name, visible + local[:i], "  ")))
    known = visible + local
    params = draw(st.lists(_member_names, max_size=3, unique=True))
    nodes = [f"({p}::{draw(_use(known))})" for p in params] or ["()"]
    nodes.append(f"(::{draw(_use(known, result=True))})")
    path = "  " + "\n  ==>".join(nodes)
    return (f'[{name}:Tool {{description: "tool {name}"}} |\n'
            + ",\n".join([path, *defs]) + "\n]")


@st.composite
def named_texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A valid gram text with file-level and tool-level named types, in any order, and the
    comments put in it (on lines of their own and at line ends)."""
    file_types = draw(st.lists(_type_names, max_size=3, unique=True))
    blocks = [draw(_type_def(n, file_types[:i], "")) for i, n in enumerate(file_types)]
    tools = [f"t{i}" for i in range(draw(st.integers(1, 3)))]
    blocks += [draw(_tool_text(t, file_types)) for t in tools]
    used = draw(st.lists(st.sampled_from(tools), max_size=len(tools), unique=True))
    inline = draw(st.booleans())
    elements = [f"  {t}" for t in used]
    if inline:
        elements.append("  " + draw(_tool_text("inline", file_types)).replace("\n", "\n  "))
    agent = '[agent:Agent {\n  instruction: "i",\n  model: "openai/m"\n}'
    blocks.append(agent + (" |\n" + ",\n".join(elements) + "\n]" if elements else "]"))
    lines = "\n\n".join(draw(st.permutations(blocks))).split("\n")
    comments: list[str] = []
    ends = draw(st.sets(st.integers(0, len(lines) - 1), max_size=4))
    for row in sorted(ends):
        if lines[row].strip():
            text = draw(_comment_text)
            comments.append(text)
            lines[row] += "  " + text
    for row in sorted(draw(st.lists(st.integers(0, len(lines)), max_size=4)), reverse=True):
        text = draw(_comment_text)
        comments.append(text)
        lines.insert(row, text)
    return "\n".join(lines) + "\n", comments


def _comments(text: str) -> list[str]:
    src = text.encode()
    return [src[n.start_byte: n.end_byte].decode() for n in descendants(parse(src).root_node)
            if n.kind_id == K_COMMENT]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(named_texts())
def test_fmt_keeps_names_and_comments_of_generated_texts(case: tuple[str, list[str]]) -> None:
    """fmt(x) reads as x, fmt(fmt(x)) == fmt(x), every comment is kept (each of these
    places can take one), and every type keeps its name; file-level types stay at file
    level, written once."""
    text, comments = case
    formatted = format_gram(text)
    assert formatted.dropped == ()
    out = formatted.text
    document = load_gram(text)
    again = load_gram(out)
    assert again == document
    assert format_gram(out).text == out
    assert Counter(_comments(out)) == Counter(comments)
    assert [t.name for t in again.types] == [t.name for t in document.types]
    for named in document.types:
        assert ("\n" + out).count(f"\n[{named.name}:") == 1
    for spec in [*document.tools, *(t for a in document.agents for t in a.tools)]:
        written = next(a for a in again.agents).tools if spec.name == "inline" else again.tools
        twin = next(t for t in written if t.name == spec.name)
        assert ([t.name for t in twin.signature.named_types]
                == [t.name for t in spec.signature.named_types])
        assert twin.signature.type_refs == spec.signature.type_refs
