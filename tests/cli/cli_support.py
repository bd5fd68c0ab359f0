"""Run the installed ``gramagent`` console script in a fresh process, as a user does.

The script imports gramagent from the ``PYTHONPATH`` of the test run (the code under test).
``hide`` makes packages look not installed, the way a missing extra looks: a
``sitecustomize`` module on the path wraps the finders of ``sys.meta_path`` so that they find
nothing of them (``find_spec`` gives None, ``import`` raises ``ModuleNotFoundError``).
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from console_script import gramagent_command

__all__ = ["gramagent_command", "on_terminal", "run_gramagent"]

_HIDER = '''
import sys

HIDDEN = {hidden!r}


class _Hiding:
    """A meta path finder that finds nothing of the hidden packages, as if not installed."""

    def __init__(self, inner):
        self._inner = inner

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return self._inner.find_spec(name, path, target)

    def __getattr__(self, attr):
        return getattr(self._inner, attr)


sys.meta_path[:] = [_Hiding(finder) for finder in sys.meta_path]
'''


def run_gramagent(
    *args: str,
    cwd: Path,
    hide: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``gramagent ARGS`` in ``cwd`` and return the finished process (text output)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    environ.update(env or {})
    environ.setdefault("NO_COLOR", "1")
    environ["COLUMNS"] = "200"
    hidden = sorted(set(hide))
    with tempfile.TemporaryDirectory(prefix="gramagent-hide-") as extra_path:
        if hidden:
            Path(extra_path, "sitecustomize.py").write_text(_HIDER.format(hidden=hidden))
            environ["PYTHONPATH"] = os.pathsep.join(
                p for p in (extra_path, environ.get("PYTHONPATH")) if p)
        return subprocess.run(
            [*gramagent_command(), *args], capture_output=True, text=True, env=environ,
            cwd=cwd, input=stdin, timeout=timeout, check=False,
        )


def on_terminal(args: list[str], env: dict[str, str], stdin: bytes = b"",
                cwd: Path | None = None) -> tuple[str, str]:
    """Run ``gramagent ARGS`` with stdout (and stdin) on a pty; (terminal text, stderr)."""
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "gramagent", *args], stdin=child,
                            stdout=child, stderr=subprocess.PIPE, env=env, cwd=cwd)
    os.close(child)
    if stdin:
        os.write(main, stdin)
    out = bytearray()
    try:
        while True:
            ready, _, _ = select.select([main], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out.extend(chunk)
    finally:
        os.close(main)
    _, err = proc.communicate(timeout=60)
    return out.decode(errors="replace").replace("\r\n", "\n"), err.decode(errors="replace")
