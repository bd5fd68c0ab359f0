"""The CLI's edge (issue 14 item 11): no traceback ever reaches the user; exit codes say who
is at fault (1: the input or the run, 70: gramagent itself)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from extras import needs
from typer.testing import CliRunner

from gramagent._cli._app import EXIT_ERROR, EXIT_INTERNAL, app, handle_errors
from gramagent._logs import add_secret
from gramagent.errors import ConfigurationError


def _cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "gramagent", *args], input=stdin,
                          capture_output=True, timeout=60, check=False)


def test_internal_error_is_one_line_and_its_own_exit_code(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    @handle_errors
    def broken() -> None:
        raise KeyError("[bold]sk-abcdefghijklmnop[/bold]")

    with pytest.raises(BaseException) as info:
        broken()
    assert getattr(info.value, "exit_code", None) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "internal error" in err and "Traceback" not in err
    assert "sk-abcdefghijklmnop" not in err  # masked, and the markup printed as text
    assert "[bold]" in err


def test_user_error_with_markup_in_it_is_printed_as_text(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    @handle_errors
    def bad() -> None:
        raise ConfigurationError("bad [/red] value [link=x]")

    with pytest.raises(BaseException) as info:
        bad()
    assert getattr(info.value, "exit_code", None) == EXIT_ERROR
    assert "bad [/red] value [link=x]" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("args", [("harmony", "parse", "-"), ("signature", "-")])
def test_invalid_utf8_on_stdin_is_a_user_error(args: tuple[str, ...]) -> None:
    done = _cli(*args, stdin=b'{"a": "\xff\xfe"}')
    assert done.returncode == EXIT_ERROR, done.stderr
    assert b"Traceback" not in done.stderr and b"UTF-8" in done.stderr


@pytest.mark.slow
def test_signature_of_deep_json_is_a_user_error() -> None:
    done = _cli("signature", "-", stdin=b"[" * 5000 + b"]" * 5000)
    assert done.returncode == EXIT_ERROR, done.stderr
    assert b"Traceback" not in done.stderr


def test_invalid_utf8_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"type": "object", "x": "\xff"}')
    result = CliRunner().invoke(app, ["signature", str(bad)])
    assert result.exit_code == EXIT_ERROR
    assert "UTF-8" in result.stderr and result.exception is None or isinstance(
        result.exception, SystemExit)


def test_debug_traceback_masks_secrets(capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """--debug shows the traceback, with a key the server echoed masked (issue 14 item 9)."""
    from gramagent._cli import _app

    add_secret("plainsecretvalue-0123456789")
    monkeypatch.setitem(_app._state, "debug", True)

    @handle_errors
    def failing() -> None:
        raise ConfigurationError("server said: key plainsecretvalue-0123456789 is wrong")

    with pytest.raises(BaseException) as info:
        failing()
    assert getattr(info.value, "exit_code", None) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "Traceback" in err and "failing" in err
    assert "plainsecretvalue-0123456789" not in err


def _completion(message: dict[str, object], finish: str) -> dict[str, object]:
    return {"id": "r", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": None, **message}}]}


HELLO = Path(__file__).parents[2] / "examples" / "hello_world.gram"


@pytest.mark.parametrize(("message", "finish", "note"), [
    ({"content": "Half an ans"}, "length", "(the answer ended: length, cut off at the token"),
    ({"refusal": "I won't."}, "stop", "(the answer ended: refusal, the model declined)"),
])
def test_run_shows_how_the_answer_ended(message: dict[str, object], finish: str, note: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14 item 6: the CLI says when an answer did not simply end."""
    from gramagent.testing import ScriptedServer, http_response

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    body = _completion(message, finish)
    with ScriptedServer([http_response(body), http_response(body)]) as server:
        plain = CliRunner().invoke(app, ["run", str(HELLO), "Hi", "--base-url",
                                         server.base_url])
        as_json = CliRunner().invoke(app, ["run", str(HELLO), "Hi", "--json", "--base-url",
                                           server.base_url])
    assert plain.exit_code == 0, plain.stderr
    assert note in " ".join(plain.stderr.split())
    assert json.loads(as_json.stdout)["finish_reason"] == note.split()[3].rstrip(",")


def test_an_empty_answer_is_an_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from gramagent.testing import ScriptedServer, http_response

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ScriptedServer([http_response(_completion({"content": ""}, "stop"))]) as server:
        result = CliRunner().invoke(app, ["run", str(HELLO), "Hi", "--base-url",
                                          server.base_url])
    assert result.exit_code == EXIT_ERROR
    assert "ModelAPIError" in result.stderr and "empty answer" in result.stderr


@pytest.mark.parametrize("arguments", ['{"name": NaN}', '{"name": "\\ud800"}',
                                       '{"a":' * 500 + "1" + "}" * 500, '{"name": 1e999}'])
def test_tool_command_takes_the_loops_json_rules(arguments: str) -> None:
    result = CliRunner().invoke(app, ["tool", "sayHello", arguments])
    assert result.exit_code == EXIT_ERROR
    assert "ValidationError" in result.stderr and result.exception is None or isinstance(
        result.exception, SystemExit)


@needs("local", "experiments")  # the agent runs on the embedded model; experiments, statistics
def test_a_metrics_port_in_use_is_a_user_error(tmp_path: Path) -> None:
    """--metrics-port on a port something else holds: one line, exit 1, not 'internal'."""
    import socket

    (tmp_path / "cases.jsonl").write_text('{"input": "Hi"}\n')
    experiment = tmp_path / "e.gram"
    experiment.write_text(f'[e:Experiment {{agent: "{HELLO}", cases: "cases.jsonl"}} |\n'
                          '  [A:Variant {}], [B:Variant {}]]\n')
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        results = [CliRunner().invoke(app, ["run", str(HELLO), "Hi", "--metrics-port", port]),
                   CliRunner().invoke(app, ["experiment", "run", str(experiment),
                                            "--metrics-port", port])]
    for result in results:
        assert result.exit_code == EXIT_ERROR, result.output
        assert f"ConfigurationError: cannot serve metrics on 127.0.0.1:{port}: " in result.stderr


@pytest.mark.parametrize("args", [
    ["experiment", "report", "😀" * 100],
    ["experiment", "report", "n" * 300],
    ["check", "n" * 300],
    ["signature", "n" * 300],
    ["harmony", "parse", "n" * 300],
    ["experiment", "run", "n" * 300],
])
def test_a_name_too_long_is_the_users_error_not_a_bug(args: list[str]) -> None:
    """An OSError naming a file (here ENAMETOOLONG, which pathlib's is_file() raises) is one
    line naming the file and the cause, exit 1: not "internal error" (issue 32, the CLI
    fuzz)."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert "File name too long" in result.stderr or "too long" in result.stderr


@pytest.mark.parametrize(("url", "says"), [
    ("\ufeff", "invalid base URL"),
    ("http://[::1", "invalid base URL"),
    ("ftp://host/v1", "invalid base URL"),
    ("http://127.0.0.1:1/v\x01", "the request failed (URL can't contain control characters"),
    ("http://127.0.0.1:1/v1\r\nX: y", "the request failed"),
    ("http://127.0.0.1:99999/v1", "cannot reach the server"),
])
def test_models_list_refuses_a_bad_url_as_run_does(url: str, says: str) -> None:
    result = CliRunner().invoke(app, ["models", "list", "--base-url", url])
    assert result.exit_code == 1, result.output
    assert says in result.stderr and "internal error" not in result.output
