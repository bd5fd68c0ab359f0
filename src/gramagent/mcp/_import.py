"""Gram tool specs for the tools of an MCP server (``gramagent mcp import``).

Each tool's ``inputSchema`` becomes a gram signature with
:func:`~gramagent._spec.signature.schema_to_signature`, so the spec binds to the server's tool
exactly (same name, description and schema). A tool the notation cannot express (a keyword
such as ``$ref``, no description, a name gram cannot write) is left out and reported with
the reason: nothing is silently changed. The result type is ``String``: what the model gets
back from an MCP tool is its text content.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import mcp_types as types

from gramagent._runtime.library import canonical_schema
from gramagent._spec.gram.text import load_gram, to_gram
from gramagent._spec.model import ToolSpec
from gramagent._spec.signature import schema_to_signature
from gramagent.errors import GramagentError, SchemaError
from gramagent.mcp._address import ServerAddress
from gramagent.mcp._client import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, MCPClient

__all__ = ["ImportedSpecs", "import_specs", "specs_from_tools"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportedSpecs:
    """The gram specs of a server's tools, and the tools that could not be written."""

    specs: tuple[ToolSpec, ...]
    """One spec per expressible tool, in the server's order."""
    problems: tuple[str, ...]
    """One line per tool left out, saying why (``tool 'x': /properties/y: ...``)."""
    server: str = ""
    """The server the tools came from (its command or URL)."""

    def to_gram(self) -> str:
        """The specs as a gram document of stand-alone tools, with a header comment."""
        head = [f"// Tools of the MCP server {self.server}" if self.server
                else "// Tools of an MCP server",
                "// written by `gramagent mcp import`: they bind to the server's tools as is."]
        head.extend(f"// left out: {p}" for p in self.problems)
        body = "\n\n".join(to_gram(spec).rstrip("\n") for spec in self.specs)
        return "\n".join(head) + ("\n\n" + body if body else "") + "\n"


def import_specs(server: str | ServerAddress | list[str], *,
                 timeout: float = DEFAULT_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 only: Iterable[str] | None = None) -> ImportedSpecs:
    """Connect to an MCP server and write gram specs for its tools.

    Args:
        server: as for :func:`~gramagent.mcp.mcp_library`.
        timeout: seconds one MCP request may take.
        connect_timeout: seconds to launch or reach the server and shake hands.
        only: import only these tools (a name the server lacks is reported as a problem).

    Raises:
        MCPServerError: the server could not be launched or reached, or failed to list its
            tools in time.
    """
    with MCPClient(server, timeout=timeout, connect_timeout=connect_timeout) as client:
        listed = client.list_tools()
        label = str(client.server)
    problems: list[str] = []
    if only is not None:
        wanted = list(only)
        have = {t.name for t in listed}
        problems.extend(f"tool {n!r}: the server has no such tool" for n in wanted
                        if n not in have)
        listed = [t for t in listed if t.name in set(wanted)]
    result = specs_from_tools(listed)
    return ImportedSpecs(specs=result.specs, problems=(*problems, *result.problems),
                         server=label)


def specs_from_tools(tools: Iterable[types.Tool]) -> ImportedSpecs:
    """Gram specs for listed MCP tools (no I/O); see :func:`import_specs`."""
    specs: list[ToolSpec] = []
    problems: list[str] = []
    tools = list(tools)
    counts = Counter(t.name for t in tools)
    said: set[str] = set()
    for listed in tools:
        if counts[listed.name] > 1:  # which one would a spec of this name bind to?
            if listed.name not in said:
                said.add(listed.name)
                problems.append(f"tool {listed.name!r}: the server lists "
                                f"{counts[listed.name]} tools of this name")
            continue
        try:
            specs.append(_spec_of(listed))
        except _LeftOut as exc:
            problems.append(f"tool {listed.name!r}: {exc}")
    return ImportedSpecs(specs=tuple(specs), problems=tuple(problems))


class _LeftOut(Exception):
    """Why one tool cannot be written as a gram spec."""


def _spec_of(listed: types.Tool) -> ToolSpec:
    description = (listed.description or "").strip()
    if not description:
        raise _LeftOut("the server gives no description, and a gram tool needs one")
    schema = dict(listed.input_schema)
    try:
        signature = schema_to_signature(schema)
    except SchemaError as exc:
        raise _LeftOut(f"its input schema cannot be written in gram: {exc}") from None
    # The written text must read back as the same contract, or it is not the server's tool.
    try:
        spec = ToolSpec(name=listed.name, description=listed.description or "",
                        signature=signature)
        text = to_gram(spec)
        read = load_gram(text).tools
    except GramagentError as exc:
        raise _LeftOut(f"its spec does not read back as gram: {exc}") from None
    if (len(read) != 1 or read[0].name != listed.name
            or canonical_schema(read[0].schema) != canonical_schema(schema)
            or " ".join(read[0].description.split()) != " ".join(description.split())):
        raise _LeftOut("its spec does not read back as the same contract")
    return read[0]
