"""Fault simulation for generated repro scripts (SIMULATED results only).

With this directory on ``PYTHONPATH`` and ``GPUPROBE_REPRO_SIMULATE`` holding the plan's
``simulate`` object as JSON, Python runs this module at start-up. It loads gpuprobe's fault
engine (``gpuprobe/worker/simulate.py``, by file path: the package itself stays off
``sys.path``, so a script that imported gpuprobe would still fail) and wraps torch's entry
points with it: ``Tensor.to`` / ``.cuda`` / ``.cpu`` / ``.copy_`` / the dtype shortcuts and the
random generators (the engine's own wrappers), plus ``Tensor.clone`` (device-to-device copies)
and the math functions the worker's math layer reports (``torch.mm`` / ``matmul`` / ``bmm`` /
``addmm`` / ``F.linear``, the elementwise functions, the reductions, ``F.conv2d``,
``F.scaled_dot_product_attention``), with the same call descriptions, and the batches a
``DataLoader`` yields (op ``dataloader``). A sweep script's ``run_case`` is wrapped whole:
its results meet the ``sweep`` faults (``_wrap_sweep_case``). A training-path script (its
``FAMILY``) is faulted where the worker faults that family: an optimizer script's device
trajectories after each step (``optim``), a graph script's ``read_back`` of each replay
(``graph``), a train script's ``_Faults.apply`` after backward and after the optimizer's
step (``train``). Tensors reloaded by
``torch.load`` / ``safetensors.torch.load_file`` meet the ``save_load`` faults and the batches
of an Accelerate-prepared loader the ``dataloader`` faults of method ``accelerate``.

The worker faults only its operations layer, never the code that builds inputs or reads
results back. A plain-torch script has no such layer, so faults here apply only to calls
made inside the script's ``run_case`` function (the operation under test). The engine is
rebuilt from the environment at the first such call, after the script has applied its
settings, so a setting that cures a fault (``cured_by``) cures it here too.

Without ``GPUPROBE_REPRO_SIMULATE`` this module does nothing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

SPEC_VAR = "GPUPROBE_REPRO_SIMULATE"


def _load_engine_module():
    path = Path(__file__).resolve().parents[2] / "worker" / "simulate.py"
    spec = importlib.util.spec_from_file_location("_gpuprobe_repro_simulate", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the module executes.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _in_case(start) -> object | None:
    """The globals of the script whose ``run_case`` is on the stack, or None."""
    frame = start
    while frame is not None:
        if frame.f_code.co_name == "run_case" and frame.f_globals.get("__name__") == "__main__":
            return frame.f_globals
        frame = frame.f_back
    return None


def _wrap_math(simulate, torch, owner, name: str, op: str) -> None:
    """Wraps a math function as the worker's math layer (``ops_math``) reports it: the
    output's dtype (the input's for reductions), always on the device under test."""
    original = getattr(owner, name, None)
    if original is None:
        return

    def wrapper(*args, **kwargs):
        if not simulate.wrappers_active():
            return original(*args, **kwargs)
        active = simulate.engine()
        if active is None:
            return original(*args, **kwargs)
        with simulate.bypassed():
            out = kwargs.get("out")
            snapshot = out.detach().clone() if out is not None and active.wants(op, "stale") else None
            result = original(*args, **kwargs)
            if not isinstance(result, torch.Tensor):
                return result
            first = args[0] if args and isinstance(args[0], torch.Tensor) else result
            dtype = first.dtype if op == "reduce" else result.dtype
            # Attention is described by its backend, as the worker's ``ops_math.sdpa`` does: an
            # attention script names the one it forces (``BACKEND``).
            method = getattr(sys.modules.get("__main__"), "BACKEND", name) if op == "sdpa" else name
            call = simulate.CallInfo(
                op=op,
                method=method,
                dtype=str(dtype).replace("torch.", ""),
                to_dtype=str(result.dtype).replace("torch.", ""),
                nbytes=int(result.numel()) * int(result.element_size()),
                on_device=True,
            )
            sources = tuple(a for a in args if isinstance(a, torch.Tensor))
            if result.requires_grad:
                # As the worker's ``ops_math.finish``: the corrupted values, the gradient of
                # the real result (an in-place change would break the backward pass).
                fault = active.decide(call)
                if fault is None:
                    return result
                with torch.no_grad():
                    bad = active.apply(fault, call, result.detach().clone(), snapshot=snapshot, in_place=True)
                return result + (bad - result).detach()
            return active.after_call(call, result, sources=sources, snapshot=snapshot, in_place=out is not None)

    wrapper.__name__ = getattr(original, "__name__", name)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    setattr(owner, name, wrapper)


def _wrap_dataloader(simulate, torch) -> None:
    """Batches as they arrive from a DataLoader meet the ``dataloader`` faults (method: the
    start method of its workers, ``main`` without workers), as in the worker's
    ``ops_pipeline.dataloader_batch``."""
    from torch.utils.data import DataLoader

    original_iter = DataLoader.__iter__

    def leaves(obj, fn):
        if isinstance(obj, torch.Tensor):
            return fn(obj)
        if isinstance(obj, dict):
            return {k: leaves(v, fn) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(leaves(v, fn) for v in obj)
        return obj

    class Hooked:
        def __init__(self, inner, method, pinned):
            self.inner, self.method, self.pinned = inner, method, pinned

        def __iter__(self):
            return self

        def __len__(self):
            return len(self.inner)

        def __next__(self):
            batch = next(self.inner)
            if not simulate.wrappers_active():
                return batch
            active = simulate.engine()
            if active is None:
                return batch

            def hook(t):
                call = simulate.CallInfo(
                    op="dataloader",
                    method=self.method,
                    dtype=str(t.dtype).replace("torch.", ""),
                    nbytes=int(t.numel()) * int(t.element_size()),
                    pinned=self.pinned,
                )
                return active.after_call(call, t, sources=(t,))

            with simulate.bypassed():
                return leaves(batch, hook)

    def hooked_iter(self):
        inner = original_iter(self)
        if self.num_workers == 0:
            method = "main"
        else:
            context = self.multiprocessing_context
            if context is None:
                import multiprocessing

                method = multiprocessing.get_start_method()
            else:
                method = context.get_start_method()
        return Hooked(inner, method, bool(self.pin_memory))

    DataLoader.__iter__ = hooked_iter


def _wrap_loads(simulate, torch) -> None:
    """Tensors reloaded by ``torch.load`` and ``safetensors.torch.load_file`` meet the
    ``save_load`` faults (method ``torch`` or ``safetensors``), as the worker's
    ``ops_pipeline.save_load`` describes them."""

    def wrap(owner, name: str, method: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            loaded = original(*args, **kwargs)
            if not simulate.wrappers_active() or not isinstance(loaded, dict):
                return loaded
            active = simulate.engine()
            if active is None:
                return loaded
            with simulate.bypassed():
                out = {}
                for key, value in loaded.items():
                    if isinstance(value, torch.Tensor):
                        call = simulate.CallInfo(
                            op="save_load",
                            method=method,
                            dtype=str(value.dtype).replace("torch.", ""),
                            nbytes=int(value.numel()) * int(value.element_size()),
                            on_device=value.device.type != "cpu",
                        )
                        value = active.after_call(call, value, sources=(value,))
                    out[key] = value
                return out

        setattr(owner, name, wrapper)

    wrap(torch, "load", "torch")
    if importlib.util.find_spec("safetensors") is not None:
        import safetensors.torch

        wrap(safetensors.torch, "load_file", "safetensors")


def _wrap_accelerate(simulate, torch) -> None:
    """Batches of an Accelerate-prepared loader meet the ``dataloader`` faults of method
    ``accelerate``, as in the worker's ``pipeline_run.run_accelerate``."""
    if importlib.util.find_spec("accelerate") is None:
        return
    from accelerate import data_loader

    for cls in (data_loader.DataLoaderShard, data_loader.DataLoaderDispatcher):
        original = cls.__iter__

        def hooked(self, _original=original):
            for batch in _original(self):
                active = simulate.engine() if simulate.wrappers_active() else None
                if active is None:
                    yield batch
                    continue

                def hook(t):
                    call = simulate.CallInfo(
                        op="dataloader",
                        method="accelerate",
                        dtype=str(t.dtype).replace("torch.", ""),
                        nbytes=int(t.numel()) * int(t.element_size()),
                        pinned=False,
                    )
                    return active.after_call(call, t, sources=(t,))

                with simulate.bypassed():
                    yield {k: hook(v) if isinstance(v, torch.Tensor) else v for k, v in batch.items()} if isinstance(
                        batch, dict
                    ) else batch

        cls.__iter__ = hooked


