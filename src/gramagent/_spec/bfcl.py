"""The Berkeley Function Calling Leaderboard (BFCL) function dialect, read as JSON Schema.

BFCL documents its functions as ``{"name", "description", "parameters"}`` where
``parameters`` looks like JSON Schema but speaks its own dialect: Python type names
(``dict``, ``float``, ``tuple``, ``any``), Java and JavaScript ones in the Java/JavaScript
categories (``String``, ``long``, ``double``, ``char``, ``Boolean``, ``Array``, ``ArrayList``,
``HashMap``), an ``optional`` flag, and defaults and enum values that are Python literals
written as strings. :func:`normalize_bfcl_function` turns one such document into
``{"name", "description", "parameters": <JSON Schema>}``; :func:`iter_bfcl_functions` reads
every unique function of the installed ``bfcl-eval`` package
(``pip install --no-deps bfcl-eval==2026.3.23``).

Mapping rules (nothing is silently dropped: what does not fit a keyword goes into the
description):

- types: ``dict``/``object``/``HashMap`` -> ``object``; ``float``/``number``/``double`` ->
  ``number``; ``integer``/``long`` -> ``integer``; ``boolean``/``Boolean`` -> ``boolean``;
  ``string``/``String`` -> ``string``; ``char`` -> a string of exactly one character
  (``minLength``/``maxLength`` 1); ``array``/``Array``/``ArrayList``/``tuple`` -> ``array``
  (a tuple with a list of item schemas becomes ``prefixItems`` with ``items: false`` and a
  fixed length); ``any`` and the empty type name -> no type constraint. An object without
  ``properties`` is free-form. An unknown type name raises :class:`SchemaError`.
- ``required`` is kept; ``optional`` (a per-property flag ``true``/``"true"``/``"yes"``..., or
  an object-level list of names) removes names from it. When both say something of one
  property, ``required`` wins: it is what the BFCL checker reads. A required name without a
  property gets an unconstrained property (``{}``), which is what ``required`` alone means.
- enum values that are strings spelling a literal of the declared type (``"True"`` for a
  boolean, ``"3"`` for an integer) become that literal; values that do not fit (``"dontcare"``
  for a boolean) are kept as they are and their JSON type joins the declared one
  (``["boolean", "string"]``). An ``enum`` written on an array applies to its items.
- defaults: ``None`` (or the strings ``"None"``/``"null"``, Python's "not given") becomes a
  ``null`` default and makes the type nullable; a string spelling a literal of the type is
  converted (``"false"`` -> ``false``, ``"5"`` -> ``5``); a default that still does not
  validate against the schema (``"5 years"`` for an integer) is removed and written into the
  description as ``(default: "5 years")``.
- array-only constraints written on an array's item schema (``minItems``, ``maxItems``,
  ``uniqueItems``) are moved to the array. Other JSON Schema constraints (``format``,
  ``minimum``, ``maximum``, ``pattern``...) pass through; any other keyword raises
  :class:`SchemaError` naming it.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from gramagent._spec.calls.validate import compile_validator
from gramagent._spec.data import JSONSchema
from gramagent.errors import ConfigurationError, SchemaError

__all__ = ["bfcl_data_dir", "iter_bfcl_functions", "normalize_bfcl_function",
           "normalize_bfcl_schema"]

_TYPES: dict[str, str | None] = {
    "string": "string", "String": "string", "char": "string",
    "integer": "integer", "long": "integer",
    "float": "number", "number": "number", "double": "number",
    "boolean": "boolean", "Boolean": "boolean",
    "array": "array", "Array": "array", "ArrayList": "array", "tuple": "array",
    "dict": "object", "object": "object", "HashMap": "object",
    "any": None, "": None,
}
"""BFCL type names (Python, Java, JavaScript) -> JSON Schema type; None: no constraint."""

_PASS_THROUGH = frozenset({
    "format", "pattern", "minLength", "maxLength",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minItems", "maxItems", "uniqueItems",
})
"""Standard JSON Schema constraints BFCL documents may carry; kept as they are."""

_ARRAY_ONLY = ("minItems", "maxItems", "uniqueItems")
_DIALECT = frozenset({"type", "description", "properties", "required", "items", "enum",
                      "default", "optional"}) | _PASS_THROUGH
_FUNCTION_KEYS = frozenset({"name", "description", "parameters"})
_TRUE = frozenset({"true", "yes"})
_FALSE = frozenset({"false", "no"})
_NULL_STRINGS = frozenset({"None", "null"})
_INT_RE = re.compile(r"[+-]?\d+")
_JSON_TYPES: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("boolean", bool), ("integer", int), ("number", float), ("string", str), ("array", list),
    ("object", dict), ("null", type(None)),
)


def normalize_bfcl_function(doc: Mapping[str, object]) -> JSONSchema:
    """Turn one BFCL function document into ``{"name", "description", "parameters"}``.

    ``parameters`` becomes a JSON Schema object (see the module documentation for every
    rule). The input is not modified.

    Args:
        doc: ``{"name": ..., "description": ..., "parameters": {"type": "dict", ...}}``.

    Returns:
        A new dict whose ``parameters`` is plain JSON Schema.

    Raises:
        SchemaError: The document uses a keyword or type name outside the dialect (``keyword``
            names it, ``path`` says where), or is not shaped like a function document.
    """
    name = doc.get("name")
    unknown = sorted(set(doc) - _FUNCTION_KEYS)
    if unknown:
        raise SchemaError(f"function {name!r}: unknown key {unknown[0]!r}", keyword=unknown[0])
    if not isinstance(name, str) or not name:
        raise SchemaError("a BFCL function needs a non-empty string 'name'", keyword="name")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise SchemaError(f"function {name!r}: 'description' must be a string",
                          keyword="description")
    params = doc.get("parameters")
    if not isinstance(params, Mapping):
        raise SchemaError(f"function {name!r}: 'parameters' must be an object",
                          keyword="parameters")
    schema = normalize_bfcl_schema(params)
    if schema.get("type") != "object":
        raise SchemaError(f"function {name!r}: parameters must be of type dict, not "
                          f"{params.get('type')!r}", keyword="type")
    return {"name": name, "description": description, "parameters": schema}


def normalize_bfcl_schema(node: Mapping[str, object], *, path: str = "") -> JSONSchema:
    """Turn one BFCL (sub)schema into JSON Schema; ``path`` prefixes error locations."""
    return _Normalizer().node(node, path)


def _child(path: str, *parts: str | int) -> str:
    """``path`` extended by JSON-pointer parts (``/`` and ``~`` escaped)."""
    for part in parts:
        path += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return path


class _Normalizer:
    """The recursive walk of :func:`normalize_bfcl_schema`."""

    def node(self, node: object, path: str, *, parent: JSONSchema | None = None) -> JSONSchema:
        if not isinstance(node, Mapping):
            raise SchemaError(f"{path or '/'}: a schema must be an object, not {node!r}",
                              keyword="type", path=path)
        for key in node:
            if key not in _DIALECT:
                raise SchemaError(f"{path or '/'}: unknown BFCL keyword {key!r}",
                                  keyword=key, path=path)
        out: JSONSchema = {}
        jtype = self.type_of(node, path)
        if jtype is not None:
            out["type"] = jtype
        self.keywords(node, out, jtype, path, parent)
        self.structure(node, out, jtype, path)
        if "enum" in node:
            self.enum(node["enum"], out, path)
        if "default" in node:
            self.default(node["default"], out, path)
        return out

    def keywords(self, node: Mapping[str, object], out: JSONSchema, jtype: str | None, path: str,
                 parent: JSONSchema | None) -> None:
        """The description and the keywords that pass through unchanged; array keywords
        written on the items go to the array (``parent``)."""
        if "description" in node:
            if not isinstance(node["description"], str):
                raise SchemaError(f"{path or '/'}: description must be a string",
                                  keyword="description", path=path)
            out["description"] = node["description"]
        if node.get("type") == "char":
            out.update(minLength=1, maxLength=1)
        for key in _PASS_THROUGH:
            if key in node:
                if key in _ARRAY_ONLY and jtype != "array" and parent is not None \
                        and key not in parent:
                    parent[key] = node[key]  # written on the items, meant for the array
                else:
                    out[key] = node[key]

    def structure(self, node: Mapping[str, object], out: JSONSchema, jtype: str | None,
                  path: str) -> None:
        """The properties of a dict, the items of an array (refused on other types)."""
        if jtype == "object":
            self.object_schema(node, out, path)
        elif "properties" in node or "required" in node:
            keyword = "properties" if "properties" in node else "required"
            raise SchemaError(f"{path or '/'}: {keyword} on a non-dict type {node.get('type')!r}",
                              keyword=keyword, path=path)
        if jtype == "array":
            self.array(node, out, path)
        elif "items" in node:
            raise SchemaError(f"{path or '/'}: items on a non-array type {node.get('type')!r}",
                              keyword="items", path=path)

    @staticmethod
    def type_of(node: Mapping[str, object], path: str) -> str | None:
        name = node.get("type", "any")
        if not isinstance(name, str) or name not in _TYPES:
            raise SchemaError(f"{path or '/'}: unknown BFCL type {name!r}", keyword="type",
                              path=path)
        return _TYPES[name]

    def object_schema(self, node: Mapping[str, object], out: JSONSchema, path: str) -> None:
        props_in = node.get("properties")
        if props_in is not None and not isinstance(props_in, Mapping):
            raise SchemaError(f"{path or '/'}: properties must be an object",
                              keyword="properties", path=path)
        props = {name: self.node(sub, _child(path, "properties", name))
                 for name, sub in (props_in or {}).items()}
        required_in = node.get("required", [])
        if not isinstance(required_in, list) or not all(isinstance(r, str)
                                                         for r in required_in):
            raise SchemaError(f"{path or '/'}: required must be a list of names",
                              keyword="required", path=path)
        _optional_names(node, path)  # checked; `required` wins over it (module docs)
        required = list(dict.fromkeys(required_in))
        for name in required:
            props.setdefault(name, {})  # `required` alone means "present, any value"
        required += [n for n in props
                     if n not in required and _flag(props_in or {}, n, path) is False]
        if props or props_in is not None:
            out["properties"] = props
        if required:
            out["required"] = [n for n in props if n in required]

    def array(self, node: Mapping[str, object], out: JSONSchema, path: str) -> None:
        items = node.get("items")
        if items is None:
            return
        if isinstance(items, list):
            out["prefixItems"] = [self.node(sub, _child(path, "items", i))
                                  for i, sub in enumerate(items)]
            out.update(items=False, minItems=len(items), maxItems=len(items))
        else:
            out["items"] = self.node(items, _child(path, "items"), parent=out)

    def enum(self, values: object, out: JSONSchema, path: str) -> None:
        if not isinstance(values, list) or not values:
            raise SchemaError(f"{path or '/'}: enum must be a non-empty list", keyword="enum",
                              path=path)
        target = out
        if out.get("type") == "array" and isinstance(out.get("items"), dict) \
                and "enum" not in out["items"]:
            target = out["items"]  # an enum on an array lists the allowed items
        declared = target.get("type")
        coerced = [_coerce(v, declared) for v in values]
        target["enum"] = coerced
        if isinstance(declared, str):
            kinds = list(dict.fromkeys(_json_type(v) for v in coerced))
            if "integer" in kinds and declared == "number":
                kinds = ["number" if k == "integer" else k for k in kinds]
                kinds = list(dict.fromkeys(kinds))
            if kinds != [declared]:
                ordered = [declared] if declared in kinds else []
                ordered += [k for k in kinds if k != declared]
                target["type"] = ordered[0] if len(ordered) == 1 else ordered

    def default(self, value: object, out: JSONSchema, path: str) -> None:
        if value is None or (isinstance(value, str) and value in _NULL_STRINGS
                             and out.get("type") is not None):
            _make_nullable(out)
            out["default"] = None
            return
        if isinstance(value, str) and value in _NULL_STRINGS:  # untyped: None is a value
            out["default"] = None
            return
        declared = out.get("type")
        candidate = _coerce(value, declared if isinstance(declared, str) else None)
        if compile_validator(out).is_valid(candidate):
            out["default"] = candidate
            return
        note = f"(default: {json.dumps(value, ensure_ascii=False)})"
        desc = out.get("description")
        out["description"] = f"{desc} {note}" if desc else note


def _optional_names(node: Mapping[str, object], path: str) -> set[str]:
    optional = node.get("optional")
    if optional is None:
        return set()
    if not isinstance(optional, list) or not all(isinstance(o, str) for o in optional):
        raise SchemaError(f"{path or '/'}: optional on a dict must be a list of names",
                          keyword="optional", path=path)
    return set(optional)


def _flag(props: Mapping[str, object], name: str, path: str) -> bool | None:
    """A property's own ``optional`` flag: True (optional), False (stated required) or None."""
    sub = props.get(name)
    if not isinstance(sub, Mapping) or "optional" not in sub:
        return None
    value = sub["optional"]
    if isinstance(value, list):  # the object-level form, on a nested dict: not a flag
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    where = _child(path, "properties", name)
    raise SchemaError(f"{where}: optional must be a boolean, not {value!r}",
                      keyword="optional", path=where)


