"""The ``gramagent`` command. Thin: every command calls the library.

The application and its error edge live in :mod:`gramagent._cli._app`; each area registers
its commands on it from its own module (``spec_commands``, ``run_commands``, ...), imported
here. Errors are caught at the edge: a gramagent error is one line on stderr and exit code 1,
anything else one "internal error" line and exit code 70 (tracebacks only with ``--debug``).
"""

from gramagent._cli import (
    experiment_commands,
    harmony_commands,
    logs_commands,
    mcp_commands,
    model_commands,
    run_commands,
    session_commands,
    spec_commands,
    tool_commands,
)
from gramagent._cli._app import app, main

__all__ = ["app", "experiment_commands", "harmony_commands", "logs_commands", "main",
           "mcp_commands", "model_commands", "run_commands", "session_commands", "spec_commands",
           "tool_commands"]
