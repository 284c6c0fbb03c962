#!/usr/bin/env python3
"""Where the exclusive allocator lane's seconds go on a GPU host: each step the four
exclusive allocator probes (`alloc.usable.chunks`, `alloc.largest.single`,
`alloc.fragmentation.cycles`, `alloc.oom.recovery.filled`; the full tier's since the
standard tier fills the device natively, first) take, timed alone in one
process, as `python/gpuprobe/worker/probes/alloc/run.py` does them: the collector pass and
cache release each probe starts and ends with, the chunked fill of the free memory, the
sampled tag read-back, the release of the filled device, the single near-full allocation.

usage: python3 bench/exclusive-costs.py [ROUNDS]   (prints one line per step: median seconds)
"""

from __future__ import annotations

import gc
import statistics
import sys
import time

import torch

GIB = 1 << 30
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
dev = torch.device("cuda", 0)
torch.zeros(1, device=dev)
timings: dict[str, list[float]] = {}


def timed(name, fn):
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize(dev)
    timings.setdefault(name, []).append(time.perf_counter() - t0)
    return out


def release():
    gc.collect()
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()


for _ in range(ROUNDS):
    timed("gc.collect (not frozen)", gc.collect)
    timed("release() with nothing cached", release)
    free, total = timed("mem_get_info", lambda: torch.cuda.mem_get_info(dev))
    target = free - min(4 * GIB, total // 20)
    blocks = []

    def fill():
        while (len(blocks) + 1) * GIB <= target:
            b = torch.empty(GIB, dtype=torch.uint8, device=dev)
            b.view(torch.int32).fill_(len(blocks) | 1)
            blocks.append(b)

    timed("fill free memory in 1 GiB chunks", fill)

    def sample():
        counts = []
        for i, b in enumerate(blocks):
            w = b.view(torch.int32)
            w = torch.cat([w[::4096], w[-1:]])
            wrong = w != (i | 1)
            counts.append(torch.stack([wrong.sum(), (wrong & (w == 0)).sum()]))
        return torch.stack(counts).cpu()

    timed("sampled tag read-back", sample)

    def drop():
        blocks.clear()
        release()

    timed("release the filled device (gc + empty_cache)", drop)

    def single():
        return torch.empty(free - 64 * (1 << 20), dtype=torch.uint8, device=dev)

    big = timed("one allocation of the free memory", single)

    def drop_big():
        global big
        del big
        release()

    timed("release it", drop_big)
    gc.freeze()
    timed("gc.collect (frozen)", gc.collect)
    gc.unfreeze()

for name, values in timings.items():
    print(f"{statistics.median(values):8.4f} s  {name}  ({', '.join(f'{v:.4f}' for v in values)})")
