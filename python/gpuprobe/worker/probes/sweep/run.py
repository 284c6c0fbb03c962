"""sweep family implementation: one operator of PyTorch's database in one dtype.

For each case (``sweep_cases``) the worker computes the op on the device under test and asks
the reference process (``sweep_ref``) for the float64 CPU result of the same inputs, then
judges every output (or gradient) with ``sweep_oracle``. What can happen to a case:

- both compute: the oracle decides (``wrong_value``, ``nonfinite_invented``, ``nan_lost``,
  ``structure``, or right); for a decomposition or solver under a non-finite input, only
  ``nonfinite_swallowed`` (counted and reported, not wrong math), the rest unjudged;
- the device raises where the reference computes: a device error (ERROR verdict unless a
  wrong value was also found), with the op, variant and the exception;
- the reference rejects the input and so does the CPU in the same dtype, but the device
  returns values: ``invalid_accepted``, reported and not counted as wrong math;
- both reject the input: right;
- the reference cannot be had (unsupported in float64, crashed, timed out, built different
  inputs): the case is not judged and the reason is counted; never blamed on the device;
- a per-argument case whose CPU result reads past the argument's view
  (``_reads_outside_argument``), or a large case estimated to take minutes on the device
  (``_large_case_skip``): not judged, the reason counted.

TF32 is switched off while a probe runs: float32 is judged as float32 (TF32 is a
documented reduced-precision mode, enabled by default for cuDNN convolutions).

The probe's decisions that the repro script restates as data (``repro.families.sweep``) are
functions of their own here, which both call: the samples' seed (``samples_seed``), which
samples and whether with gradients (``choose_samples``), the entry's bounds
(``entry_bounds``) and each case's oracle, bounds and comparison rules
(``case_judgement``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from gpuprobe.worker import simulate
from gpuprobe.worker.faults import is_device_fault
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, device_context_problem
from gpuprobe.worker.probes.precision import tf32_mode
from gpuprobe.worker.probes.sweep import cases as sweep_cases
from gpuprobe.worker.probes.sweep import db as sweep_db
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
from gpuprobe.worker.probes.sweep import ref as sweep_ref
from gpuprobe.worker.probes.sweep.ref import error_text
from gpuprobe.worker.tally import CaseTally

#: Wall-clock budget for one probe's cases; the rest are counted as not run.
DEFAULT_BUDGET_S = 20.0
#: Limit for one reference computation.
REFERENCE_TIMEOUT_S = 60.0
#: The database's error inputs a probe tries at most, in the database's order.
MAX_ERROR_INPUTS = 16
#: The case variant of an error input (not an input transform: the database builds it).
ERROR_INPUT = "error_input"
#: Estimated device seconds above which a ``large_*`` case is not run (``_large_case_skip``).
#: A probe has up to about six large cases, and the supervisor declares a probe hung after
#: 240 s: six cases at this estimate stay well within that, and one case alone cannot
#: spend the probe's time budget many times over. An entry whose device implementation
#: loops over a batch one matrix at a time on the host (a library call and a
#: synchronisation each) takes minutes at 65,537 matrices: slowness, not a fault.
LARGE_CASE_BUDGET_S = 15.0


def _output_name(index: int, backward: bool) -> str:
    return f"grad[{index}]" if backward else f"out[{index}]"


def _fault(op_name: str, dtype_name: str, case: sweep_cases.Case) -> tuple[Any, Any, Any]:
    """The simulation engine, the fault that hits this case (or None) and the call it saw."""
    engine = simulate.engine()
    if engine is None or not engine.wants("sweep"):
        return None, None, None
    call = simulate.CallInfo(
        op="sweep",
        method=op_name,
        dtype=dtype_name,
        on_device=True,
        variant=case.transform,
        direction=case.direction,
    )
    return engine, engine.decide(call), call


def _apply_fault(torch: Any, engine: Any, fault: Any, call: Any, values: list[Any]) -> list[Any]:
    """Applies a simulated fault to the device results (labelled SIMULATED in the output)."""
    if fault.effect == "drop_nan":
        return [torch.nan_to_num(v, nan=0.0) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]
    out = []
    for value in values:
        if isinstance(value, torch.Tensor) and value.numel() > 0:
            value = engine.apply(fault, call, value.clone())
        out.append(value)
    return out


def run_op(ctx: ProbeContext, key: str, dtype: str, subset: list[str] | None = None) -> ProbeOutput:
    """Sweeps one database entry in one dtype on the device under test. ``subset`` names
    the value classes and call variants a standard-subset probe runs below the full tier
    (a run that names no tier runs them all)."""
    torch = ctx.torch
    dtype_name = sweep_db.DTYPES[dtype]
    # The lane's reference process imports torch and the database while this worker does
    # (a no-op once started; in a lane that begins with sweep.opdb, that probe started it).
    sweep_ref.shared().prestart()
    try:
        database = sweep_db.load(torch)
    except sweep_db.DatabaseUnavailable as exc:
        raise SkipProbe(str(exc)) from None
    info = database.entry(key)
    if info is None:
        raise SkipProbe(f"torch {database.torch_version}'s operator database has no entry {key!r}")
    excluded = sweep_db.exclusion(info)
    if excluded:
        raise SkipProbe(f"excluded: {excluded}")
    dev_type = sweep_db.device_type(ctx.device_name)
    if not sweep_db.supports(info, torch, dtype_name, dev_type):
        raise SkipProbe(f"the database lists no {dtype_name} support for {info.name} on {dev_type}")
    oracle, atol, rtol = entry_bounds(torch, info, dtype_name)
    seed = samples_seed(ctx.derive_seed)
    only_new = tuple(subset) if subset is not None and ctx.options.get("tier") not in (None, "full") else None
    try:
        # The full tier runs the entry's reference inputs too (a standard-subset probe below
        # it, its sample inputs only).
        backward, chosen = choose_samples(torch, info, dtype_name, dev_type, seed, reference=only_new is None)
    except sweep_cases.CaseError as exc:
        raise SkipProbe(str(exc)) from None
    samples, generated_with_grad = chosen.samples, chosen.with_grad
    backward = backward and chosen.with_grad
    forward_only_note = chosen.forward_only
    cases = sweep_cases.choose_cases(torch, info, samples, seed, backward, dtype_name, only_new=only_new, plain=chosen.plain)
    budget = float(ctx.options.get("sweep_budget_s", DEFAULT_BUDGET_S))
    reference = sweep_ref.shared()
    tally = SweepTally()
    started = time.monotonic()
    # float32 is judged as float32: TF32 is a documented reduced-precision mode.
    with tf32_mode(torch, False):
        for case in cases:
            if time.monotonic() - started > budget or tally.context_lost:
                tally.not_run += 1
                continue
            # The worker log names the case a crash interrupts (the supervisor keeps its tail).
            print(f"gpuprobe sweep: {key} {dtype} {_case_name(torch, samples, case)}", file=sys.stderr, flush=True)
            try:
                _run_one(
                    ctx, info, key, dtype_name, samples, generated_with_grad, case, seed, oracle, atol, rtol, reference, tally,
                    reference_inputs=chosen.reference > 0,
                    plain=chosen.plain,
                )
            except _DeviceContextLost:
                raise
            except Exception as exc:  # noqa: BLE001 - the harness, not the device: not judged
                tally.unjudge("harness", f"{case.transform} {case.direction} sample {case.sample}: {error_text(exc)}")
        if _error_inputs_due(torch, info, dtype, dev_type, only_new) and not tally.context_lost:
            print(f"gpuprobe sweep: {key} {dtype} {ERROR_INPUT} forward sample 0", file=sys.stderr, flush=True)
            try:
                _run_error_inputs(ctx, info, dtype_name, tally, started, budget)
            except Exception as exc:  # noqa: BLE001 - the harness, not the device: not judged
                tally.unjudge("harness", f"{ERROR_INPUT}: {error_text(exc)}")
    if tally.context_lost:
        ctx.restart_worker = tally.context_lost
    if forward_only_note:
        tally.notes.append(forward_only_note)
    tally.notes.extend(sweep_cases.dense_input_notes(tally.variants))
    output = tally.output(info, key, dtype_name, seed, oracle, atol, rtol, len(samples), reference, time.monotonic() - started)
    output.metrics["reference_samples"] = chosen.reference
    return output


def samples_seed(derive_seed: Callable[[str], int]) -> int:
    """The seed of a probe's samples (their generation, the injected elements, the
    projection weights) from the probe's seed rule (``ProbeContext.derive_seed``)."""
    return derive_seed("samples") % (2**31)


