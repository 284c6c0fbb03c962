"""Repro scripts (``python -m gpuprobe.repro``): for every covered family, a real failing
result from the worker under a simulation preset (or a spec of the test's own) becomes a
script that prints NOT REPRODUCED on the healthy CPU and REPRODUCED under the simulation
shim; crash and hang verdicts reproduce in a child process; unusable input gives one clear
line; every probe without a script says why.

Covered here on the CPU: copy (transfers, tiny copies, device-to-device, round trips, a
reused buffer, a dict batch), dtype, ops (GEMMs, elementwise, reductions), nn (convolutions,
attention with masks, packed inputs and gradients), pipeline (DataLoader in the main process
and in workers, safetensors and torch.save reloads, Accelerate), sweep (forward, backward,
a lost NaN, an operator the script looks up in PyTorch's database, a crash found from the
worker's log), width (decorated, closure and lambda cases at the scaled-down CPU
boundaries), compile (one entry of a program alone; compile.ambient's states in turn up to
the failing one, with ``aot_eager``), optim (a fused optimizer step, GradScaler), graph (a
graphed MLP training step, two graphs sharing a pool, on the CPU's eager stand-in) and train
(the bf16 transformer).

Not testable on a CPU, and why: copies between two GPUs (``copy.p2p``) and collectives
(``dist``) need two devices (no script is made for them); the ``huge``/``large`` variants
and the 1 GiB copies need tens of GiB (their recipes are the same as their small variants',
compiled by ``test_every_covered_probe_gives_a_script_that_compiles``); attention backends
other than ``default`` and ``math`` do not run on a CPU (the script forces the backend with
``sdpa_kernel`` as the probe does); CUDA graphs and reduce-overhead need a GPU (a CPU runs
the graph probes' eager stand-in, and a reduce-overhead script says CANNOT RUN there).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import PACKAGE_DIR, load_preset, run_plan, run_worker

SHIM = PACKAGE_DIR / "gpuprobe" / "repro" / "simulate_site"
SEED = 4242

#: (preset, settings the run applied, a probe that fails under it): one worker run each, so
#: the probe's first matching call is the one a fault with a fraction hits.
CASES: list[tuple[str, dict[str, str], str]] = [
    ("h2d-zeros", {}, "copy.h2d.pageable.4x4.blocking"),
    ("h2d-zeros", {}, "copy.h2d.pageable.4x4.blocking.numpy"),
    ("h2d-zeros", {}, "copy.h2d.pageable.tiny.nonblocking"),
    ("large-copy-bitflip", {}, "copy.d2h.pageable.medium.blocking"),
    ("large-copy-bitflip", {}, "copy.d2h.pageable.medium.blocking.copy_"),
    # Under large-copy-bitflip the D2H flip undoes the H2D one: a fault on both directions.
    ("any-large-zeros", {}, "copy.roundtrip.pageable.medium.nonblocking"),
    # several shapes: the script rebuilds the one that failed
    ("h2d-zeros-from-4k", {}, "copy.h2d.pageable.odd.blocking"),
    ("copy-stale", {}, "copy.h2d.pageable.medium.blocking.copy_"),
    ("copy-stale", {}, "copy.h2d.pageable.reuse.nonblocking"),
    ("h2d-zeros-from-4k", {}, "copy.batch.dict.pageable.blocking"),
    # The d2d fault exists only with HSA_ENABLE_SDMA=0 set: the script must apply the run's
    # settings before the shim decides which faults are active.
    ("h2d-zeros-cure-breaks-d2d", {"HSA_ENABLE_SDMA": "0"}, "copy.d2d.medium.clone"),
    ("fp16-convert-nan", {}, "dtype.fp32.fp16.to.device"),
    ("fp16-convert-nan", {}, "dtype.fp32.fp16.half.device"),
    ("bf16-fp32-zeros", {}, "dtype.bf16.fp32.type.device"),
    # matmul-large-m-garbage needs a 256 MiB output: too large for a CPU test
    ("matmul-stale", {}, "ops.matmul.fp32"),
    ("matmul-stale", {}, "ops.addmm.bf16"),
    ("matmul-stale", {}, "ops.linear.fp16"),
    ("matmul-stale", {}, "ops.bmm.tf32"),
    ("kernel-noop", {}, "ops.elementwise.div.fp16"),
    ("kernel-noop", {}, "ops.elementwise.exp.bf16"),
    ("kernel-noop", {}, "ops.elementwise.mul.fp32"),
    ("reduce-zeros", {}, "ops.reduce.sum.fp16"),
    ("reduce-zeros", {}, "ops.reduce.mean.bf16"),
    ("reduce-zeros", {}, "ops.reduce.sum.fp32"),
    ("conv-zeros", {}, "nn.conv2d.bf16"),
    ("conv-zeros", {}, "nn.conv2d.fp32.bwd"),
    ("conv-zeros", {}, "nn.conv2d.depthwise.fp16"),
    ("conv-zeros", {}, "nn.conv_transpose2d.fp32"),
    ("sdpa-bf16-nan", {}, "nn.sdpa.bf16.default.d64.s128"),
    ("sdpa-bf16-nan", {}, "nn.sdpa.bf16.default.d64.s1024.allmasked"),
    ("sdpa-bf16-nan", {}, "nn.sdpa.bf16.default.d64.s1024.causal.bwd"),
    ("sdpa-bf16-nan", {}, "nn.sdpa.bf16.default.d64.s1024.noncontig"),
    ("sdpa-bf16-nan", {}, "nn.sdpa.bf16.default.d128.s65537.causal"),
    ("dataloader-workers-zeros", {}, "pipeline.dataloader.w2.fork"),
    ("dataloader-main-zeros", {}, "pipeline.dataloader.w0"),
    ("safetensors-bf16-zeros", {}, "pipeline.save.safetensors.bf16"),
    ("torch-save-zeros", {}, "pipeline.save.torch.bf16"),
    ("accelerate-prepare-zeros", {}, "pipeline.accelerate.prepare.placed"),
    ("accelerate-prepare-zeros", {}, "pipeline.accelerate.prepare.unplaced"),
    ("h2d-zeros-from-4k", {}, "pipeline.accelerate.send_to_device"),
]


#: Specs of the tests' own, beside the presets.
SPECS: dict[str, dict[str, Any]] = {
    "any-large-zeros": {
        "source": "test:any-large-zeros",
        "fault": [{"name": "large-zeros", "op": "any", "when": {"min_bytes": 1 << 20}, "effect": {"kind": "zeros"}}],
    },
    "matmul-stale": {
        "source": "test:matmul-stale",
        "fault": [{"name": "gemm-stale", "op": "matmul", "when": {"on_device": True}, "effect": {"kind": "stale"}}],
    },
    "reduce-zeros": {
        "source": "test:reduce-zeros",
        "fault": [{"name": "reduce-zeros", "op": "reduce", "when": {"methods": ["sum", "mean"]}, "effect": {"kind": "zeros"}}],
    },
    "dataloader-main-zeros": {
        "source": "test:dataloader-main-zeros",
        "fault": [{"name": "main-zeros", "op": "dataloader", "when": {"methods": ["main"]}, "effect": {"kind": "zeros"}}],
    },
    "torch-save-zeros": {
        "source": "test:torch-save-zeros",
        "fault": [{"name": "reload-zeros", "op": "save_load", "when": {"methods": ["torch"]}, "effect": {"kind": "zeros"}}],
    },
    "h2d-zeros-from-4k": {
        "source": "test:h2d-zeros-from-4k",
        "fault": [{"name": "h2d-zeros", "op": "h2d", "when": {"min_bytes": 4096}, "effect": {"kind": "zeros"}}],
    },
}


def spec_of(name: str) -> dict[str, Any]:
    return SPECS[name] if name in SPECS else load_preset(name)


def make_plan(simulate: dict[str, Any] | None, probes: list[str], settings: dict[str, str], timeout: float = 60.0):
    return {
        "tool_version": "0.1.0",
        "command": "check",
        "tier": "quick",
        "seed": SEED,
        "simulate": simulate,
        "settings": {"set": settings, "unset": []},
        "options": {},
        "tasks": [{"spec": {"id": p, "timeout_s": timeout}, "device": "cpu"} for p in probes],
    }


def as_result(event: dict[str, Any], verdict: dict[str, Any], settings: dict[str, str], simulated: bool):
    """A worker result event as report.json's ``results`` carries it."""
    return {
        "probe": event["probe"],
        "device": event["device"],
        "layer": "framework",
        "verdict": verdict,
        "observation": event.get("observation"),
        "settings": [f"{k}={v}" for k, v in settings.items()],
        "simulated": simulated,
    }


