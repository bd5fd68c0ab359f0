"""``gramagent chat`` edits lines with readline on a terminal and keeps a history (issue 33
item 4): driven through a real pty, key by key, against the scripted server on 127.0.0.1."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_run_commands import greeter

from gramagent.testing import ScriptedServer

pytestmark = pytest.mark.slow  # subprocess or pty runs of the CLI

pytest.importorskip("readline")

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"
LEFT, UP = b"\x1b[D", b"\x1b[A"


class Terminal:
    """``gramagent chat`` with stdin and stdout on a pty: type keys, wait for text."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.main, child = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-m", "gramagent", *args], stdin=child,
                                     stdout=child, stderr=subprocess.PIPE, env=env)
        os.close(child)
        self.seen = b""

    def wait_for(self, text: bytes, timeout: float = 60) -> None:
        """Read the terminal until ``text`` has appeared (since the last wait)."""
        end = time.monotonic() + timeout
        while text not in self.seen:
            ready, _, _ = select.select([self.main], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                raise AssertionError(f"{text!r} not seen in {self.seen!r}")
            self.seen += os.read(self.main, 4096)
        self.seen = self.seen[self.seen.index(text) + len(text):]

    def type(self, keys: bytes) -> None:
        os.write(self.main, keys)

    def close(self) -> str:
        """End the chat (Ctrl-D at the prompt) and return its stderr."""
        self.type(b"\x04")
        _, err = self.proc.communicate(timeout=60)
        os.close(self.main)
        assert self.proc.returncode == 0, err
        return err.decode()


def _env(data: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
            "NO_COLOR": "1", "GRAMAGENT_DATA_DIR": str(data), "TERM": "xterm"}


def test_arrow_keys_edit_the_line_and_up_recalls_the_last_one(tmp_path: Path) -> None:
    with ScriptedServer(greeter) as srv:
        args = ["chat", str(HELLO), "--base-url", srv.base_url]
        chat = Terminal(args, _env(tmp_path))
        chat.wait_for(b"you> ")
        chat.type(b"Hi, I'm Alce" + LEFT + LEFT + b"i\r")  # Alce -> Alice, mid-line
        chat.wait_for(b"Hello, Alice!")
        chat.wait_for(b"you> ")
        chat.close()
        assert "Hi, I'm Alice" in (tmp_path / "chat_history").read_text()

        again = Terminal(args, _env(tmp_path))  # a new chat: the history is read back
        again.wait_for(b"you> ")
        again.type(UP + b"\r")
        again.wait_for(b"Hello, Alice!")
        again.wait_for(b"you> ")
        again.close()
        users = [r.body["messages"][-1]["content"] for r in srv.requests
                 if r.body["messages"][-1]["role"] == "user"]
    assert users == ["Hi, I'm Alice", "Hi, I'm Alice"]
    assert "^[[D" not in users[0]
