"""The gram reader of whole files: agents, stand-alone tools and file-level type patterns.

:class:`DocumentReader` adds tools and agents to
:class:`~gramagent._spec.gram.sigreader.SignatureReader`: every problem of a file (syntax errors,
unknown types or tools, duplicates, empty names, missing fields) is collected with its
position, and :meth:`DocumentReader.document` raises them all in one
:class:`~gramagent.errors.SpecError`.
"""

from __future__ import annotations

import difflib
from typing import NamedTuple

from tree_sitter import Node

from gramagent._spec.gram.literals import format_name
from gramagent._spec.gram.sigreader import SignatureReader
from gramagent._spec.gram.syntax import (
    K_COMMENT,
    K_NODE,
    K_RECORD,
    K_REFERENCE,
    K_RELATIONSHIP,
    K_SUBJECT,
    V_BAD,
    V_SCALAR,
    NodeInfo,
)
from gramagent._spec.gram.syntaxerrors import missing_bar
from gramagent._spec.gram.typereader import TypeScope, did_you_mean, elements
from gramagent._spec.model import Agent, GramDocument, ModelRef, ToolSpec
from gramagent._spec.signature import Signature
from gramagent._spec.vocabulary import TYPE_NAMES
from gramagent.errors import SpecError

__all__ = ["DocumentReader"]

_AGENT_KEYS = ("description", "instruction", "model")
_TOOL_KEYS = ("description",)
_TOOL_FLAGS = ("requiresApproval", "runsAlone")
"""Boolean properties of a tool's record."""


def _previous(node: Node) -> Node | None:
    """The named sibling before ``node``, comments skipped."""
    before = node.prev_named_sibling
    while before is not None and before.kind_id == K_COMMENT:
        before = before.prev_named_sibling
    return before


class _TopLevel(NamedTuple):
    """The top-level patterns of a file, by what their label says they are."""

    agents: list[tuple[Node, NodeInfo]]
    tools: list[tuple[Node, NodeInfo]]
    types: list[tuple[Node, NodeInfo]]
    broken: set[str]
    """Names of patterns with syntax errors (already reported): not reported as unknown."""