def _wrap_width_scope(simulate, torch, script) -> None:
    """A width script's ``Scope.op`` (the big operation of a case) meets the ``width``
    faults as the worker's ``Scope.op`` describes it (``ops_math.finish``: the first output,
    variant the boundary, direction forward or backward)."""
    scope_cls = getattr(script, "Scope", None) if script is not None else None
    if scope_cls is None or not hasattr(script, "GEOMETRY") or not hasattr(scope_cls, "op"):
        return
    original = scope_cls.op

    def op(self, method, dtype, fn, *, direction="forward"):
        out = original(self, method, dtype, fn, direction=direction)
        active = simulate.engine()
        if active is None or not active.wants("width"):
            return out
        first = out[0] if isinstance(out, (tuple, list)) else out
        if not isinstance(first, torch.Tensor):
            return out
        if not first.is_contiguous():
            first = first.contiguous()
        call = simulate.CallInfo(
            op="width",
            method=method,
            dtype=str(dtype).replace("torch.", ""),
            to_dtype=str(first.dtype).replace("torch.", ""),
            nbytes=int(first.numel()) * int(first.element_size()),
            on_device=True,
            variant=self.g.kind,
            direction=direction,
        )
        fault = active.decide(call)
        if fault is not None:
            with simulate.bypassed():
                if first.requires_grad:
                    with torch.no_grad():
                        bad = active.apply(fault, call, first.detach().clone(), in_place=True)
                    first = first + (bad - first).detach()
                else:
                    first = active.apply(fault, call, first, in_place=False)
        if isinstance(out, tuple):
            return (first, *out[1:])
        if isinstance(out, list):
            return [first, *out[1:]]
        return first

    scope_cls.op = op


