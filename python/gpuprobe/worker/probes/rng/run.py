"""RNG family implementation (see ``rng_specs`` for the catalog).

Samples are drawn on the device under test from a generator seeded from the plan seed and the
probe id, read back, and summarized on the CPU in float64. The judge compares the summary with
the analytic distribution, never with CPU samples.
"""

from __future__ import annotations

from typing import Any

from gpuprobe.worker import ops
from gpuprobe.worker.compare import bits_of
from gpuprobe.worker.context import ProbeContext, ProbeOutput
from gpuprobe.worker.patterns import hash32
from gpuprobe.worker.stats import sample_stats

#: Fixed points above which a permutation counts as not shuffled. A uniform random
#: permutation has Poisson(1) fixed points: P(more than 30) < 1e-33.
MAX_FIXED_POINTS = 30

MULTINOMIAL_CATEGORIES = 1000
MULTINOMIAL_ROWS = 32


def run_sampled(
    ctx: ProbeContext,
    *,
    op: str,
    dtype: str,
    shape: list[int],
    low: int | None = None,
    high: int | None = None,
) -> ProbeOutput:
    """Draws from ``op`` and reports ``SampleStats`` against its target distribution."""
    torch = ctx.torch
    torch_dtype = getattr(torch, dtype)
    seed = ctx.derive_seed("generator")
    metrics: dict[str, Any] = {"op": op, "dtype": dtype, "shape": "x".join(str(d) for d in shape), "seed": seed}
    if op == "randn":
        samples = ops.randn(shape, dtype=torch_dtype, device=ctx.device, generator=ctx.device_generator(seed))
        distribution = {"kind": "normal", "mean": 0.0, "std": 1.0}
    elif op == "randn_like":
        like = torch.ones(shape, dtype=torch_dtype, device=ctx.device)
        # randn_like draws from the device's default generator: seed that one.
        torch.manual_seed(seed)
        samples = ops.randn_like(like)
        distribution = {"kind": "normal", "mean": 0.0, "std": 1.0}
        metrics["generator"] = "default"
    elif op == "rand":
        samples = ops.rand(shape, dtype=torch_dtype, device=ctx.device, generator=ctx.device_generator(seed))
        distribution = {"kind": "uniform", "low": 0.0, "high": 1.0}
    elif op == "randint":
        if low is None or high is None:
            raise ValueError("randint needs low and high")
        samples = ops.randint(
            low, high, shape, dtype=torch_dtype, device=ctx.device, generator=ctx.device_generator(seed)
        )
        distribution = {"kind": "uniform_int", "low": int(low), "high": int(high)}
    else:
        raise ValueError(f"unknown sampled op {op!r}")
    host = ops.readback(samples)
    if tuple(host.shape) != tuple(shape) or host.dtype != torch_dtype:
        raise RuntimeError(f"{op} returned shape {tuple(host.shape)} {host.dtype}, asked {tuple(shape)} {torch_dtype}")
    return ProbeOutput(sample_stats(torch, host, distribution, dtype), metrics)


def run_randperm(ctx: ProbeContext, *, n: int) -> ProbeOutput:
    """Checks that ``randperm(n)`` is a permutation of 0..n-1 and is shuffled.

    An element violates the property when its value is out of range or occurs more than once
    (every copy counts), so an all-zero output has ``n`` violations, all of them zeros, and a
    partly zeroed one has exactly its zeros as violations."""
    torch = ctx.torch
    perm = ops.randperm(n, device=ctx.device, generator=ctx.device_generator(ctx.derive_seed("generator")))
    host = ops.readback(perm).to(torch.int64).reshape(-1)
    in_range = (host >= 0) & (host < n)
    out_of_range = int((~in_range).sum())
    counts = torch.bincount(host[in_range], minlength=n)
    repeated = counts > 1
    duplicated_elements = int(counts[repeated].sum())
    zero_violations = int(counts[0]) if bool(repeated[0]) else 0
    fixed_points = int((host == torch.arange(host.numel(), dtype=torch.int64)).sum())
    violations = out_of_range + duplicated_elements
    examples = []
    if host.numel() != n:
        examples.append(f"{host.numel()} values for n={n}")
    if out_of_range:
        bad = host[~in_range][0].item()
        examples.append(f"{out_of_range} values outside 0..{n - 1} (e.g. {bad})")
    if duplicated_elements:
        value = int(repeated.nonzero()[0, 0])
        examples.append(
            f"{int(repeated.sum())} values occur more than once ({duplicated_elements} elements; "
            f"e.g. {value} appears {int(counts[value])} times)"
        )
    if fixed_points > MAX_FIXED_POINTS:
        violations += fixed_points
        examples.append(f"{fixed_points} fixed points (expected about 1): not shuffled")
    check: dict[str, Any] = {
        "kind": "invariant",
        "property": f"is a permutation of 0..n-1 with at most {MAX_FIXED_POINTS} fixed points",
        "checked": int(host.numel()),
        "violations": violations,
        "zero_violations": zero_violations,
    }
    if examples:
        check["example"] = "; ".join(examples)
    metrics = {"n": n, "fixed_points": fixed_points, "dtype": str(perm.dtype).replace("torch.", "")}
    return ProbeOutput(check, metrics)


def _category_weights(ctx: ProbeContext) -> tuple[Any, Any]:
    """Unnormalized weights 1..100 (exact in every float dtype), zero for every 7th category
    (category 0 included, so an all-zero draw is a violation)."""
    torch = ctx.torch
    k = MULTINOMIAL_CATEGORIES
    weights = (hash32(torch, 0, k, ctx.derive_seed("weights") & 0xFFFFFFFF) & 0x7FFFFFFF) % 100 + 1
    zero = torch.arange(k) % 7 == 0
    weights = torch.where(zero, torch.zeros_like(weights), weights).to(torch.float32)
    return weights, zero