class DocumentReader(SignatureReader):
    """A :class:`SignatureReader` of whole gram files."""

    # ---- records -----------------------------------------------------------------------------

    def strings(self, info: NodeInfo, what: str, allowed: tuple[str, ...],
                flags: tuple[str, ...] = ()) -> tuple[dict[str, tuple[str, int]], set[str]]:
        """The string properties of an agent or tool record, and every key present (a
        misspelt key counts as the allowed one it is close to: it is reported once, as
        misspelt, not again as missing). The boolean properties ``flags`` are allowed too,
        and read by :meth:`flag`."""
        out: dict[str, tuple[str, int]] = {}
        keys: set[str] = set()
        expected = allowed + flags
        for key, key_offset, val in info.entries or ():
            if key in keys:
                self.error(key_offset, f"{what}: duplicate key '{key}'")
                continue
            keys.add(key)
            if key not in expected:
                close = difflib.get_close_matches(key, expected, n=1)
                self.error(key_offset, f"{what}: unknown property '{key}' (expected "
                                       f"{', '.join(expected)}){did_you_mean(key, expected)}")
                keys.update(close)
                continue
            if key in flags:
                continue
            text = self.string(val)
            if text is None:
                if val[0] != V_BAD:
                    self.error(val[2], f"{what}: {key} must be a string")
                continue
            out[key] = (text, val[2])
        return out, keys

    def flag(self, info: NodeInfo, key: str, what: str) -> bool:
        """The boolean property ``key`` of a record (False when absent; reported when it is
        not ``true`` or ``false``)."""
        for entry_key, _, val in info.entries or ():
            if entry_key != key:
                continue
            if val[0] == V_SCALAR and isinstance(val[1], bool):
                return val[1]
            if val[0] == V_BAD:
                self.error(val[2], val[1])
            else:
                self.error(val[2], f"{what}: {key} must be true or false")
            return False
        return False

    def required_name(self, info: NodeInfo, what: str) -> str | None:
        """The identifier of a pattern that must have a non-empty one."""
        if info.ident is None:
            self.error(info.offset, f"{what} needs a name, e.g. [name:{what.capitalize()} ...]")
            return None
        if not info.ident.strip():
            self.error(info.ident_offset, f"{what} name must not be empty")
            return None
        return info.ident

    def misspelt_kind(self, info: NodeInfo, type_names: set[str | None]) -> bool:
        """Report a top-level label that names no type but is close to Agent or Tool
        (``[a:Agnet ...]``)."""
        if len(info.labels) != 1 or info.labels[0] in TYPE_NAMES or info.labels[0] in type_names:
            return False
        label = info.labels[0]
        close = difflib.get_close_matches(label, ["Agent", "Tool", *TYPE_NAMES], n=1)
        if not close or close[0] not in ("Agent", "Tool"):
            return False
        self.error(info.label_offsets[0], f"unknown label '{label}'; did you mean "
                                          f"'{close[0]}'? (a top-level pattern is an agent "
                                          "[name:Agent ...], a tool [name:Tool ...] or a type "
                                          "pattern [Name:Object ...])")
        return True

    # ---- tools and agents -------------------------------------------------------------------

    def tool(self, node: Node, info: NodeInfo, file_types: TypeScope) -> ToolSpec | None:
        count = len(self.problems)
        name = self.required_name(info, "tool")
        what = f"tool '{name}'" if name else "tool"
        props, keys = self.strings(info, what, _TOOL_KEYS, _TOOL_FLAGS)
        requires_approval = self.flag(info, "requiresApproval", what)
        runs_alone = self.flag(info, "runsAlone", what)
        description = props.get("description")
        if description is None:
            if "description" not in keys:
                self.error(info.offset, f"{what}: missing description")
        elif not description[0].strip():
            self.error(description[1], f"{what}: description must not be empty")
        scope = TypeScope(file_types)
        path: Node | None = None
        for child in elements(node):
            kind = child.kind_id
            if kind in (K_NODE, K_RELATIONSHIP):
                if path is not None:
                    self.error(child.start_byte, f"{what}: a tool has one signature (found a "
                                                 "second path)")
                else:
                    path = child
            elif kind == K_SUBJECT:
                self.collect_type(scope, child)
            else:
                self.error(child.start_byte, f"{what}: expected a signature like "
                                             "(x::String)==>(::String) or a type pattern")
        if path is None:
            self.error(info.offset, f"{what}: missing signature, e.g. [{name or 'name'}:Tool "
                                    "{...} | ()==>(::String)]")
            return None
        parts = self.signature(path, scope)
        self.resolve_all(scope)
        if parts is None or len(self.problems) > count or name is None or description is None:
            return None
        return ToolSpec.create(name, description[0], Signature.from_parts(parts),
                               requires_approval=requires_approval, runs_alone=runs_alone)

    def agent(self, node: Node, info: NodeInfo, tools: dict[str, ToolSpec | None],
              file_types: TypeScope) -> Agent | None:
        count = len(self.problems)
        name = self.required_name(info, "agent")
        what = f"agent '{name}'" if name else "agent"
        props, keys = self.strings(info, what, _AGENT_KEYS)
        description = props.get("description")
        if description is not None and not description[0].strip():
            self.error(description[1], f"{what}: description must not be empty (leave it out "
                                       "instead)")
        instruction = props.get("instruction")
        if instruction is None:
            if "instruction" not in keys:
                self.error(info.offset, f"{what}: missing instruction")
        elif not instruction[0].strip():
            self.error(instruction[1], f"{what}: instruction must not be empty")
        model = self.model(info, props, keys, what)
        specs = self.agent_tools(node, what, tools, file_types)
        if len(self.problems) > count or name is None or instruction is None or model is None:
            return None
        return Agent(name=name, description=None if description is None else description[0],
                     model=model, instruction=instruction[0], tools=tuple(specs))

    def model(self, info: NodeInfo, props: dict[str, tuple[str, int]], keys: set[str],
              what: str) -> ModelRef | None:
        """The ``model`` of an agent's record; None after reporting."""
        if "model" in props:
            try:
                return ModelRef.parse(props["model"][0])
            except SpecError as exc:
                self.error(props["model"][1], f"{what}: {exc.diagnostics[0].message}")
        elif "model" not in keys:
            self.error(info.offset, f"{what}: missing model, e.g. model: \"openai/gpt-4o-mini\"")
        return None

    def agent_tools(self, node: Node, what: str, tools: dict[str, ToolSpec | None],
                    file_types: TypeScope) -> list[ToolSpec]:
        """The tools after an agent's ``|``: references to stand-alone tools, or tool
        patterns of its own."""
        specs: list[ToolSpec] = []
        seen: dict[str, int] = {}
        for child in elements(node):
            found = self.agent_tool(child, what, tools, file_types)
            if found is None:
                continue
            tool_name, offset, spec = found
            if tool_name in seen:
                self.error(offset, f"{what}: duplicate tool '{tool_name}' (first at "
                                   f"{self.where(seen[tool_name])})")
                continue
            seen[tool_name] = offset
            if spec is not None:
                specs.append(spec)
        return specs

    def agent_tool(self, child: Node, what: str, tools: dict[str, ToolSpec | None],
                   file_types: TypeScope) -> tuple[str, int, ToolSpec | None] | None:
        """One element of an agent: its tool's name, offset and spec (None when the spec
        has problems); None when the element is no tool (reported)."""
        kind = child.kind_id
        if kind == K_REFERENCE:
            tool_name = self.decoder.name(child)
            if tool_name not in tools:
                self.error(child.start_byte, f"{what}: unknown tool '{tool_name}'" + (
                    did_you_mean(tool_name, tools) or " (define it as a top-level "
                    f"[{format_name(tool_name)}:Tool {{...}} | ...] pattern)"))
                return None
            return tool_name, child.start_byte, tools[tool_name]
        if kind == K_SUBJECT:
            tool_info = self.decoder.info(child)
            if tool_info.labels == ("Tool",):
                spec = self.tool(child, tool_info, file_types)
                offset = tool_info.ident_offset if tool_info.ident is not None else child.start_byte
                return tool_info.ident or "", offset, spec
        self.error(child.start_byte, f"{what}: expected a tool pattern [name:Tool {{...}} | "
                                     "signature] or a tool name")
        return None

    # ---- files ------------------------------------------------------------------------------

    def document(self) -> GramDocument:
        """The agents, stand-alone tools and file-level types of the text.

        Raises:
            SpecError: Every problem of the text, positioned.
        """
        found = self.top_level()
        file_types = TypeScope(shared=True)
        type_names = {info.ident for _, info in found.types}
        for node, info in found.types:
            if not self.misspelt_kind(info, type_names):
                self.collect_type(file_types, node)
        tools, standalone = self.standalone_tools(found, file_types)
        self.resolve_all(file_types)
        agents: list[Agent] = []
        agent_at: dict[str, int] = {}
        for node, info in found.agents:
            agent = self.agent(node, info, tools, file_types)
            if info.ident is not None:
                if info.ident in agent_at:
                    self.error(info.ident_offset, f"duplicate agent '{info.ident}' (first "
                                                  f"defined at {self.where(agent_at[info.ident])})")
                    continue
                agent_at[info.ident] = info.ident_offset
            if agent is not None:
                agents.append(agent)
        self.raise_problems()
        types = tuple(file_types.named[n] for n in file_types.patterns if n in file_types.named)
        return GramDocument(agents=tuple(agents), tools=tuple(standalone), types=types)

    def standalone_tools(self, found: _TopLevel, file_types: TypeScope
                         ) -> tuple[dict[str, ToolSpec | None], list[ToolSpec]]:
        """The top-level tools: by name (None for a broken one, so that agents naming it
        are not told it is unknown), and the good ones in file order."""
        tools: dict[str, ToolSpec | None] = dict.fromkeys(found.broken)
        first_at: dict[str, int] = {}
        standalone: list[ToolSpec] = []
        for node, info in found.tools:
            spec = self.tool(node, info, file_types)
            if info.ident is None:
                continue
            if info.ident in first_at:
                self.error(info.ident_offset, f"duplicate tool '{info.ident}' (first defined at "
                                              f"{self.where(first_at[info.ident])})")
                continue
            first_at[info.ident] = info.ident_offset
            tools[info.ident] = spec
            if spec is not None:
                standalone.append(spec)
        return tools, standalone

    def top_level(self) -> _TopLevel:
        """Sort the top-level patterns by label; report what is not one."""
        found = _TopLevel([], [], [], set())
        root = self.tree.root_node
        for child in root.named_children if not root.is_error else ():
            kind = child.kind_id
            if kind == K_COMMENT or child.is_error:
                continue
            if kind != K_SUBJECT:
                self.not_a_pattern(child)
                continue
            info = self.decoder.info(child)
            if child.has_error:
                if info.ident is not None:
                    found.broken.add(info.ident)
            elif info.labels == ("Agent",):
                found.agents.append((child, info))
            elif info.labels == ("Tool",):
                found.tools.append((child, info))
            elif info.labels:
                found.types.append((child, info))
            else:
                self.error(child.start_byte, "a top-level pattern needs a label: "
                                             "[name:Agent ...], [name:Tool ...] or "
                                             "[Name:Object ...]")
        return found

    def not_a_pattern(self, child: Node) -> None:
        """Report a top-level piece that is not a subject pattern."""
        if child.kind_id == K_RECORD:
            self.error(child.start_byte, "a file-level record is not part of an agent file")
        elif missing_bar(_previous(child)):
            pass  # the elements of a pattern that lacks its '|' (reported there)
        elif not child.has_error:
            self.error(child.start_byte, "expected an agent [name:Agent {...} | tools], a tool "
                                         "[name:Tool {...} | signature] or a type pattern at "
                                         "the top level")
