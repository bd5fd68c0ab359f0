"""The install hints: the exact pip command for an extra, from how gramagent was installed."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from gramagent._install import EXTRA_OF_MODULE, install_command

ROOT = Path(__file__).resolve().parents[1]
SITE = Path("/venv/lib/python3.11/site-packages/gramagent")


def test_a_checkout_gets_an_editable_install_of_its_own_path(tmp_path: Path) -> None:
    package = ROOT / "src" / "gramagent"
    assert install_command("tools", package_dir=package, cwd=tmp_path) == (
        f'pip install -e "{ROOT}[tools]"')
    assert install_command("local", package_dir=package, cwd=ROOT) == (
        'pip install -e ".[local]"')


def test_a_directory_that_is_not_a_gramagent_checkout_is_not_taken_for_one(
    tmp_path: Path,
) -> None:
    other = tmp_path / "src" / "gramagent"
    other.mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    assert install_command("tools", package_dir=other, direct_url=None) == (
        'pip install "gramagent[tools]"')


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (None, 'pip install "gramagent[tools]"'),  # from an index: the same index has it
        ({"url": "file:///home/u/gramagent", "dir_info": {"editable": True}},
         'pip install -e "/home/u/gramagent[tools]"'),
        ({"url": "file:///home/u/gramagent", "dir_info": {}},
         'pip install "/home/u/gramagent[tools]"'),
        ({"url": "file:///tmp/whl/gramagent-0.1.0-py3-none-any.whl",
          "archive_info": {"hashes": {"sha256": "00"}}},
         'pip install "/tmp/whl/gramagent-0.1.0-py3-none-any.whl[tools]"'),
        ({"url": "file:///tmp/my%20dir/gramagent-0.1.0.tar.gz", "archive_info": {}},
         'pip install "/tmp/my dir/gramagent-0.1.0.tar.gz[tools]"'),
        ({"url": "https://example.org/gramagent-0.1.0-py3-none-any.whl", "archive_info": {}},
         'pip install "gramagent[tools] @ https://example.org/gramagent-0.1.0-py3-none-any.whl"'),
        ({"url": "https://github.com/o/gramagent", "vcs_info": {"vcs": "git",
                                                                  "commit_id": "abc123"}},
         'pip install "gramagent[tools] @ git+https://github.com/o/gramagent@abc123"'),
    ],
)
def test_an_installed_distribution_gets_the_command_of_its_pep610_record(
    record: dict[str, object] | None, expected: str, tmp_path: Path,
) -> None:
    assert install_command("tools", package_dir=SITE, direct_url=record, cwd=tmp_path) == expected


def test_the_working_directory_is_written_as_a_dot(tmp_path: Path) -> None:
    record = {"url": tmp_path.as_uri(), "dir_info": {"editable": True}}
    assert install_command("tools", package_dir=SITE, direct_url=record, cwd=tmp_path) == (
        'pip install -e ".[tools]"')


def test_the_installed_metadata_is_read_when_no_record_is_given(tmp_path: Path) -> None:
    """In this environment gramagent is installed (editable or not): the command names a
    path or URL of that install, never the index that does not have it."""
    from importlib import metadata

    text = metadata.distribution("gramagent").read_text("direct_url.json")
    command = install_command("tools", package_dir=SITE, cwd=tmp_path)
    if text:
        url = json.loads(text)["url"]
        assert url.removeprefix("file://") in command
    else:
        assert command == 'pip install "gramagent[tools]"'


def test_every_module_of_an_extra_is_named_in_pyproject() -> None:
    """EXTRA_OF_MODULE names, for each module, an extra that really lists its package."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for module, extra in EXTRA_OF_MODULE.items():
        packages = " ".join(extras[extra]).replace("-", "_").lower()
        assert module.lower() in packages, (module, extra)


def test_no_module_writes_an_install_command_by_hand() -> None:
    """Every missing-extra message comes from gramagent._install (the command for how
    gramagent was installed): no source file spells out ``pip install ... gramagent[...]``
    itself, which is wrong for a clone or a wheel. (gramagent.mcp.INSTALL documents the
    index form on purpose.)"""
    import re

    package = Path(__file__).resolve().parents[1] / "src" / "gramagent"
    spelled = re.compile(r"pip install[^\n]*gramagent\[")
    found = [f"{path.relative_to(package)}:{n}"
             for path in sorted(package.rglob("*.py")) if path.name != "_install.py"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if spelled.search(line) and "INSTALL =" not in line and "``" not in line]
    assert found == []
