"""compile family implementation: many database entries in one ``torch.compile`` program,
judged output by output against eager on the same device, and against float64 where they
disagree.

One probe compiles one *program*: a straight-line function that calls every selected entry
of PyTorch's operator database once, each on its own sample (``sweep_cases`` builds the
samples exactly as the sweep does), and returns every output. Compiling one program for many
operators amortises Dynamo's tracing and Inductor's code generation (seconds each) over all
of them; the outputs stay separate, so a wrong one names its entry. The program is compiled
and run in *passes*, each a case ``variant``:

- ``compiled``: the default Inductor backend on the database's first sample of each entry,
  forward and, for differentiable entries, backward (the gradient of ``Σ⟨w, out⟩``, the
  sweep's loss, through the compiled backward graph AOTAutograd makes);
- ``dynamic``: the same compiled function called on another sample of each entry: the
  shapes it has not seen make Dynamo recompile with symbolic sizes (its default automatic
  dynamic shapes), the code a training job with varying batch or sequence lengths runs;
- ``noncontig``: forward on non-contiguous copies of the inputs (strides are guarded on: a
  new compile), ``channels_last`` for 4-D inputs;
- ``out`` and ``inplace``: forward through the ``out=`` and in-place entry points
  (functionalization rewrites both); ``out_noncontig``: ``out=`` into a stride-2 view the
  program makes of a wider tensor;
- ``sum_grad``: the loss ``Σ out.sum()`` computed inside the program (as a compiled
  training step computes its loss), its value judged and its gradients taken: the compiler
  sees the reduction that seeds the backward (an expanded tensor of ones) and may fold it
  into the gradient kernels, where ``compiled`` seeds dense random weights outside;
- ``fused``: each entry between a pointwise prologue on its input and a pointwise epilogue
  on its floating outputs (``Composed``), forward and backward: the compiler fuses them into
  the entry's kernels (a reduction that reads a computed value, a scatter that writes one),
  and may recompute the prologue in the backward at another precision than the forward
  stored; the program's other passes call each entry on plain inputs, so no fusion across
  an entry's boundary is ever generated there;
- ``inplace_output``: forward, each floating output written in place after the call
  (``WritesOutputs``) and the input returned too: an output that aliases its input (the
  input itself, a view) carries eager's write into the input, and compiled code must too
  (functionalization decides what aliases what);
- ``values``: forward on one value class per entry (``VALUE_PASS_FLOAT`` /
  ``VALUE_PASS_INTEGER``: the sweep's −0.0, NaN with the sign bit, subnormal, huge, the
  dtype's extremes, NaN and the infinities, integer extremes and negatives; or, for an entry
  whose sample takes a Python float, that scalar set to −0.0, NaN or ±Inf, and for a binary
  elementwise entry that takes a Python number as its second operand, that operand replaced
  by one: the compiler bakes scalars into its code), the class chosen by a hash of entry and dtype so that the
  database's entries spread over every class;
- ``inplace_view`` and ``inplace_alias``: the in-place entry point writing into a view with
  gaps of a wider tensor (every other element; ``VIEW_KINDS``: a strided slice or a gapped
  ``unfold``), made inside the program (functionalization must write back through the view
  into its base) or passed in (the program's input aliases memory it must not touch). The
  elements between the view's must keep their values bit for bit, and the base's written
  elements, like the returned tensor, must equal the functional result.

Gradients of order statistics (``amax``, ``max``, ``sort``, ...) in half precision go to
positions chosen among ties, which compiled and eager code may choose differently: there
only a NaN or infinity where eager's gradient is finite is judged (``nonfinite_only``).

Judging an output (``_judge``): equal to eager within the sweep's bound for the dtype is
right. Otherwise the float64 reference on the CPU decides: the compiled output within the
bound of float64 (or within twice eager's own error, the dtype's yardstick) is right; eager
right and compiled wrong is a failure; both off is not judged (the reference or the bound is
not to be trusted there, and eager's own error is the sweep's to report). Integer outputs are
exact against eager, then against the CPU in the same dtype. Positions returned by order
statistics are compared where their values differ only.

What is not a failure: an entry eager rejects (dropped before compiling: not a valid
program), a graph break (counted in the metrics), an entry that makes Dynamo fall back to
eager. A compile error on a program whose every entry runs eagerly is an error of the
compiler: the program is bisected to the entries that fail alone, each reported as a device
error of class ``compile_error``; the other entries are judged.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable

from gpuprobe.worker import simulate
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe
from gpuprobe.worker.probes.compile import specs as compile_specs
from gpuprobe.worker.probes.precision import tf32_mode
from gpuprobe.worker.probes.sweep import cases as sweep_cases
from gpuprobe.worker.probes.sweep import db as sweep_db
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
from gpuprobe.worker.probes.sweep.ref import error_text
from gpuprobe.worker.tally import MAX_REPORTED, CaseTally

#: Wall-clock budget of one probe's passes; a pass that starts later is counted as not run.
DEFAULT_BUDGET_S = 150.0
#: Dynamo gives up on a function after this many recompiles (then runs it eagerly, which
#: would pass silently): a probe's passes recompile one program a few times by design.
RECOMPILE_LIMIT = 64

#: The passes in order, with the transform their inputs get and whether gradients are taken.
PASSES: tuple[tuple[str, str, bool], ...] = (
    ("compiled", "base", True),
    ("dynamic", "base", True),
    ("sum_grad", "base", True),
    ("fused", "base", True),
    ("inplace_output", "base", False),
    ("noncontig", "noncontig", False),
    ("channels_last", "channels_last", False),
    ("values", "values", False),
    ("out", "out", False),
    ("out_noncontig", "out_noncontig", False),
    ("inplace", "inplace", False),
    ("inplace_view", "inplace", False),
    ("inplace_alias", "inplace", False),
)
PASS_NAMES = tuple(p[0] for p in PASSES)
#: Placements of the covering (``covering_passes``) before they repeat: every pass may run
#: in 3, 4 or 5 dtypes.
COVERING_ROTATIONS = 60
#: Value classes of the ``values`` pass for floating dtypes, and for integer dtypes.
VALUE_PASS_FLOAT = ("negzero", "negnan", "subnormal", "huge", "max", "lowest", "nan", "posinf", "neginf")
VALUE_PASS_INTEGER = ("intmax", "intmin", "negative")
#: Values a Python float argument takes in the ``values`` pass, each with the sweep
#: transform whose judging rules fit it (how NaN and infinities may spread).
SCALAR_VALUES: tuple[tuple[str, float, str], ...] = (
    ("scalar_negzero", -0.0, "negzero"),
    ("scalar_nan", float("nan"), "nan"),
    ("scalar_posinf", float("inf"), "posinf"),
    ("scalar_neginf", float("-inf"), "neginf"),
)
#: How the in-place view passes make a view with gaps of the last dimension: every other
#: element through a strided slice, or through ``unfold`` with windows of one element two
#: apart (the same elements through another view operator, another write-back path).
VIEW_KINDS = ("slice", "unfold")
#: Passes whose calls write into a view with gaps (and where that view is made).
VIEW_PASSES = {"inplace_view": "inside", "inplace_alias": "outside"}


class _CompileError(Exception):
    """Compiling (or running the compiled code of) a valid program raised."""


@dataclass
class _Call:
    """One entry's call in one pass."""

    key: str
    info: Any
    sample_index: int
    sample: Any
    case: sweep_cases.Case
    oracle: str
    atol: float
    rtol: float
    judging: sweep_cases.Judging
    #: How many of the call's results are forward outputs (the rest are gradients).
    forward_count: int = 0
    #: The gradient's seed: ``projection`` (the sweep's ``Σ⟨w, out⟩``) or ``sum``.
    loss: str = "projection"
    #: For the in-place view passes: where the view is made (``inside`` the program or
    #: ``outside``) and how (``VIEW_KINDS``); empty otherwise.
    view_place: str = ""
    view_kind: str = ""
    #: The value class (or scalar class) of the ``values`` pass, for the failure's label.
    value_class: str = ""
    #: Gradients judged for invented NaN/Inf only (order statistics in half precision).
    nonfinite_only_grads: bool = False


