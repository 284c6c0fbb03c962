"""The alloc, pipeline, dist, soak and fault families.

On the CPU: with no fault every probe passes or skips with a reason; under each simulation
preset of these families the targeted probes fail with the expected class (or hang, or
error) and the others pass; the soak probe tells the phase of a failure; the deliberate faults
are explicit-only and behave as documented where they can run on a CPU.

Tests marked ``gpu`` need a GPU visible to torch and are skipped otherwise: they run the
deliberate faults for real and check that the next probe still passes on the same GPU, and
run the families with zero false alarms.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import SHARED_SEED, WorkerRun, load_preset, run_plan, run_worker
from gpuprobe.worker.context import ProbeContext
from gpuprobe.worker.probes import children
from gpuprobe.worker.probes.alloc import run as alloc_run
from gpuprobe.worker.probes.dist import run as dist_run
from gpuprobe.worker.probes.soak import run as soak_run
from judge_mirror import classify

torch = pytest.importorskip("torch")

FAMILIES = ("alloc", "pipeline", "dist", "soak", "fault")
#: Why a probe of these families may skip on a CPU-only machine.
CPU_SKIPS = ("needs a GPU device under test", "needs at least 2 GPUs")


def verdict(result: dict[str, Any]) -> str:
    """pass / a failure class for observations (measure rules always pass), else the outcome."""
    if result["outcome"] != "observed":
        return result["outcome"]
    measurement = result["observation"]["measurement"]
    if measurement["kind"] == "metrics":
        return "pass"
    return classify(measurement)


def verdicts(run: WorkerRun) -> dict[str, str]:
    return {probe: verdict(result) for probe, result in run.results().items()}


def metrics(run: WorkerRun, probe: str) -> dict[str, Any]:
    result = run.results()[probe]
    assert result["outcome"] == "observed", result
    return result["observation"]["metrics"]


def simulated(preset: str, probes: list[str], **kwargs: Any) -> WorkerRun:
    run = run_plan(probes, simulate=load_preset(preset), **kwargs)
    assert run.hello["simulated"] is True
    for result in run.of("result"):
        if result["outcome"] == "observed":
            assert any(note.startswith("SIMULATED") for note in result["observation"]["notes"]), result["probe"]
    return run


def run_with_options(probes: list[str], options: dict[str, Any], *, simulate: dict | None = None) -> WorkerRun:
    plan: dict[str, Any] = {"protocol": 1, "mode": "run", "device": "cpu", "probes": probes, "seed": 77}
    plan["options"] = options
    if simulate is not None:
        plan["simulate"] = simulate
    return run_worker(plan, timeout=240)


# -- the catalog ---------------------------------------------------------------------------------


def test_catalog_tiers_layers_and_needs(catalog_specs: list[dict]) -> None:
    specs = {s["id"]: s for s in catalog_specs if s["id"].split(".")[0] in FAMILIES}
    by_family: dict[str, list[dict]] = {}
    for spec in specs.values():
        by_family.setdefault(spec["id"].split(".")[0], []).append(spec)
    assert set(by_family) == set(FAMILIES)
    # quick stays quick: one cheap probe each from alloc and pipeline.
    assert sorted(i for i, s in specs.items() if s["tier"] == "quick") == [
        "alloc.oom.recovery",
        "pipeline.dataloader.w0",
    ]
    for family in ("alloc", "pipeline", "dist"):
        assert any(s["tier"] == "standard" for s in by_family[family]), family
        assert all(s["tier"] != "soak" for s in by_family[family]), family
    # The sustained-load probe belongs to the soak tier; deliberate faults run only when named.
    for spec in by_family["soak"]:
        assert spec["tier"] == "soak" and "explicit" not in spec.get("needs", []), spec
        assert spec["placement"] == "exclusive", spec
    for spec in by_family["fault"]:
        assert spec["needs"] == ["explicit"] and spec["tier"] == "soak", spec
    assert {s["id"] for s in by_family["fault"]} == {
        "fault.recovery.roundtrip",
        "fault.illegal_address.index",
        "fault.hang.kernel",
        "fault.oom.huge",
        "fault.signal.kill",
        "fault.signal.segv",
        "fault.signal.abort",
    }
    # The round trip checks the device after the faults, so it comes last in catalog order.
    assert [s["id"] for s in catalog_specs if s["id"].startswith("fault.")][-1] == "fault.recovery.roundtrip"
    assert specs["fault.hang.kernel"]["timeout_s"] <= 10
    assert all(s["layer"] == "pipeline" for s in by_family["pipeline"])
    assert all(s["layer"] == "framework" for f in ("alloc", "dist", "soak", "fault") for s in by_family[f])
    assert all(s.get("isolated") for s in specs.values() if s["tier"] == "full")
    assert [i for i, s in specs.items() if s["rule"]["kind"] == "measure"] == ["alloc.config.effective"]
    assert specs["dist.p2p.pairs"]["needs"] == ["multi_gpu"]
    for collective in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        assert f"dist.{collective}.rank_tagged" in specs


# -- no fault on the CPU ---------------------------------------------------------------------------


def test_every_new_probe_passes_or_skips_with_a_reason(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, specs = quick_and_standard
    results = run.results()
    mine = [s["id"] for s in specs if s["id"].split(".")[0] in FAMILIES]
    assert len(mine) >= 20
    for probe in mine:
        result = results[probe]
        if result["outcome"] == "skip":
            assert any(reason in result["reason"] for reason in CPU_SKIPS), (probe, result["reason"])
        else:
            assert verdict(result) == "pass", (probe, result)
    skipped = {p for p in mine if results[p]["outcome"] == "skip"}
    # What a CPU cannot offer, and nothing else.
    assert skipped == {
        "alloc.stream.free_reuse",
        "pipeline.dataloader.w0.pinned",
        "pipeline.dataloader.w2.fork.pinned",
        "pipeline.dataloader.w2.spawn.pinned",
        "dist.p2p.pairs",
    }


def test_cpu_facts_of_the_alloc_probes(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, _ = quick_and_standard
    oom = metrics(run, "alloc.oom.recovery")
    assert oom["oom_raised"] is True and oom["requested_bytes"] == 1 << 62
    config = metrics(run, "alloc.config.effective")
    # Measured in a child with all three variables set to different values.
    assert config["first_variable_read"] in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
    assert config["precedence_settings_seen"].startswith("max_split_size_mb:20")
    # The probes that fill the device are the full tier's (the standard tier fills it
    # natively, before the framework's workers start): run here on their own.
    filling = ["alloc.usable.chunks", "alloc.largest.single", "alloc.fragmentation.cycles", "alloc.oom.recovery.filled"]
    full = run_plan(filling, seed=SHARED_SEED, timeout=300)
    assert full.returncode == 0, full.stderr[-3000:]
    assert verdicts(full) == dict.fromkeys(filling, "pass")
    usable = metrics(full, "alloc.usable.chunks")
    assert usable["allocated_bytes"] == usable["target_bytes"] > 0
    largest = full.results()["alloc.largest.single"]["observation"]["measurement"]
    assert largest["checked"] >= 3 and largest["violations"] == 0
    frag = metrics(full, "alloc.fragmentation.cycles")
    assert frag["allocations"] == 8 * 160 and frag["live_blocks"] > 0
    # The three probes that need fresh processes started theirs together, from the first.
    assert config["children_started_by"] == "alloc.config.effective"
    for probe in ("alloc.caching.disabled", "alloc.expandable.h2d"):
        assert metrics(run, probe)["child_started_by"] == "alloc.config.effective", probe


def test_cpu_facts_of_the_pipeline_and_dist_probes(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, _ = quick_and_standard
    for probe, start in (("pipeline.dataloader.w2.fork", "fork"), ("pipeline.dataloader.w0", "main")):
        loader = metrics(run, probe)
        assert loader["start_method"] == start and loader["batches"] == 4
        assert loader["loader_failed_tensors"] == loader["device_failed_tensors"] == 0
        # 4 batches x 5 fields, compared as they arrive and after the move.
        assert run.measurement(probe)["trials"] == 40
    placed = metrics(run, "pipeline.accelerate.prepare.placed")
    assert placed["accelerator_device"] == "cpu" and placed["misplaced_tensors"] == 0
    saved = metrics(run, "pipeline.save.safetensors.bf16")
    assert saved["file_bytes"] > saved["bytes"]
    gather = metrics(run, "dist.all_gather.rank_tagged")
    assert gather["backend"] == "gloo" and gather["world_size"] == 2
    shared = [metrics(run, f"dist.{c}.rank_tagged")["shared_run"] for c in ("all_reduce", "all_gather", "broadcast")]
    assert shared == [False, True, True]  # one process-group run serves all the collective probes


def test_allocator_config_strings_keep_bracketed_lists() -> None:
    conf = "expandable_segments:True, roundup_power2_divisions:[256:1,512:2,>:4],max_split_size_mb:128"
    assert alloc_run.split_conf(conf) == {
        "expandable_segments": "True",
        "roundup_power2_divisions": "[256:1,512:2,>:4]",
        "max_split_size_mb": "128",
    }
    assert alloc_run.split_conf("") == {}


def test_apu_memory_facts_come_from_the_card_with_the_gpus_pci_address(tmp_path: Path) -> None:
    def card(name: str, pci: str, vram: int, gtt: int) -> None:
        device = tmp_path / "devices" / pci
        device.mkdir(parents=True)
        (device / "mem_info_vram_total").write_text(f"{vram}\n")
        (device / "mem_info_gtt_total").write_text(f"{gtt}\n")
        (device / "mem_info_gtt_used").write_text("4096\n")
        (tmp_path / "drm" / name).mkdir(parents=True)
        os.symlink(device, tmp_path / "drm" / name / "device")

    card("card0", "0000:03:00.0", 24 << 30, 31 << 30)
    card("card1", "0000:c1:00.0", 512 << 20, 96 << 30)  # an APU: small carve-out, large GTT
    (tmp_path / "drm" / "card1-eDP-1").mkdir()
    (tmp_path / "pages_limit").write_text("25165824\n")
    apu = SimpleNamespace(pci_bus_id=0xC1, pci_device_id=0, pci_domain_id=0)
    facts = alloc_run.amdgpu_memory_facts(apu, str(tmp_path / "drm"), str(tmp_path / "pages_limit"))
    assert facts == {
        "ttm_pages_limit_bytes": 25165824 * 4096,
        "sysfs_vram_total_bytes": 512 << 20,
        "sysfs_gtt_total_bytes": 96 << 30,
        "sysfs_gtt_used_bytes": 4096,
        "sysfs_device": "0000:c1:00.0",
    }
    # Two cards and no PCI address to tell them apart: no guess.
    unknown = alloc_run.amdgpu_memory_facts(SimpleNamespace(), str(tmp_path / "drm"), str(tmp_path / "none"))
    assert unknown == {}


def test_a_failing_rank_ends_the_process_group_run_with_its_error() -> None:
    ctx = ProbeContext(torch, "cpu", 1, "dist.all_reduce.rank_tagged")
    with pytest.raises(children.ChildFailed, match=r"rank [01] of 2 \(bogus\): .*bogus"):
        dist_run._process_group_run(ctx, "bogus", ["cpu", "cpu"], 5)
    # The failure is kept: the other collective probes of this worker report it at once.
    with pytest.raises(RuntimeError, match="shared run of the collectives"):
        dist_run._process_group_run(ctx, "bogus", ["cpu", "cpu"], 5)
    dist_run._RUNS.clear()


# -- simulation presets ----------------------------------------------------------------------------


def test_dataloader_workers_zeros_hits_only_worker_batches() -> None:
    probes = ["pipeline.dataloader.w0", "pipeline.dataloader.w2.fork"]
    run = simulated("dataloader-workers-zeros", probes)
    assert run.returncode == 0, run.stderr[-2000:]
    assert verdicts(run) == {"pipeline.dataloader.w0": "pass", "pipeline.dataloader.w2.fork": "all_zeros"}
    broken = metrics(run, "pipeline.dataloader.w2.fork")
    # Lost at the loader stage already (every tensor of every batch), and still wrong on the device.
    assert broken["loader_failed_tensors"] == broken["device_failed_tensors"] == 20


def test_accelerate_prepare_zeros_spares_the_plain_loader() -> None:
    probes = ["pipeline.dataloader.w0", "pipeline.accelerate.prepare.placed", "pipeline.accelerate.prepare.unplaced"]
    run = simulated("accelerate-prepare-zeros", probes)
    got = verdicts(run)
    assert got["pipeline.dataloader.w0"] == "pass"
    assert got["pipeline.accelerate.prepare.placed"] == "all_zeros"
    assert got["pipeline.accelerate.prepare.unplaced"] == "all_zeros"
    assert metrics(run, "pipeline.accelerate.prepare.placed")["accelerate_failed_tensors"] == 20


def test_safetensors_bf16_zeros_spares_fp32_and_torch_save() -> None:
    probes = ["pipeline.save.safetensors.bf16", "pipeline.save.torch.bf16"]
    run = simulated("safetensors-bf16-zeros", probes)
    got = verdicts(run)
    assert got == {"pipeline.save.safetensors.bf16": "all_zeros", "pipeline.save.torch.bf16": "pass"}
    broken = run.measurement("pipeline.save.safetensors.bf16")
    assert broken["trials"] == 3 and broken["failed_trials"] == broken["all_zero_trials"] == 2  # the fp32 one is right


def test_expandable_segments_hang_needs_its_setting() -> None:
    probes = ["alloc.usable.chunks"]
    quiet = simulated("expandable-segments-hang", probes)
    assert verdicts(quiet) == {"alloc.usable.chunks": "pass"}
    assert any("inactive" in log["message"] for log in quiet.of("log"))
    hung = simulated(
        "expandable-segments-hang",
        probes,
        env_extra={"PYTORCH_ALLOC_CONF": "expandable_segments:True"},
        timeout=90,
        idle_after_begin=5,
    )
    assert hung.timed_out
    assert hung.events[-1] == {"event": "begin", "probe": "alloc.usable.chunks", "device": "cpu"}
    assert "hsaKmtMemoryVaMap" in hung.stderr


def test_allreduce_wrong_breaks_reductions_and_gathers_not_broadcast() -> None:
    probes = [f"dist.{c}.rank_tagged" for c in ("all_reduce", "all_gather", "reduce_scatter", "broadcast")]
    run = simulated("allreduce-wrong", probes)
    got = verdicts(run)
    assert got == {
        "dist.all_reduce.rank_tagged": "mismatch",
        "dist.all_gather.rank_tagged": "mismatch",
        "dist.reduce_scatter.rank_tagged": "mismatch",
        "dist.broadcast.rank_tagged": "pass",
    }
    reduce = run.measurement("dist.all_reduce.rank_tagged")
    assert reduce["failed_trials"] == reduce["trials"]  # every rank, every case: one flipped bit each
    assert reduce["mismatches"] == reduce["trials"]


def test_alloc_oom_is_an_error_or_a_violation_and_recovery_still_works() -> None:
    probes = ["alloc.oom.recovery", "alloc.fragmentation.cycles", "alloc.caching.disabled", "alloc.usable.chunks"]
    run = simulated("alloc-oom", probes)
    assert run.returncode == 0, run.stderr[-2000:]
    got = verdicts(run)
    assert got["alloc.oom.recovery"] == "pass"
    assert got["alloc.fragmentation.cycles"] == "mismatch"
    frag = run.measurement("alloc.fragmentation.cycles")
    assert frag["violations"] == 1 and "large allocation" in frag["example"]
    error = run.results()["alloc.caching.disabled"]
    assert error["outcome"] == "error" and error["type"] == "OutOfMemoryError", error
    assert got["alloc.usable.chunks"] == "pass"  # 32 MiB chunks are not "large"


# -- soak --------------------------------------------------------------------------------------------

SOAK_SENTINELS = ["copy.d2d.medium.clone", "copy.h2d.pageable.4x4.blocking", "rng.repeat.randn"]


def test_soak_passes_cold_and_after_load() -> None:
    run = run_with_options(["soak.sustained.mixed"], {"soak_seconds": 1, "soak_sentinels": SOAK_SENTINELS})
    assert run.returncode == 0, run.stderr[-2000:]
    assert verdicts(run) == {"soak.sustained.mixed": "pass"}
    facts = metrics(run, "soak.sustained.mixed")
    assert facts["failed_phase"] == "none" and facts["soak_seconds"] == 1.0
    assert facts["load.seconds"] >= 1.0 and facts["load.iterations"] > 0
    for sentinel in SOAK_SENTINELS:
        assert facts[f"cold.{sentinel}"] == facts[f"after_load.{sentinel}"] == "pass"
    measurement = run.measurement("soak.sustained.mixed")
    assert measurement["checked"] == 2 * len(SOAK_SENTINELS) + facts["load.checked"]


def test_soak_names_the_phase_of_a_failure() -> None:
    small_copies_zero = {
        "source": "test",
        "fault": [{"name": "z", "op": "h2d", "when": {"max_bytes": 64}, "effect": {"kind": "zeros"}}],
    }
    run = run_with_options(
        ["soak.sustained.mixed"], {"soak_seconds": 0.5, "soak_sentinels": SOAK_SENTINELS}, simulate=small_copies_zero
    )
    facts = metrics(run, "soak.sustained.mixed")
    assert facts["failed_phase"] == "both"
    assert facts["cold.copy.h2d.pageable.4x4.blocking"] == facts["after_load.copy.h2d.pageable.4x4.blocking"] == "fail"
    measurement = run.measurement("soak.sustained.mixed")
    assert measurement["violations"] == measurement["zero_violations"] == 2
    assert classify(measurement) == "partial_zeros"
    notes = run.results()["soak.sustained.mixed"]["observation"]["notes"]
    assert any("failed cold and after load" in note for note in notes)


def test_soak_failure_only_after_load_reads_as_machine_state(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, int] = {}

    def sentinel(ctx: ProbeContext, probe_id: str) -> dict[str, Any]:
        calls[probe_id] = calls.get(probe_id, 0) + 1
        fails = probe_id == "b" and calls[probe_id] == 2
        return {"status": "fail" if fails else "pass", "detail": "3 of 9 differ", "zeros": False, "seconds": 0.0}

    monkeypatch.setattr(soak_run, "run_sentinel", sentinel)
    ctx = ProbeContext(torch, "cpu", 1, "soak.sustained.mixed", {"soak_seconds": 0.5})
    output = soak_run.run_soak(ctx, sentinels=["a", "b"], default_seconds=60.0)
    assert output.metrics["failed_phase"] == "after_load"
    assert output.metrics["cold.b"] == "pass" and output.metrics["after_load.b"] == "fail"
    assert output.measurement["violations"] == 1 and output.measurement["example"].startswith("b (after_load)")
    assert any("machine's state" in note for note in output.notes)


@pytest.mark.parametrize(
    ("options", "env", "expected"),
    [
        ({}, {}, (60.0, "default")),
        ({"soak_seconds": 5}, {"GPUPROBE_SOAK_SECONDS": "9"}, (5.0, "plan option soak_seconds")),
        ({}, {"GPUPROBE_SOAK_SECONDS": "9"}, (9.0, "GPUPROBE_SOAK_SECONDS")),
        ({"soak_seconds": 1e6}, {}, (720.0, "plan option soak_seconds (clamped from 1000000.0 to 720.0)")),
    ],
)
def test_soak_seconds_come_from_the_plan_then_the_environment(
    monkeypatch: pytest.MonkeyPatch, options: dict, env: dict, expected: tuple
) -> None:
    monkeypatch.delenv("GPUPROBE_SOAK_SECONDS", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    ctx = ProbeContext(torch, "cpu", 1, "soak.sustained.mixed", options)
    assert soak_run.soak_seconds(ctx, 60.0) == expected
    with pytest.raises(ValueError, match="number of seconds"):
        soak_run.soak_seconds(ProbeContext(torch, "cpu", 1, "s", {"soak_seconds": "long"}), 60.0)


# -- deliberate faults on the CPU --------------------------------------------------------------------


def test_deliberate_faults_on_the_cpu() -> None:
    probes = [
        "fault.illegal_address.index",
        "fault.hang.kernel",
        "fault.oom.huge",
        "fault.recovery.roundtrip",
        "fault.signal.kill",
        "copy.h2d.pageable.medium.blocking",
    ]
    run = run_plan(probes, timeout=120)
    results = run.results()
    assert "needs a GPU device under test" in results["fault.illegal_address.index"]["reason"]
    assert "needs a GPU device under test" in results["fault.hang.kernel"]["reason"]
    oom = results["fault.oom.huge"]
    assert oom["outcome"] == "error" and "can't allocate memory" in oom["message"]
    # The same worker went on after the out-of-memory error ...
    assert verdict(results["fault.recovery.roundtrip"]) == "pass"
    # ... and SIGKILL ended it in the middle of the next probe.
    assert run.returncode == -signal.SIGKILL
    assert run.events[-1] == {"event": "begin", "probe": "fault.signal.kill", "device": "cpu"}
    assert "copy.h2d.pageable.medium.blocking" not in results


#: The native-code faults: probe, the signal the worker dies of, faulthandler's headline and the
#: probe function its Python stack names.
NATIVE_FAULTS = [
    ("fault.signal.segv", signal.SIGSEGV, "Fatal Python error: Segmentation fault", "run_segv"),
    ("fault.signal.abort", signal.SIGABRT, "Fatal Python error: Aborted", "run_abort"),
]


@pytest.mark.parametrize(("probe", "signum", "headline", "function"), NATIVE_FAULTS)
def test_native_faults_kill_the_worker_with_their_signal_on_the_cpu(
    probe: str, signum: signal.Signals, headline: str, function: str
) -> None:
    after = "copy.h2d.pageable.medium.blocking"
    run = run_plan([probe, after], timeout=120)
    # A real fault, not an exception: the worker dies of the signal in the middle of the probe ...
    assert run.returncode == -signum, (run.returncode, run.stderr[-2000:])
    assert run.events[-1] == {"event": "begin", "probe": probe, "device": "cpu"}
    assert after not in run.results()
    # ... after faulthandler printed where (what the supervisor keeps as the crash's message).
    assert headline in run.stderr and function in run.stderr, run.stderr[-2000:]
    # A fresh worker on the same device runs what the crash cut off.
    assert verdicts(run_plan([after], timeout=120)) == {after: "pass"}


def test_a_deliberate_native_fault_writes_no_core_file() -> None:
    code = (
        "import resource; from gpuprobe.worker.probes.fault import run as fault_run; "
        "resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.getrlimit(resource.RLIMIT_CORE)[1])); "
        "fault_run._no_core_dump(); print(resource.getrlimit(resource.RLIMIT_CORE)[0])"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0", out


# -- on a GPU ----------------------------------------------------------------------------------------


def _gpu_count() -> int:
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken runtime is no GPU for these tests
        return 0


GPUS = _gpu_count()
AFTER = "copy.h2d.pageable.medium.blocking"


def needs_gpus(count: int) -> Any:
    """Marks a test ``gpu`` and skips it, with the reason, without ``count`` GPUs."""

    def mark(test: Any) -> Any:
        reason = f"needs {count} GPU(s) visible to torch; {GPUS} here"
        return pytest.mark.gpu(pytest.mark.skipif(GPUS < count, reason=reason)(test))

    return mark


def _on_gpu(probes: list[str], **kwargs: Any) -> WorkerRun:
    return run_plan(probes, device="cuda:0", **kwargs)


@needs_gpus(1)
def test_gpu_illegal_address_loses_the_context_and_a_fresh_worker_continues() -> None:
    run = _on_gpu(["fault.illegal_address.index", AFTER], timeout=120)
    result = run.results().get("fault.illegal_address.index")
    if result is None:
        # The runtime aborted the process (a ROCm memory access fault): a CRASH.
        assert run.returncode is not None and run.returncode < 0, (run.returncode, run.stderr[-2000:])
    else:
        assert result["outcome"] == "error", result
        # The worker found its context unusable and exited so that a fresh one continues.
        assert run.returncode == 3, (run.returncode, run.stderr[-2000:])
        assert any("device context unusable" in log["message"] for log in run.of("log"))
    assert AFTER not in run.results()
    fresh = _on_gpu([AFTER], timeout=120)
    assert verdicts(fresh) == {AFTER: "pass"}


@needs_gpus(1)
def test_gpu_hang_is_killed_and_the_gpu_is_usable_after() -> None:
    run = _on_gpu(["fault.hang.kernel", AFTER], timeout=120, idle_after_begin=8, stack_dump_before_kill=True)
    assert run.timed_out
    assert run.events[-1]["event"] == "begin" and run.events[-1]["probe"] == "fault.hang.kernel"
    assert "run_hang" in run.stderr  # the stack dump says where it hung
    fresh = _on_gpu([AFTER], timeout=120)
    assert verdicts(fresh) == {AFTER: "pass"}


@needs_gpus(1)
def test_gpu_oom_is_an_error_and_the_worker_goes_on() -> None:
    run = _on_gpu(["fault.oom.huge", AFTER], timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    oom = run.results()["fault.oom.huge"]
    assert oom["outcome"] == "error" and oom["type"] == "OutOfMemoryError", oom
    assert verdicts(run)[AFTER] == "pass"


@needs_gpus(1)
def test_gpu_sigkill_is_a_crash_and_a_fresh_worker_continues() -> None:
    run = _on_gpu(["fault.signal.kill", AFTER], timeout=120)
    assert run.returncode == -signal.SIGKILL
    fresh = _on_gpu([AFTER], timeout=120)
    assert verdicts(fresh) == {AFTER: "pass"}


@needs_gpus(1)
@pytest.mark.parametrize(("probe", "signum", "headline", "function"), NATIVE_FAULTS)
def test_gpu_native_faults_are_crashes_and_a_fresh_worker_continues(
    probe: str, signum: signal.Signals, headline: str, function: str
) -> None:
    run = _on_gpu([probe, AFTER], timeout=120)
    assert run.returncode == -signum, (run.returncode, run.stderr[-2000:])
    assert headline in run.stderr and function in run.stderr, run.stderr[-2000:]
    fresh = _on_gpu([AFTER], timeout=120)
    assert verdicts(fresh) == {AFTER: "pass"}


@needs_gpus(1)
def test_gpu_families_report_no_false_alarm(catalog_specs: list[dict], capsys: pytest.CaptureFixture) -> None:
    probes = [
        s["id"]
        for s in catalog_specs
        if s["id"].split(".")[0] in ("alloc", "pipeline", "dist") and s["tier"] in ("quick", "standard")
    ]
    run = _on_gpu(probes, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    with capsys.disabled():
        print(f"\nalloc/pipeline/dist quick+standard on cuda:0: {run.seconds:.1f} s wall")
        for probe, result in run.results().items():
            print(f"  {result['elapsed_s']:7.3f} s  {verdict(result):10s} {probe}")
    for probe in probes:
        result = run.results()[probe]
        if result["outcome"] == "skip":
            assert "needs at least 2 GPUs" in result["reason"] or "accelerate" in result["reason"], result
        else:
            assert verdict(result) == "pass", result


@needs_gpus(1)
@pytest.mark.parametrize(
    "probe", ["alloc.usable.chunks", "alloc.largest.single", "alloc.fragmentation.cycles", "alloc.oom.recovery.filled"]
)
def test_gpu_each_filling_probe_passes_as_the_first_probe_of_a_fresh_worker(probe: str) -> None:
    # In the full tier each has a worker of its own. A kernel launched for the first time
    # after the device is filled needs device memory for its module (CUDA's lazy loading):
    # alloc.largest.single raised out of memory so on the H200 until it launched its
    # kernels on a small block first.
    run = _on_gpu([probe], timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert verdicts(run) == {probe: "pass"}, run.results()


@needs_gpus(1)
def test_gpu_soak_passes_with_a_short_load(capsys: pytest.CaptureFixture) -> None:
    plan = {
        "protocol": 1,
        "mode": "run",
        "device": "cuda:0",
        "probes": ["soak.sustained.mixed"],
        "seed": 3,
        "options": {"soak_seconds": 10},
    }
    run = run_worker(plan, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    facts = metrics(run, "soak.sustained.mixed")
    with capsys.disabled():
        print(
            "\nsoak on cuda:0:",
            {k: v for k, v in facts.items() if k.startswith(("load.", "failed", "before", "after_load."))},
        )
    assert verdicts(run) == {"soak.sustained.mixed": "pass"}, run.results()
    assert facts["failed_phase"] == "none" and facts["load.seconds"] >= 10


@needs_gpus(2)
def test_multi_gpu_dist_family_reports_no_false_alarm(capsys: pytest.CaptureFixture) -> None:
    probes = ["dist.p2p.pairs"] + [
        f"dist.{c}.rank_tagged" for c in ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
    ]
    run = _on_gpu(probes, timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    with capsys.disabled():
        for probe, result in run.results().items():
            facts = result.get("observation", {}).get("metrics")
            print(f"\n{probe}: {result['elapsed_s']:.2f} s {verdict(result)} {facts}")
    assert set(verdicts(run).values()) == {"pass"}, run.results()
    assert metrics(run, "dist.all_reduce.rank_tagged")["backend"] == "nccl"
