"""The deadlines of runs and tool calls: one timer per event loop, whichever loops come and go."""

from __future__ import annotations

import asyncio

import pytest

from gramagent._messages import Conversation
from gramagent._runtime.budget import Budget
from gramagent._runtime.deadline import RunDeadline
from gramagent._runtime.limits import RunLimits


async def cut_short(seconds: float, wait: float) -> bool:
    """Whether a deadline ``seconds`` away cuts a wait of ``wait`` seconds short."""
    deadline = RunDeadline(asyncio.get_running_loop().time() + seconds)
    deadline.arm()
    try:
        with deadline:
            await asyncio.sleep(wait)
    except TimeoutError:
        assert deadline.expired
        return True
    finally:
        deadline.disarm()
    return False


@pytest.mark.parametrize("loops", [1, 3])
def test_deadlines_fire_on_every_event_loop_in_turn(loops: int) -> None:
    """Event loops one after another (as run_agent_sync makes them) each get their own timer:
    a deadline fires on each, and one far away cuts nothing short."""
    for _ in range(loops):
        assert asyncio.run(cut_short(0.01, 5))
        assert not asyncio.run(cut_short(5, 0))


async def test_deadlines_of_several_calls_on_one_loop() -> None:
    """Deadlines armed together fire each at its own time; a far one leaves its wait alone."""
    results = await asyncio.gather(cut_short(0.01, 5), cut_short(0.02, 5), cut_short(5, 0.05))
    assert list(results) == [True, True, False]


@pytest.mark.parametrize("wall_time", [None, 2.5])
def test_a_budget_starts_as_a_deadline_does(wall_time: float | None) -> None:
    """Budget sets RunDeadline's fields itself (no call of its __init__, once per run): every
    one of them, to what RunDeadline's own __init__ sets (a field added to one and not the
    other fails here, not as an AttributeError in a run)."""
    limits = RunLimits(wall_time=wall_time)
    budget = Budget(limits, Conversation(), 10.0)
    deadline = RunDeadline(None if wall_time is None else 10.0 + wall_time)
    fields = [name for cls in RunDeadline.__mro__ for name in getattr(cls, "__slots__", ())]
    assert fields
    assert {f: getattr(budget, f) for f in fields} == {f: getattr(deadline, f) for f in fields}
