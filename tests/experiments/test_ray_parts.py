"""Parts of the Ray engine as plain Python (no Ray needed): the cluster-wide rate limiter
(leases never overlap, so all workers together keep the rate; a 429 halves it once per burst;
it climbs back when the 429s stop) and the records' wire form (plain tuples, every value
kept)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gramagent.experiments import EvalResult, RunRecord, ToolRecord
from gramagent.experiments._ray import _Limiter, _pack, _unpack

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
