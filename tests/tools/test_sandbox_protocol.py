"""The length-prefixed JSON frames between the parent and a sandbox worker."""

from __future__ import annotations

import json
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent.tools.sandbox._channel import check_reply
from gramagent.tools.sandbox._protocol import (
    FrameDecoder,
    FrameError,
    encode_frame,
    parse_body,
    read_frame,
    write_frame,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=5),
       st.integers(min_value=1, max_value=7))
def test_frames_survive_any_chunking(message: dict[str, object], chunk: int) -> None:
    """Fed in pieces of any size, two frames decode back to the messages, in order."""
    data = encode_frame(message) + encode_frame({"n": 2})
    decoder = FrameDecoder(max_bytes=1 << 20)
    out = []
    for i in range(0, len(data), chunk):
        decoder.feed(data[i:i + chunk])
        while (frame := decoder.next_frame()) is not None:
            out.append(frame)
    assert out == [message, {"n": 2}]


def test_oversized_frames_are_refused_before_reading_the_body() -> None:
    decoder = FrameDecoder(max_bytes=10)
    decoder.feed(struct.pack(">I", 11))
    with pytest.raises(FrameError, match="11 bytes exceeds the limit of 10"):
        decoder.next_frame()


@pytest.mark.parametrize(("body", "message"), [
    (b"[1, 2]", "holds a list, expected an object"),
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
])
def test_malformed_bodies(body: bytes, message: str) -> None:
    decoder = FrameDecoder(max_bytes=100)
    decoder.feed(struct.pack(">I", len(body)) + body)
    with pytest.raises(FrameError, match=message):
        decoder.next_frame()


def test_read_and_write_over_a_pipe() -> None:
    """write_frame/read_frame across a real pipe; a closed stream mid-frame is an error."""
    r, w = os.pipe()
    try:
        write_frame(w, {"op": "exec", "code": "x = 1\n" * 1000})
        write_frame(w, {"op": "exit"})
        decoder = FrameDecoder(max_bytes=1 << 20)
        assert read_frame(r, decoder)["code"].count("x = 1") == 1000
        assert read_frame(r, decoder) == {"op": "exit"}
        os.write(w, encode_frame({"op": "cut"})[:6])
        os.close(w)
        w = -1
        with pytest.raises(FrameError, match="stream closed"):
            read_frame(r, decoder)
    finally:
        os.close(r)
        if w != -1:
            os.close(w)


hostile_text = st.text(alphabet=st.characters() | st.characters(categories=["Cs"]), max_size=8)
"""Text that may hold lone surrogates (which JSON can carry escaped, and UTF-8 cannot)."""
hostile_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | hostile_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3),
    max_leaves=10,
)


def _raw_json(value: object) -> bytes:
    """``value`` as JSON text the way a hostile worker may write it: NaN and lone surrogates
    (escaped) included."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode()


@settings(max_examples=150, deadline=None)
@given(st.one_of(hostile_json.map(_raw_json), st.binary(max_size=64),
                 st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n)))
def test_any_reply_body_is_a_clean_object_or_a_frame_error(body: bytes) -> None:
    """Whatever bytes a worker sends, the parent gets a dict that encodes back to strict JSON
    and UTF-8, or a FrameError: never a raw exception, NaN or an unencodable string."""
    try:
        message = parse_body(body)
    except FrameError:
        return
    assert isinstance(message, dict)
    json.dumps(message, allow_nan=False, ensure_ascii=False).encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["op", "id", "output", "output_bytes", "value", "error"]),
                       hostile_json, max_size=6))
def test_check_reply_accepts_only_well_typed_answers_to_the_request(frame: dict[str, object]
                                                                    ) -> None:
    try:
        checked = check_reply(frame, "req-1")
    except FrameError:
        return
    assert checked["op"] == "result" and checked["id"] == "req-1"
    assert isinstance(checked["output"], str) and type(checked["output_bytes"]) is int
    assert all(checked[k] is None or isinstance(checked[k], str) for k in ("value", "error"))
