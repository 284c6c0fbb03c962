"""The sweep family on the CPU: a healthy run passes, planted faults of each oracle class are
caught and classified (fault simulation), an unavailable database is a SKIP with its reason,
the expanded catalog lists the database, and docs/probes.md holds the coverage table this
code generates."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from conftest import PACKAGE_DIR, run_plan, run_worker

from gpuprobe.worker.probes.sweep import ref as sweep_ref

SEED = 4242
#: A small cross-section: elementwise, reduction, scan, convolution, sort, normalization.
HEALTHY = [
    "sweep.add.fp32",
    "sweep.add.bf16",
    "sweep.sum.fp32",
    "sweep.cumsum.bf16",
    "sweep.nn.functional.conv2d.fp32",
    "sweep.sort.fp32",
    "sweep.nn.functional.layer_norm.bf16",
    "sweep.mul.fp64",
    # A decomposition under NaN/Inf input: judged by its own rule (nonfinite_swallowed).
    "sweep.linalg.svd.fp32",
]


def _fault(
    name: str, effect: str, methods: list[str], variants: list[str] | None = None, message: str | None = None
) -> dict[str, Any]:
    when: dict[str, Any] = {"methods": methods}
    if variants:
        when["variants"] = variants
    kind: dict[str, Any] = {"kind": effect}
    if message:
        kind["message"] = message
    return {"name": name, "op": "sweep", "when": when, "effect": kind}


def _measurement(run: Any, probe: str) -> dict[str, Any]:
    result = run.results()[probe]
    assert result["outcome"] == "observed", result
    return result["observation"]["measurement"]


@pytest.fixture(scope="module")
def healthy() -> Any:
    run = run_plan(HEALTHY, seed=SEED, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_healthy_cpu_sweep_passes(healthy: Any) -> None:
    for probe in HEALTHY:
        m = _measurement(healthy, probe)
        assert m["kind"] == "sweep"
        assert m["cases"] >= 5, (probe, m)
        assert m["failed"] == {} and m["device_errors"] == 0, (probe, m["failures"], m["errors"])
        assert m["passed"] == m["cases"], probe
        assert m["nonfinite_swallowed"] == 0, probe


def test_cases_cover_transforms_and_directions(healthy: Any) -> None:
    def variants(probe: str) -> set[str]:
        return set(healthy.results()[probe]["observation"]["metrics"]["variants"].split(","))

    metrics = healthy.results()["sweep.add.fp32"]["observation"]["metrics"]
    assert {"base", "noncontig", "transposed", "broadcast", "nan", "posinf", "empty", "size1", "tail257"} <= variants("sweep.add.fp32")
    assert {"arg_empty", "arg_size1"} <= variants("sweep.add.fp32")
    assert metrics["directions"] == "backward,forward"
    assert "channels_last" in variants("sweep.nn.functional.conv2d.fp32")
    # The large shapes of a reduction (a plan that names no tier runs them), and the
    # non-finite values of a decomposition.
    assert {"large_batch", "large_reduced"} <= variants("sweep.sum.fp32")
    assert {"nan", "posinf", "neginf", "negnan"} <= variants("sweep.linalg.svd.fp32")


@pytest.fixture(scope="module")
def planted() -> Any:
    faults = [
        _fault("wrong-noncontig", "partial_zeros", ["add"], ["noncontig"]),
        _fault("zeros", "zeros", ["cumsum"]),
        _fault("nan", "nan", ["nn.functional.conv2d"]),
        _fault("lost-nan", "drop_nan", ["sort"], ["nan"]),
        # A decomposition whose NaN vanish: its own class, reported, not a failure.
        _fault("swallowed-nan", "drop_nan", ["linalg.inv"], ["nan"]),
        _fault("raise", "exception", ["mul"], ["transposed"], "CUDA error: an illegal memory access was encountered"),
        # An argument check that refuses a layout the CPU computes: stricter, not wrong math.
        _fault("refuse", "exception", ["sub"], ["transposed"], "Expected contiguous tensor, but got non-contiguous tensor"),
        _fault("grad", "partial_zeros", ["nn.functional.layer_norm"], ["backward"]),
    ]
    probes = [
        "sweep.add.fp64",
        "sweep.cumsum.fp32",
        "sweep.nn.functional.conv2d.fp32",
        "sweep.sort.fp32",
        "sweep.mul.fp32",
        "sweep.nn.functional.layer_norm.fp32",
        "sweep.sum.fp32",
        "sweep.sub.fp32",
        "sweep.linalg.inv.fp32",
    ]
    run = run_plan(probes, seed=SEED, simulate={"source": "test", "fault": faults}, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_planted_faults_are_caught_and_classified(planted: Any) -> None:
    add = _measurement(planted, "sweep.add.fp64")
    # Planted on non-contiguous inputs only: caught there and nowhere else.
    assert add["failed"].get("wrong_value", 0) >= 1, add
    assert {f["variant"] for f in add["failures"]} == {"noncontig"}, add["failures"]
    cumsum = _measurement(planted, "sweep.cumsum.fp32")
    assert cumsum["failed"].get("wrong_value", 0) >= 1
    assert any(f["all_zero"] for f in cumsum["failures"]), cumsum["failures"]
    conv = _measurement(planted, "sweep.nn.functional.conv2d.fp32")
    assert conv["failed"].get("nonfinite_invented", 0) >= 1, conv
    sort = _measurement(planted, "sweep.sort.fp32")
    assert sort["failed"].get("nan_lost", 0) >= 1, sort
    mul = _measurement(planted, "sweep.mul.fp32")
    assert mul["device_errors"] >= 1 and mul["failed"] == {}, mul
    assert all(e["variant"] == "transposed" for e in mul["errors"])
    norm = _measurement(planted, "sweep.nn.functional.layer_norm.fp32")
    assert norm["failed"] and {f["direction"] for f in norm["failures"]} == {"backward"}, norm
    sub = _measurement(planted, "sweep.sub.fp32")
    assert sub["refused"] >= 1 and sub["device_errors"] == 0 and sub["failed"] == {}, sub
    assert any("refused" in n and "transposed" in n for n in planted.results()["sweep.sub.fp32"]["observation"]["notes"])
    inverse = _measurement(planted, "sweep.linalg.inv.fp32")
    assert inverse["nonfinite_swallowed"] >= 1 and inverse["failed"] == {} and inverse["device_errors"] == 0, inverse
    notes = planted.results()["sweep.linalg.inv.fp32"]["observation"]["notes"]
    assert any("came back as finite numbers" in n and "looks valid but is meaningless" in n for n in notes), notes
    # A fault aimed at other ops leaves this one alone.
    assert _measurement(planted, "sweep.sum.fp32")["failed"] == {}
    for result in planted.results().values():
        assert any("SIMULATED" in n for n in result["observation"]["notes"])


#: The new axes on the CPU: integer, boolean and complex dtypes, value classes and call
#: variants (the standard subset's extra dtypes among them).
HEALTHY_AXES = [
    "sweep.add.fp32",
    "sweep.add.i32",
    "sweep.sum.bool",
    "sweep.cumsum.i64",
    "sweep.sort.u8",
    "sweep.matmul.c64",
    "sweep.div.no_rounding_mode.i16",
    "sweep.abs.i8",
    "sweep.reciprocal.fp32",
    "sweep.exp.c128",
]


@pytest.fixture(scope="module")
def healthy_axes() -> Any:
    run = run_plan(HEALTHY_AXES, seed=SEED, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_healthy_cpu_new_axes_pass(healthy_axes: Any) -> None:
    from gpuprobe.worker.probes.sweep import cases as sweep_cases

    for probe in HEALTHY_AXES:
        m = _measurement(healthy_axes, probe)
        assert m["cases"] >= 5, (probe, m)
        assert m["failed"] == {} and m["device_errors"] == 0, (probe, m["failures"], m["errors"])
        notes = healthy_axes.results()[probe]["observation"]["notes"]
        assert not any("harness" in n for n in notes), (probe, notes)
    variants = lambda probe: set(healthy_axes.results()[probe]["observation"]["metrics"]["variants"].split(","))  # noqa: E731
    # Run by a plan that names no tier: every value class and call variant the entry has.
    assert set(sweep_cases.FLOAT_VALUE_CLASSES + sweep_cases.CALL_VARIANTS) <= variants("sweep.add.fp32")
    assert set(sweep_cases.INTEGER_VALUE_CLASSES + sweep_cases.CALL_VARIANTS) <= variants("sweep.add.i32")
    assert not set(sweep_cases.INTEGER_VALUE_CLASSES) & variants("sweep.add.fp32")
    assert not {"nan", "posinf", "neginf"} & variants("sweep.add.i32")
    # An unsigned dtype has no minimum below zero and nothing to negate.
    assert {"intmax"} <= variants("sweep.sort.u8") and not {"intmin", "negative"} & variants("sweep.sort.u8")


@pytest.fixture(scope="module")
def planted_axes() -> Any:
    def fault(name: str, methods: list[str], dtypes: list[str] | None = None, variants: list[str] | None = None) -> dict[str, Any]:
        spec = _fault(name, "partial_zeros", methods, variants)
        if dtypes:
            spec["when"]["dtypes"] = dtypes
        return spec

    faults = [
        fault("int32-add", ["add"], dtypes=["int32"]),
        fault("complex-matmul", ["matmul"], dtypes=["complex64"]),
        fault("bool-sum", ["sum"], dtypes=["bool"]),
        fault("out", ["mul"], variants=["out"]),
        fault("inplace", ["sub"], variants=["inplace"]),
        fault("method", ["div"], variants=["method"]),
        fault("narrow", ["exp"], variants=["out_narrow"]),
        fault("subnormal", ["reciprocal"], variants=["subnormal"]),
        fault("intmin", ["abs"], dtypes=["int16"], variants=["intmin"]),
    ]
    probes = [
        "sweep.add.i32",
        "sweep.add.fp32",
        "sweep.matmul.c64",
        "sweep.sum.bool",
        "sweep.mul.fp32",
        "sweep.sub.fp32",
        "sweep.div.no_rounding_mode.fp32",
        "sweep.exp.fp32",
        "sweep.reciprocal.fp32",
        "sweep.abs.i16",
    ]
    run = run_plan(probes, seed=SEED, simulate={"source": "test", "fault": faults}, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


@pytest.mark.parametrize(
    ("probe", "variant"),
    [
        ("sweep.add.i32", None),
        ("sweep.matmul.c64", None),
        ("sweep.sum.bool", None),
        ("sweep.mul.fp32", "out"),
        ("sweep.sub.fp32", "inplace"),
        ("sweep.div.no_rounding_mode.fp32", "method"),
        ("sweep.exp.fp32", "out_narrow"),
        ("sweep.reciprocal.fp32", "subnormal"),
        ("sweep.abs.i16", "intmin"),
    ],
)
def test_planted_faults_on_each_new_axis_are_caught_and_named(planted_axes: Any, probe: str, variant: str | None) -> None:
    m = _measurement(planted_axes, probe)
    assert m["failed"].get("wrong_value", 0) >= 1, (probe, m)
    if variant is not None:
        # Planted on one value class or call variant: caught there and nowhere else.
        assert {f["variant"] for f in m["failures"]} == {variant}, m["failures"]
    assert any("SIMULATED" in n for n in planted_axes.results()[probe]["observation"]["notes"])


def test_a_dtype_fault_leaves_the_other_dtypes_alone(planted_axes: Any) -> None:
    assert _measurement(planted_axes, "sweep.add.fp32")["failed"] == {}


def test_the_standard_subset_covers_every_value_class_and_call_variant() -> None:
    """Below the full tier each subset probe runs a few of the new axes: together they run
    every one of them on some operator (it applies to a sample there)."""
    import torch

    from gpuprobe.worker.probes.sweep import cases as sweep_cases
    from gpuprobe.worker.probes.sweep import db as sweep_db
    from gpuprobe.worker.probes.sweep import specs as sweep_specs

    database = sweep_db.load(torch)
    covered: dict[str, list[str]] = {}
    for key, dtype in sweep_specs.standard_probes():
        name = sweep_db.DTYPES[dtype]
        info = database.entry(key)
        samples = sweep_cases.generate_samples(torch, info, name, 0, requires_grad=False)
        for transform in sweep_specs.subset_new_axes(key, dtype):
            if any(sweep_cases.applicable(torch, info, s, transform, name) for s in samples):
                covered.setdefault(transform, []).append(f"{key}.{dtype}")
    assert sorted(set(sweep_cases.NEW_AXES) - set(covered)) == []
    # Every dtype kind is in the subset.
    kinds = {sweep_db.dtype_kind(sweep_db.DTYPES[d]) for _k, d in sweep_specs.standard_probes()}
    assert kinds == {"float", "integer", "bool", "complex"}


def test_a_standard_run_limits_the_new_axes_and_a_full_run_does_not() -> None:
    from gpuprobe.worker import catalog
    from gpuprobe.worker.probes.sweep import cases as sweep_cases

    probe = catalog.lookup("sweep.add.fp32")
    assert probe.tier == "standard" and probe.params["subset"] == ["negzero", "negnan"]
    assert catalog.lookup("sweep.add.i32").params["subset"][:3] == list(sweep_cases.INTEGER_VALUE_CLASSES)
    variants = {}
    for tier in ("standard", "full"):
        plan = {"protocol": 1, "mode": "run", "device": "cpu", "probes": ["sweep.add.fp32"], "seed": SEED, "options": {"tier": tier}}
        run = run_worker(plan, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        variants[tier] = set(run.results()["sweep.add.fp32"]["observation"]["metrics"]["variants"].split(","))
    new = set(sweep_cases.NEW_AXES)
    assert variants["standard"] & new == {"negzero", "negnan"}
    assert variants["full"] & new >= set(sweep_cases.FLOAT_VALUE_CLASSES + sweep_cases.CALL_VARIANTS)


def test_unavailable_database_is_a_skip_with_reason(tmp_path: Any) -> None:
    # A torch.testing._internal that cannot be imported stands for a torch without it.
    shadow = tmp_path / "shadow"
    (shadow / "torch_shadow").mkdir(parents=True)
    sitecustomize = shadow / "sitecustomize.py"
    sitecustomize.write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('torch.testing._internal.common_methods_invocations'):\n"
        "            raise ImportError('blocked for the test')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Block())\n",
        encoding="utf-8",
    )
    env = {"PYTHONPATH": str(shadow) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = run_plan(["sweep.add.fp32", "sweep.opdb"], seed=SEED, env_extra=env, timeout=300)
    results = run.results()
    for probe in ("sweep.add.fp32", "sweep.opdb"):
        assert results[probe]["outcome"] == "skip", results[probe]
        assert "operator database" in results[probe]["reason"] and "blocked for the test" in results[probe]["reason"]


def test_a_fresh_reference_process_starts_before_the_worker_imports_torch(tmp_path: Any) -> None:
    # When torch's import begins in the worker (its first submodule lookup: looking the
    # package up alone imports nothing), the worker notes its child processes: a reference
    # process that is not a fork must already be one of them, starting beside the import.
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc to list a process's children")
    trace = tmp_path / "trace.txt"
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(
        "import os, sys\n"
        "def _children():\n"
        "    out = []\n"
        "    for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "        try:\n"
        "            stat = open(f'/proc/{pid}/stat').read()\n"
        "            cmd = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode()\n"
        "        except OSError:\n"
        "            continue\n"
        "        if int(stat.rsplit(')', 1)[1].split()[1]) == os.getpid():\n"
        "            out.append(cmd)\n"
        "    return out\n"
        "class _Watch:\n"
        "    seen = False\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('torch.') and not self.seen:\n"
        "            self.seen = True\n"
        "            with open(os.environ['GPUPROBE_TEST_TRACE'], 'a') as f:\n"
        "                f.write(repr(_children()) + '\\n')\n"
        "        return None\n"
        "if os.environ.get('GPUPROBE_TEST_TRACE') and not os.environ.get('GPUPROBE_SWEEP_REFERENCE'):\n"
        "    sys.meta_path.insert(0, _Watch())\n",
        encoding="utf-8",
    )
    env = {
        "PYTHONPATH": str(shadow) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "GPUPROBE_TEST_TRACE": str(trace),
        # A framework switch under test: a fork of the worker would inherit it, so the
        # reference is a fresh interpreter, started ahead.
        "GPUPROBE_SWITCHES": "torch.backends.cudnn.enabled=False",
    }
    run = run_plan(["dtype.fp32.fp16.to.device", "sweep.add.fp32"], seed=SEED, env_extra=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.results()["sweep.add.fp32"]["outcome"] == "observed"
    assert run.results()["sweep.add.fp32"]["observation"]["metrics"]["reference_process"] == "spawn"
    children_at_import = trace.read_text(encoding="utf-8").splitlines()
    assert len(children_at_import) == 1, children_at_import
    assert "sweep_ref" in children_at_import[0], children_at_import
    # A plan without sweep probes starts no helper.
    trace.unlink()
    run = run_plan(["dtype.fp32.fp16.to.device"], seed=SEED, env_extra=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "sweep_ref" not in trace.read_text(encoding="utf-8")


def test_the_reference_is_a_fork_of_the_worker() -> None:
    # The reference process is a fork of the worker made after the database import: the
    # same verdicts, no second import. Two CPU threads in the worker: the fork runs on one.
    run = run_plan(["sweep.add.fp32"], seed=SEED, env_extra={"OMP_NUM_THREADS": "2"}, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = run.results()["sweep.add.fp32"]
    assert result["outcome"] == "observed", result
    metrics = result["observation"]["metrics"]
    assert metrics["reference_process"] == "fork", metrics
    assert metrics["reference_restarts"] == 0
    assert result["observation"]["measurement"]["failed"] == {}, result


def test_a_forked_reference_that_dies_is_replaced_by_another_fork() -> None:
    import torch

    from gpuprobe.worker.probes.sweep import cases as sweep_cases
    from gpuprobe.worker.probes.sweep import db as sweep_db

    if sweep_ref.fork_refusal() is not None:
        pytest.skip(f"no fork here: {sweep_ref.fork_refusal()}")
    reference = sweep_ref.ReferenceProcess()
    try:
        assert sweep_ref.fork_refusal() is None
        reference.prestart()  # nothing ahead: forked at the first reference
        info = sweep_db.load(torch).entry("add")
        samples = sweep_cases.generate_samples(torch, info, "float32", SEED, False)
        request = {
            "key": "add", "dtype": "float32", "seed": SEED, "requires_grad": False, "sample": 0,
            "digest": sweep_cases.digest(torch, samples[0]), "transform": "base", "backward": False,
        }
        first = reference.compute(request)
        assert first["ok"] and reference.made_by == "fork", first
        os.kill(reference._proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
        reference._proc.wait(timeout=10)  # type: ignore[union-attr]
        again = reference.compute(request)
        assert again["ok"] and reference.restarts == 1 and reference.made_by == "fork", again
        assert torch.equal(again["outputs"][0], first["outputs"][0])
    finally:
        reference.close()


def test_the_database_loads_without_importing_packages_it_does_not_need(tmp_path: Any) -> None:
    # numba and hypothesis that stop the interpreter when imported: the database must load
    # all the same, with the same entries, and leave both importable afterwards.
    for name in ("numba", "hypothesis"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise SystemExit('{name} was imported')\n", encoding="utf-8")
    code = (
        "import importlib.util, json, sys, torch\n"
        "from gpuprobe.worker.probes.sweep import db\n"
        "ops = db.load(torch).ops\n"
        "print(json.dumps({'keys': sorted(ops), 'loaded': [m for m in ('numba', 'hypothesis') if m in sys.modules],"
        " 'findable': importlib.util.find_spec('numba') is not None}))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(PACKAGE_DIR)]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    import torch

    from gpuprobe.worker.probes.sweep import db as sweep_db

    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["loaded"] == [] and seen["findable"], seen
    assert seen["keys"] == sorted(sweep_db.load(torch).ops)


def test_helpers_start_once_per_starter_and_a_failure_is_a_note(monkeypatch: Any) -> None:
    import types

    from gpuprobe.worker import catalog

    calls: list[str] = []
    helpers = types.ModuleType("gpuprobe_test_helpers")
    helpers.ok = lambda: calls.append("ok")  # type: ignore[attr-defined]

    def broken() -> None:
        calls.append("broken")
        raise OSError("no process for the test")

    helpers.broken = broken  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpuprobe_test_helpers", helpers)
    probes = {
        "a.one": catalog.ProbeDef("a.one", "quick", {}, "", "m:f", helpers="gpuprobe_test_helpers:ok"),
        "a.two": catalog.ProbeDef("a.two", "quick", {}, "", "m:f", helpers="gpuprobe_test_helpers:ok"),
        "b.one": catalog.ProbeDef("b.one", "quick", {}, "", "m:f", helpers="gpuprobe_test_helpers:broken"),
        "c.one": catalog.ProbeDef("c.one", "quick", {}, "", "m:f"),
    }
    monkeypatch.setattr(catalog, "lookup", probes.get)
    assert catalog.start_helpers(["c.one", "unknown.probe"]) == []
    assert calls == []
    notes = catalog.start_helpers(["a.one", "c.one", "a.two", "b.one"])
    assert calls == ["ok", "broken"]
    assert len(notes) == 1 and "b.one" in notes[0] and "no process for the test" in notes[0], notes
    # Every sweep probe names the reference process as its helper.
    monkeypatch.undo()
    assert catalog.lookup("sweep.add.fp32").helpers == catalog.lookup("sweep.opdb").helpers
    assert catalog.lookup("sweep.add.fp32").helpers.endswith("sweep.ref:prestart_shared")


def test_opdb_probe_counts_what_it_drives() -> None:
    run = run_plan(["sweep.opdb"], seed=SEED, timeout=300)
    metrics = run.results()["sweep.opdb"]["observation"]["metrics"]
    assert metrics["entries"] > 500 and 0 < metrics["driven"] <= metrics["entries"]
    assert metrics["fp32_forward"] >= metrics["fp32_backward"] > 100


def test_expanded_catalog_lists_the_database() -> None:
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); import torch; "
        "from gpuprobe.worker import catalog; "
        "extra, notes = catalog.expanded(['sweep'], torch); "
        "print(json.dumps([len(extra), notes, extra[0].spec() if extra else None]))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(PACKAGE_DIR)], capture_output=True, text=True, check=True)
    import json

    count, notes, first = json.loads(out.stdout.strip().splitlines()[-1])
    assert count > 1000 and notes == []
    assert first["id"].startswith("sweep.") and first["rule"] == {"kind": "sweep"}
    assert first["placement"] == "side" and first["lane"].startswith("sweep-") and first["tier"] == "full"


def test_docs_hold_the_generated_coverage_table() -> None:
    import torch

    from gpuprobe.worker.probes.sweep import coverage as sweep_coverage

    text = (PACKAGE_DIR.parent / "docs" / "probes.md").read_text(encoding="utf-8")
    begin, end = "<!-- sweep-coverage:begin -->\n", "<!-- sweep-coverage:end -->"
    assert begin in text and end in text
    documented = text.split(begin, 1)[1].split(end, 1)[0]
    assert documented == sweep_coverage.markdown(torch), (
        "docs/probes.md is out of step: regenerate with python -m gpuprobe.worker.probes.sweep.coverage"
    )


def test_healthy_probes_try_the_databases_error_inputs(healthy: Any) -> None:
    """The first dtype's probe of an entry with error inputs tries them; the CPU rejects each."""
    result = healthy.results()["sweep.nn.functional.conv2d.fp32"]["observation"]
    tried = result["metrics"]["error_inputs"]
    assert tried >= 1, result["metrics"]
    assert any(f"{tried} of the database's error inputs tried" in n and f"{tried} rejected" in n for n in result["notes"])
    assert healthy.results()["sweep.add.bf16"]["observation"]["metrics"]["error_inputs"] == 0


