"""Secrets at rest: a server that echoes the API key in its answer or in a tool call's
arguments (so in the tool's result too) leaves no trace of the key in the session store's
file, while the conversation's other text is stored as it was."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_support import make_agent, make_tools

from gramagent._models.registry import resolve_model
from gramagent._runtime.sessions import SessionStore
from gramagent.testing import ScriptedServer, call, calls, reply

_KEYS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
                min_size=8, max_size=24).filter(lambda key: key.strip() == key and key)


def _stored_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.is_file())


@settings(max_examples=15, deadline=None)
@given(key=_KEYS, where=st.sampled_from(["answer", "arguments", "both"]))
def test_the_api_key_is_not_stored(key: str, where: str) -> None:
    tools = make_tools()
    agent = make_agent(tools.library)
    turns = []
    if where in ("arguments", "both"):
        turns.append(calls(call("sayHello", {"personName": f"x{key}y"})))
    turns.append(reply(f"Your key is {key}." if where != "arguments" else "Done, Ada."))
    with tempfile.TemporaryDirectory() as folder, ScriptedServer(turns) as srv:
        path = Path(folder) / "s.sqlite3"

        async def turn() -> None:
            model = resolve_model("openai/scripted", base_url=srv.base_url, api_key=key)
            try:
                await SessionStore(path).open("s").run(agent, "Hi, I'm Ada", api_key=key,
                                                       library=tools.library, model=model)
            finally:
                await model.aclose()

        asyncio.run(turn())
        loaded = SessionStore(path).load("s")
        assert loaded is not None
        text = " ".join(str(m.to_dict()) for m in loaded)
        assert "Hi, I'm Ada" in text and "[REDACTED]" in text
        assert key not in text
        for form in {key.encode(), key.encode("unicode_escape")}:
            assert form not in _stored_bytes(path)
