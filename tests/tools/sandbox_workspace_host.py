"""A host whose system temporary directory keeps its files in memory, for the workspace tests.

Run as ``python sandbox_workspace_host.py MEMDIR MODE`` (as root or as an ordinary user), with
MEMDIR a directory on tmpfs. MODE ``default``: ``TMPDIR`` is unset and the system's temporary
directory is MEMDIR (as on a machine whose ``/tmp`` is tmpfs); ``tmpdir``: ``TMPDIR`` names
MEMDIR. It makes a temporary workspace as the built-in tools do, runs each cell of
:data:`LAYOUTS` in its sandbox and prints one ``RESULT {json}`` line: where the workspace was
made, the sandbox's ``memory`` report entry and, per layout, the bytes written, the file
systems holding them and how much the machine's ``Shmem`` (tmpfs pages) grew meanwhile.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

LAYOUTS = {
    "many small files": "for i in range(1500):\n"
                        "    open(f's{i}', 'wb').write(b'x' * 4096)\nn = 1500 * 4096",
    "one big file": "open('big', 'wb').write(b'x' * (3 << 20))\nn = 3 << 20",
    "nested directories": "import os\nfor i in range(300):\n"
                          "    os.makedirs(f'd{i}/e/f')\n"
                          "    open(f'd{i}/e/f/g', 'wb').write(b'x' * 8192)\nn = 300 * 8192",
    "many big files": "for i in range(6):\n"
                      "    open(f'b{i}', 'wb').write(b'x' * (3 << 20))\nn = 6 * (3 << 20)",
}
"""Cells writing files to the work directory; each sets ``n``, the bytes it wrote."""


def shmem_bytes() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Shmem:")) * 1024


def main() -> None:
    memdir, mode = sys.argv[1], sys.argv[2]
    os.environ.pop("TMPDIR", None)
    if mode == "tmpdir":
        os.environ["TMPDIR"] = memdir
    tempfile.tempdir = memdir
    from gramagent.tools import ToolSettings, WorkspaceProvider
    from gramagent.tools.sandbox import SandboxConfig, SandboxError, SandboxLimits
    from gramagent.tools.sandbox._memory import file_system_type

    limits = SandboxLimits(timeout=60.0, cpu_seconds=30, max_file_bytes=4 << 20)
    provider = WorkspaceProvider(ToolSettings(sandbox=SandboxConfig(limits=limits)))
    workspace = provider.get(None)
    result: dict[str, object] = {"root": str(workspace.root), "layouts": {}}
    try:
        box = workspace.sandbox()
        try:
            isolation = box.start()
        except SandboxError as exc:
            print("RESULT " + json.dumps({"unavailable": str(exc)}))
            return
        result["memory"] = list(isolation.features["memory"])
        for name, cell in LAYOUTS.items():
            before = shmem_bytes()
            text = box.run(cell + "\nprint('WROTE', n)").to_text()
            grown = shmem_bytes() - before
            kinds = sorted({file_system_type(workspace.root / path)
                            for path in workspace.files()})
            result["layouts"][name] = {"text": text, "shmem_grown": grown,  # type: ignore[index]
                                       "file_systems": kinds}
    finally:
        provider.close()
    result["removed"] = not Path(str(result["root"])).exists()
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
