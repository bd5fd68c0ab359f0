"""The CLI fuzz's figures (issue 32): every command of ``gramagent``, N random and hostile
command lines each, run in process through Typer's CliRunner, against a scripted model server
on 127.0.0.1; then each command with an argument naming a special file (``/dev/zero``,
``/proc/self/mem``, a FIFO with no writer) in a fresh process with a time limit.

Prints the commands, the command lines run, the seconds taken and each finding: an exception
escaping, a traceback, "internal error", an undocumented exit code, a hang (a fresh process
past its limit), and, counted apart, escape sequences of the arguments reaching the output raw.

    PYTHONPATH=$PWD/src python bench/cli_fuzz.py --per-command 200 [--seed 0] [--no-special]
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cli"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from cli_fuzz_support import (  # noqa: E402
    SPECIAL_FILES,
    Playground,
    command_line,
    fifo_writer,
    fresh_process,
    fuzz_environ,
    invoke,
    leaf_commands,
    outcome,
    raw_escapes,
    special_lines,
    stdin_bytes,
)

from gramagent.testing import ScriptedServer, reply  # noqa: E402

HANG_SECONDS = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-command", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-special", action="store_true", help="skip the fresh processes")
    parser.add_argument("--only", default=None, help="fuzz only the commands starting so")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cli-fuzz-") as folder, \
            ScriptedServer([reply("ok")], loop=True, record=False) as server:
        root = Path(folder)
        environ = fuzz_environ(root, server.base_url)
        os.environ.pop("OPENAI_API_KEY", None)
        os.environ.update(environ)
        (root / "home").mkdir()
        play = Playground(root / "play")
        os.chdir(root)
        commands = [c for c in leaf_commands()
                    if options.only is None or " ".join(c[0]).startswith(options.only)]
        findings: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}
        escapes = 0
        escaped: Counter[str] = Counter()
        started = time.perf_counter()
        total = 0
        seconds: dict[str, float] = {}
        for words, command in commands:
            command_started = time.perf_counter()
            rng = random.Random(f"{options.seed}:{' '.join(words)}")
            for _ in range(options.per_command):
                args = command_line(words, command, rng, play.paths())
                faulthandler.dump_traceback_later(120, exit=True)
                result = invoke(args, stdin_bytes(rng))
                faulthandler.cancel_dump_traceback_later()
                total += 1
                problem = outcome(result.exit_code, result.exception, result.stdout,
                                  result.stderr)
                if problem is not None:
                    key = f"{' '.join(words)}: {problem.split(':')[0]}"
                    findings[key] += 1
                    examples.setdefault(key, [f"{args!r} -> {problem}"])
                if raw_escapes(args, result.stdout, result.stderr):
                    escapes += 1
                    escaped[" ".join(words)] += 1
            seconds[" ".join(words)] = time.perf_counter() - command_started
        in_process = time.perf_counter() - started
        print(f"in process: {len(commands)} commands, {total} command lines, "
              f"{in_process:.1f} s, {sum(findings.values())} findings, "
              f"{escapes} with argument escape sequences in the output")
        if escaped:
            print("  argument escape sequences in the output, by command: " + ", ".join(
                f"{name} {count}" for name, count in escaped.most_common()))
        print("  seconds per command: " + ", ".join(
            f"{name} {value:.1f}" for name, value in sorted(seconds.items(),
                                                         key=lambda item: -item[1])))
        if not options.no_special:
            special_started = time.perf_counter()
            runs = _special(commands, play, environ, findings, examples)
            print(f"fresh processes: {runs} command lines naming {', '.join(SPECIAL_FILES)}, "
                  f"{time.perf_counter() - special_started:.1f} s")
        for key, count in sorted(findings.items()):
            print(f"  {count:5d}  {key}\n         e.g. {examples[key][0][:400]}")


def _special(commands: list[tuple[tuple[str, ...], object]], play: Playground,
             environ: dict[str, str], findings: Counter[str],
             examples: dict[str, list[str]]) -> int:
    """Each command given each special file as its first argument and as each of its path
    options, in a fresh process (the FIFO fed by a writer)."""
    runs = 0
    with fifo_writer(play.root / "fifo"):
        for words, command in commands:
            for special, args in special_lines(words, command, play):
                runs += 1
                problem = fresh_process(args, environ, HANG_SECONDS)
                if problem is not None:
                    key = f"{' '.join(words)}: {problem.split(':')[0]} ({special})"
                    findings[key] += 1
                    examples.setdefault(key, [f"{args!r} -> {problem}"])
    return runs

if __name__ == "__main__":
    main()
