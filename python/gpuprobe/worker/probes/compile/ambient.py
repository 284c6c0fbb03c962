"""compile family, ambient state: one training step compiled again under each process-wide
setting that changes what it computes, every compile on the same caches.

A compiled function's result depends on more than its code and its inputs: the autocast
dtype it runs under, whether gradients are recorded, whether float32 products may use TF32,
the default dtype of tensors it creates. Eager code reads these at every call. Compiled code
reads them when it is compiled, so every cache between the two (Dynamo's guards, the
AOTAutograd cache, Inductor's FX-graph cache, all on disk and shared by every process of a
machine) must tell them apart: a cache that keys on less than the computation depends on
serves the code compiled under one setting to a run under another, and the run computes at
the other setting's precision, silently. A training job meets this whenever one machine runs
the same model under two settings (a bfloat16 and a float16 job, an evaluation under
``no_grad``, a float32 check with TF32 off).

The probe (``run``): a small model (conv2d, a linear layer, layer norm, GELU, a head,
log-softmax and a loss that creates a tensor inside the step) compiled with the default
Inductor backend under each of ``STATES`` in turn, Dynamo reset between them and the disk
caches kept, so each compile meets the entries the states before it left. Each state's
compiled step is judged against eager under the same state on the same device
(``judge_state``):

- every returned tensor's dtype exactly (the logits' dtype is the autocast dtype: a graph
  compiled for another autocast dtype returns that one);
- every value and, where gradients are on, every parameter's gradient, norm-wise against
  the float64 step on the CPU: the compiled error may be at most ``NOISE_FACTOR`` times
  eager's own error in the same quantity, or the state's floor (``FLOOR_ULPS`` units of the
  precision it computes in), whichever is larger. Compiled and eager code round at other
  places (Inductor keeps fused intermediates in float32), so their errors are two draws of
  the same size; code compiled for a coarser setting errs by that setting's unit instead
  (bfloat16's 8 times float16's, TF32's 8,192 times float32's).

Not failures: a state this device or torch does not support (autocast in a dtype the device
lacks, TF32 on a CPU) is left out with its reason; a compile error where eager runs the same
step is counted (``compile_error``) and listed, as the compile family's programs count theirs.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gpuprobe.worker import simulate
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe
from gpuprobe.worker.probes.compile import run as compile_run
from gpuprobe.worker.probes.precision import tf32_mode
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
from gpuprobe.worker.tally import CaseTally

#: ``torch.compile``'s options: Inductor's default backend (a test of the CPU swaps in
#: ``aot_eager``, which skips code generation).
COMPILE_OPTIONS: dict[str, Any] = {}
#: The compiled error may be this many times eager's own error in the same quantity.
NOISE_FACTOR = 4.0
#: The floor of every bound, in units of the precision the state computes in: a compiled
#: and an eager sum of a few hundred terms differ by a few units, reordered.
FLOOR_ULPS = 16.0
#: Unit roundoff of the precision each state's products compute in.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "tf32": 2.0**-11, "bfloat16": 2.0**-8, "float16": 2.0**-11, "float64": 2.0**-53}


@dataclass(frozen=True)
class State:
    """One process-wide setting a compiled step may be compiled under."""

    name: str
    #: The precision its products compute in (``UNIT_ROUNDOFF``).
    precision: str
    autocast: str | None = None
    grad: bool = True
    tf32: bool = False
    default_float64: bool = False
    #: Only where the device is a GPU (TF32 is a GPU setting).
    gpu_only: bool = False


#: The states, in the order they are compiled: each autocast dtype after the other, float32
#: after TF32 and after autocast, inference after training, and the default dtype last (it
#: changes the dtype of the tensor the step creates). Every setting is met both before and
#: after one that differs from it only there.
STATES: tuple[State, ...] = (
    State("float32", "float32"),
    State("autocast_bfloat16", "bfloat16", autocast="bfloat16"),
    State("autocast_float16", "float16", autocast="float16"),
    State("autocast_bfloat16_again", "bfloat16", autocast="bfloat16"),
    State("autocast_float16_no_grad", "float16", autocast="float16", grad=False),
    State("tf32", "tf32", tf32=True, gpu_only=True),
    State("float32_again", "float32"),
    State("float32_no_grad", "float32", grad=False),
    State("default_float64", "float32", default_float64=True),
)


def _model(torch: Any) -> Any:
    nn = torch.nn

    class Step(nn.Module):
        """conv2d (a library call), a linear layer and a head (matrix products autocast
        lowers), layer norm and log-softmax (autocast keeps them in float32), GELU, and a
        tensor created inside the step (its dtype follows the default dtype)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.hidden = nn.Linear(8 * 6 * 6, 48)
            self.norm = nn.LayerNorm(48)
            self.head = nn.Linear(48, 10)

        def forward(self, images: Any, labels: Any) -> tuple[Any, Any]:
            h = torch.relu(self.conv(images)).flatten(1)
            h = torch.nn.functional.gelu(self.norm(self.hidden(h)))
            logits = self.head(h)
            # Created inside the step: its dtype is the default dtype when the step runs.
            weights = torch.linspace(0.5, 1.5, logits.shape[-1], device=logits.device)
            loss = torch.nn.functional.nll_loss(torch.log_softmax(logits.float(), dim=-1) * weights, labels)
            return logits, loss

    return Step()


