"""A stdio server that writes lines which are not JSON-RPC: the SDK's complaint (with its
traceback) stays off the terminal of `gramagent tools` and `gramagent run` unless -v asks for
log records, and the server's tools still work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mcp, pytest.mark.slow]

_NOISY = """
import os, sys
sys.stdout.write({lines!r}); sys.stdout.flush()
os.execv(sys.executable, [sys.executable, "-m", "mcp_server_time"])
"""


def _gramagent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gramagent", *args], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.mark.parametrize("lines", [
    "this is not JSON-RPC\n",
    '{"jsonrpc": "2.0"}\n[1, 2]\n\x1b[31mred\n',
    "{" * 50 + "\n",
])
def test_junk_on_stdout_stays_off_the_terminal(tmp_path: Path, lines: str) -> None:
    script = tmp_path / "noisy.py"
    script.write_text(_NOISY.format(lines=lines))
    server = f"mcp:stdio:{sys.executable} {script}"
    quiet = _gramagent("tools", "--tools", server)
    assert quiet.returncode == 0, quiet.stderr
    assert "get_current_time" in quiet.stdout
    assert "Traceback" not in quiet.stderr and "JSONRPC" not in quiet.stderr
    loud = _gramagent("run", str(Path(__file__).parents[2] / "examples" / "hello_world.gram"),
                      "hi", "--tools", server, "--base-url", "http://127.0.0.1:9", "-v",
                      "--timeout", "5")
    assert "Failed to parse JSONRPC message" in loud.stderr
