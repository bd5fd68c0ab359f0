"""Tests of schema derivation from Python type hints and Google-style docstrings."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import pytest

from gramagent._runtime.introspect import describe_function, parse_docstring, type_schema
from gramagent.errors import ToolError


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(TypedDict):
    """A point.

    Args:
        x: horizontal position.
    """

    x: float
    y: float
    label: NotRequired[str]


@dataclass
class Series:
    name: str
    y_field: str
    weight: float = 1.0
    tags: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (list, {"type": "array"}),
        (dict, {"type": "object"}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (dict[str, Any], {"type": "object"}),
        (Literal["bar", "line"], {"type": "string", "enum": ["bar", "line"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the form under test
        (int | None, {"type": ["integer", "null"]}),
        (Literal["a"] | None, {"type": ["string", "null"], "enum": ["a", None]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (list[int] | None, {"type": ["array", "null"], "items": {"type": "integer"}}),
        (Point | None, {**type_schema(Point), "type": ["object", "null"]}),
        (Annotated[str, "the city"], {"type": "string", "description": "the city"}),
        (Any, {}),
    ],
    ids=lambda v: repr(v) if not isinstance(v, dict) else "",
)
def test_type_schema(hint: Any, schema: dict[str, Any]) -> None:
    """Each supported type form maps to its JSON Schema."""
    assert type_schema(hint) == schema


def test_typed_dict_is_a_closed_nested_object() -> None:
    """TypedDict keys become properties; NotRequired keys are optional; docs describe keys."""
    assert type_schema(Point) == {
        "type": "object",
        "properties": {
            "x": {"type": "number", "description": "horizontal position."},
            "y": {"type": "number"},
            "label": {"type": "string"},
        },
        "required": ["x", "y"],
        "additionalProperties": False,
    }


def test_dataclass_is_a_closed_nested_object_with_defaults() -> None:
    """Fields without defaults are required; simple defaults are recorded."""
    assert type_schema(list[Series]) == {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "y_field": {"type": "string"},
                "weight": {"type": "number", "default": 1.0},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["name", "y_field"],
            "additionalProperties": False,
        },
    }


@pytest.mark.parametrize("hint", [set[int] | bytes, bytes, tuple[int, str], dict[int, str]])
def test_unsupported_types_raise_type_error(hint: Any) -> None:
    """Types with no JSON equivalent are refused with the type in the message."""
    with pytest.raises(TypeError, match="not supported|unsupported|keys must be str"):
        type_schema(hint)


def test_docstring_first_paragraph_and_args() -> None:
    """Wrapped lines are joined; Args entries with types and continuation lines are read."""
    doc = """Return a friendly
    greeting.

    More detail that is not part of the description.

    Args:
        personName (str): who to greet,
            by first name.
        times: how often.

    Returns:
        The greeting.
    """
    description, args = parse_docstring(doc)
    assert description == "Return a friendly greeting."
    assert args == {"personName": "who to greet, by first name.", "times": "how often."}


def test_describe_function_builds_params_with_defaults_and_docs() -> None:
    """Defaults make a parameter optional and are recorded; Args text becomes descriptions."""

    def greet(personName: str = "world", times: int = 1) -> str:
        """Greet someone.

        Args:
            personName: who to greet.
        """
        return personName * times

    contract = describe_function(greet)
    assert contract.description == "Greet someone."
    assert [(p.name, p.required) for p in contract.params] == [("personName", False),
                                                              ("times", False)]
    assert contract.params[0].schema == {"type": "string", "description": "who to greet.",
                                         "default": "world"}
    assert contract.returns == {"type": "string"}


def test_describe_function_reports_every_problem_with_its_location() -> None:
    """Missing hints, *args and a missing docstring are all reported in one ToolError."""

    def bad(a, *rest: int, b: bytes) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(ToolError) as info:
        describe_function(bad)
    problems = info.value.problems
    assert len(problems) == 4
    assert all("test_introspect.py:" in p for p in problems)
    text = str(info.value)
    assert "no description" in text and "'a' has no type hint" in text
    assert "*args" in text and "bytes" in text
