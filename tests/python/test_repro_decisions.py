"""The repro scripts decide what the probes decided: the script ``gpuprobe repro`` writes for
a case holds the inputs, oracle, bounds and comparison rules the probe itself ran the case
with.

The probe's side is observed, not recomputed: the probe runs on the CPU and what it hands the
code under test is recorded (the sweep's oracle arguments, ``sweep_oracle.compare_leaf``, for
cases that turn each of its per-case decisions; the operands an ops probe hands ``ops_math``;
a convolution's input and weights; an attention probe's q, k, v, mask and output gradient).
The script's side is what its text holds and what its own ``build`` makes."""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
import types
from typing import Any, Callable

import pytest
import torch

from gpuprobe.repro.generate import generate
from gpuprobe.worker import catalog
from gpuprobe.worker.probes.sweep import cases as sweep_cases
from gpuprobe.worker.probes.sweep import db as sweep_db
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
from gpuprobe.worker.probes.sweep import ref as sweep_ref
from gpuprobe.worker.probes.sweep import run as sweep_run

SEED = 7


class _InProcessReference:
    """The sweep's reference (``sweep_ref.handle``) without its process."""

    restarts = 0
    made_by = "in-process"

    def __init__(self) -> None:
        self.cache: dict[Any, Any] = {}

    def compute(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        return sweep_ref.handle(torch, request, self.cache)


class _ScriptTorch:
    """``torch`` for a script's definitions run in this process, its TF32 switches a stand-in:
    a script sets them as its probe ran, and this process's are not its to change (PyTorch's
    operator database, loaded by the sweep tests, freezes cuDNN's)."""

    def __init__(self) -> None:
        self.backends = types.SimpleNamespace(
            cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)),
            cudnn=types.SimpleNamespace(allow_tf32=True),
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


def _script_namespace(monkeypatch: pytest.MonkeyPatch, text: str, name: str) -> dict[str, Any]:
    """The script's definitions, its ``main`` not run."""
    module = types.ModuleType("repro_under_test")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # its dataclasses look it up
    exec(compile(text, name, "exec"), module.__dict__)
    module.__dict__["torch"] = _ScriptTorch()  # the script imports it in main()
    return module.__dict__


def _random(info: Any, sample: Any, index: int, plain: int, dtype_name: str) -> bool:
    return sweep_db.sample_is_random(info.name, sample)


def _mixed(info: Any, sample: Any, index: int, plain: int, dtype_name: str) -> bool:
    weakest = sweep_cases.least_precise_float(torch, sample)
    return weakest is not None and weakest != dtype_name


def _holds_nonfinite(info: Any, sample: Any, index: int, plain: int, dtype_name: str) -> bool:
    return index >= plain and sweep_cases.held_nonfinite(torch, sample, dtype_name) != (False, False)


def _first(info: Any, sample: Any, index: int, plain: int, dtype_name: str) -> bool:
    return True


def _takes_nan(info: Any, sample: Any, index: int, plain: int, dtype_name: str) -> bool:
    return index < plain and sweep_cases.applicable(torch, info, sample, "nan")


#: (entry, dtype, transform, backward, which sample, what the case exercises): each case
#: turns one of the probe's per-case decisions away from the entry's defaults.
CASES: list[tuple[str, str, str, bool, Callable[..., bool], Callable[[Any], bool]]] = [
    # A sample asking for dropout: the structure oracle.
    ("nn.functional.scaled_dot_product_attention", "fp32", "base", False, _random, lambda j: j.oracle == "structure"),
    # float16/bfloat16 gradients accumulated by atomics: the structure oracle.
    ("nn.functional.grid_sample", "bf16", "base", True, _first, lambda j: j.oracle == "structure"),
    # A float64 sample with float32 weights: judged by float32's bounds too.
    ("cov", "fp64", "base", False, _mixed, lambda j: j.atol > sweep_db.tolerance(sweep_db.load(torch).entry("cov"), torch, "float64")[0]),
    # A sample of the entry's reference inputs holding NaN and infinity: judged as if injected.
    ("hypot", "fp32", "base", False, _holds_nonfinite, lambda j: j.rules.nonfinite_input and j.rules.inf_input),
    # An injected NaN: only the pattern of non-finite values, no integer comparison.
    ("add", "bf16", "nan", False, _takes_nan, lambda j: j.rules.nonfinite_input and not j.rules.compare_integers),
]


