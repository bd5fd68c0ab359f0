"""Random and hostile command lines for every ``gramagent`` command (issue 32, the CLI fuzz).

:func:`leaf_commands` walks the Typer application, so a command added later is fuzzed without
a change here. :func:`command_line` draws one argument list for a command from a
:class:`random.Random` (hypothesis's in the tests, a seeded one in ``bench/cli_fuzz.py``):
its arguments and some of its options, with values from the hostile pools below, and stray
tokens that look like options. :class:`Playground` makes the files those values name in a
temporary directory (special files, damaged SQLite, invalid UTF-8, copies of the example
agents). :func:`outcome` says what an invocation's result shows that it must not: a Python
exception escaping, a traceback, "internal error", an exit code outside the documented ones.

Paths that can block or exhaust an in-process run (``/dev/zero``, ``/proc/self/mem``, a FIFO
with no writer) are only given to a fresh process (:data:`SPECIAL_FILES`), with a time limit.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer.main
from click.testing import CliRunner
from console_script import gramagent_command

from gramagent._cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures"

DOCUMENTED_EXITS = frozenset({0, 1, 2, 130})
"""Success, a gramagent error, a usage error, interrupted; never 70 (internal error)."""

STRINGS: tuple[str, ...] = (
    "", " ", "-", "--", "x", "hello world", "[/red]", "[/]", "[bold]x[/bold]",
    "[link=file:///etc/passwd]x[/link]", "[red", "]", "\x1b[2J\x1b[H", "\x1b]52;c;aGk=\x07",
    "\x1b[31mred\x1b[0m", "\x07\x08\x7f", "\r", "\n\n", "\t", "a\nb", "%s%n%x", "{}", "{0}",
    "{!r}", "${HOME}", "$(id)", "`id`", "'", '"', "\\", "\\x00", "a" * 5000, "é" * 300,
    "😀" * 100, "\u202eevil", "\ufeff", "\u2028", "\udcff\udcfe",
    "Ω≈ç√", "null", "true", "[]", "{}", '{"a": 1}', '{"personName": "Ada"}', "[1, 2",
    '{"a": NaN}', "1e999", "sayHello", "python_repl", "hello_world_agent", "a:b", ":", "a:",
    ":b", "os:getcwd", "no_such_module_xyz:lib", "gramagent.tools:builtin_library",
    "mcp:stdio:", "mcp:http://127.0.0.1:1/mcp", "openai/x", "openai/", "/x", "provider/",
    "http://127.0.0.1:1/v1", "ftp://x", "http://[::1", "https://", "http://127.0.0.1:1/v\x01",
    "http://127.0.0.1:99999/v1", "http://a b/v1", "http://127.0.0.1:1/v1\r\nX: y", "chat",
    "responses", "harmony", "functions", "native", "text", "console", "otlp", "ray", "asyncio",
    "m=1,2", "m=", "=1,2", "m=a,b", "m=-1,-1", "m=1e999,nan", "accuracy", "tokens",
    "2026-13-45", "low", "high", "0.05", "A", "B", "A,B",
)
NUMBERS: tuple[str, ...] = (
    "0", "1", "-1", "-0", "2", "3.5", "1e999", "-1e999", "nan", "inf", "-inf", "1e-320",
    "99999999999999999999999999999", str(2**63), str(-(2**63) - 1), "0x10", "1_000", "٣",
    "１", "+5", " 7 ", "1,5", "", "abc",
)
OPTION_TOKENS: tuple[str, ...] = (
    "--", "-", "--no-such-option", "-vvvv", "--json=1", "--=", "---x", "-h", "--help",
    "--version", "-Z", "--json", "-V", "-e", "-c", "-o", "--tools", "--session=",
)
PORT_OPTIONS = frozenset({"--http", "--metrics-port"})
"""Options that open a listening server: only values that cannot be a port (no server is
left running in the test process)."""
_RUNNER = CliRunner()
SPECIAL_FILES = ("/dev/zero", "/proc/self/mem", "fifo")
"""Paths given only to a fresh process (``fifo``: one made in the playground)."""


@functools.cache
def root_command() -> Any:
    """The application's click command, built once: Typer builds it again on every
    invocation of its own CliRunner (about 25 ms), click's runs this one."""
    return typer.main.get_command(app)


