"""Every preset, run in a real worker on the CPU: the targeted probes show the expected
failure class, the rest pass, cures cure, and every output says it was simulated."""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path

import tomllib
from conftest import WorkerRun, load_preset, run_plan
from judge_mirror import result_classes

SDMA_OFF = {"HSA_ENABLE_SDMA": "0"}


def simulated_run(
    preset: str | dict,
    probes: list[str],
    *,
    env_extra: dict[str, str] | None = None,
    timeout: float = 180.0,
    idle_after_begin: float | None = None,
    stack_dump_before_kill: bool = False,
) -> WorkerRun:
    spec = load_preset(preset) if isinstance(preset, str) else preset
    run = run_plan(
        probes,
        simulate=spec,
        env_extra=env_extra,
        timeout=timeout,
        idle_after_begin=idle_after_begin,
        stack_dump_before_kill=stack_dump_before_kill,
    )
    assert run.hello["simulated"] is True
    for result in run.of("result"):
        if result["outcome"] == "observed":
            assert any(note.startswith("SIMULATED") for note in result["observation"]["notes"]), result["probe"]
    return run


def classes(run: WorkerRun) -> dict[str, str]:
    return result_classes(run.results())


def test_h2d_zeros_hits_small_pageable_copies_only() -> None:
    probes = [
        "copy.h2d.pageable.tiny.nonblocking",
        "copy.h2d.pageable.tiny.blocking",
        "copy.h2d.pinned.tiny.nonblocking",
        "copy.h2d.pageable.medium.blocking",
        "copy.batch.dict.pageable.blocking",
        "copy.d2h.pageable.tiny.blocking",
    ]
    run = simulated_run("h2d-zeros", probes)
    assert run.returncode == 0, run.stderr
    got = classes(run)
    assert got["copy.h2d.pageable.tiny.nonblocking"] == "all_zeros"
    tiny = run.measurement("copy.h2d.pageable.tiny.nonblocking")
    assert tiny["all_zero_trials"] == tiny["failed_trials"] == tiny["trials"] // 2  # every other copy
    assert got["copy.h2d.pageable.tiny.blocking"] == "all_zeros"
    assert got["copy.h2d.pinned.tiny.nonblocking"] == "skip"  # pinned memory needs a GPU
    assert got["copy.h2d.pageable.medium.blocking"] == "pass"
    assert got["copy.batch.dict.pageable.blocking"] == "all_zeros"  # its 0-dim scalar is 4 bytes
    assert got["copy.d2h.pageable.tiny.blocking"] == "pass"
    assert any(
        "h2d-small-pageable-zeros" in log["message"] and log["message"].endswith("active") for log in run.of("log")
    )


def test_h2d_zeros_is_cured_by_its_setting() -> None:
    run = simulated_run("h2d-zeros", ["copy.h2d.pageable.tiny.nonblocking"], env_extra=SDMA_OFF)
    assert classes(run)["copy.h2d.pageable.tiny.nonblocking"] == "pass"
    assert any("cured by HSA_ENABLE_SDMA=0" in log["message"] for log in run.of("log"))