def _wrap_sweep_case(simulate, torch, script) -> None:
    """A sweep script (``OP_NAME``, ``TRANSFORM``, ``BACKWARD``) runs the operator through
    whatever callable the database names, which no wrapper here sees: its ``run_case`` is
    wrapped instead, and its results meet the ``sweep`` faults as the worker's device values
    do (``sweep_run._fault`` / ``_apply_fault``)."""
    names = ("OP_NAME", "DTYPE_NAME", "TRANSFORM", "BACKWARD", "run_case")
    if script is None or not all(hasattr(script, n) for n in names):
        return
    original = script.run_case
    # A compile script (one entry of a compiled program) names its family's op and pass.
    op = getattr(script, "SIMULATED_OP", "sweep")
    variant = getattr(script, "SIMULATED_VARIANT", script.TRANSFORM)

    def run_case(case, inputs, device):
        active = simulate.engine()
        if active is None or not active.wants(op):
            return original(case, inputs, device)
        call = simulate.CallInfo(
            op=op,
            method=script.OP_NAME,
            dtype=script.DTYPE_NAME,
            on_device=True,
            variant=variant,
            direction="backward" if script.BACKWARD else "forward",
        )
        fault = active.decide(call)
        if fault is not None and fault.effect in ("exception", "crash", "hang", "oom"):
            active.apply(fault, call, None)
        values = original(case, inputs, device)
        if fault is None or fault.effect == "accept_invalid":
            return values
        with simulate.bypassed():
            if fault.effect == "drop_nan":
                return [
                    torch.nan_to_num(v, nan=0.0) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                    for v in values
                ]
            return [
                active.apply(fault, call, v.detach().clone()) if isinstance(v, torch.Tensor) and v.numel() > 0 else v
                for v in values
            ]

    script.run_case = run_case


def _case_frame(start):
    """The frame of the script's ``run_case`` on the stack, or None."""
    frame = start
    while frame is not None:
        if frame.f_code.co_name == "run_case" and frame.f_globals.get("__name__") == "__main__":
            return frame
        frame = frame.f_back
    return None


#: Script families faulted only by their own hooks below, never by the generic wrappers.
_FAMILY_HOOKS = ("optim", "graph", "train")
#: Effects that corrupt an optimizer's parameters (the others raise, crash or hang), as the
#: worker's ``optim_run._simulation_hook`` has them.
_OPTIM_CORRUPTING = ("zeros", "partial_zeros", "nan", "bitflip", "stale", "wrap")


def _optim_hook(simulate, optimizer: str, dtype: str, implementation: str):
    """The worker's ``optim_run._simulation_hook``: after an optimizer step the ``optim``
    faults (method the optimizer, variant the implementation, direction ``step<N>``) corrupt
    every parameter in place. None when no fault is about optimizers."""
    active = simulate.engine()
    if active is None or not active.wants("optim"):
        return None

    def hook(step, params):
        call = simulate.CallInfo(
            op="optim", method=optimizer, dtype=dtype, on_device=True, variant=implementation, direction=f"step{step}"
        )
        fault = active.decide(call)
        if fault is None:
            return
        if fault.effect not in _OPTIM_CORRUPTING:
            active.apply(fault, call, None)
            return
        for param in params:
            if param.numel() > 0:
                active.apply(fault, call, param.data)

    return hook


