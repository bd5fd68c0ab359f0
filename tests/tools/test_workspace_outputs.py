"""Finding a built-in library's workspaces, keeping them in a named directory, listing the
files the tools wrote (what ``--outputs`` is made of, issue 33)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from gramagent._runtime.library import ToolLibrary
from gramagent.errors import ConfigurationError
from gramagent.tools import builtin_library
from gramagent.tools._workspace import workspaces_of


def test_a_builtin_library_has_a_provider_and_another_library_none() -> None:
    library = builtin_library()
    provider = workspaces_of(library)
    assert provider is not None and provider.workspaces() == []
    assert workspaces_of(ToolLibrary()) is None


def test_keep_in_points_new_workspaces_at_the_directory(tmp_path: Path) -> None:
    library = builtin_library()
    provider = workspaces_of(library)
    assert provider is not None
    provider.keep_in(tmp_path / "out")
    workspace = provider.get(None)
    assert workspace.root == (tmp_path / "out").resolve() and not workspace.temporary
    (workspace.charts_dir).mkdir()
    (workspace.charts_dir / "a.png").write_bytes(b"png")
    (workspace.root / "link").symlink_to(workspace.charts_dir / "a.png")
    assert workspace.files() == [Path("charts/a.png")]
    assert provider.workspaces() == [workspace]
    with pytest.raises(ConfigurationError, match="before the first call"):
        provider.keep_in(tmp_path / "other")
    library.forget()
    assert (tmp_path / "out" / "charts" / "a.png").is_file()  # kept


def test_a_file_is_not_a_directory_to_keep_in(tmp_path: Path) -> None:
    provider = workspaces_of(builtin_library())
    assert provider is not None
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigurationError, match="is not a directory"):
        provider.keep_in(tmp_path / "f")


def test_a_removed_temporary_workspace_is_no_longer_listed() -> None:
    library = builtin_library()
    provider = workspaces_of(library)
    assert provider is not None
    workspace = provider.get(None)
    assert workspace.temporary and provider.workspaces() == [workspace]
    library.forget()
    assert not workspace.root.exists() and provider.workspaces() == []


def test_the_registry_does_not_keep_a_library_alive() -> None:
    import weakref

    library = builtin_library()
    alive = weakref.ref(library)
    del library
    gc.collect()
    assert alive() is None
