"""graph family: one workload of a CUDA-graph probe (``graph_run``: ``run_capture``,
``run_training``, ``run_pool``, ``run_reduce_overhead``), replayed as the probe replays it.

A graph probe's failure names the workload and the replay (``variant``
``pointwise_chain.replay2``; for reduce-overhead the compiled group and its phase,
``dense.reshape.replay1``), the reference it was judged against (``direction`` ``eager``,
``float64`` or ``bystanders``) and the output. The script holds the probe's own code, copied
from ``graph_run`` (the workload with its weights and input builders, the replayer: a CUDA
graph, two graphs sharing one pool under allocator pressure, ``make_graphed_callables``, a
captured optimizer step, or ``torch.compile(mode="reduce-overhead")``; the judge
``judge_outputs`` with the sweep's oracle) and runs the probe's protocol: warm-up, capture,
then replays 0 … k, the static inputs updated in place with fresh seeded data before each
replay after the first, each replay's outputs read back at once and judged against eager on
the same device (and the first updated replay against float64 on the CPU), a wrong output
equal to the previous replay's being a stale replay.

The seeds are the probe's (``ProbeContext.cpu_generator`` tags: the workload's name for its
weights and inputs, ``<label>.inputs`` for the replays' fresh inputs). On a CPU device the
script runs the probe's eager stand-in (no graph exists there: the probe's self-test of its
protocol); a reduce-overhead case needs a GPU and says ``CANNOT RUN`` on a CPU. For a crash
or hang the worker's last ``gpuprobe graph:`` line names the workload (else every workload
of the probe runs), and every replay runs in a child process.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
from typing import Any

from gpuprobe.repro.families import copied
from gpuprobe.repro.families.base import Case, NoRepro
from gpuprobe.repro.families.copied import Copier, call_segment
from gpuprobe.repro.script import Recipe

_RUN = "gpuprobe.worker.probes.graph.run:"
#: The probe kind of each implementation.
KINDS = {"run_capture": "capture", "run_training": "training", "run_pool": "pool", "run_reduce_overhead": "reduce_overhead"}
#: The definitions each kind of probe needs (the replayers and workloads), beside the judge.
_ROOTS = {
    "capture": ("KernelBound", "EagerReplayer", "CudaGraphReplayer"),
    "pool": ("KernelBound", "ChainedBound", "AllocatorPressure", "SharedPoolReplayer", "EagerPoolReplayer"),
    "training": ("MlpBound", "OptimizerBound", "EagerReplayer", "CudaGraphReplayer"),
    "reduce_overhead": ("KernelBound", "GroupBound", "CompiledReplayer", "compile_unavailable", "_other_batch"),
}
#: What a compiled training workload of the reduce-overhead probe needs beside.
_COMPILED_TRAINING_ROOTS = ("MlpBound", "CompiledTrainingReplayer")
#: The options the reduce-overhead probe compiles with (``run_reduce_overhead``).
COMPILE_OPTIONS = {"mode": "reduce-overhead"}
_COMMON_ROOTS = ("judge_outputs", "_float64_fallback", "_host", "BENIGN_WARNINGS", "CPU_NOTE")

_HEADER = """\
# Copied from gpuprobe (gpuprobe/worker/probes/graph/run.py and the sweep's oracle,
# sweep/oracle.py): the workload, its replayer and the judge, unchanged."""


@functools.cache
def _copier() -> Copier:
    from gpuprobe.worker.probes.graph import run as graph_run
    from gpuprobe.worker.probes.sweep import cases as sweep_cases
    from gpuprobe.worker.probes.sweep import db as sweep_db
    from gpuprobe.worker.probes.sweep import oracle as sweep_oracle

    return Copier(
        graph_run,
        sweep_oracle,
        sweep_db,
        sweep_cases,
        strip=("sweep_oracle", "sweep_db"),
        provided={"torch", "KERNELS"},
    )