class ProgramTally(CaseTally):
    """A compiled program's cases, with what only the compile family counts: compile errors
    on programs eager runs (listed, not wrong values), the passes not run and each pass's
    time."""

    def __init__(self) -> None:
        super().__init__()
        self.compile_errors = 0
        self.compile_error_examples: list[str] = []
        self.pass_seconds: dict[str, float] = {}
        self.passes_not_run: list[str] = []

    def fail_call(self, call: _Call, variant: str, output: str, failure: sweep_oracle.LeafFailure) -> None:
        """A wrong output of one call (counted by the caller), labelled by the call's entry."""
        self.fail(variant, call.case.direction, call.sample_index, f"{call.key} {output}", failure)

    def compile_error(self, call: _Call, variant: str, message: str) -> None:
        """A compile error on a valid program: its own class. It is loud (the user's program
        raises), not a wrong number, so it is listed and counted and does not fail the probe."""
        self.compile_errors += 1
        self.unjudge("compile_error")
        if len(self.compile_error_examples) < MAX_REPORTED:
            self.compile_error_examples.append(
                f"{call.info.name}{_variant_suffix(call.info)} ({variant}, {call.case.direction}, sample {call.sample_index}): {message}"[:400]
            )


def _variant_suffix(info: Any) -> str:
    variant = str(getattr(info, "variant_test_name", "") or "")
    return f".{variant}" if variant else ""


# -- the compiler's environment ----------------------------------------------------------------


def compiler_problem(torch: Any, on_gpu: bool) -> str | None:
    """Why ``torch.compile`` cannot generate code here, or None."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    if sys.version_info >= (3, 14) and not hasattr(torch, "_dynamo"):
        return "Dynamo does not support this Python"
    if on_gpu:
        try:
            from torch.utils._triton import has_triton  # type: ignore

            if not has_triton():
                return "Triton is not installed or does not support this GPU (Inductor generates Triton kernels for GPUs)"
        except Exception as exc:  # noqa: BLE001
            return f"Triton's availability cannot be told: {type(exc).__name__}: {exc}"
    else:
        compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++") or shutil.which("c++")
        if not compiler:
            return "no C++ compiler (g++, clang++ or $CXX) for Inductor's CPU backend"
    return None


def use_cache(ctx: ProbeContext) -> str | None:
    """Points Inductor's caches (FX graphs, generated kernels, Triton binaries) at gpuprobe's
    cache directory, one per torch version, unless the user chose one: a second run then
    loads what the first compiled. Returns the directory, or None when none is set."""
    torch = ctx.torch
    root = ctx.options.get("bytecode_cache")
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return os.environ["TORCHINDUCTOR_CACHE_DIR"]
    if not isinstance(root, str) or not root:
        return None
    directory = os.path.join(os.path.dirname(os.path.abspath(root)), "inductor", str(torch.__version__).replace("/", "_"))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return None
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = directory
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(directory, "triton"))
    return directory


def compile_error_text(exc: BaseException, limit: int = 400) -> str:
    """``Type: first line`` of the exception and of its root cause: the compiler wraps the
    error that says what went wrong (``BackendCompilerFailed`` around a
    ``LoweringException`` around an ``AssertionError``) and puts it on a later line."""
    outer = error_text(exc, limit)
    root: BaseException = exc
    seen = {id(exc)}
    while True:
        inner = getattr(root, "inner_exception", None) or root.__cause__
        if inner is None or id(inner) in seen:
            break
        seen.add(id(inner))
        root = inner
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = next((line for line in lines[1:] if "Exception" in line or "Error" in line), "")
    if root is not exc:
        detail = error_text(root, limit)
    return f"{outer} ({detail})"[:limit] if detail and detail not in outer else outer[:limit]


# -- building the program ----------------------------------------------------------------------


def make_program(functions: list[Callable[..., Any]]) -> Callable[..., Any]:
    """A straight-line function calling ``functions[i](x, *a, **k)`` on ``calls[i]``.

    Unrolled rather than a loop: Dynamo resumes after a graph break in straight-line code,
    while a break inside a loop would leave the rest of the loop eager."""
    lines = ["def program(calls):", "    outs = []"]
    for i in range(len(functions)):
        lines.append(f"    x, a, k = calls[{i}]")
        lines.append(f"    outs.append(fn{i}(x, *a, **k))")
    lines.append("    return outs")
    namespace: dict[str, Any] = {f"fn{i}": f for i, f in enumerate(functions)}
    exec("\n".join(lines), namespace)  # noqa: S102 - the source is built above from indices only
    return namespace["program"]


def _view_of(base: Any, kind: str) -> Any:
    """The view with gaps of ``base`` (every other element of the last dimension)."""
    if kind == "unfold":
        return base.unfold(-1, 1, 2).squeeze(-1)
    return base[..., ::2]


def _entry_function(torch: Any, call: _Call, dtype_name: str) -> Callable[..., Any]:
    info = call.info
    transform = call.case.transform
    if call.view_place == "inside":
        kind = call.view_kind

        def write_through_view(base: Any, *args: Any, **kwargs: Any) -> Any:
            return info.inplace_variant(_view_of(base, kind), *args, **kwargs)

        return write_through_view
    if call.loss == "sum":
        process = getattr(call.sample, "output_process_fn_grad", None)

        def loss_inside(x: Any, *args: Any, **kwargs: Any) -> Any:
            # The loss is part of the compiled program, as in a training step: the compiler
            # sees the reduction that seeds the backward and may fold it into the gradient.
            result = info.op(x, *args, **kwargs)
            outs = sweep_cases.differentiable_outputs(torch, process(result) if callable(process) else result)
            return sum_loss(torch, outs) if outs else result

        return loss_inside
    if transform in sweep_cases.CALL_VARIANTS:

        def variant(x: Any, *args: Any, **kwargs: Any) -> Any:
            return sweep_cases.call_variant(torch, info, transform, (x, list(args), kwargs), dtype_name, False)

        return variant
    return info.op


def gap_values(torch: Any, shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    """The values between a view's elements (on the host): drawn from the seed, so eager
    and compiled runs start from the same memory and what must stay can be told exactly."""
    generator = torch.Generator().manual_seed(seed ^ 0x5EED)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
    return torch.randint(1, 100, shape, generator=generator).to(dtype)


def _gapped_base(torch: Any, x: Any, seed: int) -> Any:
    """A tensor twice as wide in the last dimension as ``x``: ``x`` at the even positions,
    ``gap_values`` at the odd ones."""
    gaps = gap_values(torch, tuple(x.shape), x.dtype, seed).to(x.device)
    return torch.stack([x.detach(), gaps], dim=-1).reshape(tuple(x.shape[:-1]) + (2 * x.shape[-1],))


@dataclass
class _Inputs:
    """A call's arguments, and for the view passes the base the view writes into."""

    call: tuple[Any, list[Any], Any]
    leaves: list[Any]
    base: Any = None