def _wrap_optim_case(simulate, torch, script) -> None:
    """An optimizer script's device trajectories (``run_trajectory`` called in ``run_case``,
    the implementation told by its flags) and a GradScaler script's ``scaler_step`` meet the
    ``optim`` faults after each step, as the worker's parameters do."""
    if getattr(script, "FAMILY", None) != "optim" or not hasattr(script, "DTYPE_NAME"):
        return
    if hasattr(script, "scaler_step"):
        original_step = script.scaler_step

        def scaler_step(scaler, optimizer, params, step):
            original_step(scaler, optimizer, params, step)
            frame = _case_frame(sys._getframe(1))
            case = frame.f_locals.get("case") if frame is not None else None
            if not isinstance(case, dict):
                return
            hook = _optim_hook(simulate, case["optimizer"], script.DTYPE_NAME, case["implementation"])
            if hook is not None:
                with torch.no_grad():
                    hook(step, params)

        script.scaler_step = scaler_step
        return
    original = script.run_trajectory

    def run_trajectory(*args, **kwargs):
        options = args[2] if len(args) > 2 else kwargs.get("kwargs") or {}
        if kwargs.get("float64") or kwargs.get("after_step") is not None or _case_frame(sys._getframe(1)) is None:
            return original(*args, **kwargs)
        implementation = "fused" if options.get("fused") else "foreach" if options.get("foreach") else "forloop"
        hook = _optim_hook(simulate, script.OPTIMIZER, script.DTYPE_NAME, implementation)
        if hook is None:
            return original(*args, **kwargs)
        return original(*args, after_step=hook, **kwargs)

    script.run_trajectory = run_trajectory


def _wrap_graph_case(simulate, torch, script) -> None:
    """A graph script's ``read_back`` (one replay and its outputs copied to the host) meets
    the ``graph`` faults as the worker's replays do (``graph_run.judge_replays``: method the
    workload, variant ``replay<k>``, direction the replayer; ``stale`` leaves the previous
    replay's outputs, for replay 0 what the capture left in the static outputs)."""
    if getattr(script, "FAMILY", None) != "graph" or not hasattr(script, "read_back"):
        return
    original = script.read_back
    last: dict = {}

    def read_back(replayer, bound, replay):
        active = simulate.engine()
        if active is None or not active.wants("graph") or _case_frame(sys._getframe(1)) is None:
            return original(replayer, bound, replay)
        call = simulate.CallInfo(
            op="graph",
            method=bound.name,
            dtype=script.DTYPE_NAME,
            on_device=True,
            variant=f"replay{replay}",
            direction=replayer.kind,
        )
        fault = active.decide(call)
        before = last.get("outputs") if replay > 0 else None
        if replay == 0 and fault is not None and fault.effect == "stale":
            with simulate.bypassed():
                peeked = replayer.peek()
                before = [p.detach().to("cpu", copy=True) for p in peeked] if peeked is not None else None
        if fault is not None and fault.effect in ("exception", "crash", "hang", "oom"):
            active.apply(fault, call, None)
        found = original(replayer, bound, replay)
        if fault is not None:
            with simulate.bypassed():
                found = [
                    active.apply(fault, call, f.clone(), snapshot=before[i] if before is not None and i < len(before) else None)
                    if isinstance(f, torch.Tensor) and f.numel()
                    else f
                    for i, f in enumerate(found)
                ]
        last["outputs"] = found
        return found

    script.read_back = read_back


def _wrap_train_case(simulate, torch, script) -> None:
    """A train script's ``_Faults.apply`` (after backward: the gradients; after the
    optimizer's step: the parameters) meets the ``train`` faults as the worker's
    ``train_run._Faults`` does (method the model, dtype the autocast dtype, variant the mode,
    direction ``grad`` or ``update``)."""
    faults_cls = getattr(script, "_Faults", None) if script is not None else None
    if faults_cls is None or getattr(script, "FAMILY", None) != "train":
        return
    original = faults_cls.apply

    def apply(self, direction, tensors):
        active = simulate.engine()
        if active is None or not active.wants("train") or _case_frame(sys._getframe(1)) is None:
            return original(self, direction, tensors)
        call = simulate.CallInfo(
            op="train", method=self.model, dtype=self.dtype_name, on_device=True, variant=self.variant, direction=direction
        )
        fault = active.decide(call)
        if fault is None:
            return None
        if fault.effect in ("exception", "crash", "hang", "oom"):
            active.apply(fault, call, None)
        with torch.no_grad(), simulate.bypassed():
            for t in tensors:
                t.copy_(active.apply(fault, call, t.detach().clone()))
        return None

    faults_cls.apply = apply


