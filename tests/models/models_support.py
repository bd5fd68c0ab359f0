"""Test data shared by the adapter tests (import by name: ``from models_support import ...``)."""

from __future__ import annotations

from gramagent._spec.definition import ToolDefinition

GET_LOCATION = ToolDefinition(
    name="get_location",
    description="Gets the location of the user.",
    parameters={"type": "object", "properties": {}},
)
"""The no-argument tool of the Harmony guide's function-calling example."""

GET_CURRENT_WEATHER = ToolDefinition(
    name="get_current_weather",
    description="Gets the current weather in the provided location.",
    parameters={
        "type": "object",
        "properties": {
            "location": {"type": "string",
                         "description": "The city and state, e.g. San Francisco, CA"},
            "format": {"type": "string", "enum": ["celsius", "fahrenheit"],
                       "default": "celsius"},
        },
        "required": ["location"],
    },
)
"""The weather tool of the Harmony guide's function-calling example."""
