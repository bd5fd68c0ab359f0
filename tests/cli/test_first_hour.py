"""What a new user meets in the first hour with ``gramagent run`` (issue 12).

Through the installed console script, against the scripted OpenAI-compatible server on
127.0.0.1 (real HTTP).
"""

from __future__ import annotations

from pathlib import Path

from cli_support import run_gramagent

from gramagent.testing import ScriptedServer, error, reply

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"


def test_a_refused_api_key_is_a_configuration_error_said_once(tmp_path: Path) -> None:
    """HTTP 401: one request (no retries), one line naming the key's sources, exit 1."""
    with ScriptedServer([error(401, "Incorrect API key provided"), reply("never")]) as srv:
        done = run_gramagent("run", str(HELLO), "Hi", "--model", "openai/gpt-4o-mini",
                             "--base-url", srv.base_url, "--api-key", "sk-wrong-0123456789",
                             cwd=tmp_path)
        assert len(srv.requests) == 1
    assert done.returncode == 1
    assert done.stderr.startswith("AuthenticationError: ")
    assert "OPENAI_API_KEY" in done.stderr
    assert "sk-wrong-0123456789" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
