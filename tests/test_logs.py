"""Tests of gramagent._logs: redaction, the redacting filter, the formatter and the log helpers."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gramagent import _logs as logs
from gramagent._logs import (
    MASK,
    RedactingFilter,
    Redactor,
    StructuredFormatter,
    configure_logging,
    env_secrets,
    log_model_attempt,
    log_run_error,
    log_tool_call,
    log_usage,
    reset_logging,
)
from gramagent._messages import Usage

ROOT = Path(__file__).resolve().parent.parent

KEY = "sk-proj-Zq8x7TESTKEYabcdef0123456789"


class ListHandler(logging.Handler):
    """Keeps every record it is given, after its filters ran."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def gramagent_records() -> Iterator[ListHandler]:
    """A DEBUG-level handler on the ``gramagent`` logger, removed afterwards."""
    logger = logging.getLogger("gramagent")
    handler = ListHandler()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"key is {KEY}.", KEY),
        ("Authorization: Bearer abcdefghijkl123", "abcdefghijkl123"),
        ('{"Authorization": "Basic dXNlcjpwYXNz"}', "dXNlcjpwYXNz"),
        ("curl -H 'x-api-key: zz9plural-alpha'", "zz9plural-alpha"),
        ("https://host/?api_key=s3cr3tvalue&x=1", "s3cr3tvalue"),
        ("bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9.payload.sig"),
    ],
    ids=["sk-key", "bearer-header", "basic-json", "x-api-key", "query-param", "jwt-bearer"],
)
def test_shapes_are_masked(text: str, secret: str) -> None:
    """Keys, bearer tokens and credential headers are masked by their shape alone."""
    out = Redactor().redact_text(text)
    assert secret not in out
    assert MASK in out


def test_ordinary_text_is_untouched() -> None:
    """Text without secrets comes back unchanged (tokens counts, skills, tasks...)."""
    text = 'Hello, Alice! max_tokens=50 {"input_tokens": 12} task-list skeleton'
    assert Redactor().redact_text(text) == text


def test_scheme_word_is_kept() -> None:
    """The credential kind stays readable: only the value is masked."""
    assert Redactor().redact_text("Authorization: Bearer abcdefghijkl") == (
        f"Authorization: Bearer {MASK}"
    )


def test_env_secrets_by_name_and_length() -> None:
    """Variables named *KEY*/*TOKEN*/*SECRET* with values of 6+ characters are secrets."""
    env = {
        "MY_SERVICE_TOKEN": "tok-123456",
        "db_secret": "hunter22",
        "OPENAI_API_KEY": "abcdef",
        "SHORT_KEY": "abc12",
        "HOME": "/root/somewhere",
        "MONKEY_BUSINESS": "bananas",
    }
    found = set(env_secrets(env))
    assert found == {"tok-123456", "hunter22", "abcdef", "bananas"}
    red = Redactor(env=env)
    out = red.redact_text("tok-123456 hunter22 abc12 /root/somewhere")
    assert out == f"{MASK} {MASK} abc12 /root/somewhere"


def test_literal_secrets_longest_first() -> None:
    """A secret containing another is masked whole, leaving no tail behind."""
    red = Redactor(["abcdef", "abcdef-ghijkl"])
    assert red.redact_text("x abcdef-ghijkl y abcdef") == f"x {MASK} y {MASK}"


def test_add_recompiles() -> None:
    """Secrets added later are masked too; None and empty values are ignored."""
    red = Redactor()
    red.add(None, "", "plain-secret-value")
    assert red.secrets == frozenset({"plain-secret-value"})
    assert red.redact_text("the plain-secret-value!") == f"the {MASK}!"


def test_redact_nested_data() -> None:
    """Mappings, lists and tuples are copied with secrets masked; other values pass."""
    red = Redactor(["hush-hush-1"])
    data = {
        "headers": {"Authorization": "whatever-it-is", "Content-Type": "application/json"},
        "body": {"messages": [{"content": "say hush-hush-1"}], "max_tokens": 5},
        "api_key": "not-shaped-like-a-key",
        "items": ("hush-hush-1", 3, None),
        "raw": b"bytes with hush-hush-1",
    }
    out = red.redact(data)
    assert out["headers"] == {"Authorization": MASK, "Content-Type": "application/json"}
    assert out["body"] == {"messages": [{"content": f"say {MASK}"}], "max_tokens": 5}
    assert out["api_key"] == MASK
    assert out["items"] == (MASK, 3, None)
    assert out["raw"] == f"bytes with {MASK}".encode()
    assert data["api_key"] == "not-shaped-like-a-key", "the input is not modified"


