"""``gramagent mcp import``: gram specs for a server's tools that bind to them as they are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_servers import REF_SCHEMA, TIMEZONE_SCHEMA
from mcp_support import TIME_SERVER

from gramagent import Agent, load_gram
from gramagent._runtime.library import canonical_schema
from gramagent.mcp import import_specs, mcp_library
from gramagent.mcp._import import specs_from_tools

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _gramagent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gramagent", *args], capture_output=True,
                          text=True, timeout=90)


def test_imported_specs_bind_to_the_server_they_came_from(tmp_path: Path) -> None:
    out = tmp_path / "time_tools.gram"
    done = _gramagent("mcp", "import", TIME_SERVER, "--output", str(out))
    assert done.returncode == 0, done.stderr
    document = load_gram(out.read_text())
    assert [t.name for t in document.tools] == ["get_current_time", "convert_time"]
    agent = Agent(name="a", model="openai/x", instruction="tell the time",
                  tools=document.tools)
    with mcp_library(TIME_SERVER) as library:
        bound = library.bind(agent)  # raises if any spec differs from the server's contract
    assert set(bound.tools) == {"get_current_time", "convert_time"}


def test_import_prints_to_stdout_and_keeps_only_the_named_tool() -> None:
    done = _gramagent("mcp", "import", TIME_SERVER, "--tool", "convert_time")
    assert done.returncode == 0, done.stderr
    assert "[convert_time:Tool" in done.stdout and "get_current_time" not in done.stdout
    assert load_gram(done.stdout).tools[0].schema["required"] == [
        "source_timezone", "time", "target_timezone"]


def test_an_inexpressible_schema_is_reported_not_changed(clock_url: str) -> None:
    done = _gramagent("mcp", "import", clock_url)
    assert done.returncode == 1
    assert [t.name for t in load_gram(done.stdout).tools] == ["get_current_time"]
    assert "left out: tool 'lookup'" in done.stderr
    assert "$ref" in done.stderr or "$defs" in done.stderr
    assert "// left out: tool 'lookup'" in done.stdout


def test_each_unwritable_tool_has_its_reason() -> None:
    listed = [
        types.Tool(name="ok", description="fine", input_schema=TIMEZONE_SCHEMA),
        types.Tool(name="refs", description="uses $ref", input_schema=REF_SCHEMA),
        types.Tool(name="mute", description=None, input_schema={"type": "object"}),
        types.Tool(name="pattern", description="bad pattern", input_schema={
            "type": "object", "properties": {"x": {"type": "string", "pattern": "("}}}),
    ]
    imported = specs_from_tools(listed)
    assert [s.name for s in imported.specs] == ["ok"]
    assert len(imported.problems) == 3
    refs, mute, pattern = imported.problems
    assert refs.startswith("tool 'refs': its input schema cannot be written in gram")
    assert mute == "tool 'mute': the server gives no description, and a gram tool needs one"
    assert pattern.startswith("tool 'pattern':")


def test_a_tool_the_server_lacks_is_a_problem_of_the_import() -> None:
    imported = import_specs(TIME_SERVER, only=["get_current_time", "get_weather"])
    assert [s.name for s in imported.specs] == ["get_current_time"]
    assert imported.problems == ("tool 'get_weather': the server has no such tool",)


_TYPES = st.sampled_from(["string", "integer", "number", "boolean"])
_PROPERTY = st.fixed_dictionaries(
    {"type": _TYPES},
    optional={"description": st.text(max_size=20), "title": st.text(max_size=10),
              "$ref": st.just("#/$defs/X"), "discriminator": st.just({"propertyName": "k"})})
_SCHEMA = st.builds(
    lambda props, required: {"type": "object", "properties": props,
                             "required": [n for n in props if n in required]},
    st.dictionaries(st.text(min_size=1, max_size=8), _PROPERTY, max_size=4),
    st.sets(st.text(min_size=1, max_size=8), max_size=4))


@settings(max_examples=40, deadline=None)
@given(st.lists(_SCHEMA, min_size=1, max_size=4))
def test_a_tool_is_written_exactly_or_reported_never_changed(
        schemas: list[dict[str, Any]]) -> None:
    listed = [types.Tool(name=f"t{i}", description="d", input_schema=s)
              for i, s in enumerate(schemas)]
    imported = specs_from_tools(listed)
    written = {spec.name: spec for spec in imported.specs}
    reported = {p.split("'")[1] for p in imported.problems}
    assert written.keys() | reported == {t.name for t in listed}
    assert not written.keys() & reported
    for t in listed:
        if t.name in written:
            assert canonical_schema(written[t.name].schema) == canonical_schema(t.input_schema)
        else:  # only schemas gram cannot write are reported: these keywords, or a NUL name
            props = t.input_schema["properties"]
            assert any("$ref" in p or "discriminator" in p for p in props.values()) \
                or any("\x00" in name for name in props)
