"""builtin_library(): its tools, their gram specs in examples/tools.gram, direct calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from extras import needs_tools
from tools_support import EXAMPLES

from gramagent._spec.gram.text import load_agent, load_file
from gramagent._spec.model import Agent
from gramagent.tools import available_tools, builtin_library
from gramagent.tools._workspace import DIRECT_CONVERSATION, STATE_KEY, Workspace

ALL = ["sayHello", "sayGoodbye", "python_repl", "load_csv", "describe_table", "chart"]


@needs_tools
def test_every_builtin_tool_is_available_here() -> None:
    """With the tools extra installed on Linux, the library holds every built-in tool."""
    assert available_tools() == dict.fromkeys(ALL, True)
    assert list(builtin_library().names()) == ALL


@needs_tools
def test_tools_gram_matches_the_implementations() -> None:
    """examples/tools.gram declares every built-in tool, and each spec binds."""
    document = load_file(EXAMPLES / "tools.gram")
    assert [t.name for t in document.tools] == ALL
    agent = Agent(name="everything", model="openai/x", instruction="use tools",
                  tools=document.tools)
    bound = builtin_library().bind(agent)
    assert list(bound.tools) == ALL


def test_tool_signatures_round_trip_to_the_same_schema() -> None:
    """Each tool's gram signature generates exactly the tool's schema."""
    for tool in builtin_library():
        assert tool.signature is not None, tool.name
        assert tool.signature.to_schema() == tool.schema, tool.name


@needs_tools
def test_analyst_example_binds() -> None:
    """examples/analyst.gram uses load_csv, describe_table, python_repl and chart."""
    agent = load_agent(EXAMPLES / "analyst.gram")
    assert [t.name for t in agent.tools] == ["load_csv", "describe_table", "python_repl",
                                             "chart"]
    builtin_library().bind(agent)


@needs_tools
def test_direct_calls_share_a_workspace_that_forget_removes() -> None:
    """Calls without a context use one temporary workspace; forget() deletes it."""
    library = builtin_library()
    greeting = library.lookup("sayHello")
    assert greeting is not None and greeting.invoke(personName="x").startswith("Hello, x")
    describe = library.lookup("describe_table")
    assert describe is not None
    with pytest.raises(ValueError, match="no tables yet"):
        describe.invoke(df_name="sales")
    workspace = library.conversation_state(DIRECT_CONVERSATION)[STATE_KEY]
    assert isinstance(workspace, Workspace) and workspace.temporary
    root = Path(workspace.root)
    assert root.is_dir()
    library.forget()
    assert not root.exists()


@needs_tools
def test_session_dir_is_used_and_kept(tmp_path: Path) -> None:
    """With session_dir, the workspace lives there and survives forget()."""
    library = builtin_library(session_dir=tmp_path / "session")
    describe = library.lookup("describe_table")
    assert describe is not None
    with pytest.raises(ValueError):
        describe.invoke(df_name="sales")
    library.forget()
    assert (tmp_path / "session" / "data").is_dir()
    assert not (tmp_path / "session" / "charts").exists()  # made by the first chart only