def _materialize(torch: Any, call: _Call, seed: int, device: Any, dtype_name: str) -> _Inputs:
    (x, args, kwargs), leaves, _ = sweep_cases.materialize(
        torch, call.sample, call.case, seed, device=device, upcast=False, dtype_name=dtype_name
    )
    if not call.view_place:
        return _Inputs((x, args, kwargs), leaves)
    base = _gapped_base(torch, x, seed)
    given = base if call.view_place == "inside" else _view_of(base, call.view_kind)
    return _Inputs((given, args, kwargs), leaves, base)


def _view_results(torch: Any, call: _Call, returned: Any, base: Any) -> list[Any]:
    """What a view pass judges: the tensor the in-place call returned, the base's elements
    the view covers, and the base's elements between them (which must not change)."""
    from torch.utils._pytree import tree_leaves  # type: ignore

    values = [sweep_cases.dense_on_host(torch, v) for v in tree_leaves(returned)]
    values.append(sweep_cases.dense_on_host(torch, base[..., ::2]))
    values.append(sweep_cases.dense_on_host(torch, base[..., 1::2]))
    call.forward_count = len(values)
    return values


def _forward_and_loss(torch: Any, call: _Call, result: Any, leaves: list[Any], seed: int) -> tuple[list[Any], Any]:
    """The forward outputs to judge, and (backward) the sweep's loss ``Σ⟨w, out⟩`` of the
    call (the same loss as ``sweep_cases.run_case``), or None."""
    from torch.utils._pytree import tree_leaves  # type: ignore

    forward = [sweep_cases.dense_on_host(torch, v) for v in tree_leaves(result)]
    call.forward_count = len(forward)
    if not call.case.backward:
        return forward, None
    if call.loss == "sum":
        # The program returned the loss itself (``_entry_function``): judged, then seeded.
        scalar = isinstance(result, torch.Tensor) and result.dim() == 0 and result.requires_grad
        return forward, result if scalar else None
    process = getattr(call.sample, "output_process_fn_grad", None)
    processed = process(result) if callable(process) else result
    outs = sweep_cases.differentiable_outputs(torch, processed)
    if not outs or not leaves:
        return forward, None
    if call.loss == "sum":
        return forward, None
    first = sweep_cases.primary(torch, call.sample, "float32")
    return forward, sweep_cases.projection_loss(torch, outs, seed, first.dtype if first is not None else None)


def sum_loss(torch: Any, outs: list[Any]) -> Any:
    """``Σ out.sum()`` over the differentiable outputs (real and imaginary parts of complex
    ones): its gradient seeds every output with ones."""
    loss = None
    for out in outs:
        term = (torch.view_as_real(out) if out.is_complex() else out).sum()
        loss = term if loss is None else loss + term
    return loss


def _results(torch: Any, calls: list[_Call], outputs: list[Any], inputs: list[_Inputs], seed: int) -> list[list[Any]]:
    """Each call's forward outputs followed by its gradients (for the view passes:
    ``_view_results``).

    The gradients of every call come from ONE backward over the sum of the calls' losses:
    the calls share no inputs, so each leaf's gradient is its own call's, and a compiled
    program has one backward graph for all its outputs, which a second ``autograd.grad``
    could not run again."""
    results: list[list[Any]] = []
    losses: list[Any] = []
    wanted: list[Any] = []
    owners: list[int] = []
    for index, (call, result, given) in enumerate(zip(calls, outputs, inputs)):
        if call.view_place:
            results.append(_view_results(torch, call, result, given.base))
            continue
        own = given.leaves
        forward, loss = _forward_and_loss(torch, call, result, own, seed)
        results.append(forward)
        if loss is not None:
            losses.append(loss.to(torch.float64) if loss.dtype != torch.float64 and not loss.is_complex() else loss)
            wanted.extend(own)
            owners.extend([index] * len(own))
    if losses:
        total = losses[0]
        for loss in losses[1:]:
            total = total + loss
        grads = torch.autograd.grad(total, wanted, allow_unused=True)
        for owner, grad in zip(owners, grads):
            results[owner].append(sweep_cases.dense_on_host(torch, grad) if grad is not None else None)
    return results


# -- the probe ---------------------------------------------------------------------------------


def dtype_passes(dtype: str) -> tuple[str, ...]:
    """The passes a full-tier program in ``dtype`` may run (``compile_specs.FULL_PASSES``)."""
    return compile_specs.FULL_PASSES.get(dtype, PASS_NAMES)


def covering_passes(chunk: int, dtype: str, rotation: int) -> list[str]:
    """The passes program ``chunk`` runs in ``dtype`` in the full tier: the passes of
    ``compile_specs.COVERING_EVERY_DTYPE``, and each other pass when this dtype is the one
    of the dtypes that may run it placed at ``(chunk + the pass's position + rotation)``
    among them. Over one program's dtypes every pass runs exactly once; over the programs
    of one dtype every pass it may run runs (the placements shift by one each program)."""
    chosen = []
    for position, name in enumerate(PASS_NAMES):
        allowed = [d for d in compile_specs.FULL_DTYPES if name in dtype_passes(d)]
        if dtype not in allowed:
            continue
        if name in compile_specs.COVERING_EVERY_DTYPE or allowed[(chunk + position + rotation) % len(allowed)] == dtype:
            chosen.append(name)
    return chosen


def covering_rotation(seed: int) -> int:
    """The covering's placement for a run's seed (recorded in the probe's metrics)."""
    return zlib.crc32(f"compile-covering-{seed}".encode()) % COVERING_ROTATIONS