@contextlib.contextmanager
def _entered(torch: Any, state: State, device_type: str) -> Iterator[None]:
    """The state's settings for the block, restored after."""
    saved_default = torch.get_default_dtype()
    with contextlib.ExitStack() as stack:
        stack.enter_context(tf32_mode(torch, state.tf32))
        if state.autocast is not None:
            stack.enter_context(torch.autocast(device_type=device_type, dtype=getattr(torch, state.autocast)))
        if not state.grad:
            stack.enter_context(torch.no_grad())
        if state.default_float64:
            torch.set_default_dtype(torch.float64)
            stack.callback(torch.set_default_dtype, saved_default)
        yield


def unsupported(torch: Any, state: State, is_gpu: bool, device_type: str) -> str | None:
    """Why ``state`` cannot run on this device, or None."""
    if state.gpu_only and not is_gpu:
        return "TF32 is a GPU setting"
    if state.autocast is not None:
        dtype = getattr(torch, state.autocast)
        try:
            with torch.autocast(device_type=device_type, dtype=dtype):
                if torch.get_autocast_dtype(device_type) != dtype:
                    return f"autocast on {device_type} does not take {state.autocast}"
        except Exception as exc:  # noqa: BLE001 - the device type has no such autocast
            return f"autocast on {device_type} in {state.autocast}: {type(exc).__name__}: {exc}"
        if device_type == "cuda" and state.autocast == "bfloat16" and not torch.cuda.is_bf16_supported():
            return "this GPU has no bfloat16"
    return None


@dataclass
class StepResult:
    """One run of the step: the returned tensors and the parameters' gradients (on the host,
    float64 for values, the device's dtype kept aside), or the error it raised."""

    values: dict[str, Any]
    dtypes: dict[str, Any]
    error: str | None = None


def run_step(torch: Any, model: Any, inputs: tuple[Any, Any], state: State, device_type: str, compiled: bool) -> StepResult:
    """Forward (and backward where gradients are on) of ``model`` under ``state``."""
    model.zero_grad(set_to_none=True)
    step: Callable[..., Any] = torch.compile(model, **COMPILE_OPTIONS) if compiled else model
    try:
        with _entered(torch, state, device_type):
            logits, loss = step(*inputs)
            if state.grad:
                loss.backward()
    except Exception as exc:  # noqa: BLE001 - judged by the caller
        return StepResult({}, {}, compile_run.compile_error_text(exc) if compiled else f"{type(exc).__name__}: {exc}")
    values = {"logits": logits.detach(), "loss": loss.detach()}
    if state.grad:
        for name, p in model.named_parameters():
            if p.grad is not None:
                values[f"grad.{name}"] = p.grad.detach()
    dtypes = {k: v.dtype for k, v in values.items()}
    return StepResult({k: v.to("cpu", torch.float64) for k, v in values.items()}, dtypes)