def entry_bounds(torch: Any, info: Any, dtype_name: str) -> tuple[str, float, float]:
    """The entry's oracle and (atol, rtol) in the probe's dtype: the probe's reported
    bounds, which ``case_judgement`` starts each case from."""
    atol, rtol = sweep_db.tolerance(info, torch, dtype_name)
    return sweep_db.oracle_for(info, dtype_name), atol, rtol


def choose_samples(
    torch: Any, info: Any, dtype_name: str, dev_type: str, seed: int, reference: bool
) -> tuple[bool, sweep_cases.ProbeSamples]:
    """Whether the database declares backward for the entry in ``dtype_name`` on
    ``dev_type``, and the samples the probe runs (``sweep_cases.probe_samples``, with
    gradients where declared). Raises ``CaseError`` when the database gives no sample."""
    backward = sweep_db.supports_backward(info, torch, dtype_name, dev_type)
    return backward, sweep_cases.probe_samples(torch, info, dtype_name, seed, backward, reference=reference)


@dataclass(frozen=True)
class CaseJudgement:
    """How one case is judged (``case_judgement``): the probe's judge and the repro
    script it writes take these from one place."""

    #: ``value``, ``structure``, ``shape`` (``sweep_db.oracle_for``, narrowed per case).
    oracle: str
    #: The bounds |found - ref| <= atol + rtol * |ref|, widened for a mixed-precision sample.
    atol: float
    rtol: float
    #: The sample's own NaN and Inf (``sweep_cases.held_nonfinite``), for a sample of the
    #: entry's reference inputs; (False, False) for its sample inputs.
    held: tuple[bool, bool]
    #: The comparison flags (``sweep_cases.judging``).
    rules: sweep_cases.Judging


def case_judgement(
    torch: Any,
    info: Any,
    dtype_name: str,
    sample: Any,
    sample_index: int,
    transform: str,
    backward: bool,
    oracle: str,
    atol: float,
    rtol: float,
    plain: int | None,
) -> CaseJudgement:
    """The oracle, bounds and comparison rules of one case: sample ``sample_index`` of the
    probe's samples (the first ``plain`` of them the entry's sample inputs) under
    ``transform``, forward or ``backward``, from the entry's ``oracle``, ``atol`` and
    ``rtol`` (``entry_bounds``). Computes nothing on a device."""
    # A sample of the reference inputs' own may hold NaN or Inf itself: judged as if injected.
    held = sweep_cases.held_nonfinite(torch, sample, dtype_name) if plain is not None and sample_index >= plain else (False, False)
    rules = sweep_cases.judging(info.name, dtype_name, transform, held, str(getattr(info, "variant_test_name", "") or ""))
    if oracle == "value" and sweep_db.sample_is_random(info.name, sample):
        oracle = "structure"
    if oracle == "value" and backward and dtype_name in ("float16", "bfloat16") and info.name in sweep_db.HALF_ATOMIC_BACKWARD_OPS:
        oracle = "structure"
    if oracle == "value" and info.name in sweep_db.COUNT_TIE_OPS and sweep_db.is_exact_dtype(dtype_name):
        oracle = "structure"
    weakest = sweep_cases.least_precise_float(torch, sample)
    if weakest is not None and weakest != dtype_name and weakest in sweep_db.DTYPES.values():
        # A mixed-precision sample computes partly in its least precise dtype (promotion):
        # it is judged by that dtype's bounds too (the reference is float64 throughout).
        low_atol, low_rtol = sweep_db.tolerance(info, torch, weakest)
        atol, rtol = max(atol, low_atol), max(rtol, low_rtol)
    return CaseJudgement(oracle=oracle, atol=atol, rtol=rtol, held=held, rules=rules)


