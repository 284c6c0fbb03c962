#!/usr/bin/env python3
"""Where a GPU worker's start-up time goes: the pieces every gpuprobe lane pays before its
first probe, each measured in fresh processes on this machine.

Prints, each the median of RUNS fresh interpreter processes:
- the floor (`import torch; torch.zeros(1, device='cuda')`), split into the torch import and
  the first CUDA call;
- the package-metadata lookup the worker's hello does;
- the interpreter's exit (teardown) after that first CUDA call;
- the import of PyTorch's operator database (the sweep's first probe in a lane pays it),
  alone, after CUDA is initialised, and two at once (two sweep lanes);
then, once, the database import's heaviest modules (`-X importtime`, cumulative) and its
heaviest functions (cProfile, cumulative), so a slow import can be traced to its cause.

usage: bench/startup-profile.py [RUNS] [DEVICE]   (defaults: 3, cuda)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

STAND_IN = (
    "import sys, types, unittest\n"
    "if 'expecttest' not in sys.modules:\n"
    "    try:\n"
    "        import expecttest\n"
    "    except ImportError:\n"
    "        m = types.ModuleType('expecttest'); m.TestCase = unittest.TestCase; sys.modules['expecttest'] = m\n"
)


def timed_snippet(device: str, with_db: bool, cuda_first: bool) -> str:
    return (
        "import time, json\n"
        "t0 = time.perf_counter()\n"
        "import torch\n"
        "t1 = time.perf_counter()\n"
        + (f"torch.zeros(1, device={device!r}); torch.cuda.synchronize() if {device!r} != 'cpu' else None\n" if cuda_first else "")
        + "t2 = time.perf_counter()\n"
        "from importlib import metadata\n"
        "for n in ('torch', 'numpy', 'triton', 'transformers', 'accelerate', 'safetensors'):\n"
        "    try: metadata.version(n)\n"
        "    except Exception: pass\n"
        "t3 = time.perf_counter()\n"
        + (STAND_IN + "from torch.testing._internal.common_methods_invocations import op_db\n" if with_db else "")
        + "t4 = time.perf_counter()\n"
        + (f"torch.zeros(1, device={device!r})\n" if not cuda_first else "")
        + "t5 = time.perf_counter()\n"
        "print(json.dumps({'import_torch': t1 - t0, 'first_device_call': (t2 - t1) + (t5 - t4), "
        "'package_metadata': t3 - t2, 'op_db_import': t4 - t3, 'total': t5 - t0}))\n"
    )


def run_json(code: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_table(title: str, rows: list[dict[str, float]]) -> None:
    keys = rows[0].keys()
    print(f"{title} ({len(rows)} runs, median s): " + ", ".join(f"{k} {statistics.median(r[k] for r in rows):.2f}" for k in keys))


def main(argv: list[str]) -> int:
    runs = int(argv[1]) if len(argv) > 1 else 3
    device = argv[2] if len(argv) > 2 else "cuda"
    subprocess.run([sys.executable, "-c", f"import torch; torch.zeros(1, device={device!r})"], check=True)  # warm the file cache
    wall = []
    for _ in range(runs):
        t = subprocess.run(
            [sys.executable, "-c", f"import time; t=time.perf_counter(); import torch; torch.zeros(1, device={device!r}); print(time.perf_counter()-t)"],
            capture_output=True, text=True, check=True,
        )
        wall.append(float(t.stdout.strip()))
    print(f"floor inside the interpreter: median {statistics.median(wall):.2f} s ({', '.join(f'{w:.2f}' for w in wall)})")
    median_table("floor pieces", [run_json(timed_snippet(device, False, True)) for _ in range(runs)])
    teardown = []
    for _ in range(runs):
        t = subprocess.run(
            [sys.executable, "-c", f"import time, torch; torch.zeros(1, device={device!r}); print(time.time())"],
            capture_output=True, text=True, check=True,
        )
        teardown.append(time.time() - float(t.stdout.strip()))
    print(f"interpreter exit after the first device call: median {statistics.median(teardown):.2f} s")
    median_table("op_db after the first device call", [run_json(timed_snippet(device, True, True)) for _ in range(runs)])
    median_table("op_db before the first device call", [run_json(timed_snippet(device, True, False)) for _ in range(runs)])
    pairs = []
    for _ in range(runs):
        procs = [subprocess.Popen([sys.executable, "-c", timed_snippet(device, True, True)], stdout=subprocess.PIPE, text=True) for _ in range(2)]
        for p in procs:
            out, _ = p.communicate()
            pairs.append(json.loads(out.strip().splitlines()[-1]))
    median_table("op_db, two processes at once", pairs)

    importtime = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import torch; torch.zeros(1, device={device!r})\n" + STAND_IN + "from torch.testing._internal.common_methods_invocations import op_db"],
        capture_output=True, text=True, check=True,
    )
    rows = []
    for line in importtime.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), int(parts[0].split(":")[1]), parts[2].rstrip()))
    print("heaviest imports after the first device call (cumulative ms, self ms, module):")
    for cumulative, self_us, name in sorted(rows, reverse=True)[:40]:
        print(f"  {cumulative / 1000:9.0f} {self_us / 1000:7.0f} {name}")

    profile = subprocess.run(
        [sys.executable, "-c",
         f"import torch; torch.zeros(1, device={device!r})\n" + STAND_IN
         + "import cProfile, pstats, io\n"
         "p = cProfile.Profile(); p.enable()\n"
         "from torch.testing._internal.common_methods_invocations import op_db\n"
         "p.disable(); s = io.StringIO(); pstats.Stats(p, stream=s).sort_stats('cumulative').print_stats(45); print(s.getvalue())\n"
         "s = io.StringIO(); pstats.Stats(p, stream=s).sort_stats('tottime').print_stats(25); print(s.getvalue())"],
        capture_output=True, text=True, check=True,
    )
    print("op_db import, cProfile:")
    print(profile.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
