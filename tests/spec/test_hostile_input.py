"""Hostile gram text, signatures and schemas: deep nesting and bytes that are not UTF-8 end in
a positioned SpecError (or SchemaError), never in RecursionError or UnicodeDecodeError
(issue 14, item 10). The console script exits 1 for them, without a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spec_support import bad_input, gramagent

from gramagent._spec.gram.text import format_gram, has_comments, load_agent, load_gram, to_gram
from gramagent._spec.gram.typereader import MAX_EXPANDED
from gramagent._spec.signature import format_signature, parse_signature, schema_to_signature
from gramagent._spec.vocabulary import MAX_DEPTH
from gramagent.errors import SchemaError, SpecError


def tool(signature: str, *elements: str) -> str:
    return "[t:Tool {description: \"d\"} |\n  " + ",\n  ".join([signature, *elements]) + "\n]\n"


def type_chain(n: int, member: Callable[[int], str]) -> str:
    """A tool whose parameter's type names a type that names a type ... ``n`` deep."""
    types = [f"[T{i}:Object | {member(i)}]" for i in range(n)]
    return tool("(x::T0)==>(::String)", *types, f"[T{n}:Object | (leaf::String)]")


FORMS: dict[str, Callable[[int], str]] = {
    "json list": lambda n: tool(f"(x::Array {{default: json`{'[' * n}1{']' * n}`}})==>(::String)"),
    "json map": lambda n: tool("(x::Object {default: json`" + '{"a":' * n + "1" + "}" * n
                               + "`})==>(::String)"),
    "gram list": lambda n: tool(f"(x::Array {{enum: {'[' * n}1{']' * n}}})==>(::String)"),
    "gram map": lambda n: tool(f"(x::Object {{default: {'{a: ' * n}1{'}' * n}}})==>(::String)"),
    "member chain": lambda n: type_chain(n, lambda i: f"(a::T{i + 1})"),
    "items chain": lambda n: type_chain(n, lambda i: f"(a::Array {{items: T{i + 1}}})"),
    "doubling chain": lambda n: type_chain(n, lambda i: f"(a::T{i + 1}), (b::T{i + 1})"),
    "long path": lambda n: tool("\n  ==>".join(f"(p{i}::String)  // {i}" for i in range(n))
                                + "\n  ==>(::String)"),
    "subjects": lambda n: "[a:Agent | " * n + "]" * n,
    "nodes": lambda n: "(" * n + ")" * n,
    "open brackets": lambda n: tool("(x::String)==>(::String)") + "[{(" * n,
}


def survives(read: Callable[[], Any]) -> None:
    """``read`` returns, or raises a positioned SpecError / a SchemaError; nothing else."""
    try:
        read()
    except SpecError as exc:
        assert exc.diagnostics and all(d.line is not None for d in exc.diagnostics), str(exc)
    except SchemaError:
        pass


@pytest.mark.slow
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(sorted(FORMS)), st.integers(0, 3000))
def test_deep_nesting_is_a_positioned_spec_error(form: str, depth: int) -> None:
    """Every reader, and the writer on what was read, survives any nesting depth."""
    text = FORMS[form](depth)
    survives(lambda: load_gram(text))
    survives(lambda: format_gram(text))
    survives(lambda: load_gram(to_gram(load_gram(text))))
    survives(lambda: has_comments(text))
    signature = text.split("|", 1)[-1].rsplit("]", 1)[0]
    survives(lambda: format_signature(parse_signature(signature)))


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_limits_are_where_they_say(form: str) -> None:
    """Just below the limit a form reads (except the ones that are never gram); above it the
    error names the limit."""
    if form not in ("json list", "json map", "member chain", "items chain"):
        return
    load_gram(FORMS[form](MAX_DEPTH - 1))
    with pytest.raises(SpecError, match=f"nested more than {MAX_DEPTH} levels deep"):
        load_gram(FORMS[form](MAX_DEPTH + 1))


