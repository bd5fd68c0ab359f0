"""Several calls in one reply, and declining, on the embedded model.

The step schema lets a reply hold a list of calls; these check that the real model uses it
when a request asks for two things at once, and that each call reaches the caller as a call
of its own, as parallel calls come from an API. Where the model writes one call for a
two-item request, asking it whether more calls follow (``continue_lone_calls``, on for the
embedded model) brings the second; a one-item request stays one call.
``tool_call_mode="hybrid"`` lets the model decline a function that does not fit, which
constrained mode never does.
"""

from __future__ import annotations

import json

import pytest

from gramagent._messages import UserMessage
from gramagent._models.base import ModelRequest
from gramagent._models.local import local_model
from gramagent._spec.definition import ToolDefinition

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

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


HOUSE_PRICE = ToolDefinition(
    name="ml.predict_house_price",
    description="Predict house price using Machine Learning model given the house size and "
    "location",
    parameters={
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "Location of the house"},
            "size": {"type": "integer", "description": "Size of the house in square feet"},
        },
        "required": ["location", "size"],
    },
)


BMI = ToolDefinition(
    name="determine_body_mass_index",
    description="Calculate body mass index given weight and height.",
    parameters={
        "type": "object",
        "properties": {
            "weight": {"type": "number", "description": "Weight of the individual in kilograms."},
            "height": {"type": "number", "description": "Height of the individual in meters."},
        },
        "required": ["weight", "height"],
    },
)
INSTRUCTION = ("You are a helpful assistant. When one of the provided functions answers the "
               "user's request, call it with arguments taken from the request; otherwise answer "
               "in text.")


async def test_hybrid_mode_declines_an_unrelated_function() -> None:
    """Offered only a BMI calculator and asked for a triangle's area (BFCL's ``irrelevance_0``),
    the 0.5B in hybrid mode answers in text and calls nothing; in constrained mode the same
    request calls the calculator."""
    request = ModelRequest(
        model="qwen2.5-coder-0.5b", instruction=INSTRUCTION,
        messages=[UserMessage(content="Calculate the area of a triangle given the base is 10 "
                              "meters and height is 5 meters.")],
        tools=[BMI], tool_choice="auto")
    async with local_model("qwen2.5-coder-0.5b", tool_call_mode="hybrid") as model:
        declined = await model.request(request)
    async with local_model("qwen2.5-coder-0.5b") as model:
        forced = await model.request(request)
    assert declined.tool_calls == (), declined.tool_calls
    assert declined.text and declined.text.strip(), declined  # its wording moves with the
    # server's cache state ("The area of the triangle is 25 square meters.", or the question)
    assert [c.name for c in forced.tool_calls] == ["determine_body_mass_index"], forced


async def test_a_two_call_request_yields_two_calls() -> None:
    """A question asking for the same computation twice (BFCL's ``parallel_1``) comes back as
    two calls in one turn, with distinct ids and the two time values asked for."""
    question = ("Calculate the induced electromagnetic force for a magnetic field of 5 Tesla, "
                "area of 2 square meters and change in time of 4 seconds, then repeat with a "
                "change in time of 10 seconds.")
    request = ModelRequest(
        model="qwen2.5-coder-0.5b", instruction=INSTRUCTION,
        messages=[UserMessage(content=question)], tools=[EM_FORCE], tool_choice="auto")
    async with local_model("qwen2.5-coder-0.5b") as model:
        turn = await model.request(request)
    assert turn.text is None, f"answered in text: {turn.text!r}"
    assert [c.name for c in turn.tool_calls] == ["calculate_em_force"] * 2, turn.tool_calls
    assert len({c.id for c in turn.tool_calls}) == 2
    times = sorted(json.loads(c.arguments)["d_time"] for c in turn.tool_calls)
    assert times == [4, 10]


async def test_a_lone_call_is_continued_to_the_calls_asked_for() -> None:
    """BFCL's ``parallel_11`` (two houses): the 0.5B writes one call, for the first house;
    asked whether more calls follow, it adds the second. Without the continuation the same
    request gets the first call only."""
    request = ModelRequest(
        model="qwen2.5-coder-0.5b", instruction=INSTRUCTION,
        messages=[UserMessage(content="Predict house price for a house of size 3000 sq ft. in "
                              "location New York and 4000 sq ft. in Los Angeles using Machine "
                              "Learning Model.")],
        tools=[HOUSE_PRICE], tool_choice="auto")
    async with local_model("qwen2.5-coder-0.5b") as model:
        turn = await model.request(request)
    async with local_model("qwen2.5-coder-0.5b", continue_lone_calls=False) as model:
        alone = await model.request(request)
    houses = sorted((json.loads(c.arguments)["size"], json.loads(c.arguments)["location"])
                    for c in turn.tool_calls)
    assert houses == [(3000, "New York"), (4000, "Los Angeles")], turn.tool_calls
    assert len({c.id for c in turn.tool_calls}) == 2
    assert turn.usage is not None and turn.usage.requests == 2
    assert len(alone.tool_calls) == 1, alone.tool_calls


async def test_a_one_item_request_stays_one_call() -> None:
    """Asked for one thing, the model closes the list it is offered: one call, as before."""
    request = ModelRequest(
        model="qwen2.5-coder-0.5b", instruction=INSTRUCTION,
        messages=[UserMessage(content="Predict the price of a 2500 sq ft. house in Boston.")],
        tools=[HOUSE_PRICE], tool_choice="auto")
    async with local_model("qwen2.5-coder-0.5b") as model:
        turn = await model.request(request)
    assert [json.loads(c.arguments) for c in turn.tool_calls] == [
        {"location": "Boston", "size": 2500}], turn.tool_calls
    assert turn.usage is not None and turn.usage.requests == 2
