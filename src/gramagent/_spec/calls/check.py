"""Checking one tool call before it runs: payload size, JSON, tool name, schema.

Pure functions, no I/O: :func:`parse_arguments` (shared with the Harmony parser) and
:func:`check_call`, which turns a raw :class:`~gramagent._messages.ToolCall` into either a
:class:`PreparedCall` ready to execute or a :class:`CallRejection` whose text tells the model
what was wrong and what was expected. Nothing here raises on bad model output.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

import orjson

from gramagent import _json as exact_json
from gramagent._frozen import builds
from gramagent._spec.schema.nulls import strip_strict_nulls

__all__ = [
    "INVALID_CALL_TYPES",
    "MAX_PAYLOAD_BYTES",
    "TOOL_ERROR_TYPES",
    "CallRejection",
    "PreparedCall",
    "ToolErrorType",
    "check_arguments",
    "check_call",
    "check_parsed",
    "new_prepared",
    "error_text",
    "near_names",
    "parse_arguments",
    "parse_object",
    "rejection",
    "unknown_tool",
]

ToolErrorType: TypeAlias = Literal[
    "tool_payload_too_large",
    "tool_payload_parse_error",
    "unknown_tool",
    "invalid_arguments",
    "tool_exception",
    "tool_timeout",
    "repeated_call",
    "approval_refused",
    "interrupted",
]
"""Why a tool call produced an error result (results, events and the Harmony parser alike).
``interrupted``: the run ended (cancelled, a closed stream, a failing approve callback) before
the call finished; only in events (the run's result is its exception)."""

TOOL_ERROR_TYPES: Final[frozenset[str]] = frozenset(ToolErrorType.__args__)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class CallRejection:
    """A call that cannot run, with one message for the model and one for events."""

    error_type: ToolErrorType
    message: str
    """The text sent back to the model: what was wrong and what was expected."""
    event_message: str
    """A short description that never contains argument values (for events and metrics)."""


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """A call that passed every check: a known tool and schema-valid arguments."""

    name: str
    arguments: dict[str, Any]


@builds(PreparedCall)
def new_prepared(*, name: str, arguments: dict[str, Any]) -> PreparedCall:
    """A :class:`PreparedCall` (every checked call makes one), built without a call of
    ``object.__setattr__`` per field (:func:`gramagent._frozen.builds`; docs/performance.md,
    "Frozen builders")."""
    return PreparedCall(name, arguments)


INVALID_CALL_TYPES: Final[frozenset[str]] = frozenset(
    {"tool_payload_too_large", "tool_payload_parse_error", "unknown_tool", "invalid_arguments"}
)
"""Error types that are the model's mistake; they count against the per-tool retry budget."""

MAX_PAYLOAD_BYTES: Final = 8192
"""Default payload limit: argument text larger than this (UTF-8 bytes) is never parsed."""

_SCHEMA_PREVIEW_CHARS = 2000


def error_text(error_type: ToolErrorType, detail: str) -> str:
    """The text an error result sends the model: ``Error (<type>): <detail>``."""
    return f"Error ({error_type}): {detail}"


def rejection(error_type: ToolErrorType, detail: str, event_message: str) -> CallRejection:
    """A :class:`CallRejection` whose model text is :func:`error_text`."""
    return CallRejection(error_type, error_text(error_type, detail), event_message)


def parse_arguments(
    raw: str, *, max_bytes: int = MAX_PAYLOAD_BYTES, tool: str = "the tool"
) -> dict[str, Any] | CallRejection:
    """Parse a call's argument text into a JSON object, or say why it cannot be.

    The size is checked first, on the UTF-8 bytes, so an oversized payload is never parsed.
    Blank text means no arguments (``{}``): some servers send ``""`` for argument-less calls.

    Args:
        raw: the arguments as the model sent them.
        max_bytes: the payload limit in UTF-8 bytes.
        tool: the tool name, used in the messages.

    Returns:
        The parsed object, or a rejection of type ``tool_payload_too_large`` or
        ``tool_payload_parse_error``.
    """
    value = parse_object(raw, max_bytes)
    if value is not None:
        return value
    # Rejected: check again, step by step, to say why.
    size = len(raw) if len(raw) * 4 <= max_bytes else _utf8_size(raw, max_bytes)
    if size > max_bytes:
        return rejection(
            "tool_payload_too_large",
            f"the arguments for {tool} are {size} bytes; the limit is {max_bytes} bytes. "
            "Call it again with smaller arguments.",
            f"arguments payload of {size} bytes exceeds the {max_bytes}-byte limit",
        )
    try:
        decoded = exact_json.loads(raw)
    except _NOT_JSON as exc:
        where = _error_position(exc)
        return rejection(
            "tool_payload_parse_error",
            f"the arguments for {tool} are not valid JSON ({exc}). "
            "Send the arguments as one JSON object.",
            "arguments are not valid JSON" + (f" ({where})" if where else ""),
        )
    if not isinstance(decoded, dict):
        kind = _json_kind(decoded)
        return rejection(
            "tool_payload_parse_error",
            f"the arguments for {tool} must be a JSON object, got {kind}. "
            "Send the arguments as one JSON object with a key per parameter.",
            f"arguments are JSON {kind}, not an object",
        )
    raise AssertionError("parse_object refused arguments that pass every check")


_NOT_JSON: Final = (orjson.JSONDecodeError, ValueError, TypeError, RecursionError)
"""What decoding text that is not JSON under :mod:`gramagent._json`'s rules raises."""


def parse_object(raw: str, max_bytes: int = MAX_PAYLOAD_BYTES) -> dict[str, Any] | None:
    """The JSON object :func:`parse_arguments` accepts in ``raw``, or None where it rejects it.

    The usual call's path: the same checks, without preparing the messages of a rejection
    (call :func:`parse_arguments` for those).
    """
    if len(raw) * 4 > max_bytes and _utf8_size(raw, max_bytes) > max_bytes:
        return None
    if not raw or raw.isspace():  # what str.strip() would leave empty
        return {}
    try:
        value = exact_json.loads(raw)
    except _NOT_JSON:
        return None
    return value if isinstance(value, dict) else None


def check_call(
    name: str,
    raw_arguments: str,
    *,
    validators: Mapping[str, Callable[[object], Sequence[str]]],
    schemas: Mapping[str, Mapping[str, object]],
    max_bytes: int = MAX_PAYLOAD_BYTES,
) -> PreparedCall | CallRejection:
    """Run every check on one call, in order: payload size, JSON object, known tool, schema.

    The composition of :func:`parse_arguments` and :func:`check_parsed`.

    Args:
        name: the tool name the model asked for.
        raw_arguments: the argument text as sent.
        validators: per tool name, a function returning the schema violations of an instance
            (empty when valid), compiled once at bind time.
        schemas: per tool name, the JSON Schema of its arguments (quoted in error messages).
        max_bytes: the payload limit in UTF-8 bytes.

    Returns:
        A :class:`PreparedCall`, or the :class:`CallRejection` of the first failed check.
    """
    label = f"tool {name!r}" if name in validators else "this call"
    parsed = parse_arguments(raw_arguments, max_bytes=max_bytes, tool=label)
    if isinstance(parsed, CallRejection):
        return parsed
    return check_parsed(name, parsed, validators=validators, schemas=schemas)


def check_parsed(
    name: str,
    arguments: dict[str, Any],
    *,
    validators: Mapping[str, Callable[[object], Sequence[str]]],
    schemas: Mapping[str, Mapping[str, object]],
) -> PreparedCall | CallRejection:
    """Check parsed arguments: the tool must be known and the arguments match its schema.

    ``null`` values a strict-mode model sends for optional properties are removed first
    (:func:`~gramagent._spec.schema.nulls.strip_strict_nulls`), so the tool's defaults apply.
    """
    checked = check_arguments(name, arguments, validators=validators, schemas=schemas)
    if isinstance(checked, CallRejection):
        return checked
    return new_prepared(name=name, arguments=checked)


def check_arguments(
    name: str,
    arguments: dict[str, Any],
    validators: Mapping[str, Callable[[object], Sequence[str]]],
    schemas: Mapping[str, Mapping[str, object]],
    text: str | None = None,
) -> dict[str, Any] | CallRejection:
    """What :func:`check_parsed` checks, giving the arguments to run with (strict-mode nulls
    removed) instead of a :class:`PreparedCall`: the loop's path, once per call.

    ``text``: the JSON text ``arguments`` were parsed from, when known. JSON writes null one
    way only, so arguments whose text has no ``null`` in it hold none, and are not searched
    for one.
    """
    try:
        validate = validators[name]
    except KeyError:
        return unknown_tool(name, validators.keys())
    if (text is None or "null" in text) and _has_null(arguments):
        schema = schemas.get(name)
        if schema is not None:
            arguments = strip_strict_nulls(arguments, schema)
    problems = validate(arguments)
    if problems:
        listed = "\n".join(f"- {p}" for p in problems)
        return rejection(
            "invalid_arguments",
            f"the arguments for tool {name!r} do not match its schema:\n{listed}\n"
            f"Expected arguments (JSON Schema): {_schema_text(schemas.get(name))}",
            f"arguments do not match the schema ({len(problems)} problem"
            f"{'s' if len(problems) != 1 else ''})",
        )
    return arguments


def unknown_tool(name: str, known: Collection[str]) -> CallRejection:
    """The rejection of a call to a tool the agent does not declare, with near names."""
    near = near_names(name, known)
    hint = f" Did you mean {_or_list(near)}?" if near else ""
    available = ", ".join(sorted(known)[:30]) or "none"
    return rejection(
        "unknown_tool",
        f"there is no tool named {name[:100]!r}.{hint} Available tools: {available}.",
        "unknown tool" + (f" (near: {', '.join(near)})" if near else ""),
    )


def near_names(name: str, known: Collection[str], *, n: int = 3) -> list[str]:
    """Names in ``known`` close to ``name`` (case-insensitive matches first)."""
    if not known or not name:
        return []
    folded = [k for k in known if k.lower() == name.lower() and k != name]
    close = difflib.get_close_matches(name, list(known), n=n, cutoff=0.6)
    return list(dict.fromkeys(folded + close))[:n]


def _or_list(names: Sequence[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _has_null(value: object) -> bool:
    items: Iterable[object]
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return value is None
    for v in items:  # noqa: SIM110 - recursing into containers only
        if v is None or (isinstance(v, (dict, list)) and _has_null(v)):
            return True
    return False


def _utf8_size(raw: str, max_bytes: int) -> int:
    # A character is 1 to 4 bytes: skip the encoding when the length alone decides.
    if len(raw) > max_bytes:
        return len(raw.encode("utf-8", "surrogatepass"))
    if len(raw) * 4 <= max_bytes:
        return len(raw)
    return len(raw.encode("utf-8", "surrogatepass"))


def _error_position(exc: BaseException) -> str | None:
    lineno, colno = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    if isinstance(lineno, int) and isinstance(colno, int):
        return f"line {lineno} column {colno}"
    return None


def _json_kind(value: object) -> str:
    match value:
        case list():
            return "an array"
        case str():
            return "a string"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case None:
            return "null"
    return type(value).__name__


def _schema_text(schema: Mapping[str, object] | None) -> str:
    if schema is None:
        return "{}"
    text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    if len(text) > _SCHEMA_PREVIEW_CHARS:
        text = text[:_SCHEMA_PREVIEW_CHARS] + "...(schema truncated)"
    return text
