"""Helpers of the built-in tool tests: sandbox configs with short limits, paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gramagent._runtime.library import ToolContext, ToolLibrary
from gramagent.tools._workspace import STATE_KEY, Workspace
from gramagent.tools.sandbox import PythonSandbox, SandboxConfig, SandboxError, SandboxLimits

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SALES_CSV = EXAMPLES / "data" / "sales.csv"
FAST_LIMITS = SandboxLimits(timeout=4.0, cpu_seconds=1, session_cpu_seconds=60,
                            memory_bytes=768 << 20, max_open_files=64,
                            max_file_bytes=4 << 20, max_output_chars=4000)
"""Short limits, so the escape suite stays fast."""


def fast_config(**limits: object) -> SandboxConfig:
    """A strict config with :data:`FAST_LIMITS` (some of them replaced)."""
    values = {**{f: getattr(FAST_LIMITS, f) for f in FAST_LIMITS.__dataclass_fields__}, **limits}
    return SandboxConfig(limits=SandboxLimits(**values))  # type: ignore[arg-type]


def start_or_skip(sandbox: PythonSandbox) -> PythonSandbox:
    """Start ``sandbox``; skip the test where this machine cannot isolate a worker.

    Never skips as root on Linux: there the isolation must work (tested in
    ``test_sandbox_session.py``), so a broken sandbox fails the suite.
    """
    try:
        sandbox.start()
    except SandboxError as exc:
        if exc.kind == "unavailable" and os.geteuid() != 0:
            pytest.skip(f"no OS isolation for the sandbox on this machine: {exc}")
        raise
    return sandbox


def invoke_tool(library: ToolLibrary, name: str, conversation: str = "c",
                **arguments: object) -> object:
    """Call tool ``name`` of ``library`` as the loop would, in ``conversation``."""
    tool = library.lookup(name)
    assert tool is not None, name
    ctx = ToolContext(conversation_id=conversation, run_id="r", call_id="k", tool=name,
                      state=library.conversation_state(conversation))
    return tool.invoke(**arguments, ctx=ctx)


def workspace_of(library: ToolLibrary, conversation: str = "c") -> Workspace:
    """The workspace of ``conversation`` (after a tool call made it)."""
    workspace = library.conversation_state(conversation)[STATE_KEY]
    assert isinstance(workspace, Workspace)
    return workspace