def _coerce(value: object, jtype: str | None) -> Any:
    """A string spelling a literal of ``jtype`` as that literal; anything else unchanged."""
    if not isinstance(value, str) or jtype in (None, "string"):
        return value
    text = value.strip()
    if jtype == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if jtype == "integer" and _INT_RE.fullmatch(text):
        return int(text)
    if jtype == "number":
        if _INT_RE.fullmatch(text):
            return int(text)
        try:
            number = float(text)
        except ValueError:
            return value
        return number if number == number and abs(number) != float("inf") else value
    if jtype in ("array", "object") and text[:1] in "[{":
        try:
            parsed = json.loads(text)
        except ValueError:
            return value
        return parsed if _json_type(parsed) == jtype else value
    return value


def _json_type(value: object) -> str:
    for name, kind in _JSON_TYPES:
        if isinstance(value, kind):
            return name
    raise SchemaError(f"{value!r} is not a JSON value", keyword="enum")


def _make_nullable(out: JSONSchema) -> None:
    t = out.get("type")
    if isinstance(t, str):
        out["type"] = [t, "null"]
    elif isinstance(t, list) and "null" not in t:
        out["type"] = [*t, "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------

def bfcl_data_dir() -> Path:
    """The ``data`` folder of the installed ``bfcl-eval`` distribution (not imported).

    Found through the distribution's metadata first (a module called ``bfcl_eval`` on
    ``sys.path``, such as a script of that name, cannot shadow it), then through the import
    system.

    Raises:
        ConfigurationError: ``bfcl-eval`` is not installed.
    """
    candidates: list[Path] = []
    try:
        dist = metadata.distribution("bfcl-eval")
    except metadata.PackageNotFoundError:
        pass
    else:
        candidates.append(Path(str(dist.locate_file("bfcl_eval/data"))))
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(loc) / "data" for loc in spec.submodule_search_locations]
    for data in candidates:
        if data.is_dir():
            return data
    raise ConfigurationError("bfcl-eval is not installed (pip install --no-deps "
                             "bfcl-eval==2026.3.23)")


