"""read_bounded: a file a user named is read to at most its limit, whatever it is: a regular
file, a pipe (read to its end), a device without end (/dev/zero)."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._files import read_bounded


@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 3000), limit=st.integers(1, 3000), pipe=st.booleans())
def test_at_most_the_limit_is_read(size: int, limit: int, pipe: bool, tmp_path_factory:
                                   pytest.TempPathFactory) -> None:
    data = os.urandom(size)
    folder = tmp_path_factory.mktemp("read")
    path = folder / "f"
    writer = None
    if pipe:
        os.mkfifo(path)

        def feed() -> None:
            try:
                with open(path, "wb") as out:
                    out.write(data)
            except BrokenPipeError:  # the reader stopped at its limit
                pass

        writer = threading.Thread(target=feed)
        writer.start()
    else:
        path.write_bytes(data)
    try:
        if size <= limit:
            assert read_bounded(path, limit) == data
        else:
            with pytest.raises(OSError) as caught:
                read_bounded(path, limit)
            assert caught.value.errno == errno.EFBIG
            assert caught.value.filename == str(path)
            assert f"more than {limit:,} bytes" in caught.value.strerror
    finally:
        if writer is not None:
            writer.join(10)


def test_a_device_without_end_stops_at_the_limit() -> None:
    with pytest.raises(OSError, match="more than 4,194,304 bytes"):
        read_bounded("/dev/zero", 4 * 1024 * 1024)


def test_what_cannot_be_read_is_an_oserror_naming_it(tmp_path: Path) -> None:
    for path, code in ((tmp_path, errno.EISDIR), (tmp_path / "none", errno.ENOENT),
                       (tmp_path / ("n" * 300), errno.ENAMETOOLONG)):
        with pytest.raises(OSError) as caught:
            read_bounded(path)
        assert caught.value.errno == code and caught.value.filename == str(path)