#: Per kind: how the workload is bound and replayed, and whether it can run on the device.
_MAKE = {
    "capture": '''\
def make_bounds(case, device):
    """The kernel workload bound to the device and dtype, with its static inputs."""
    dev, dt = torch.device(device), getattr(torch, DTYPE_NAME)
    return {"main": KernelBound(torch, KERNELS[case["workload"]], dev, dt, generator(case["seed"]))}


def make_replayer(case, device):
    """A CUDA graph (on a CPU the probe's eager stand-in, which keeps static output buffers)."""
    dev = torch.device(device)
    return CudaGraphReplayer(torch, dev) if dev.type == "cuda" else EagerReplayer(torch)''',
    "pool": '''\
def make_bounds(case, device):
    """The kernel workload and a pointwise function of its outputs (the second graph),
    bound to the device and dtype, with its static inputs."""
    dev, dt = torch.device(device), getattr(torch, DTYPE_NAME)
    return {"main": ChainedBound(KernelBound(torch, KERNELS[case["workload"]], dev, dt, generator(case["seed"])))}


def make_replayer(case, device):
    """Two CUDA graphs sharing one pool, with allocations between the replays (on a CPU the
    probe's eager stand-in with the same allocations)."""
    dev = torch.device(device)
    gpu = dev.type == "cuda"
    pressure = AllocatorPressure(torch, dev, 1 << 22 if gpu else 1 << 16)
    return SharedPoolReplayer(torch, dev, pressure) if gpu else EagerPoolReplayer(torch, pressure)''',
    "training": '''\
def make_bounds(case, device):
    """The training workload bound to the device and dtype (an MLP's forward and backward, or
    one optimizer step, capturable on a GPU), as the probe builds it, with its twins."""
    dev, dt, gpu = torch.device(device), getattr(torch, DTYPE_NAME), torch.device(device).type == "cuda"
    builders = @@BUILDERS@@
    return {"main": builders[case["workload"]]()}


def make_replayer(case, device):
    """A CUDA graph (on a CPU the probe's eager stand-in, which keeps static output buffers)."""
    dev = torch.device(device)
    return CudaGraphReplayer(torch, dev) if dev.type == "cuda" else EagerReplayer(torch)''',
    "reduce_overhead": '''\
def make_bounds(case, device):
    """A group's kernel workloads as one function bound to the device and dtype, and the same
    weights with inputs of another leading size (a second recording); or an MLP's training
    step compiled whole."""
    dev, dt = torch.device(device), getattr(torch, DTYPE_NAME)
@@TRAINING_BOUND@@    bound = GroupBound(case["workload"], [KernelBound(torch, KERNELS[n], dev, dt, generator(seed)) for n, seed in case["parts"]])
    return {"main": bound, "resized": bound.resized(generator(case["resize_seed"]), _other_batch)}


def make_replayer(case, device):
    """One compiled function for every phase (another input shape records again); a compiled
    training step compiles and runs itself."""
@@TRAINING_REPLAYER@@    return CompiledReplayer(torch, **COMPILE_OPTIONS)''',
}
#: A compiled training workload of the reduce-overhead probe (``run_compiled``'s MLPs).
_TRAINING_BOUND = '''\
    if case.get("training"):
        return {"main": MlpBound(torch, dev, dt, generator(case["seed"]), case["workload"], compile_options=COMPILE_OPTIONS)}
'''
_TRAINING_REPLAYER = '''\
    if case.get("training"):
        return CompiledTrainingReplayer(torch, torch.device(device))
'''
_DEVICE_CHECK = {
    "reduce_overhead": '''\
    if torch.device(device).type != "cuda":
        print("CANNOT RUN: reduce-overhead uses CUDA graphs; the device under test is the CPU")
        sys.exit(2)
    torch.cuda.set_device(torch.device(device))
    if compile_unavailable(torch):
        print(f"CANNOT RUN: {compile_unavailable(torch)}")
        sys.exit(2)
''',
    "other": '''\
    if torch.device(device).type == "cuda":
        torch.cuda.set_device(torch.device(device))
    else:
        print(f"  {CPU_NOTE} (the probe's own stand-in on a CPU: each replay runs eagerly into static output buffers)")
''',
}