def _probe_case(key: str, dtype_name: str, transform: str, backward: bool, pick: Callable[..., bool]) -> tuple[Any, Any, int]:
    """The entry, the samples the probe runs (its reference inputs included: the full tier)
    and the index of the first sample ``pick`` accepts."""
    info = sweep_db.load(torch).entry(key)
    assert info is not None, key
    declared = sweep_db.supports_backward(info, torch, dtype_name, "cpu")
    chosen = sweep_cases.probe_samples(torch, info, dtype_name, SEED, declared, reference=True)
    assert not backward or chosen.with_grad, key
    index = next(i for i, s in enumerate(chosen.samples) if pick(info, s, i, chosen.plain, dtype_name))
    return info, chosen, index


def _probe_judged(monkeypatch: pytest.MonkeyPatch, info: Any, key: str, dtype_name: str, chosen: Any, index: int, transform: str, backward: bool) -> list[dict[str, Any]]:
    """What the probe hands the oracle for each output of the case (``compare_leaf``'s
    keyword arguments), from the probe's own run of the case."""
    calls: list[dict[str, Any]] = []

    def record(torch_: Any, found: Any, wanted: Any, **options: Any) -> None:
        calls.append(options)
        return None

    ctx = types.SimpleNamespace(torch=torch, device="cpu", is_gpu=False, sync=lambda: None)
    tally = sweep_run.SweepTally()
    oracle = sweep_db.oracle_for(info, dtype_name)
    atol, rtol = sweep_db.tolerance(info, torch, dtype_name)
    case = sweep_cases.Case(index, transform, backward)
    with monkeypatch.context() as patch:
        patch.setattr(sweep_oracle, "compare_leaf", record)
        sweep_run._run_one(
            ctx, info, key, dtype_name, chosen.samples, chosen.with_grad, case, SEED, oracle, atol, rtol,
            _InProcessReference(), tally, reference_inputs=chosen.reference > 0, plain=chosen.plain,
        )
    assert calls, tally.unjudged
    return calls


def _script(monkeypatch: pytest.MonkeyPatch, key: str, short: str, chosen: Any, index: int, transform: str, backward: bool) -> str:
    """The script ``gpuprobe repro`` writes for the probe's failure on this case."""
    base = catalog.lookup("sweep.add.fp32")
    assert base is not None
    probe = f"sweep.{key}.{short}"
    definition = dataclasses.replace(base, id=probe, params={"key": key, "dtype": short, "subset": []})
    monkeypatch.setattr(catalog, "lookup", lambda name: definition if name == probe else None)
    failure = {"sample": index, "variant": transform, "direction": "backward" if backward else "forward", "output": "out[0]"}
    observation = {"measurement": {"failures": [failure]}, "metrics": {"seed": SEED, "reference_samples": chosen.reference}}
    result = {"probe": probe, "device": "cpu", "verdict": {"verdict": "fail"}, "observation": observation}
    plan = {"seed": 1, "settings": {"set": {}, "unset": []}, "tasks": []}
    text, _ = generate(result, plan)
    return text


def _constant(text: str, name: str) -> Any:
    found = re.search(rf"^{name} = (.+)$", text, re.M)
    assert found is not None, name
    return ast.literal_eval(found.group(1))