class SweepTally(CaseTally):
    """The sweep's tally: every kind of case an operator's probe counts, with what only the
    sweep tracks (the transforms and directions run, the error inputs tried, each sample's
    base forward time). Examples are cut by the caller (``example_chars=None``)."""

    def __init__(self) -> None:
        super().__init__(example_chars=None)
        self.variants: set[str] = set()
        self.directions: set[str] = set()
        self.error_inputs = 0
        self.error_inputs_rejected = 0
        #: Device seconds of each sample's base forward call (``_large_case_skip``); None
        #: where it raised.
        self.base_seconds: dict[int, float | None] = {}

    def output(
        self,
        info: Any,
        key: str,
        dtype_name: str,
        seed: int,
        oracle: str,
        atol: float,
        rtol: float,
        sample_count: int,
        reference: sweep_ref.ReferenceProcess,
        seconds: float,
    ) -> ProbeOutput:
        measurement = self.measurement(
            info.name, dtype_name, variant_test_name=str(getattr(info, "variant_test_name", "") or ""), oracle=oracle
        )
        notes = list(self.notes)
        if self.error_inputs:
            notes.append(
                f"{self.error_inputs} of the database's error inputs tried (the device must raise where they say it raises): "
                f"{self.error_inputs_rejected} rejected"
            )
        if self.invalid_accepted:
            notes.append(
                f"the device accepted {self.invalid_accepted} input(s) the CPU rejects (not counted as wrong math): "
                + "; ".join(self.invalid_examples)
            )
        if self.refused:
            notes.append(
                f"the device refused {self.refused} input(s) the CPU computes, with an argument check (stricter, not wrong "
                "math): " + "; ".join(self.refused_examples)
            )
        if self.nonfinite_swallowed:
            notes.append(
                f"a NaN or infinity in the input of a decomposition or solver came back as finite numbers in "
                f"{self.nonfinite_swallowed} case(s): the result looks valid but is meaningless (LAPACK, cuSOLVER and "
                "MAGMA do not promise to propagate NaN; not counted as wrong math): " + "; ".join(self.swallowed_examples)
            )
        unjudged = self.unjudged_note("cases without a usable reference (not judged)")
        if unjudged:
            notes.append(unjudged)
        if self.context_lost:
            notes.append(self.context_lost)
        not_run = self.not_run_note()
        if not_run:
            notes.append(not_run)
        metrics = {
            "op": info.name,
            "dtype": dtype_name,
            "samples": sample_count,
            "variants": ",".join(t for t in sweep_cases.TRANSFORMS if t in self.variants),
            "directions": ",".join(sorted(self.directions)),
            "atol": atol,
            "rtol": rtol,
            "seed": seed,
            "reference_restarts": reference.restarts,
            # ``fork`` (of this worker) or ``spawn`` (a fresh interpreter): sweep_ref's header.
            "reference_process": reference.made_by,
            "seconds": round(seconds, 3),
            "not_run": self.not_run,
            "error_inputs": self.error_inputs,
        }
        return ProbeOutput(measurement=measurement, metrics=metrics, notes=notes)


