"""compile family, ambient state: the step of ``compile.ambient`` compiled under the probe's
states in turn, on caches of its own, the failing state judged as the probe judges it.

A ``compile.ambient`` failure names the state whose compiled step differs from eager under
the same settings (``variant``, e.g. ``autocast_float16``) and the tensor (``output``:
``logits``, ``loss``, ``grad.<param>``). What its compile met depends on the states compiled
before it: they leave entries in the on-disk caches (the AOTAutograd cache, Inductor's
FX-graph cache) that the failing compile may be served. The script therefore runs the
probe's sequence up to and including the failing state, Dynamo reset before each compile as
the probe resets it, in a fresh cache directory it creates (``TORCHINDUCTOR_CACHE_DIR`` and
``TRITON_CACHE_DIR`` set before anything is compiled, removed at exit), and judges only the
failing state: every tensor's dtype against eager's and its norm-wise error against float64
with eager's own error as the yardstick, printing both dtypes and both errors.

The script holds the probe's own code, copied from ``compile_ambient`` with ``Copier`` (the
model, ``State``, ``_entered`` and ``tf32_mode``, ``unsupported``, ``run_step``, the judge
``judge_state`` with ``StateTally`` and ``_norm_failure``, their constants, the sweep
oracle's failures and the case tally), plus the probe's own lines that seed the weights and the batch (from
``run``, its ``ctx.derive_seed("ambient")`` written as the number it derives). The states
are written as the probe's ``State`` values, in the probe's order.

Simulated results: the script names the fault the probe's ``_simulated`` met (op
``compile``, method ``ambient``, the state's precision, variant the state), and its
``run_case`` returns the failing state's compiled tensors, so the simulation shim's
``run_case`` wrapper faults them as the worker faulted them. For a crash or hang the
observation names no state: every state of the probe is compiled in a child process.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap

from gpuprobe.repro.families import copied
from gpuprobe.repro.families.base import Case, NoRepro
from gpuprobe.repro.families.copied import Copier
from gpuprobe.repro.script import Recipe

_IMPL = "gpuprobe.worker.probes.compile.ambient:run"

_HEADER = """\
# Copied from gpuprobe (gpuprobe/worker/probes/compile/ambient.py, the TF32 switch of
# precision.py, the compile family's error text, the sweep's oracle and the case tally,
# gpuprobe/worker/tally.py): the step, the states, running the step under a state and the
# judge, unchanged."""

#: The probe's definitions the script runs (everything they reach is copied with them).
_ROOTS = (
    "_model",
    "State",
    "_entered",
    "unsupported",
    "run_step",
    "StepResult",
    "judge_state",
    "StateTally",
    "_norm_failure",
    "_reset_dynamo",
    "compiler_problem",
    "COMPILE_OPTIONS",
    "NOISE_FACTOR",
    "FLOOR_ULPS",
    "UNIT_ROUNDOFF",
)
#: The first and the last statement of the probe's ``run`` that build the initial model and
#: the batch (copied as they are, the seed's derivation replaced by its number).
_SEEDED_FIRST, _SEEDED_LAST = "generator", "labels"
_SEED_CALL = 'ctx.derive_seed("ambient")'


@functools.cache
def _copier() -> Copier:
    from gpuprobe.worker import tally
    from gpuprobe.worker.probes import precision
    from gpuprobe.worker.probes.compile import ambient as compile_ambient
    from gpuprobe.worker.probes.compile import run as compile_run
    from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
    from gpuprobe.worker.probes.sweep import ref as sweep_ref

    # The tally first: the probe's tally subclasses it, and a base class must be defined first.
    return Copier(
        tally,
        compile_ambient,
        precision,
        compile_run,
        sweep_ref,
        sweep_oracle,
        strip=("sweep_oracle", "compile_run"),
        provided={"torch"},
    )


@functools.cache
def _seeded_lines() -> str:
    """The probe's lines that build the initial model, the images and the labels, with the
    seed's derivation replaced by ``AMBIENT_SEED`` (``NoRepro`` when the probe no longer
    builds them so)."""
    from gpuprobe.worker.probes.compile import ambient as compile_ambient

    source = textwrap.dedent(inspect.getsource(compile_ambient.run))
    function = ast.parse(source).body[0]
    if not isinstance(function, ast.FunctionDef):
        raise NoRepro("the probe's run is no longer a plain function; this repro generator does not match it")
    bound = [next(iter(getattr(s, "targets", [None])), None) for s in function.body]
    names = [t.id if isinstance(t, ast.Name) else None for t in bound]
    if _SEEDED_FIRST not in names or _SEEDED_LAST not in names:
        raise NoRepro("the probe's run no longer seeds its model and batch as this repro generator expects")
    first, last = function.body[names.index(_SEEDED_FIRST)], function.body[names.index(_SEEDED_LAST)]
    lines = source.splitlines()[first.lineno - 1 : last.end_lineno]
    text = textwrap.dedent("\n".join(lines)).replace(_SEED_CALL, "AMBIENT_SEED")
    if re.search(r"\bctx\b", text):
        raise NoRepro(
            "the probe's model and batch depend on more of its context than the seed; this repro generator does not match it"
        )
    return text