def invoke(args: Sequence[str], stdin: bytes) -> Any:
    """``gramagent ARGS`` in process, with ``stdin``: click's runner result."""
    return _RUNNER.invoke(root_command(), list(args), input=stdin)


def fuzz_environ(root: Path, base_url: str) -> dict[str, str]:
    """The environment of a fuzzed command: the scripted server ``base_url`` as the model
    server, the data, cache and home directories under ``root``, nothing downloaded."""
    return {"OPENAI_BASE_URL": base_url, "GRAMAGENT_DATA_DIR": str(root / "data"),
            "GRAMAGENT_CACHE": str(root / "cache"), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1",
            "COLUMNS": "120", "HOME": str(root / "home")}


def leaf_commands(root: Any = None) -> list[tuple[tuple[str, ...], Any]]:
    """Every command of the application (or of the click command ``root``) that runs
    something, by its words, with its click command (groups are walked, not listed)."""
    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(command: Any, words: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            found.append((words, command))
            return
        for name, sub in sorted(subcommands.items()):
            walk(sub, (*words, name))

    walk(root_command() if root is None else root, ())
    return found


@dataclass
class Playground:
    """The files hostile values name, under ``root``."""

    root: Path

    def __post_init__(self) -> None:
        root = self.root
        root.mkdir(parents=True, exist_ok=True)
        (root / "dir.gram").mkdir(exist_ok=True)
        (root / "empty.gram").write_bytes(b"")
        (root / "latin1.gram").write_bytes(b"[caf\xe9:Agent]\n\xff\xfe")
        (root / "binary.bin").write_bytes(bytes(range(256)) * 64)
        (root / "nul.gram").write_bytes(b"[a:Agent {instruction: \"\x00\"}]")
        (root / "cases.jsonl").write_bytes(b'{"id": "1", "input": "hi"}\n{"id": 2}\n[1]\n')
        (root / "cases.csv").write_bytes(b"id,input\n1,hi\n2,\"unclosed\n")
        (root / "store.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 80 + b"junk")
        sqlite3.connect(root / "empty.sqlite").close()
        with sqlite3.connect(root / "other.sqlite") as db:
            db.execute("CREATE TABLE runs (x)")
        (root / "big.gram").write_bytes(b"// " + b"x" * 1_000_000 + b"\n")
        for link, target in (("loop", "loop"), ("dangling", "no/such/file")):
            if not (root / link).is_symlink():
                (root / link).symlink_to(target)
        for source in [*EXAMPLES.glob("*.gram"), *FIXTURES.glob("*.gram")]:
            shutil.copyfile(source, root / source.name)
        fifo = root / "fifo"
        if not fifo.exists():
            os.mkfifo(fifo)

    def paths(self) -> tuple[str, ...]:
        """Paths for in-process runs (none that blocks or reads without end)."""
        root = self.root
        names = ["dir.gram", "empty.gram", "latin1.gram", "binary.bin", "nul.gram",
                 "cases.jsonl", "cases.csv", "store.sqlite", "empty.sqlite", "other.sqlite",
                 "big.gram", "loop", "dangling", "hello_world.gram", "weather.gram",
                 "literals.gram", "no_such.gram", "new_dir/out.html"]
        return (*(str(root / name) for name in names), str(root), "/", "/dev/null",
                "/etc", "/proc/self/status", "~", "-", "../../../../etc/passwd",
                str(root / ("n" * 300)), str(root / "a\nb.gram"), str(root / "dir.gram/x"))


def command_line(words: Sequence[str], command: Any, rng: random.Random,
                 paths: Sequence[str]) -> list[str]:
    """One argument list for ``words``' command: its arguments and some options with
    hostile values, and stray option-like tokens, in an order that is sometimes shuffled."""
    strings = (*STRINGS, *paths)
    arguments, options = [], []
    for param in command.params:
        if param.param_type_name == "argument":
            count = rng.randint(0, 3) if param.nargs == -1 else (1 if rng.random() < 0.9 else 0)
            arguments.extend(rng.choice(strings) for _ in range(count))
        elif not param.hidden and param.opts[0] not in ("--install-completion",
                                                         "--show-completion"):
            options.append(param)
    line = list(arguments)
    for param in rng.sample(options, k=min(len(options), rng.randint(0, 4))):
        name = rng.choice(param.opts)
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            line.append(name)
            continue
        value = _value(param, name, rng, strings)
        if rng.random() < 0.2 and name.startswith("--"):
            line.append(f"{name}={value}")
        else:
            line.extend([name, value])
    for _ in range(rng.choice((0, 0, 1, 2))):
        line.insert(rng.randint(0, len(line)), rng.choice(OPTION_TOKENS + strings))
    if rng.random() < 0.2:
        rng.shuffle(line)
    return [*words, *line]


def _value(param: Any, name: str, rng: random.Random, strings: Sequence[str]) -> str:
    if name in PORT_OPTIONS:
        return rng.choice([n for n in NUMBERS if not _a_port(n)] + ["x", "[/red]"])
    numeric = "int" in str(param.bare_type()) or "float" in str(param.bare_type())
    if numeric and rng.random() < 0.85:
        return rng.choice(NUMBERS)
    return rng.choice(strings)


def _a_port(text: str) -> bool:
    try:
        return 0 <= int(text) <= 65535
    except ValueError:
        return False


def stdin_bytes(rng: random.Random) -> bytes:
    """What a command reading standard input is given: nothing, or hostile lines (a lone
    surrogate as the byte it escapes: not UTF-8)."""
    if rng.random() < 0.6:
        return b""
    text = "\n".join(rng.choice(STRINGS) for _ in range(rng.randint(1, 3))) + "\n"
    return text.encode("utf-8", "surrogateescape")


def outcome(exit_code: int, exception: BaseException | None, stdout: str, stderr: str
            ) -> str | None:
    """What is wrong with one invocation's result (None: nothing)."""
    if exception is not None and not isinstance(exception, SystemExit):
        return f"{type(exception).__name__} escaped: {exception!r}"[:300]
    text = stdout + stderr
    if "Traceback (most recent call last)" in text:
        return "a traceback was printed"
    if "internal error" in text.lower():
        return "internal error: " + _line_with(text, "internal error")
    if exit_code not in DOCUMENTED_EXITS:
        return f"exit code {exit_code}"
    return None


def raw_escapes(args: Sequence[str], stdout: str, stderr: str) -> bool:
    """Whether an escape sequence the arguments held reached the output raw."""
    return any("\x1b" in a for a in args) and "\x1b" in stdout + stderr


def _line_with(text: str, needle: str) -> str:
    for line in text.splitlines():
        if needle in line.lower():
            return line[:300]
    return ""


def special_lines(words: Sequence[str], command: Any, play: Playground
                  ) -> list[tuple[str, list[str]]]:
    """The command lines that give ``words``' command a special file (:data:`SPECIAL_FILES`)
    as its first argument and as each of its path options, with the file they name."""
    params = command.params
    positional = [p for p in params if p.param_type_name == "argument"]
    path_options = [p.opts[0] for p in params
                    if p.param_type_name == "option" and "Path" in str(p.bare_type())]
    hello = str(play.root / "hello_world.gram")
    filler = ([hello] + ["x"] * len(positional))[:len(positional)]
    out = []
    for special in SPECIAL_FILES:
        path = str(play.root / "fifo") if special == "fifo" else special
        if positional:
            out.append((special, [*words, path, *filler[1:]]))
        out.extend((special, [*words, *filler, option, path]) for option in path_options)
    return out


@contextlib.contextmanager
def fifo_writer(fifo: Path) -> Iterator[None]:
    """Be the writer of ``fifo`` while the block runs, again and again: each reader gets
    hostile bytes, then their end (a pipe with no writer at all waits for one, as ``cat``
    does). After each end the writer waits a moment before it opens the pipe again: one
    reopened at once, while the last reader still reads, would make its data endless."""
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            with contextlib.suppress(BrokenPipeError), open(fifo, "wb") as pipe:
                pipe.write(b"[a:Agent {x: \xff}] \x00\x1b[2J" * 100)
            stop.wait(0.5)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        yield
    finally:
        stop.set()
        with contextlib.suppress(OSError):  # the feeder's open, unblocked
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        feeder.join(5)


def fresh_process(args: Sequence[str], environ: dict[str, str], timeout: float
                  ) -> str | None:
    """``gramagent ARGS`` in a fresh process: what is wrong with how it ended (a hang past
    ``timeout`` included), or None."""
    try:
        done = subprocess.run([*gramagent_command(), *args], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, errors="replace",
                              env={**os.environ, **environ})
    except subprocess.TimeoutExpired:
        return f"no end after {timeout:g} s"
    return outcome(done.returncode, None, done.stdout, done.stderr)
