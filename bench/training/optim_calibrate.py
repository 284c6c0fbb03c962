"""How close correct optimizer implementations come to the optim family's rounding bound.

Usage (from the repository root):

    python3 bench/training/optim_calibrate.py [--device cuda:0] [--dtypes fp32,bf16,fp16] [--only Adam,SGD]

For every optimizer of the family, dtype, configuration (``optim_run.CONFIGS``) and
implementation, steps the probe's parameter lists (the same seeds as the probe's) and prints
how much of the probe's bound each one used (module docstring of
``gpuprobe.worker.probes.optim.run``; the yardstick always included): ``ref``, the largest
error against float64 in units of the allowed error (1 is the bound); ``pair``, the same
against the device's own for-loop; ``state``, against the state bound. Every number must
stay well below 1, and a wrong step far above it (``tests/python/test_optim.py``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

import torch  # noqa: E402

from gpuprobe.worker.probes.optim import run as R  # noqa: E402
from gpuprobe.worker.probes.optim import specs as optim_specs  # noqa: E402


def used(found, ref, allowed) -> float:
    """The largest error in units of the allowed one (1 is the bound; exact elements, whose
    allowed error is 0, count as infinite when they differ)."""
    err = (found - ref).abs()
    if bool(((allowed == 0) & (err > 0)).any()) or bool((~torch.isfinite(err) & torch.isfinite(allowed)).any()):
        return math.inf
    judged = (allowed > 0) & torch.isfinite(allowed)
    return float((err[judged] / allowed[judged]).max()) if bool(judged.any()) else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtypes", default="fp32,bf16,fp16")
    parser.add_argument("--only", default="", help="comma-separated torch.optim class names")
    args = parser.parse_args()
    device = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None
    only = set(filter(None, args.only.split(",")))
    worst: dict[tuple[str, str, str], float] = {}
    started = time.time()
    for _name, class_name in optim_specs.OPTIMIZERS:
        cls = getattr(torch.optim, class_name, None)
        if cls is None or (only and class_name not in only):
            continue
        configs = R.configurations(torch, class_name, device.type)
        impls = R.implementations(cls)
        for dtype in args.dtypes.split(","):
            lists = [("stress", R.stress_list())] + ([("mixed", R.mixed_list())] if dtype == "fp32" else [])
            for list_name, specs in lists:
                param_set = R.make_param_set(torch, specs, R.DTYPES[dtype], 1234, R.STEPS)
                for config in configs:
                    ref_kwargs = dict(R.reference_kwargs(config.kwargs), foreach=False)
                    try:
                        ref = R.run_trajectory(
                            torch, cls, ref_kwargs, param_set, torch.device("cpu"), R.STEPS, float64=True
                        )
                    except Exception:  # noqa: BLE001 - an empty parameter the for-loop cannot take
                        param_set = R.without_empty(param_set)
                        ref = R.run_trajectory(
                            torch, cls, ref_kwargs, param_set, torch.device("cpu"), R.STEPS, float64=True
                        )
                    half = any(d in R.YARDSTICK_DTYPES for d in param_set.dtypes)
                    yardsticks = (
                        [
                            R.run_trajectory(
                                torch, cls, dict(ref_kwargs, foreach=f), param_set, torch.device("cpu"), R.STEPS
                            )
                            for f in ((False, True) if "foreach" in impls else (False,))
                        ]
                        if half
                        else []
                    )
                    bounds = R.Bounds(torch, param_set, ref, yardsticks=yardsticks)
                    forloop = None
                    for implementation in impls:
                        kwargs = dict(R._fresh_kwargs(config.kwargs), **R.implementation_flags(cls, implementation))
                        try:
                            found = R.run_trajectory(torch, cls, kwargs, param_set, device, R.STEPS, sync=sync)
                        except Exception as exc:  # noqa: BLE001
                            print(
                                f"{class_name:9s} {dtype} {list_name:6s} {implementation:8s} {config.name[:56]:56s} raised {type(exc).__name__}: {str(exc)[:100]}"
                            )
                            continue
                        c_ref = max(used(found.params[s], ref.params[s], bounds.allowed[s]) for s in range(R.STEPS))
                        c_pair = 0.0
                        if forloop is not None:
                            c_pair = max(
                                used(
                                    found.params[s],
                                    forloop[s],
                                    torch.where(torch.isfinite(forloop[s]), bounds.allowed[s], math.inf),
                                )
                                for s in range(R.STEPS)
                            )
                        if implementation == "forloop":
                            forloop = found.params
                        c_state = 0.0
                        for key, (values, indices, sizes) in ref.state.items():
                            if key not in found.state or found.state[key][1] != indices:
                                c_state = math.inf
                                continue
                            c_state = max(
                                c_state, used(found.state[key][0], values, bounds.state_allowed(key, R.STEPS))
                            )
                        steps_right = all(found.steps.get(k) == v for k, v in ref.steps.items())
                        key = (class_name, dtype, implementation)
                        worst[key] = max(worst.get(key, 0.0), c_ref, c_pair, c_state)
                        print(
                            f"{class_name:9s} {dtype} {list_name:6s} {implementation:8s} {config.name[:56]:56s} "
                            f"ref {c_ref:7.3f} pair {c_pair:7.3f} state {c_state:7.3f}{'' if steps_right else ' STEP COUNT WRONG'}",
                            flush=True,
                        )
    print(
        f"{time.time() - started:.1f} s; ROUNDING_FACTOR = {R.ROUNDING_FACTOR}, YARDSTICK_FACTOR = {R.YARDSTICK_FACTOR}"
    )
    for (class_name, dtype, implementation), value in sorted(worst.items(), key=lambda kv: -kv[1])[:25]:
        print(f"largest {class_name:9s} {dtype} {implementation:8s} {value:7.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
