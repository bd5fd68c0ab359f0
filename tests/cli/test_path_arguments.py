"""A file argument the system cannot even look up (a name longer than the system allows, a NUL
byte, a parent that is a file) is one clear line naming it, exit 1: never "internal error"."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gramagent._cli._app import EXIT_INTERNAL, app

_NAMES = st.one_of(
    st.integers(256, 5000).map(lambda n: "x" * n),
    st.integers(1, 40).map(lambda n: "a/" * n + "b" * 300),
    st.just("nul\x00byte"),
    st.text(min_size=1, max_size=300).filter(lambda t: not t.lstrip().startswith(("(", "["))),
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_NAMES, command=st.sampled_from([["schema"], ["check"], ["fmt"], ["run"]]))
def test_unusable_file_names_are_one_clear_line(name: str, command: list[str]) -> None:
    args = [*command, name] + (["hi"] if command == ["run"] else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code not in (0, EXIT_INTERNAL), result.output
    assert "internal error" not in result.output and "Traceback" not in result.output


def test_a_parent_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    result = CliRunner().invoke(app, ["schema", str(tmp_path / "plain" / "agent.gram")])
    assert result.exit_code == 1 and "no such file" in result.output


@pytest.mark.parametrize("length", [255, 256, 4096])
def test_the_schema_command_names_the_cut_argument(length: int) -> None:
    result = CliRunner().invoke(app, ["schema", "y" * length])
    assert result.exit_code == 1
    assert "internal error" not in result.output