def generate(tmp: Path, result: dict[str, Any], plan: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "result.json").write_text(json.dumps(result))
    (tmp / "plan.json").write_text(json.dumps(plan))
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    argv = [sys.executable, "-m", "gpuprobe.repro", "--result", str(tmp / "result.json")]
    argv += ["--plan", str(tmp / "plan.json"), "--out", str(tmp / "out")]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def _script_env(simulate: dict[str, Any] | None) -> dict[str, str]:
    """An environment whose path lacks the gpuprobe package (the shim's directory only)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPUPROBE_REPRO_SIMULATE")}
    for key in ("HSA_ENABLE_SDMA", "AMD_SERIALIZE_COPY", "AMD_SERIALIZE_KERNEL", "HIP_FORCE_DEV_KERNARG"):
        env.pop(key, None)
    if simulate is not None:
        env["PYTHONPATH"] = str(SHIM)
        env["GPUPROBE_REPRO_SIMULATE"] = json.dumps(simulate)
    return env


def start_script(script: Path, simulate: dict[str, Any] | None = None, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), "--device", "cpu", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_script_env(simulate),
        cwd=script.parent,
    )


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def run_script(script: Path, simulate: dict[str, Any] | None = None, *extra: str) -> subprocess.CompletedProcess[str]:
    """Runs the script in a fresh interpreter whose path lacks the gpuprobe package."""
    return finish(start_script(script, simulate, *extra))


def last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if lines else ""


def check_script(script: Path, simulate: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Runs the script on the healthy CPU (NOT REPRODUCED) and under the shim (REPRODUCED);
    returns the second run."""
    text = script.read_text()
    assert not re.search(r"^\s*(import|from)\s+gpuprobe", text, re.M), "the script imports gpuprobe"
    assert "# SIMULATED" in text
    # Both runs at once: each spends most of its time importing torch.
    healthy_proc, faulty_proc = start_script(script), start_script(script, simulate)
    healthy, faulty = finish(healthy_proc), finish(faulty_proc)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert last_line(healthy).startswith("NOT REPRODUCED"), healthy.stdout
    assert "torch " in healthy.stdout and "device cpu" in healthy.stdout
    assert faulty.returncode == 1, faulty.stdout + faulty.stderr
    assert last_line(faulty).startswith("REPRODUCED"), faulty.stdout
    assert "SIMULATED" in faulty.stderr
    return faulty


_RUNS: dict[Any, Any] = {}


def failing_event(preset: str, settings: dict[str, str], probe: str) -> dict[str, Any]:
    """The worker's result for ``probe`` under ``preset``. Probes whose preset hits every
    matching call share one worker run; under a fault that hits every k-th call the probe
    runs alone, so that its first matching call is the one hit."""
    spec = spec_of(preset)
    every_call = all(f.get("effect", {}).get("fraction", 1.0) == 1.0 for f in spec["fault"])
    probes = [c[2] for c in CASES if c[0] == preset and c[1] == settings] if every_call else [probe]
    key = (preset, tuple(sorted(settings.items())), tuple(probes))
    if key not in _RUNS:
        run = run_plan(probes, seed=SEED, simulate=spec, env_extra=settings)
        assert run.returncode == 0, run.stderr[-3000:]
        _RUNS[key] = run.results()
    return _RUNS[key][probe]


@pytest.mark.parametrize("preset,settings,probe", CASES, ids=[c[2] for c in CASES])
def test_failing_results_reproduce_only_under_simulation(
    tmp_path: Path, preset: str, settings: dict[str, str], probe: str
) -> None:
    spec = spec_of(preset)
    event = failing_event(preset, settings, probe)
    measurement = event["observation"]["measurement"]
    assert measurement["mismatches"] > 0, f"{probe} passes under {preset}: this proves nothing"
    result = as_result(event, {"verdict": "fail", "class": "mismatch"}, settings, True)
    made = generate(tmp_path, result, make_plan(spec, [probe], settings))
    assert made.returncode == 0, made.stderr
    info = json.loads((tmp_path / "out" / "repro.json").read_text())
    assert info["probe"] == probe and info["family"] == probe.split(".")[0]
    assert info["kind"] == "python" and info["simulated"] is True and info["crash_child"] is False
    assert info["env"] == settings
    script = tmp_path / "out" / "repro.py"
    trial = measurement["first_mismatch"]["trial"]
    if probe.startswith("copy.") and ".tiny." in probe:
        assert f"'copy': {trial}," in script.read_text()
    elif ".reuse." in probe:
        # every copy into the reused buffer up to the one that failed
        assert f"'trial': {trial}, " in script.read_text() and f"'trial': {trial + 1}, " not in script.read_text()
    elif probe.startswith(("copy.h2d", "copy.d2h", "copy.d2d")):
        # the one shape that failed, not the probe's loop
        assert f"CASES = [{{'trial': {trial}," in script.read_text()
    if probe == "copy.h2d.pageable.odd.blocking":
        assert trial > 0
    check_script(script, spec)


def test_the_script_shows_the_values_the_probe_saw(tmp_path: Path) -> None:
    """The rebuilt input is the probe's own: the first differing element the script prints
    is the one the worker recorded, with the same expected value."""
    probe = "copy.h2d.pageable.4x4.blocking"
    spec = load_preset("h2d-zeros")
    event = failing_event("h2d-zeros", {}, probe)
    first = event["observation"]["measurement"]["first_mismatch"]
    made = generate(tmp_path, as_result(event, {"verdict": "fail"}, {}, True), make_plan(spec, [probe], {}))
    assert made.returncode == 0, made.stderr
    faulty = run_script(tmp_path / "out" / "repro.py", spec)
    expected = first["expected"].split(" ")[0]
    row = next(line for line in faulty.stdout.splitlines() if line.strip().startswith(str(first["index"]) + " "))
    assert expected in row, faulty.stdout


