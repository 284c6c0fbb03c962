#!/usr/bin/env python3
"""Overhead of gpuprobe's training guards on a training step of a small real model.

A small transformer language model in plain torch (token embedding, ``--layers`` pre-norm
encoder layers, a tied output head) trains on random token batches that are made on the
host and moved with ``.to(device, non_blocking=True)`` each step, as a DataLoader loop does.
Variants, each timed over ``--steps`` steps after ``--warmup``:

- ``baseline``: the step alone;
- ``tensors``: + ``guard.tensors(batch, host_copy=cpu_batch)`` on every batch (default
  sampling);
- ``tensors_no_host``: + ``guard.tensors(batch)`` (no host comparison);
- ``watch``: + ``guard.watch(model).step()`` after backward (default ``every``);
- ``both``: ``tensors`` and ``watch``.

Two timings per variant, because a guard's one synchronisation costs differently in each:
``synced`` waits for the GPU at the end of every step (``torch.cuda.synchronize``, as a loop
that logs ``loss.item()`` does) and reports the median and mean step; ``pipelined``
synchronises only around the whole run (the CPU may run ahead of the GPU, which a guard's
sync takes away) and reports the mean step. ``watch`` checks every N steps, so its cost shows
in the means, not in a median. The variants run in interleaved rounds so that clock drift
is shared. Prints one JSON document.

    python bench/guard-overhead.py                       # cuda, bf16 autocast
    python bench/guard-overhead.py --device cpu --steps 5   # smoke check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

from gpuprobe import guard  # noqa: E402

VARIANTS = ("baseline", "tensors", "tensors_no_host", "watch", "both")


class TinyLM(torch.nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(torch.randn(seq, dim) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(
            dim, heads, dim_feedforward=4 * dim, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(dim)
        self.mask = torch.nn.Transformer.generate_square_subsequent_mask(seq)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids) + self.pos[: input_ids.shape[1]]
        mask = self.mask.to(x.device)[: input_ids.shape[1], : input_ids.shape[1]]
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.norm(x) @ self.embed.weight.t()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per variant and mode")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 20; 2 on cpu)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds the steps are split into")
    parser.add_argument("--batch", type=int, default=None, help="sequences per batch (default 32; 2 on cpu)")
    parser.add_argument("--seq", type=int, default=None, help="tokens per sequence (default 1024; 32 on cpu)")
    parser.add_argument("--dim", type=int, default=None, help="model width (default 768; 64 on cpu)")
    parser.add_argument("--layers", type=int, default=None, help="encoder layers (default 12; 2 on cpu)")
    parser.add_argument("--vocab", type=int, default=None, help="vocabulary (default 32000; 1000 on cpu)")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16", help="autocast dtype on cuda")
    parser.add_argument("--every", type=int, default=guard.DEFAULT_EVERY, help="watch interval")
    parser.add_argument("--samples", type=int, default=guard.DEFAULT_SAMPLES, help="host-copy samples per tensor")
    args = parser.parse_args()
    small = args.device == "cpu"
    defaults = {"warmup": (20, 2), "batch": (32, 2), "seq": (1024, 32), "dim": (768, 64), "layers": (12, 2), "vocab": (32000, 1000)}
    for name, (big, tiny) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, tiny if small else big)
    return args


def main() -> int:
    args = parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    model = TinyLM(args.vocab, args.dim, args.layers, max(1, args.dim // 64), args.seq).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[args.dtype] if cuda else None
    scaler = torch.amp.GradScaler("cuda") if autocast_dtype is torch.float16 else None
    # Host batches made once (pinned on cuda, as a DataLoader with pin_memory gives them).
    generator = torch.Generator().manual_seed(1)
    host_batches = []
    for _ in range(4):
        tokens = torch.randint(1, args.vocab, (args.batch, args.seq + 1), generator=generator)
        batch = {"input_ids": tokens[:, :-1].contiguous(), "labels": tokens[:, 1:].contiguous()}
        host_batches.append({k: v.pin_memory() if cuda else v for k, v in batch.items()})
    watches = {v: guard.watch(model, every=args.every, grads=scaler is None) for v in ("watch", "both")}

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def step(variant: str, index: int) -> None:
        cpu_batch = host_batches[index % len(host_batches)]
        batch = {k: v.to(device, non_blocking=True) for k, v in cpu_batch.items()}
        if variant in ("tensors", "both"):
            guard.tensors(batch, where="after .to()", host_copy=cpu_batch, samples=args.samples)
        elif variant == "tensors_no_host":
            guard.tensors(batch, where="after .to()")
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            logits = model(batch["input_ids"])
            loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch["labels"].flatten())
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if variant in watches:
            watches[variant].step()
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for variant in VARIANTS:
        for i in range(args.warmup):
            step(variant, i)
    sync()
    synced = {v: [] for v in VARIANTS}
    pipelined = {v: [] for v in VARIANTS}
    per_round = max(1, -(-args.steps // max(1, args.rounds)))
    counter = 0
    for _ in range(max(1, args.rounds)):
        for variant in VARIANTS:
            for _ in range(per_round):
                sync()
                start = time.perf_counter()
                step(variant, counter)
                sync()
                synced[variant].append(time.perf_counter() - start)
                counter += 1
            sync()
            start = time.perf_counter()
            for _ in range(per_round):
                step(variant, counter)
                counter += 1
            sync()
            pipelined[variant].append((time.perf_counter() - start, per_round))

    def ms(seconds: float) -> float:
        return round(seconds * 1e3, 4)

    results = {}
    for variant in VARIANTS:
        total = sum(t for t, _ in pipelined[variant])
        count = sum(n for _, n in pipelined[variant])
        results[variant] = {
            "synced_median_ms": ms(statistics.median(synced[variant])),
            "synced_mean_ms": ms(statistics.fmean(synced[variant])),
            "pipelined_mean_ms": ms(total / count),
            "steps": len(synced[variant]) + count,
        }
    base = results["baseline"]
    for variant in VARIANTS[1:]:
        r = results[variant]
        for key in ("synced_median_ms", "synced_mean_ms", "pipelined_mean_ms"):
            r[key.replace("_ms", "_overhead_pct")] = round(100.0 * (r[key] - base[key]) / base[key], 3)
    report = {
        "benchmark": "guard-overhead",
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
        "model": {
            "kind": "transformer LM",
            "parameters": sum(p.numel() for p in model.parameters()),
            "dim": args.dim,
            "layers": args.layers,
            "vocab": args.vocab,
            "batch": args.batch,
            "seq": args.seq,
            "autocast": args.dtype if autocast_dtype is not None else "none",
        },
        "guard": {"samples": args.samples, "watch_every": args.every, "watch_checks": watches["watch"].checks},
        "steps_per_variant_and_mode": per_round * max(1, args.rounds),
        "warmup": args.warmup,
        "results": results,
        "target_pct": 2.0,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