@pytest.mark.parametrize(("key", "short", "transform", "backward", "pick", "exercised"), CASES, ids=[c[0] for c in CASES])
def test_a_sweep_script_judges_its_case_as_the_probe_did(
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    short: str,
    transform: str,
    backward: bool,
    pick: Callable[..., bool],
    exercised: Callable[[Any], bool],
) -> None:
    dtype_name = sweep_db.DTYPES[short]
    info, chosen, index = _probe_case(key, dtype_name, transform, backward, pick)
    # The case turns the decision it is here for (else it proves nothing about it).
    oracle, atol, rtol = sweep_run.entry_bounds(torch, info, dtype_name)
    judgement = sweep_run.case_judgement(torch, info, dtype_name, chosen.samples[index], index, transform, backward, oracle, atol, rtol, chosen.plain)
    assert exercised(judgement), judgement

    text = _script(monkeypatch, key, short, chosen, index, transform, backward)
    calls = _probe_judged(monkeypatch, info, key, dtype_name, chosen, index, transform, backward)
    written = {
        "oracle": _constant(text, "ORACLE"),
        "atol": _constant(text, "ATOL"),
        "rtol": _constant(text, "RTOL"),
        "compare_integers": _constant(text, "COMPARE_INTEGERS"),
        "nonfinite_pattern": _constant(text, "NONFINITE_PATTERN"),
        "inf_input": _constant(text, "INF_INPUT"),
        "nonfinite_input": _constant(text, "NONFINITE_INPUT"),
    }
    for options in calls:
        assert {k: options[k] for k in written} == written
    assert _constant(text, "LAYOUT_TRANSFORM") is (transform in sweep_run.LAYOUT_TRANSFORMS)

    # The script's sample is the probe's: the same tensors and plain arguments.
    namespace = _script_namespace(monkeypatch, text, f"{key}/repro.py")
    tensors = [namespace["host_tensor"](record) for record in namespace["TENSORS"]]
    call_input, args, kwargs = namespace["sample_call"](tensors, False, "cpu")
    rebuilt = types.SimpleNamespace(input=call_input, args=tuple(args), kwargs=kwargs)
    assert sweep_cases.digest(torch, rebuilt) == sweep_cases.digest(torch, chosen.samples[index])


# ---------------------------------------------------------------------------------------------
# ops: the script's operands are the ones the probe handed the kernel under test.

#: Probes whose every trial the script rebuilds (a crash names none, so the script runs all).
OPS_PROBES = [
    "ops.linear.bf16",
    "ops.addmm.fp32",
    "ops.bmm.fp16",
    "ops.reduce.sum.fp16",
    "ops.reduce.mean.bf16",
    "ops.elementwise.div.fp16",
    "ops.elementwise.exp.fp32",
    "ops.elementwise.add.bf16",
]


def _run_probe(probe: str) -> None:
    """Runs ``probe`` of the catalog on the CPU, as the worker does."""
    import importlib

    from gpuprobe.worker.context import ProbeContext

    definition = catalog.lookup(probe)
    assert definition is not None
    module, function = definition.impl.split(":")
    getattr(importlib.import_module(module), function)(ProbeContext(torch, "cpu", SEED, probe), **definition.params)


def _crash_script(monkeypatch: pytest.MonkeyPatch, probe: str) -> dict[str, Any]:
    """The script for a crash of ``probe`` on the CPU (every case of it), its ``main`` not run."""
    result = {"probe": probe, "device": "cpu", "verdict": {"verdict": "crash"}, "observation": {"measurement": {}, "metrics": {}}}
    text, _ = generate(result, {"seed": SEED, "settings": {"set": {}, "unset": []}, "tasks": []})
    return _script_namespace(monkeypatch, text, f"{probe}/repro.py")


def _probe_operands(monkeypatch: pytest.MonkeyPatch, probe: str) -> list[tuple[Any, ...]]:
    """The operands the probe, run on the CPU, hands ``ops_math`` for each of its trials."""
    from gpuprobe.worker import ops_math

    seen: list[tuple[Any, ...]] = []
    matmul, reduce, elementwise = ops_math.matmul, ops_math.reduce, ops_math.elementwise

    def on_matmul(method: str, a: Any, b: Any, **options: Any) -> Any:
        seen.append((a, b, options.get("bias")))
        return matmul(method, a, b, **options)

    def on_reduce(method: str, x: Any, **options: Any) -> Any:
        seen.append((x,))
        return reduce(method, x, **options)

    def on_elementwise(method: str, compute: Any, **options: Any) -> Any:
        seen.append(tuple(options.get("sources", ())))
        return elementwise(method, compute, **options)

    with monkeypatch.context() as patch:
        patch.setattr(ops_math, "matmul", on_matmul)
        patch.setattr(ops_math, "reduce", on_reduce)
        patch.setattr(ops_math, "elementwise", on_elementwise)
        _run_probe(probe)
    return seen


