"""``--tools`` with MCP servers in ``gramagent run``, and the missing extra, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from mcp_support import TIME_AGENT, TIME_SERVER

from gramagent._install import install_command
from gramagent.testing import ScriptedServer, call, reply

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_run_mixes_python_tools_and_an_mcp_server() -> None:
    script = [call("get_current_time", {"timezone": "Europe/Paris"}), reply("It is late.")]
    with ScriptedServer(script) as model:
        done = subprocess.run(
            [sys.executable, "-m", "gramagent", "run", str(TIME_AGENT), "Time in Paris?",
             "--tools", f"gramagent.tools:builtin_library;{TIME_SERVER}",
             "--base-url", model.base_url, "--api-key", "sk-test", "--json"],
            capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    turn = json.loads(done.stdout)
    (inv,) = turn["tool_invocations"]
    assert inv["error_type"] is None
    assert json.loads(inv["result"])["timezone"] == "Europe/Paris"
    assert turn["content"] == "It is late."
    assert done.stderr == ""  # the server's own log lines stay out of the terminal


def test_a_missing_extra_names_its_install_command() -> None:
    code = ("import sys; sys.modules['mcp'] = None; sys.argv = ['gramagent', 'mcp', 'import', "
            f"{TIME_SERVER!r}]; from gramagent._cli import main; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=os.environ.copy())
    assert done.returncode == 1
    assert done.stderr.strip() == ("ConfigurationError: MCP support needs the 'mcp' extra, "
                                   f"which is not installed: {install_command('mcp')}")


def test_a_tool_name_in_two_sources_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gramagent", "tools", "--tools", f"{TIME_SERVER};{TIME_SERVER}"],
        capture_output=True, text=True, timeout=90)
    assert done.returncode == 1
    assert "'get_current_time' is in tool sources 1 and 2" in done.stderr