def run_program(
    ctx: ProbeContext,
    dtype: str,
    chunk: int | None = None,
    keys: list[str] | None = None,
    passes: list[str] | None = None,
    covering: bool = False,
) -> ProbeOutput:
    """Compiles the entries of one chunk of the operator database (or the ``keys`` named)
    in one dtype and judges every output of every pass (``covering``: the passes
    ``covering_passes`` gives this program and dtype for the run's seed)."""
    torch = ctx.torch
    dtype_name = sweep_db.DTYPES[dtype]
    rotation = None
    if covering and passes is None and chunk is not None:
        rotation = covering_rotation(ctx.seed)
        passes = covering_passes(chunk, dtype, rotation)
    problem = compiler_problem(torch, ctx.is_gpu)
    if problem:
        raise SkipProbe(problem)
    try:
        database = sweep_db.load(torch)
    except sweep_db.DatabaseUnavailable as exc:
        raise SkipProbe(str(exc)) from None
    cache = use_cache(ctx)
    dev_type = sweep_db.device_type(ctx.device_name)
    selected = [k for k in (keys if keys is not None else database.ops) if k in database.ops]
    if chunk is not None:
        selected = [k for k in selected if compile_specs.chunk_of(k) == chunk]
    entries = []
    excluded: dict[str, int] = {}
    for key in selected:
        info = database.ops[key]
        reason = compile_specs.exclusion(info, dtype_name)
        if reason is None and sweep_db.exclusion(info):
            reason = "excluded by the sweep"
        if reason is None and not sweep_db.supports(info, torch, dtype_name, dev_type):
            reason = "dtype not declared"
        if reason:
            excluded[reason] = excluded.get(reason, 0) + 1
            continue
        entries.append((key, info))
    if not entries:
        raise SkipProbe(f"no entry of this program supports {dtype_name} on {dev_type} in torch {database.torch_version}")
    seed = ctx.derive_seed("samples") % (2**31)
    tally = ProgramTally()
    budget = float(ctx.options.get("compile_budget_s", DEFAULT_BUDGET_S))
    started = time.monotonic()
    counters = _configure_dynamo(torch)
    wanted = [p for p in PASSES if passes is None or p[0] in passes]
    prepared = _prepare_entries(torch, entries, dtype_name, dev_type, seed, tally)
    with tf32_mode(torch, False):
        for name, transform, with_grad in wanted:
            if time.monotonic() - started > budget:
                tally.passes_not_run.append(name)
                continue
            pass_started = time.monotonic()
            rounds = _calls_for_pass(torch, prepared, name, transform, with_grad, dtype_name)
            if not rounds:
                continue
            print(f"gpuprobe compile: {dtype} {name}: {len(rounds[0])} entries", file=sys.stderr, flush=True)
            try:
                _run_pass(ctx, name, rounds, dtype_name, seed, tally)
            except Exception as exc:  # noqa: BLE001 - the harness, not the compiler: not judged
                tally.unjudge("harness", f"{name}: {error_text(exc)}")
            tally.pass_seconds[name] = round(time.monotonic() - pass_started, 3)
    _reset_dynamo(torch)
    output = _output(tally, dtype_name, chunk, entries, excluded, seed, cache, counters, time.monotonic() - started)
    if rotation is not None:
        output.metrics["covering_rotation"] = rotation
        others = [p for p in dtype_passes(dtype) if p not in passes]
        output.notes.append(
            f"passes in {dtype_name} (the full tier's covering, placement {rotation} of {COVERING_ROTATIONS} by the seed): "
            f"{', '.join(passes)}" + (f"; in other dtypes for this program: {', '.join(others)}" if others else "")
        )
    return output


@dataclass
class _Prepared:
    key: str
    info: Any
    samples: list[Any]
    backward: bool
    oracle: str
    atol: float
    rtol: float
    #: Gradients go to positions chosen among ties: judged for invented NaN/Inf only.
    tied_gradients: bool = False


#: The pointwise functions the ``fused`` pass puts around an entry: an affine map keeps a
#: positive input positive and an input in [-1, 1] inside it (most declared domains), and
#: scales away from values where a kernel's branches meet.
PROLOGUE = (0.75, 0.125)
EPILOGUE = (1.5, -0.25)


def _affine(torch: Any, value: Any, scale_shift: tuple[float, float]) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value * scale_shift[0] + scale_shift[1]
    return value


class _WrappedEntry:
    """A database entry called through a wrapper (``__call__``) and read like the entry
    itself (``name``, ``op``, ...), so eager, compiled and float64 runs, the judging rules
    and the simulation all see the entry."""

    def __init__(self, torch: Any, info: Any) -> None:
        self._torch = torch
        self._info = info

    def __getattr__(self, name: str) -> Any:
        return getattr(self._info, name)

    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @property
    def op(self) -> Callable[..., Any]:
        return self.__call__


class Composed(_WrappedEntry):
    """An entry of the database with ``PROLOGUE`` applied to its (floating) input tensor and
    ``EPILOGUE`` to each floating output, so eager, compiled and float64 runs compute the
    same composition."""

    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        from torch.utils._pytree import tree_map  # type: ignore

        torch = self._torch
        result = self._info(_affine(torch, x, PROLOGUE), *args, **kwargs)
        return tree_map(lambda v: _affine(torch, v, EPILOGUE), result)


#: Entries whose documentation leaves open whether the result is a view of the input or a
#: copy ("you should not depend on the copying vs. viewing behavior", ``torch.reshape``;
#: ``flatten`` "may return the original object, a view, or copy"; ``ravel`` "a copy is made
#: only if needed"): after a write into their output, whether the input changed is not
#: specified, so ``WritesOutputs`` returns their outputs only.
VIEW_OR_COPY = frozenset({"reshape", "reshape_as", "flatten", "ravel"})


class WritesOutputs(_WrappedEntry):
    """An entry whose floating outputs are then written in place (``EPILOGUE`` as
    ``mul_``/``add_``), returning its outputs and its input afterwards: where an output
    aliases the input (the input itself, a view of it: ``dropout`` in eval mode,
    ``contiguous`` of a contiguous tensor, ``squeeze``, ...), eager's write reaches the
    input, and compiled code must write it there too (``VIEW_OR_COPY``: not judged there)."""

    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        from torch.utils._pytree import tree_leaves  # type: ignore

        torch = self._torch
        result = self._info(x, *args, **kwargs)
        written: set[int] = set()
        for value in tree_leaves(result):
            # Each tensor once: an op that returns the same tensor twice writes it once.
            if isinstance(value, torch.Tensor) and value.is_floating_point() and id(value) not in written:
                written.add(id(value))
                value.mul_(EPILOGUE[0]).add_(EPILOGUE[1])
        if self._info.name in VIEW_OR_COPY:
            return result
        return (result, x)