def test_types_that_double_at_every_level_hit_the_expansion_budget() -> None:
    """A few lines whose types each use the next twice would expand to 2**30 schema nodes:
    refused once the copies pass the budget, quickly and with one message."""
    with pytest.raises(SpecError) as info:
        load_gram(FORMS["doubling chain"](30))
    [diagnostic] = info.value.diagnostics
    assert f"more than {MAX_EXPANDED:,} schema nodes" in diagnostic.message


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2000), st.sampled_from(["items", "properties", "anyOf", "default"]))
def test_deep_json_schemas_are_a_schema_error(depth: int, how: str) -> None:
    """schema_to_signature refuses schemas (and values in them) deeper than the limit."""
    node: Any = {"type": "string"}
    for _ in range(depth):
        node = {"type": "array", "items": node} if how == "items" else \
            {"type": "object", "properties": {"a": node}} if how == "properties" else \
            {"anyOf": [node]} if how == "anyOf" else [node]
    prop = {"type": "array", "default": node} if how == "default" else node
    try:
        sig = schema_to_signature({"type": "object", "properties": {"x": prop}})
    except SchemaError as exc:
        assert exc.path is not None
        return
    assert parse_signature(format_signature(sig)) == sig


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=4).filter(lambda b: not _utf8(b)),
       st.integers(0, 200))
def test_bytes_that_are_not_utf8_are_a_positioned_spec_error(junk: bytes, at: int) -> None:
    """Invalid UTF-8 anywhere in bytes given to the readers is a SpecError at its position,
    never a UnicodeDecodeError."""
    good = tool('(city::String {description: "Stadt, Straße"})==>(::String)').encode()
    at = min(at, len(good))
    src = good[:at] + junk + good[at:]
    for read in (load_gram, format_gram):
        with pytest.raises(SpecError) as info:
            read(src)
        [diagnostic] = info.value.diagnostics
        assert diagnostic.message == "the text is not valid UTF-8"
        line = src[: at + len(junk)].count(b"\n") + 1
        assert diagnostic.line is not None and diagnostic.line <= line
    has_comments(src)


def test_a_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.gram"
    path.write_bytes(b'[t:Tool {description: "\xff"} | ()==>(::String)]')
    with pytest.raises(SpecError) as info:
        load_agent(path)
    assert str(info.value) == f"{path}:1:24: the file is not valid UTF-8"


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Through the console script
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "fmt"])
@pytest.mark.parametrize(("content", "message"), [
    (FORMS["member chain"](500).encode(), f"nested more than {MAX_DEPTH} levels deep"),
    (FORMS["json list"](5000).encode(), "nested more than"),
    (b'[t:Tool {description: "\xff"} | ()==>(::String)]', "1:24: the file is not valid UTF-8"),
])
def test_cli_reads_hostile_files_without_traceback(tmp_path: Path, command: str,
                                                   content: bytes, message: str) -> None:
    path = tmp_path / "hostile.gram"
    path.write_bytes(content)
    assert message in bad_input(gramagent(command, str(path)))


@pytest.mark.slow
def test_cli_schema_and_signature_refuse_deep_input(tmp_path: Path) -> None:
    deep = FORMS["items chain"](200)
    signature = deep.split("|", 1)[-1].rsplit("]", 1)[0]
    assert f"nested more than {MAX_DEPTH} levels deep" in bad_input(gramagent("schema", signature))
    path = tmp_path / "deep.json"
    path.write_text('{"type": "object", "properties": {"x": '
                    + '{"type": "array", "items": ' * 5000 + "{}" + "}" * 5000 + "}}")
    assert "nested too deeply" in bad_input(gramagent("signature", str(path)))
    path.write_text(json.dumps({"type": "object", "properties": {"x": {"default": [[[[[[]]]]]]}}}))
    result = gramagent("signature", str(path))
    assert result.returncode == 0, result.stderr
