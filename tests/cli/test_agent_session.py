"""The library under ``run`` and ``chat`` (:mod:`gramagent._agent_session`, issue 28: "the
CLI is thin"): a session opened from names, against the scripted server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cli_support import run_gramagent
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._agent_session import AgentSession, SessionOptions, check_options
from gramagent.errors import ConfigurationError
from gramagent.testing import ScriptedServer, call, reply

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"


def test_a_session_runs_turns_of_one_conversation() -> None:
    """Two turns: the second request carries the first turn's messages; the tool really ran."""
    with ScriptedServer([call("sayHello", {"personName": "Ada"}), reply("Done."),
                         reply("Again.")]) as srv:
        options = SessionOptions(agent_file=HELLO, model="openai/m", base_url=srv.base_url)

        async def two_turns() -> tuple[str | None, str | None]:
            session = AgentSession.open(options)
            try:
                first = await session.turn("Hi, I'm Ada")
                second = await session.turn("Once more")
            finally:
                await session.aclose()
            return first.content, second.content

        assert asyncio.run(two_turns()) == ("Done.", "Again.")
        last = srv.requests[-1].body["messages"]
    assert [m["role"] for m in last][-5:] == ["user", "assistant", "tool", "assistant", "user"]
    assert "Hello, Ada" in last[-3]["content"]


@settings(max_examples=60, deadline=None)
@given(timeout=st.one_of(st.floats(max_value=0.0), st.just(float("nan")),
                         st.just(float("inf"))),
       iterations=st.one_of(st.none(), st.integers(max_value=0)))
def test_a_bad_limit_is_refused_before_anything_is_loaded(timeout: float,
                                                          iterations: int | None) -> None:
    """Every bad --timeout (zero, negative, nan, inf) is named as typed, even with an agent
    file that does not exist: nothing is loaded or resolved before the values are checked."""
    options = SessionOptions(agent_file=Path("/nonexistent/agent.gram"), timeout=timeout,
                             max_iterations=iterations)
    with pytest.raises(ConfigurationError, match=r"^--timeout must be") as caught:
        check_options(options)
    if iterations is not None:
        assert "--max-iterations must be" in str(caught.value)
    with pytest.raises(ConfigurationError, match=r"^--timeout must be"):
        AgentSession.open(options)


def test_a_bad_timeout_is_named_before_the_model_is_resolved(tmp_path: Path) -> None:
    """Without the local extra, the embedded model of hello_world.gram cannot resolve: the bad
    --timeout is still the error the user sees (issue 28)."""
    done = run_gramagent("run", str(HELLO), "Hi", "--timeout", "0", cwd=tmp_path,
                         hide=["xllamacpp"])
    assert done.returncode == 1
    assert done.stderr.startswith("ConfigurationError: --timeout must be positive (got 0.0)")


def test_an_empty_model_is_refused_before_the_agent_file_is_read(tmp_path: Path) -> None:
    done = run_gramagent("run", "missing.gram", "Hi", "--model", " ", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("ConfigurationError: --model must not be empty")