_BODY = '''\
#: The probe family (gpuprobe's fault simulation shim finds the script's replays by it).
FAMILY = "graph"
#: What the probe captures: ``capture`` (a kernel workload in a CUDA graph), ``pool`` (two
#: graphs sharing one pool), ``training`` (graphed forward/backward, captured optimizer
#: steps), ``reduce_overhead`` (torch.compile(mode="reduce-overhead")).
KIND = @@KIND@@
DTYPE_NAME = @@DTYPE_NAME@@
#: The probe's workloads, as the probe defines them (weights and inputs drawn from seeded
#: generators on the host).
KERNELS = @@KERNELS@@
#: The case(s): the workload (or compiled group), the seeds of its weights and inputs, and
#: the protocol's phases: each a capture then replays 0 … last, the fresh inputs of replay
#: k >= 1 drawn from ``input_seed``; ``float64_at`` the replays also judged against float64.
CASES = @@CASES@@
@@EXTRA@@

def case_label(case):
    replays = ", ".join(f"{p['label']} replays 0-{p['last']}" for p in case["phases"])
    return f"{KIND} {case['workload']} in {DTYPE_NAME}: {replays}"


def generator(seed):
    return torch.Generator().manual_seed(seed)


@@MAKE@@


def build(case, device):
    # float32 is judged as float32: TF32 off, as the probe sets it.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for message in BENIGN_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
@@DEVICE_CHECK@@    return make_bounds(case, device)


def read_back(replayer, bound, replay):
    """One replay, its outputs copied to the host at once (the next replay overwrites them)."""
    return _host(torch, replayer.replay())


def run_case(case, inputs, device):
    """The probe's protocol on the device: for each phase, capture, then replays 0 … last,
    the static inputs updated in place (``static.copy_(new)``) before each replay after the
    first; each replay's outputs and the same computation run eagerly on the device, read back."""
    replayer = make_replayer(case, device)
    phases = []
    for phase in case["phases"]:
        bound = inputs[phase["bound"]]
        fresh = generator(phase["input_seed"])
        replayer.capture(bound)
        bound.reset()
        records = []
        for replay in range(phase["last"] + 1):
            host_inputs = bound.captured_inputs() if replay == 0 else bound.fresh_inputs(fresh)
            if replay > 0:
                bound.load(torch, host_inputs)
            found = read_back(replayer, bound, replay)
            sync(device)
            eager = _host(torch, bound.eager(host_inputs))
            sync(device)
            records.append({"replay": replay, "inputs": host_inputs, "found": found, "eager": eager,
                            "bystanders": replayer.after_replay()})
        replayer.finish()
        phases.append(records)
    return phases


def same_dtype_cpu(bound, host_inputs):
    """The CPU in the workload's own dtype: the oracle's yardstick against float64."""
    values = bound.same_dtype_cpu(host_inputs)
    return None if values is None else _host(torch, values)


def show(replay, reference, verdict):
    if verdict is None:
        kept = "every tensor allocated between capture and replay kept its contents"
        print(f"  {replay} against {reference}: {kept if reference == 'bystanders' else 'every output within the bound'}")
        return True
    output, failure = verdict
    print(f"  {replay} against {reference}: {output}: {failure.cls}: {failure.detail}")
    if failure.index is not None:
        allowed = f" (allowed error {failure.allowed:.3g})" if failure.allowed is not None else ""
        print(f"    first at index {failure.index}: expected {failure.expected}, found {failure.found}{allowed}")
    return False


def check(case, inputs, result):
    """Each replay against eager on the device (and float64 on the CPU where the probe
    compares with it), by the probe's judge; a wrong output equal to the previous replay's
    is a stale replay."""
    ok = True
    atol, rtol = BASE_TOLERANCE[DTYPE_NAME]
    print(f"  bound: per element |found - expected| <= {atol:g} + {rtol:g} * |expected| (or norm-wise; against float64 "
          f"also within twice the CPU's own error in {DTYPE_NAME})")
    for phase, records in zip(case["phases"], result):
        bound = inputs[phase["bound"]]
        names = bound.output_names()
        previous = None
        for record in records:
            replay, host_inputs, found, eager = record["replay"], record["inputs"], record["found"], record["eager"]
            cache = []

            def float64_reference(h=host_inputs, cache=cache):
                if not cache:
                    cache.append(_host(torch, bound.float64(h)))
                return cache[0]

            if bound.stateful:
                # Its float64 twin takes every step, in order.
                float64_reference()
            fallback = _float64_fallback(torch, float64_reference, eager, DTYPE_NAME) if KIND == "reduce_overhead" else None
            label = f"{phase['label']}.replay{replay}"
            verdict = judge_outputs(torch, found, eager, names, DTYPE_NAME, previous=previous, fallback=fallback)
            ok = show(label, "eager", verdict) and ok
            if replay in phase["float64_at"]:
                yardstick = None if bound.stateful else (lambda h=host_inputs: same_dtype_cpu(bound, h))
                verdict = judge_outputs(torch, found, float64_reference(), names, DTYPE_NAME, previous=previous,
                                        same_dtype_cpu=yardstick)
                ok = show(label, "float64", verdict) and ok
            if record["bystanders"] is not None:
                ok = show(label, "bystanders", record["bystanders"][0] if record["bystanders"] else None) and ok
            previous = found
    return ok
'''


def _label(variant: str) -> tuple[str, int]:
    label, sep, replay = variant.rpartition(".replay")
    if not sep or not replay.isdigit():
        raise NoRepro(f"the failing graph case {variant!r} does not name a replay")
    return label, int(replay)


