"""The public names of gramagent._runtime: sorted, complete and importable."""

from __future__ import annotations

import gramagent._runtime as runtime


def test_exports_are_sorted_and_resolve() -> None:
    """__all__ is sorted (case-sensitively) and every name resolves to its definition."""
    assert runtime.__all__ == sorted(runtime.__all__)
    for name in runtime.__all__:
        value = getattr(runtime, name)
        assert value is not None
    from gramagent._runtime.loop import run_agent

    assert runtime.run_agent is run_agent
    assert set(runtime.__all__) <= set(dir(runtime))


def test_unknown_names_raise_attribute_error() -> None:
    """A missing name is an AttributeError naming the module."""
    try:
        runtime.nope  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "gramagent._runtime" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
