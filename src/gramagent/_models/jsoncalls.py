"""Tool calls written as JSON in a message's text: the constrained step schema and its reader,
and the text-mode extractor.

Small local models often do not fill ``tool_calls``: the call lands in ``content`` as JSON,
sometimes fenced or wrapped in prose. Two remedies, used by the Chat Completions adapter's
``tool_call_mode``:

``constrained``
    The request carries a JSON Schema (:func:`tool_step_schema`) that a grammar-constrained
    server (llama.cpp, vLLM, ...) enforces while decoding: ``anyOf`` one variant per tool,
    ``{"name": {"const": TOOL}, "arguments": <the tool's schema>}``, a JSON list of such calls
    (several calls in one reply, as an API sends parallel calls), plus a final answer
    ``{"text": "..."}``. :func:`read_tool_step` turns the reply back into text or calls.
``text``
    Nothing is constrained; :func:`extract_json_calls` finds ``{"name": ..., "arguments": ...}``
    objects (bare, fenced, in ``<tool_call>`` tags or surrounded by prose) whose name is a known
    tool. Objects naming unknown tools are left in the text.

Neither function raises: whatever a model writes becomes text or calls the loop can answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence

import orjson

from gramagent import _json as exact_json
from gramagent._messages import ToolCall, new_tool_call
from gramagent._models._wire import arguments_text, new_call_id
from gramagent._models.base import ModelTurn, NamedToolChoice, ToolChoice
from gramagent._models.wire_shapes import JSONSchema, ResponseFormat
from gramagent._spec.definition import ToolDefinition
from gramagent.errors import ConfigurationError

__all__ = [
    "FINAL_ANSWER",
    "SEVERAL_CALLS_HINT",
    "STEP_SCHEMA_NAME",
    "StepTextStream",
    "allows_several_calls",
    "call_names_in",
    "continued_calls",
    "continued_list_response_format",
    "continued_list_schema",
    "extract_json_calls",
    "lone_call",
    "read_tool_step",
    "tool_step_content",
    "tool_step_response_format",
    "tool_step_schema",
    "wants_tool_step",
]

FINAL_ANSWER = "final_answer"
"""Name of the constrained step variant that ends the turn with text (``{"text": ...}``)."""

STEP_SCHEMA_NAME = "tool_step"
"""The ``json_schema.name`` of the constrained step response format."""

SEVERAL_CALLS_HINT = "To make several calls at once, reply with a JSON list of the calls."
"""Appended to the system instruction of a constrained request that may hold several calls:
small models write one call object unless told that a list is the way to write several
(bench/RESULTS.md, "BFCL")."""

_FINAL_VARIANT: dict[str, object] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_EMPTY_WRAPPERS = re.compile(
    r"```[A-Za-z0-9_-]*\s*```|<tool_call>\s*</tool_call>|<tools>\s*</tools>", re.DOTALL
)
_NAME_FIELD = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGUMENTS_FIELD = re.compile(r'"(?:arguments|parameters)"\s*:\s*')
_decoder = json.JSONDecoder()


# -- constrained mode ------------------------------------------------------------------------


def tool_step_schema(tools: Sequence[ToolDefinition], tool_choice: ToolChoice,
                     several: bool = True) -> dict[str, object]:
    """The JSON Schema of one constrained step, honouring ``tool_choice``.

    ``"auto"``: every tool variant, a list of calls (one or more, each any tool variant) and
    the final answer; ``"required"``: the tool variants and the list; ``"none"`` (or no
    tools): the final answer only; a :class:`NamedToolChoice`: that tool's variant only. One
    variant is sent as it is, several as ``anyOf``. ``$defs`` of the tools' schemas are lifted
    to the root so their ``#/$defs/...`` references still resolve. ``several=False`` (the
    request's ``parallel_tool_calls`` is false): no list, one call per reply.

    Raises:
        ConfigurationError: ``tool_choice`` names a tool that is not in ``tools``.
    """
    if isinstance(tool_choice, NamedToolChoice):
        chosen = [t for t in tools if t.name == tool_choice.name]
        if not chosen:
            known = ", ".join(t.name for t in tools) or "none"
            raise ConfigurationError(
                f"tool_choice names tool {tool_choice.name!r}, which is not offered "
                f"(tools: {known})"
            )
        variants, defs = _tool_variants(chosen)
    elif tool_choice == "none" or not tools:
        variants, defs = [_FINAL_VARIANT], {}
    else:
        variants, defs = _tool_variants(tools)
        if several:
            variants.append({"type": "array", "items": _one_call(variants), "minItems": 1})
        if tool_choice != "required":
            variants.append(_FINAL_VARIANT)
    schema: dict[str, object] = dict(variants[0]) if len(variants) == 1 else {"anyOf": variants}
    if defs:
        schema["$defs"] = defs
    return schema


def continued_list_schema(tools: Sequence[ToolDefinition], written: object) -> dict[str, object]:
    """The JSON Schema of a list of calls that opens with the call ``written``.

    A JSON list whose first item is ``written`` (``prefixItems`` with a ``const``: the call
    exactly as the model wrote it, decoded) and whose further items, if any, are calls to any
    of ``tools``. Asked after a reply that was one call (:func:`lone_call`), it lets the model
    itself choose between closing the list (``]``: that one call) and going on (``,``: more
    calls), having seen its first call written as the opening of a list: small models asked
    for several things at once often write only the first (bench/RESULTS.md, "BFCL").
    """
    variants, defs = _tool_variants(tools)
    schema: dict[str, object] = {
        "type": "array",
        "prefixItems": [{"const": written}],
        "items": _one_call(variants),
        "minItems": 1,
    }
    if defs:
        schema["$defs"] = defs
    return schema


def continued_list_response_format(tools: Sequence[ToolDefinition], written: object
                                   ) -> ResponseFormat:
    """The ``response_format`` carrying :func:`continued_list_schema` (as
    :func:`tool_step_response_format`)."""
    return _response_format(continued_list_schema(tools, written))


def _one_call(variants: Sequence[dict[str, object]]) -> dict[str, object]:
    """The schema of one call to any of the tools whose ``variants`` these are."""
    return variants[0] if len(variants) == 1 else {"anyOf": list(variants)}


def tool_step_response_format(
    tools: Sequence[ToolDefinition], tool_choice: ToolChoice, several: bool = True
) -> ResponseFormat:
    """The ``response_format`` carrying :func:`tool_step_schema` (OpenAI's ``json_schema`` form,
    which llama.cpp's server reads as ``response_format.json_schema.schema``)."""
    return _response_format(tool_step_schema(tools, tool_choice, several))


def _response_format(schema: JSONSchema) -> ResponseFormat:
    return {
        "type": "json_schema",
        "json_schema": {"name": STEP_SCHEMA_NAME, "strict": False, "schema": schema},
    }


def _tool_variants(
    tools: Iterable[ToolDefinition],
) -> tuple[list[dict[str, object]], dict[str, object]]:
    variants: list[dict[str, object]] = []
    defs: dict[str, object] = {}
    for tool in tools:
        params = tool.parameters
        if "$defs" in params or "definitions" in params:
            params = dict(params)
            defs.update(params.pop("$defs", {}))
            defs.update(params.pop("definitions", {}))
        variants.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return variants, defs


def read_tool_step(
    content: str | None, tool_names: Collection[str] = ()
) -> tuple[str | None, tuple[ToolCall, ...]]:
    """Read a constrained step from a reply's content: ``(text, calls)``.

    - ``{"name": N, "arguments": A}`` (or a list of them) is a call to ``N`` with a new id;
      ``arguments`` keeps its JSON text. ``name == "final_answer"`` with ``{"text": ...}``
      arguments, when no tool has that name, is read as the final answer.
    - ``{"text": T}`` is the final answer ``T``.
    - Content that does not start with ``{`` or ``[`` (after an optional code fence) is text:
      the server ignored the response format and the model answered in prose.
    - Anything else that looks like JSON but cannot be read (truncated output, a stray shape)
      becomes a call so the loop answers it with an error the model can act on: the name is
      recovered when the text shows one (else ``""``, an unknown tool) and the arguments are the
      raw text (malformed JSON, reported as such).
    """
    body = _step_json(content)
    if body is None:
        return content, ()
    try:
        value = exact_json.loads(body)
    except ValueError:
        return None, (_broken_call(body),)
    steps = value if isinstance(value, list) else [value]
    calls: list[ToolCall] = []
    texts: list[str] = []
    for step in steps:
        read = _read_step(step, tool_names)
        if read is None:
            return None, (_broken_call(body),)
        if isinstance(read, str):
            texts.append(read)
        else:
            calls.append(read)
    if calls:
        return None, tuple(calls)
    if not texts:
        return None, (_broken_call(body),)
    return "\n".join(texts), ()


def _step_json(content: str | None) -> str | None:
    """The JSON text of a constrained step (``content`` stripped, or the inside of its code
    fence), or None when ``content`` does not look like JSON (prose)."""
    if content is None:
        return None
    body = content.strip()
    if body[:1] not in ("{", "["):
        fenced = _FENCE.search(body)
        if fenced is None or fenced.group(1).strip()[:1] not in ("{", "["):
            return None
        body = fenced.group(1).strip()
    return body


def lone_call(content: str | None, tool_names: Collection[str]) -> dict[str, object] | None:
    """The call of a constrained step that is one call object, decoded; else None.

    One call: a JSON object ``{"name": N, "arguments": {...}}`` with ``N`` in ``tool_names``
    and arguments that are an object, not inside a list. A list (the model already chose how
    many calls), the final answer, prose and JSON that cannot be read are None: only a lone
    call is worth asking whether more calls follow (:func:`continued_list_schema`).
    """
    body = _step_json(content)
    if body is None or not body.startswith("{"):
        return None
    try:
        value = exact_json.loads(body)
    except ValueError:
        return None
    if (isinstance(value, dict) and value.keys() == {"name", "arguments"}
            and value["name"] in tool_names and value["name"] != FINAL_ANSWER
            and isinstance(value["arguments"], dict)):
        return value
    return None


def continued_calls(first: ToolCall, turn: ModelTurn) -> tuple[ToolCall, ...]:
    """The calls of a reply to :func:`continued_list_schema` that opens with ``first``.

    ``first`` (the lone call the model wrote before), then the further calls of ``turn``. When
    ``turn``'s first call is not ``first`` (same name and the same arguments, decoded), as
    from a server that did not enforce the ``const``, or its JSON could not be read (a reply
    cut off by the token limit, a model repeating one call until it), ``first`` alone: the lone
    call stands.
    """
    calls = turn.tool_calls
    if turn.cut_off_calls or not calls or not _same_call(calls[0], first):
        return (first,)
    return (first, *calls[1:])


def _same_call(call: ToolCall, other: ToolCall) -> bool:
    if call.name != other.name:
        return False
    try:
        return bool(exact_json.loads(call.arguments or "{}")
                    == exact_json.loads(other.arguments or "{}"))
    except ValueError:
        return False


def _read_step(step: object, tool_names: Collection[str]) -> ToolCall | str | None:
    if not isinstance(step, dict):
        return None
    name = step.get("name")
    if isinstance(name, str):
        args = step.get("arguments", step.get("parameters"))
        if name == FINAL_ANSWER and name not in tool_names:
            text = args.get("text") if isinstance(args, dict) else args
            if isinstance(text, str):
                return text
        return new_tool_call(id=new_call_id(), name=name, arguments=arguments_text(args))
    text = step.get("text")
    if isinstance(text, str):
        return text
    return None


def call_names_in(content: str | None) -> list[str]:
    """The names in every ``"name": "..."`` field of ``content``, in order: the functions a
    reply meant to call, whether or not its JSON could be read."""
    names: list[str] = []
    for match in _NAME_FIELD.finditer(content or ""):
        names.append(_json_string(match.group(1)))
    return names


def _json_string(raw: str) -> str:
    """A JSON string's body (between the quotes) decoded, or as it is when it cannot be."""
    try:
        value: str = json.loads(f'"{raw}"')
    except ValueError:
        return raw
    return value


def _broken_call(body: str) -> ToolCall:
    name_match = _NAME_FIELD.search(body)
    name = _json_string(name_match.group(1)) if name_match is not None else ""
    args_match = _ARGUMENTS_FIELD.search(body)
    arguments = body[args_match.end():] if args_match is not None else body
    return new_tool_call(id=new_call_id(), name=name, arguments=arguments)


def allows_several_calls(tools: Sequence[ToolDefinition], tool_choice: ToolChoice,
                         parallel: bool = True) -> bool:
    """Whether :func:`tool_step_schema` lets a reply hold several calls (a list): never when
    the request's ``parallel_tool_calls`` is false."""
    return parallel and bool(tools) and tool_choice in ("auto", "required")


def wants_tool_step(body: Mapping[str, object]) -> bool:
    """Whether a chat request body asks for the constrained format of :func:`tool_step_schema`."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return False
    schema = fmt.get("json_schema")
    return isinstance(schema, dict) and schema.get("name") == STEP_SCHEMA_NAME


def tool_step_content(turn: ModelTurn) -> str:
    """The content a constrained server would send for ``turn`` (the inverse of
    :func:`read_tool_step`): a lone call as ``{"name", "arguments"}``, several as a list of
    those, else ``{"text"}``.

    Arguments are spliced in as written, so malformed arguments stay malformed.
    """
    if turn.tool_calls:
        calls = [_call_content(call) for call in turn.tool_calls]
        return calls[0] if len(calls) == 1 else "[" + ", ".join(calls) + "]"
    return orjson.dumps({"text": turn.text or ""}).decode()


def _call_content(call: ToolCall) -> str:
    name = orjson.dumps(call.name).decode()
    return f'{{"name": {name}, "arguments": {call.arguments or "{}"}}}'


_STEP_TEXT_START = re.compile(r'\s*\{\s*"text"\s*:\s*"')
_SAFE_END = re.compile(r'(?:[^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}$")
_SPACES = re.compile(r"\s+")
_LONGEST_PENDING = 11
"""The most raw text a string's decoding waits on: a high surrogate's escape (6 characters)
and the start of the next escape (5)."""


class StepTextStream:
    """The answer of a constrained step (``{"text": "..."}``) read as its content streams in.

    :meth:`feed` takes content pieces and returns the newly decoded text of the ``text``
    string: escapes are decoded once whole (a piece may end inside one), and nothing is
    returned for a step that is a call (or content that is not a step). What it returns,
    joined, is a prefix of what :func:`read_tool_step` reads from the whole content.
    """

    __slots__ = ("_content", "_done", "_open")

    def __init__(self) -> None:
        self._content = ""
        """Before the string opens: the content so far (each run of spaces as one). After:
        the raw text of the string not decoded yet (an escape a piece cut, a few characters):
        nothing grows with the answer, so a long answer in small pieces costs time in its
        length, not its square."""
        self._open = False  # whether the string's raw text has begun
        self._done = False

    def feed(self, piece: str) -> str:
        """Take a content piece; return the answer text it completes (may be empty)."""
        if self._done:
            return ""
        raw = self._content + piece
        if not self._open:
            match = _STEP_TEXT_START.match(raw)
            if match is None:
                self._content = _SPACES.sub(" ", raw)
                self._done = not self._could_start()
                return ""
            self._open = True
            raw = raw[match.end():]
        safe = _SAFE_END.match(raw)
        segment = safe.group(0) if safe else ""
        if len(segment) < len(raw) and raw[len(segment)] == '"':
            self._done = True  # the string is closed
        elif _HIGH_SURROGATE.search(segment):
            segment = segment[:-6]  # wait for the low half of the pair
        self._content = raw[len(segment):]
        if len(self._content) > _LONGEST_PENDING:
            self._done = True  # not an escape a piece cut: one JSON does not have
        if not segment:
            return ""
        decoded: str = json.loads(f'"{segment}"')
        return decoded

    def _could_start(self) -> bool:
        """Whether the content so far can still grow into ``{"text": "``."""
        compact = re.sub(r"\s+", "", self._content)
        return '{"text":"'.startswith(compact)


# -- text mode -------------------------------------------------------------------------------


def extract_json_calls(
    content: str | None, tool_names: Collection[str]
) -> tuple[str | None, tuple[ToolCall, ...]]:
    """Find tool calls written as JSON in free text: ``(remaining text, calls)``.

    Recognised: ``{"name": N, "arguments": {...}}`` (``parameters`` accepted for
    ``arguments``), lists of those, and the wrappers ``{"tool_call": ...}``,
    ``{"tool_calls": [...]}`` and ``{"function": ...}``; anywhere in the text, bare, in code
    fences or in ``<tool_call>`` tags. Only names in ``tool_names`` count: a JSON object naming
    an unknown tool stays in the text. With no call found the content comes back unchanged.
    The remaining text drops the calls' JSON and the fences or tags left empty; it is None when
    nothing else remains.
    """
    if not content or ("{" not in content and "[" not in content):
        return content, ()
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    length = len(content)
    while pos < length:
        start = _next_open(content, pos)
        if start < 0:
            break
        try:
            value, end = _decoder.raw_decode(content, start)
        except ValueError:
            pos = start + 1
            continue
        found: list[ToolCall] = []
        if _collect_calls(value, tool_names, found) and found:
            calls.extend(found)
            spans.append((start, end))
        pos = end
    if not calls:
        return content, ()
    parts: list[str] = []
    last = 0
    for start, end in spans:
        parts.append(content[last:start])
        last = end
    parts.append(content[last:])
    rest = _EMPTY_WRAPPERS.sub("", "".join(parts)).strip()
    return (rest or None), tuple(calls)


def _next_open(text: str, pos: int) -> int:
    brace = text.find("{", pos)
    bracket = text.find("[", pos)
    if brace < 0:
        return bracket
    if bracket < 0:
        return brace
    return min(brace, bracket)


def _collect_calls(value: object, tool_names: Collection[str], out: list[ToolCall]) -> bool:
    """Append the calls in ``value`` to ``out``; False when ``value`` holds something that is
    not a call to a known tool (then nothing of it should be taken out of the text)."""
    if isinstance(value, list):
        return bool(value) and all(_collect_calls(v, tool_names, out) for v in value)
    if not isinstance(value, dict):
        return False
    name = value.get("name")
    if isinstance(name, str):
        if name not in tool_names or ("arguments" not in value and "parameters" not in value):
            return False
        args = value["arguments"] if "arguments" in value else value["parameters"]
        call_id = value.get("id")
        out.append(
            new_tool_call(
                id=call_id if isinstance(call_id, str) and call_id else new_call_id(),
                name=name,
                arguments=arguments_text(args),
            )
        )
        return True
    for key in ("tool_calls", "tool_call", "function"):
        if key in value and len(value) <= 3:
            return _collect_calls(value[key], tool_names, out)
    return False
