"""What a new user meets in the first hour with ``gramagent run`` (issue 12).

Through the installed console script, against the scripted OpenAI-compatible server on
127.0.0.1 (real HTTP).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_support import run_gramagent
from extras import needs

from gramagent.testing import ScriptedServer, error, reply

pytestmark = pytest.mark.slow

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


def _model_of_requests(srv: ScriptedServer) -> list[str]:
    return [r.body["model"] for r in srv.requests]


def test_the_model_option_is_the_model_requests_name(tmp_path: Path) -> None:
    """``--model openai/gpt-4o-mini`` with a base URL: the requests ask for gpt-4o-mini (they
    asked for the agent file's qwen2.5-coder-0.5b)."""
    with ScriptedServer([reply("Hello!")]) as srv:
        done = run_gramagent("run", str(HELLO), "Hi", "--model", "openai/gpt-4o-mini",
                             "--base-url", srv.base_url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert _model_of_requests(srv) == ["gpt-4o-mini"]


def test_provider_names_are_case_insensitive(tmp_path: Path) -> None:
    """pattern-agent's own files say ``OpenAI/gpt-4o-mini``."""
    agent = tmp_path / "agent.gram"
    agent.write_text(HELLO.read_text().replace('"local/qwen2.5-coder-0.5b"',
                                               '"OpenAI/gpt-4o-mini"'))
    with ScriptedServer([reply("Hello!")]) as srv:
        done = run_gramagent("run", str(agent), "Hi", "--base-url", srv.base_url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Hello!\n"
        assert _model_of_requests(srv) == ["gpt-4o-mini"]
    with ScriptedServer([reply("Hello!")]) as srv:
        done = run_gramagent("run", str(HELLO), "Hi", "--model", "OPENAI/m",
                             "--base-url", srv.base_url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr


def test_a_model_without_provider_says_how_it_was_read(tmp_path: Path) -> None:
    done = run_gramagent("run", str(HELLO), "Hi", "--model", "nonsense", cwd=tmp_path)
    assert done.returncode == 1
    assert "--model 'nonsense' names no provider, so it was read as openai/nonsense" in \
        done.stderr
    assert "local/qwen2.5-coder-0.5b" in done.stderr  # the forms it could have meant
    assert "Traceback" not in done.stderr


def test_an_empty_model_option_is_refused(tmp_path: Path) -> None:
    done = run_gramagent("run", str(HELLO), "Hi", "--model", "", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("ConfigurationError: --model must not be empty")


def test_a_directory_is_not_called_a_missing_file(tmp_path: Path) -> None:
    done = run_gramagent("run", str(tmp_path), "Hi", cwd=tmp_path)
    assert done.returncode == 1
    assert f"{tmp_path}: is a directory" in done.stderr


@pytest.mark.parametrize("command", [["run", "{path}", "Hi"], ["schema", "{path}"],
                                     ["harmony", "render", "{path}", "Hi"]])
def test_a_path_that_is_not_a_regular_file_is_named_for_what_it_is(
        tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "agent.gram"
    os.mkfifo(fifo)  # a reader would block on it: refused before it is opened
    for path, what in [(fifo, "is not a regular file"), (tmp_path, "is a directory"),
                       (tmp_path / "missing.gram", "no such file")]:
        done = run_gramagent(*[part.format(path=path) for part in command], cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith(f"ConfigurationError: {path}: {what}; expected ")
        assert "Traceback" not in done.stderr


def test_a_tool_without_implementation_points_at_tools_and_dry_run(tmp_path: Path) -> None:
    (tmp_path / "only_hello.py").write_text(
        "from gramagent import ToolLibrary\n"
        "from gramagent.tools import say_hello\n"
        "library = ToolLibrary([say_hello])\n")
    done = run_gramagent("run", str(ROOT / "examples" / "hello_goodbye.gram"), "Bye",
                         "--tools", "only_hello:library", "--base-url", "http://127.0.0.1:9/v1",
                         cwd=tmp_path)
    assert done.returncode == 1
    assert "tool 'sayGoodbye'" in done.stderr
    assert "--tools MODULE:LIBRARY" in done.stderr and "--dry-run" in done.stderr


def test_a_limit_speaks_to_the_command_line_user(tmp_path: Path) -> None:
    """The limit, its value and the count, without the Python-side ``.context`` advice."""
    from gramagent.testing import call

    with ScriptedServer([call("sayHello", {"personName": "Al"}), reply("never")]) as srv:
        done = run_gramagent("run", str(HELLO), "Hi", "--max-iterations", "1",
                             "--base-url", srv.base_url, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("LimitExceeded: run stopped: the model made 1 requests")
    assert "max_iterations=1" in done.stderr
    assert ".context" not in done.stderr


def test_timeout_help_says_what_it_counts(tmp_path: Path) -> None:
    text = " ".join(run_gramagent("run", "--help", cwd=tmp_path).stdout.split())
    assert "the embedded model's loading, before the first turn, is not counted" in text


@needs("local")  # Session.open resolves the agent's embedded model before it reads --timeout
def test_a_timeout_of_zero_is_named_as_the_option_the_user_typed(tmp_path: Path) -> None:
    done = run_gramagent("run", str(HELLO), "Hi", "--timeout", "0", "--dry-run", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("ConfigurationError: --timeout must be positive (got 0.0)")
