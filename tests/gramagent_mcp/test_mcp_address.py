"""The text form of MCP servers (``mcp:stdio:...``, ``mcp:http://...``) and ``--tools`` lists."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent.errors import ConfigurationError
from gramagent.mcp import HttpServer, StdioServer, parse_server
from gramagent.mcp._address import is_server_reference
from gramagent.mcp._sources import is_tool_sources, timeouts_from_env


def test_stdio_command_is_split_like_a_shell() -> None:
    server = parse_server("mcp:stdio:python -m mcp_server_time --local-timezone 'Europe/Paris'")
    assert server == StdioServer(command="python",
                                 args=("-m", "mcp_server_time", "--local-timezone",
                                       "Europe/Paris"))
    assert str(server) == "python -m mcp_server_time --local-timezone Europe/Paris"


def test_prefix_is_optional_and_urls_are_http_servers() -> None:
    assert parse_server("stdio:uvx x") == StdioServer(command="uvx", args=("x",))
    assert parse_server("mcp:http://127.0.0.1:9/mcp") == HttpServer(url="http://127.0.0.1:9/mcp")
    assert parse_server("https://example.org/mcp") == HttpServer(url="https://example.org/mcp")
    assert parse_server(["a b", "c"]) == StdioServer(command="a b", args=("c",))


@pytest.mark.parametrize("text, fragment", [
    ("mcp:stdio:", "no command"),
    ("mcp:stdio:python 'unclosed", "cannot split"),
    ("mcp:ftp://host/x", "expected 'mcp:stdio:COMMAND"),
    ("mcp:http://", "no host"),
])
def test_malformed_references_are_configuration_errors(text: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        parse_server(text)


def test_which_tools_values_are_sources() -> None:
    assert is_server_reference(" mcp:stdio:x")
    assert not is_server_reference("gramagent.tools:builtin_library")
    assert is_tool_sources("a:b;c:d")
    assert not is_tool_sources("gramagent.tools:builtin_library")


def test_timeouts_come_from_the_environment() -> None:
    env = {"GRAMAGENT_MCP_TIMEOUT": "2.5", "GRAMAGENT_MCP_CONNECT_TIMEOUT": "7"}
    assert timeouts_from_env(env) == {"timeout": 2.5, "connect_timeout": 7.0}
    assert timeouts_from_env({}) == {}
    with pytest.raises(ConfigurationError, match="GRAMAGENT_MCP_TIMEOUT"):
        timeouts_from_env({"GRAMAGENT_MCP_TIMEOUT": "-1"})


_WORD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(_WORD, min_size=1, max_size=5))
def test_any_command_round_trips_through_the_text_form(words: list[str]) -> None:
    server = parse_server("mcp:stdio:" + shlex.join(words))
    assert isinstance(server, StdioServer)
    assert [server.command, *server.args] == words
    assert parse_server("mcp:stdio:" + str(server)) == server