_BODY = '''\
import atexit
import shutil
import tempfile

#: What a simulated fault of the probe met (``compile_ambient._simulated``): op ``compile``,
#: method ``ambient``, the judged state's precision and name. The simulation shim's wrapper
#: of ``run_case`` reads these names; on a real run they only describe the case.
SIMULATED_OP = "compile"
OP_NAME = "ambient"
DTYPE_NAME = @@PRECISION@@
TRANSFORM = SIMULATED_VARIANT = @@JUDGED@@
BACKWARD = False
#: The state judged: the one that failed (for a crash or hang, the probe's last).
JUDGED = @@JUDGED@@
#: The probe's seed of the weights and the batch (``derive_seed(seed, "compile.ambient",
#: "ambient")``).
AMBIENT_SEED = @@SEED@@
#: Names another torch.compile backend: ``aot_eager`` compiles without Inductor, and so
#: without the AOTAutograd cache (it keeps Inductor's graphs only); a failure that stays
#: there is neither Inductor's code nor that cache's. Unset: Inductor, as the probe.
BACKEND_VARIABLE = "GPUPROBE_REPRO_BACKEND"
CASES = [{"state": JUDGED}]


def states():
    """The probe's states in its order, up to and including the judged one: the states
    before it fill the caches its compile reads."""
    return (
@@STATES@@
    )


def case_label(case):
    names = [s.name for s in states()]
    before = f"after {', '.join(names[:-1])}, " if len(names) > 1 else ""
    return f"compile.ambient: the step compiled {before}under {JUDGED}, judged against eager under {JUDGED}"


def private_caches():
    """A fresh directory for Inductor's and Triton's caches (the AOTAutograd and FX-graph
    caches live in Inductor's), set before anything is compiled: the compiles meet only what
    the states before them leave, as on an empty machine. Removed at exit."""
    directory = tempfile.mkdtemp(prefix="gpuprobe-ambient-caches-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = directory
    os.environ["TRITON_CACHE_DIR"] = os.path.join(directory, "triton")
    return directory


def build(case, device):
    dev = torch.device(device)
    is_gpu = dev.type == "cuda"
    backend = os.environ.get(BACKEND_VARIABLE)
    if backend:
        COMPILE_OPTIONS["backend"] = backend
    else:
        problem = compiler_problem(torch, is_gpu)
        if problem is not None:
            print(f"CANNOT RUN: {problem}")
            sys.exit(2)
    print(f"  caches: {private_caches()} (fresh; removed at exit)")
    print(f"  torch.compile options: {COMPILE_OPTIONS or 'the defaults (Inductor)'}")
@@SEEDED@@
    reference_model = copy.deepcopy(initial).to(torch.float64)
    device_inputs = (images.to(dev), labels.to(dev))
    # As the probe: a state the device lacks is left out, one whose eager or float64 step
    # raises is not compiled; every other state is compiled in turn.
    compiled_states, judged = [], None
    for state in states():
        reason = unsupported(torch, state, is_gpu, dev.type)
        if reason is not None:
            print(f"  {state.name} left out: {reason}")
            continue
        reference_state = State(state.name, "float64", grad=state.grad)
        reference = run_step(torch, reference_model, (images.to(torch.float64), labels), reference_state, "cpu", compiled=False)
        eager = run_step(torch, copy.deepcopy(initial).to(dev), device_inputs, state, dev.type, compiled=False)
        if reference.error is not None or eager.error is not None:
            print(f"  {state.name} not compiled: {reference.error or eager.error}")
            continue
        compiled_states.append(state)
        if state.name == JUDGED:
            judged = (state, eager, reference)
    if judged is None:
        print(f"CANNOT RUN: the state {JUDGED} cannot run on {device} (see above)")
        sys.exit(2)
    return {"initial": initial, "device_inputs": device_inputs, "states": compiled_states, "judged": judged}


def run_case(case, inputs, device):
    """Each state's step compiled in turn, Dynamo reset before each as in the probe (the
    disk caches kept); returns the judged state's tensors (float64 on the host, in the
    order of the last item, which holds their names, their dtypes on the device and the
    compile error)."""
    dev = torch.device(device)
    result = None
    for state in inputs["states"]:
        _reset_dynamo(torch)
        started = time.perf_counter()
        model = copy.deepcopy(inputs["initial"]).to(dev)
        result = run_step(torch, model, inputs["device_inputs"], state, dev.type, compiled=True)
        sync(device)
        outcome = result.error or f"logits {result.dtypes['logits']}, loss {result.dtypes['loss']}"
        print(f"  compiled under {state.name} ({time.perf_counter() - started:.1f} s): {outcome}")
    names = list(result.values)
    return [result.values[n] for n in names] + [{"names": names, "dtypes": result.dtypes, "error": result.error}]


def _relative(found, expected):
    norm = float(expected.norm())
    return float((found - expected).norm()) / norm if norm else float("nan")


def check(case, inputs, result):
    """The probe's judge (``judge_state``) on the judged state, after a line per tensor:
    eager's and the compiled step's dtypes, their errors against float64 and the bound."""
    *values, meta = result
    state, eager, reference = inputs["judged"]
    compiled = StepResult(dict(zip(meta["names"], values)), meta["dtypes"], meta["error"])
    if compiled.error is not None:
        # The probe counts a compile error where eager runs the step, and judges nothing.
        print(f"  compile error under {state.name}, where eager runs the same step: {compiled.error} (not judged)")
        return True
    floor = FLOOR_ULPS * UNIT_ROUNDOFF[state.precision]
    print(f"  {'tensor':<18} {'eager dtype':<15} {'compiled dtype':<15} {'eager error':>12} {'compiled error':>15} {'bound':>10}")
    for name, expected in reference.values.items():
        if name not in eager.values:
            continue
        eager_error = _relative(eager.values[name], expected)
        found = compiled.values.get(name)
        same_shape = found is not None and tuple(found.shape) == tuple(expected.shape)
        compiled_error = _relative(found, expected) if same_shape else float("nan")
        bound = max(NOISE_FACTOR * eager_error, floor)
        print(f"  {name:<18} {str(eager.dtypes[name]):<15} {str(compiled.dtypes.get(name, '-')):<15} "
              f"{eager_error:>12.3g} {compiled_error:>15.3g} {bound:>10.3g}")
    tally = StateTally()
    judge_state(tally, state, compiled, eager, reference)
    print(f"  {tally.cases} cases: {tally.passed} passed, "
          + (", ".join(f"{v} {k}" for k, v in sorted(tally.failed.items())) or "none failed")
          + ("; not judged: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.unjudged.items())) if tally.unjudged else ""))
    for failure in tally.failures:
        print(f"  {failure['variant']}, {failure['output']}: {failure['class']}: {failure['detail']}")
        if failure.get("expected") or failure.get("found"):
            print(f"    expected {failure['expected']}, found {failure['found']}")
    return not tally.failed
'''