def run_multinomial(ctx: ProbeContext, *, dtype: str, replacement: bool) -> ProbeOutput:
    """Draws categories and checks range, zero-probability categories and (without
    replacement) distinctness."""
    torch = ctx.torch
    weights, zero = _category_weights(ctx)
    rows = MULTINOMIAL_ROWS
    num_samples = 2048 if replacement else 100
    probs = ops.stage(weights.to(getattr(torch, dtype)).expand(rows, -1).contiguous(), ctx.device)
    draws = ops.multinomial(
        probs, num_samples, replacement=replacement, generator=ctx.device_generator(ctx.derive_seed("generator"))
    )
    host = ops.readback(draws).to(torch.int64)
    checked = host.numel()
    in_range = (host >= 0) & (host < MULTINOMIAL_CATEGORIES)
    out_of_range = int((~in_range).sum())
    hit_zero = int(zero[host[in_range]].sum())
    violations = out_of_range + hit_zero
    examples = []
    if tuple(host.shape) != (rows, num_samples):
        examples.append(f"shape {tuple(host.shape)}, expected {(rows, num_samples)}")
    if out_of_range:
        examples.append(f"{out_of_range} draws outside 0..{MULTINOMIAL_CATEGORIES - 1}")
    if hit_zero:
        bad = int(host[in_range][zero[host[in_range]]][0])
        examples.append(f"{hit_zero} draws of zero-probability categories (e.g. {bad})")
    if not replacement and host.dim() == 2:
        # Repeats among otherwise valid draws (an invalid draw is counted once, above).
        valid = torch.where(in_range, host, torch.full_like(host, -1))
        valid = torch.where(zero[valid.clamp(min=0)] & in_range, torch.full_like(host, -1), valid)
        ordered = torch.sort(valid, dim=1).values
        repeats = int(((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).sum())
        violations += repeats
        if repeats:
            examples.append(f"{repeats} repeated draws within rows (drawn without replacement)")
    check: dict[str, Any] = {
        "kind": "invariant",
        "property": "draws in range, never of a zero-probability category"
        + ("" if replacement else ", distinct within each row"),
        "checked": checked,
        "violations": violations,
        "zero_violations": int((host == 0).sum()),
    }
    if examples:
        check["example"] = "; ".join(examples)
    metrics = {
        "dtype": dtype,
        "categories": MULTINOMIAL_CATEGORIES,
        "zero_probability_categories": int(zero.sum()),
        "rows": rows,
        "samples_per_row": num_samples,
        "replacement": replacement,
        "distinct_categories_drawn": int(torch.unique(host).numel()),
    }
    return ProbeOutput(check, metrics)


def _draw(ctx: ProbeContext, op: str, n: int, seed: int) -> Any:
    torch = ctx.torch
    generator = ctx.device_generator(seed)
    if op == "randn":
        out = ops.randn([n], dtype=torch.float32, device=ctx.device, generator=generator)
    elif op == "rand":
        out = ops.rand([n], dtype=torch.float32, device=ctx.device, generator=generator)
    elif op == "randint":
        out = ops.randint(0, 1 << 20, [n], dtype=torch.int64, device=ctx.device, generator=generator)
    elif op == "randperm":
        out = ops.randperm(n, device=ctx.device, generator=generator)
    elif op == "multinomial":
        weights, _ = _category_weights(ctx)
        rows = 16
        probs = ops.stage(weights.expand(rows, -1).contiguous(), ctx.device)
        out = ops.multinomial(probs, max(1, n // rows), replacement=True, generator=generator)
    else:
        raise ValueError(f"unknown op {op!r}")
    return ops.readback(out).reshape(-1)


def run_repeat(ctx: ProbeContext, *, op: str, n: int) -> ProbeOutput:
    """Two draws with one seed must be bit-identical; a draw with another seed must differ."""
    torch = ctx.torch
    seed = ctx.derive_seed("generator")
    first = _draw(ctx, op, n, seed)
    second = _draw(ctx, op, n, seed)
    other = _draw(ctx, op, n, (seed + 1) % (1 << 63))
    examples = []
    if first.numel() != second.numel():
        differing = max(first.numel(), second.numel())
        examples.append(f"sizes differ: {first.numel()} and {second.numel()}")
    else:
        differing = int((bits_of(torch, first) != bits_of(torch, second)).sum())
        if differing:
            index = int((bits_of(torch, first) != bits_of(torch, second)).nonzero()[0, 0])
            examples.append(f"{differing} elements differ between two runs with one seed (first at {index})")
    violations = differing
    zero_violations = 0
    if first.numel() == other.numel() and torch.equal(bits_of(torch, first), bits_of(torch, other)):
        # The output ignores the seed: every element failed to vary.
        violations += int(first.numel())
        zero_violations = int((first == 0).sum())
        all_zero = zero_violations == first.numel()
        examples.append("another seed gave identical output" + (" (all zeros)" if all_zero else ""))
    check: dict[str, Any] = {
        "kind": "invariant",
        "property": "same seed repeats bit for bit; another seed differs",
        "checked": int(first.numel()),
        "violations": violations,
        "zero_violations": zero_violations,
    }
    if examples:
        check["example"] = "; ".join(examples)
    metrics = {"op": op, "n": int(first.numel()), "draws": 3}
    return ProbeOutput(check, metrics)
