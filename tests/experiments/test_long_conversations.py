"""A multi-turn case without end (issue 32, item 2): a case of thousands of user messages
stops at the conversation's bound (``max_turns``, ``max_context_bytes``,
``max_conversation_time``), and its run is saved in the store like any other, with how it
stopped and the requests, tokens and tool calls it made."""

from __future__ import annotations

from extras import require

require("experiments")

from pathlib import Path

import orjson
import pytest
from experiments_support import AGENT_GRAM

from gramagent.experiments import RunRecord, Store, load_experiment, run_experiment_sync
from gramagent.testing import ScriptedServer, reply

TURNS = 5000


def _experiment(directory: Path, base_url: str, limits: str) -> Path:
    (directory / "greeter.gram").write_text(AGENT_GRAM)
    rows = [{"id": "endless", "input": [f"turn {i}: more please" for i in range(TURNS)]},
            {"id": "short", "input": ["hello", "bye"]}]
    (directory / "cases.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
    path = directory / "long.gram"
    path.write_text(f'''[long:Experiment {{agent: "greeter.gram", cases: "cases.jsonl",
  store: "long.sqlite"}} |
  [A:Variant {{library: "ab_libs:polite", base_url: "{base_url}", limits: {{{limits}}}}}],
  [B:Variant {{library: "ab_libs:polite", base_url: "{base_url}", limits: {{{limits}}}}}]
]
''')
    return path


def _runs(directory: Path, experiment: Path) -> dict[str, RunRecord]:
    summary = run_experiment_sync(load_experiment(experiment), concurrency=2)
    assert summary.ran == 4
    with Store.read(directory / "long.sqlite") as db:
        records = db.records()
    assert {r.variant for r in records} == {"A", "B"}
    return {r.case_id: r for r in records if r.variant == "A"}


@pytest.mark.slow
@pytest.mark.parametrize("turns", [1, 7, 40])
def test_max_turns_ends_the_case_and_its_run_is_saved(tmp_path: Path, turns: int) -> None:
    with ScriptedServer([reply("noted", usage=(10, 2))], loop=True) as server:
        runs = _runs(tmp_path, _experiment(tmp_path, server.base_url,
                                           f"max_turns: {turns}, wall_time: 2"))
        sent = len(server.requests)
    endless, short = runs["endless"], runs["short"]
    assert endless.stop == "limit:max_turns"
    assert f"the conversation has {turns + 1} user messages" in endless.error
    assert endless.requests == turns
    assert (endless.input_tokens, endless.output_tokens) == (10 * turns, 2 * turns)
    expected_short = ("answer", 2) if turns >= 2 else ("limit:max_turns", 1)
    assert (short.stop, short.requests) == expected_short
    assert sent == 2 * (endless.requests + short.requests)


@pytest.mark.slow
@pytest.mark.parametrize("max_bytes", [200, 3000])
def test_max_context_bytes_ends_the_case(tmp_path: Path, max_bytes: int) -> None:
    with ScriptedServer([reply("noted")], loop=True) as server:
        runs = _runs(tmp_path, _experiment(tmp_path, server.base_url,
                                           f"max_context_bytes: {max_bytes}"))
    endless = runs["endless"]
    assert endless.stop == "limit:max_context_bytes"
    assert 0 < endless.requests < TURNS
    assert f"more than a request may carry ({max_bytes:,})" in endless.error


@pytest.mark.slow
def test_max_conversation_time_ends_the_case(tmp_path: Path) -> None:
    """Each answer takes 0.05 s: 5000 turns would take minutes; the case stops at its time
    (whether between turns or cutting one short), saved with the turns it made."""
    with ScriptedServer([reply("noted", delay=0.05)], loop=True) as server:
        runs = _runs(tmp_path, _experiment(
            tmp_path, server.base_url,
            "max_conversation_time: 0.5, max_turns: null, max_context_bytes: null"))
    endless, short = runs["endless"], runs["short"]
    assert endless.stop == "limit:max_conversation_time"
    assert "took longer than 0.5 s together" in endless.error
    assert 0 < endless.requests < TURNS
    assert short.stop == "answer"