def _prepare_entries(torch: Any, entries: list[tuple[str, Any]], dtype_name: str, dev_type: str, seed: int, tally: ProgramTally) -> list[_Prepared]:
    prepared = []
    for key, info in entries:
        backward = not sweep_db.is_exact_dtype(dtype_name) and sweep_db.supports_backward(info, torch, dtype_name, dev_type)
        # Gradients routed among ties (the sweep leaves them out): judged for NaN/Inf only.
        tied = backward and tied_gradients(info.name, dtype_name)
        try:
            samples = sweep_cases.generate_samples(torch, info, dtype_name, seed, requires_grad=backward)
        except sweep_cases.CaseError as exc:
            if not backward:
                tally.unjudge("no_samples", f"{key}: {exc}")
                continue
            backward = False
            try:
                samples = sweep_cases.generate_samples(torch, info, dtype_name, seed, requires_grad=False)
            except sweep_cases.CaseError as exc2:
                tally.unjudge("no_samples", f"{key}: {exc2}")
                continue
        if not samples:
            tally.unjudge("no_samples", f"{key}: the database generated no samples")
            continue
        oracle = sweep_db.oracle_for(info, dtype_name)
        atol, rtol = sweep_db.tolerance(info, torch, dtype_name)
        prepared.append(_Prepared(key, info, samples, backward, oracle, atol, rtol, tied_gradients=tied))
    return prepared


def tied_gradients(name: str, dtype_name: str) -> bool:
    """Whether an entry's gradients go to positions chosen among ties in this dtype (order
    statistics in half precision, where equal values are common)."""
    return dtype_name in ("float16", "bfloat16") and sweep_db.is_order_op(name)


def _other_sizes(prepared: _Prepared) -> int:
    """The sample ``dynamic``'s second round uses: the first later sample whose tensors
    have the same ranks and other sizes (code compiled with symbolic sizes then meets sizes
    it has not seen), else the first sample again (the symbolic code is still run)."""
    first = _shapes(prepared.samples[0])
    for index in range(1, len(prepared.samples)):
        shapes = _shapes(prepared.samples[index])
        if len(shapes) == len(first) and shapes != first and all(len(a) == len(b) for a, b in zip(shapes, first)):
            return index
    return 0


def _shapes(sample: Any) -> list[tuple[int, ...]]:
    from torch.utils._pytree import tree_leaves  # type: ignore

    return [tuple(t.shape) for t in tree_leaves([sample.input, list(sample.args), sample.kwargs]) if hasattr(t, "shape") and hasattr(t, "dtype")]


def _calls_for_pass(torch: Any, prepared: list[_Prepared], name: str, transform: str, with_grad: bool, dtype_name: str) -> list[list[_Call]]:
    """The pass's rounds of calls: one round of each entry's first sample; for ``dynamic``
    a second round on a sample of other sizes, for the entries that have one."""
    first_round: list[_Call] = []
    second_round: list[_Call] = []
    for entry in prepared:
        other = _other_sizes(entry) if name == "dynamic" else 0
        if name == "values":
            call = _value_call(torch, entry, dtype_name)
        elif name in VIEW_PASSES:
            call = _view_call(torch, entry, name, dtype_name)
        else:
            call = _make_call(torch, entry, 0, transform, with_grad, dtype_name)
            if call is not None and name == "sum_grad":
                if not call.case.backward:
                    continue  # forward only: the ``compiled`` pass's program already
                call.loss = "sum"
            if call is not None and name == "fused":
                if sweep_db.is_exact_dtype(dtype_name) or not _floating_input(torch, call.sample):
                    continue  # nothing for a floating prologue to act on
                call.info = Composed(torch, call.info)
            if call is not None and name == "inplace_output":
                if sweep_db.is_exact_dtype(dtype_name) or not _floating_input(torch, call.sample):
                    continue  # no floating output to write into
                call.info = WritesOutputs(torch, call.info)
        if call is None:
            continue
        first_round.append(call)
        if name == "dynamic":
            second = _make_call(torch, entry, other, transform, with_grad, dtype_name)
            if second is None or second.case.backward != call.case.backward:
                first_round.pop()
                continue
            second_round.append(second)
    if not first_round:
        return []
    return [first_round, second_round] if name == "dynamic" else [first_round]


def _make_call(torch: Any, entry: _Prepared, index: int, transform: str, with_grad: bool, dtype_name: str) -> _Call | None:
    sample = entry.samples[index]
    if transform != "base":
        if not sweep_cases.applicable(torch, entry.info, sample, transform, dtype_name):
            return None
        if transform in ("noncontig", "channels_last") and not sweep_cases.transform_targets(torch, sample, transform, dtype_name):
            return None
    oracle = entry.oracle
    if oracle == "value" and sweep_db.sample_is_random(entry.info.name, sample):
        oracle = "structure"
    backward = with_grad and entry.backward and oracle == "value"
    return _Call(
        entry.key,
        entry.info,
        index,
        sample,
        sweep_cases.Case(index, transform, backward),
        oracle,
        entry.atol,
        entry.rtol,
        sweep_cases.judging(entry.info.name, dtype_name, "base"),
        nonfinite_only_grads=entry.tied_gradients,
    )


def _floating_input(torch: Any, sample: Any) -> bool:
    return isinstance(sample.input, torch.Tensor) and sample.input.is_floating_point()


def _rotation(key: str, dtype_name: str, count: int) -> int:
    """Where an entry starts in a list of ``count`` classes: a hash of entry and dtype, so
    each class falls to some entries of every program and every dtype."""
    return zlib.crc32(f"{key}|{dtype_name}".encode()) % count


def _float_scalar_slots(sample: Any) -> list[tuple[str, Any]]:
    """Where a sample passes a Python float (not a bool or an int): ``("arg", i)`` or
    ``("kwarg", name)``."""
    slots: list[tuple[str, Any]] = [("arg", i) for i, a in enumerate(sample.args) if type(a) is float]
    slots += [("kwarg", k) for k, v in sample.kwargs.items() if type(v) is float]
    return slots


def _scalar_operand_slots(torch: Any, info: Any, sample: Any) -> list[tuple[str, Any]]:
    """A binary elementwise entry's second operand, where the database says the entry
    takes a Python number there (``supports_rhs_python_scalar``): ``[("arg", 0)]`` when
    that operand is a tensor of the sample's, else none. A scalar operand is a code path of
    its own (the compiler bakes it into the kernel as a constant, with its sign and NaN
    payload), which samples of two tensors never reach."""
    if not getattr(info, "supports_rhs_python_scalar", False):
        return []
    if not isinstance(sample.input, torch.Tensor) or not sample.input.is_floating_point():
        return []
    if not sample.args or not isinstance(sample.args[0], torch.Tensor):
        return []
    return [("arg", 0)]


def with_scalar(sample: Any, slot: tuple[str, Any], value: float) -> Any:
    """A copy of ``sample`` with the Python float at ``slot`` set to ``value``."""
    changed = copy.copy(sample)
    if slot[0] == "arg":
        args = list(sample.args)
        args[slot[1]] = value
        changed.args = tuple(args)
    else:
        changed.kwargs = {**sample.kwargs, slot[1]: value}
    return changed


