"""The command line on the embedded model (issue 12, item 12): the model is started before
the first turn, so ``--timeout`` counts the turn, not the server's start."""

from __future__ import annotations

from pathlib import Path

import pytest

from gramagent._agent_session import SessionOptions
from gramagent._cli.run_commands import RunOptions, _open_session

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_embedded_model_is_running_before_the_first_turn() -> None:
    options = RunOptions(session_options=SessionOptions(
        agent_file=EXAMPLES / "hello_world.gram", timeout=5.0))
    with _open_session(options, 0) as (_, session):
        server = session.model.server  # type: ignore[attr-defined]
        assert server is not None and server.alive
        assert session.context is None  # no turn has run
