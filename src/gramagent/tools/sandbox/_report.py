"""What a sandbox worker reports: its isolation, and the outcome of a cell."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gramagent.tools.sandbox._config import REQUIRED_FEATURES

__all__ = ["Isolation", "ReplResult"]


@dataclass(frozen=True, slots=True)
class Isolation:
    """What a worker reported about its isolation: per feature, whether it holds and how."""

    features: dict[str, tuple[bool, str]]

    @classmethod
    def from_report(cls, report: object) -> Isolation:
        """Read a worker's report (untrusted: anything malformed counts as not holding)."""
        features: dict[str, tuple[bool, str]] = {}
        if isinstance(report, dict):
            for name, entry in report.items():
                if isinstance(entry, dict):
                    detail = entry.get("detail")
                    features[str(name)] = (entry.get("ok") is True,
                                           detail if isinstance(detail, str) else "")
        return cls(features)

    @property
    def complete(self) -> bool:
        """Whether every required feature took effect."""
        return all(self.holds(f) for f in REQUIRED_FEATURES)

    def holds(self, feature: str) -> bool:
        """Whether ``feature`` (e.g. ``"syscalls"``) took effect."""
        return self.features.get(feature, (False, ""))[0]

    def missing(self, features: Iterable[str] = REQUIRED_FEATURES) -> list[str]:
        """``feature: detail`` for each of ``features`` that did not take effect."""
        return [f"{f}: {self.features.get(f, (False, 'not reported'))[1]}"
                for f in features if not self.holds(f)]

    def describe(self) -> str:
        """One line per feature."""
        return "\n".join(f"{name}: {'yes' if ok else 'NO'} ({detail})"
                         for name, (ok, detail) in self.features.items())


@dataclass(frozen=True, slots=True)
class ReplResult:
    """The outcome of one cell."""

    output: str
    """What the cell printed (stdout and stderr, interleaved), cut to the output limit."""
    value: str | None
    """``repr`` of the value of the cell's final expression, if it has one and it is not None."""
    error: str | None
    """Traceback text if the cell raised (the session keeps its state)."""
    truncated: bool = False
    """Whether ``output`` was cut."""
    restarted: bool = False
    """Whether this call ran in a fresh worker because the previous one was lost."""

    def to_text(self) -> str:
        """The text a model sees: notices, output, value, error."""
        parts: list[str] = []
        if self.restarted:
            parts.append("[note: this ran in a new Python session; variables and imports "
                         "from earlier calls were lost]")
        if self.output:
            parts.append(self.output.rstrip("\n"))
        if self.value is not None:
            parts.append(self.value)
        if self.error:
            parts.append(self.error.rstrip("\n"))
        return "\n".join(parts) if parts else "(no output)"
