"""The attention matrix's design: factor levels, the covering designs and the cases of each
``nn.sdpa.matrix.*`` probe. Pure Python, importable without torch (``nn_specs`` builds the
catalog from it; ``nn_run.run_sdpa_matrix`` runs the cases it lists).

A case is one ``scaled_dot_product_attention`` call (and, for the backward direction, one
backward pass) described by five factors:

- ``mask``: ``none``; ``causal`` (``is_causal=True``, top-left aligned as PyTorch documents it
  for q length ≠ kv length); ``bool`` (True: may attend); ``additive`` (a float mask added to
  the logits, ``-inf`` where a key is padded); ``additive_grad`` (the same mask requiring grad:
  the backward pass must return its gradient); ``additive_fp32`` (the same mask kept in
  float32 while q, k and v are fp16/bf16: PyTorch documents a float mask of the query's
  dtype, so a backend may refuse this one, with an error that names the dtype, but must
  never compute it wrong);
- ``length``: the query and key/value lengths: ≡ 1 mod 32 (33, 289), ≡ 64 mod 128 (192, 704),
  and q length ≠ kv length both ways (97 × 576, 320 × 33); the tails of every kernel tile;
- ``layout``: ``contiguous``; ``noncontig`` (q, k, v strided views of one packed projection
  output, permuted to (B, H, L, d) as models do); ``expand`` (k and v of one head expanded
  over the query heads: head stride 0); ``gqa`` (half as many k/v heads as query heads,
  ``enable_gqa=True``; query head h reads k/v head h // 2, ``repeat_interleave`` order);
- ``input``: ``random`` (standard normal); ``large`` (integer-valued q and k whose logits
  reach ±1e4, exactly computable in float32, finite in fp16 and bf16); ``negrow`` (a quarter
  of the query rows have every logit near −1e4: −10240 added to the row through the float
  mask, or through an exactly representable offset in q and k where there is no float mask);
  ``fullmask`` (query rows with no key to attend: a boolean row all False or a float row all
  ``-inf``; only with a boolean or float mask);
- ``direction``: ``forward`` (the output), ``backward`` (the output and the gradients of
  q, k, v and of a mask that requires grad) or ``backward_partial`` (one input alone requires
  grad: the mask where it can take a gradient, otherwise q; the backward kernels then run
  with some gradient buffers absent).

Covering rule: the full tier runs a pairwise design (every pair of levels of two factors,
among the pairs a case can have, appears in at least one case), built by a deterministic
greedy generator (``pairwise``); each (dtype, backend) runs the forward cases in one probe
and the backward cases (both backward levels) in another (``.bwd``), so the forward tolerance stays that of the
forward pass. The forward probes of the fused backends and of ``default`` add one long case
(2^16 + 1 keys), compared on sampled query rows. The standard tier runs ``CORE_CASES``, a
hand-picked subset that has every level of every factor but the longest length, on the
default backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: Factor levels, in the order the generator tries them.
MASKS = ("none", "causal", "bool", "additive", "additive_grad", "additive_fp32")
#: (name, query length, key/value length).
LENGTHS: tuple[tuple[str, int, int], ...] = (
    ("33", 33, 33),
    ("289", 289, 289),
    ("192", 192, 192),
    ("704", 704, 704),
    ("97x576", 97, 576),
    ("320x33", 320, 33),
)
LAYOUTS = ("contiguous", "noncontig", "expand", "gqa")
INPUTS = ("random", "large", "negrow", "fullmask")
DIRECTIONS = ("forward", "backward", "backward_partial")
#: The directions probes are split by: ``backward`` holds both backward levels.
PROBE_DIRECTIONS = ("forward", "backward")

#: The factors of the covering design, in order.
FACTORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("mask", MASKS),
    ("length", tuple(name for name, _, _ in LENGTHS)),
    ("layout", LAYOUTS),
    ("input", INPUTS),
    ("direction", DIRECTIONS),
)

#: Masks that can hold a fully masked query row (``is_causal`` never empties a row when it
#: is top-left aligned, and no mask has no row to empty).
MASKS_WITH_ROWS = ("bool", "additive", "additive_grad", "additive_fp32")
#: Masks given as a float tensor (negrow rows get their −1e4 through it).
FLOAT_MASKS = ("additive", "additive_grad", "additive_fp32")

#: Batch size and query heads of every case except the long one; k/v heads are the same,
#: half (``gqa``) or one expanded (``expand``).
BATCH = 2
HEADS = 4
#: Head dims, alternated over a probe's cases (64 and 128: every backend's common sizes).
HEAD_DIMS = (64, 128)

#: The long case (full tier, fused backends, forward): 2^16 + 1 keys and queries, one batch
#: element of 2 heads, compared on ``LONG_ROWS`` sampled query rows. The math backend is
#: left out: it materializes the L × S score matrix (2 × 2^32 floats, 34 GB here). As for
#: ``nn.sdpa.*.s65537``, the reference stays float64 on the host, for the sampled rows only
#: (256 × 65537 scores per head, about 1 s): a reference computed on the device under test
#: (float32 math there would be cheaper) would share the device's faults with the result it
#: judges, and the full float64 score matrix (34 GB) is out of reach.
LONG_LENGTH = ("65537", (1 << 16) + 1, (1 << 16) + 1)
LONG_ROWS = 256
LONG_BACKENDS = ("flash", "efficient", "cudnn", "default")

#: On a CPU device under test the lengths shrink to these (same residues: ≡ 1 mod 32 and
#: ≡ 64 mod 128), and the long case to 1025 keys; the metrics say so.
CPU_CAP_ODD = 97
CPU_CAP_EVEN = 192
CPU_LONG = 1025

#: The standard tier's cases (default backend, both dtypes): every mask, input, layout,
#: direction and length but 704 appears (704 × 704 is the costliest float64 reference, and
#: 192 already has its residue, ≡ 64 mod 128).
CORE_CASES: tuple[dict[str, Any], ...] = (
    {"mask": "causal", "length": "289", "layout": "noncontig", "input": "random", "direction": "forward"},
    {"mask": "bool", "length": "97x576", "layout": "expand", "input": "fullmask", "direction": "forward"},
    {"mask": "additive", "length": "192", "layout": "gqa", "input": "large", "direction": "forward"},
    {"mask": "none", "length": "33", "layout": "contiguous", "input": "negrow", "direction": "backward"},
    {"mask": "additive_grad", "length": "192", "layout": "contiguous", "input": "fullmask", "direction": "backward"},
    {"mask": "causal", "length": "320x33", "layout": "gqa", "input": "large", "direction": "backward"},
    {"mask": "additive_fp32", "length": "97x576", "layout": "noncontig", "input": "negrow", "direction": "forward"},
    {"mask": "additive_grad", "length": "33", "layout": "expand", "input": "random", "direction": "backward_partial"},
)

Assignment = dict[str, str]


def valid(assignment: Assignment) -> bool:
    """Whether a (partial) assignment of factor levels can be a case: fully masked rows need
    a mask that can hold them."""
    if assignment.get("input") == "fullmask" and "mask" in assignment:
        return assignment["mask"] in MASKS_WITH_ROWS
    return True


def required_pairs(
    factors: Sequence[tuple[str, Sequence[str]]] = FACTORS, is_valid: Callable[[Assignment], bool] = valid
) -> set[tuple[str, str, str, str]]:
    """Every pair of levels of two factors that some case can have, as
    (factor, level, other factor, other level) with the factors in ``factors`` order."""
    pairs: set[tuple[str, str, str, str]] = set()
    for i, (name_a, levels_a) in enumerate(factors):
        for name_b, levels_b in factors[i + 1 :]:
            for a in levels_a:
                for b in levels_b:
                    if is_valid({name_a: a, name_b: b}):
                        pairs.add((name_a, a, name_b, b))
    return pairs


def pairs_of(
    case: Assignment, factors: Sequence[tuple[str, Sequence[str]]] = FACTORS
) -> set[tuple[str, str, str, str]]:
    """The level pairs one case covers."""
    names = [name for name, _ in factors]
    return {
        (a, case[a], b, case[b]) for i, a in enumerate(names) for b in names[i + 1 :] if a in case and b in case
    }


def pairwise(
    factors: Sequence[tuple[str, Sequence[str]]] = FACTORS, is_valid: Callable[[Assignment], bool] = valid
) -> list[Assignment]:
    """A deterministic greedy pairwise covering design.

    Each new case starts from the first pair not yet covered (in factor and level order) and
    gives every other factor, in order, the level that covers the most uncovered pairs with
    the levels chosen so far; ties go to the level used least so far, then to the earlier
    level, which spreads levels evenly. Every case covers at least its starting pair, so the
    loop ends; no randomness, so the design is the same on every machine."""
    uncovered = required_pairs(factors, is_valid)
    order = [name for name, _ in factors]
    levels = dict(factors)
    ordered_pairs = sorted(
        uncovered,
        key=lambda p: (order.index(p[0]), levels[p[0]].index(p[1]), order.index(p[2]), levels[p[2]].index(p[3])),
    )
    used: dict[tuple[str, str], int] = {}
    cases: list[Assignment] = []
    while uncovered:
        seed = next(p for p in ordered_pairs if p in uncovered)
        case: Assignment = {seed[0]: seed[1], seed[2]: seed[3]}
        for name in order:
            if name in case:
                continue
            best: tuple[int, int, int] | None = None
            chosen = None
            for index, level in enumerate(levels[name]):
                trial = {**case, name: level}
                if not is_valid(trial):
                    continue
                gain = sum(1 for other, value in case.items() if _pair(order, other, value, name, level) in uncovered)
                score = (-gain, used.get((name, level), 0), index)
                if best is None or score < best:
                    best, chosen = score, level
            if chosen is None:
                raise ValueError(f"no valid level of {name!r} completes {case}")
            case[name] = chosen
        cases.append({name: case[name] for name in order})
        for name in order:
            used[(name, case[name])] = used.get((name, case[name]), 0) + 1
        uncovered -= pairs_of(case, factors)
    return cases


def _pair(order: list[str], a: str, va: str, b: str, vb: str) -> tuple[str, str, str, str]:
    return (a, va, b, vb) if order.index(a) < order.index(b) else (b, vb, a, va)


def probe_direction(direction: str) -> str:
    """The probe (``PROBE_DIRECTIONS``) that runs a case of this direction level."""
    return "forward" if direction == "forward" else "backward"


def differentiated(case: dict[str, Any]) -> tuple[str, ...]:
    """The inputs of a case that require grad, among ``q``, ``k``, ``v`` and ``mask``: none
    forward (but a mask that requires grad, which changes the forward kernel's choice),
    all of them ``backward``, one alone ``backward_partial``."""
    mask = ("mask",) if case["mask"] == "additive_grad" else ()
    direction = case["direction"]
    if direction == "forward":
        return mask
    if direction == "backward":
        return ("q", "k", "v", *mask)
    if direction == "backward_partial":
        return mask or ("q",)
    raise ValueError(f"unknown direction {direction!r}")


def lengths_of(name: str) -> tuple[int, int]:
    """(query length, key/value length) of a length level."""
    if name == LONG_LENGTH[0]:
        return LONG_LENGTH[1], LONG_LENGTH[2]
    for level, q_len, kv_len in LENGTHS:
        if level == name:
            return q_len, kv_len
    raise ValueError(f"unknown length level {name!r}")


def cpu_length(n: int) -> int:
    """The length a case runs at on a CPU device under test (same residue class)."""
    if n == LONG_LENGTH[1]:
        return CPU_LONG
    if n % 32 == 1:
        return min(n, CPU_CAP_ODD)
    if n % 128 == 64:
        return min(n, CPU_CAP_EVEN)
    return n


def case_name(case: dict[str, Any]) -> str:
    """A case's name in observations: ``fwd.causal.289.noncontig.random.d64``."""
    direction = {"forward": "fwd", "backward": "bwd", "backward_partial": "bwdpart"}[case["direction"]]
    name = f"{direction}.{case['mask']}.{case['length']}.{case['layout']}.{case['input']}.d{case['head_dim']}"
    return name + (".long" if case.get("sampled_rows") else "")


def _finish(cases: Sequence[Assignment]) -> list[dict[str, Any]]:
    """Adds head dims (alternating) and names."""
    out: list[dict[str, Any]] = []
    for index, case in enumerate(cases):
        full: dict[str, Any] = {**case, "head_dim": HEAD_DIMS[index % len(HEAD_DIMS)]}
        full["name"] = case_name(full)
        out.append(full)
    return out


def full_design() -> list[dict[str, Any]]:
    """The full tier's pairwise cases, both directions."""
    return pairwise()


def probe_cases(design: str, direction: str | None, backend: str) -> list[dict[str, Any]]:
    """The cases of one probe: ``design`` ``pairwise`` (full tier; ``direction`` selects the
    forward or backward half) or ``core`` (standard tier, both directions)."""
    if design == "core":
        return _finish(CORE_CASES)
    if design != "pairwise":
        raise ValueError(f"unknown design {design!r}")
    cases = _finish([c for c in full_design() if probe_direction(c["direction"]) == direction])
    if direction == "forward" and backend in LONG_BACKENDS:
        long_case: dict[str, Any] = {
            "mask": "none",
            "length": LONG_LENGTH[0],
            "layout": "noncontig",
            "input": "random",
            "direction": "forward",
            "head_dim": 64,
            "sampled_rows": LONG_ROWS,
        }
        long_case["name"] = case_name(long_case)
        cases.append(long_case)
    return cases