def _run_one(
    ctx: ProbeContext,
    info: Any,
    key: str,
    dtype_name: str,
    samples: list[Any],
    generated_with_grad: bool,
    case: sweep_cases.Case,
    seed: int,
    oracle: str,
    atol: float,
    rtol: float,
    reference: sweep_ref.ReferenceProcess,
    tally: SweepTally,
    reference_inputs: bool = False,
    plain: int | None = None,
) -> None:
    torch = ctx.torch
    sample = samples[case.sample]
    if case.transform in sweep_cases.LARGE_TRANSFORMS:
        skipped = _large_case_skip(ctx, info, sample, case, seed, dtype_name, tally.base_seconds)
        if skipped is not None:
            # Counted as unjudged; the reason is a note of its own (slowness, not a fault).
            tally.unjudged["large_too_slow"] = tally.unjudged.get("large_too_slow", 0) + 1
            tally.notes.append(skipped)
            return
    judgement = case_judgement(torch, info, dtype_name, sample, case.sample, case.transform, case.backward, oracle, atol, rtol, plain)
    held, rules, oracle, atol, rtol = judgement.held, judgement.rules, judgement.oracle, judgement.atol, judgement.rtol
    where = _case_name(torch, samples, case)
    engine, fault, call = _fault(info.name, dtype_name, case)
    device_values: list[Any] | None = None
    device_error: str | None = None
    context_lost: str | None = None
    try:
        if fault is not None and fault.effect in ("exception", "crash", "hang", "oom"):
            engine.apply(fault, call, None)
        values = sweep_cases.run_case(torch, info, sample, case, seed, device=ctx.device, upcast=False, dtype_name=dtype_name)
        ctx.sync()
        device_values = [sweep_cases.dense_on_host(torch, v) for v in values]
        if fault is not None and fault.effect != "accept_invalid":
            device_values = _apply_fault(torch, engine, fault, call, device_values)
    except sweep_cases.CaseError as exc:
        tally.unjudge("not_applicable", f"{where}: {exc}")
        return
    except Exception as exc:  # noqa: BLE001 - a device error is a finding, judged below
        device_error = error_text(exc, 300)
        if fault is not None and fault.effect == "accept_invalid":
            # Simulated: the device returns a result instead of rejecting the input.
            device_error, device_values = None, []
        elif ctx.is_gpu:
            context_lost = device_context_problem(torch, ctx.device)
    request = {
        "key": key,
        "dtype": dtype_name,
        "seed": seed,
        "requires_grad": generated_with_grad,
        "sample": case.sample,
        "transform": case.transform,
        "backward": case.backward,
        "digest": sweep_cases.digest(torch, sample),
        "reference_inputs": reference_inputs,
        "argument": list(case.argument) if case.argument is not None else None,
    }
    ref = reference.compute(request, REFERENCE_TIMEOUT_S)
    if context_lost is not None:
        if not ref.get("ok") and ref.get("kind") == "rejected":
            # Both reject the input; the device did so with a device-side assert, which ends
            # its context. The probe's result stands; the worker must be replaced.
            tally.cases += 1
            tally.passed += 1
            tally.context_lost = f"{where}: the device rejected an input the CPU rejects too ({device_error}), and its context is unusable afterwards"
            return
        raise _DeviceContextLost(
            f"{info.name} {dtype_name} {where}: the device raised {device_error} on an input the CPU computes, and its "
            f"context is unusable afterwards ({context_lost})"
        )
    tally.variants.add(case.transform)
    tally.directions.add(case.direction)
    if not ref.get("ok"):
        kind = ref.get("kind", "rejected")
        if kind != "rejected":
            tally.unjudge(kind, f"{where}: {ref.get('error', '')}"[:200])
            return
        if device_error is None and reference.compute({**request, "mode": "same_dtype"}, REFERENCE_TIMEOUT_S).get("ok"):
            # float64 is refused but the dtype itself computes: no reference for this case.
            tally.unjudge("no_float64_reference", f"{where}: {ref.get('error', '')}"[:200])
            return
        tally.cases += 1
        tally.passed += 1
        if device_error is not None:
            return  # both reject the input
        tally.accept_invalid(f"{where} (CPU: {ref.get('error', '')})"[:200])
        return
    if device_error is not None and case.transform in sweep_cases.CALL_VARIANTS:
        # The CPU's same variant in the same dtype (the out= tensor of the same narrower or
        # wider dtype, the same in-place write) decides whether the call itself is valid:
        # an in-place op whose result needs another dtype, a cast into out= that
        # ``torch.can_cast`` refuses, are refused on both sides.
        if not reference.compute({**request, "mode": "same_dtype"}, REFERENCE_TIMEOUT_S).get("ok"):
            tally.cases += 1
            tally.passed += 1
            return
    if device_error is not None:
        declared = _declared_limitation(device_error)
        if declared:
            tally.unjudge(declared, f"{where}: {device_error}"[:200])
            return
    if device_error is not None and (
        not _is_device_fault(device_error) or (rules.swallow_only and _reports_nonfinite_input(device_error))
    ):
        # An argument check refused an input the CPU computes (a contiguity or shape
        # requirement of the device's kernel), or the device's linear-algebra library
        # reported a NaN or infinity in a matrix it was given (``torch.linalg.LinAlgError``:
        # failed to converge, not positive-definite): stricter, not wrong math. Reported.
        tally.refuse(f"{where}: {device_error}"[:200])
        return
    if device_error is not None and _reads_outside_argument(torch, reference, request):
        tally.unjudge("argument_undefined", f"{where}: {_READS_OUTSIDE}"[:200])
        return
    if device_error is not None:
        message = device_error if case.argument is None else f"{_argument_label(torch, sample, case)}: {device_error}"
        tally.device_error(case.transform, case.direction, case.sample, message)
        return
    tally.cases += 1
    expected = ref["outputs"]
    assert device_values is not None
    same_cache: dict[str, Any] = {}

    def same_dtype_output(index: int) -> Any:
        if "reply" not in same_cache:
            same_cache["reply"] = reference.compute({**request, "mode": "same_dtype"}, REFERENCE_TIMEOUT_S)
        reply = same_cache["reply"]
        if not reply.get("ok") or index >= len(reply["outputs"]):
            return None
        return reply["outputs"][index]

    verdict = _judge_outputs(torch, info, dtype_name, case, device_values, expected, oracle, atol, rtol, same_dtype_output, held)
    if verdict is None:
        tally.passed += 1
        return
    if isinstance(verdict, str):
        tally.unjudge(verdict, where)
        return
    index, failure = verdict
    if failure.cls != sweep_oracle.NONFINITE_SWALLOWED and _reads_outside_argument(torch, reference, request):
        tally.unjudge("argument_undefined", f"{where}: {_READS_OUTSIDE}"[:200])
        return
    if failure.cls == sweep_oracle.NONFINITE_SWALLOWED:
        # A finding of its own, not wrong math: counted and reported in the notes.
        tally.passed += 1
        tally.swallow(f"{where}: {_output_name(index, case.backward)} {failure.detail}"[:240])
        return
    if case.transform in LAYOUT_TRANSFORMS:
        # The CPU is not always right: a strided input the CPU's kernel mishandles (it
        # reads the view's storage wrongly) shows as a reference that changes when the
        # same values are made contiguous. When the device agrees with the contiguous
        # reference, the difference is the CPU's.
        contiguous = reference.compute({**request, "mode": "reference_contiguous"}, REFERENCE_TIMEOUT_S)
        if (
            contiguous.get("ok")
            and len(contiguous["outputs"]) == len(device_values)
            and _judge_outputs(torch, info, dtype_name, case, device_values, contiguous["outputs"], oracle, atol, rtol, None, held) is None
        ):
            tally.unjudge(
                "reference_layout",
                f"{where}: the CPU's float64 result changes when the input is made contiguous; the device agrees with the contiguous one",
            )
            return
    if case.transform in sweep_cases.CALL_VARIANTS:
        # The device's variant differs from the functional call. When the CPU's own variant
        # in the same dtype gives what the device gave, the difference is the framework's
        # variant on every device (an in-place write keeping its input's dtype), not this one.
        own = reference.compute({**request, "mode": "variant_same_dtype"}, REFERENCE_TIMEOUT_S)
        if (
            own.get("ok")
            and len(own["outputs"]) == len(device_values)
            and _judge_outputs(torch, info, dtype_name, case, device_values, own["outputs"], oracle, atol, rtol, None, held) is None
        ):
            tally.unjudge("variant_as_cpu", f"{where}: {failure.detail}"[:200])
            return
    if failure.cls == sweep_oracle.STRUCTURE and _reference_odd(torch, device_values[index], expected[index], same_dtype_output(index)):
        tally.unjudge("reference_structure", f"{where}: {failure.detail}"[:200])
        return
    if case.argument is not None:
        failure.detail = f"{_argument_label(torch, sample, case)}: {failure.detail}"
    _record(tally, case, failure.cls, failure, _output_name(index, case.backward))