def _logged(case: Case) -> str | None:
    """The workload of the worker's last ``gpuprobe graph: PROBE WORKLOAD`` line, or None."""
    pattern = re.compile(r"gpuprobe graph: " + re.escape(case.probe) + r" ([A-Za-z0-9_]+)")
    for line in reversed(case.stderr_tail):
        found = pattern.search(line)
        if found:
            return found.group(1)
    return None


def _phases(case: Case, kind: str, workload: str, label: str, last: int | None) -> list[dict[str, Any]]:
    """The protocol's phases up to the failing replay (all of them when ``last`` is None),
    with the probe's generator tags."""
    from gpuprobe.worker.probes.graph import run as graph_run

    def phase(bound: str, label: str, replays: int, float64_at: tuple[int, ...], tag: str | None = None) -> dict[str, Any]:
        return {"bound": bound, "label": label, "last": replays, "float64_at": tuple(float64_at),
                "input_seed": case.derive(f"{tag or label}.inputs")}

    if kind != "reduce_overhead":
        return [phase("main", workload, graph_run.REPLAYS if last is None else last, graph_run.FLOAT64_REPLAYS)]
    # ``run_compiled``: the original shape, another shape (re-recording), then back once.
    plan = [
        phase("main", workload, graph_run.REPLAYS, graph_run.FLOAT64_REPLAYS),
        phase("resized", f"{workload}.reshape", 2, (0,)),
        phase("main", f"{workload}.back", 0, (), f"{workload}.back"),
    ]
    if last is None:
        return plan
    for index, item in enumerate(plan):
        if item["label"] == label:
            item["last"] = last
            return plan[: index + 1]
    raise NoRepro(f"the failing case {label!r} is no phase of the reduce-overhead protocol this gpuprobe knows")


def _training_builders(names: list[str]) -> tuple[str, dict[str, str]]:
    """The probe's own builders of the training workloads ``names`` (``run_training``'s
    table, each a lambda), as source for the script, and the generator tags they seed from:
    ``ctx.cpu_generator("tag")`` becomes ``generator(SEEDS["tag"])``, ``ctx.device`` the
    device and ``ctx.is_gpu`` whether it is a GPU."""
    from gpuprobe.worker.probes.graph import run as graph_run

    tree = ast.parse(textwrap.dedent(inspect.getsource(graph_run.run_training)))
    table: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Lambda):
                    table[str(key.value)] = value.body
    lines, tags = [], {}
    call = re.compile(r"ctx\.cpu_generator\('([^']*)'\)")
    for name in names:
        if name not in table:
            raise NoRepro(f"the probe builds training workload {name!r} in a way this repro generator does not read")
        expression = ast.unparse(table[name])
        for tag in call.findall(expression):
            tags[tag] = tag
        expression = call.sub(lambda m: f"generator(SEEDS[{m.group(1)!r}])", expression)
        expression = expression.replace("ctx.device", "dev").replace("ctx.is_gpu", "gpu")
        if "ctx" in expression:
            raise NoRepro(f"the probe's builder of {name!r} needs more of the probe's context than a script has")
        lines.append(f"        {name!r}: lambda: {expression},")
    return "{\n" + "\n".join(lines) + "\n    }", tags


