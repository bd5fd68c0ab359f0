"""Fixtures of the experiment tests: the scripted greeter server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from experiments_support import greeter_script

from gramagent.testing import ScriptedServer


@pytest.fixture
def greeter_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(greeter_script, record=False) as server:
        yield server
