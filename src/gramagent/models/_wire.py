"""Small pure helpers shared by the OpenAI-style wire formats (chat, responses)."""

from __future__ import annotations

import json
import secrets
from typing import Any

import orjson

from gramagent.messages import Usage
from gramagent.models.base import ToolDefinition

__all__ = ["ReplyError", "arguments_text", "new_call_id", "tool_parameters", "usage_from"]


class ReplyError(ValueError):
    """A server reply an adapter cannot read (the adapter turns it into a ModelAPIError)."""


def new_call_id() -> str:
    """A fresh call id, for formats and servers that send none (legacy functions, JSON modes)."""
    return "call_" + secrets.token_hex(12)


def arguments_text(value: Any) -> str:
    """A call's arguments as JSON text: strings are kept verbatim (even when malformed, the loop
    reports that), objects are encoded, a missing value means no arguments (``{}``)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "{}"
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # e.g. an integer beyond 64 bits, which orjson refuses
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            return str(value)


def tool_parameters(tool: ToolDefinition, strict: bool) -> tuple[dict[str, Any], bool]:
    """The parameters schema to send for ``tool`` and whether to mark it ``strict``.

    Strict mode uses the schema compiled at bind time (``strict_parameters``); a tool without
    one falls back to its plain schema, sent non-strict.
    """
    if strict and tool.strict_parameters is not None:
        return tool.strict_parameters, True
    return tool.parameters, False


def usage_from(data: Any, input_key: str, output_key: str) -> Usage | None:
    """Read a usage object (``prompt_tokens``/``completion_tokens`` or ``input_tokens``/
    ``output_tokens``); None when the server reported none."""
    if not isinstance(data, dict):
        return None
    inp = data.get(input_key)
    out = data.get(output_key)
    if not isinstance(inp, int) and not isinstance(out, int):
        return None
    return Usage(
        input_tokens=inp if isinstance(inp, int) else 0,
        output_tokens=out if isinstance(out, int) else 0,
        requests=1,
    )
