"""Output digests (``gpuprobe.worker.digest``): which probes carry one, that a digest is
withheld whenever two runs on one device differ, and that the ``gemm-conv-lowbit`` preset
changes the digests of GEMM and convolution probes while every probe still passes."""

from __future__ import annotations

from typing import Any

import torch
from conftest import load_preset, run_plan
from judge_mirror import result_classes

from gpuprobe.worker import digest

PROBES = ["ops.matmul.fp16", "nn.conv2d.bf16", "ops.reduce.sum.fp32.rows1024", "copy.h2d.pageable.tiny.blocking"]


def _digests(run: Any) -> dict[str, dict[str, Any] | None]:
    return {p: r["observation"].get("output_digest") for p, r in run.results().items() if r["outcome"] == "observed"}


def test_the_digested_probes_are_forward_compute_of_the_quick_tier() -> None:
    assert digest.digested("ops.matmul.fp16", "quick")
    assert digest.digested("nn.conv2d.fp32", "quick")
    assert not digest.digested("nn.conv2d.fp32", "standard"), "a second run of every standard probe costs seconds"
    assert digest.digested("nn.sdpa.bf16.default.d64.s128", "quick")
    assert not digest.digested("nn.conv2d.fp16.bwd", "quick"), "backward kernels accumulate with atomics"
    assert not digest.digested("nn.sdpa.matrix.bf16.flash", "quick")
    assert not digest.digested("ops.matmul.fp32.large_m", "full"), "the full tier's cases are too large to run twice"
    assert not digest.digested("copy.h2d.pageable.tiny.blocking", "quick"), "copies are judged bit-exactly already"
    assert not digest.digested("rng.randn.fp32", "quick")


def test_a_digest_covers_dtype_shape_and_bits_and_is_withheld_when_two_runs_differ() -> None:
    def collected(*tensors: Any) -> digest.Collector:
        with digest.collecting() as c:
            for t in tensors:
                digest.record(torch, t)
        return c

    x = torch.arange(6, dtype=torch.float32)
    same, note = digest.judged(collected(x), collected(x.clone()), 7)
    assert note is None and same == {"value": same["value"], "seed": 7, "outputs": 1}
    assert len(same["value"]) == digest.DIGEST_HEX
    assert collected(x.reshape(2, 3)).hexdigest() != collected(x).hexdigest(), "the shape is hashed"
    assert collected(x.view(torch.int32)).hexdigest() != collected(x).hexdigest(), "the dtype is hashed"
    flipped = x.clone()
    flipped.view(torch.int32)[3] ^= 1
    record, note = digest.judged(collected(x), collected(flipped), 7)
    assert record is None and "differed between two runs" in note
    assert digest.judged(collected(), collected(), 7)[0] is None, "no output, no digest"
    assert digest.judged(collected(x), None, 7, "the second run raised RuntimeError")[1].endswith("RuntimeError")
    digest.record(torch, x)  # outside a collection: nothing happens
    big = torch.empty(digest.MAX_DIGEST_BYTES // 4 + 1, dtype=torch.float32)
    record, note = digest.judged(collected(big), None, 7)
    assert record is None and "exceed 64 MiB" in note, "too large to hash: no digest, no second run"


def test_lowbit_preset_passes_every_tolerance_and_changes_only_gemm_and_conv_digests() -> None:
    healthy = run_plan(PROBES)
    faulty = run_plan(PROBES, simulate=load_preset("gemm-conv-lowbit"))
    assert healthy.returncode == 0 and faulty.returncode == 0, faulty.stderr
    assert set(result_classes(faulty.results()).values()) == {"pass"}, result_classes(faulty.results())
    good, bad = _digests(healthy), _digests(faulty)
    assert good["copy.h2d.pageable.tiny.blocking"] is None
    for probe in ("ops.matmul.fp16", "nn.conv2d.bf16"):
        assert good[probe] is not None and bad[probe] is not None, probe
        assert good[probe]["value"] != bad[probe]["value"], probe
        assert good[probe]["seed"] == 1234
        assert good[probe]["cpu_threads"] >= 1, "a CPU digest names its thread count"
    assert good["ops.reduce.sum.fp32.rows1024"] == bad["ops.reduce.sum.fp32.rows1024"]


def test_outputs_that_differ_between_runs_carry_no_digest() -> None:
    # A bit flipped at an index that moves with every call: the two runs disagree.
    spec = {
        "source": "test:moving-bitflip",
        "fault": [{"name": "moving", "op": "matmul", "when": {"on_device": True}, "effect": {"kind": "bitflip"}}],
    }
    run = run_plan(["ops.matmul.fp16"], simulate=spec)
    observation = run.results()["ops.matmul.fp16"]["observation"]
    assert "output_digest" not in observation
    assert any("differed between two runs" in n for n in observation["notes"]), observation["notes"]
