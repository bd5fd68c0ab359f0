"""Whether the MCP SDK (the ``mcp`` extra) is installed, and how to install it."""

from __future__ import annotations

from gramagent._install import needs_extra
from gramagent.errors import ConfigurationError

__all__ = ["INSTALL", "require_sdk"]

INSTALL = "pip install 'gramagent[mcp]'"
"""The command that installs what :mod:`gramagent.mcp` needs, from a package index; the error
of :func:`require_sdk` names the command for how gramagent was installed (a clone, a wheel)."""


def require_sdk() -> None:
    """Check that the MCP SDK is installed.

    Raises:
        ConfigurationError: it is not; the message names the install command.
    """
    try:
        import mcp  # noqa: F401 - only whether it imports
    except ImportError:
        raise ConfigurationError(needs_extra("MCP support", "mcp")) from None
