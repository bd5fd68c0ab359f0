"""Reading a file a user named, bounded: one reader for gram files, experiment files,
datasets, signatures and Harmony text, so that none reads without end.

A path may name something that is not a regular file: a pipe (``<(...)`` in a shell: read to
its end, as ``cat`` reads it), or a device that never ends (``/dev/zero``, ``/dev/urandom``).
:func:`read_bounded` reads at most its limit and refuses more, as an ``OSError`` naming the
file, which each caller reports as its typed error does any other unreadable file.

A leaf module: it imports nothing of gramagent.
"""

from __future__ import annotations

import errno
import os
from typing import Final

__all__ = ["MAX_DATASET_BYTES", "MAX_TEXT_BYTES", "read_bounded"]

MAX_TEXT_BYTES: Final = 64 * 1024 * 1024
"""The largest gram, signature or Harmony file read: 64 MiB."""
MAX_DATASET_BYTES: Final = 1024 * 1024 * 1024
"""The largest JSONL or CSV dataset read: 1 GiB."""

_CHUNK = 1024 * 1024


def read_bounded(path: str | os.PathLike[str], limit: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of the file at ``path``, at most ``limit`` of them.

    Raises:
        OSError: the file cannot be opened or read (with its ``filename``), or holds more
            than ``limit`` bytes (``EFBIG``, ``strerror`` saying so): nothing past the limit
            is read.
    """
    with open(path, "rb") as file:
        size = _regular_size(file.fileno())
        if size is not None and size > limit:
            raise _too_big(path, limit)
        if size is not None:
            return file.read()  # a regular file: its size is known and within the limit
        chunks, total = [], 0
        while chunk := file.read(_CHUNK):
            total += len(chunk)
            if total > limit:
                raise _too_big(path, limit)
            chunks.append(chunk)
        return b"".join(chunks)


def _regular_size(fd: int) -> int | None:
    import stat

    info = os.fstat(fd)
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _too_big(path: str | os.PathLike[str], limit: int) -> OSError:
    return OSError(errno.EFBIG, f"more than {limit:,} bytes (not read past them)", str(path))
