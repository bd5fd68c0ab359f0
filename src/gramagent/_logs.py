"""Structured logging through the standard :mod:`logging` module, with secrets masked.

Every record gramagent writes goes to a logger under ``gramagent.`` and carries its data as
structured fields (``extra={...}``), so a JSON handler can ship them as they are:

============================  =========  ====================================================
logger                        level      fields
============================  =========  ====================================================
``gramagent.model``           INFO       one record per model attempt: ``model``, ``api``,
                              WARNING    ``attempt``, ``elapsed_ms``, ``status`` (HTTP status or
                                         None), ``error`` (None on success; WARNING then)
``gramagent.tool``            INFO       one record per tool call: ``tool``, ``call_id``,
                              WARNING    ``status`` (``ok``/``error``), ``latency_ms``,
                                         ``error_type`` (WARNING when set), ``args_hash``
``gramagent.usage``           INFO       token counts: ``model``, ``input_tokens``,
                                         ``output_tokens``, ``total_tokens``, ``requests``
``gramagent.run``             ERROR      a run that stopped: ``error_type``, ``agent``
============================  =========  ====================================================

The ``log_*`` helpers below are the one-line calls the loop and the adapters make; each returns at
once, building nothing, when its logger is disabled at that level (``Logger.isEnabledFor``).
Tool arguments are never logged, only their hash (the events' privacy rule), and the free text
they log (error messages, which may quote a server's answer) is redacted at the source, so the
records hold no secret whatever handler receives them.

Secrets are masked by a :class:`Redactor`: API keys (``sk-...``), bearer tokens, the values of
``Authorization``-like headers and fields, literal secrets registered with :func:`add_secret`
(the CLI registers its ``--api-key``), and the values of environment variables whose names
contain ``KEY``, ``TOKEN`` or ``SECRET`` (values of 6 characters or more). A
:class:`RedactingFilter` applies it to log records in a handler; :func:`redact` applies it to the
dicts and strings of the ``-v`` output and the events sink. :func:`configure_logging` wires a
redacting stderr handler for the CLI.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import IO, TypeGuard, overload

import orjson

from gramagent._messages import Usage

__all__ = [
    "MASK",
    "MODEL_LOGGER",
    "RUN_LOGGER",
    "SDK_LOGGER",
    "TOOL_LOGGER",
    "USAGE_LOGGER",
    "RedactingFilter",
    "Redactor",
    "StructuredFormatter",
    "add_secret",
    "configure_logging",
    "default_redactor",
    "env_secrets",
    "log_model_attempt",
    "log_run_error",
    "log_tool_call",
    "log_usage",
    "redact",
    "reset_logging",
]

MASK = "[REDACTED]"
"""What a secret is replaced with."""

SDK_LOGGER = "mcp"
"""The MCP SDK's logger: its records reach the CLI's stderr only with ``-v``."""
MODEL_LOGGER = "gramagent.model"
TOOL_LOGGER = "gramagent.tool"
USAGE_LOGGER = "gramagent.usage"
RUN_LOGGER = "gramagent.run"

# A library stays quiet unless the application configures logging: without this handler,
# Python's last-resort handler would print gramagent's warnings to stderr.
logging.getLogger("gramagent").addHandler(logging.NullHandler())

_model_log = logging.getLogger(MODEL_LOGGER)
_tool_log = logging.getLogger(TOOL_LOGGER)
_usage_log = logging.getLogger(USAGE_LOGGER)
_run_log = logging.getLogger(RUN_LOGGER)

_SECRET_ENV_WORDS = ("KEY", "TOKEN", "SECRET")
_MIN_ENV_SECRET = 6

# Secrets recognisable by their shape, whatever variable or argument they came from.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization-like headers and fields, in header, JSON or key=value form; the scheme
    # word (Bearer, Basic, ...) is kept so the output still says what kind of credential it was.
    (
        re.compile(
            r"(?i)((?:proxy-)?authorization|x-api-key|api[-_]?key|access[-_]?token|"
            r"refresh[-_]?token|client[-_]?secret|password)"
            # a value, not a closing bracket: "(or api_key=)" in a hint names the argument
            r"(\"?'?\s*[:=]\s*\"?'?)((?:bearer|basic|token)\s+)?(?![)\]])[^\s\"',;}&]+"
        ),
        r"\1\2\3" + MASK,
    ),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{6,}"), r"\1 " + MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), MASK),
)

# Mapping keys whose string values are secrets whatever they look like.
_SECRET_KEY = re.compile(
    r"(?i)^(?:(?:proxy-)?authorization|cookie|set-cookie)$|api[-_]?key|secret|password|token$"
)


class Redactor:
    """Masks secrets in text and in JSON-like data.

    Args:
        secrets: Literal secrets to mask wherever they appear (for example an API key).
        env: Environment whose variables named ``*KEY*``, ``*TOKEN*`` or ``*SECRET*`` hold
            secrets (values of 6 characters or more); ``None`` to use none.
        mask: The replacement text.
        shapes: Also mask what looks like a secret (``Authorization: Bearer ...``,
            ``api_key=...``, ``sk-...``, the value of a key named like a credential);
            False masks only the literal secrets (what a stored conversation needs: it is
            sent to the model again, and a user's own ``password=`` stays as written).
    """

    __slots__ = ("_literal", "_lock", "_secrets", "mask", "shapes")

    def __init__(
        self,
        secrets: Iterable[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        mask: str = MASK,
        shapes: bool = True,
    ) -> None:
        self.mask = mask
        self.shapes = shapes
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._literal: re.Pattern[str] | None = None
        found = list(secrets)
        if env is not None:
            found.extend(env_secrets(env))
        self.add(*found)

    @classmethod
    def from_environ(cls, secrets: Iterable[str] = ()) -> Redactor:
        """A redactor for ``secrets`` and the secret-named variables of ``os.environ``."""
        return cls(secrets, env=os.environ)

    @property
    def secrets(self) -> frozenset[str]:
        """The literal secrets masked (beyond those recognised by their shape)."""
        return self._secrets

    def add(self, *secrets: str | None) -> None:
        """Mask these literal secrets too.

        A value that cannot be a credential is ignored: ``None``, one with fewer than 6
        characters besides surrounding whitespace, or one without a letter or digit (a
        ``--api-key " "`` would otherwise mask every space of every later line)."""
        new = {s for s in secrets if _maskable(s) and s not in self._secrets}
        if not new:
            return
        with self._lock:
            merged = self._secrets | new
            # Longest first, so a secret that contains another is masked whole.
            alternatives = sorted(merged, key=len, reverse=True)
            self._literal = re.compile("|".join(re.escape(s) for s in alternatives))
            self._secrets = frozenset(merged)

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced by the mask."""
        literal = self._literal
        if literal is not None:
            text = literal.sub(self.mask, text)
        if not self.shapes:
            return text
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        if self.mask != MASK:
            text = text.replace(MASK, self.mask)
        return text

    @overload
    def redact(self, obj: str) -> str: ...
    @overload
    def redact(self, obj: object) -> object: ...

    def redact(self, obj: object) -> object:
        """A copy of ``obj`` with secrets masked.

        Strings are redacted as text; mappings, lists and tuples are copied with their items
        redacted, and the string value of a key named like a credential (``authorization``,
        ``api_key``, ``*secret*``, ``*token``, ...) is masked whole. Other objects are
        returned as they are.
        """
        if isinstance(obj, str):
            return self.redact_text(obj)
        if isinstance(obj, Mapping):
            out: dict[object, object] = {}
            for key, value in obj.items():
                if (self.shapes and isinstance(key, str) and isinstance(value, str)
                        and _SECRET_KEY.search(key)):
                    out[key] = self.mask if value else value
                else:
                    out[key] = self.redact(value)
            return out
        if isinstance(obj, list):
            return [self.redact(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self.redact(v) for v in obj)
        if isinstance(obj, bytes | bytearray):
            text = bytes(obj).decode("utf-8", "replace")
            red = self.redact_text(text)
            return obj if red == text else red.encode()
        return obj


def _maskable(secret: str | None) -> TypeGuard[str]:
    """Whether ``secret`` could be a credential worth masking wherever it appears."""
    return (secret is not None and len(secret.strip()) >= _MIN_ENV_SECRET
            and any(c.isalnum() for c in secret))


def env_secrets(env: Mapping[str, str]) -> list[str]:
    """The values of ``env``'s variables whose names contain KEY, TOKEN or SECRET."""
    return [
        value
        for name, value in env.items()
        if len(value) >= _MIN_ENV_SECRET and any(w in name.upper() for w in _SECRET_ENV_WORDS)
    ]


_default: Redactor | None = None
_default_lock = threading.Lock()


def default_redactor() -> Redactor:
    """The process-wide redactor: shapes, the environment at first use, and added secrets."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Redactor.from_environ()
    return _default


def add_secret(*secrets: str | None) -> None:
    """Mask these literal secrets in every later log record, ``-v`` line and event."""
    default_redactor().add(*secrets)


@overload
def redact(obj: str, redactor: Redactor | None = None) -> str: ...
@overload
def redact(obj: object, redactor: Redactor | None = None) -> object: ...


def redact(obj: object, redactor: Redactor | None = None) -> object:
    """A copy of ``obj`` (string, mapping, list, ...) with secrets masked.

    Uses the process-wide :func:`default_redactor` unless ``redactor`` is given.
    """
    return (redactor or default_redactor()).redact(obj)


# Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__
) | {"message", "asctime", "taskName"}


def record_fields(record: logging.LogRecord) -> dict[str, object]:
    """The structured fields a record was logged with (its ``extra``)."""
    return {k: v for k, v in record.__dict__.items() if k not in _RECORD_ATTRS}


class RedactingFilter(logging.Filter):
    """A handler filter that masks secrets in a record's message, fields and traceback.

    The record is rewritten in place (message formatted once, ``args`` cleared), so every
    handler after this one sees the masked form too.
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = self._redactor or default_redactor()
        record.msg = redactor.redact_text(record.getMessage())
        record.args = None
        for key, value in record_fields(record).items():
            record.__dict__[key] = redactor.redact(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor.redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redactor.redact_text(record.stack_info)
        return True


class StructuredFormatter(logging.Formatter):
    """Formats a record with its structured fields: ``key=value`` text, or one JSON object.

    Args:
        json: One JSON object per line (``ts``, ``level``, ``logger``, ``message`` and the
            fields) instead of ``LEVEL logger: message key=value ...``.
    """

    def __init__(self, *, json: bool = False) -> None:
        super().__init__()
        self._json = json

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        fields = record_fields(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if self._json:
            out: dict[str, object] = {
                "ts": round(record.created, 6),
                "level": record.levelname,
                "logger": record.name,
                "message": message,
                **fields,
            }
            if record.exc_text:
                out["exc"] = record.exc_text
            return orjson.dumps(out, default=str).decode()
        text = f"{record.levelname} {record.name}: {message}"
        if fields:
            text += " " + " ".join(f"{k}={_text_value(v)}" for k, v in fields.items())
        if record.exc_text:
            text += "\n" + record.exc_text
        return text


def _text_value(value: object) -> str:
    if isinstance(value, str):
        return value if value and " " not in value else repr(value)
    return str(value)


_HANDLER_FLAG = "_gramagent_cli_handler"


def configure_logging(
    verbosity: int, *, json: bool = False, stream: IO[str] | None = None
) -> logging.Handler:
    """Send gramagent's records to ``stream`` (stderr), secrets masked; for the CLI.

    Calling it again replaces the handler it installed before (never other handlers).

    Args:
        verbosity: -1 (or less) for critical records only, 0 for warnings and errors, 1 for
            INFO (model attempts, tool calls, token counts), 2 or more for DEBUG. From 1 on,
            the MCP SDK's records too (what a server sent that was not JSON-RPC, with the
            SDK's traceback).
        json: One JSON object per record instead of text.
        stream: Where to write; ``sys.stderr`` at the time of the call by default.

    Returns:
        The installed handler.
    """
    if verbosity < 0:
        level = logging.CRITICAL
    elif verbosity == 0:
        level = logging.WARNING
    else:
        level = logging.INFO if verbosity == 1 else logging.DEBUG
    reset_logging()
    root = logging.getLogger("gramagent")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    setattr(handler, _HANDLER_FLAG, True)
    handler.addFilter(RedactingFilter())
    handler.setFormatter(StructuredFormatter(json=json))
    handler.setLevel(level)
    root.addHandler(handler)
    root.setLevel(level)
    if verbosity >= 1:
        logging.getLogger(SDK_LOGGER).addHandler(handler)
    return handler


def reset_logging() -> None:
    """Undo :func:`configure_logging`: remove its handler and reset the ``gramagent`` level."""
    root = logging.getLogger("gramagent")
    for logger in (root, logging.getLogger(SDK_LOGGER)):
        for old in [h for h in logger.handlers if getattr(h, _HANDLER_FLAG, False)]:
            logger.removeHandler(old)
            old.close()
    root.setLevel(logging.NOTSET)


# -- the one-line calls of the loop and the adapters ----------------------------------------


def log_model_attempt(
    *,
    model: str,
    api: str,
    attempt: int,
    elapsed_ms: float,
    status: int | None = None,
    error: str | None = None,
) -> None:
    """Record one model request attempt (call it once per HTTP attempt, retries included).

    Args:
        model: The model name sent to the server.
        api: The wire format (``chat``, ``functions``, ``responses``, ``harmony``, ``local``).
        attempt: 1 for the first try, 2 for the first retry, ...
        elapsed_ms: Wall time of the attempt.
        status: The HTTP status, None when no response came back.
        error: What went wrong (None on success); logged at WARNING.
    """
    level = logging.INFO if error is None else logging.WARNING
    if not _model_log.isEnabledFor(level):
        return
    if error is not None:
        error = redact(error)  # a server's error text may echo credentials back
    _model_log.log(
        level,
        "model attempt %d %s: %s",
        attempt,
        "ok" if error is None else "failed",
        model if error is None else error,
        extra={
            "event": "model_attempt",
            "model": model,
            "api": api,
            "attempt": attempt,
            "elapsed_ms": round(elapsed_ms, 3),
            "status": status,
            "error": error,
        },
    )


_OUTCOME = {"repeated_call": "not run again", "approval_refused": "not approved"}
"""How a tool call that did not succeed is described in the log line, where not 'failed'."""
_INFO_OUTCOMES = frozenset({None, "repeated_call", "approval_refused"})
"""Outcomes logged at INFO: no failure of the tool or the model."""


def log_tool_call(
    *,
    tool: str,
    call_id: str,
    latency_ms: float,
    error_type: str | None = None,
    args_hash: str | None = None,
    message: str | None = None,
) -> None:
    """Record one finished tool call (never its raw arguments).

    Args:
        tool: The tool name the model asked for.
        call_id: The call id.
        latency_ms: Execution time (0 for calls refused before running).
        error_type: ``tool_exception``, ``invalid_arguments``, ... or None on success
            (logged at WARNING when set, except ``repeated_call``, a call answered from an
            earlier result, and ``approval_refused``, a call a person did not approve: no
            failures, so they are logged at INFO).
        args_hash: The arguments' preview hash, as in the events.
        message: The error text, when there is one.
    """
    level = logging.INFO if error_type in _INFO_OUTCOMES else logging.WARNING
    if not _tool_log.isEnabledFor(level):
        return
    if message:
        message = redact(message)
    _tool_log.log(
        level,
        "tool %s %s",
        tool,
        "ok" if error_type is None else f"{_OUTCOME.get(error_type, 'failed')} ({error_type}): "
        f"{message or ''}".rstrip(": "),
        extra={
            "event": "tool_call",
            "tool": tool,
            "call_id": call_id,
            "status": "ok" if error_type is None else "error",
            "latency_ms": round(latency_ms, 3),
            "error_type": error_type,
            "args_hash": args_hash,
        },
    )


def log_usage(usage: Usage | None, *, model: str, scope: str = "request") -> None:
    """Record token counts (``scope``: ``request`` for one model turn, ``run`` for a total).

    Nothing is logged when ``usage`` is None (the server reported none).
    """
    if usage is None or not _usage_log.isEnabledFor(logging.INFO):
        return
    _usage_log.info(
        "%s tokens: %d in, %d out",
        scope,
        usage.input_tokens,
        usage.output_tokens,
        extra={
            "event": "usage",
            "scope": scope,
            "model": model,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "requests": usage.requests,
        },
    )


def log_run_error(exc: BaseException, *, agent: str | None = None) -> None:
    """Record a run that stopped with ``exc`` (at ERROR, without a traceback)."""
    if not _run_log.isEnabledFor(logging.ERROR):
        return
    _run_log.error(
        "run of %s stopped: %s: %s",
        agent or "agent",
        type(exc).__name__,
        redact(str(exc)),
        extra={"event": "run_error", "agent": agent, "error_type": type(exc).__name__},
    )
