"""Whether the MCP SDK (the ``mcp`` extra) is installed, and how to install it."""

from __future__ import annotations

import importlib.util

from gramagent.errors import ConfigurationError

__all__ = ["INSTALL", "require_sdk"]

INSTALL = "pip install 'gramagent[mcp]'"
"""The command that installs what :mod:`gramagent.mcp` needs."""


def require_sdk() -> None:
    """Check that the MCP SDK is installed.

    Raises:
        ConfigurationError: it is not; the message names the install command.
    """
    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("mcp_types") is None:
        raise ConfigurationError(f"MCP support needs the 'mcp' extra: {INSTALL}")
