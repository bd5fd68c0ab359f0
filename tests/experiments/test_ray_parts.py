"""Parts of the Ray engine as plain Python (no Ray needed): the cluster-wide rate limiter
(leases never overlap, so all workers together keep the rate; a 429 halves it once per burst;
it climbs back when the 429s stop) and the records' wire form (plain tuples, every value
kept)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gramagent.experiments import EvalResult, RunKey, RunRecord, ToolRecord
from gramagent.experiments._ray import _Limiter, _pack, _server_threads, _Shards, _unpack

_text = st.text(max_size=20)
_json = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_text, inner, max_size=3), max_leaves=8)
_records = st.builds(
    RunRecord, variant=_text, case_id=_text, repeat=st.integers(0, 99),
    answer=st.none() | _text, stop=_text, error=st.none() | _text,
    tools=st.lists(st.builds(ToolRecord, name=_text, status=st.sampled_from(["ok", "error"]),
                             error_type=st.none() | _text,
                             latency_ms=st.floats(0, 1e6), arguments=_json),
                   max_size=3).map(tuple),
    input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6),
    requests=st.integers(0, 99), wall_ms=st.floats(0, 1e7), started=st.floats(0, 2e9),
    estimated_tokens=st.booleans(),
    evaluations=st.lists(st.builds(EvalResult, name=_text, score=st.floats(0, 1),
                                   passed=st.none() | st.booleans(), reason=_text),
                         max_size=3).map(tuple))


@given(_records)
def test_a_record_crosses_the_wire_unchanged(record: RunRecord) -> None:
    packed = _pack(record)
    assert all(type(part) in (str, int, float, tuple, type(None)) for part in packed)
    assert _unpack(packed) == record


@given(rate=st.floats(min_value=0.5, max_value=5000),
       asked_at=st.lists(st.floats(min_value=0, max_value=0.2), min_size=1, max_size=40))
def test_leases_are_disjoint_evenly_spaced_blocks_at_the_rate(rate: float,
                                                               asked_at: list[float]) -> None:
    """Workers ask at any moments; the slots of all leases are 1/rate apart, none past."""
    now = [100.0]
    limiter = _Limiter(rate, clock=lambda: now[0])
    slots: list[float] = []
    for pause in asked_at:
        now[0] += pause
        delay, interval, count = limiter.lease()
        assert 1 <= count <= _Limiter.BLOCK and delay >= 0
        assert interval == pytest.approx(1.0 / rate)
        slots.extend(now[0] + delay + i * interval for i in range(count))
    gaps = [b - a for a, b in zip(slots, slots[1:], strict=False)]
    assert all(gap >= (1.0 / rate) * (1 - 1e-9) for gap in gaps)
    assert slots[0] >= 100.0 + asked_at[0]


def test_a_429_halves_the_rate_once_per_burst_and_it_climbs_back() -> None:
    now = [0.0]
    limiter = _Limiter(40.0, clock=lambda: now[0])
    limiter.throttled()
    limiter.throttled()
    limiter.throttled()  # one burst: one halving
    assert limiter.current() == 20.0
    assert limiter.throttles() == 3
    now[0] += _Limiter.QUIET + 0.1  # a quiet second later
    limiter.throttled()
    assert limiter.current() == 10.0
    limiter.lease()
    assert limiter.current() == 10.0  # not before a quiet second
    now[0] += _Limiter.QUIET + 0.1
    rates = []
    for _ in range(10):
        limiter.lease()
        rates.append(limiter.current())
    assert rates == sorted(rates) and rates[-1] == 40.0  # back up to the limit, not beyond
    for _ in range(20):
        limiter.throttled()
        now[0] += _Limiter.QUIET + 0.1
    assert limiter.current() == 40.0 / 64  # never below 1/64 of the limit


@given(keys=st.integers(0, 60), size=st.integers(1, 25),
       lost=st.lists(st.tuples(st.booleans(), st.integers(0, 25)), max_size=30))
def test_shards_hand_out_every_key_until_each_came_back(
        keys: int, size: int, lost: list[tuple[bool, int]]) -> None:
    """Shards taken by any feeders, some lost with part of their keys missing: every key is
    handed out until a record came back for it, and take() ends only then."""

    async def drain() -> tuple[list[RunKey], int]:
        shards = _Shards([RunKey("A", str(i), 0) for i in range(keys)], size)
        came_back: list[RunKey] = []
        outcomes = iter(lost)
        taken = 0
        while (shard := await shards.take()) is not None:
            taken += 1
            assert 1 <= len(shard) <= size
            fails, kept = next(outcomes, (False, 0))
            missing = shard[:kept] if fails else []  # a lost worker's unfinished keys
            came_back.extend(k for k in shard if k not in missing)
            shards.back(missing)
        return came_back, taken

    came_back, _ = asyncio.run(drain())
    assert sorted(came_back) == sorted(RunKey("A", str(i), 0) for i in range(keys))


def test_take_waits_while_keys_are_out_and_gets_the_ones_that_come_back() -> None:
    async def scenario() -> list[RunKey] | None:
        shards = _Shards([RunKey("A", "1", 0), RunKey("A", "2", 0)], 2)
        first = await shards.take()
        assert first is not None
        waiting = asyncio.create_task(shards.take())  # nothing left, but keys are out
        await asyncio.sleep(0)
        assert not waiting.done()
        shards.back(first[1:])  # the worker died before the second key came back
        again = await waiting
        assert again is not None
        shards.back([])
        assert await shards.take() is None
        return again

    assert asyncio.run(scenario()) == [RunKey("A", "2", 0)]


@given(cpus=st.integers(1, 256), asked=st.none() | st.integers(-4, 1024),
       others=st.lists(st.integers(1, 64), max_size=3))
def test_a_node_server_never_asks_for_more_threads_than_its_node_has(
        cpus: int, asked: int | None, others: list[int]) -> None:
    """A node's embedded server reserves its threads as Ray's CPU resource: more than the
    node has could never be granted, and its actor would wait for ever."""
    nodes = [{"NodeID": f"n{i}", "Resources": {"CPU": float(c)}} for i, c in enumerate(others)]
    nodes.append({"NodeID": "mine", "Resources": {"CPU": float(cpus)}})
    with pytest.MonkeyPatch.context() as env:
        if asked is None:
            env.delenv("GRAMAGENT_LOCAL_THREADS", raising=False)
        else:
            env.setenv("GRAMAGENT_LOCAL_THREADS", str(asked))
        threads = _server_threads(nodes, "mine")
    assert 1 <= threads <= cpus
    assert threads == (cpus if asked is None else min(cpus, max(1, asked)))
