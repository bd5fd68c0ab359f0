"""The length-prefixed JSON frames between the parent and a sandbox worker."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent.tools.sandbox._protocol import (
    FrameDecoder,
    FrameError,
    encode_frame,
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
