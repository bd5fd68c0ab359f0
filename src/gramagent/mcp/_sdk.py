"""Whether the MCP SDK (the ``mcp`` extra) is installed, and how to install it."""

from __future__ import annotations

from gramagent.errors import ConfigurationError

__all__ = ["INSTALL", "require_sdk"]

INSTALL = "pip install 'gramagent[mcp]'"
"""The command that installs what :mod:`gramagent.mcp` needs."""


def require_sdk() -> None:
    """Check that the MCP SDK is installed.

    Raises:
        ConfigurationError: it is not; the message names the install command.
    """
    try:
        import mcp  # noqa: F401 - only whether it imports
    except ImportError:
        raise ConfigurationError(f"MCP support needs the 'mcp' extra: {INSTALL}") from None
