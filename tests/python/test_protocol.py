"""The worker protocol: modes, event shapes, torch-less interpreters, bad plans."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from conftest import PACKAGE_DIR, SHARED_SEED, run_plan, run_worker

from gpuprobe.worker import catalog

ID_PATTERN = re.compile(r"^[a-z0-9]+(\.[a-z0-9_]+)+$")
# The families the catalogue registers (one line each in FAMILY_SPECS), not a second list to
# keep in step: a published id must start with one of them.
FAMILIES = {specs.split(".")[-2] for specs in catalog.FAMILY_SPECS}
RULE_KINDS = {"bit_exact", "statistical", "invariant", "tolerance", "measure", "sweep"}
SPEC_KEYS = {
    "id",
    "tier",
    "layer",
    "rule",
    "backend",
    "timeout_s",
    "description",
    "needs",
    "isolated",
    "placement",
    "lane",
    "typical_s",
    "native_counterpart",
    "report_group",
}


def test_catalog_mode_lists_valid_unique_specs(catalog_specs: list[dict]) -> None:
    ids = [spec["id"] for spec in catalog_specs]
    assert len(ids) == len(set(ids))
    for spec in catalog_specs:
        assert set(spec) <= SPEC_KEYS, spec
        assert ID_PATTERN.match(spec["id"]), spec["id"]
        family = spec["id"].split(".")[0]
        assert family in FAMILIES, spec["id"]
        assert spec["tier"] in {"quick", "standard", "full", "soak"}
        assert spec["layer"] == ("pipeline" if family == "pipeline" else "framework"), spec["id"]
        assert spec["backend"] == "python"
        assert spec["rule"]["kind"] in RULE_KINDS
        assert spec.get("placement", "shared") in {"shared", "side", "exclusive"}
        if "lane" in spec:
            assert spec["placement"] == "side", "only side probes name a lane"
        if spec["id"].startswith(("alloc.usable", "alloc.largest")):
            assert spec["placement"] == "exclusive", "a probe that fills device memory must run alone"
        assert spec["timeout_s"] > 0
        assert 0 < spec.get("typical_s", 1.0) < spec["timeout_s"], spec["id"]
        assert spec["description"]
        if spec["rule"]["kind"] == "statistical":
            assert 0 < spec["rule"]["alpha"] <= 1e-9
    tiers = {spec["tier"] for spec in catalog_specs}
    assert {"quick", "standard", "full"} <= tiers
    # The ids the design and the knowledge base refer to exist.
    for wanted in (
        "copy.h2d.pageable.tiny.nonblocking",
        "copy.h2d.pinned.tiny.nonblocking",
        "dtype.bf16.fp32.to.device",
        "dtype.bf16.fp32.float.device",
        "dtype.fp32.fp16.half.host",
        "rng.randn_like.fp32",
    ):
        assert wanted in ids
    # The full tier's large cases each get a worker of their own. The sweep's full-tier
    # probes are small (database samples), hundreds of them, and share their lane's worker;
    # so do the attention matrix's (small shapes, references shared across backends).
    # A compile probe is a program of database samples as well: its lane's worker runs one
    # program after another, Dynamo's caches reset between them.
    small = ("sweep.", "nn.sdpa.matrix.", "compile.", "optim.")
    large = [spec for spec in catalog_specs if spec["tier"] == "full" and not spec["id"].startswith(small)]
    assert all(spec.get("isolated") for spec in large)
    assert not any(spec.get("isolated") for spec in catalog_specs if spec["id"].startswith("sweep."))
    fp8 = [spec for spec in catalog_specs if "fp8" in spec["id"]]
    assert fp8 and all(spec.get("needs") == ["fp8"] for spec in fp8)


def test_catalog_mode_hello_has_no_torch_and_is_fast() -> None:
    started = time.perf_counter()
    run = run_worker({"protocol": 1, "mode": "catalog"}, timeout=60)
    elapsed = time.perf_counter() - started
    assert run.returncode == 0, run.stderr
    assert [e["event"] for e in run.events] == ["hello", "catalog", "done"]
    hello = run.hello
    assert hello["protocol"] == 1 and hello["worker"] == "python"
    assert hello["pid"] > 0 and hello["executable"] == sys.executable
    assert hello["torch"] is None and "unusable" not in hello
    assert hello["simulated"] is False
    assert elapsed < 5.0  # process start included; no torch import


def test_catalog_import_does_not_import_torch() -> None:
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); t = time.process_time(); "
        "import gpuprobe, gpuprobe.worker.main; from gpuprobe.worker import catalog; "
        "n = len(catalog.all_probes()); [p.spec() for p in catalog.all_probes().values()]; "
        "print(n, 'torch' in sys.modules, 'numpy' in sys.modules, time.process_time() - t)"
    )
    # CPU time, not wall time: other processes on a shared machine must not fail this. What
    # proves that no framework is imported is the module check below; the bound only catches
    # a listing that became expensive in itself. It must hold on a slow shared 2-core machine,
    # where the same import measured 0.49-0.76 CPU seconds under load (0.2 failed there).
    out = subprocess.run([sys.executable, "-c", code, str(PACKAGE_DIR)], capture_output=True, text=True, check=True)
    count, has_torch, has_numpy, seconds = out.stdout.split()
    assert int(count) > 100
    assert has_torch == "False" and has_numpy == "False"
    assert float(seconds) < 1.5


def test_env_mode_reports_torch_and_allocator_conf() -> None:
    import torch

    env = dict(
        os.environ, PYTORCH_ALLOC_CONF="expandable_segments:True", PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:64"
    )
    run = run_worker({"protocol": 1, "mode": "env"}, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert [e["event"] for e in run.events] == ["hello", "done"]
    info = run.hello["torch"]
    assert info["version"] == torch.__version__
    assert info["gpu_available"] == torch.cuda.is_available()
    assert isinstance(info["arch_list"], list) and isinstance(info["devices"], list)
    assert info["lib_dir"].endswith(os.path.join("torch", "lib"))
    assert run.hello["python_version"] == ".".join(str(v) for v in sys.version_info[:3])
    assert "numpy" in run.hello["packages"]
    assert "unusable" not in run.hello
    # Released torch (measured: 2.11, 2.15) reads PYTORCH_CUDA_ALLOC_CONF first; the other
    # one is shadowed.
    assert info["allocator_conf"] == {
        "variable": "PYTORCH_CUDA_ALLOC_CONF",
        "value": "max_split_size_mb:64",
        "shadowed": ["PYTORCH_ALLOC_CONF"],
    }


def test_run_mode_event_sequence_and_shapes() -> None:
    probes = ["copy.h2d.pageable.medium.blocking", "copy.no.such.probe", "rng.randn.fp32", "dtype.fp16.fp32.to.device"]
    run = run_plan(probes)
    assert run.returncode == 0, run.stderr
    kinds = [e["event"] for e in run.events]
    assert kinds[0] == "hello" and kinds[-1] == "done"
    body = [e for e in run.events if e["event"] in ("begin", "result")]
    assert [(e["event"], e["probe"]) for e in body] == [
        (kind, probe) for probe in probes for kind in ("begin", "result")
    ]
    for event in run.of("begin"):
        assert event["device"] == "cpu"
    results = run.results()
    # An unknown id is an error result, and the worker goes on with the next probe.
    assert results["copy.no.such.probe"]["outcome"] == "error"
    assert results["copy.no.such.probe"]["type"] == "UnknownProbe"
    for probe in ("copy.h2d.pageable.medium.blocking", "rng.randn.fp32", "dtype.fp16.fp32.to.device"):
        event = results[probe]
        assert event["outcome"] == "observed"
        assert event["elapsed_s"] >= 0
        observation = event["observation"]
        assert observation["probe"] == probe and observation["device"] == "cpu"
        assert observation["measurement"]["kind"] in {"compare", "stats", "invariant"}
        assert isinstance(observation["metrics"], dict)
        assert "SIMULATED" not in " ".join(observation["notes"])
    assert run.hello["simulated"] is False


def test_module_entry_point_runs() -> None:
    run = run_worker(
        {"protocol": 1, "mode": "run", "device": "cpu", "probes": ["dtype.fp32.bf16.to.device"], "seed": 3},
        module=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.results()["dtype.fp32.bf16.to.device"]["outcome"] == "observed"


def test_torchless_interpreter_reports_unusable_and_runs_nothing() -> None:
    # -S -I: no site-packages, so torch cannot be imported, as in a bare interpreter.
    run = run_worker(
        {"protocol": 1, "mode": "run", "device": "cuda:0", "probes": ["copy.h2d.pageable.tiny.nonblocking"], "seed": 1},
        python_args=("-S", "-I"),
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert [e["event"] for e in run.events] == ["hello", "done"]
    assert run.hello["torch"] is None
    assert "No module named 'torch'" in run.hello["unusable"]


def test_gpu_device_without_gpu_is_unusable() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    run = run_plan(["copy.h2d.pageable.medium.blocking"], device="cuda:0", timeout=120)
    assert run.returncode == 0, run.stderr
    assert [e["event"] for e in run.events] == ["hello", "done"]
    assert run.hello["torch"]["version"] == torch.__version__
    assert "cuda:0" in run.hello["unusable"] or "no usable GPU" in run.hello["unusable"]


@pytest.mark.parametrize(
    ("plan", "complaint"),
    [
        ({"protocol": 2, "mode": "run", "device": "cpu"}, "protocol"),
        ({"protocol": 1, "mode": "explode"}, "mode"),
        ({"protocol": 1, "mode": "run"}, "device"),
        ({"protocol": 1, "mode": "run", "device": "cpu", "seed": -1}, "seed"),
    ],
)
def test_bad_plans_are_refused(plan: dict, complaint: str) -> None:
    run = run_worker(plan, timeout=60)
    assert run.returncode == 2
    assert run.hello["torch"] is None
    logs = run.of("log")
    assert logs and complaint in logs[0]["message"]
    assert not run.of("done")


def test_same_seed_repeats_observations(quick_and_standard: tuple) -> None:
    shared, _ = quick_and_standard
    probes = ["rng.randn.fp32", "copy.h2d.pageable.tiny.blocking", "rng.multinomial.fp16", "dtype.bf16.fp16.to.device"]
    again = run_plan(probes, seed=SHARED_SEED)
    for probe in probes:
        assert again.measurement(probe) == shared.measurement(probe), probe
    other = run_plan(["rng.randn.fp32"], seed=SHARED_SEED + 1)
    assert other.measurement("rng.randn.fp32")["mean"] != shared.measurement("rng.randn.fp32")["mean"]


@pytest.mark.parametrize("start", [b"start\n", b""])
def test_a_waiting_worker_runs_only_after_the_start_line(start: bytes) -> None:
    plan = {
        "protocol": 1,
        "mode": "run",
        "device": "cpu",
        "probes": ["dtype.bf16.fp32.to.device"],
        "seed": SHARED_SEED,
        "wait_for_start": True,
    }
    run = run_worker(plan, timeout=120, stdin_after_hello=start)
    assert run.returncode == 0, run.stderr
    kinds = [e["event"] for e in run.events]
    if start:
        assert kinds == ["hello", "begin", "result", "done"], kinds
    else:
        # End of input: the supervisor is gone, so nothing runs and nothing more is said.
        assert kinds == ["hello"], kinds