@pytest.mark.parametrize("probe", OPS_PROBES)
def test_an_ops_script_builds_the_operands_the_probe_ran(monkeypatch: pytest.MonkeyPatch, probe: str) -> None:
    namespace = _crash_script(monkeypatch, probe)
    seen = _probe_operands(monkeypatch, probe)
    cases = namespace["CASES"]
    assert len(cases) == len(seen) > 1
    for case, operands in zip(cases, seen):
        built = namespace["build"](case, "cpu")
        names = [n for n in ("a", "b", "bias", "x") if isinstance(built.get(n), torch.Tensor)]
        assert len(names) == len([o for o in operands if o is not None]), (probe, case)
        for name, operand in zip(names, [o for o in operands if o is not None]):
            mine = built[name]
            assert (mine.dtype, tuple(mine.shape), mine.stride()) == (operand.dtype, tuple(operand.shape), operand.stride()), (probe, case, name)
            assert torch.equal(mine, operand), (probe, case, name)


# ---------------------------------------------------------------------------------------------
# nn: the script's convolution weights and attention inputs are the probe's.

CONV_PROBES = ["nn.conv2d.fp16.bwd", "nn.conv2d.depthwise.bf16", "nn.conv_transpose2d.fp32"]
SDPA_PROBES = ["nn.sdpa.bf16.math.d64.s1024.padding", "nn.sdpa.bf16.math.d64.s1024.causal.bwd"]


def _same(mine: Any, theirs: Any, what: Any) -> None:
    assert (mine.dtype, tuple(mine.shape)) == (theirs.dtype, tuple(theirs.shape)), what
    assert torch.equal(mine.detach(), theirs.detach()), what


@pytest.mark.parametrize("probe", CONV_PROBES)
def test_a_convolution_script_builds_the_input_and_weights_the_probe_ran(monkeypatch: pytest.MonkeyPatch, probe: str) -> None:
    from gpuprobe.worker.probes.nn import run as nn_run

    namespace = _crash_script(monkeypatch, probe)
    seen: list[tuple[Any, dict[str, Any]]] = []
    apply = nn_run._conv_apply

    def on_apply(F: Any, kind: str, x: Any, p: dict[str, Any], case: dict[str, Any], call: Any) -> Any:
        if call is not nn_run._plain:  # the device's call, not the float64 reference
            seen.append((x, dict(p)))
        return apply(F, kind, x, p, case, call)

    with monkeypatch.context() as patch:
        patch.setattr(nn_run, "_conv_apply", on_apply)
        _run_probe(probe)
    cases = namespace["CASES"]
    assert len(cases) == len(seen) > 1
    for case, (x, params) in zip(cases, seen):
        built = namespace["build"](case, "cpu")
        _same(built["x"], x, (probe, case["case"], "x"))
        assert list(built["params"]) == list(params)
        for name in params:
            _same(built["params"][name], params[name], (probe, case["case"], name))


@pytest.mark.parametrize("probe", SDPA_PROBES)
def test_an_attention_script_builds_the_inputs_the_probe_ran(monkeypatch: pytest.MonkeyPatch, probe: str) -> None:
    from collections import OrderedDict

    from gpuprobe.worker.probes.nn import run as nn_run

    namespace = _crash_script(monkeypatch, probe)
    seen: list[tuple[Any, ...]] = []
    reference = nn_run._attention_reference

    def on_reference(torch_: Any, q: Any, k: Any, v: Any, allowed: Any, causal: bool, grad: Any, rows: Any) -> Any:
        seen.append((q, k, v, allowed, grad))
        return reference(torch_, q, k, v, allowed, causal, grad, rows)

    with monkeypatch.context() as patch:
        patch.setattr(nn_run, "_attention_reference", on_reference)
        patch.setattr(nn_run, "_REFERENCES", OrderedDict())  # computed, not taken from another test's run
        _run_probe(probe)
    assert len(seen) == 1
    (case,) = namespace["CASES"]
    built = namespace["build"](case, "cpu")
    q, k, v, allowed, grad = seen[0]
    for name, theirs in (("q", q), ("k", k), ("v", v), ("mask", allowed), ("grad", grad)):
        if theirs is None:
            assert built[name] is None, (probe, name)
        else:
            _same(built[name], theirs, (probe, name))


