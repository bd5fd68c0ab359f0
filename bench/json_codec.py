"""JSON encoding and decoding of one chat request body: the standard library against orjson.

``python bench/json_codec.py`` times ``json.dumps(...).encode()`` / ``orjson.dumps`` and
``json.loads`` / ``orjson.loads`` on the body of the sayHello conversation's second request (a
system and a user message, the call, its result, one tool), best of 5 rounds of ``timeit``,
and prints each figure with the ratio of the two libraries. Both run in this one process, so
the ratio holds under the load of a shared machine.
"""

from __future__ import annotations

import json
import platform
import timeit
from collections.abc import Callable

import orjson

BODY = {
    "model": "qwen2.5-coder-0.5b",
    "messages": [
        {"role": "system", "content": "You are a friendly assistant."},
        {"role": "user", "content": "Hi, I am Alice"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "sayHello", "arguments": '{"personName": "Alice"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Hello, Alice!"},
    ],
    "tools": [{"type": "function", "function": {
        "name": "sayHello",
        "description": "Returns a friendly greeting message for the given name",
        "parameters": {"type": "object", "properties": {
            "personName": {"type": "string", "default": "world"}},
            "required": [], "additionalProperties": False}}}],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
}
TEXT = json.dumps(BODY)


def best_us(fn: Callable[[], object], number: int) -> float:
    """Microseconds per call: the best of 5 rounds of ``number`` calls."""
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    print(f"python {platform.python_version()}, orjson {orjson.__version__}, "
          f"body {len(TEXT)} bytes")
    rows = [
        ("encode", lambda: json.dumps(BODY).encode(), lambda: orjson.dumps(BODY)),
        ("decode", lambda: json.loads(TEXT), lambda: orjson.loads(TEXT)),
    ]
    for what, stdlib, fast in rows:
        slow_us, fast_us = best_us(stdlib, 5000), best_us(fast, 20000)
        print(f"{what}: json {slow_us:6.2f} us, orjson {fast_us:6.2f} us "
              f"({slow_us / fast_us:.1f}x)")


if __name__ == "__main__":
    main()