def _crash_spec(op: str, kind: str) -> dict[str, Any]:
    effect: dict[str, Any] = {"kind": kind}
    if kind == "crash":
        effect["signal"] = "SIGABRT"
    return {"source": f"test-{kind}", "fault": [{"name": f"{op}-{kind}", "op": op, "effect": effect}]}


@pytest.mark.parametrize(
    "probe,op,kind,expected",
    [
        ("copy.h2d.pageable.medium.blocking", "h2d", "crash", "REPRODUCED: crash (signal 6)"),
        ("copy.d2h.pageable.medium.blocking", "d2h", "hang", "REPRODUCED: hang (no result in 6 s)"),
    ],
)
def test_crash_and_hang_reproduce_in_a_child(tmp_path: Path, probe: str, op: str, kind: str, expected: str) -> None:
    spec = _crash_spec(op, kind)
    plan = make_plan(spec, [probe], {}, timeout=6.0)
    result = {
        "probe": probe,
        "device": "cpu",
        "layer": "framework",
        "verdict": {"verdict": kind, "signal": "SIGABRT"} if kind == "crash" else {"verdict": kind},
        "simulated": True,
    }
    made = generate(tmp_path, result, plan)
    assert made.returncode == 0, made.stderr
    info = json.loads((tmp_path / "out" / "repro.json").read_text())
    assert info["crash_child"] is True
    script = tmp_path / "out" / "repro.py"
    healthy_proc, faulty_proc = start_script(script), start_script(script, spec)
    healthy, faulty = finish(healthy_proc), finish(faulty_proc)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert last_line(healthy).startswith("NOT REPRODUCED"), healthy.stdout
    assert faulty.returncode == 1, faulty.stdout + faulty.stderr
    assert last_line(faulty) == expected, faulty.stdout


def test_a_cure_among_the_run_settings_cures_the_shim_too(tmp_path: Path) -> None:
    """h2d-zeros is cured by HSA_ENABLE_SDMA=0: a result whose run set it gives a script that
    applies it, and the shim then simulates nothing."""
    probe = "copy.h2d.pageable.4x4.blocking"
    spec = load_preset("h2d-zeros")
    result = as_result(failing_event("h2d-zeros", {}, probe), {"verdict": "fail"}, {"HSA_ENABLE_SDMA": "0"}, True)
    made = generate(tmp_path, result, make_plan(spec, [probe], {}))
    assert made.returncode == 0, made.stderr
    cured = run_script(tmp_path / "out" / "repro.py", spec)
    assert cured.returncode == 0 and last_line(cured).startswith("NOT REPRODUCED"), cured.stdout


@pytest.mark.parametrize(
    "probe,reason",
    [
        ("nosuch.family.probe", "is not a probe of this gpuprobe's catalog"),
        ("rng.randn.fp32.moments", "rng probes:"),
        ("native.copy.roundtrip.pageable", "native probes:"),
        ("alloc.oom.recovery", "alloc probes:"),
        ("fault.hang.kernel", "fault probes:"),
        ("soak.sustained.mixed", "soak probes:"),
        ("nn.sdpa.matrix.bf16.default.core", "attention backend matrix"),
        ("nn.vae.encode.fp32", "the VAE probes run a small model"),
        ("sweep.opdb", "computes nothing to reproduce"),
    ],
)
def test_no_repro_exits_3_with_one_line(tmp_path: Path, probe: str, reason: str) -> None:
    """Each family without a script says why, in its own words."""
    result = {"probe": probe, "device": "cuda:0", "verdict": {"verdict": "fail"}, "observation": {}}
    made = generate(tmp_path, result, make_plan(None, [probe], {}))
    assert made.returncode == 3, made.stderr
    assert made.stderr.startswith("no repro: ") and reason in made.stderr, made.stderr
    assert len(made.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "repro.py").exists()


@pytest.mark.parametrize(
    "result_text,plan_text,message",
    [
        ("{not json", "{}", "RESULT.json"),
        ("[1, 2]", "{}", "must hold a JSON object"),
        ('{"probe": "copy.h2d.pageable.4x4.blocking", "device": "cpu", "verdict": {"verdict": "fail"}}', "{", "PLAN.json"),
        ('{"probe": "copy.h2d.pageable.4x4.blocking", "device": "cpu", "verdict": {"verdict": "fail"}}', "{}", "seed"),
        ('{"probe": "copy.h2d.pageable.4x4.blocking", "device": "cpu", "verdict": {"verdict": "pass"}}', '{"seed": 1}', "did not fail"),
        ('{"device": "cpu"}', '{"seed": 1}', "no probe id"),
        ('{"probe": "copy.h2d.pageable.4x4.blocking", "device": "cuda:0\\"); x", "verdict": {"verdict": "fail"}}', '{"seed": 1}', "names device"),
        ('{"probe": "x", "device": "cpu", "verdict": {"verdict": "fail"}}', '{"seed": NaN}', "PLAN.json"),
    ],
)
def test_malformed_input_is_one_clear_line(tmp_path: Path, result_text: str, plan_text: str, message: str) -> None:
    (tmp_path / "result.json").write_text(result_text)
    (tmp_path / "plan.json").write_text(plan_text)
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    argv = [sys.executable, "-m", "gpuprobe.repro", "--result", str(tmp_path / "result.json")]
    argv += ["--plan", str(tmp_path / "plan.json"), "--out", str(tmp_path / "out")]
    made = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert made.returncode == 2, made.stderr
    assert "Traceback" not in made.stderr
    assert made.stderr.startswith("error: ") and message in made.stderr, made.stderr
    assert len(made.stderr.strip().splitlines()) == 1


def test_missing_file_is_one_clear_line(tmp_path: Path) -> None:
    made = generate(tmp_path, {}, {})
    (tmp_path / "result.json").unlink()
    argv = [sys.executable, "-m", "gpuprobe.repro", "--result", str(tmp_path / "result.json")]
    argv += ["--plan", str(tmp_path / "plan.json"), "--out", str(tmp_path / "out")]
    made = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(PACKAGE_DIR)))
    assert made.returncode == 2 and made.stderr.startswith("error: cannot read RESULT.json"), made.stderr


def test_no_torch_is_cannot_run(tmp_path: Path) -> None:
    """A script run where torch cannot be imported says CANNOT RUN and exits 2."""
    probe = "copy.h2d.pageable.4x4.blocking"
    result = {"probe": probe, "device": "cpu", "verdict": {"verdict": "crash"}, "simulated": False}
    made = generate(tmp_path, result, make_plan(None, [probe], {}))
    assert made.returncode == 0, made.stderr
    script = tmp_path / "out" / "repro.py"
    assert "# SIMULATED" not in script.read_text()
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError('no torch here')\n")
    env = dict(os.environ, PYTHONPATH=str(blocker))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and last_line(proc).startswith("CANNOT RUN: torch cannot be imported"), proc.stdout
    no_gpu = run_script(script, None, "--device", "cuda:7")
    assert no_gpu.returncode == 2 and last_line(no_gpu).startswith("CANNOT RUN"), no_gpu.stdout