class StateTally(CaseTally):
    """The probe's cases (each tensor of each state's step), as the sweep counts them, and
    the largest share of its bound a passing tensor used."""

    def __init__(self) -> None:
        super().__init__()
        self.bound_used = 0.0

    def record_tensor(self, state: str, output: str, failure: sweep_oracle.LeafFailure | None) -> None:
        """One tensor of the step compiled under ``state``: passed when ``failure`` is None
        (its direction: backward for a gradient)."""
        direction = "backward" if output.startswith("grad.") else "forward"
        self.record(state, direction, 0, output, failure)


def judge_state(
    tally: StateTally, state: State, compiled: StepResult, eager: StepResult, reference: StepResult
) -> None:
    """Each of the compiled step's tensors against eager's dtype and, norm-wise, against the
    float64 step with eager's own error as the yardstick (module docstring)."""
    floor = FLOOR_ULPS * UNIT_ROUNDOFF[state.precision]
    for name, expected in reference.values.items():
        if name not in eager.values:
            continue
        if not bool(expected.isfinite().all()) or not bool(eager.values[name].isfinite().all()):
            tally.unjudge("reference_nonfinite")
            continue
        found = compiled.values.get(name)
        if found is None:
            tally.record_tensor(state.name, name, sweep_oracle.LeafFailure(sweep_oracle.STRUCTURE, "the compiled step returned no such tensor"))
            continue
        if compiled.dtypes[name] != eager.dtypes[name]:
            tally.record_tensor(
                state.name,
                name,
                sweep_oracle.LeafFailure(
                    sweep_oracle.WRONG_VALUE,
                    f"dtype {compiled.dtypes[name]} where eager under the same settings returns {eager.dtypes[name]}: "
                    "code compiled under other settings",
                    expected=str(eager.dtypes[name]),
                    found=str(compiled.dtypes[name]),
                ),
            )
            continue
        norm = float(expected.norm())
        if norm == 0.0:
            tally.unjudge("zero_reference")
            continue
        eager_error = float((eager.values[name] - expected).norm()) / norm
        bound = max(NOISE_FACTOR * eager_error, floor)
        failure = _norm_failure(found, expected, bound, eager_error)
        tally.record_tensor(state.name, name, failure)
        if failure is None:
            error = float((found - expected).norm()) / norm
            tally.bound_used = max(tally.bound_used, error / bound)


def _norm_failure(found: Any, expected: Any, bound: float, eager_error: float) -> sweep_oracle.LeafFailure | None:
    if tuple(found.shape) != tuple(expected.shape):
        return sweep_oracle.LeafFailure(sweep_oracle.STRUCTURE, f"shape {tuple(found.shape)} where eager has {tuple(expected.shape)}")
    if not bool(found.isfinite().all()):
        return sweep_oracle.LeafFailure(sweep_oracle.NONFINITE_INVENTED, "NaN/Inf where eager and float64 are finite")
    diff = (found - expected).abs().reshape(-1)
    norm = float(expected.norm())
    error = float(diff.norm()) / norm
    if error <= bound:
        return None
    worst = int(diff.argmax())
    return sweep_oracle.LeafFailure(
        sweep_oracle.WRONG_VALUE,
        f"norm-wise relative error {error:.3g} against float64 where eager's is {eager_error:.3g} and {bound:.3g} is allowed",
        expected=f"{float(expected.reshape(-1)[worst]):.9g}",
        found=f"{float(found.reshape(-1)[worst]):.9g}",
        max_err=float(diff[worst]),
        bad_elements=int((diff > bound * norm / math.sqrt(max(1, diff.numel()))).sum()),
        elements=diff.numel(),
    )


