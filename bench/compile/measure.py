"""Runs compile-family programs directly (no supervisor) and prints each one's outcome and
timings as JSON lines: for measuring compile vs run time and the family's wall time.

    python bench/compile/measure.py --dtypes fp32 --chunks 0-23 --procs 4 [--device cuda] [--out F]
    python bench/compile/measure.py --dtypes fp32,bf16 --keys cumsum,clamp [--passes values,inplace_view]

``--keys`` compiles one program of the named entries per dtype (instead of chunks);
``--passes`` limits the passes (default: each dtype's full-tier passes).

Each process runs its share of the programs in turn (like a lane); ``--cache DIR`` sets
the Inductor cache directory (default: a fresh temporary one, i.e. a cold run).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))


def _chunks(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def _worker(
    jobs: list[tuple[str, int | None]], device: str, cache: str, queue: object, keys: list[str] | None, passes: list[str] | None
) -> None:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    import torch

    from gpuprobe.worker.context import ProbeContext, SkipProbe
    from gpuprobe.worker.probes.compile import run as compile_run
    from gpuprobe.worker.probes.compile import specs as compile_specs

    for dtype, chunk in jobs:
        probe_id = f"compile.{'standard' if chunk is None else f'p{chunk:02d}'}.{dtype}"
        ctx = ProbeContext(torch, device, 1234, probe_id, {})
        started = time.monotonic()
        try:
            wanted = passes or list(compile_run.dtype_passes(dtype))
            if keys:
                out = compile_run.run_program(ctx, dtype, keys=keys, passes=wanted)
            elif chunk is None:
                out = compile_run.run_program(ctx, dtype, keys=list(compile_specs.STANDARD_KEYS), passes=list(compile_specs.STANDARD_PASSES))
            else:
                out = compile_run.run_program(ctx, dtype, chunk=chunk, passes=wanted)
            record = {"probe": probe_id, "measurement": out.measurement, "metrics": out.metrics, "notes": out.notes}
        except SkipProbe as exc:
            record = {"probe": probe_id, "skip": str(exc)}
        except Exception as exc:  # noqa: BLE001
            record = {"probe": probe_id, "error": f"{type(exc).__name__}: {exc}"}
        record["wall_s"] = round(time.monotonic() - started, 2)
        queue.put(record)  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtypes", default="fp32")
    parser.add_argument("--chunks", default="0-23", help="chunk numbers, or 'standard'")
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cache", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--keys", default="", help="comma-separated entries: one program of them per dtype")
    parser.add_argument("--passes", default="", help="comma-separated passes (default: the dtype's full-tier passes)")
    args = parser.parse_args()
    cache = args.cache or tempfile.mkdtemp(prefix="gpuprobe-inductor-")
    keys = [k for k in args.keys.split(",") if k] or None
    passes = [p for p in args.passes.split(",") if p] or None
    chunks: list[int | None] = [None] if args.chunks == "standard" or keys else list(_chunks(args.chunks))
    jobs = [(d, c) for d in args.dtypes.split(",") for c in chunks]
    shares = [jobs[i :: args.procs] for i in range(args.procs)]
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    started = time.monotonic()
    procs = [context.Process(target=_worker, args=(share, args.device, cache, queue, keys, passes)) for share in shares if share]
    for p in procs:
        p.start()
    out = open(args.out, "w") if args.out else None
    for _ in jobs:
        record = queue.get()
        line = json.dumps(record)
        print(line[:1500], flush=True)
        if out:
            out.write(line + "\n")
            out.flush()
    for p in procs:
        p.join()
    print(json.dumps({"total_wall_s": round(time.monotonic() - started, 1), "jobs": len(jobs), "procs": args.procs, "cache": cache}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
