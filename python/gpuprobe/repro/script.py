"""The shape every generated ``repro.py`` shares: header, settings, device checks, the
bit-exact comparison, the crash/hang child process and the verdict line.

A family (``gpuprobe.repro.families``) supplies the part that is its own: ``CASES`` (the
failing case, or every case of the probe for a crash or hang), ``build(case, device)`` (the
inputs, built on the host), ``run_case(case, inputs, device)`` (the operation under test,
nothing else) and ``check(case, inputs, result)`` (the comparison with the probe's
reference; returns whether it matched). ``run_case`` is the only function the simulation
shim (``simulate_site/sitecustomize.py``) faults, as the worker faults only its operations
layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

#: The generated script's skeleton; ``@@NAME@@`` markers are replaced (no format braces, so
#: the code below reads as the plain Python it is).
TEMPLATE = '''\
#!/usr/bin/env python3
"""Standalone reproduction of gpuprobe probe @@PROBE@@ on @@DEVICE@@.

@@SUMMARY@@

Reference: @@REFERENCE@@
Tolerance: @@TOLERANCE@@
What gpuprobe saw: @@OBSERVED@@

Needs only @@NEEDS@@ (gpuprobe is not needed). Run: python repro.py [--device DEV]
Exit status: 1 REPRODUCED, 0 NOT REPRODUCED, 2 CANNOT RUN.
"""

from __future__ import annotations
@@SIMULATED_HEADER@@
import argparse
import os
import platform
import subprocess
import sys

#: Settings the run had applied (KEY: value; None: unset). Applied before torch starts.
ENV = @@ENV@@
#: The device the probe failed on.
DEFAULT_DEVICE = @@DEVICE_LITERAL@@
#: The probe's verdict was a crash or a hang: run the case in a child process.
CRASH_CHILD = @@CRASH_CHILD@@
#: Seconds the child may take before the case counts as hung.
HANG_TIMEOUT_S = @@HANG_TIMEOUT@@
#: Differing elements printed per comparison.
SHOW = 8
#: Set by main(): the device under test.
DEVICE = None

torch = None  # imported in main(), after ENV is applied

@@HELPERS@@

# ---------------------------------------------------------------------------------------------
# The case.

@@BODY@@

# ---------------------------------------------------------------------------------------------
# Running it.


def device_problem(device):
    """None when ``device`` can run the case, else why not."""
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        return f"{device!r} is not a device: {exc}"
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        return f"device type {dev.type!r} is not supported by this script"
    if not torch.cuda.is_available():
        return "torch sees no GPU (torch.cuda.is_available() is False)"
    if (dev.index or 0) >= torch.cuda.device_count():
        return f"no device {device}: torch sees {torch.cuda.device_count()} GPU(s)"
    return None


def describe(device):
    dev = torch.device(device)
    runtime = f"HIP {torch.version.hip}" if getattr(torch.version, "hip", None) else f"CUDA {torch.version.cuda}"
    print(f"torch {torch.__version__} ({runtime}), python {platform.python_version()}")
    if dev.type == "cuda":
        print(f"device {device}: {torch.cuda.get_device_name(dev)}")
    else:
        print(f"device {device}: {platform.processor() or platform.machine()} (CPU)")
    applied = [f"{k}={v}" for k, v in ENV.items() if v is not None] + [f"unset {k}" for k, v in ENV.items() if v is None]
    if applied:
        print("settings: " + ", ".join(applied))


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def run_all(device):
    """Runs every case; returns the number that failed their check."""
    failed = 0
    for number, case in enumerate(CASES):
        print(f"case {number + 1}/{len(CASES)}: {case_label(case)}")
        inputs = build(case, device)
        result = run_case(case, inputs, device)
        sync(device)
        if not check(case, inputs, result):
            failed += 1
    return failed


@@CHILD_FN@@def main():
    global torch, DEVICE
    parser = argparse.ArgumentParser(description="Reproduces gpuprobe probe @@PROBE@@.")
    parser.add_argument("--device", default=DEFAULT_DEVICE, help=f"device under test (default {DEFAULT_DEVICE})")
    parser.add_argument("--timeout", type=float, default=HANG_TIMEOUT_S, help="seconds before a hang is declared")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for key, value in ENV.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        import torch as imported
    except ImportError as exc:
        print(f"CANNOT RUN: torch cannot be imported ({exc})")
        return 2
    torch = imported
    problem = device_problem(args.device)
    if problem is not None:
        print(f"CANNOT RUN: {problem}")
        return 2
    DEVICE = args.device
    if args.child:
        return 1 if run_all(args.device) else 0
    describe(args.device)
@@CHILD_BRANCH@@    failed = run_all(args.device)
    if failed:
        print(f"REPRODUCED: @@WHAT@@ ({failed} of {len(CASES)} case(s) differ from the reference)")
        return 1
    print("NOT REPRODUCED: the result matches the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

#: Crash and hang verdicts only: the case runs in a child process.
CHILD_RUNNER = '''def run_in_child(device, timeout):
    """Runs the cases in a child process: a crash or hang there is reported, not suffered."""
    argv = [sys.executable, os.path.abspath(__file__), "--device", device, "--child"]
    try:
        child = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"")
        if isinstance(tail, bytes):
            tail = tail.decode("utf-8", "replace")
        print(tail.rstrip())
        print(f"REPRODUCED: hang (no result in {timeout:g} s)")
        return 1
    print(child.stdout.rstrip())
    if child.stderr.strip():
        print("child stderr (last lines):")
        print("\\n".join(child.stderr.strip().splitlines()[-10:]))
    if child.returncode < 0:
        print(f"REPRODUCED: crash (signal {-child.returncode})")
        return 1
    if child.returncode == 1:
        print("NOT REPRODUCED: no crash or hang; the case ran and gave a wrong result (see above)")
        return 0
    print(f"NOT REPRODUCED: the case ran to the end in a child process (exit {child.returncode})")
    return 0


'''

#: Bit-exact comparison shared by the families whose rule is ``bit_exact``.
BIT_EXACT_HELPERS = '''\
_INT_OF_SIZE = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def bits(t):
    """The raw bits of a tensor as integers (bool as uint8)."""
    t = t.detach().reshape(-1).contiguous()
    if t.dtype == torch.bool:
        return t.to(torch.uint8).to(torch.int64)
    return t.view(getattr(torch, _INT_OF_SIZE[t.element_size()])).to(torch.int64)


def show_value(t, i):
    raw = int(bits(t[i : i + 1])[0]) & ((1 << (8 * t.element_size())) - 1)
    if t.dtype == torch.bool:
        return str(bool(t[i]))
    if t.dtype.is_floating_point:
        return f"{float(t[i].to(torch.float64))!r} (0x{raw:0{2 * t.element_size()}x})"
    return str(int(t[i]))


def compare_bits(actual, expected, nan_equal=False):
    """Bit-for-bit comparison; prints the first differing elements. True when identical."""
    actual, expected = actual.detach().cpu().reshape(-1), expected.detach().cpu().reshape(-1)
    if actual.numel() != expected.numel() or actual.dtype != expected.dtype:
        print(f"  expected {expected.numel()} x {expected.dtype}, got {actual.numel()} x {actual.dtype}")
        return False
    differ = bits(actual) != bits(expected)
    if nan_equal and actual.dtype.is_floating_point:
        differ &= ~(torch.isnan(actual.to(torch.float64)) & torch.isnan(expected.to(torch.float64)))
    count = int(differ.sum())
    if count == 0:
        print(f"  all {expected.numel()} elements identical")
        return True
    zeros = int(((actual.to(torch.float64) == 0) & differ).sum()) if actual.dtype != torch.bool else 0
    print(f"  {count} of {expected.numel()} elements differ ({zeros} of them read as zero)")
    print(f"  {'index':>10}  {'expected':>32}  {'actual':>32}")
    for i in differ.nonzero().reshape(-1)[:SHOW].tolist():
        print(f"  {i:>10}  {show_value(expected, i):>32}  {show_value(actual, i):>32}")
    return False
'''


@dataclass
class Recipe:
    """What a family contributes to a script, plus the ``repro.json`` fields it decides."""

    summary: str
    reference: str
    tolerance: str
    what: str
    helpers: str
    body: str
    needs: list[str] = field(default_factory=lambda: ["torch"])


def render(
    recipe: Recipe,
    *,
    probe: str,
    device: str,
    observed: str,
    env: dict[str, str | None],
    crash_child: bool,
    hang_timeout: float,
    simulated: str | None,
) -> str:
    """The whole ``repro.py`` text."""
    if simulated is not None:
        header = (
            "\n# SIMULATED: gpuprobe produced this failure under fault simulation, not on real hardware.\n"
            f"# Simulation: {simulated}. On a healthy stack this script prints NOT REPRODUCED unless it\n"
            "# runs with gpuprobe/repro/simulate_site on PYTHONPATH and GPUPROBE_REPRO_SIMULATE set\n"
            "# (what `gpuprobe repro` does for a simulated result).\n"
        )
    else:
        header = ""
    replacements = {
        "@@PROBE@@": probe,
        "@@DEVICE@@": device,
        "@@DEVICE_LITERAL@@": json.dumps(device),
        "@@SUMMARY@@": recipe.summary,
        "@@REFERENCE@@": recipe.reference,
        "@@TOLERANCE@@": recipe.tolerance,
        "@@OBSERVED@@": observed,
        "@@NEEDS@@": " and ".join(recipe.needs),
        "@@SIMULATED_HEADER@@": header,
        "@@ENV@@": _py_dict(env),
        "@@CRASH_CHILD@@": repr(crash_child),
        "@@HANG_TIMEOUT@@": repr(float(hang_timeout)),
        "@@WHAT@@": recipe.what,
        "@@HELPERS@@": recipe.helpers.strip("\n"),
        "@@BODY@@": recipe.body.strip("\n"),
        "@@CHILD_FN@@": CHILD_RUNNER if crash_child else "",
        "@@CHILD_BRANCH@@": "    if CRASH_CHILD:\n        return run_in_child(args.device, args.timeout)\n" if crash_child else "",
    }
    text = TEMPLATE
    for marker, value in replacements.items():
        text = text.replace(marker, value)
    return text


def _py_dict(env: dict[str, str | None]) -> str:
    if not env:
        return "{}"
    lines = ["{"] + [f"    {key!r}: {value!r}," for key, value in sorted(env.items())] + ["}"]
    return "\n".join(lines)