def _plain(value: object) -> str:
    """Outside text made safe for the script's docstring (a tensor's or a class's name)."""
    return re.sub(r"[^\w.+-]", "?", str(value))[:80]


def _run(case: Case) -> Recipe:
    from gpuprobe.worker.probes.compile import ambient as compile_ambient

    by_name = {s.name: s for s in compile_ambient.STATES}
    first = None
    if case.crash_or_hang:
        judged = compile_ambient.STATES[-1].name
    else:
        failures = case.measurement.get("failures")
        if not isinstance(failures, list) or not failures or not isinstance(failures[0], dict):
            raise NoRepro("the observation lists no failing state ('failures'); compile errors are listed in its notes")
        first = failures[0]
        judged = first.get("variant")
        if judged not in by_name:
            raise NoRepro(f"the failing state {str(judged)[:60]!r} is not one of the probe's states")
    order = [s.name for s in compile_ambient.STATES]
    sequence = compile_ambient.STATES[: order.index(judged) + 1]
    seeded = _seeded_lines()
    copier = _copier()
    code = copier.source(_ROOTS, extra_text=seeded)
    replacements = {
        "@@PRECISION@@": repr(by_name[judged].precision),
        "@@JUDGED@@": repr(judged),
        "@@SEED@@": repr(case.derive("ambient")),
        "@@STATES@@": "\n".join(f"        {state!r}," for state in sequence),
        "@@SEEDED@@": textwrap.indent(seeded, "    "),
    }
    body = _BODY
    for marker, value in replacements.items():
        body = body.replace(marker, value)
    helpers = copied.helpers(_HEADER, code, body)
    saw = ""
    if first is not None:
        saw = f"; gpuprobe saw {_plain(first.get('output'))} differ ({_plain(first.get('class'))})"
    before = [s.name for s in sequence[:-1]]
    earlier = f"each of the states {', '.join(before)} in turn, then " if before else ""
    return Recipe(
        summary=(
            "gpuprobe's small training step (conv2d, linear, layer norm, GELU, log-softmax, a loss that creates a tensor "
            f"inside the step) compiled by torch.compile under {earlier}the state {judged}, Dynamo reset before each compile "
            "and the disk caches kept, in a fresh cache directory; "
            f"the step compiled under {judged} judged against eager under the same settings{saw}. The step, the states "
            "and the judge are the probe's own, copied."
        ),
        reference=f"eager under {judged} on the same device (dtypes); the same step in float64 on the CPU (values)",
        tolerance=(
            "every tensor's dtype equal to eager's; norm-wise, the compiled error against float64 at most "
            f"{compile_ambient.NOISE_FACTOR:g} times eager's or {compile_ambient.FLOOR_ULPS:g} units of the state's precision "
            f"({by_name[judged].precision}), whichever is larger"
        ),
        what=f"compile.ambient: the step compiled under {judged} differs from eager under the same settings",
        helpers=helpers,
        body=body,
    )


RECIPES = {_IMPL: _run}