def _large_growth(torch: Any, sample: Any, case: sweep_cases.Case, dtype_name: str) -> tuple[int, int, tuple[str, str]] | None:
    """The size a ``large_*`` case grows (the sample's rows of a batch, elements along the
    last dimension, right-hand sides), the size it grows it to, and its unit in words (one, many); None where it cannot be told."""
    if case.transform == "large_rhs":
        if case.argument is None:
            return None
        tensors = sweep_cases.tensors_of(torch, sample)
        if case.argument[0] >= len(tensors) or tensors[case.argument[0]].dim() == 0:
            return None
        size, target, unit = int(tensors[case.argument[0]].shape[-1]), sweep_cases.LARGE_RHS, ("right-hand side", "right-hand sides")
    else:
        first = sweep_cases.primary(torch, sample, dtype_name)
        if first is None or first.dim() == 0:
            return None
        if case.transform == "large_batch":
            size, target, unit = int(first.shape[0]), sweep_cases.LARGE_BATCH, ("row of a batch", "rows of a batch")
        else:
            size, target, unit = int(first.shape[-1]), sweep_cases.LARGE_REDUCED, ("element along the last dimension", "elements along the last dimension")
    return (size, target, unit) if 1 <= size < target else None


#: Device seconds the estimate's second, intermediate-size run is meant to take at most.
LARGE_CALIBRATION_S = 0.5


def _large_case_skip(
    ctx: ProbeContext,
    info: Any,
    sample: Any,
    case: sweep_cases.Case,
    seed: int,
    dtype_name: str,
    base_seconds: dict[int, float | None],
) -> str | None:
    """Why a ``large_*`` case is not run, or None to run it.

    The sample's base forward call is timed on the device (synchronised; the second of two
    calls, so that a library's lazy initialisation does not count) and extrapolated
    linearly by the factor the transform grows the work (``_large_growth``). A linear
    estimate overstates well-batched kernels, whose small call is mostly launch latency,
    and is right for implementations that loop over the batch on the host (a library call
    and a synchronisation per matrix), the ones that take minutes. So an estimate past
    ``LARGE_CASE_BUDGET_S`` is checked once more: the case at an intermediate size meant to
    take about ``LARGE_CALIBRATION_S`` (a batched kernel, where the device switches to one,
    runs there too), timed the same way, and the line through both points extrapolated to
    the full size. Past the budget still, the case is not run: unjudged, never a failure."""
    growth = _large_growth(ctx.torch, sample, case, dtype_name)
    if growth is None:
        return None
    size, target, unit = growth
    if case.sample not in base_seconds:
        base_seconds[case.sample] = _time_call(ctx, info, sample, sweep_cases.Case(case.sample, "base", False), seed, dtype_name)
    seconds = base_seconds[case.sample]
    if seconds is None:
        return None  # the base call raised: the case gives its own verdict
    estimate = seconds * target / size
    if estimate <= LARGE_CASE_BUDGET_S:
        return None
    middle = min(target - 1, max(2 * size, int(target * LARGE_CALIBRATION_S / estimate)))
    if middle > size:
        between = _time_call(ctx, info, sample, case, seed, dtype_name, large_length=middle)
        if between is not None:
            slope = max(0.0, between - seconds) / (middle - size)
            estimate = seconds + slope * (target - size)
            if estimate <= LARGE_CASE_BUDGET_S:
                return None
    return (
        f"{case.transform} not run (sample {case.sample}): {_count(size, unit)} took {_duration(seconds)} on the device, "
        f"{target:,} would take about {_duration(estimate)} (more than {LARGE_CASE_BUDGET_S:.0f} s): slowness, not a fault"
    )


def _time_call(
    ctx: ProbeContext,
    info: Any,
    sample: Any,
    case: sweep_cases.Case,
    seed: int,
    dtype_name: str,
    large_length: int | None = None,
) -> float | None:
    """Seconds of a case's forward call on the device (its inputs already there), the
    second of two; None where the call raises."""
    torch = ctx.torch
    try:
        (call_input, args, kwargs), _leaves, _dtype = sweep_cases.materialize(
            torch, sample, case, seed, device=ctx.device, upcast=False, dtype_name=dtype_name, large_length=large_length
        )
        seconds = 0.0
        for _ in range(2):
            started = time.perf_counter()
            with torch.no_grad():
                info(call_input, *args, **kwargs)
            ctx.sync()
            seconds = time.perf_counter() - started
        return seconds
    except Exception:  # noqa: BLE001 - the case itself runs and says what is wrong
        return None


def _count(number: int, unit: tuple[str, str]) -> str:
    """``1 row of a batch``, ``4 rows of a batch``."""
    return f"{number:,} {unit[0] if number == 1 else unit[1]}"