def _simulated(torch: Any, state: State, result: StepResult) -> StepResult:
    """A simulated fault applied to the compiled step's tensors (op ``compile``, method
    ``ambient``, variant the state's name; labelled SIMULATED in the output)."""
    engine = simulate.engine()
    if engine is None or not engine.wants("compile") or result.error is not None:
        return result
    info = simulate.CallInfo(op="compile", method="ambient", dtype=state.precision, on_device=True, variant=state.name)
    fault = engine.decide(info)
    if fault is None:
        return result
    values = {k: engine.apply(fault, info, v.clone()) if v.numel() else v for k, v in result.values.items()}
    return StepResult(values, result.dtypes)


def _reset_dynamo(torch: Any) -> None:
    """Dynamo's in-memory caches dropped: the next compile traces again and looks the
    graph up in the disk caches, as another process would."""
    torch._dynamo.reset()


def run(ctx: ProbeContext) -> ProbeOutput:
    """Compiles the step under each state in turn and judges each (module docstring)."""
    torch = ctx.torch
    problem = compile_run.compiler_problem(torch, ctx.is_gpu)
    if problem:
        raise SkipProbe(problem)
    cache = compile_run.use_cache(ctx)
    device_type = ctx.device.type
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(ctx.derive_seed("ambient") % (2**31))
    initial = _model(torch)
    with torch.no_grad():
        for p in initial.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * (1.0 / math.sqrt(max(1, p[0].numel() if p.dim() > 1 else 8))))
    images = torch.randn(6, 3, 8, 8, generator=generator)
    labels = torch.randint(0, 10, (6,), generator=generator)
    tally = StateTally()
    metrics: dict[str, Any] = {"states": [], "cache": "gpuprobe's" if cache else "Inductor's default"}
    reference_model = copy.deepcopy(initial).to(torch.float64)
    device_inputs = (images.to(ctx.device), labels.to(ctx.device))
    for state in STATES:
        reason = unsupported(torch, state, ctx.is_gpu, device_type)
        if reason is not None:
            tally.unjudge("state_unsupported")
            tally.notes.append(f"{state.name} left out: {reason}")
            continue
        reference_state = State(state.name, "float64", grad=state.grad)
        reference = run_step(torch, reference_model, (images.to(torch.float64), labels), reference_state, "cpu", compiled=False)
        eager = run_step(torch, copy.deepcopy(initial).to(ctx.device), device_inputs, state, device_type, compiled=False)
        if reference.error is not None or eager.error is not None:
            tally.unjudge("eager_rejects")
            tally.notes.append(f"{state.name} not judged: {reference.error or eager.error}")
            continue
        _reset_dynamo(torch)
        state_started = time.perf_counter()
        compiled = _simulated(torch, state, run_step(torch, copy.deepcopy(initial).to(ctx.device), device_inputs, state, device_type, compiled=True))
        ctx.sync()
        metrics["states"].append(state.name)
        metrics[f"compile_s_{state.name}"] = round(time.perf_counter() - state_started, 3)
        if compiled.error is not None:
            # Loud, not silent (the user's step raises): counted and listed, as the compile
            # family's other programs do, not a wrong value.
            tally.unjudge("compile_error")
            metrics["compile_errors"] = metrics.get("compile_errors", 0) + 1
            tally.notes.append(f"compile error under {state.name}, where eager runs the same step: {compiled.error}")
            continue
        judge_state(tally, state, compiled, eager, reference)
    _reset_dynamo(torch)
    metrics["bound_used"] = round(tally.bound_used, 4)
    metrics["seconds"] = round(time.perf_counter() - started, 3)
    measurement = tally.measurement("compile.ambient", "float32")
    notes = list(tally.notes)
    if not ctx.is_gpu:
        notes.append("on the CPU, torch.compile generates C++ (Inductor's CPU backend), not Triton")
    return ProbeOutput(measurement=measurement, metrics=metrics, notes=notes)
