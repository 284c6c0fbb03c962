"""Dtype family catalog: the conversion matrix, measured bit for bit.

Id grammar: ``dtype.<from>.<to>.<method>.<where>``

- from/to: ``fp32``, ``fp16``, ``bf16``, ``fp64``, ``int8``, ``int32``, ``int64``, ``bool``,
  ``fp8e4m3`` (``torch.float8_e4m3fn``), ``fp8e5m2`` (``torch.float8_e5m2``);
- method: ``to`` (``x.to(dtype)``), ``type`` (``x.type(dtype)``) or the shortcut where one
  exists (``float``, ``half``, ``bfloat16``, ``double``, ``char``, ``int``, ``long``, ``bool``);
- where: ``device`` (convert on the device under test, then copy back) or ``host`` (copy to
  the device and back, then convert on the host).

Every probe compares with the CPU conversion of the same input (rule ``bit_exact``; NaN
compares equal to NaN whatever its payload).
"""

from __future__ import annotations

from gpuprobe.worker.catalog import BIT_EXACT, ProbeDef
from gpuprobe.worker.ops import SHORTCUTS  # ops imports torch lazily: the catalog stays torch-free

#: Seconds one run of a probe typically takes on a warm machine, by the longest prefix of its
#: id listed (whole parts): the ``typical_s`` the catalog publishes for each of the
#: family's probes that sets none (lanes are sized by it; a probe no prefix matches counts
#: the engine's default, 0.1 s). Measured on the H200 host (torch 2.11: warm standard tier,
#: mean per probe of 18 runs with the other lanes beside it, leaving out a worker's first
#: probe, which also pays the device context; ``bench/typical-seconds.py`` and
#: bench/RESULTS.md "Lanes balanced by refreshed estimates"; the full tier's families from
#: its runs there); a whole id is listed where one probe takes several times its
#: sub-family's mean.
TYPICAL_SECONDS = {
    "dtype.bf16": 0.003,
    "dtype.bool": 0.001,
    "dtype.fp16": 0.003,
    "dtype.fp32": 0.002,
    "dtype.fp64": 0.002,
    "dtype.fp8e4m3": 0.001,
    "dtype.fp8e5m2": 0.001,
    "dtype.int32": 0.001,
    "dtype.int64": 0.002,
    "dtype.int8": 0.001,
}

_RUN = "gpuprobe.worker.probes.dtype.run"

#: Short id name → torch dtype name.
DTYPES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
    "int8": "int8",
    "int32": "int32",
    "int64": "int64",
    "bool": "bool",
    "fp8e4m3": "float8_e4m3fn",
    "fp8e5m2": "float8_e5m2",
}

#: The quick-tier matrix.
FLOATS = ("fp32", "fp16", "bf16", "fp64")


def methods_for(target: str) -> list[str]:
    """Conversion methods tested for a target dtype name."""
    methods = ["to", "type"]
    if target in SHORTCUTS:
        methods.append(SHORTCUTS[target])
    return methods


def _call_text(method: str, target: str) -> str:
    if method == "to":
        return f"x.to(torch.{target})"
    if method == "type":
        return f"x.type(torch.{target})"
    return f"x.{method}()"


def specs() -> list[ProbeDef]:
    """The dtype probes: the float matrix on the device in quick, everything else in standard."""
    quick: list[ProbeDef] = []
    standard: list[ProbeDef] = []
    for where in ("device", "host"):
        for src_short, src in DTYPES.items():
            for dst_short, dst in DTYPES.items():
                if src == dst:
                    continue
                in_quick = where == "device" and src_short in FLOATS and dst_short in FLOATS
                needs = ("fp8",) if "float8" in src or "float8" in dst else ()
                for method in methods_for(dst):
                    place = (
                        "on the device under test, then copied back"
                        if where == "device"
                        else "on the host after a round trip through the device"
                    )
                    probe = ProbeDef(
                        id=f"dtype.{src_short}.{dst_short}.{method}.{where}",
                        tier="quick" if in_quick else "standard",
                        rule=BIT_EXACT,
                        description=(
                            f"{src} -> {dst} via {_call_text(method, dst)} {place}; adversarial inputs "
                            "(zeros, subnormals, rounding ties, overflow, NaN/Inf where defined) compared "
                            "bit for bit with the CPU conversion"
                        ),
                        impl=f"{_RUN}:run_convert",
                        params={"src": src, "dst": dst, "method": method, "where": where},
                        timeout_s=60.0,
                        needs=needs,
                    )
                    (quick if in_quick else standard).append(probe)
    return quick + standard
