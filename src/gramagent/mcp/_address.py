"""Where an MCP server is: a command to launch (stdio) or a streamable HTTP URL.

The text form, used by the CLI's ``--tools`` and by ``gramagent mcp import``::

    mcp:stdio:python -m mcp_server_time --local-timezone Europe/Paris
    mcp:http://127.0.0.1:8000/mcp

After ``mcp:stdio:`` comes a command line, split like a POSIX shell does (quotes group
words; no variables, pipes or globbing). After ``mcp:`` an ``http://`` or ``https://`` URL
names a streamable HTTP endpoint. The ``mcp:`` prefix may be left out where only a server can
be meant (``gramagent mcp import``, :func:`parse_server`).

This module does not import the MCP SDK: parsing works without the ``mcp`` extra.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from gramagent.errors import ConfigurationError

__all__ = ["PREFIX", "HttpServer", "ServerAddress", "StdioServer", "is_server_reference",
           "parse_server"]

PREFIX = "mcp:"
"""What marks a ``--tools`` reference as an MCP server."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StdioServer:
    """An MCP server launched as a subprocess, spoken to over its stdin and stdout."""

    command: str
    """The executable (looked up on ``PATH``)."""
    args: tuple[str, ...] = ()
    """Its arguments."""
    env: Mapping[str, str] | None = None
    """Extra environment variables, over the SDK's safe default environment."""
    cwd: Path | None = None
    """The working directory of the process (default: the current one)."""

    def __str__(self) -> str:
        return shlex.join([self.command, *self.args])


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpServer:
    """An MCP server reached over streamable HTTP."""

    url: str
    """The endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra request headers (e.g. an ``Authorization`` header)."""

    def __str__(self) -> str:
        return self.url


ServerAddress: TypeAlias = StdioServer | HttpServer
"""Where an MCP server is."""


def is_server_reference(text: str) -> bool:
    """Whether a ``--tools`` reference names an MCP server (starts with ``mcp:``)."""
    return text.strip().startswith(PREFIX)


def parse_server(text: str | Sequence[str] | ServerAddress) -> ServerAddress:
    """The server a reference names.

    Accepts ``mcp:stdio:COMMAND ARGS...``, ``mcp:http(s)://...``, the same without the
    ``mcp:`` prefix, a list of command words, or an address (returned as is).

    Raises:
        ConfigurationError: the text names no server (empty command, unknown scheme,
            unbalanced quotes).
    """
    if isinstance(text, StdioServer | HttpServer):
        return text
    if not isinstance(text, str):
        words = [str(w) for w in text]
        if not words or not words[0]:
            raise ConfigurationError("an MCP server command must not be empty")
        return StdioServer(command=words[0], args=tuple(words[1:]))
    body = text.strip()
    if body.startswith(PREFIX):
        body = body[len(PREFIX):]
    if body.startswith(("http://", "https://")):
        if "://" not in body or len(body.split("://", 1)[1].strip("/")) == 0:
            raise ConfigurationError(f"MCP server {text!r}: the URL has no host")
        return HttpServer(url=body)
    if body.startswith("stdio:"):
        try:
            words = shlex.split(body[len("stdio:"):])
        except ValueError as exc:
            raise ConfigurationError(f"MCP server {text!r}: cannot split the command: {exc}"
                                     ) from None
        if not words:
            raise ConfigurationError(f"MCP server {text!r}: no command after 'stdio:'")
        return StdioServer(command=words[0], args=tuple(words[1:]))
    raise ConfigurationError(
        f"MCP server {text!r}: expected 'mcp:stdio:COMMAND [ARGS...]' or "
        "'mcp:http://HOST:PORT/PATH', e.g. 'mcp:stdio:python -m mcp_server_time'")