def _duration(seconds: float) -> str:
    """``3.9 ms``, ``64 s``."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def _argument_label(torch: Any, sample: Any, case: sweep_cases.Case) -> str:
    """The tensor a targeted case changed, in words."""
    assert case.argument is not None
    return sweep_cases.argument_label(torch, sample, case.argument)


def _case_name(torch: Any, samples: list[Any], case: sweep_cases.Case) -> str:
    """``<transform> <direction> sample <n>``, and the tensor a targeted case changes (the
    worker's log line, and the notes)."""
    name = f"{case.transform} {case.direction} sample {case.sample}"
    if case.argument is not None and case.sample < len(samples):
        name += f" ({_argument_label(torch, samples[case.sample], case)})"
    return name


def _reports_nonfinite_input(message: str) -> bool:
    """Whether a device error is PyTorch's linear-algebra error (``torch.linalg.LinAlgError``:
    an info code of the library, failed to converge or not positive-definite), which is how
    a library may answer a matrix holding NaN or infinity."""
    return message.startswith(("_LinAlgError", "LinAlgError"))


#: Transforms that change only the layout of the inputs, not their values.
LAYOUT_TRANSFORMS = ("noncontig", "transposed", "channels_last", "broadcast")


def _judge_outputs(
    torch: Any,
    info: Any,
    dtype_name: str,
    case: sweep_cases.Case,
    device_values: list[Any],
    expected: list[Any],
    oracle: str,
    atol: float,
    rtol: float,
    same_dtype_output: Any,
    held: tuple[bool, bool] = (False, False),
) -> tuple[int, sweep_oracle.LeafFailure] | str | None:
    """The first wrong output (its index and failure), an unjudged reason, or None when
    every output is right. ``held``: the sample's own NaN and Inf (``held_nonfinite``).

    A decomposition or solver under a non-finite input (``Judging.swallow_only``) has one
    finding, ``nonfinite_swallowed``; any other difference from the reference is not
    judged (``nonfinite_input``): its values are undefined."""
    rules = sweep_cases.judging(info.name, dtype_name, case.transform, held, str(getattr(info, "variant_test_name", "") or ""))
    if rules.swallow_only:
        if oracle != "shape":
            for index, (found, wanted) in enumerate(zip(device_values, expected)):
                same = (lambda i=index: same_dtype_output(i)) if same_dtype_output is not None else None
                swallowed = sweep_oracle.swallowed_nonfinite(torch, found, wanted, same)
                if swallowed is not None:
                    return index, swallowed
        verdict = _judge_values(torch, info, dtype_name, case, device_values, expected, oracle, atol, rtol, same_dtype_output, rules)
        return None if verdict is None else "nonfinite_input"
    return _judge_values(torch, info, dtype_name, case, device_values, expected, oracle, atol, rtol, same_dtype_output, rules)


def _judge_values(
    torch: Any,
    info: Any,
    dtype_name: str,
    case: sweep_cases.Case,
    device_values: list[Any],
    expected: list[Any],
    oracle: str,
    atol: float,
    rtol: float,
    same_dtype_output: Any,
    rules: sweep_cases.Judging,
) -> tuple[int, sweep_oracle.LeafFailure] | str | None:
    """``_judge_outputs`` by the ordinary rules: output by output, the oracle's verdict."""
    if len(expected) != len(device_values):
        return 0, sweep_oracle.LeafFailure(
            sweep_oracle.STRUCTURE, f"{len(device_values)} outputs where the reference has {len(expected)}"
        )
    for index, (found, wanted) in enumerate(zip(device_values, expected)):
        if found is None and wanted is None:
            continue
        if case.backward and (found is None or wanted is None):
            # One side's autograd saw no dependence: an all-zero gradient is the same thing.
            other = found if found is not None else wanted
            if isinstance(other, torch.Tensor) and not bool((other.detach().cpu().double() == 0).all()):
                return index, sweep_oracle.LeafFailure(
                    sweep_oracle.STRUCTURE, "a gradient is missing on one side and non-zero on the other"
                )
            continue
        if (
            isinstance(found, torch.Tensor)
            and isinstance(wanted, torch.Tensor)
            and found.numel() == 0
            and wanted.numel() == 0
            and tuple(found.shape) != tuple(wanted.shape)
        ):
            # No numbers on either side; which empty shape is right is not this oracle's to
            # say (the CPU's pixel_unshuffle returns its empty input's shape unchanged).
            return "empty_shapes_differ"
        if (
            sweep_db.is_exact_dtype(dtype_name)
            and same_dtype_output is not None
            and isinstance(found, torch.Tensor)
            and not (found.is_floating_point() or found.is_complex())
        ):
            # An integer probe's integer outputs are judged exactly against the CPU in the
            # same dtype with the same default floating dtype: an integer result rounded
            # from a floating intermediate (``masked.logsumexp`` of int32) depends on that
            # intermediate's precision, which the float64 reference does not share.
            same = same_dtype_output(index)
            if isinstance(same, torch.Tensor):
                wanted = same
        leaf_dtype, leaf_atol, leaf_rtol = _leaf_bounds(torch, info, dtype_name, found, atol, rtol)
        failure = sweep_oracle.compare_leaf(
            torch,
            found,
            wanted,
            dtype_name=leaf_dtype,
            atol=leaf_atol,
            rtol=leaf_rtol,
            oracle=oracle,
            compare_integers=rules.compare_integers,
            same_dtype_cpu=(lambda i=index: same_dtype_output(i)) if same_dtype_output is not None else None,
            nonfinite_pattern=not rules.mixing,
            inf_input=rules.inf_input,
            nonfinite_input=rules.nonfinite_input,
            wrap_dtype=getattr(torch, dtype_name) if sweep_db.dtype_kind(dtype_name) == "integer" else None,
            rounding_slack=1 if info.name in sweep_db.TRUNCATED_FLOAT_OPS and sweep_db.is_exact_dtype(dtype_name) else 0,
        )
        if failure is not None and _range_limited(case.transform, failure, found, torch):
            return "range_limit"
        if failure is not None and _argument_undefined(torch, case, failure, wanted, same_dtype_output, index, leaf_dtype, leaf_atol, leaf_rtol):
            return "argument_undefined"
        if failure is not None:
            return index, failure
    return None


def _argument_undefined(
    torch: Any,
    case: sweep_cases.Case,
    failure: sweep_oracle.LeafFailure,
    wanted: Any,
    same_dtype_output: Any,
    index: int,
    dtype_name: str,
    atol: float,
    rtol: float,
) -> bool:
    """Whether a per-argument case's failure stands on an undefined reference: an argument
    of another size than the op needs (a per-channel weight of size 0 beside 5 channels)
    that a CPU kernel does not check is read past its end, and then the CPU's own results
    in float64 and in the probe's dtype (other allocations, other memory) differ by far
    more than rounding. A defined result does not: the same-dtype CPU result is within the
    dtype's bound of float64, the premise of the whole oracle. On the H200,
    ``native_batch_norm`` with its weight sliced to size 0 failed by 4e3-7e4 times the
    bound this way."""
    if case.transform not in sweep_cases.ARGUMENT_TRANSFORMS or same_dtype_output is None:
        return False
    if failure.cls not in (sweep_oracle.WRONG_VALUE, sweep_oracle.NONFINITE_INVENTED):
        return False
    try:
        same = same_dtype_output(index)
    except Exception:  # noqa: BLE001 - no same-dtype result: the failure stands
        return False
    if not isinstance(same, torch.Tensor) or not isinstance(wanted, torch.Tensor):
        return False
    return sweep_oracle.compare_leaf(torch, same, wanted, dtype_name=dtype_name, atol=atol, rtol=rtol) is not None


#: The unjudged note of a per-argument case whose CPU result reads past the argument.
_READS_OUTSIDE = "the CPU's result changes when the memory beside the argument's view changes (it is read past its end)"


def _reads_outside_argument(torch: Any, reference: sweep_ref.ReferenceProcess, request: dict[str, Any]) -> bool:
    """Whether a per-argument case (``ARGUMENT_TRANSFORMS``) reads memory outside its
    argument: the CPU's same-dtype result changes when the elements of the argument's base
    outside the view are poisoned (``sweep_ref``'s ``same_dtype_poisoned``; NaN, or a far
    integer) and the view's own are not. Then the case has no defined result: every device
    reads whatever lies there (a view keeps its storage, so the CPU reads the original
    values in float64 and in the probe's dtype alike, and agrees with itself; the GPU's
    memory holds something else). A CPU that cannot say (the reference fails) leaves the
    finding standing."""
    if request["transform"] not in sweep_cases.ARGUMENT_TRANSFORMS:
        return False
    reply = reference.compute({**request, "mode": "same_dtype_poisoned"}, REFERENCE_TIMEOUT_S)
    if not reply.get("ok"):
        return False
    if reply.get("poisoned_error") is not None:
        return True  # the plain input computes, the poisoned one raises
    return not same_bits(torch, reply["plain"], reply["outputs"])


def same_bits(torch: Any, first: list[Any], second: list[Any]) -> bool:
    """Whether two lists of results are the same bit for bit (``sweep_oracle.same_bits``:
    NaN equal to NaN whatever its payload, the sign of zero told apart)."""
    if len(first) != len(second):
        return False
    for a, b in zip(first, second):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return False
        if not isinstance(a, torch.Tensor):
            if a != b and not (isinstance(a, float) and isinstance(b, float) and a != a and b != b):
                return False
        elif not sweep_oracle.same_bits(torch, a, b):
            return False
    return True


def _range_limited(transform: str, failure: sweep_oracle.LeafFailure, found: Any, torch: Any) -> bool:
    """Whether a failure is the range of the dtype speaking, not the device: a dtype's
    largest or lowest value (``max``, ``lowest``; ``intmax``/``intmin`` in a floating
    output, which converts it) overflows the accumulation type in any intermediate that
    squares, sums or scales it (a variance, a norm, a histogram's bin width), where the
    float64 reference never overflows; the result is then infinite, NaN, zero or rounded
    anywhere. Only a NaN of the reference that comes back as a number stays a failure.
    ``huge`` (√max/16, whose square is still finite) is judged in full."""
    if failure.cls not in (sweep_oracle.WRONG_VALUE, sweep_oracle.NONFINITE_INVENTED):
        return False
    if transform in ("max", "lowest"):
        return True
    floating = isinstance(found, torch.Tensor) and (found.is_floating_point() or found.is_complex())
    return transform in ("intmax", "intmin") and floating


def _leaf_bounds(torch: Any, info: Any, dtype_name: str, found: Any, atol: float, rtol: float) -> tuple[str, float, float]:
    """The real floating dtype an output is judged in (its range bounds overflow) and its
    (atol, rtol): the probe's own, or, for a floating output less precise than the probe's
    dtype (an ``out_narrow`` write, a float32 result of an integer probe), that dtype's
    bound too."""
    order = sweep_cases.PRECISION_ORDER
    probe_real = sweep_db.COMPLEX_PARTS.get(dtype_name, dtype_name)
    judged = probe_real if probe_real in order else "float32"
    if not isinstance(found, torch.Tensor) or not (found.is_floating_point() or found.is_complex()):
        return judged, atol, rtol
    own = str(found.dtype).replace("torch.", "")
    own_real = sweep_db.COMPLEX_PARTS.get(own, own)
    if own_real not in order or (probe_real in order and order.index(own_real) <= order.index(probe_real)):
        return judged, atol, rtol
    own_atol, own_rtol = sweep_db.tolerance(info, torch, own_real)
    return own_real, max(atol, own_atol), max(rtol, own_rtol)


def _record(tally: SweepTally, case: sweep_cases.Case, cls: str, failure: sweep_oracle.LeafFailure, output: str) -> None:
    tally.fail(case.transform, case.direction, case.sample, output, failure, cls=cls)


def _error_inputs_due(torch: Any, info: Any, dtype: str, dev_type: str, only_new: tuple[str, ...] | None) -> bool:
    """Whether this probe tries the entry's error inputs: they do not depend on the dtype,
    so only the probe of the first dtype the entry declares for the device runs them, and
    only in a full-tier run (a standard-subset probe runs its subset below it)."""
    if only_new is not None or getattr(info, "error_inputs_func", None) is None:
        return False
    first = next((short for short, name in sweep_db.DTYPES.items() if sweep_db.supports(info, torch, name, dev_type)), None)
    return first == dtype


def _run_error_inputs(ctx: ProbeContext, info: Any, dtype_name: str, tally: SweepTally, started: float, budget: float) -> None:
    """The database's error inputs (``OpInfo.error_inputs``): inputs every device must
    reject. Raising, whatever the message, is right (messages differ by device). Returning
    values where the CPU rejects the same input is ``invalid_accepted``: reported, not
    counted as wrong math. Where the CPU computes it too, the database's expectation does
    not hold on this torch: not judged. A device-side assert rejects the input as well, but
    ends the device context: the probe's results stand and the worker is replaced."""
    import itertools

    torch = ctx.torch
    try:
        errors = list(itertools.islice(info.error_inputs(ctx.device_name), MAX_ERROR_INPUTS))
    except Exception as exc:  # noqa: BLE001 - the database's own generator failed
        tally.unjudge("error_inputs_unavailable", f"the database's error_inputs failed: {error_text(exc)}")
        return
    cpu_errors: list[Any] | None = None
    for index, error_input in enumerate(errors):
        if time.monotonic() - started > budget:
            tally.not_run += 1
            continue
        where = f"{ERROR_INPUT} {index}"
        sample = error_input.sample_input
        engine, fault, call = _fault(info.name, dtype_name, sweep_cases.Case(index, ERROR_INPUT, False))
        accepted = False
        try:
            info(sample.input, *sample.args, **sample.kwargs)
            ctx.sync()
            accepted = True
        except Exception as exc:  # noqa: BLE001 - rejecting is what the database asks for
            if fault is not None and fault.effect == "accept_invalid":
                accepted = True  # simulated: the device returns a result instead
            elif ctx.is_gpu:
                lost = device_context_problem(torch, ctx.device)
                if lost is not None:
                    tally.error_inputs += 1
                    tally.error_inputs_rejected += 1
                    tally.cases += 1
                    tally.passed += 1
                    tally.context_lost = (
                        f"{where}: the device rejected an input every device must reject ({error_text(exc, 200)}), and "
                        "its context is unusable afterwards"
                    )
                    return
        tally.error_inputs += 1
        if not accepted:
            tally.error_inputs_rejected += 1
            tally.cases += 1
            tally.passed += 1
            continue
        if cpu_errors is None:
            try:
                cpu_errors = list(itertools.islice(info.error_inputs("cpu"), MAX_ERROR_INPUTS))
            except Exception:  # noqa: BLE001
                cpu_errors = []
        expected = f"{getattr(error_input.error_type, '__name__', 'an error')} matching {error_input.error_regex!r}"
        same = index < len(cpu_errors) and cpu_errors[index].error_regex == error_input.error_regex
        if not same:
            tally.unjudge("error_input_without_cpu_twin", f"{where}: the device accepted it (the database expects {expected})")
            continue
        twin = cpu_errors[index].sample_input
        try:
            info(twin.input, *twin.args, **twin.kwargs)
        except Exception as exc:  # noqa: BLE001 - the CPU rejects it, as the database says
            tally.cases += 1
            tally.passed += 1
            tally.accept_invalid(f"{where}: the database expects {expected} (CPU: {error_text(exc, 120)})"[:200])
            continue
        tally.unjudge("error_input_accepted_by_cpu", f"{where}: the CPU computes it too (the database expects {expected})")


class _DeviceContextLost(RuntimeError):
    """The device failed on valid input and its context is unusable: the probe errors."""


#: Device errors in which the backend declares a documented limitation (cuFFT's half
#: precision sizes, LAPACK drivers that CUDA lacks) or an argument that must stay on the
#: host (samples are generated on the CPU, so the sweep cannot know which ones).
_DECLARED = (
    ("not supported on cuda", "unsupported_on_device"),
    # The dispatcher has no kernel of this operator for the device's backend.
    ("notimplementederror: could not run", "unsupported_on_device"),
    ("only supports dimensions whose sizes are powers of two", "unsupported_on_device"),
    ("to be on cpu", "host_argument"),
    # An allocation the device cannot satisfy is its size, not its arithmetic (the message
    # keeps the size asked for: on the H200, ``linalg.eigvalsh`` of 65,537 matrices of 5×5
    # asked for 17-68 GiB, beside cuSOLVER's refusal of the same batch in ``eigh``).
    ("out of memory. tried to allocate", "out_of_memory"),
)


#: What a device-side failure looks like in an exception's text, as opposed to an argument
#: check refusing the input before any kernel ran: a runtime or library status, an
#: exception type the accelerator runtime raises, an assert of the framework's internals.
#: The shared rule (``faults.is_device_fault``): a device error is ERROR only when it is a
#: fault of the device's stack, not an argument check that refused the input.
_is_device_fault = is_device_fault


def _declared_limitation(message: str) -> str | None:
    lowered = message.lower()
    for pattern, kind in _DECLARED:
        if pattern in lowered:
            return kind
    return None


def _reference_odd(torch: Any, found: Any, wanted: Any, same: Any) -> bool:
    """A shape difference that is the reference's: an empty auxiliary output (saved
    statistics some backends do not return), or the CPU in the sample's own dtype agreeing
    with the device."""
    if not isinstance(found, torch.Tensor) or not isinstance(wanted, torch.Tensor):
        return False
    if (found.numel() == 0) != (wanted.numel() == 0):
        return True
    return isinstance(same, torch.Tensor) and tuple(same.shape) == tuple(found.shape)