def _value_call(torch: Any, entry: _Prepared, dtype_name: str) -> _Call | None:
    """The ``values`` pass's call of an entry: the class its rotation picks among the
    tensor value classes that apply to its samples and, where a sample takes a Python
    float, the scalar classes; None when none applies."""
    exact = sweep_db.is_exact_dtype(dtype_name)
    options: list[tuple[str, int, str, Any]] = []  # (label, sample index, transform, sample)
    classes = VALUE_PASS_INTEGER if exact else VALUE_PASS_FLOAT
    for transform in classes:
        for index, sample in enumerate(entry.samples):
            if sweep_cases.applicable(torch, entry.info, sample, transform, dtype_name):
                options.append((transform, index, transform, sample))
                break
    if not exact:
        for index, sample in enumerate(entry.samples):
            slots = _float_scalar_slots(sample) or _scalar_operand_slots(torch, entry.info, sample)
            if slots:
                for label, value, rules in SCALAR_VALUES:
                    options.append((label, index, rules, with_scalar(sample, slots[0], value)))
                break
    if not options:
        return None
    variant = str(entry.info.variant_test_name or "")
    # A decomposition under a non-finite input has undefined values (the sweep judges only
    # whether the NaN vanished): nothing to compare compiled and eager code on.
    options = [o for o in options if not sweep_cases.judging(entry.info.name, dtype_name, o[2], variant=variant).swallow_only]
    if not options:
        return None
    label, index, transform, sample = options[_rotation(entry.key, dtype_name, len(options))]
    scalar = label.startswith("scalar_")
    oracle = entry.oracle
    if oracle == "value" and sweep_db.sample_is_random(entry.info.name, sample):
        return None
    return _Call(
        entry.key,
        entry.info,
        index,
        sample,
        sweep_cases.Case(index, "base" if scalar else transform, False),
        oracle,
        entry.atol,
        entry.rtol,
        sweep_cases.judging(entry.info.name, dtype_name, transform, variant=variant),
        value_class=label,
    )


def _view_call(torch: Any, entry: _Prepared, name: str, dtype_name: str) -> _Call | None:
    """A view pass's call of an entry with an in-place entry point, on its first sample the
    in-place call takes (a tensor input of the probe's dtype that it need not grow)."""
    if entry.oracle != "value":
        return None
    usable = [
        i for i, s in enumerate(entry.samples) if sweep_cases.applicable(torch, entry.info, s, "inplace_noncontig", dtype_name)
    ]
    if not usable:
        return None
    index = usable[0]
    sample = entry.samples[index]
    place = VIEW_PASSES[name]
    kind = VIEW_KINDS[_rotation(entry.key, dtype_name, len(VIEW_KINDS))] if place == "inside" else "slice"
    return _Call(
        entry.key,
        entry.info,
        index,
        sample,
        sweep_cases.Case(index, "inplace", False),
        entry.oracle,
        entry.atol,
        entry.rtol,
        sweep_cases.judging(entry.info.name, dtype_name, "base"),
        view_place=place,
        view_kind=kind,
    )


def _configure_dynamo(torch: Any) -> Any:
    """Raises Dynamo's recompile limit for this probe and resets its caches; returns the
    counters to read at the end."""
    import torch._dynamo  # type: ignore

    torch._dynamo.reset()
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, max(int(getattr(config, name)), RECOMPILE_LIMIT * 4 if "accumulated" in name else RECOMPILE_LIMIT))
    from torch._dynamo.utils import counters  # type: ignore

    counters.clear()
    return counters


def _reset_dynamo(torch: Any) -> None:
    try:
        torch._dynamo.reset()
    except Exception:  # noqa: BLE001
        pass


def _eager(ctx: ProbeContext, call: _Call, seed: int, dtype_name: str) -> list[Any] | None:
    """Eager results of one call on the device (None: eager rejects it, so it is no valid
    program)."""
    torch = ctx.torch
    try:
        given = _materialize(torch, call, seed, ctx.device, dtype_name)
        x, args, kwargs = given.call
        fn = _entry_function(torch, call, dtype_name)
        if call.case.backward:
            result = fn(x, *args, **kwargs)
        else:
            with torch.no_grad():
                result = fn(x, *args, **kwargs)
        values = _results(torch, [call], [result], [given], seed)[0]
        ctx.sync()
        return values
    except Exception:  # noqa: BLE001 - eager rejects it: not a valid program
        return None


def _compiled(ctx: ProbeContext, program: Any, calls: list[_Call], seed: int, dtype_name: str) -> list[list[Any]]:
    """Runs the compiled program on fresh inputs; returns each call's results. Raises
    ``_CompileError`` when compiling or running the compiled code raises."""
    torch = ctx.torch
    materialized = [_materialize(torch, c, seed, ctx.device, dtype_name) for c in calls]
    inputs = [m.call for m in materialized]
    grad = any(c.case.backward for c in calls)
    try:
        if grad:
            outs = program(inputs)
        else:
            with torch.no_grad():
                outs = program(inputs)
        results = _results(torch, calls, outs, materialized, seed)
        ctx.sync()
    except Exception as exc:  # noqa: BLE001 - judged by the caller (bisected)
        raise _CompileError(compile_error_text(exc)) from exc
    return results


def _run_pass(
    ctx: ProbeContext,
    name: str,
    rounds: list[list[_Call]],
    dtype_name: str,
    seed: int,
    tally: ProgramTally,
) -> None:
    """Compiles one program for the pass and runs it once per round (rounds hold the same
    entries in the same order: ``dynamic`` runs its program on a first sample, then on one
    of other sizes). An entry eager rejects in any round is left out of every round."""
    torch = ctx.torch
    eager_rounds: list[list[list[Any] | None]] = [[_eager(ctx, call, seed, dtype_name) for call in calls] for calls in rounds]
    keep = [i for i in range(len(rounds[0])) if all(r[i] is not None for r in eager_rounds)]
    for i in range(len(rounds[0])):
        if i not in keep:
            tally.unjudge("eager_rejects", f"{name} {rounds[0][i].key}")
    if not keep:
        return
    rounds = [[calls[i] for i in keep] for calls in rounds]
    eager_rounds = [[values[i] for i in keep] for values in eager_rounds]
    dynamic = True if name == "dynamic" else None

    def compile_group(group: list[_Call]) -> Any:
        functions = [_entry_function(torch, c, dtype_name) for c in group]
        return torch.compile(make_program(functions), dynamic=dynamic)

    def run_group(indices: list[int]) -> None:
        program = compile_group([rounds[0][i] for i in indices])
        found_rounds = []
        try:
            for calls in rounds:
                found_rounds.append(_compiled(ctx, program, [calls[i] for i in indices], seed, dtype_name))
        except _CompileError as exc:
            if len(indices) == 1:
                call = rounds[len(found_rounds)][indices[0]]
                tally.compile_error(call, name, str(exc))
                return
            half = len(indices) // 2
            run_group(indices[:half])
            run_group(indices[half:])
            return
        for calls, eager, found in zip(rounds, eager_rounds, found_rounds):
            for i, got in zip(indices, found):
                _judge_call(ctx, name, calls[i], eager[i], got, seed, dtype_name, tally)

    run_group(list(range(len(rounds[0]))))


