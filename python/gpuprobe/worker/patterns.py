"""Deterministic inputs: seeds, non-periodic bit patterns and canaries.

Every random input of a probe derives from the plan's seed and the probe id, so a run is
reproducible from its seed. Large buffers are filled with an integer hash of the element index
(murmur3's 32-bit finalizer over ``i * K + seed``), which is cheap, never zero, never NaN or
Inf, and not periodic below 2^32 elements: a copy that reads element ``i - 2^31`` instead of
``i`` (an index-width bug) cannot return the right bits by accident.
"""

from __future__ import annotations

import zlib
from typing import Any

_MASK64 = (1 << 64) - 1

#: Elements hashed per step (bounds the temporaries for multi-GiB buffers).
CHUNK = 1 << 22


def derive_seed(plan_seed: int, probe_id: str, tag: str = "") -> int:
    """A 63-bit seed from the plan seed, the probe id and a tag (splitmix64 mixing of CRC32s;
    Python's ``hash()`` is randomized per process and is never used)."""
    crc = zlib.crc32(f"{probe_id}\x00{tag}".encode())
    x = (int(plan_seed) & _MASK64) ^ ((crc * 0x9E3779B97F4A7C15) & _MASK64)
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    x ^= x >> 31
    return x & ((1 << 63) - 1)


def _s32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _lsr(h: Any, shift: int) -> Any:
    """Logical right shift of an int32 tensor."""
    return (h >> shift) & ((1 << (32 - shift)) - 1)


def hash32(torch: Any, start: int, end: int, seed: int) -> Any:
    """Int32 tensor of murmur3-finalized hashes of the indices ``start..end``."""
    h = torch.arange(start, end, dtype=torch.int64).to(torch.int32)  # low 32 bits
    h.mul_(_s32(0x9E3779B1)).add_(_s32(seed))
    h.bitwise_xor_(_lsr(h, 16))
    h.mul_(_s32(0x85EBCA6B))
    h.bitwise_xor_(_lsr(h, 13))
    h.mul_(_s32(0xC2B2AE35))
    h.bitwise_xor_(_lsr(h, 16))
    return h


def _bits_for(torch: Any, h: Any, dtype_name: str) -> Any:
    if dtype_name == "float32":
        # sign and mantissa from the hash, exponent field 64..191: |x| in [2^-63, 2^65).
        return (h & _s32(0x807FFFFF)) | (((_lsr(h, 23) & 0x7F) + 64) << 23)
    if dtype_name == "float16":
        # exponent field 8..23: |x| in [2^-7, 2^9).
        bits = (_lsr(h, 16) & 0x8000) | (((_lsr(h, 10) & 0xF) + 8) << 10) | (h & 0x3FF)
        return bits.to(torch.int16)
    if dtype_name == "bfloat16":
        # exponent field 64..191, like float32.
        bits = (_lsr(h, 16) & 0x8000) | (((_lsr(h, 7) & 0x7F) + 64) << 7) | (h & 0x7F)
        return bits.to(torch.int16)
    if dtype_name == "int64":
        return (h.to(torch.int64) & 0xFFFFFFFF) | 1
    if dtype_name == "int32":
        return h | 1
    if dtype_name == "bool":
        return (h & 1).to(torch.uint8)
    raise ValueError(f"no pattern for dtype {dtype_name}")


_VIEW = {
    "float32": "int32",
    "float16": "int16",
    "bfloat16": "int16",
    "int64": "int64",
    "int32": "int32",
    "bool": "uint8",
}


