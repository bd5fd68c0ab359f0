"""Syntax errors of gram text: every ERROR and MISSING node of a tree-sitter tree, as a
positioned message saying what was expected (``unexpected ',' before ']': gram has no trailing
commas``, ``expected ')' to close the node 'x' opened at 1:4``)."""

from __future__ import annotations

import re

from tree_sitter import Node, Tree

from gramagent._spec.gram.syntax import (
    IDENTIFIERS,
    K_ARRAY,
    K_COMMENT,
    K_MAP,
    K_MAP_ENTRY,
    K_NODE,
    K_PROPERTY,
    K_RECORD,
    K_REFERENCE,
    K_RELATIONSHIP,
    K_SUBJECT,
    LANGUAGE,
    Decoder,
    descendants,
)

__all__ = ["missing_bar", "syntax_problems"]

_CLOSER = {"[": "]", "(": ")", "{": "}"}
_FRIENDLY = {
    "symbol": "a name", "integer": "a number", "decimal": "a number", "hexadecimal": "a number",
    "octal": "a number", "measurement": "a number", '"': "a string", "'": "a string",
    "`": "a string", "```": "a string", "string_literal": "a string", "tagged_string":
    "a string", "true": "true or false", "false": "true or false", "boolean_literal":
    "true or false", "array": "a list", "map": "a map", "-": "an arrow (==>)",
    "=": "an arrow (==>)", "~": "an arrow (==>)", "<-": "an arrow (==>)",
    "<=": "an arrow (==>)", "<~": "an arrow (==>)",
}
_IN_PATTERN = {":": "'::Type'", "::": "'::Type'", "labels": "'::Type'", "{": "'{...}'",
               "record": "'{...}'", "|": "'|'"}
"""How to name what may follow a name inside a node or pattern."""
_OPENS_LIKE_A_COMMENT = re.compile(rb"[ \t\v\f]*//")
"""What tree-sitter-gram reads as a comment right after a string's opening quote."""
_SILENT = frozenset({"comment", "range", "..", "...", "@", "@@", "->", "=>", "~>", "end", "\n"})


def _friendly(kind: str) -> str:
    if kind in _SILENT:
        return ""
    return _FRIENDLY.get(kind, f"'{kind}'")


def syntax_problems(tree: Tree, decoder: Decoder) -> list[tuple[int, str]]:
    """Every ERROR and MISSING node of a tree, as ``(byte offset, message)``.

    A pattern missing its ``|`` (``[t:Tool {...}`` followed by its elements) is one problem:
    the stray ``]`` that ends its elements is not reported again.
    """
    out: list[tuple[int, str]] = []
    stack = [tree.root_node]
    stray_closer = False
    while stack:
        node = stack.pop()
        if node.is_missing:
            out.append((node.start_byte, _missing(node, decoder)))
            stray_closer = stray_closer or missing_bar(node.parent)
        elif node.is_error:
            if stray_closer and _only_leaf(node) == "]":
                stray_closer = False
                continue
            out.extend(_unexpected(node, decoder))
        elif node.has_error:
            stack.extend(reversed(node.children))
    return out


def _only_leaf(node: Node) -> str | None:
    """The type of a node's only leaf, or None when it has several (or none)."""
    while node.child_count == 1:
        child = node.child(0)
        if child is None:
            return None
        node = child
    return node.type if not node.child_count else None


def missing_bar(pattern: Node | None) -> bool:
    """Whether ``pattern`` is a subject pattern that lacks its ``|``: tree-sitter closed it
    early (a MISSING ``]``) and the next top-level piece is what should be its elements."""
    if pattern is None or pattern.kind_id != K_SUBJECT or not pattern.child_count:
        return False
    last = pattern.child(pattern.child_count - 1)
    following = pattern.next_named_sibling
    while following is not None and following.kind_id == K_COMMENT:
        following = following.next_named_sibling
    return (last is not None and last.is_missing and last.type == "]"
            and not any(c.type == "|" for c in pattern.children)
            and following is not None
            and following.kind_id in (K_NODE, K_RELATIONSHIP, K_SUBJECT, K_REFERENCE))


