"""Parse Harmony text (what gpt-oss models write) into messages, in one go or incrementally.

Harmony frames every message as ``<|start|>{header}<|message|>{content}`` ended by ``<|end|>``,
``<|call|>`` (the model calls a tool) or ``<|return|>`` (the answer is done). A completion that
follows a prompt ending in ``<|start|>assistant`` begins without ``<|start|>``. The header holds
the role (or, for a tool's output, the tool's name), an optional recipient ``to=...`` (in the
role part or after the channel), the channel after ``<|channel|>``, and a content type (a bare
word, or ``<|constrain|>json``)::

    <|channel|>analysis<|message|>Need the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
    <|message|>{"city":"Paris"}<|call|>

(without the line break before ``<|message|>``). Header parsing follows the rules of OpenAI's
reference implementation (``openai-harmony``), so well-formed text gives the same messages; on
malformed text this parser keeps going where the reference stops:

- a malformed header, or text between messages, becomes one *error item*
  (``kind="error"``); the messages around it are kept;
- a message not closed before the next ``<|start|>`` ends there (``ended_by="start"``);
- text ending inside a message gives ``ended_by="eof"``: a tool call cut off this way is
  flagged (``complete`` is false) and must not be executed;
- a completion with no Harmony tokens at all is one plain message (``channel=None``).

Tool calls are assistant messages with a recipient: ``functions.NAME`` (warned when not on the
``commentary`` channel), the built-ins ``browser.*`` and ``python``, and the stub form of the
tool-calling ADR, ``<|channel|>tool<|message|>{"tool":"NAME","arguments":{...}}``. Their JSON
payloads are checked like the loop checks arguments (size before parsing, then JSON object):
failures carry ``error_type`` ``tool_payload_too_large`` or ``tool_payload_parse_error``.

Speed: the scanner jumps between special tokens with compiled regular expressions, so the work
per character happens in C; per message it does a few string operations.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from gramagent import _json as exact_json
from gramagent._spec.calls.check import (
    MAX_PAYLOAD_BYTES,
    CallRejection,
    parse_arguments,
    rejection,
)

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "SPECIAL_TOKENS",
    "EndedBy",
    "HarmonyDelta",
    "HarmonyMessage",
    "HarmonyStreamParser",
    "MessageErrorType",
    "parse_harmony",
]

EndedBy: TypeAlias = Literal["end", "call", "return", "eof", "start"]
"""What closed a message: ``<|end|>``, ``<|call|>``, ``<|return|>``, the end of the text, or the
``<|start|>`` of the next message (the message was never closed)."""

MessageErrorType: TypeAlias = Literal[
    "malformed_header", "unexpected_text", "tool_payload_too_large", "tool_payload_parse_error"
]
"""Why a message is an error item (``malformed_header``, ``unexpected_text``) or why a tool
call's payload was rejected (the loop's error types)."""

START: Final = "<|start|>"
MESSAGE: Final = "<|message|>"
END: Final = "<|end|>"
CALL: Final = "<|call|>"
RETURN: Final = "<|return|>"
CHANNEL: Final = "<|channel|>"
CONSTRAIN: Final = "<|constrain|>"

SPECIAL_TOKENS: Final = (START, MESSAGE, END, CALL, RETURN, CHANNEL, CONSTRAIN)
"""The Harmony special tokens as they appear in completion text."""

_ENDED_BY: Final[dict[str, EndedBy]] = {
    "end": "end", "call": "call", "return": "return", "start": "start"
}
_TERMINATORS: Final = (END, CALL, RETURN, START)
_PARTIAL_TERMINATORS: Final = frozenset(t[:i] for t in _TERMINATORS for i in range(1, len(t)))
_HOLD_BACK: Final = max(len(t) for t in _TERMINATORS) - 1
"""A chunk may end with a partial token; at most this many trailing characters are held."""
_SEARCH_BACK: Final = max(len(t) for t in (START, MESSAGE, END, CALL, RETURN, CHANNEL)) - 1

# Next token ending a header / a content / what may begin a message.
_HEADER_END: Final = re.compile(r"<\|(message|start|end|call|return)\|>")
_CONTENT_END: Final = re.compile(r"<\|(end|call|return|start)\|>")
_NEXT_MESSAGE: Final = re.compile(r"<\|(start|channel)\|>")
_CHANNEL_NAME: Final = re.compile(r"[^\s<]*")
_STUB_TOOL_NAME: Final = re.compile(r'"tool"\s*:\s*"([^"\\]{1,200})"')

_NO_START: Final = "message without <|start|>: taken as the assistant's"
_ROLES: Final = frozenset({"user", "assistant", "system", "developer", "tool"})
_NOT_CALLS: Final = frozenset({"all", "assistant", "user"})
_ERROR_TEXT_CHARS: Final = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class HarmonyMessage:
    """One parsed Harmony message, or one error item standing for a malformed stretch of text.

    A tool call is an assistant message whose ``name`` is set; its ``arguments`` hold the
    payload text when it passed the checks, else ``error_type`` and ``error`` say why not.
    """

    role: str | None
    """``assistant``, ``user``, ``system``, ``developer``, or ``tool`` for a tool's output;
    None for an error item whose header could not be read."""
    channel: str | None = None
    """``analysis``, ``commentary``, ``final`` (or another word the model wrote), or None."""
    recipient: str | None = None
    """The header's ``to=`` target (``functions.get_weather``, ``assistant``, ...), or None."""
    content_type: str | None = None
    """``<|constrain|>json``, a bare word such as ``json`` or ``code``, or None."""
    content: str = ""
    """The text between ``<|message|>`` and the end token (for an error item: the raw text)."""
    ended_by: EndedBy = "eof"
    author_name: str | None = None
    """For a tool's output (``role="tool"``): the tool, e.g. ``functions.get_weather``."""
    name: str | None = None
    """For a tool call: the tool to call (``get_weather``, ``browser.search``, ``python``)."""
    arguments: str | None = None
    """For a tool call whose payload passed the checks: the argument text (JSON object text;
    the code for ``python``)."""
    error_type: MessageErrorType | None = None
    error: str | None = None
    """What is wrong (never echoes argument values)."""
    warnings: tuple[str, ...] = ()
    """Oddities that did not stop the message from being used (e.g. a call off commentary)."""
    offset: int = 0
    """Character offset of the message (its ``<|start|>``) in the parsed text."""
    kind: Literal["message", "error"] = "message"
    """``error`` for an error item (``error_type`` ``malformed_header`` or ``unexpected_text``)."""

    @property
    def is_tool_call(self) -> bool:
        """True for a message that asks for a tool (well-formed or not)."""
        return self.name is not None

    @property
    def complete(self) -> bool:
        """False when the text ended inside this message (a cut-off call must not run)."""
        return self.ended_by != "eof"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the header fields, content and end, then the call fields when set."""
        out: dict[str, Any] = {}
        if self.kind == "error":
            out["kind"] = "error"
        out.update(
            role=self.role,
            channel=self.channel,
            recipient=self.recipient,
            content_type=self.content_type,
            content=self.content,
            ended_by=self.ended_by,
        )
        if self.author_name is not None:
            out["author_name"] = self.author_name
        if self.name is not None:
            out["name"] = self.name
            if self.arguments is not None:
                out["arguments"] = self.arguments
        if self.error_type is not None:
            out["error_type"] = self.error_type
            out["error"] = self.error
        if self.warnings:
            out["warnings"] = list(self.warnings)
        out["offset"] = self.offset
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class HarmonyDelta:
    """A piece of the content of the message being streamed (no partial special tokens).

    The deltas of one message, joined, equal its final ``content``; they all come before the
    :class:`HarmonyMessage` itself. Messages that are error items have no deltas.
    """

    text: str
    role: str | None
    channel: str | None
    recipient: str | None
    offset: int
    """Offset of the message this delta belongs to (matches its ``HarmonyMessage.offset``)."""
    kind: Literal["delta"] = "delta"


def parse_harmony(text: str, *, role: str | None = "assistant") -> list[HarmonyMessage]:
    """Parse Harmony text into messages (error items included, in text order).

    Args:
        text: A completion (the text after a prompt ending in ``<|start|>assistant``), or a
            whole transcript.
        role: The role of a first message written without ``<|start|>`` (a completion's);
            None when the text is a transcript where every message has its ``<|start|>``.

    Returns:
        The messages in order. Never raises on malformed text: see :class:`HarmonyMessage`.
    """
    scanner = _Scanner(role, deltas=False)
    out = scanner.feed(text)
    out.extend(scanner.finish())
    return out  # type: ignore[return-value]  # a scanner without deltas yields messages only


class HarmonyStreamParser:
    """Incremental parser: feed text chunks as they arrive, get messages and content deltas.

    Chunks may split anywhere, special tokens included. The messages equal what
    :func:`parse_harmony` returns for the whole text; content is released as
    :class:`HarmonyDelta` items as soon as it cannot be the start of a special token.

    Example::

        parser = HarmonyStreamParser()
        for chunk in chunks:
            for item in parser.feed(chunk):
                ...  # HarmonyDelta or HarmonyMessage
        for item in parser.finish():
            ...
    """

    __slots__ = ("_messages", "_scanner")

    def __init__(self, *, role: str | None = "assistant") -> None:
        """Args: role: as for :func:`parse_harmony`."""
        self._scanner = _Scanner(role, deltas=True)
        self._messages: list[HarmonyMessage] = []

    @property
    def messages(self) -> list[HarmonyMessage]:
        """The messages completed so far."""
        return list(self._messages)

    def feed(self, chunk: str) -> list[HarmonyDelta | HarmonyMessage]:
        """Take one chunk; return the deltas and completed messages it produced, in order."""
        items = self._scanner.feed(chunk)
        if items:
            self._messages.extend(i for i in items if type(i) is HarmonyMessage)
        return items

    def finish(self) -> list[HarmonyDelta | HarmonyMessage]:
        """Signal the end of the text; return what it completes (e.g. a cut-off message, after
        the last delta of its content)."""
        items = self._scanner.finish()
        self._messages.extend(i for i in items if type(i) is HarmonyMessage)
        return items

    def __iter__(self) -> Iterator[HarmonyMessage]:
        return iter(self.messages)


# -- the scanner ------------------------------------------------------------------------------

_EXPECT, _HEADER, _CONTENT = 0, 1, 2


_Header: TypeAlias = tuple[str, str | None, str | None, str | None, str | None]
"""A read header: (role, author_name, channel, recipient, content_type)."""

_HEADER_CACHE: dict[tuple[str, str | None], _Header] = {}
_HEADER_CACHE_SIZE: Final = 4096


class _HeaderError(ValueError):
    """A header that cannot be read."""


class _Scanner:
    """The state machine behind both parsers.

    ``_buf`` holds the text not yet consumed and ``_base`` is the offset of ``_buf[0]`` in the
    whole text; ``_pos`` is where the current piece (stray text, header or content) starts and
    ``_scan`` where the next token search resumes. When streaming, content already scanned is
    moved out of the buffer into ``_parts`` (and released as deltas), so a long message fed in
    small chunks costs linear time.
    """

    __slots__ = (
        "_base", "_buf", "_deltas", "_header", "_implied", "_msg_offset", "_note", "_parts",
        "_pos", "_problem", "_raw_header", "_scan", "_state",
    )

    def __init__(self, role: str | None, *, deltas: bool) -> None:
        self._buf = ""
        self._base = self._pos = self._scan = self._msg_offset = 0
        self._deltas = deltas
        self._parts: list[str] = []
        self._header: _Header | None = None
        self._problem = self._raw_header = ""
        self._note: str | None = None
        self._implied: str | None = role
        self._state = _EXPECT if role is None else _HEADER

    # -- driving ------------------------------------------------------------------------------

    def feed(self, chunk: str) -> list[HarmonyDelta | HarmonyMessage]:
        self._buf = self._buf + chunk if self._buf else chunk
        out: list[HarmonyDelta | HarmonyMessage] = []
        self._run(out, final=False)
        return out

    def finish(self) -> list[HarmonyDelta | HarmonyMessage]:
        out: list[HarmonyDelta | HarmonyMessage] = []
        self._run(out, final=True)
        self._buf, self._parts = "", []
        return out

    def _run(self, out: list[HarmonyDelta | HarmonyMessage], *, final: bool) -> None:
        step = (self._step_expect, self._step_header, self._step_content)
        while step[self._state](out, final):
            pass
        cut = self._pos
        if not final and cut and cut * 2 >= len(self._buf):
            # Drop consumed text (only when it is most of the buffer, to copy little).
            self._buf = self._buf[cut:]
            self._base += cut
            self._pos = 0
            self._scan = max(0, self._scan - cut)

    def _begin_header(self, at: int, header_start: int, implied: str | None,
                      note: str | None = None) -> None:
        self._msg_offset = self._base + at
        self._pos = self._scan = header_start
        self._implied = implied
        self._note = note
        self._state = _HEADER

    def _expect_at(self, pos: int) -> None:
        """Look for the next message from ``pos`` on."""
        self._pos = self._scan = pos
        self._state = _EXPECT

    def _after_end(self, match: re.Match[str]) -> None:
        """Go on after the token that ended a header or content: a ``<|start|>`` opens the
        next header, any other token leaves the scanner expecting a message."""
        if match.group(1) == "start":
            self._begin_header(match.start(), match.end(), None)
        else:
            self._expect_at(match.end())

    # -- states -------------------------------------------------------------------------------

    def _step_expect(self, out: list[HarmonyDelta | HarmonyMessage], final: bool) -> bool:
        buf = self._buf
        match = _NEXT_MESSAGE.search(buf, self._scan)
        if match is None:
            if final:
                self._stray(out, self._pos, len(buf), "eof")
                self._expect_at(len(buf))
            else:
                self._scan = max(self._pos, len(buf) - _SEARCH_BACK)
            return False
        if match.group(1) == "start":
            self._stray(out, self._pos, match.start(), "start")
            self._begin_header(match.start(), match.end(), None)
        else:
            # "<|channel|>" with no "<|start|>" before it: an assistant message whose start
            # token is missing; whatever precedes it belongs to its header.
            self._begin_header(self._pos, self._pos, "assistant", _NO_START)
            self._scan = match.start()
        return True

    def _step_header(self, out: list[HarmonyDelta | HarmonyMessage], final: bool) -> bool:
        buf = self._buf
        match = _HEADER_END.search(buf, self._scan)
        if match is None:
            if not final:
                self._scan = max(self._pos, len(buf) - _SEARCH_BACK)
                return False
            self._headerless(out, buf[self._pos :], "eof")
            self._expect_at(len(buf))
            return False
        at, token = match.start(), match.group(1)
        text = buf[self._pos : at]
        if token == "message":
            try:
                self._header = _HEADER_CACHE.get((text, self._implied)) or _parse_header(
                    text, self._implied
                )
            except _HeaderError as exc:
                self._header, self._problem, self._raw_header = None, str(exc), text
            self._parts = []
            self._pos = self._scan = match.end()
            self._state = _CONTENT
        elif token == "start" and self._implied is not None and self._note is None \
                and not text.strip():
            # A completion that opens with its own <|start|> (the ADR's stub marker line):
            # there is no implied first message, not an empty one.
            self._after_end(match)
        else:
            self._headerless(out, text, _ENDED_BY[token])
            self._after_end(match)
        return True

    def _step_content(self, out: list[HarmonyDelta | HarmonyMessage], final: bool) -> bool:
        buf = self._buf
        match = _CONTENT_END.search(buf, self._scan)
        if match is None:
            if final:
                self._close(out, buf[self._pos :], "eof")
                self._expect_at(len(buf))
            else:
                self._release(out)
            return False
        self._close(out, buf[self._pos : match.start()], _ENDED_BY[match.group(1)])
        self._after_end(match)
        return True

    def _release(self, out: list[HarmonyDelta | HarmonyMessage]) -> None:
        """Streaming: move the content scanned so far out of the buffer, as a delta.

        Trailing characters that may be the beginning of an end token stay in the buffer.
        """
        buf = self._buf
        safe = len(buf)
        lt = buf.rfind("<", max(self._pos, safe - _HOLD_BACK))
        if lt >= 0 and buf[lt:] in _PARTIAL_TERMINATORS:
            safe = lt
        if safe > self._pos:
            piece = buf[self._pos : safe]
            self._parts.append(piece)
            if self._deltas and self._header is not None:
                out.append(self._delta(piece, self._header))
        self._buf = buf[safe:]
        self._base += safe
        self._pos = self._scan = 0

    # -- producing items ------------------------------------------------------------------------

    def _delta(self, text: str, header: _Header) -> HarmonyDelta:
        return HarmonyDelta(
            text=text, role=header[0], channel=header[2], recipient=header[3],
            offset=self._msg_offset,
        )

    def _close(self, out: list[HarmonyDelta | HarmonyMessage], tail: str, ended: EndedBy) -> None:
        content = "".join(self._parts) + tail if self._parts else tail
        self._parts = []
        header, self._header = self._header, None
        if self._deltas and tail and header is not None:
            out.append(self._delta(tail, header))
        if header is None:
            out.append(
                _error_item(
                    "malformed_header",
                    f"{self._problem} in header {_excerpt(self._raw_header)}",
                    content,
                    ended,
                    self._msg_offset,
                )
            )
        else:
            notes = [self._note] if self._note else None
            out.append(_build_message(header, self._msg_offset, content, ended, notes))

    def _headerless(self, out: list[HarmonyDelta | HarmonyMessage], text: str,
                    ended: EndedBy) -> None:
        """A header that never reached ``<|message|>``.

        For a message with an implied role (a completion's first, or one whose ``<|start|>``
        is missing) ended by an end token, or plain text without any token, this is content:
        the channel is read if present and the rest is the content, like the reference
        parser's non-strict mode. Otherwise it is an error item.
        """
        implied, self._implied = self._implied, None
        offset = self._msg_offset
        problem = "the text ended" if ended == "eof" else f"<|{ended}|> came"
        if implied is not None and (ended != "eof" or "<|" not in text):
            try:
                channel, rest = _take_channel(text)
            except _HeaderError as exc:
                problem = str(exc)
            else:
                if channel is not None or ended != "eof" or rest.strip():
                    warnings = [self._note] if self._note else []
                    warnings.append(
                        "no Harmony tokens: the text is taken as plain content"
                        if ended == "eof"
                        else "no <|message|> in this message: its header is taken as content"
                    )
                    header = (implied, None, channel, None, None)
                    content = rest.strip() if channel else rest
                    if self._deltas and content:
                        out.append(self._delta(content, header))
                    out.append(_build_message(header, offset, content, ended, warnings))
                return
        elif not text.strip() and ended == "eof":
            return
        out.append(
            _error_item(
                "malformed_header",
                f"{problem} before <|message|> in header {_excerpt(text)}",
                "",
                ended,
                offset,
            )
        )

    def _stray(self, out: list[HarmonyDelta | HarmonyMessage], start: int, stop: int,
               ended: EndedBy) -> None:
        text = self._buf[start:stop]
        if text and not text.isspace():
            lead = len(text) - len(text.lstrip())
            out.append(
                _error_item(
                    "unexpected_text",
                    "text outside any message (expected <|start|>)",
                    text.strip(),
                    ended,
                    self._base + start + lead,
                )
            )


# -- headers and messages ---------------------------------------------------------------------


def _take_channel(header: str) -> tuple[str | None, str]:
    """Cut ``<|channel|>NAME`` out of a header: (NAME or None, the rest)."""
    i = header.find(CHANNEL)
    if i < 0:
        return None, header
    name = _CHANNEL_NAME.match(header, i + len(CHANNEL))
    assert name is not None  # the pattern matches the empty string
    if not name.group():
        raise _HeaderError("<|channel|> is not followed by a channel name")
    return name.group(), header[:i] + header[name.end() :]


def _parse_header(header: str, implied: str | None) -> _Header:
    """Read a header the way the reference implementation does (and cache the result).

    The channel is cut out first (it ends at whitespace or ``<``); ``<|constrain|>`` is split
    off its neighbour; then the whitespace-separated parts are: the role (or a tool's name),
    then optionally a recipient (``to=X``) and a content type (the last part unless it is the
    recipient).
    """
    key = (header, implied)
    if CHANNEL in header:
        channel, header = _take_channel(header)
        if CHANNEL in header:
            raise _HeaderError("more than one <|channel|>")
    else:
        channel = None
    if CONSTRAIN in header:
        header = header.replace(CONSTRAIN, " " + CONSTRAIN)
    parts = header.split()
    author_name = None
    if implied is not None:
        role = implied
        if parts and parts[0] == role:
            del parts[0]
    else:
        if not parts:
            raise _HeaderError("no role")
        first = parts[0]
        if first in _ROLES:
            role = first
            del parts[0]
        elif first.startswith("to="):
            raise _HeaderError("no role before the recipient")
        else:
            role, author_name = "tool", first
            del parts[0]
    recipient = content_type = None
    if parts:
        count = len(parts)
        last = parts.pop()
        if last.startswith("to="):
            recipient = last[3:]
        elif count == 1:
            recipient = last
        else:
            content_type = last
            raw = parts.pop()
            recipient = raw[3:] if raw.startswith("to=") else raw
        if parts:
            raise _HeaderError(f"unexpected {' '.join(parts)!r}")
    result = (role, author_name, channel, recipient, content_type)
    if len(_HEADER_CACHE) >= _HEADER_CACHE_SIZE:
        _HEADER_CACHE.clear()
    _HEADER_CACHE[key] = result
    return result


def _build_message(header: _Header, offset: int, content: str, ended: EndedBy,
                   warnings: list[str] | None) -> HarmonyMessage:
    """Make the message, recognising and checking a tool call."""
    role, author_name, channel, recipient, content_type = header
    if ended == "start":
        warnings = [*(warnings or ()),
                    "message not closed: the next <|start|> began before its end token"]
    name: str | None = None
    arguments: str | None = None
    rejected: CallRejection | None = None
    if role == "assistant" and (recipient is not None or channel == "tool") and (
        recipient not in _NOT_CALLS
    ):
        warnings = list(warnings or ())
        if ended == "eof":
            warnings.append("tool call cut off by the end of the text (no <|call|>): "
                            "not to be executed")
        if recipient is None:
            name, arguments, rejected = _stub_call(content)
        else:
            if recipient.startswith("functions."):
                name = recipient[10:]
                if channel != "commentary":
                    warnings.append(f"call to {recipient} on channel {channel!r} "
                                    "(expected 'commentary')")
            else:
                name = recipient
                if not (recipient == "python" or recipient.startswith("browser.")):
                    warnings.append(
                        f"recipient {recipient!r} is not in the 'functions' namespace"
                    )
            if name == "python":
                arguments = content
            else:
                parsed = parse_arguments(content, tool=f"tool {name!r}")
                if isinstance(parsed, CallRejection):
                    rejected = parsed
                else:
                    arguments = content
    return HarmonyMessage(
        role=role,
        channel=channel,
        recipient=recipient,
        content_type=content_type,
        content=content,
        ended_by=ended,
        author_name=author_name,
        name=name,
        arguments=arguments,
        error_type=rejected.error_type if rejected else None,  # type: ignore[arg-type]
        error=rejected.event_message if rejected else None,
        warnings=tuple(warnings) if warnings else (),
        offset=offset,
    )


def _stub_call(payload: str) -> tuple[str, str | None, CallRejection | None]:
    """The ADR stub form: ``{"tool": NAME, "arguments": {...}}`` on the ``tool`` channel.

    Returns (name, argument JSON text or None, rejection or None). The size limit applies to
    the whole payload, before any parsing; a name is still recovered from a bad payload when
    it can be read.
    """
    found = _STUB_TOOL_NAME.search(payload, 0, 400)
    guess = found.group(1) if found else "tool"
    parsed = parse_arguments(payload, tool="the tool stub call")
    if isinstance(parsed, CallRejection):
        return guess, None, parsed
    name = parsed.get("tool")
    args = parsed.get("arguments", {})
    if not isinstance(name, str) or not name:
        problem = 'needs a non-empty string "tool" field'
    elif not isinstance(args, dict):
        problem = 'needs an object in its "arguments" field'
    else:
        return name, exact_json.dumps(args), None
    rejected = rejection(
        "tool_payload_parse_error",
        f'the tool stub call {problem}: send {{"tool": "NAME", "arguments": {{...}}}}.',
        f"stub call payload {problem}",
    )
    return name if isinstance(name, str) and name else guess, None, rejected


def _error_item(error_type: MessageErrorType, error: str, content: str, ended: EndedBy,
                offset: int) -> HarmonyMessage:
    return HarmonyMessage(
        role=None,
        content=content,
        ended_by=ended,
        error_type=error_type,
        error=error,
        offset=offset,
        kind="error",
    )


def _excerpt(text: str) -> str:
    text = text.strip()
    if len(text) > _ERROR_TEXT_CHARS:
        text = text[:_ERROR_TEXT_CHARS] + "..."
    return repr(text)
