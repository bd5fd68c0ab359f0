"""Strict-mode nulls: whether a schema admits ``null``, and the removal of the nulls a strict
model sends for optional properties.

A strict model (see :mod:`gramagent._spec.schema.strict`) must send every property, so it sends
``null`` for one it wants to leave out. Local validation uses the original schema, where that
``null`` is usually invalid: :func:`strip_strict_nulls` removes those nulls first, so the
tool's defaults apply. Plain Python on the standard library alone (the tool-call checks of
:mod:`gramagent._spec.calls.check` use it for every call).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar, cast

__all__ = ["admits_null", "has_type", "resolve_local", "strip_strict_nulls"]

T = TypeVar("T")


def has_type(node: Mapping[str, object], name: str) -> bool:
    t = node.get("type")
    return t == name or (isinstance(t, list) and name in t)



def strip_strict_nulls(arguments: T, schema: Mapping[str, object]) -> T:
    """Undo strict-mode nullability in a model's arguments, for the *original* schema.

    A strict model sends ``null`` for an optional property it wants to leave out. This returns
    a copy of ``arguments`` without those nulls: a ``null`` is dropped where the property is
    optional in ``schema`` and its schema does not itself accept ``null``. Nested objects and
    array items are handled; local ``$ref`` (``#/...``) are followed.

    Args:
        arguments: The decoded arguments (usually a dict).
        schema: The original schema (not the strict one).

    Returns:
        The arguments, ready for validation against ``schema``; other values are unchanged.
    """
    # _strip gives a dict for a dict and a list for a list, anything else back as it is
    return cast(T, _strip(arguments, schema, schema))


def _strip(value: object, node: object, root: Mapping[str, object], hops: int = 0) -> object:
    if not isinstance(node, Mapping) or hops > _MAX_REF_HOPS:
        return value
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = resolve_local(root, ref)
        if target is not None:
            return _strip(value, target, root, hops + 1)
    if isinstance(value, dict):
        props = node.get("properties")
        if not isinstance(props, Mapping):
            return value
        required = node.get("required", ())
        out: dict[object, object] = {}
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                out[key] = item
            elif item is None and key not in required and not admits_null(sub, root):
                continue
            else:
                out[key] = _strip(item, sub, root)
        return out
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_strip(item, node["items"], root) for item in value]
    return value


_MAX_REF_HOPS = 32


def admits_null(node: object, root: Mapping[str, object] | None, hops: int = 0) -> bool:
    """Whether a schema admits ``null``, read from its structure (``not`` is ignored).

    ``$ref`` is followed inside ``root``; an unresolvable one counts as refusing null.
    """
    if isinstance(node, bool):
        return node
    if not isinstance(node, Mapping) or hops > _MAX_REF_HOPS:
        return True
    if "const" in node and node["const"] is not None:
        return False
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        return False
    if "type" in node and not has_type(node, "null"):
        return False
    if "$ref" in node:
        target = resolve_local(root, node["$ref"]) if root is not None else None
        if target is None or not admits_null(target, root, hops + 1):
            return False
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and not any(
                admits_null(sub, root, hops) for sub in node[key]):
            return False
    return not (isinstance(node.get("allOf"), list)
                and not all(admits_null(sub, root, hops) for sub in node["allOf"]))


def resolve_local(root: Mapping[str, object], ref: object) -> object:
    """The node a local reference (``#`` or ``#/$defs/name``) points to, or None."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: object = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
