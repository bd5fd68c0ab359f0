"""Render a conversation as a Harmony prompt for a gpt-oss completion.

The prompt is the system message (model identity, dates, reasoning effort, valid channels),
the developer message (``# Instructions`` and the tools as a TypeScript-like
``namespace functions { ... }`` block generated from each tool's JSON Schema), the history,
and finally ``<|start|>assistant`` for the model to continue::

    <|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
    Knowledge cutoff: 2024-06

    Reasoning: low

    # Valid channels: analysis, commentary, final. Channel must be included for every message.
    Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer
    <|message|># Instructions
    ...

The output is character for character what OpenAI's reference renderer (``openai-harmony``)
produces for the same conversation (tests check it), with three deliberate differences where
the reference writes wrong TypeScript: a union inside an array type is parenthesised
(``("a" | "b")[]``, the reference writes ``"a" | "b"[]``), every line of a multi-line property
description is commented (the reference comments only the first), and string literals in enums
and defaults are JSON-escaped (the reference writes quotes unescaped). A tool whose schema has
no properties is rendered ``() => any``, as the Harmony format guide prescribes.

History: a user message is a ``user`` message; an assistant message with text and no calls
is a ``final`` message; its calls are ``commentary`` messages to ``functions.NAME`` ended by
``<|call|>`` (text sent with calls goes first, as a ``commentary`` preamble), each followed by
its result (``<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>...``).
Chain of thought is not kept in history (the loop's messages do not carry it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

import orjson

from gramagent._messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from gramagent._spec.definition import ToolDefinition

__all__ = [
    "DEFAULT_KNOWLEDGE_CUTOFF",
    "DEFAULT_MODEL_IDENTITY",
    "Reasoning",
    "escape_special_tokens",
    "recipient_for",
    "render_developer",
    "render_history",
    "render_prompt",
    "render_system",
    "render_tools",
    "schema_to_typescript",
]

Reasoning: TypeAlias = Literal["low", "medium", "high"]

DEFAULT_MODEL_IDENTITY: Final = "You are ChatGPT, a large language model trained by OpenAI."
"""The identity gpt-oss was trained with (the Harmony guide says to keep it; change the
assistant's persona in the instruction instead)."""

DEFAULT_KNOWLEDGE_CUTOFF: Final = "2024-06"

_CHANNELS_LINE: Final = (
    "# Valid channels: analysis, commentary, final. Channel must be included for every message."
)
_FUNCTIONS_LINE: Final = "Calls to these tools must go to the commentary channel: 'functions'."

_SPECIAL: Final = re.compile(
    r"<\|(start|end|message|channel|constrain|return|call|refusal|untrusted|end_untrusted"
    r"|meta_end|startoftext|endoftext|reserved_\d+)\|>"
)


def render_prompt(
    instruction: str,
    messages: Iterable[Message],
    tools: Sequence[ToolDefinition] = (),
    *,
    reasoning: Reasoning | None = "low",
    model_identity: str | None = DEFAULT_MODEL_IDENTITY,
    knowledge_cutoff: str | None = DEFAULT_KNOWLEDGE_CUTOFF,
    current_date: str | None = None,
    escape_special: bool = True,
) -> str:
    """The whole prompt for the assistant's next turn, ending with ``<|start|>assistant``.

    Args:
        instruction: The agent's instruction (the developer message's ``# Instructions``).
        messages: The conversation so far.
        tools: The tools the model may call (none: no ``# Tools`` section).
        reasoning: The reasoning effort line; None leaves it out.
        model_identity: The first line of the system message; None leaves it out.
        knowledge_cutoff: ``Knowledge cutoff:`` line; None leaves it out.
        current_date: ``Current date:`` line (ISO date); None leaves it out, which keeps the
            prompt the same from day to day.
        escape_special: Break up special-token text (``<|end|>`` ...) inside the instruction,
            user messages and tool results, so that text cannot forge message boundaries when
            the server tokenizes the prompt (see :func:`escape_special_tokens`).

    Returns:
        The prompt text.
    """
    esc = escape_special_tokens if escape_special else _same
    has_functions = bool(tools)
    parts = [
        _message(
            "system",
            render_system(
                reasoning=reasoning,
                model_identity=model_identity,
                knowledge_cutoff=knowledge_cutoff,
                current_date=current_date,
                has_functions=has_functions,
            ),
        )
    ]
    developer = render_developer(esc(instruction), tools)
    if developer:
        parts.append(_message("developer", developer))
    parts.append(render_history(messages, tools, escape_special=escape_special))
    parts.append("<|start|>assistant")
    return "".join(parts)


def render_system(
    *,
    reasoning: Reasoning | None = "low",
    model_identity: str | None = DEFAULT_MODEL_IDENTITY,
    knowledge_cutoff: str | None = DEFAULT_KNOWLEDGE_CUTOFF,
    current_date: str | None = None,
    has_functions: bool = False,
) -> str:
    """The system message's content (see :func:`render_prompt` for the arguments)."""
    top = [model_identity] if model_identity else []
    if knowledge_cutoff:
        top.append(f"Knowledge cutoff: {knowledge_cutoff}")
    if current_date:
        top.append(f"Current date: {current_date}")
    sections = ["\n".join(top)] if top else []
    if reasoning:
        sections.append(f"Reasoning: {reasoning}")
    channels = _CHANNELS_LINE
    if has_functions:
        channels += "\n" + _FUNCTIONS_LINE
    sections.append(channels)
    return "\n\n".join(sections)


def render_developer(instruction: str, tools: Sequence[ToolDefinition] = ()) -> str:
    """The developer message's content: ``# Instructions`` and ``# Tools`` ("" when neither)."""
    sections = ["# Instructions", instruction] if instruction else []
    if tools:
        sections.append(render_tools(tools))
    return "\n\n".join(sections)


def render_tools(tools: Sequence[ToolDefinition], namespace: str = "functions") -> str:
    """The ``# Tools`` section declaring ``tools`` in one TypeScript-like namespace."""
    lines = [f"## {namespace}\n", f"namespace {namespace} {{\n"]
    for tool in tools:
        lines.extend(f"// {line}" for line in _lines(tool.description))
        if _takes_no_arguments(tool.parameters):
            lines.append(f"type {tool.name} = () => any;\n")
        else:
            params = schema_to_typescript(tool.parameters)
            lines.append(f"type {tool.name} = (_: {params}) => any;\n")
    lines.append(f"}} // namespace {namespace}")
    return "# Tools\n\n" + "\n".join(lines)


def render_history(
    messages: Iterable[Message],
    tools: Sequence[ToolDefinition] = (),
    *,
    escape_special: bool = True,
) -> str:
    """The conversation as Harmony messages (no trailing ``<|start|>assistant``).

    Each call is followed by its result when the result is found among the tool results that
    come after it (matched by call id), so calls and results alternate as the model expects;
    results without a matching call are rendered where they stand.
    """
    esc = escape_special_tokens if escape_special else _same
    declared = frozenset(t.name for t in tools)
    items = list(messages)
    used: set[int] = set()
    out: list[str] = []
    for index, message in enumerate(items):
        match message:
            case UserMessage(content=content):
                out.append(_message("user", esc(content)))
            case AssistantMessage(content=content, tool_calls=calls):
                if not calls:
                    if content:
                        out.append(_message("assistant", content, channel="final"))
                    continue
                if content:
                    out.append(_message("assistant", content, channel="commentary"))
                for call in calls:
                    recipient = recipient_for(call.name, declared)
                    out.append(
                        _message(
                            "assistant",
                            call.arguments,
                            channel="commentary",
                            recipient=recipient,
                            content_type="<|constrain|>json",
                            end="<|call|>",
                        )
                    )
                    found = _find_result(items, index + 1, call.id, used)
                    if found is not None:
                        used.add(found)
                        out.append(_result(items[found], recipient, esc))  # type: ignore[arg-type]
            case ToolResultMessage():
                if index not in used:
                    out.append(_result(message, recipient_for(message.name, declared), esc))
    return "".join(out)


def recipient_for(name: str, declared: Iterable[str] = ()) -> str:
    """The Harmony recipient of a call to ``name``: ``functions.NAME`` for a function tool; a
    name already namespaced (``browser.search``) is kept as it is."""
    if name in declared or "." not in name:
        return f"functions.{name}"
    return name


def escape_special_tokens(text: str) -> str:
    """Break up Harmony special-token text so a tokenizer reads it as plain text.

    A zero-width joiner goes between ``<`` and ``|``: ``<|end|>`` stays readable but is no
    longer the end token. Text without special tokens is returned unchanged.
    """
    if "<|" not in text:
        return text
    return _SPECIAL.sub(lambda m: "<\u200d|" + m.group(0)[2:], text)


# -- JSON Schema to TypeScript ------------------------------------------------------------------


def schema_to_typescript(schema: Mapping[str, Any], indent: str = "") -> str:
    """A JSON Schema as the TypeScript-like type the Harmony format declares tools with.

    Objects become ``{ ... }`` with one property per line (descriptions, titles and examples
    as ``//`` comments above, ``?`` for optional properties, defaults as a trailing comment),
    string enums unions of literals, arrays ``T[]``, ``oneOf`` a union with one variant per
    line, a ``type`` list a union; anything else is ``any``.
    """
    one_of = schema.get("oneOf")
    if isinstance(one_of, list):
        out = []
        for variant in one_of:
            if not isinstance(variant, Mapping):
                variant = {}
            text = _nullable(variant, schema_to_typescript(variant, indent + "   "))
            comments = []
            if isinstance(variant.get("description"), str):
                comments.append(variant["description"])
            if "default" in variant:
                comments.append("default: " + _default(variant["default"], variant, top=True))
            out.append(f"\n{indent} | {text}" + (f" // {' '.join(comments)}" if comments else ""))
        return "".join(out)
    kind = schema.get("type")
    if isinstance(kind, list):
        names = ["number" if t == "integer" else t for t in kind if isinstance(t, str)]
        if names:
            return " | ".join(names)
    if not isinstance(kind, str):
        return "any"
    if kind == "object":
        return _object(schema, indent)
    if kind == "string":
        literals = [_literal(v) for v in schema.get("enum") or () if isinstance(v, str)]
        return " | ".join(literals) if literals else "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "array":
        if "items" not in schema:
            return "Array<any>"
        items = schema["items"]
        inner = schema_to_typescript(items if isinstance(items, Mapping) else {}, indent)
        return f"({inner})[]" if _is_union(inner) else f"{inner}[]"
    return "any"


def _object(schema: Mapping[str, Any], indent: str) -> str:
    out: list[str] = []
    if isinstance(schema.get("description"), str):
        out.extend(_comment(schema["description"], indent))
    out.append("{\n")
    properties = schema.get("properties")
    required = schema.get("required")
    needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    if isinstance(properties, Mapping):
        for key, prop in properties.items():
            if not isinstance(prop, Mapping):
                prop = {}
            mark = "" if key in needed else "?"
            if isinstance(prop.get("title"), str):
                out.append(f"{indent}// {prop['title']}\n{indent}//\n")
            one_of = prop.get("oneOf")
            description = prop.get("description")
            if not isinstance(description, str):
                description = None
            if one_of is None and description is not None:
                out.extend(_comment(description, indent))
            examples = prop.get("examples")
            if isinstance(examples, list) and examples:
                out.append(f"{indent}// Examples:\n")
                out.extend(f'{indent}// - "{e}"\n' for e in examples if isinstance(e, str))
            if isinstance(one_of, list):
                out.append(_one_of_property(key, mark, prop, one_of, description, indent))
                continue
            text = _nullable(prop, schema_to_typescript(prop, indent + "    "))
            out.append(f"{indent}{key}{mark}: {text},")
            if "default" in prop:
                out.append(f" // default: {_default(prop['default'], prop)}")
            out.append("\n")
    out.append(f"{indent}}}")
    return "".join(out)


def _one_of_property(key: str, mark: str, prop: Mapping[str, Any], variants: list[Any],
                     description: str | None, indent: str) -> str:
    """A property whose schema is a ``oneOf``: one variant per line under the name."""
    out: list[str] = []
    first = variants[0] if variants and isinstance(variants[0], Mapping) else {}
    described_above = description is not None and first.get("description") != description
    if described_above:
        out.extend(_comment(description, indent))  # type: ignore[arg-type]
    if "default" in prop:
        out.append(f"{indent}// default: {_default(prop['default'], prop)}\n")
    out.append(f"{indent}{key}{mark}:\n")
    for i, variant in enumerate(variants):
        if not isinstance(variant, Mapping):
            variant = {}
        text = _nullable(variant, schema_to_typescript(variant, indent + "   "))
        comments = []
        own = variant.get("description")
        if not (i == 0 and described_above) and isinstance(own, str) and own != description:
            comments.append(own)
        if "default" in variant:
            comments.append("default: " + _default(variant["default"], variant))
        out.append(f"{indent} | {text}" + (f" // {' '.join(comments)}" if comments else "") + "\n")
    out.append(f"{indent},\n")
    return "".join(out)


def _nullable(schema: Mapping[str, Any], text: str) -> str:
    if schema.get("nullable") is True and "null" not in text:
        return text + " | null"
    return text


def _default(value: Any, schema: Mapping[str, Any], *, top: bool = False) -> str:
    """A default as its comment shows it: enum strings bare, other strings quoted, JSON else.

    ``top`` is the top-level ``oneOf`` variant case, where the reference quotes every string.
    """
    if isinstance(value, str):
        has_enum = isinstance(schema.get("enum"), list) and bool(schema["enum"])
        if has_enum and not top:
            return value
        return _literal(value)
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # e.g. an integer beyond 64 bits
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _literal(value: str) -> str:
    return orjson.dumps(value).decode()


def _comment(text: str, indent: str) -> list[str]:
    """``// `` comment lines for ``text``, one per line of it."""
    return [f"{indent}// {line}\n" for line in _lines(text, keep_empty=True)]


_LITERAL_OR_COMMENT: Final = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*')


def _is_union(type_text: str) -> bool:
    """Whether a rendered type has a ``|`` outside brackets, literals and comments."""
    if "|" not in type_text:
        return False
    depth = 0
    for char in _LITERAL_OR_COMMENT.sub("", type_text):
        if char in "{([":
            depth += 1
        elif char in "})]":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
    return False


def _takes_no_arguments(schema: Mapping[str, Any]) -> bool:
    if not schema:
        return True
    return (
        schema.get("type") == "object"
        and not schema.get("properties")
        and "oneOf" not in schema
    )


def _lines(text: str, *, keep_empty: bool = False) -> list[str]:
    """Lines the way Rust's ``str::lines`` splits them (``\\n``, optional ``\\r`` before it)."""
    if not text:
        return [""] if keep_empty else []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


# -- messages -----------------------------------------------------------------------------------


def _message(
    role: str,
    content: str,
    *,
    channel: str | None = None,
    recipient: str | None = None,
    content_type: str | None = None,
    end: str = "<|end|>",
) -> str:
    head = role if recipient is None else f"{role} to={recipient}"
    if channel is not None:
        head += f"<|channel|>{channel}"
    if content_type is not None:
        head += f" {content_type}"
    return f"<|start|>{head}<|message|>{content}{end}"


def _result(message: ToolResultMessage, recipient: str, esc: Any) -> str:
    return _message(recipient, esc(message.content), channel="commentary", recipient="assistant")


def _find_result(items: Sequence[Message], start: int, call_id: str, used: set[int]) -> int | None:
    """Index of the first unused result for ``call_id`` after ``start``, before the next user
    or assistant message."""
    for index in range(start, len(items)):
        item = items[index]
        if not isinstance(item, ToolResultMessage):
            return None
        if item.call_id == call_id and index not in used:
            return index
    return None


def _same(text: str) -> str:
    return text