def _judge_call(
    ctx: ProbeContext, variant: str, call: _Call, eager: list[Any], found: list[Any], seed: int, dtype_name: str, tally: ProgramTally
) -> None:
    torch = ctx.torch
    found = _simulated(torch, call, variant, dtype_name, found)
    tally.cases += 1
    if len(found) != len(eager):
        tally.fail_call(
            call,
            variant,
            "outputs",
            sweep_oracle.LeafFailure(sweep_oracle.STRUCTURE, f"{len(found)} outputs where eager gives {len(eager)}"),
        )
        return
    reference: list[Any] | None = None
    wrong = None
    if call.view_place:
        # The elements between the view's: unchanged, bit for bit (no reference needed).
        gaps = _gaps_changed(torch, call, seed, found[-1], eager[-1])
        if gaps == "eager":
            tally.unjudge("eager_off_too", f"{variant} {call.key}: eager changed elements outside the view")
            return
        if gaps is not None:
            tally.fail_call(call, _label(call, variant), "gaps", gaps)
            return
        eager, found = eager[:-1], found[:-1]
    for index, (want, got) in enumerate(zip(eager, found)):
        if want is None and got is None:
            continue
        forward = not call.case.backward or index < call.forward_count
        label = _output_label(call, index, forward)
        if not forward and call.nonfinite_only_grads:
            invented = _invented_nonfinite(torch, got, want)
            if invented is not None:
                wrong = (label, invented)
                break
            continue
        first = _compare(torch, call, got, want, dtype_name)
        if first is None:
            continue
        if reference is None:
            reference = _reference(ctx, call, seed, dtype_name)
        if reference is None or len(reference) != len(eager):
            tally.unjudge("no_reference", f"{variant} {call.key} {label}: {first.detail}")
            return
        truth = reference[index]
        judged = _compare(torch, call, got, truth, dtype_name, yardstick=want)
        if judged is None:
            continue  # compiled is right; eager is off (the sweep's to report)
        if _compare(torch, call, want, truth, dtype_name) is not None:
            tally.unjudge("eager_off_too", f"{variant} {call.key} {label}: {judged.detail}")
            return
        if _range_limited(call, judged, got, torch):
            tally.unjudge("range_limit", f"{variant} {call.key} {label}: {judged.detail}")
            return
        if _limit_at_infinity(call, judged):
            tally.unjudge("limit_at_infinity", f"{variant} {call.key} {label}: {judged.detail}")
            return
        wrong = (label, judged)
        break
    if wrong is None:
        tally.passed += 1
    else:
        tally.fail_call(call, _label(call, variant), wrong[0], wrong[1])


def _limit_at_infinity(call: _Call, failure: sweep_oracle.LeafFailure) -> bool:
    """A special function given an infinity, whose eager and float64 results are NaN and
    whose compiled result is a number: the function's limit there (``special.bessel_j1`` of
    +Inf is 0, as SciPy gives it) against PyTorch's own kernels' NaN. No standard fixes the
    value of these functions at infinity (C's Annex F leaves them out), so neither is a
    fault; on the H200 Inductor's code returned 0 where eager returned NaN."""
    return (
        call.value_class in ("posinf", "neginf")
        and str(getattr(call.info, "name", "")).startswith("special.")
        and failure.cls == sweep_oracle.NAN_LOST
    )


def _invented_nonfinite(torch: Any, found: Any, eager: Any) -> sweep_oracle.LeafFailure | None:
    """A NaN or infinity in ``found`` where eager's value is finite (the one thing judged in
    a gradient routed among ties)."""
    if not isinstance(found, torch.Tensor) or not isinstance(eager, torch.Tensor) or found.shape != eager.shape:
        return None
    if not (found.is_floating_point() or found.is_complex()):
        return None
    invented = torch.isfinite(eager) & ~torch.isfinite(found)
    if not bool(invented.any()):
        return None
    return sweep_oracle.masked_failure(
        torch,
        sweep_oracle.NONFINITE_INVENTED,
        invented,
        found,
        eager,
        f"{{count}} of {found.numel()} gradient elements NaN/Inf where eager's are finite",
    )


def _label(call: _Call, variant: str) -> str:
    """The case's variant as the observation names it: the pass, and the value class or
    the view it used (``values[negzero]``, ``inplace_view[unfold]``)."""
    if call.value_class:
        return f"{variant}[{call.value_class}]"
    if call.view_kind:
        return f"{variant}[{call.view_kind}]"
    return variant


def _output_label(call: _Call, index: int, forward: bool) -> str:
    if call.view_place:
        return "returned" if index < call.forward_count - 2 else "base"
    return f"out[{index}]" if forward else f"grad[{index - call.forward_count}]"


def _gaps_changed(torch: Any, call: _Call, seed: int, found: Any, eager: Any) -> sweep_oracle.LeafFailure | str | None:
    """Whether the compiled call changed elements between the view's (a failure), or eager
    did too (``"eager"``: not judged), or neither (None)."""
    want = gap_values(torch, tuple(found.shape), found.dtype, seed)
    if sweep_oracle.same_bits(torch, found, want):
        return None
    if not sweep_oracle.same_bits(torch, eager, want):
        return "eager"
    return sweep_oracle.masked_failure(
        torch,
        sweep_oracle.WRONG_VALUE,
        sweep_oracle.bits_differ(torch, found, want),
        found,
        want,
        f"{{count}} of {found.numel()} elements between the view's changed: the in-place write reached memory the view does not cover",
    )


def _range_limited(call: _Call, failure: sweep_oracle.LeafFailure, found: Any, torch: Any) -> bool:
    """The sweep's range rule (``docs/probes.md``, ``range_limit``): under a dtype's largest
    or lowest value (and an integer extreme in a floating output), an intermediate the
    float64 reference does not have may overflow; only a NaN that vanished still counts."""
    if failure.cls not in (sweep_oracle.WRONG_VALUE, sweep_oracle.NONFINITE_INVENTED):
        return False
    if call.value_class in ("max", "lowest"):
        return True
    floating = isinstance(found, torch.Tensor) and (found.is_floating_point() or found.is_complex())
    return call.value_class in ("intmax", "intmin") and floating