def iter_bfcl_functions(data_dir: Path | None = None) -> Iterator[JSONSchema]:
    """Every unique BFCL function document, as found in ``bfcl_eval/data/*.json``.

    The files hold one JSON test entry per line; an entry's ``function`` is one function
    document or a list of them. Files that are not JSON lines (e.g. a JSON index) and entries
    without functions are skipped. Duplicates (equal canonical JSON) are yielded once, in file
    and line order. The documents are yielded raw, in the BFCL dialect; pass them to
    :func:`normalize_bfcl_function`.

    Args:
        data_dir: The folder to read; by default :func:`bfcl_data_dir`.

    Raises:
        ConfigurationError: ``bfcl_eval`` is not installed.
    """
    folder = data_dir if data_dir is not None else bfcl_data_dir()
    seen: set[str] = set()
    for file in sorted(folder.glob("*.json")):
        for entry in _entries(file):
            functions = entry.get("function")
            if isinstance(functions, Mapping):
                functions = [functions]
            if not isinstance(functions, list):
                continue
            for doc in functions:
                if not isinstance(doc, Mapping):
                    continue
                key = json.dumps(doc, sort_keys=True, ensure_ascii=False)
                if key not in seen:
                    seen.add(key)
                    yield dict(doc)


def _entries(file: Path) -> Iterator[Mapping[str, object]]:
    """The JSON-lines entries of one file; nothing if it is not JSON lines."""
    with file.open(encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                return  # not JSON lines (e.g. a pretty-printed JSON index)
            if isinstance(entry, Mapping):
                yield entry