def _install(raw: str) -> None:
    try:
        spec = json.loads(raw)
    except ValueError as exc:
        sys.stderr.write(f"{SPEC_VAR} is not valid JSON ({exc}); no faults simulated\n")
        return
    simulate = _load_engine_module()
    try:
        engine = simulate.FaultEngine(spec)
    except simulate.SimulationError as exc:
        sys.stderr.write(f"{SPEC_VAR}: {exc}; no faults simulated\n")
        return
    import torch

    state = {"fresh": False}

    def activate(device: str) -> None:
        # Rebuilt once, inside the case: the script has applied its settings by then.
        fresh = simulate.FaultEngine(spec, os.environ)
        simulate.activate_engine(fresh, torch, device)
        state["fresh"] = True
        _wrap_sweep_case(simulate, torch, sys.modules.get("__main__"))
        _wrap_width_scope(simulate, torch, sys.modules.get("__main__"))
        _wrap_optim_case(simulate, torch, sys.modules.get("__main__"))
        _wrap_graph_case(simulate, torch, sys.modules.get("__main__"))
        _wrap_train_case(simulate, torch, sys.modules.get("__main__"))

    simulate.activate_engine(engine, torch, "cuda:0" if torch.cuda.is_available() else "cpu")

    def wrappers_active() -> bool:
        if not state["fresh"]:
            # The script sets DEVICE once its settings are applied; the engine must be
            # rebuilt before a wrapper takes its reference to it.
            device = getattr(sys.modules.get("__main__"), "DEVICE", None)
            if device:
                activate(str(device))
        if simulate._bypass_depth() != 0:
            return False
        script = _in_case(sys._getframe(1))
        if script is None:
            return False
        if not state["fresh"]:
            activate(str(script.get("DEVICE") or "cpu"))
        # A training-path script is faulted only where the worker faults its family (the
        # worker's optim, graph and train probes call no operations layer).
        return script.get("FAMILY") not in _FAMILY_HOOKS

    simulate.wrappers_active = wrappers_active

    # The script prints its first line once DEVICE is set and its settings applied: the
    # engine is rebuilt then, before any case runs, even one whose first torch call is one
    # no wrapper sees (a width case's ``torch.arange``).
    import builtins

    original_print = builtins.print

    def first_print(*args, **kwargs):
        device = getattr(sys.modules.get("__main__"), "DEVICE", None)
        if device and not state["fresh"]:
            builtins.print = original_print
            activate(str(device))
        return original_print(*args, **kwargs)

    builtins.print = first_print

    original_clone = torch.Tensor.clone

    def clone(self, *args, **kwargs):
        if not simulate.wrappers_active():
            return original_clone(self, *args, **kwargs)
        active = simulate.engine()
        if active is None:
            return original_clone(self, *args, **kwargs)
        with simulate.bypassed():
            result = original_clone(self, *args, **kwargs)
            call = simulate.CallInfo(
                op="d2d",
                method="clone",
                dtype=str(self.dtype).replace("torch.", ""),
                nbytes=int(self.numel()) * int(self.element_size()),
                on_device=True,
            )
            return active.after_call(call, result, sources=(self,))

    torch.Tensor.clone = clone
    _wrap_dataloader(simulate, torch)
    ops = {str(f.get("op")) for f in spec.get("fault", []) if isinstance(f, dict)}
    # Only where a fault can hit them: importing these libraries costs start-up time.
    if ops & {"save_load", "any"}:
        _wrap_loads(simulate, torch)
    if ops & {"dataloader", "any"}:
        _wrap_accelerate(simulate, torch)
    for op, owner, names in (
        ("matmul", torch, ("mm", "matmul", "bmm", "addmm")),
        ("matmul", torch.nn.functional, ("linear",)),
        ("elementwise", torch, ("add", "sub", "mul", "div", "exp", "maximum", "minimum", "where")),
        ("reduce", torch, ("sum", "mean", "amax", "all", "any")),
        ("conv", torch.nn.functional, ("conv2d", "conv_transpose2d")),
        ("sdpa", torch.nn.functional, ("scaled_dot_product_attention",)),
    ):
        for name in names:
            _wrap_math(simulate, torch, owner, name, op)
    sys.stderr.write(f"SIMULATED: gpuprobe fault simulation active ({spec.get('source') or 'unnamed'})\n")


_RAW = os.environ.get(SPEC_VAR)
if _RAW:
    _install(_RAW)