def test_a_device_that_accepts_error_inputs_is_invalid_accepted_not_wrong_math() -> None:
    fault = {"name": "accepts", "op": "sweep", "when": {"methods": ["gather"], "variants": ["error_input"]}, "effect": {"kind": "accept_invalid"}}
    run = run_plan(["sweep.gather.fp32"], seed=SEED, simulate={"source": "test", "fault": [fault]}, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = run.results()["sweep.gather.fp32"]["observation"]
    m = result["measurement"]
    assert m["invalid_accepted"] == result["metrics"]["error_inputs"] >= 1, (m, result["metrics"])
    assert m["failed"] == {} and m["device_errors"] == 0
    assert any("error_input 0: the database expects" in n for n in result["notes"]), result["notes"]
    # A fork would inherit the bound fault: the reference is a fresh interpreter.
    assert result["metrics"]["reference_process"] == "spawn"


def test_full_tier_probes_run_the_reference_inputs_own_samples(healthy: Any) -> None:
    """Run without a tier (the full tier's semantics), a probe of an entry with reference
    inputs runs some of their own samples as base cases; the healthy CPU passes them."""
    observation = healthy.results()["sweep.add.fp32"]["observation"]
    assert observation["metrics"]["reference_samples"] > 0, observation["metrics"]
    assert observation["measurement"]["failed"] == {}
