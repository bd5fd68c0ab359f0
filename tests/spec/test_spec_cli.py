"""The spec commands through the installed ``gramagent`` console script, as a user runs them.

Each test starts the real console script in a subprocess (with this checkout's ``src`` first on
``PYTHONPATH``, which it inherits) and checks its exit status and output: 0 on success, 1 for
input that is wrong, and never a Python traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from spec_support import bad_input, gramagent

pytestmark = pytest.mark.slow

# --------------------------------------------------------------------------------------------
# Issue 12, item 7: a default that does not match the type is an annotation
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("prop", [
    {"type": "string", "default": None},
    {"type": "integer", "default": "3", "description": "How many"},
    {"type": "array", "items": {"type": "string"}, "default": {}},
])
def test_signature_keeps_a_default_that_does_not_match_the_type(
        tmp_path: Path, prop: dict[str, Any]) -> None:
    """schema -> `gramagent signature` -> `gramagent schema` gives the schema back, default
    included (JSON Schema's default is an annotation, not a constraint)."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}, "x": prop},
              "required": ["q"]}
    path = tmp_path / "tool.json"
    path.write_text(json.dumps(schema))
    sig = gramagent("signature", str(path))
    assert sig.returncode == 0, sig.stderr
    back = gramagent("schema", sig.stdout)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout) == schema


# --------------------------------------------------------------------------------------------
# Issue 12, item 18: a tool spec needs a name and a description
# --------------------------------------------------------------------------------------------

def test_signature_tool_refuses_a_function_without_description() -> None:
    """--tool of a function with no description is refused, not written as a tool pattern
    that `gramagent check` would then reject."""
    definition = {"name": "f", "parameters": {"type": "object",
                                              "properties": {"a": {"type": "string"}}}}
    err = bad_input(gramagent("signature", "-", "--tool", stdin=json.dumps(definition)))
    assert "description must not be empty" in err


# --------------------------------------------------------------------------------------------
# Issue 12, item 21: the seed documents' own notation gets a hint at the supported form
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "hint"), [
    ("(userParams::Object {fields: [name, age]})==>(::String)",
     "[UserParams:Object | (name::String), (age::Integer)]"),
    ("(names::[Text])==>(::String)", "(names::Array {items: Text})"),
    ("(name: Text) --> IO Text", "(name::Text)==>(::Text)"),
])
def test_schema_hints_at_the_supported_form_of_the_seed_notation(text: str, hint: str) -> None:
    """`gramagent schema` of the seed's notation names the form to write instead."""
    err = bad_input(gramagent("schema", text))
    assert hint in err
    assert "did you mean 'else'" not in err