def _opened(opener: Node, decoder: Decoder) -> str:
    """``the pattern 'x' opened at 1:1``, or ``the '{' at 1:1``."""
    where = decoder.where(opener.start_byte)
    owner = opener.parent
    what = {K_SUBJECT: "pattern", K_NODE: "node"}.get(owner.kind_id) if owner else None
    ident = next((c for c in owner.named_children if c.kind_id in IDENTIFIERS), None) \
        if owner is not None and what else None
    if ident is None:
        return f"the '{opener.type}' at {where}"
    return f"the {what} '{decoder.name(ident)}' opened at {where}"


def _missing(node: Node, decoder: Decoder) -> str:
    kind = node.type
    parent = node.parent
    if kind in ("]", ")", "}") and parent is not None:
        opener = {"]": "[", ")": "(", "}": "{"}[kind]
        for sibling in parent.children:
            if sibling.type == opener:
                if missing_bar(parent):
                    return (f"expected '|' before the elements of {_opened(sibling, decoder)} "
                            "(or ']' to close it here)")
                return f"expected '{kind}' to close {_opened(sibling, decoder)}"
        return f"expected '{kind}'"
    if parent is not None and parent.kind_id == K_ARRAY:
        return "expected a value: gram lists cannot be empty (write json`[]` for an empty list)"
    if parent is not None and parent.kind_id in (K_PROPERTY, K_MAP_ENTRY):
        return "expected a value after ':'"
    return f"expected {_friendly(kind) or repr(kind)}"


def _unexpected(node: Node, decoder: Decoder) -> list[tuple[int, str]]:
    misplaced = _misplaced(node, decoder)
    if misplaced is not None:
        return [misplaced]
    openers, quote, first = _scan(node)
    if quote is not None and quote.type == "```":
        return [(quote.start_byte, "unterminated fenced string: expected a closing ``` on a "
                                   "line of its own")]
    if quote is not None and _OPENS_LIKE_A_COMMENT.match(decoder.src, quote.end_byte):
        return [(quote.start_byte, "a string cannot open with // (gram reads a comment there "
                                   "and the string as never closed): write \\// instead")]
    if quote is not None:
        return [(quote.start_byte, f"unterminated string: expected a closing {quote.type} on "
                                   "the same line")]
    if openers and node.end_byte >= len(decoder.src.rstrip()):
        return [(o.start_byte, f"'{o.type}' is never closed: expected '{_CLOSER[o.type]}' "
                               "before the end of the text") for o in openers]
    leaf = first or node
    raw = decoder.src[leaf.start_byte: min(leaf.end_byte, leaf.start_byte + 30)]
    excerpt = raw.decode("utf-8", "replace").split("\n")[0] or node.type
    if excerpt.startswith("\\"):
        return [(leaf.start_byte, "invalid escape in a string: gram strings allow \\\" \\' \\` "
                                  "\\\\ \\/ \\b \\f \\n \\r \\t (write other characters as "
                                  "they are)")]
    if excerpt.startswith("\0"):
        return [(leaf.start_byte, "a NUL character cannot appear in gram text")]
    return [(leaf.start_byte, _unexpected_text(leaf, _leaf_before(node), decoder, node))]