# ---------------------------------------------------------------------------------------------
# copy: the script copies the data the probe copied.


def _recorded_h2d(monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]) -> list[Any]:
    """The host sources ``run`` hands ``ops.h2d``, in order."""
    from gpuprobe.worker import ops

    sources: list[Any] = []
    h2d = ops.h2d

    def on_h2d(src: Any, device: Any, **options: Any) -> Any:
        sources.append(src.clone())
        return h2d(src, device, **options)

    with monkeypatch.context() as patch:
        patch.setattr(ops, "h2d", on_h2d)
        run()
    return sources


def test_a_transfer_script_copies_the_data_the_probe_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = "copy.h2d.pageable.odd.blocking"  # 21 shapes, each its own seed
    namespace = _crash_script(monkeypatch, probe)
    sources = _recorded_h2d(monkeypatch, lambda: _run_probe(probe))
    assert len(namespace["CASES"]) == len(sources) > 1
    for case, src in zip(namespace["CASES"], sources):
        _same(namespace["build"](case, "cpu")["src"], src, (probe, case["trial"]))


def test_a_tiny_copy_script_copies_the_slice_the_probe_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    """One thread, so the probe's copies are made in their order; each failing copy's script
    copies the same elements of the same pattern."""
    from gpuprobe.worker.context import ProbeContext
    from gpuprobe.worker.probes.copy import run as copy_run

    base = catalog.lookup("copy.h2d.pageable.tiny.blocking")
    assert base is not None
    probe = "copy.h2d.pageable.tiny.one_thread"
    params = {**base.params, "threads": 1, "iterations": 40}
    definition = dataclasses.replace(base, id=probe, params=params)
    monkeypatch.setattr(catalog, "lookup", lambda name: definition if name == probe else None)
    sources = _recorded_h2d(monkeypatch, lambda: copy_run.run_tiny(ProbeContext(torch, "cpu", SEED, probe), **params))
    assert len(sources) == 40 and len({s.numel() for s in sources}) > 1
    for copy in (0, 1, 2, 17, 39):
        observation = {"measurement": {"first_mismatch": {"trial": copy, "index": 0}}, "metrics": {}}
        result = {"probe": probe, "device": "cpu", "verdict": {"verdict": "fail"}, "observation": observation}
        text, _ = generate(result, {"seed": SEED, "settings": {"set": {}, "unset": []}, "tasks": []})
        namespace = _script_namespace(monkeypatch, text, f"{probe}/repro.py")
        (case,) = namespace["CASES"]
        _same(namespace["build"](case, "cpu")["src"], sources[copy], (probe, copy))


# ---------------------------------------------------------------------------------------------
# pipeline: the script saves the tensors the probe saved.


def test_a_save_load_script_saves_the_tensors_the_probe_saved(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuprobe.worker.probes.pipeline import run as pipeline_run

    probe = "pipeline.save.torch.bf16"
    namespace = _crash_script(monkeypatch, probe)
    saved: list[Any] = []
    save = torch.save

    def on_save(obj: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        saved.append({name: t.detach().cpu().clone() for name, t in obj.items()})
        return save(obj, path, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(torch, "save", on_save)
        _run_probe(probe)
    assert len(saved) == 1 and pipeline_run.save_load_tensors(False).keys() == saved[0].keys()
    (case,) = namespace["CASES"]
    built = namespace["build"](case, "cpu")
    assert list(built["refs"]) == list(saved[0])
    for name, tensor in saved[0].items():
        _same(built["refs"][name], tensor, (probe, name))