def pattern(
    torch: Any,
    numel: int,
    dtype_name: str,
    seed: int,
    shape: tuple[int, ...] | None = None,
    out: Any = None,
) -> Any:
    """A CPU tensor of ``numel`` deterministic, finite, non-zero values (bool: mixed).

    ``out``, when given, is a contiguous CPU tensor of that dtype and size to fill (a pinned
    buffer, so multi-GiB probes need no second copy)."""
    dtype = getattr(torch, dtype_name)
    if out is None:
        out = torch.empty(numel, dtype=dtype)
    out = out.view(-1)
    bits_view = out.view(getattr(torch, _VIEW[dtype_name]))
    if numel <= BLOCK or dtype_name not in _SAFE_XOR:
        for start in range(0, numel, CHUNK):
            end = min(numel, start + CHUNK)
            bits_view[start:end] = _bits_for(torch, hash32(torch, start, end, seed), dtype_name)
    else:
        _fill_blocks(torch, bits_view, dtype_name, seed)
    return out.reshape(shape) if shape is not None else out


#: Elements per block of a large pattern.
BLOCK = 1 << 20

#: Bits that may be flipped in a pattern value without making it zero, NaN or Inf: sign and
#: mantissa (the exponent field of a pattern value is never 0 or all ones).
_SAFE_XOR = {"float32": 0x807FFFFF, "float16": 0x83FF, "bfloat16": 0x807F}


def _block_key(seed: int, block: int) -> int:
    return derive_seed(seed, "pattern-block", str(block))


def _fill_blocks(torch: Any, bits_view: Any, dtype_name: str, seed: int) -> None:
    """Large patterns: one hashed block of ``BLOCK`` values, then block k is that block rotated
    by r_k and XORed with a mask m_k on the sign and mantissa bits, (r_k, m_k) hashed from the
    seed and k. Two passes over memory instead of a dozen, every value still finite and
    non-zero, values distinct within a block, and two blocks alike only if both their hashed
    rotation and mask agree (2^-31 for 16-bit types, 2^-44 for float32): an index-width bug
    that reads block k - 2^31/BLOCK for block k is caught."""
    width = 32 if dtype_name == "float32" else 16
    base = _bits_for(torch, hash32(torch, 0, BLOCK, seed), dtype_name)
    numel = bits_view.numel()
    for block, start in enumerate(range(0, numel, BLOCK)):
        length = min(BLOCK, numel - start)
        key = _block_key(seed, block)
        rotation = key % BLOCK if block else 0
        mask = ((key >> 20) & _SAFE_XOR[dtype_name]) if block else 0
        if mask >= 1 << (width - 1):
            mask -= 1 << width
        first = min(length, BLOCK - rotation)
        torch.bitwise_xor(base[rotation : rotation + first], mask, out=bits_view[start : start + first])
        if length > first:
            torch.bitwise_xor(base[: length - first], mask, out=bits_view[start + first : start + length])


#: Canary bit patterns: finite, non-zero, and outside the range ``pattern`` produces, so an
#: element still holding the canary was certainly not written.
CANARY_BITS = {
    "float32": 0xE4A5A5A5,  # exponent 201: about -2.4e22
    "float16": 0xF2A5,  # exponent 28: -13608
    "bfloat16": 0xE4A5,  # exponent 201
    "int64": 0x5A5A5A5A5A5A5A5A,  # above 2^32
    "int32": 0x5A5A5A5A,
}


def canary_value(dtype_name: str) -> int | None:
    """The canary for ``dtype_name`` as a signed integer of its width, or None (bool)."""
    bits = CANARY_BITS.get(dtype_name)
    if bits is None:
        return None
    width = {"float32": 32, "float16": 16, "bfloat16": 16, "int64": 64, "int32": 32}[dtype_name]
    return bits - (1 << width) if bits >= 1 << (width - 1) else bits


def fill_canary(torch: Any, t: Any) -> Any:
    """Fills ``t`` (any device) with its dtype's canary, in place; returns ``t``."""
    dtype_name = str(t.dtype).replace("torch.", "")
    value = canary_value(dtype_name)
    if value is None:
        raise ValueError(f"no canary for {dtype_name}")
    t.view(getattr(torch, _VIEW[dtype_name])).fill_(value)
    return t