def test_custom_mask() -> None:
    """A redactor can use its own mask for shapes and literals alike."""
    red = Redactor(["literal-secret"], mask="***")
    assert red.redact_text(f"literal-secret {KEY}") == "*** ***"


def test_filter_masks_message_args_fields_and_traceback() -> None:
    """The filter rewrites the message, the extra fields and the exception text."""
    red = Redactor(["filter-secret-1"])
    record = logging.LogRecord("gramagent.x", logging.ERROR, __file__, 1,
                               "using %s", ("filter-secret-1",), None)
    record.headers = {"authorization": f"Bearer {KEY}"}
    try:
        raise RuntimeError(f"boom {KEY}")
    except RuntimeError:
        import sys

        record.exc_info = sys.exc_info()
    assert RedactingFilter(red).filter(record)
    assert record.getMessage() == f"using {MASK}"
    assert record.headers == {"authorization": MASK}
    assert record.exc_text is not None
    assert KEY not in record.exc_text and "boom" in record.exc_text


def test_formatter_text_and_json() -> None:
    """Fields follow the message as key=value text, or sit beside it in one JSON object."""
    record = logging.LogRecord("gramagent.tool", logging.INFO, __file__, 1, "tool %s ok",
                               ("sayHello",), None)
    record.tool = "sayHello"
    record.latency_ms = 1.5
    record.error_type = None
    text = StructuredFormatter().format(record)
    assert text == (
        "INFO gramagent.tool: tool sayHello ok tool=sayHello latency_ms=1.5 error_type=None"
    )
    data = json.loads(StructuredFormatter(json=True).format(record))
    assert data["message"] == "tool sayHello ok"
    assert data["logger"] == "gramagent.tool"
    assert data["level"] == "INFO"
    assert (data["tool"], data["latency_ms"], data["error_type"]) == ("sayHello", 1.5, None)


def test_helpers_log_structured_fields(gramagent_records: ListHandler) -> None:
    """Each helper writes one record to its logger with its documented fields."""
    log_model_attempt(model="gpt-4o-mini", api="chat", attempt=1, elapsed_ms=12.3456, status=200)
    log_model_attempt(model="gpt-4o-mini", api="chat", attempt=2, elapsed_ms=1, status=503,
                      error="HTTP 503")
    log_tool_call(tool="sayHello", call_id="c1", latency_ms=0.5, args_hash="ab12")
    log_tool_call(tool="nope", call_id="c2", latency_ms=0, error_type="unknown_tool",
                  message="no tool named 'nope'")
    log_usage(Usage(input_tokens=10, output_tokens=4, requests=1), model="gpt-4o-mini")
    log_usage(None, model="gpt-4o-mini")
    log_run_error(RuntimeError("gone"), agent="hello")
    recs = gramagent_records.records
    assert [(r.name, r.levelno) for r in recs] == [
        (logs.MODEL_LOGGER, logging.INFO),
        (logs.MODEL_LOGGER, logging.WARNING),
        (logs.TOOL_LOGGER, logging.INFO),
        (logs.TOOL_LOGGER, logging.WARNING),
        (logs.USAGE_LOGGER, logging.INFO),
        (logs.RUN_LOGGER, logging.ERROR),
    ]
    first = recs[0]
    assert (first.model, first.api, first.attempt, first.elapsed_ms, first.status, first.error) == (
        "gpt-4o-mini", "chat", 1, 12.346, 200, None)
    assert recs[1].error == "HTTP 503" and "HTTP 503" in recs[1].getMessage()
    assert (recs[2].status, recs[2].args_hash, recs[2].error_type) == ("ok", "ab12", None)
    assert (recs[3].status, recs[3].error_type) == ("error", "unknown_tool")
    assert "no tool named 'nope'" in recs[3].getMessage()
    assert (recs[4].input_tokens, recs[4].output_tokens, recs[4].total_tokens) == (10, 4, 14)
    assert recs[5].error_type == "RuntimeError" and recs[5].agent == "hello"