def test_conversion_and_generator_presets_together() -> None:
    # Several presets at once (the supervisor may combine them): each hits only its targets.
    names = ["bf16-fp32-zeros", "fp16-convert-nan", "randn-zeros", "multinomial-fp16-zeros", "randperm-partial-zeros"]
    spec = {"source": "preset:" + "+".join(names), "fault": [f for n in names for f in load_preset(n)["fault"]]}
    probes = [
        "dtype.bf16.fp32.to.device",
        "dtype.bf16.fp32.float.device",
        "dtype.bf16.fp32.type.device",
        "dtype.bf16.fp32.float.host",
        "dtype.bf16.fp16.to.device",
        "dtype.fp16.fp32.to.device",
        "dtype.fp32.fp16.to.device",
        "dtype.fp32.fp16.half.host",
        "rng.randn.fp32",
        "rng.randn_like.bf16",
        "rng.repeat.randn",
        "rng.rand.fp32",
        "rng.multinomial.fp16",
        "rng.multinomial.fp32",
        "rng.randperm.2p20",
        "rng.repeat.randperm",
    ]
    # One of the two settings fp16-convert-nan needs together: not a cure on its own.
    run = simulated_run(spec, probes, env_extra={"AMD_SERIALIZE_KERNEL": "3"})
    assert run.returncode == 0, run.stderr
    got = classes(run)
    assert got == {
        # bf16-fp32-zeros: the device conversion, whatever the method; not the host one.
        "dtype.bf16.fp32.to.device": "all_zeros",
        "dtype.bf16.fp32.float.device": "all_zeros",
        "dtype.bf16.fp32.type.device": "all_zeros",
        "dtype.bf16.fp32.float.host": "pass",
        "dtype.bf16.fp16.to.device": "pass",
        "dtype.fp16.fp32.to.device": "pass",
        # fp16-convert-nan.
        "dtype.fp32.fp16.to.device": "nan_inf",
        "dtype.fp32.fp16.half.host": "pass",
        # randn-zeros; a repeat check sees two seeds give the same (zero) output.
        "rng.randn.fp32": "all_zeros",
        "rng.randn_like.bf16": "all_zeros",
        "rng.repeat.randn": "all_zeros",
        "rng.rand.fp32": "pass",
        # multinomial-fp16-zeros: every draw is category 0, of probability zero.
        "rng.multinomial.fp16": "all_zeros",
        "rng.multinomial.fp32": "pass",
        # randperm-partial-zeros: large n only.
        "rng.randperm.2p20": "partial_zeros",
        "rng.repeat.randperm": "pass",
    }
    assert run.measurement("rng.randn.fp32")["zeros"] == 1 << 20
    fp16 = run.measurement("rng.multinomial.fp16")
    assert fp16["violations"] == fp16["checked"] == fp16["zero_violations"]
    perm = run.measurement("rng.randperm.2p20")
    assert perm["violations"] == perm["zero_violations"] in ((1 << 20) // 4, (1 << 20) // 4 + 1)


def test_crash_aborts_the_worker_with_the_message() -> None:
    probes = ["copy.h2d.pageable.medium.blocking", "copy.roundtrip.pageable.large.blocking", "copy.d2d.medium.clone"]
    run = simulated_run("crash", probes)
    assert run.returncode == -signal.SIGABRT
    assert "Memory access fault by GPU node-1" in run.stderr
    assert "Page not present or supervisor privilege" in run.stderr
    assert classes(run) == {"copy.h2d.pageable.medium.blocking": "pass"}
    assert run.events[-1] == {"event": "begin", "probe": "copy.roundtrip.pageable.large.blocking", "device": "cpu"}
    assert not run.of("done")


def test_hang_never_returns_and_is_cured() -> None:
    probes = ["copy.d2h.pageable.medium.blocking", "copy.roundtrip.pageable.large.blocking"]
    run = simulated_run("hang", probes, timeout=60, idle_after_begin=6, stack_dump_before_kill=True)
    assert run.timed_out
    # SIGUSR1 made the worker print where it hung (and did not kill it by itself).
    assert "in hang" in run.stderr and "run_roundtrip" in run.stderr
    assert classes(run) == {"copy.d2h.pageable.medium.blocking": "pass"}
    assert run.events[-1]["event"] == "begin" and run.events[-1]["probe"] == probes[1]
    cured = simulated_run("hang", probes[1:], env_extra=SDMA_OFF)
    assert not cured.timed_out and cured.returncode == 0
    assert classes(cured) == {probes[1]: "pass"}


def test_copy_stale_leaves_destinations_unchanged() -> None:
    probes = [
        "copy.h2d.pageable.reuse.nonblocking",
        "copy.h2d.pageable.medium.blocking.copy_",
        "copy.h2d.pageable.medium.blocking",
    ]
    run = simulated_run("copy-stale", probes)
    got = classes(run)
    assert got["copy.h2d.pageable.reuse.nonblocking"] == "unchanged"
    reuse = run.measurement("copy.h2d.pageable.reuse.nonblocking")
    assert reuse["failed_trials"] == 8 and reuse["unchanged"] == reuse["mismatches"]
    assert got["copy.h2d.pageable.medium.blocking.copy_"] == "unchanged"  # the 17th copy_: hit again
    assert got["copy.h2d.pageable.medium.blocking"] == "pass"  # .to() is not copy_


def test_large_copy_bitflip_is_a_mismatch() -> None:
    probes = [
        "copy.h2d.pageable.medium.blocking",
        "copy.d2h.pageable.medium.blocking",
        "copy.h2d.pageable.tiny.blocking",
    ]
    run = simulated_run("large-copy-bitflip", probes)
    got = classes(run)
    assert got["copy.h2d.pageable.medium.blocking"] == "mismatch"
    assert run.measurement("copy.h2d.pageable.medium.blocking")["mismatches"] == 1
    assert got["copy.d2h.pageable.medium.blocking"] == "mismatch"
    assert got["copy.h2d.pageable.tiny.blocking"] == "pass"


def test_a_cure_with_a_side_effect() -> None:
    probes = ["copy.h2d.pageable.tiny.nonblocking", "copy.d2d.medium.clone"]
    plain = classes(simulated_run("h2d-zeros-cure-breaks-d2d", probes))
    assert plain == {"copy.h2d.pageable.tiny.nonblocking": "all_zeros", "copy.d2d.medium.clone": "pass"}
    cured = classes(simulated_run("h2d-zeros-cure-breaks-d2d", probes, env_extra=SDMA_OFF))
    assert cured == {"copy.h2d.pageable.tiny.nonblocking": "pass", "copy.d2d.medium.clone": "partial_zeros"}


def test_fp16_convert_nan_is_cured_by_both_settings_together() -> None:
    both = {"AMD_SERIALIZE_KERNEL": "3", "HIP_FORCE_DEV_KERNARG": "0"}
    run = simulated_run("fp16-convert-nan", ["dtype.fp32.fp16.to.device"], env_extra=both)
    assert classes(run) == {"dtype.fp32.fp16.to.device": "pass"}


def test_custom_toml_faults(tmp_path: Path) -> None:
    path = tmp_path / "custom.toml"
    path.write_text(
        textwrap.dedent(
            """
            description = "custom faults for a test"

            [[fault]]
            name = "bf16-convert-raises"
            description = "fp32 -> bf16 raises like a missing kernel"
            op = "convert"
            when = { dtypes = ["float32"], to_dtypes = ["bfloat16"] }
            effect = { kind = "exception", message = "HIP error: invalid device function" }

            [[fault]]
            name = "numpy-readback-nan"
            description = "t.cpu().numpy() returns NaN"
            op = "d2h"
            when = { methods = ["numpy"] }
            effect = { kind = "nan" }
            """
        )
    )
    with open(path, "rb") as handle:
        spec = {"source": str(path), "fault": tomllib.load(handle)["fault"]}
    probes = [
        "dtype.fp32.bf16.to.device",
        "copy.d2h.pageable.medium.blocking.numpy",
        "copy.d2h.pageable.medium.blocking",
    ]
    run = simulated_run(spec, probes)
    assert run.returncode == 0
    error = run.results()["dtype.fp32.bf16.to.device"]
    assert error["outcome"] == "error" and error["type"] == "RuntimeError"
    assert "invalid device function" in error["message"] and "Traceback" in error["traceback"]
    got = classes(run)
    assert got["copy.d2h.pageable.medium.blocking.numpy"] == "nan_inf"
    assert got["copy.d2h.pageable.medium.blocking"] == "pass"


def test_a_malformed_spec_is_refused() -> None:
    spec = {"source": "bad", "fault": [{"name": "x", "op": "h2d", "effect": {"kind": "zeros"}, "typo": True}]}
    run = run_plan(["copy.h2d.pageable.medium.blocking"], simulate=spec)
    assert run.returncode == 2
    assert run.hello["simulated"] is True
    assert any("unknown key" in log["message"] for log in run.of("log"))
    assert not run.of("begin")


def test_the_rust_validator_and_the_worker_know_the_same_ops_and_effects() -> None:
    """gpuprobe validates fault specs (crates/gpuprobe-runner/src/simulation.rs) before the
    worker applies them: an op or effect only one side knows would be refused there, or
    accepted there and then refused by the worker mid-run. Both read the one vocabulary,
    ``gpuprobe/worker/simulation.json`` (the binary embeds it): no list of names in Rust."""
    import json
    import re

    from conftest import PACKAGE_DIR, REPO

    from gpuprobe.worker import simulate

    rust = (REPO / "crates" / "gpuprobe-runner" / "src" / "simulation.rs").read_text(encoding="utf-8")
    production = rust.split("#[cfg(test)]", 1)[0]
    assert '"gpuprobe/worker/simulation.json"' in production
    assert not re.search(r"&\[&str\] = &\[", production), "the op and effect names live in simulation.json"
    assert not re.search(r'"(h2d|randn|zeros|bitflip)"', production), "the op and effect names live in simulation.json"

    vocabulary = json.loads((PACKAGE_DIR / "gpuprobe" / "worker" / "simulation.json").read_text(encoding="utf-8"))
    assert set(vocabulary) == {"ops", "effects"}
    assert frozenset(vocabulary["ops"]) == simulate.OPS and len(vocabulary["ops"]) == len(simulate.OPS)
    assert frozenset(vocabulary["effects"]) == simulate.EFFECTS