# ---------------------------------------------------------------------------------------------
# sweep: one worker run with planted faults; each failing case becomes a script.

#: Planted sweep faults: a layout transform (forward), a gradient (backward, bfloat16), a NaN
#: that disappears, and an entry whose operator is a lambda of the database.
SWEEP_SPEC: dict[str, Any] = {
    "source": "test:sweep",
    "fault": [
        {"name": "noncontig", "op": "sweep", "when": {"methods": ["add"], "variants": ["noncontig"]}, "effect": {"kind": "partial_zeros"}},
        {"name": "grad", "op": "sweep", "when": {"methods": ["nn.functional.layer_norm"], "variants": ["backward"]}, "effect": {"kind": "partial_zeros"}},
        {"name": "lost-nan", "op": "sweep", "when": {"methods": ["sort"], "variants": ["nan"]}, "effect": {"kind": "drop_nan"}},
        {"name": "contiguous", "op": "sweep", "when": {"methods": ["contiguous"], "variants": ["base"]}, "effect": {"kind": "zeros"}},
        # A value class: the script injects the sample dtype's value, not float64's.
        {"name": "subnormal", "op": "sweep", "when": {"methods": ["reciprocal"], "variants": ["subnormal"]}, "effect": {"kind": "partial_zeros"}},
        # Cases the script does not write out: a call variant, an integer dtype.
        {"name": "out", "op": "sweep", "when": {"methods": ["mul"], "variants": ["out"]}, "effect": {"kind": "partial_zeros"}},
        {"name": "int", "op": "sweep", "when": {"methods": ["sub"], "dtypes": ["int32"]}, "effect": {"kind": "partial_zeros"}},
    ],
}
SWEEP_PROBES = ["sweep.add.fp32", "sweep.nn.functional.layer_norm.bf16", "sweep.sort.fp32", "sweep.contiguous.fp32", "sweep.reciprocal.fp32"]
#: Failing sweep probes without a script, and the words of their reason.
SWEEP_NO_SCRIPT = {"sweep.mul.fp32": "call variant", "sweep.sub.i32": "judged exactly"}


