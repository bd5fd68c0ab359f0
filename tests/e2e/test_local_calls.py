"""Several calls in one reply, and declining, on the embedded model (constrained mode).

The step schema lets a reply hold a list of calls; these check that the real model uses it
when a request asks for two things at once, and that each call reaches the caller as a call
of its own, as parallel calls come from an API.
"""

from __future__ import annotations

import json

import pytest

from gramagent._messages import UserMessage
from gramagent._models.base import ModelRequest
from gramagent._models.local import local_model
from gramagent._spec.definition import ToolDefinition

pytestmark = pytest.mark.e2e

EM_FORCE = ToolDefinition(
    name="calculate_em_force",
    description="Calculate the induced electromagnetic force based on Faraday's Law, given the "
    "magnetic field (in Tesla), the change in area (in square meters) and the change in time "
    "(in seconds).",
    parameters={
        "type": "object",
        "properties": {
            "b_field": {"type": "integer", "description": "The magnetic field in Tesla."},
            "area": {"type": "integer", "description": "The change in area in square meters."},
            "d_time": {"type": "integer", "description": "The change in time in seconds."},
        },
        "required": ["b_field", "area", "d_time"],
    },
)


async def test_a_two_call_request_yields_two_calls() -> None:
    """A question asking for the same computation twice (BFCL's ``parallel_1``) comes back as
    two calls in one turn, with distinct ids and the two time values asked for."""
    question = ("Calculate the induced electromagnetic force for a magnetic field of 5 Tesla, "
                "area of 2 square meters and change in time of 4 seconds, then repeat with a "
                "change in time of 10 seconds.")
    request = ModelRequest(
        model="qwen2.5-coder-0.5b",
        instruction="You are a helpful assistant. When one of the provided functions answers "
        "the user's request, call it with arguments taken from the request; otherwise answer "
        "in text.",
        messages=[UserMessage(content=question)], tools=[EM_FORCE], tool_choice="auto")
    async with local_model("qwen2.5-coder-0.5b") as model:
        turn = await model.request(request)
    assert turn.text is None, f"answered in text: {turn.text!r}"
    assert [c.name for c in turn.tool_calls] == ["calculate_em_force"] * 2, turn.tool_calls
    assert len({c.id for c in turn.tool_calls}) == 2
    times = sorted(json.loads(c.arguments)["d_time"] for c in turn.tool_calls)
    assert times == [4, 10]
