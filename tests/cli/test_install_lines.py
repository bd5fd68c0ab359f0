"""Install lines that work as written (issue 33 item 5): gramagent is not on a package index,
so no doc tells a user to ``pip install "gramagent[...]"``; the README's two set-up commands
stand near its top, each one line with a virtual environment (a system Python refuses pip with
``externally-managed-environment``); a missing extra's message names the command for how
gramagent was installed (a clone here)."""

from __future__ import annotations

import re
from pathlib import Path

from cli_support import run_gramagent

from gramagent._install import install_command

ROOT = Path(__file__).resolve().parents[2]
FROM_AN_INDEX = re.compile(r"""pip install\s+['"]?gramagent\[""")


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_no_doc_installs_gramagent_from_an_index() -> None:
    found = [f"{path.name}:{n}: {line.strip()}" for path in _docs()
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if FROM_AN_INDEX.search(line)]
    assert found == []


def test_the_readme_set_up_commands_are_near_the_top_one_line_each_in_a_venv() -> None:
    lines = ROOT.joinpath("README.md").read_text().splitlines()
    blocks = [i for i, line in enumerate(lines) if line.strip() == "```bash"]
    quick, dev = (lines[i + 1] for i in blocks[:2])
    assert blocks[1] < 40 and lines[blocks[0] + 2] == lines[blocks[1] + 2] == "```"
    for command in (quick, dev):
        assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && "), command
    assert 'python3 -m pip install ".[local]" && gramagent run examples/hello_world.gram' in quick
    assert 'python3 -m pip install -e ".[dev]"' in dev


def test_a_missing_extra_names_the_command_for_this_install(tmp_path: Path) -> None:
    """From this checkout the message says ``pip install -e "CHECKOUT[otel]"`` (``.`` when
    run from the checkout), never the index form."""
    done = run_gramagent("run", str(ROOT / "examples" / "hello_world.gram"), "Hi", "--otel",
                         "console", "--base-url", "http://127.0.0.1:9/v1", cwd=ROOT,
                         hide=["opentelemetry"])
    assert done.returncode == 1
    assert 'pip install -e ".[otel]"' in done.stderr, done.stderr
    assert install_command("otel", cwd=ROOT) == 'pip install -e ".[otel]"'
    assert install_command("otel", cwd=tmp_path) == f'pip install -e "{ROOT}[otel]"'