@pytest.fixture(scope="module")
def sweep_results() -> dict[str, Any]:
    run = run_plan(SWEEP_PROBES + list(SWEEP_NO_SCRIPT), seed=SEED, simulate=SWEEP_SPEC, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.results()


@pytest.mark.parametrize("probe", SWEEP_PROBES)
def test_sweep_case_reproduces_only_under_simulation(tmp_path: Path, sweep_results: dict[str, Any], probe: str) -> None:
    """The one failing sample is rebuilt from the sample's own values written into the
    script, and judged by the sweep's oracle: the device result the script prints is the
    one the worker recorded (class, element, values)."""
    event = sweep_results[probe]
    failure = event["observation"]["measurement"]["failures"][0]
    made = generate(tmp_path, as_result(event, {"verdict": "fail"}, {}, True), make_plan(SWEEP_SPEC, [probe], {}))
    assert made.returncode == 0, made.stderr
    info = json.loads((tmp_path / "out" / "repro.json").read_text())
    assert info["family"] == "sweep" and info["crash_child"] is False
    script = tmp_path / "out" / "repro.py"
    text = script.read_text()
    assert "torch.testing._internal" not in text or probe == "sweep.contiguous.fp32"
    if probe == "sweep.contiguous.fp32":
        # Its operator is a lambda of the database: the script looks it up there, and says so.
        assert any("operator database" in need for need in info["needs"]), info["needs"]
    else:
        assert info["needs"] == ["torch"]
    assert f"TRANSFORM = {failure['variant']!r}" in text
    assert f"BACKWARD = {failure['direction'] == 'backward'!r}" in text
    faulty = check_script(script, SWEEP_SPEC)
    assert f"{failure['class']}: {failure['detail']}" in faulty.stdout, (failure, faulty.stdout)
    assert f"first at index {failure['index']}: expected {failure['expected']}, found {failure['found']}" in faulty.stdout


@pytest.mark.parametrize("probe", sorted(SWEEP_NO_SCRIPT))
def test_sweep_cases_without_a_script_say_why(tmp_path: Path, sweep_results: dict[str, Any], probe: str) -> None:
    event = sweep_results[probe]
    assert event["observation"]["measurement"]["failures"], event
    made = generate(tmp_path, as_result(event, {"verdict": "fail"}, {}, True), make_plan(SWEEP_SPEC, [probe], {}))
    assert made.returncode == 3 and SWEEP_NO_SCRIPT[probe] in made.stderr, made.stderr
    assert not (tmp_path / "out" / "repro.py").exists()


def test_sweep_crash_is_found_from_the_worker_log(tmp_path: Path) -> None:
    """A sweep probe that crashes names no case in its observation; the worker's log line
    before the case does, and the script runs that case in a child process."""
    probe = "sweep.exp.fp32"
    spec = {
        "source": "test:sweep-crash",
        "fault": [{"name": "crash", "op": "sweep", "when": {"methods": ["exp"], "variants": ["noncontig"]}, "effect": {"kind": "crash", "signal": "SIGABRT"}}],
    }
    run = run_plan([probe], seed=SEED, simulate=spec, timeout=600)
    assert probe not in run.results(), "the worker should have died in the case"
    tail = run.stderr.strip().splitlines()[-40:]  # what the supervisor keeps (TAIL_LINES)
    assert any("gpuprobe sweep: exp fp32 noncontig" in line for line in tail), tail
    result = {
        "probe": probe,
        "device": "cpu",
        "layer": "framework",
        "verdict": {"verdict": "crash", "signal": "SIGABRT", "stderr_tail": tail},
        "simulated": True,
    }
    made = generate(tmp_path, result, make_plan(spec, [probe], {}, timeout=60.0))
    assert made.returncode == 0, made.stderr
    script = tmp_path / "out" / "repro.py"
    assert "TRANSFORM = 'noncontig'" in script.read_text()
    healthy_proc, faulty_proc = start_script(script), start_script(script, spec)
    healthy, faulty = finish(healthy_proc), finish(faulty_proc)
    assert healthy.returncode == 0 and last_line(healthy).startswith("NOT REPRODUCED"), healthy.stdout + healthy.stderr
    assert faulty.returncode == 1 and last_line(faulty) == "REPRODUCED: crash (signal 6)", faulty.stdout + faulty.stderr
    # Without the log line there is nothing to rebuild.
    result["verdict"] = {"verdict": "crash", "stderr_tail": ["something else"]}
    made = generate(tmp_path / "no-log", result, make_plan(spec, [probe], {}))
    assert made.returncode == 3 and "gpuprobe sweep:" in made.stderr, made.stderr


# ---------------------------------------------------------------------------------------------
# width: the case's own code (a decorated function, a lambda, a closure) copied into the script.

WIDTH_PROBES = ["width.create.n31", "width.elementwise.n31", "width.pool.g16", "width.sort.g16"]


@pytest.fixture(scope="module")
def width_results() -> dict[str, Any]:
    run = run_plan(WIDTH_PROBES, seed=SEED, simulate=load_preset("width-wrap"), timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.results()


@pytest.mark.parametrize("probe", WIDTH_PROBES)
def test_width_case_reproduces_only_under_simulation(tmp_path: Path, width_results: dict[str, Any], probe: str) -> None:
    """The first case with violations is rebuilt alone (its inputs seeded per case, as the
    probe seeds them) and finds as many violations as the probe did."""
    spec = load_preset("width-wrap")
    event = width_results[probe]
    first = next(c for c in event["observation"]["metrics"]["cases"] if c["violations"])
    made = generate(tmp_path, as_result(event, {"verdict": "fail"}, {}, True), make_plan(spec, [probe], {}))
    assert made.returncode == 0, made.stderr
    script = tmp_path / "out" / "repro.py"
    assert f"'case': {first['case']!r}" in script.read_text()
    faulty = check_script(script, spec)
    assert f", {first['violations']} violated" in faulty.stdout, (first, faulty.stdout)


def test_every_covered_probe_gives_a_script_that_compiles() -> None:
    """Each probe of the catalog whose implementation has a recipe (every method, memory,
    dtype and device type) gets a script, for a wrong result and for a crash, that is valid
    Python and imports no gpuprobe; every other family gets ``no repro``."""
    from gpuprobe.repro import families
    from gpuprobe.repro.generate import generate as make
    from gpuprobe.worker import catalog

    plan = make_plan(None, [], {})
    covered = 0
    for probe, definition in catalog.all_probes().items():
        recipe = families.RECIPES.get(definition.impl)
        if definition.impl.endswith(("sweep.run:run_op", "compile.run:run_program", "compile.ambient:run")):
            continue  # needs a real failing sample or state (the sweep and compile tests above and below)
        if definition.impl.startswith(TRAINING_PATH_IMPLS):
            continue  # a failure names its case: test_every_training_path_probe_gives_a_script_that_compiles
        if definition.impl.endswith("width.run:run_width"):
            # Every case of the probe, as the failing one: its code copied, compiled.
            from gpuprobe.worker.probes.width import run as width_run

            for width_case in width_run.cases_for(definition.params["group"], definition.params["kind"]):
                observation = {"measurement": {"violations": 1}, "metrics": {"cases": [{"case": width_case.name, "violations": 1}]}}
                result = {"probe": probe, "device": "cuda:0", "verdict": {"verdict": "fail"}, "observation": observation}
                text, _ = make(result, plan)
                compile(text, f"{probe}/{width_case.name}/repro.py", "exec")
                assert not re.search(r"^\s*(import|from)\s+gpuprobe", text, re.M), probe
                covered += 1
            continue
        for device in ("cuda:0", "cpu"):
            metrics: dict[str, Any] = {"worst_case": 0}
            if definition.impl.endswith("run_elementwise"):
                case = families.Case(probe, definition, SEED, "fail", {}, {}, device)
                metrics["cases"] = ", ".join(c["label"] for c in families.elementwise_cases(case, definition.params["method"]))
            observation = {"measurement": {"first_mismatch": {"trial": 0, "index": 0}}, "metrics": metrics}
            for verdict in ("fail", "crash"):
                result = {"probe": probe, "device": device, "verdict": {"verdict": verdict}, "observation": observation}
                if recipe is None:
                    with pytest.raises(families.NoRepro):
                        make(result, plan)
                    continue
                text, info = make(result, plan)
                compile(text, f"{probe}/repro.py", "exec")
                assert not re.search(r"^\s*(import|from)\s+gpuprobe", text, re.M), probe
                assert info["crash_child"] is (verdict == "crash")
                covered += 1
    assert covered > 500


def test_every_probe_has_a_recipe_or_a_reason() -> None:
    """No implementation falls through to the generic message: a recipe, a reason of its
    own, or a family-wide reason."""
    from gpuprobe.repro import families
    from gpuprobe.worker import catalog

    for probe, definition in catalog.all_probes().items():
        known = definition.impl in families.RECIPES or definition.impl in families.NOT_REBUILT
        assert known or probe.split(".")[0] in families.UNCOVERED, probe


# ---------------------------------------------------------------------------------------------
# compile: one wrong entry of a compiled program becomes a script that compiles it alone.

COMPILE_SPEC: dict[str, Any] = {
    "source": "test:compile",
    "fault": [{"name": "cumsum", "op": "compile", "when": {"methods": ["cumsum"], "variants": ["dynamic"]}, "effect": {"kind": "zeros"}}],
}


def _compile_result(variant: str, seed: int = 1272032076) -> dict[str, Any]:
    """A compile probe's failing result as the worker reports it (``compile_run.ProgramTally.fail_call``)."""
    failure = {
        "class": "wrong_value", "variant": variant, "direction": "forward", "sample": 0, "output": "cumsum out[0]",
        "detail": "all zero", "expected": "1", "found": "0", "zeros": True, "all_zero": True, "bad_elements": 25, "elements": 25,
    }
    measurement = {"kind": "sweep", "op": "inductor program", "dtype": "float32", "cases": 1, "passed": 0,
                   "failed": {"wrong_value": 1}, "failures": [failure], "errors": []}
    event = {"probe": "compile.standard.fp32", "device": "cpu",
             "observation": {"measurement": measurement, "metrics": {"seed": seed}, "notes": ["SIMULATED"]}}
    return as_result(event, {"verdict": "fail", "class": "all_zeros"}, {}, True)


def test_a_compiled_entry_reproduces_alone_only_under_simulation(tmp_path: Path) -> None:
    """The failing entry's sample is rebuilt as the sweep's script rebuilds it, and run
    alone under torch.compile with the pass's settings; the simulated fault meets it as the
    worker's compiled values met it."""
    made = generate(tmp_path, _compile_result("dynamic"), make_plan(COMPILE_SPEC, ["compile.standard.fp32"], {}))
    assert made.returncode == 0, made.stderr
    info = json.loads((tmp_path / "out" / "repro.json").read_text())
    assert info["family"] == "compile" and info["needs"] == ["torch"]
    text = (tmp_path / "out" / "repro.py").read_text()
    assert "torch.compile(inputs[\"op\"], dynamic=DYNAMIC)" in text and "DYNAMIC = True" in text
    assert "SIMULATED_VARIANT = 'dynamic'" in text
    faulty = check_script(tmp_path / "out" / "repro.py", COMPILE_SPEC)
    assert "wrong_value" in faulty.stdout, faulty.stdout


def test_compiled_out_and_inplace_passes_say_why_there_is_no_script(tmp_path: Path) -> None:
    made = generate(tmp_path, _compile_result("out"), make_plan(COMPILE_SPEC, ["compile.standard.fp32"], {}))
    assert made.returncode == 3 and "out= or in-place" in made.stderr, made.stderr


# ---------------------------------------------------------------------------------------------
# compile.ambient: the probe's states compiled in turn up to the failing one, that one judged.

AMBIENT_PROBE = "compile.ambient"
AMBIENT_SPEC: dict[str, Any] = {
    "source": "test:ambient",
    "fault": [
        {"name": "ambient-f16", "op": "compile", "when": {"methods": ["ambient"], "variants": ["autocast_float16"]}, "effect": {"kind": "zeros"}}
    ],
}


def _ambient_result(state: str, device: str = "cpu", verdict: str = "fail") -> dict[str, Any]:
    """A compile.ambient failure under ``state``, its record made by the probe's own tally."""
    from gpuprobe.worker.probes.compile import ambient as compile_ambient
    from gpuprobe.worker.probes.sweep import oracle as sweep_oracle

    tally = compile_ambient.StateTally()
    tally.record_tensor(state, "logits", sweep_oracle.LeafFailure(sweep_oracle.WRONG_VALUE, "dtype torch.bfloat16 where eager ...",
                                                                  expected="torch.float16", found="torch.bfloat16"))
    measurement = {"kind": "sweep", "op": AMBIENT_PROBE, "cases": 1, "passed": 0, "failed": tally.failed,
                   "failures": tally.failures, "errors": []}
    event = {"probe": AMBIENT_PROBE, "device": device, "observation": {"measurement": measurement, "metrics": {}}}
    return as_result(event, {"verdict": verdict}, {}, True)


def _ambient_probe_result(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The probe's own failing result under ``AMBIENT_SPEC``, run in this process with
    ``aot_eager`` (seconds; the worker would compile with Inductor)."""
    import torch

    from gpuprobe.worker import simulate
    from gpuprobe.worker.context import ProbeContext
    from gpuprobe.worker.probes.compile import ambient as compile_ambient

    monkeypatch.setitem(compile_ambient.COMPILE_OPTIONS, "backend", "aot_eager")
    simulate.activate(AMBIENT_SPEC, torch, "cpu")
    try:
        out = compile_ambient.run(ProbeContext(torch, "cpu", SEED, AMBIENT_PROBE, {}))
    finally:
        simulate.deactivate()
    event = {"probe": AMBIENT_PROBE, "device": "cpu", "observation": {"measurement": out.measurement, "metrics": out.metrics}}
    return as_result(event, {"verdict": "fail", "class": "wrong_value"}, {}, True)


def test_an_ambient_state_reproduces_after_the_states_before_it_only_under_simulation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script compiles the probe's states in their order up to the failing one, in a
    fresh cache directory, and judges that one with the probe's judge: on the healthy CPU it
    passes; under the shim the fault the worker's compiled values met meets its values, and
    it prints the element and values the probe recorded (the same seeded weights and batch).
    ``aot_eager`` keeps it cheap (the script's backend override): the cache keys are the GPU
    host's to test, with Inductor."""
    result = _ambient_probe_result(monkeypatch)
    first = result["observation"]["measurement"]["failures"][0]
    assert first["variant"] == "autocast_float16", first
    monkeypatch.setenv("GPUPROBE_REPRO_BACKEND", "aot_eager")
    made = generate(tmp_path, result, make_plan(AMBIENT_SPEC, [AMBIENT_PROBE], {}))
    assert made.returncode == 0, made.stderr
    info = json.loads((tmp_path / "out" / "repro.json").read_text())
    assert info["family"] == "compile" and info["needs"] == ["torch"] and info["crash_child"] is False
    text = (tmp_path / "out" / "repro.py").read_text()
    assert "JUDGED = 'autocast_float16'" in text and "SIMULATED_VARIANT = 'autocast_float16'" in text
    assert "State(name='autocast_bfloat16'" in text and "autocast_bfloat16_again" not in text
    faulty = check_script(tmp_path / "out" / "repro.py", AMBIENT_SPEC)
    out = faulty.stdout
    assert "caches: " in out and "(fresh; removed at exit)" in out and "{'backend': 'aot_eager'}" in out
    # Each state before the judged one is compiled first, in the probe's order.
    compiled = re.findall(r"compiled under (\w+) \(", out)
    assert compiled == ["float32", "autocast_bfloat16", "autocast_float16"], out
    assert re.search(r"logits +torch\.float16 +torch\.float16 ", out), out
    assert f"autocast_float16, {first['output']}: {first['class']}: {first['detail']}" in out, (first, out)
    assert f"expected {first['expected']}, found {first['found']}" in out, (first, out)


def test_every_ambient_state_gives_a_script_that_compiles() -> None:
    """A failure of each of the probe's states, on a GPU and on the CPU, and a crash (every
    state, in a child): valid Python that imports no gpuprobe, in which pyflakes finds no
    undefined name; the states before the failing one are the probe's, in its order."""
    pyflakes_checker = pytest.importorskip("pyflakes.checker")
    pyflakes_messages = pytest.importorskip("pyflakes.messages")
    import ast

    from gpuprobe.repro.generate import generate as make
    from gpuprobe.worker.patterns import derive_seed
    from gpuprobe.worker.probes.compile import ambient as compile_ambient

    plan = make_plan(None, [], {})
    names = [s.name for s in compile_ambient.STATES]
    for number, name in enumerate(names):
        for device in ("cuda:0", "cpu"):
            text, info = make(_ambient_result(name, device), plan)
            compile(text, f"{AMBIENT_PROBE}/{name}/repro.py", "exec")
            assert not re.search(r"^\s*(import|from)\s+gpuprobe", text, re.M)
            assert re.findall(r"State\(name='(\w+)'", text) == names[: number + 1], name
    text, info = make(_ambient_result(names[0], "cpu", "crash"), plan)
    assert info["crash_child"] is True and re.findall(r"State\(name='(\w+)'", text) == names
    # The probe's seed (``ctx.derive_seed("ambient")``), in the probe's own lines that use it.
    assert f"AMBIENT_SEED = {derive_seed(SEED, AMBIENT_PROBE, 'ambient')}" in text
    assert "manual_seed(AMBIENT_SEED % (2**31))" in text and "ctx" not in _case_section(text)
    checker = pyflakes_checker.Checker(ast.parse(text), filename=f"{AMBIENT_PROBE}/repro.py")
    undefined = [str(m) for m in checker.messages if isinstance(m, pyflakes_messages.UndefinedName)]
    assert not undefined, undefined


def test_an_ambient_failure_without_a_known_state_says_why() -> None:
    from gpuprobe.repro.families import NoRepro
    from gpuprobe.repro.generate import generate as make

    plan = make_plan(None, [], {})
    with pytest.raises(NoRepro, match="'float8' is not one of the probe's states"):
        make(_ambient_result("float8"), plan)
    result = _ambient_result("float32")
    result["observation"]["measurement"]["failures"] = []
    with pytest.raises(NoRepro, match="lists no failing state"):
        make(result, plan)


# ---------------------------------------------------------------------------------------------
# The training paths: optim, graph and train, each failing case rebuilt with the probe's own
# code (copied into the script) and judged by the probe's own judge.

#: The implementations whose recipes read the failing case from the observation (or, for a
#: crash, from the worker's log): the catalog-wide compile test leaves them to the test
#: below, which names a case per probe.
TRAINING_PATH_IMPLS = (
    "gpuprobe.worker.probes.optim.run:",
    "gpuprobe.worker.probes.graph.run:",
    "gpuprobe.worker.probes.train.run:",
)
#: (probe, the start of the failing variant the script rebuilds): the fused optimizer step and
#: GradScaler's fused AdamW under optim-fused-zeros, a graphed MLP training step and two graphs
#: sharing a pool under graph-stale, the bf16 transformer under train-bf16-step-nan.
TRAINING_CASES = [
    ("optim.adamw.fp32", "fused+"),
    ("optim.gradscaler.fp32", "fused+adamw"),
    ("graph.training.fp32", "mlp_graphed_"),
    ("graph.pool.fp32", "pointwise_chain."),
    ("train.transformer.bf16", "float64"),
]


def training_spec() -> dict[str, Any]:
    """The three families' presets in one spec: each fault meets only its own family's probes."""
    faults = [f for name in ("optim-fused-zeros", "graph-stale", "train-bf16-step-nan") for f in load_preset(name)["fault"]]
    return {"source": "test:training-paths", "fault": faults}


@pytest.fixture(scope="module")
def training_results() -> dict[str, Any]:
    """One worker run of every probe of ``TRAINING_CASES`` at the standard tier (the optimizer
    probes' subset of configurations), under ``training_spec``."""
    plan = {
        "protocol": 1,
        "mode": "run",
        "device": "cpu",
        "probes": sorted({probe for probe, _ in TRAINING_CASES}),
        "seed": SEED,
        "simulate": training_spec(),
        "options": {"tier": "standard"},
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HSA_", "AMD_", "HIP_"))}
    # One intra-op thread: the cases are small, and on a busy host the fused optimizer
    # kernels' threads mostly wait for each other (3 s a script instead of 7).
    env["OMP_NUM_THREADS"] = "1"
    run = run_worker(plan, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.results()


def _with_first(event: dict[str, Any], failure: dict[str, Any]) -> dict[str, Any]:
    """The event with ``failure`` as the first failure its observation lists."""
    observation = json.loads(json.dumps(event["observation"]))
    observation["measurement"]["failures"] = [failure]
    return {**event, "observation": observation}


@pytest.mark.parametrize("probe,variant", TRAINING_CASES, ids=[f"{p}:{v}" for p, v in TRAINING_CASES])
def test_training_path_case_reproduces_only_under_simulation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, training_results: dict[str, Any], probe: str, variant: str
) -> None:
    """The case the worker recorded is rebuilt from the probe's seeds with the probe's own
    code: on the healthy CPU it passes; under the shim the script prints the failure class,
    detail and element the worker recorded."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as the worker ran (training_results)
    spec = training_spec()
    event = training_results[probe]
    failures = event["observation"]["measurement"]["failures"]
    failure = next((f for f in failures if f["variant"].startswith(variant)), None)
    assert failure is not None, [f["variant"] for f in failures]
    made = generate(tmp_path, as_result(_with_first(event, failure), {"verdict": "fail"}, {}, True), make_plan(spec, [probe], {}))
    assert made.returncode == 0, made.stderr
    info = json.loads((tmp_path / "out" / "repro.json").read_text())
    assert info["family"] == probe.split(".")[0] and info["needs"] == ["torch"] and info["crash_child"] is False
    faulty = check_script(tmp_path / "out" / "repro.py", spec)
    assert f"{failure['class']}: {failure['detail']}" in faulty.stdout, (failure, faulty.stdout)
    assert f"expected {failure['expected']}, found {failure['found']}" in faulty.stdout, (failure, faulty.stdout)


def _training_result(
    probe: str, variant: str, device: str = "cuda:0", verdict: str = "fail", tail: list[str] | None = None
) -> dict[str, Any]:
    """A result as report.json carries it: a failure of ``variant``, or with ``tail`` a crash or
    hang whose observation is empty and whose worker log is ``tail``."""
    failure = {"class": "wrong_value", "variant": variant, "direction": "step1", "sample": 0, "output": "x", "detail": "d"}
    observation = {"measurement": {"failures": [failure], "errors": []}, "metrics": {"seed": 7}}
    result: dict[str, Any] = {"probe": probe, "device": device, "verdict": {"verdict": verdict}, "observation": observation}
    if tail is not None:
        result["verdict"]["stderr_tail"] = tail
        result["observation"] = {}
    return result


def _variants(definition: Any, device: str) -> list[str]:
    """Failing variants for a probe of the training paths, as its worker names them."""
    import torch

    from gpuprobe.repro.families import optim as optim_recipes
    from gpuprobe.worker.probes.graph import run as graph_run
    from gpuprobe.worker.probes.optim import run as optim_run

    impl, p = definition.impl.rsplit(":", 1)[-1], definition.params
    if impl == "run_optimizer":
        cls = getattr(torch.optim, p["class_name"], None)
        if cls is None:
            return []
        impls = optim_run.implementations(cls)
        device_type = device.split(":")[0]
        names = list(optim_recipes._configurations(cls, p["class_name"], device_type, "main"))
        out = [f"{i}+{names[0]}" for i in impls]
        lists = [s for s, on in (("mixed_dtypes", p.get("mixed")), ("grad_layouts", p.get("layouts"))) if on]
        # Every configuration once: they do not depend on the dtype, and the zero-gradient
        # list steps the database's and the extreme ones.
        every_config = p["dtype"] == "fp32" and device_type == "cuda"
        if p.get("zero_grads", True) and hasattr(optim_run, "zero_grad_list"):
            lists.append("zero_grads")
            if every_config:
                edges = optim_recipes._configurations(cls, p["class_name"], device_type, "zero_grads")
                out += [f"{impls[-1]}+{n}+zero_grads" for n in edges]
        elif every_config:
            out += [f"{impls[-1]}+{n}" for n in names]
        return out + [f"{impls[0]}+{names[0]}+{suffix}" for suffix in lists]
    if impl == "run_gradscaler":
        return [f"{i}+{name}" for name, class_name, _ in optim_run.SCALER_OPTIMIZERS
                for i in optim_run.implementations(getattr(torch.optim, class_name))]
    if impl == "run_reduce_overhead":
        phases = (("", 3), (".reshape", 1), (".back", 0))
        return [f"{g}{phase}.replay{k}" for g in p["groups"] for phase, k in phases] + [f"{t}.replay3" for t in p.get("training", [])]
    if impl in ("run", "run_nested"):
        return ["float64"]
    # Every workload once (they do not depend on the dtype), else the first.
    workloads = p["workloads"] if p["dtype"] == "fp32" else p["workloads"][:1]
    return [f"{w}.replay{graph_run.REPLAYS}" for w in workloads]


def _case_section(text: str) -> str:
    """The script's case section (the part a recipe writes)."""
    return text.split("\n# The case.\n", 1)[1].split("\n# -----", 1)[0]


def test_every_training_path_probe_gives_a_script_that_compiles() -> None:
    """Every optim, graph and train probe of the catalog gets a script for a failure of each
    of its implementations, parameter lists, workloads and phases (and, for the fp32
    optimizer probes on a GPU, each configuration), on a GPU and on the CPU, and for a crash:
    valid Python that imports no gpuprobe, in which (for each distinct copy of the probe's
    code) pyflakes finds no undefined name."""
    pyflakes_checker = pytest.importorskip("pyflakes.checker")
    pyflakes_messages = pytest.importorskip("pyflakes.messages")
    import ast

    from gpuprobe.repro import families
    from gpuprobe.repro.generate import generate as make
    from gpuprobe.worker import catalog

    plan = make_plan(None, [], {})
    covered = 0
    flaked: set[tuple[str, int]] = set()
    checked = 0
    for probe, definition in catalog.all_probes().items():
        if not definition.impl.startswith(TRAINING_PATH_IMPLS):
            continue
        if definition.impl in families.NOT_REBUILT:
            continue  # no script by decision (its reason: test_every_probe_has_a_recipe_or_a_reason)
        # The CPU differs in which optimizer configurations apply (no capturable ones), not in
        # how a case is written: once per kind of optimizer probe.
        optimizer = definition.impl.endswith(("run_optimizer", "run_gradscaler"))
        for device in ("cuda:0", "cpu") if not optimizer or definition.params["dtype"] == "fp32" else ("cuda:0",):
            texts = []
            for variant in _variants(definition, device):
                text, info = make(_training_result(probe, variant, device), plan)
                texts.append(text)
            if not optimizer:
                # A crash whose log names nothing: every workload of the probe, in a child.
                text, info = make(_training_result(probe, "", device, "crash", []), plan)
                assert info["crash_child"] is True
                texts.append(text)
            for number, text in enumerate(texts):
                # The cases of a probe share all but the literals at the head of their case
                # section (its case, configuration, seeds); the first and last in full (the
                # last: every workload, for graph probes).
                whole = number in (0, len(texts) - 1)
                compile(text if whole else _case_section(text).split("\ndef case_label(", 1)[0], f"{probe}/repro.py", "exec")
                assert not re.search(r"^\s*(import|from)\s+gpuprobe", text, re.M), probe
                covered += 1
            for text in texts:
                # Each distinct copy of the probe's code (between the scaffold's header and the
                # case), with the case section of the first case that has it.
                copied = text.split("\n# The case.\n", 1)[0].split("imported in main(), after ENV is applied", 1)[1]
                key = (definition.impl.split(":")[0], hash(copied))
                if key in flaked:
                    continue
                flaked.add(key)
                checker = pyflakes_checker.Checker(ast.parse(text), filename=f"{probe}/repro.py")
                undefined = [str(m) for m in checker.messages if isinstance(m, pyflakes_messages.UndefinedName)]
                assert not undefined, undefined
                checked += 1
    assert covered > 400 and checked > 8, (covered, checked)


@pytest.mark.parametrize(
    "probe,variant,reason",
    [
        ("optim.adamw.fp32", "fused+default+sparse_rows", "'sparse_rows' is neither an argument of torch.optim.AdamW"),
        ("optim.adamw.fp32", "fused+lr=tensor+amsgrad+nesterov", "names a tensor argument whose value is not in the probe's table"),
        ("optim.adamw.fp32", "triple+default", "implementation 'triple'"),
        ("optim.gradscaler.fp32", "fused+lbfgs", "optimizer 'lbfgs'"),
        ("graph.capture.fp32", "pointwise_chain.capture", "does not name a replay"),
        ("graph.capture.fp32", "attention.replay1", "workload 'attention'"),
        ("graph.reduce_overhead.fp32", "dense.resized.replay1", "no phase of the reduce-overhead protocol"),
    ],
)
def test_training_path_cases_without_a_script_say_why(probe: str, variant: str, reason: str) -> None:
    """A variant the generator cannot rebuild (a tag that is no argument of the optimizer nor
    a known parameter list, an unknown workload or phase) is ``no repro`` naming it."""
    from gpuprobe.repro.families import NoRepro
    from gpuprobe.repro.generate import generate as make

    with pytest.raises(NoRepro, match=re.escape(reason)):
        make(_training_result(probe, variant), make_plan(None, [probe], {}))


def test_training_path_crashes_are_found_from_the_worker_log() -> None:
    """A crash names no case in its observation: the worker's last log line names the
    optimizer configuration (every implementation of it runs in a child) or the graph
    workload; without such a line an optimizer crash has no script, a graph crash runs every
    workload."""
    from gpuprobe.repro.families import NoRepro
    from gpuprobe.repro.generate import generate as make

    plan = make_plan(None, [], {})
    tail = ["noise", "gpuprobe optim: adamw fp32 weight_decay=0.1+amsgrad+mixed_dtypes", "Fatal Python error: Aborted"]
    text, info = make(_training_result("optim.adamw.fp32", "", "cpu", "crash", tail), plan)
    assert info["crash_child"] is True
    assert "CONFIG = 'weight_decay=0.1+amsgrad'" in text and "LIST = 'mixed_dtypes'" in text
    assert all(f"'implementation': '{i}'" in text for i in ("forloop", "foreach", "fused")), text
    with pytest.raises(NoRepro, match="gpuprobe optim:"):
        make(_training_result("optim.adamw.fp32", "", "cpu", "crash", ["noise"]), plan)
    tail = ["gpuprobe graph: graph.capture.fp32 pointwise_chain", "gpuprobe graph: graph.capture.fp32 linear"]
    text, _ = make(_training_result("graph.capture.fp32", "", "cpu", "hang", tail), plan)
    assert "'workload': 'linear'" in text and "'workload': 'pointwise_chain'" not in text
    text, _ = make(_training_result("graph.capture.fp32", "", "cpu", "crash", []), plan)
    assert "'workload': 'linear'" in text and "'workload': 'pointwise_chain'" in text
    text, info = make(_training_result("train.convnet.fp16.compile", "", "cpu", "crash", []), plan)
    assert info["crash_child"] is True and "COMPILED = True" in text and "PRECISION = 'fp16'" in text


def test_reduce_overhead_script_cannot_run_without_a_gpu(tmp_path: Path) -> None:
    """A reduce-overhead case replays every phase up to the failing one (here the second
    recording's); it needs CUDA graphs: on a CPU the script says so and exits 2 (as every
    script does for a GPU that is not there, ``test_no_torch_is_cannot_run``)."""
    probe = "graph.reduce_overhead.fp32"
    made = generate(tmp_path, _training_result(probe, "dense.reshape.replay1"), make_plan(None, [probe], {}))
    assert made.returncode == 0, made.stderr
    script = tmp_path / "out" / "repro.py"
    text = script.read_text()
    assert "'label': 'dense', 'last': 4" in text and "'label': 'dense.reshape', 'last': 1" in text
    assert "dense.back" not in text
    cpu = run_script(script)
    assert cpu.returncode == 2 and last_line(cpu) == "CANNOT RUN: reduce-overhead uses CUDA graphs; the device under test is the CPU"