def _compare(torch: Any, call: _Call, found: Any, expected: Any, dtype_name: str, yardstick: Any = None) -> sweep_oracle.LeafFailure | None:
    if expected is None or found is None:
        if expected is None and found is None:
            return None
        return sweep_oracle.LeafFailure(sweep_oracle.STRUCTURE, "a gradient where the reference has none, or none where it has one")
    atol, rtol, judged_dtype = call.atol, call.rtol, dtype_name
    own = _output_float_dtype(torch, found)
    if own is not None and (sweep_db.is_exact_dtype(dtype_name) or _less_precise(torch, own, dtype_name)):
        # A floating result of an integer program (``sqrt`` of int64 promotes to float32),
        # or a result in a less precise dtype than the program's (the ``bfloat16``
        # conversion in a float32 program, whose epilogue in ``fused`` eager rounds after
        # each operation and compiled code once): judged by the bound of its own dtype.
        judged_dtype = own
        base_atol, base_rtol = sweep_db.BASE_TOLERANCE.get(judged_dtype, sweep_db.INTEGER_FLOAT_TOLERANCE)
        atol, rtol = max(atol, base_atol), max(rtol, base_rtol)
    return sweep_oracle.compare_leaf(
        torch,
        found,
        expected,
        dtype_name=judged_dtype,
        atol=atol,
        rtol=rtol,
        oracle=call.oracle,
        compare_integers=call.judging.compare_integers and not sweep_db.is_order_op(call.info.name),
        same_dtype_cpu=(lambda: yardstick) if yardstick is not None else None,
        nonfinite_pattern=not call.judging.mixing,
        inf_input=call.judging.inf_input,
        nonfinite_input=call.judging.nonfinite_input,
        wrap_dtype=getattr(torch, dtype_name) if sweep_db.dtype_kind(dtype_name) == "integer" else None,
        rounding_slack=1 if call.info.name in sweep_db.TRUNCATED_FLOAT_OPS else 0,
    )


def _output_float_dtype(torch: Any, value: Any) -> str | None:
    """The floating dtype of an output (a complex one's real part), or None."""
    if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
        return None
    return str(value.real.dtype if value.is_complex() else value.dtype).replace("torch.", "")


def _less_precise(torch: Any, own: str, program_dtype: str) -> bool:
    """Whether floating dtype ``own`` has a coarser resolution than the program's dtype."""
    program = getattr(torch, program_dtype, None)
    mine = getattr(torch, own, None)
    if program is None or mine is None or not program.is_floating_point or not mine.is_floating_point:
        return False
    return torch.finfo(mine).eps > torch.finfo(program).eps


def _reference(ctx: ProbeContext, call: _Call, seed: int, dtype_name: str) -> list[Any] | None:
    """The truth of one call on the CPU: float64 for floating dtypes, the same dtype for
    exact ones; the forward outputs then (backward) the gradients, as the device lists them."""
    torch = ctx.torch
    exact = sweep_db.is_exact_dtype(dtype_name)
    try:
        forward_case = sweep_cases.Case(call.case.sample, call.case.transform, False)
        values = sweep_cases.run_case(
            torch,
            call.info,
            call.sample,
            forward_case,
            seed,
            device="cpu",
            upcast=not exact,
            dtype_name=dtype_name,
            functional=call.case.transform in sweep_cases.CALL_VARIANTS,
        )
        values = [sweep_cases.dense_on_host(torch, v) for v in values]
        if call.view_place:
            # The in-place call returns the functional result, and the base's written
            # elements hold it.
            return values + values
        if call.case.backward and call.loss == "sum":
            return _sum_reference(torch, call, seed, exact, dtype_name)
        if call.case.backward:
            grads = sweep_cases.run_case(torch, call.info, call.sample, call.case, seed, device="cpu", upcast=not exact, dtype_name=dtype_name)
            values += [sweep_cases.dense_on_host(torch, g) for g in grads]
        return values
    except Exception:  # noqa: BLE001 - no usable reference: not judged
        return None


def _sum_reference(torch: Any, call: _Call, seed: int, exact: bool, dtype_name: str) -> list[Any]:
    """The reference of a ``sum_grad`` call (float64 on the CPU): the loss, then the
    gradients of ``sum_loss``."""
    (x, args, kwargs), leaves, _ = sweep_cases.materialize(
        torch, call.sample, call.case, seed, device="cpu", upcast=not exact, dtype_name=dtype_name
    )
    result = call.info(x, *args, **kwargs)
    process = getattr(call.sample, "output_process_fn_grad", None)
    if callable(process):
        result = process(result)
    outs = sweep_cases.differentiable_outputs(torch, result)
    loss = sum_loss(torch, outs)
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return [loss.detach()] + [sweep_cases.dense_on_host(torch, g) if g is not None else None for g in grads]


def _simulated(torch: Any, call: _Call, variant: str, dtype_name: str, found: list[Any]) -> list[Any]:
    """Applies a simulated fault to the compiled results (labelled SIMULATED in the output)."""
    engine = simulate.engine()
    if engine is None or not engine.wants("compile"):
        return found
    info = simulate.CallInfo(
        op="compile", method=call.info.name, dtype=dtype_name, on_device=True, variant=variant, direction=call.case.direction
    )
    fault = engine.decide(info)
    if fault is None:
        return found
    out = []
    for value in found:
        if isinstance(value, torch.Tensor) and value.numel() > 0 and value.dtype != torch.bool:
            value = engine.apply(fault, info, value.clone())
        out.append(value)
    return out


def _output(
    tally: ProgramTally,
    dtype_name: str,
    chunk: int | None,
    entries: list[tuple[str, Any]],
    excluded: dict[str, int],
    seed: int,
    cache: str | None,
    counters: Any,
    seconds: float,
) -> ProbeOutput:
    label = f"inductor program {chunk:02d}" if chunk is not None else "inductor program"
    measurement = tally.measurement(label, dtype_name)
    breaks = sum(counters.get("graph_break", {}).values()) if counters else 0
    graphs = int(counters.get("stats", {}).get("unique_graphs", 0)) if counters else 0
    notes = list(tally.notes)
    if excluded:
        notes.append("entries not compiled: " + ", ".join(f"{k} {v}" for k, v in sorted(excluded.items())))
    unjudged = tally.unjudged_note()
    if unjudged:
        notes.append(unjudged)
    if tally.compile_errors:
        notes.append(
            f"{tally.compile_errors} compile error(s) on programs eager runs (the compiler's, loud: not counted as wrong "
            "values): " + " | ".join(tally.compile_error_examples)
        )
    if breaks:
        notes.append(f"{breaks} graph break(s) (Dynamo ran those parts eagerly: a note, not a failure)")
    if tally.passes_not_run:
        notes.append(f"passes not run (the probe's time budget was spent): {', '.join(tally.passes_not_run)}")
    metrics = {
        "entries": len(entries),
        "graphs": graphs,
        "graph_breaks": breaks,
        "compile_errors": tally.compile_errors,
        "seed": seed,
        "seconds": round(seconds, 3),
        "cache": cache or "",
    }
    for name, spent in tally.pass_seconds.items():
        metrics[f"seconds_{name}"] = spent
    return ProbeOutput(measurement=measurement, metrics=metrics, notes=notes)
