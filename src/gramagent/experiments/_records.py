"""What one run of an experiment records: the key, the answer, tool calls, tokens, time, scores.

Plain frozen dataclasses with ``to_dict``/``from_dict``: the store writes them, a remote engine
would send them, reports read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["LATENCY", "TOKENS", "EvalResult", "RunKey", "RunRecord", "ToolRecord"]

LATENCY = "latency_ms"
"""The report's metric of a run's wall time (no evaluator may take the name)."""
TOKENS = "tokens"
"""The report's metric of a run's tokens (no evaluator may take the name)."""


class RunKey(NamedTuple):
    """What identifies a run within an experiment; resume runs only the missing keys."""

    variant: str
    case_id: str
    repeat: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalResult:
    """One evaluator's verdict on one run."""

    name: str
    score: float
    """In [0, 1]; a pass is 1.0, a fail 0.0."""
    passed: bool | None = None
    """True/False for a pass/fail evaluator, None for a scoring one."""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "score": self.score, "passed": self.passed,
                "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalResult:
        return cls(name=data["name"], score=float(data["score"]), passed=data.get("passed"),
                   reason=data.get("reason", ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRecord:
    """One tool invocation of a run (arguments are kept: an experiment is the user's data)."""

    name: str
    status: str
    """``ok`` or ``error``."""
    error_type: str | None
    latency_ms: float
    arguments: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "error_type": self.error_type,
                "latency_ms": self.latency_ms, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolRecord:
        return cls(name=data["name"], status=data["status"], error_type=data.get("error_type"),
                   latency_ms=float(data.get("latency_ms", 0.0)),
                   arguments=data.get("arguments"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """Everything one (variant, case, repeat) run produced."""

    variant: str
    case_id: str
    repeat: int
    answer: str | None
    """The final answer; None when the run stopped without one."""
    stop: str
    """How the run stopped: ``answer``, ``repeated_call`` (the loop guard asked for the
    answer), ``limit:<name>`` or ``error:<ErrorType>``."""
    error: str | None = None
    tools: tuple[ToolRecord, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    wall_ms: float = 0.0
    started: float = 0.0
    """Unix time the run started."""
    evaluations: tuple[EvalResult, ...] = ()
    estimated_tokens: bool = False
    """Whether the tokens are (partly) estimated: a model server reported no usage for some
    request of the run, so its tokens were counted from the text (about 4 characters a
    token)."""

    @property
    def key(self) -> RunKey:
        return RunKey(self.variant, self.case_id, self.repeat)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def tool_errors(self) -> int:
        return sum(1 for t in self.tools if t.status != "ok")

    def evaluation(self, name: str) -> EvalResult | None:
        for result in self.evaluations:
            if result.name == name:
                return result
        return None
