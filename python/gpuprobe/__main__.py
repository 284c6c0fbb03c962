"""``python -m gpuprobe ARGS``: runs the gpuprobe binary with this interpreter as the one to probe.

``GPUPROBE_PYTHON`` tells the binary which Python to run its probes in: the one that ran this
module, so ``python -m gpuprobe check`` tests the environment it was called from.
"""

from __future__ import annotations

import os
import subprocess
import sys

from gpuprobe import GpuprobeNotFoundError, find_gpuprobe_bin


def _run() -> int:
    try:
        binary = find_gpuprobe_bin()
    except GpuprobeNotFoundError as exc:
        print(f"gpuprobe: {exc}", file=sys.stderr)
        return 3
    env = dict(os.environ)
    env["GPUPROBE_PYTHON"] = sys.executable
    argv = [binary, *sys.argv[1:]]
    if sys.platform == "win32":
        # No exec on Windows: run it as a child and pass its status through.
        return subprocess.run(argv, env=env, check=False).returncode
    os.execve(binary, argv, env)
    return 3  # pragma: no cover - execve does not return


if __name__ == "__main__":
    sys.exit(_run())
