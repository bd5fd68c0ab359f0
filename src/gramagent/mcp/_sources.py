"""Tool sources of the CLI's ``--tools``: Python libraries and MCP servers, mixed.

``--tools`` takes one source or several separated by ``;``::

    --tools 'gramagent.tools:builtin_library;mcp:stdio:python -m mcp_server_time'

A source starting with ``mcp:`` is an MCP server (see :mod:`gramagent.mcp._address`); any
other is a Python ``module:attribute``. Timeouts of the MCP sources come from the environment:
``GRAMAGENT_MCP_TIMEOUT`` (seconds per request, default 30) and
``GRAMAGENT_MCP_CONNECT_TIMEOUT`` (seconds to launch and shake hands, default 20).

This module does not import the MCP SDK: Python-only sources work without the ``mcp`` extra.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Mapping

from gramagent._runtime.library import ToolLibrary
from gramagent.errors import ConfigurationError, ToolError
from gramagent.mcp._address import is_server_reference
from gramagent.mcp._sdk import require_sdk

__all__ = ["SEPARATOR", "CombinedLibrary", "combine_libraries", "is_tool_sources",
           "load_tool_sources", "timeouts_from_env"]

SEPARATOR = ";"
"""Separates the sources of one ``--tools`` value."""

TIMEOUT_ENV = "GRAMAGENT_MCP_TIMEOUT"
CONNECT_TIMEOUT_ENV = "GRAMAGENT_MCP_CONNECT_TIMEOUT"


class CombinedLibrary(ToolLibrary):
    """The tools of several libraries in one; :meth:`close` closes those that can close."""

    def __init__(self, libraries: Iterable[ToolLibrary]) -> None:
        self.parts = tuple(libraries)
        super().__init__(itertools.chain.from_iterable(self.parts))

    def close(self) -> None:
        """Close every part that has a ``close`` (MCP server sessions)."""
        for part in self.parts:
            close = getattr(part, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()


def combine_libraries(libraries: Iterable[ToolLibrary]) -> ToolLibrary:
    """One library holding the tools of several (Python tools and MCP servers mixed).

    A single library is returned as is.

    Raises:
        ToolError: two libraries have a tool of the same name (every clash listed).
    """
    libraries = list(libraries)
    if len(libraries) == 1:
        return libraries[0]
    seen: dict[str, int] = {}
    clashes = []
    for i, lib in enumerate(libraries):
        for name in lib.names():
            if name in seen:
                clashes.append(f"tool {name!r} is in tool sources {seen[name] + 1} and {i + 1}")
            seen.setdefault(name, i)
    if clashes:
        raise ToolError(clashes)
    return CombinedLibrary(libraries)


def is_tool_sources(reference: str) -> bool:
    """Whether a ``--tools`` value needs this module: several sources, or an MCP server."""
    return SEPARATOR in reference or is_server_reference(reference)


def split_sources(reference: str) -> list[str]:
    """``reference`` cut at each ``;`` outside shell quotes (an MCP command's argument may
    hold one: ``mcp:stdio:sh -c 'a; b'``), each part as written, quotes kept."""
    parts, start, quote, escaped = [], 0, "", False
    for index, char in enumerate(reference):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == SEPARATOR:
            parts.append(reference[start:index])
            start = index + 1
    parts.append(reference[start:])
    return parts


def timeouts_from_env(env: Mapping[str, str] | None = None) -> dict[str, float]:
    """``timeout`` and ``connect_timeout`` of MCP sources, from the environment if set.

    Raises:
        ConfigurationError: a variable is not a positive number.
    """
    env = os.environ if env is None else env
    out: dict[str, float] = {}
    for key, var in (("timeout", TIMEOUT_ENV), ("connect_timeout", CONNECT_TIMEOUT_ENV)):
        text = env.get(var)
        if text is None or not text.strip():
            continue
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise ConfigurationError(f"{var}={text!r}: expected a positive number of seconds")
        out[key] = value
    return out


def load_tool_sources(reference: str, load_python: Callable[[str], ToolLibrary]
                      ) -> ToolLibrary:
    """The library of a ``--tools`` value of one or more sources.

    Args:
        reference: the ``--tools`` value.
        load_python: loads one ``module:attribute`` source.

    Raises:
        ConfigurationError: an empty source, a malformed one, or a missing ``mcp`` extra.
        MCPServerError: a server could not be launched, reached or listed in time.
        ToolError: two sources have a tool of the same name.
    """
    parts = [p.strip() for p in split_sources(reference)]
    if not all(parts):
        raise ConfigurationError(f"--tools {reference!r}: an empty source between "
                                 f"{SEPARATOR!r} separators")
    libraries: list[ToolLibrary] = []
    try:
        for part in parts:
            if is_server_reference(part):
                libraries.append(_server_library(part))
            else:
                libraries.append(load_python(part))
        return combine_libraries(libraries)
    except BaseException:
        for lib in libraries:
            close = getattr(lib, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
        raise


def _server_library(reference: str) -> ToolLibrary:
    require_sdk()  # before importing the module that imports the SDK
    from gramagent.mcp._client import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT
    from gramagent.mcp._library import mcp_library

    timeouts = timeouts_from_env()
    return mcp_library(reference, timeout=timeouts.get("timeout", DEFAULT_TIMEOUT),
                       connect_timeout=timeouts.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT))