def test_helpers_do_nothing_when_disabled(gramagent_records: ListHandler,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the logger's level the helpers return without building a record."""
    logging.getLogger("gramagent").setLevel(logging.ERROR)
    built: list[object] = []
    monkeypatch.setattr(logging.Logger, "makeRecord",
                        lambda *a, **k: built.append(a) or logging.LogRecord(*a[1:8]))
    log_model_attempt(model="m", api="chat", attempt=1, elapsed_ms=1)
    log_tool_call(tool="t", call_id="c", latency_ms=1, error_type="tool_exception")
    log_usage(Usage(input_tokens=1), model="m")
    assert built == [] and gramagent_records.records == []


def test_configure_logging_levels_and_replacement() -> None:
    """Verbosity maps to WARNING/INFO/DEBUG; a second call replaces the first handler."""
    logger = logging.getLogger("gramagent")
    first, second = io.StringIO(), io.StringIO()
    try:
        configure_logging(0, stream=first)
        log_tool_call(tool="quiet", call_id="c", latency_ms=1)
        assert first.getvalue() == ""
        configure_logging(1, json=True, stream=second)
        log_tool_call(tool="loud", call_id="c", latency_ms=1)
        log_usage(Usage(input_tokens=1), model=KEY)
        assert len([h for h in logger.handlers if getattr(h, "_gramagent_cli_handler", 0)]) == 1
        lines = [json.loads(line) for line in second.getvalue().splitlines()]
        assert [line["tool"] for line in lines[:1]] == ["loud"]
        assert lines[1]["model"] == MASK, "secrets are masked in fields of the CLI handler"
        assert first.getvalue() == ""
        configure_logging(2, stream=second)
        assert logger.level == logging.DEBUG
    finally:
        reset_logging()
    assert not [h for h in logger.handlers if getattr(h, "_gramagent_cli_handler", 0)]
    assert logger.level == logging.NOTSET


def test_helpers_redact_free_text_at_the_source(gramagent_records: ListHandler) -> None:
    """Error texts are masked before the record exists, whatever handler sees it first."""
    log_model_attempt(model="m", api="chat", attempt=1, elapsed_ms=1, status=401,
                      error=f"HTTP 401: bad key {KEY}")
    log_tool_call(tool="t", call_id="c", latency_ms=1, error_type="tool_exception",
                  message=f"Authorization: Bearer {KEY}")
    log_run_error(RuntimeError(f"echoed {KEY}"), agent="a")
    assert len(gramagent_records.records) == 3
    for record in gramagent_records.records:
        assert KEY not in record.getMessage()
        assert KEY not in repr(record.__dict__)
        assert MASK in record.getMessage()


@pytest.mark.slow
def test_a_library_run_prints_nothing_when_logging_is_not_configured() -> None:
    """Bad tool calls are logged at WARNING, but an application that configured no logging
    sees nothing on stderr (gramagent's NullHandler keeps Python's last resort quiet)."""
    code = textwrap.dedent('''
        from gramagent import ToolLibrary, load_agent, run_agent_sync, tool
        from gramagent.testing import ScriptedServer, call, reply

        @tool(name="sayHello")
        def say_hello(personName: str = "world") -> str:
            """Returns a friendly greeting message for the given name"""
            raise RuntimeError("boom")

        agent = load_agent("examples/hello_world.gram")
        with ScriptedServer([call("sayHello", {"personName": 3}),
                             call("sayHello", {"personName": "A"}), reply("done")]) as srv:
            r = run_agent_sync(agent, "hi", library=ToolLibrary([say_hello]),
                               base_url=srv.base_url)
        print([i.error_type for i in r.tool_invocations])
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['invalid_arguments', 'tool_exception']"
    assert done.stderr == ""


@given(junk=st.text(alphabet=st.characters(categories=["Zs", "Cc", "Pd", "Po", "Ps", "Pe", "Sm"]),
                    max_size=40) | st.text(max_size=5),
       line=st.text(min_size=1, max_size=80))
def test_a_value_that_cannot_be_a_credential_masks_nothing(junk: str, line: str) -> None:
    """Whitespace, punctuation or a few characters given as a key (``--api-key " "``, hostile
    fuzz input) are not taken as a secret: they would mask every space or dash of every later
    line. A real key is still masked."""
    redactor = Redactor(shapes=False)
    redactor.add(junk)
    assert redactor.redact_text(line) == line
    redactor.add("key-0123456789")
    assert redactor.redact_text("x key-0123456789 y") == f"x {MASK} y"