def _run(case: Case) -> Recipe:
    from gpuprobe.worker.probes.graph import run as graph_run
    from gpuprobe.worker.probes.sweep import db as sweep_db

    kind = KINDS[case.definition.impl.rsplit(":", 1)[-1]]
    p = case.params
    dtype_name = graph_run.DTYPES[p["dtype"]]
    groups: dict[str, list[str]] = dict(p.get("groups") or {})
    compiled_training = list(p.get("training") or []) if kind == "reduce_overhead" else []
    workloads = list(groups) + compiled_training if kind == "reduce_overhead" else list(p.get("workloads") or [])
    failure: dict[str, Any] | None = None
    if case.crash_or_hang:
        logged = _logged(case)
        chosen = [(w, w, None) for w in workloads if logged in (None, w)] or [(w, w, None) for w in workloads]
    else:
        failures = case.measurement.get("failures")
        if not isinstance(failures, list) or not failures or not isinstance(failures[0], dict):
            if case.measurement.get("errors"):
                raise NoRepro("the graph probe failed by device errors only; the error text in the report is the repro")
            raise NoRepro("the observation lists no failing replay ('failures')")
        failure = failures[0]
        label, replay = _label(str(failure.get("variant") or ""))
        workload = label.split(".", 1)[0]
        if workload not in workloads:
            raise NoRepro(f"the failing replay names workload {workload!r}, which {case.probe} does not run")
        chosen = [(workload, label, replay)]
    cases = []
    kernels: list[str] = []
    extra = ""
    roots = list(_ROOTS[kind]) + list(_COMMON_ROOTS)
    for workload, label, replay in chosen:
        item: dict[str, Any] = {"workload": workload}
        if workload in compiled_training:
            # ``run_compiled``: the MLP's training step compiled whole, replayed as any workload.
            item["training"] = True
            item["seed"] = case.derive(workload)
            item["phases"] = _phases(case, "training", workload, label, replay)
            roots += [r for r in _COMPILED_TRAINING_ROOTS if r not in roots]
        elif kind == "reduce_overhead":
            item["parts"] = [(n, case.derive(n)) for n in groups[workload]]
            item["resize_seed"] = case.derive(f"{workload}.resized")
            item["phases"] = _phases(case, kind, workload, label, replay)
            kernels += [n for n in groups[workload] if n not in kernels]
        else:
            item["phases"] = _phases(case, kind, workload, label, replay)
            if kind != "training":
                item["seed"] = case.derive(workload)
                kernels += [workload] if workload not in kernels else []
        cases.append(item)
    builders = ""
    if kind == "training":
        builders, tags = _training_builders([item["workload"] for item in cases])
        seeds = {tag: case.derive(tag) for tag in tags}
        extra = "#: The seeds of the workloads' weights and inputs, by the probe's generator tag.\nSEEDS = " + repr(seeds) + "\n"
    elif kind == "reduce_overhead":
        extra = f"#: How the reduce-overhead probe compiles.\nCOMPILE_OPTIONS = {COMPILE_OPTIONS!r}\n"
    if kernels:
        entries = "".join(textwrap.indent(call_segment(graph_run, "KERNELS", name), " " * 8) + ",\n" for name in kernels)
        kernels_source = "{\n    k.name: k\n    for k in (\n" + entries + "    )\n}"
    else:
        kernels_source = "{}"
    replacements = {
        "@@KIND@@": repr(kind),
        "@@DTYPE_NAME@@": repr(dtype_name),
        "@@KERNELS@@": kernels_source,
        "@@CASES@@": repr(cases),
        "@@MAKE@@": _MAKE[kind],
        "@@DEVICE_CHECK@@": _DEVICE_CHECK["reduce_overhead" if kind == "reduce_overhead" else "other"],
        "@@EXTRA@@": extra,
        "@@TRAINING_BOUND@@": _TRAINING_BOUND if any(item.get("training") for item in cases) else "",
        "@@TRAINING_REPLAYER@@": _TRAINING_REPLAYER if any(item.get("training") for item in cases) else "",
        "@@BUILDERS@@": builders,
    }
    body = _BODY
    for marker, value in replacements.items():
        body = body.replace(marker, value)
    helpers = copied.helpers(_HEADER, _copier().source(roots, extra_text=kernels_source), body)
    atol, rtol = sweep_db.BASE_TOLERANCE[dtype_name]
    where = ""
    if failure is not None:
        where = (
            f"; gpuprobe saw {failure.get('output')} of replay {failure.get('sample')} differ from "
            f"{failure.get('direction')} ({failure.get('class')})"
        )
    first = cases[0]
    replayer = {
        "capture": "captured alone in a CUDA graph after a side-stream warm-up",
        "pool": "in two CUDA graphs sharing one memory pool, replayed under allocator pressure",
        "training": "captured as a training step (make_graphed_callables, or a whole optimizer step)",
        "reduce_overhead": "compiled by torch.compile(mode='reduce-overhead') (CUDA graph trees)",
    }[kind]
    return Recipe(
        summary=(
            f"The {first['workload']} workload in {dtype_name}, {replayer}, replayed with its static inputs updated in "
            f"place with fresh seeded data before each replay, as gpuprobe's {case.probe} does{where}. Each replay's "
            "outputs are read back at once and compared with the same computation run eagerly on the device (the "
            "first updated replay also with float64 on the CPU). On a CPU the probe's eager stand-in runs (no graph)."
        ),
        reference="eager on the same device in the same dtype; float64 on the CPU from the same inputs (first updated replay)",
        tolerance=(
            f"per element |found - expected| <= {atol:g} + {rtol:g}*|expected| (or norm-wise), the sweep's base bound "
            f"for {dtype_name}; against float64 also within twice the CPU's error in {dtype_name}; a wrong output "
            "equal to the previous replay's is a stale replay"
        ),
        what=f"a replay of {first['workload']} ({kind}, {dtype_name}) differs from its reference",
        helpers=helpers,
        body=body,
    )


RECIPES = {_RUN + impl: _run for impl in KINDS}