def _misplaced(node: Node, decoder: Decoder) -> tuple[int, str] | None:
    """An ERROR node made of whole pieces in the wrong place: a trailing comma, or a missing
    comma between two pieces (None when it is not one of those)."""
    following = node.next_sibling
    closer = following
    while closer is not None and closer.kind_id == K_COMMENT:
        closer = closer.next_sibling
    if _only_leaf(node) == "," and closer is not None and closer.type in _CLOSER.values():
        return (node.start_byte, f"unexpected ',' before '{closer.type}': gram has no "
                                 "trailing commas; remove it")
    if following is not None and node.child_count and node.children[-1].is_named and all(
            (c.is_named and not c.has_error and not c.is_error) or c.type == ","
            for c in node.children):
        # Whole, valid pieces (maybe separated by commas) tree-sitter could not fit in: what
        # follows them is unexpected (typically a missing comma).
        return (following.start_byte, _unexpected_text(following, _last_leaf(node), decoder))
    pieces = node.children
    if (len(pieces) in (2, 3) and node.parent is not None and node.parent.kind_id == K_PROPERTY
            and pieces[0].is_named and not pieces[0].has_error and pieces[1].type == "symbol"
            and all(p.type == ":" for p in pieces[2:])):
        # ``key: value nextKey: ...``: a value, then the next key, with no comma between.
        return (pieces[1].start_byte, _unexpected_text(pieces[1], _last_leaf(pieces[0]),
                                                       decoder))
    return None


def _scan(node: Node) -> tuple[list[Node], Node | None, Node | None]:
    """The brackets left open in an ERROR node's leaves, the quote left open (if any), and
    its first leaf."""
    openers: list[Node] = []
    quote: Node | None = None
    first: Node | None = None
    for leaf in descendants(node):
        if leaf.child_count:
            continue
        kind = leaf.type
        if first is None:
            first = leaf
        if quote is not None:
            if kind == quote.type:
                quote = None
            continue
        if kind in ('"', "'", "`", "```"):
            quote = leaf
        elif kind in ("[", "(", "{"):
            openers.append(leaf)
        elif kind in ("]", ")", "}") and openers and _CLOSER[openers[-1].type] == kind:
            openers.pop()
    return openers, quote, first


def _unexpected_text(node: Node, before: Node | None, decoder: Decoder,
                     context: Node | None = None) -> str:
    """``unexpected 'x': expected ...`` for ``node``, which follows the leaf ``before``."""
    while node.child_count:
        first = node.child(0)
        if first is None:
            break
        node = first
    raw = decoder.src[node.start_byte: min(node.end_byte, node.start_byte + 30)]
    excerpt = raw.decode("utf-8", "replace").split("\n")[0] or node.type
    message = f"unexpected '{excerpt}'"
    expected = _expected(before, context or node)
    return f"{message}: expected {expected}" if expected else message


def _last_leaf(node: Node) -> Node:
    """The rightmost leaf below ``node`` (``node`` itself when it has no children)."""
    while node.child_count:
        last = node.child(node.child_count - 1)
        if last is None:
            break
        node = last
    return node


def _expected(before: Node | None, error: Node) -> str | None:
    """What the grammar accepts after the leaf ``before`` (None when it says nothing
    useful); ``error`` is the node in the way, whose ancestors say which closer fits."""
    if before is None or before.next_parse_state == 0:
        return None
    lookahead = LANGUAGE.lookahead_iterator(before.next_parse_state)
    if lookahead is None:
        return None
    closer = None
    ancestor = error.parent
    while ancestor is not None and closer is None:
        closer = {K_RECORD: "}", K_MAP: "}", K_NODE: ")", K_SUBJECT: "]",
                  K_ARRAY: "]"}.get(ancestor.kind_id)
        ancestor = ancestor.parent
    names: list[str] = []
    for symbol in lookahead.symbols():
        if not LANGUAGE.node_kind_is_visible(symbol):
            continue
        kind = LANGUAGE.node_kind_for_id(symbol) or ""
        if kind in ("]", ")", "}") and closer is not None and kind != closer:
            continue
        if closer in (")", "]") and kind in _IN_PATTERN:  # inside (...) or [...]
            if kind == "|" and closer == ")":
                continue
            name = _IN_PATTERN[kind]
        else:
            name = _friendly(kind)
        if name and name not in names:
            names.append(name)
    if not names or len(names) > 6:
        return None
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _leaf_before(node: Node) -> Node | None:
    current = node
    sibling = current.prev_sibling
    while sibling is None:
        parent = current.parent
        if parent is None:
            return None
        current = parent
        sibling = current.prev_sibling
    return _last_leaf(sibling)
