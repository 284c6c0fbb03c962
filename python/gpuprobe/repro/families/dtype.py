"""dtype family: one conversion of the probe's adversarial inputs (``dtype_run``), compared
bit for bit with the CPU's conversion.
"""

from __future__ import annotations

import functools

from gpuprobe.repro.families.base import Case, _constants, _sources
from gpuprobe.repro.script import BIT_EXACT_HELPERS, Recipe
from gpuprobe.worker import patterns


@functools.cache
def dtype_helpers() -> str:
    """The source of ``dtype_run.build_inputs`` and its helpers."""
    from gpuprobe.worker.probes.dtype import run as dtype_run

    return "\n\n\n".join(
        [
            "# Copied from gpuprobe (gpuprobe/worker/probes/dtype/run.py and patterns.py): the\n"
            "# adversarial inputs of a conversion probe (every bit pattern or random ones, the\n"
            "# format's extremes, the target's boundaries, ties).\nimport math\nfrom typing import Any",
            _constants(patterns, "CHUNK"),
            _sources(patterns._s32, patterns._lsr, patterns.hash32),
            _constants(dtype_run, "FLOATS", "FP8", "NARROW", "INT_BITS", "_VIEW", "RANDOM_PATTERNS", "GRID_SAMPLES"),
            _sources(
                dtype_run._random_bits,
                dtype_run._float_info,
                dtype_run._target_boundaries,
                dtype_run._target_grid,
                dtype_run._float_source,
                dtype_run._int_source,
                dtype_run.build_inputs,
            ),
        ]
    )


def _convert(case: Case) -> Recipe:
    p = case.params
    src, dst, method, where = p["src"], p["dst"], p["method"], p["where"]
    if method == "to":
        call = "x.to(TO)"
    elif method == "type":
        call = "x.type(TO)"
    else:
        call = f"x.{method}()"
    c = {"from": src, "to": dst, "seed": case.derive("inputs")}
    if where == "device":
        build = "    x = inputs.to(device, copy=True)  # the inputs, on the device"
        what = f"{src} -> {dst} conversion on the device"
    else:
        build = "    x = inputs.to(device, copy=True).cpu()  # a round trip through the device, then the host converts"
        what = f"{src} -> {dst} conversion on the host after a device round trip"
    body = f'''\
CASES = [{c!r}]


def case_label(case):
    return f"{{case['from']}} -> {{case['to']}} with {call.replace('TO', f'torch.{dst}')!r}, inputs seed {{case['seed']}}"


def build(case, device):
    global TO
    TO = getattr(torch, case["to"])
    inputs = build_inputs(torch, case["from"], case["to"], case["seed"])
    expected = inputs.to(TO)  # the CPU's conversion of the same inputs
{build}
    return {{"inputs": inputs, "expected": expected, "x": x}}


def run_case(case, inputs, device):
    """The conversion under test."""
    x = inputs["x"]
    return {call}


def check(case, inputs, result):
    """Bit for bit against the CPU's conversion (NaN equals NaN, whatever its payload)."""
    if result.dtype != TO:
        print(f"  {{result.dtype}} returned, {{TO}} expected")
        return False
    return compare_bits(result.cpu(), inputs["expected"], nan_equal=True)
'''
    return Recipe(
        summary=(
            f"The {what} with `{call.replace('TO', f'torch.{dst}')}` of the probe's adversarial inputs "
            "(every bit pattern or random ones, the formats' extremes and boundaries, ties), compared bit "
            "for bit with the CPU."
        ),
        reference="the CPU's conversion of the same inputs (bit for bit, NaN equal to NaN)",
        tolerance="none: bit-exact",
        what=f"the {what} differs from the CPU's",
        helpers=dtype_helpers() + "\n\n\n" + BIT_EXACT_HELPERS,
        body=body,
    )
