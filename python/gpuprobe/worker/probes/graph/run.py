"""graph family implementation: CUDA graph capture and replay, shared memory pools, and
``torch.compile(mode="reduce-overhead")``, judged against eager and float64.

A captured graph replays the kernels it recorded on the memory it recorded: its inputs are
*static* buffers that the caller updates in place before each replay, its outputs are static
buffers it overwrites. What goes wrong when the stack is broken: a replay that reads stale
inputs or does not run (the outputs keep the previous replay's values), kernels recorded
with the wrong arguments, memory of the graph's private pool handed to someone else, or a
compiler's graph tree returning another recording's results. This module owns:

- the **workloads**: ``KERNELS`` (pure functions of static inputs and fixed weights, one per
  kernel kind) and the training steps (``MLP_WORKLOADS``: a graphed or compiled MLP forward
  + backward, one micro-batch a step or several accumulated into ``.grad``; optimizer
  steps), each bound to a device and a dtype as a *bound workload* that knows how to compute
  the same thing eagerly on the device and in float64 on the CPU;
- the **replayers**, which turn a bound workload into something replayed: a CUDA graph
  (``CudaGraphReplayer``), two graphs sharing one pool under allocator pressure
  (``SharedPoolReplayer``), a ``torch.compile`` function (``CompiledReplayer``), a compiled
  module's training step (``CompiledTrainingReplayer``), or, on a CPU device, an eager
  stand-in that keeps static output buffers (``EagerReplayer``, ``EagerPoolReplayer``: a
  self-test of the protocol, no graph captured);
- the **protocol** (``judge_replays``), the same for all of them: capture, then replay 1 + K
  times, the static inputs updated in place with fresh random data before each replay after
  the first; each replay's outputs are read back at once and compared with the same
  computation run eagerly on the device in the same dtype (``sweep_oracle.compare_leaf``,
  ``sweep_db.BASE_TOLERANCE``), and the first updated replay with float64 on the CPU too.
  A wrong output that equals the previous replay's bit for bit is a ``stale_replay``.

Failure classes: ``stale_replay``, ``wrong_value``, ``nonfinite_invented`` (and the oracle's
``nan_lost``/``structure`` should they occur). An exception of the device's stack
(``faults.is_device_fault``) is a device error; any other exception makes its case
unjudged, with a reason. Fault simulation (op ``graph``) corrupts the outputs read back
after a replay: ``stale`` keeps the outputs' previous contents.
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from gpuprobe.worker import simulate
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, device_context_problem
from gpuprobe.worker.faults import is_device_fault
from gpuprobe.worker.probes.precision import tf32_mode
from gpuprobe.worker.probes.sweep import db as sweep_db
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
from gpuprobe.worker.tally import CaseTally

#: Replays after the first, each after the static inputs were updated in place.
REPLAYS = 4
#: Replays (by index) also compared with float64 on the CPU: the first after an update.
FLOAT64_REPLAYS = (1,)
#: Warm-up iterations on a side stream before a capture (PyTorch's documented recipe).
WARMUP_ITERS = 3
#: Failure class of a replay whose wrong output equals the previous replay's.
STALE_REPLAY = "stale_replay"
#: Note on a CPU device under test, where no graph exists.
CPU_NOTE = "CPU: protocol self-test, no graph captured"

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


# -- kernel workloads ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """A pure workload: ``fn(torch, inputs, params) -> outputs``.

    ``inputs(torch, generator, batch, dtype)`` draws fresh inputs on the host (floating ones in
    the dtype, index tensors int64), ``params(torch, generator, dtype)`` the fixed weights. The
    leading size of the main input is ``batch`` (another batch re-records a compiled graph)."""

    name: str
    batch: int
    inputs: Callable[[Any, Any, int, Any], list[Any]]
    params: Callable[[Any, Any, Any], list[Any]]
    fn: Callable[[Any, list[Any], list[Any]], list[Any]]
    #: What each output is (the names failures carry).
    outputs: tuple[str, ...]


def _randn(torch: Any, gen: Any, shape: tuple[int, ...], dtype: Any, scale: float = 1.0) -> Any:
    return (torch.randn(shape, generator=gen) * scale).to(dtype)


def _pointwise_chain(torch: Any, x: list[Any], _p: list[Any]) -> list[Any]:
    a, b = x
    mixed = torch.sigmoid(a) * b + torch.tanh(a * 0.5 - b)
    gelu = torch.nn.functional.gelu(mixed)
    return [gelu * 1.5 + torch.exp(-a.abs()), torch.where(a > b, mixed, b * 0.25)]


def _reduction(torch: Any, x: list[Any], _p: list[Any]) -> list[Any]:
    (a,) = x
    return [a.sum(dim=1), a.amax(dim=0), (a * a).mean(dim=0), a.var(dim=1), torch.logsumexp(a, dim=1)]


def _linear(torch: Any, x: list[Any], p: list[Any]) -> list[Any]:
    (a,) = x
    weight, bias, right = p
    return [torch.nn.functional.linear(a, weight, bias), torch.relu(a @ right)]


def _conv2d(torch: Any, x: list[Any], p: list[Any]) -> list[Any]:
    (a,) = x
    weight, bias = p
    conv = torch.nn.functional.conv2d
    return [conv(a, weight, bias, padding=1), conv(a, weight, None, stride=2)]


def _layer_norm_softmax(torch: Any, x: list[Any], p: list[Any]) -> list[Any]:
    (a,) = x
    gamma, beta = p
    normed = torch.nn.functional.layer_norm(a, (a.shape[-1],), gamma, beta)
    return [normed, torch.softmax(normed, dim=-1), torch.nn.functional.log_softmax(a, dim=-1)]


#: Rows of the index workload's accumulation targets.
INDEX_ROWS = 96


def _index_scatter_gather(torch: Any, x: list[Any], _p: list[Any]) -> list[Any]:
    values, rows, gather_index, select = x
    target = torch.zeros(INDEX_ROWS, values.shape[1], dtype=values.dtype, device=values.device)
    added = target.index_add(0, rows, values)
    scattered = target.scatter_add(0, rows.unsqueeze(1).expand_as(values), values)
    return [added, scattered, torch.gather(values, 0, gather_index), values.index_select(0, select)]


def _scan(torch: Any, x: list[Any], _p: list[Any]) -> list[Any]:
    a, near_one = x
    # Products of 8 factors near 1: a long product in a 16-bit dtype drifts by its
    # rounding alone (a 384-factor fp16 cumprod was 7× the fp16 bound off float64 on a
    # healthy H200), which is the dtype's doing, not the graph's.
    products = torch.cumprod(near_one.reshape(near_one.shape[0], -1, 8), dim=2)
    return [a.cumsum(dim=1), a.cumsum(dim=0), products]


def _embedding(torch: Any, x: list[Any], p: list[Any]) -> list[Any]:
    (ids,) = x
    (table,) = p
    return [
        torch.nn.functional.embedding(ids, table),
        torch.nn.functional.embedding_bag(ids, table, mode="mean"),
    ]


KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel(
            "pointwise_chain",
            512,
            lambda t, g, n, d: [_randn(t, g, (n, 256), d), _randn(t, g, (n, 256), d)],
            lambda t, g, d: [],
            _pointwise_chain,
            ("gelu_mix", "where"),
        ),
        Kernel(
            "reduction",
            384,
            lambda t, g, n, d: [_randn(t, g, (n, 320), d)],
            lambda t, g, d: [],
            _reduction,
            ("sum", "amax", "mean_of_squares", "var", "logsumexp"),
        ),
        Kernel(
            "linear",
            256,
            lambda t, g, n, d: [_randn(t, g, (n, 384), d)],
            lambda t, g, d: [
                _randn(t, g, (320, 384), d, 384**-0.5),
                _randn(t, g, (320,), d),
                _randn(t, g, (384, 192), d, 384**-0.5),
            ],
            _linear,
            ("linear", "relu_matmul"),
        ),
        Kernel(
            "conv2d",
            8,
            lambda t, g, n, d: [_randn(t, g, (n, 16, 24, 24), d)],
            lambda t, g, d: [_randn(t, g, (24, 16, 3, 3), d, 144**-0.5), _randn(t, g, (24,), d)],
            _conv2d,
            ("conv_pad1", "conv_stride2"),
        ),
        Kernel(
            "layer_norm_softmax",
            256,
            lambda t, g, n, d: [_randn(t, g, (n, 512), d, 2.0)],
            lambda t, g, d: [1 + _randn(t, g, (512,), d, 0.1), _randn(t, g, (512,), d, 0.1)],
            _layer_norm_softmax,
            ("layer_norm", "softmax", "log_softmax"),
        ),
        Kernel(
            "index_scatter_gather",
            512,
            lambda t, g, n, d: [
                _randn(t, g, (n, 64), d),
                t.randint(0, INDEX_ROWS, (n,), generator=g),
                t.randint(0, n, (128, 64), generator=g),
                t.randint(0, n, (200,), generator=g),
            ],
            lambda t, g, d: [],
            _index_scatter_gather,
            ("index_add", "scatter_add", "gather", "index_select"),
        ),
        Kernel(
            "scan",
            64,
            # The factors are rounded to the dtype once drawn: exact inputs on both sides.
            lambda t, g, n, d: [_randn(t, g, (n, 64), d), (1 + _randn(t, g, (n, 64), t.float32, 0.05)).to(d)],
            lambda t, g, d: [],
            _scan,
            ("cumsum_dim1", "cumsum_dim0", "cumprod"),
        ),
        Kernel(
            "embedding",
            256,
            lambda t, g, n, d: [t.randint(0, 1000, (n, 16), generator=g)],
            lambda t, g, d: [_randn(t, g, (1000, 64), d)],
            _embedding,
            ("embedding", "embedding_bag_mean"),
        ),
    )
}


def _to(torch: Any, values: list[Any], device: Any, dtype: Any = None) -> list[Any]:
    """Copies of ``values`` on ``device``; floating ones in ``dtype`` when given."""
    out = []
    for v in values:
        if dtype is not None and v.is_floating_point():
            v = v.to(dtype)
        out.append(v.to(device, copy=True))
    return out


def _host(torch: Any, values: list[Any]) -> list[Any]:
    """Host copies of device outputs (read back at once: static buffers are overwritten)."""
    return [v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else v for v in values]


class Bound:
    """A workload bound to a device and a dtype, with its static input buffers.

    ``step()`` is what a replayer captures: it reads the static inputs and returns outputs.
    ``eager(inputs)`` computes the same on separate device tensors; ``float64(inputs)`` and
    ``same_dtype_cpu(inputs)`` on the CPU. Stateful workloads (optimizer steps) also advance
    their twins in ``eager``/``float64`` and are put back to their start by ``reset``."""

    name: str
    stateful = False
    #: The workload makes its own graphs (``make_graphed_callables``) when captured.
    makes_own_graphs = False
    static: list[Any]

    def output_names(self) -> list[str]:
        raise NotImplementedError

    def step(self) -> list[Any]:
        raise NotImplementedError

    def fresh_inputs(self, gen: Any) -> list[Any]:
        raise NotImplementedError

    def captured_inputs(self) -> list[Any]:
        """Host copies of the inputs the static buffers hold now."""
        return [s.detach().to("cpu", copy=True) for s in self.static]

    def load(self, torch: Any, host_inputs: list[Any]) -> None:
        """The in-place update of the static inputs: ``static_x.copy_(new_x)``."""
        with torch.no_grad():
            for static, new in zip(self.static, host_inputs):
                static.copy_(new)

    def eager(self, host_inputs: list[Any]) -> list[Any]:
        raise NotImplementedError

    def float64(self, host_inputs: list[Any]) -> list[Any]:
        raise NotImplementedError

    def same_dtype_cpu(self, host_inputs: list[Any]) -> list[Any] | None:
        return None

    def reset(self) -> None:
        """Puts a stateful workload and its twins back to their start (after the capture's
        warm-up steps changed it)."""

    def make_graphs(self) -> None:
        raise NotImplementedError


class KernelBound(Bound):
    """A ``Kernel`` on the device under test in one dtype."""

    def __init__(self, torch: Any, kernel: Kernel, device: Any, dtype: Any, gen: Any, batch: int | None = None,
                 params_host: list[Any] | None = None) -> None:
        self.torch = torch
        self.kernel = kernel
        self.name = kernel.name
        self.device = device
        self.dtype = dtype
        self.batch = batch or kernel.batch
        self.params_host = params_host if params_host is not None else kernel.params(torch, gen, dtype)
        self.params = _to(torch, self.params_host, device)
        self.static = _to(torch, kernel.inputs(torch, gen, self.batch, dtype), device)

    def resized(self, gen: Any, batch: int) -> KernelBound:
        """The same weights with inputs of another batch (another input shape)."""
        return KernelBound(self.torch, self.kernel, self.device, self.dtype, gen, batch, self.params_host)

    def output_names(self) -> list[str]:
        return list(self.kernel.outputs)

    def step(self) -> list[Any]:
        return self.kernel.fn(self.torch, self.static, self.params)

    def function(self) -> Callable[..., list[Any]]:
        """The computation as a function of the inputs alone (what ``torch.compile`` gets)."""
        kernel, torch, params = self.kernel, self.torch, self.params
        return lambda *inputs: kernel.fn(torch, list(inputs), params)

    def fresh_inputs(self, gen: Any) -> list[Any]:
        return self.kernel.inputs(self.torch, gen, self.batch, self.dtype)

    def eager(self, host_inputs: list[Any]) -> list[Any]:
        return self.kernel.fn(self.torch, _to(self.torch, host_inputs, self.device), self.params)

    def float64(self, host_inputs: list[Any]) -> list[Any]:
        torch = self.torch
        return self.kernel.fn(torch, _to(torch, host_inputs, "cpu", torch.float64), _to(torch, self.params_host, "cpu", torch.float64))

    def same_dtype_cpu(self, host_inputs: list[Any]) -> list[Any] | None:
        return self.kernel.fn(self.torch, _to(self.torch, host_inputs, "cpu"), self.params_host)


class ChainedBound(Bound):
    """Two stages: a kernel workload, then ``post`` of its outputs (what the second of two
    graphs sharing a pool computes). Outputs: both stages'."""

    def __init__(self, first: KernelBound) -> None:
        self.first = first
        self.torch = first.torch
        self.name = first.name
        self.static = first.static

    @staticmethod
    def post(torch: Any, outputs: list[Any]) -> list[Any]:
        return [torch.sigmoid(o) * 0.5 + o * 0.25 for o in outputs]

    def output_names(self) -> list[str]:
        names = self.first.output_names()
        return [f"g1.{n}" for n in names] + [f"g2.{n}" for n in names]

    def stage1(self) -> list[Any]:
        return self.first.step()

    def stage2(self, mid: list[Any]) -> list[Any]:
        return self.post(self.torch, mid)

    def step(self) -> list[Any]:
        mid = self.stage1()
        return mid + self.stage2(mid)

    def fresh_inputs(self, gen: Any) -> list[Any]:
        return self.first.fresh_inputs(gen)

    def _both(self, mid: list[Any]) -> list[Any]:
        return mid + self.post(self.torch, mid)

    def eager(self, host_inputs: list[Any]) -> list[Any]:
        return self._both(self.first.eager(host_inputs))

    def float64(self, host_inputs: list[Any]) -> list[Any]:
        return self._both(self.first.float64(host_inputs))

    def same_dtype_cpu(self, host_inputs: list[Any]) -> list[Any] | None:
        mid = self.first.same_dtype_cpu(host_inputs)
        return None if mid is None else self._both(mid)


class GroupBound(Bound):
    """Several kernel workloads as one function (one ``torch.compile`` for all of them)."""

    def __init__(self, name: str, parts: list[KernelBound]) -> None:
        self.name = name
        self.parts = parts
        self.torch = parts[0].torch
        self.static = [s for p in parts for s in p.static]
        self._splits = [len(p.static) for p in parts]

    def resized(self, gen: Any, batch_of: Callable[[KernelBound], int]) -> GroupBound:
        return GroupBound(self.name, [p.resized(gen, batch_of(p)) for p in self.parts])

    def _split(self, values: list[Any]) -> list[list[Any]]:
        out, at = [], 0
        for n in self._splits:
            out.append(values[at : at + n])
            at += n
        return out

    def output_names(self) -> list[str]:
        return [f"{p.name}.{n}" for p in self.parts for n in p.output_names()]

    def step(self) -> list[Any]:
        return [o for p in self.parts for o in p.step()]

    def function(self) -> Callable[..., list[Any]]:
        functions = [p.function() for p in self.parts]
        splits = self._splits

        def group(*inputs: Any) -> list[Any]:
            out, at = [], 0
            for fn, n in zip(functions, splits):
                out.extend(fn(*inputs[at : at + n]))
                at += n
            return out

        return group

    def fresh_inputs(self, gen: Any) -> list[Any]:
        return [i for p in self.parts for i in p.fresh_inputs(gen)]

    def eager(self, host_inputs: list[Any]) -> list[Any]:
        return [o for p, x in zip(self.parts, self._split(host_inputs)) for o in p.eager(x)]

    def float64(self, host_inputs: list[Any]) -> list[Any]:
        return [o for p, x in zip(self.parts, self._split(host_inputs)) for o in p.float64(x)]

    def same_dtype_cpu(self, host_inputs: list[Any]) -> list[Any] | None:
        return [o for p, x in zip(self.parts, self._split(host_inputs)) for o in p.same_dtype_cpu(x)]


# -- training workloads -------------------------------------------------------------------------


def _mlp(torch: Any, gen: Any) -> Any:
    """A small MLP in float32 with seeded weights (cast to the probe's dtype by the caller)."""
    layers = torch.nn.Sequential(
        torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 48), torch.nn.Tanh(), torch.nn.Linear(48, 16)
    )
    with torch.no_grad():
        for p in layers.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (p.shape[-1] ** -0.5))
    return layers


#: The MLP training workloads: name → micro-batches per step (forward and backward of each,
#: the parameters' gradients accumulated into ``.grad`` over them).
MLP_WORKLOADS = {"mlp_graphed_callables": 1, "mlp_graphed_accumulate": 2, "mlp_compiled_accumulate": 2}


class MlpBound(Bound):
    """An MLP's forward and backward, graphed by ``torch.cuda.make_graphed_callables`` (or,
    given ``compile_options``, compiled by ``torch.compile``: under ``mode="reduce-overhead"``
    Inductor graphs forward and backward itself).

    A step runs ``MLP_WORKLOADS[name]`` micro-batches through the graphed module: the
    parameters' ``.grad`` is set to None before the first, and the later ones accumulate into
    it, as gradient accumulation does (no ``zero_grad`` between micro-batches). Static inputs:
    per micro-batch, the input ``x`` (a leaf that requires grad) and the gradient of the
    output. Outputs: per micro-batch the output and the input's gradient (copied at once),
    then every parameter's gradient after the last micro-batch: with one micro-batch, that
    micro-batch's gradient; with more, their sum."""

    makes_own_graphs = True

    def __init__(
        self,
        torch: Any,
        device: Any,
        dtype: Any,
        gen: Any,
        name: str = "mlp_graphed_callables",
        compile_options: dict[str, Any] | None = None,
    ) -> None:
        self.torch = torch
        self.name = name
        self.micro_batches = MLP_WORKLOADS[name]
        self.compile_options = compile_options
        self.device = device
        self.dtype = dtype
        host = _mlp(torch, gen).to(dtype)
        self.host_module = host  # the weights in the dtype, on the host
        self.module = copy.deepcopy(host).to(device)
        self.twin = copy.deepcopy(self.module)  # eager, same weights, same device
        self.callable: Any = self.module
        self.static = _to(torch, self.fresh_inputs(gen), device)
        for x in self.static[::2]:
            x.requires_grad_(True)
        if self.micro_batches == 1:
            per_micro = ["out", "x.grad"]
        else:
            per_micro = [f"{what}[{k}]" for k in range(self.micro_batches) for what in ("out", "x.grad")]
        self._names = per_micro + [f"grad[{n}]" for n, _ in self.module.named_parameters()]

    def output_names(self) -> list[str]:
        return list(self._names)

    def make_graphs(self) -> None:
        if self.compile_options is not None:
            self.callable = self.torch.compile(self.module, **self.compile_options)
            return
        # Graphs the forward and the backward; the module's own forward is replaced. The
        # sample input is a tensor of its own, as in training code: each call copies the
        # real input (our static buffer, updated in place) into the graph's static input.
        sample = self.static[0].detach().clone().requires_grad_(True)
        self.callable = self.torch.cuda.make_graphed_callables(self.module, (sample,), num_warmup_iters=WARMUP_ITERS)

    @staticmethod
    def _run(module: Any, inputs: list[Any]) -> list[Any]:
        """One step: gradients set to None, then forward and backward of each micro-batch
        (``inputs``: x, output gradient, x, output gradient, …), accumulating into ``.grad``.
        Each micro-batch's output and input gradient are copied at once: a graph overwrites
        its static outputs on the next micro-batch, and those are not what is accumulated."""
        for p in module.parameters():
            p.grad = None
        per_micro = []
        for x, grad_out in zip(inputs[::2], inputs[1::2]):
            x.grad = None
            out = module(x)
            out.backward(grad_out)
            per_micro += [out.detach().clone(), x.grad.clone()]
        return per_micro + [p.grad for p in module.parameters()]

    def step(self) -> list[Any]:
        # ``callable`` is the module itself, its forward replaced by the graphed one (or the
        # compiled module).
        if self.compile_options is not None:
            mark = getattr(getattr(self.torch, "compiler", None), "cudagraph_mark_step_begin", None)
            if mark is not None:
                mark()
        return self._run(self.callable, self.static)

    def fresh_inputs(self, gen: Any) -> list[Any]:
        torch = self.torch
        out = []
        for _ in range(self.micro_batches):
            out += [_randn(torch, gen, (32, 64), self.dtype), _randn(torch, gen, (32, 16), self.dtype)]
        return out

    def _on(self, module: Any, host_inputs: list[Any], device: Any, dtype: Any = None) -> list[Any]:
        inputs = _to(self.torch, host_inputs, device, dtype)
        for x in inputs[::2]:
            x.requires_grad_(True)
        return self._run(module, inputs)

    def eager(self, host_inputs: list[Any]) -> list[Any]:
        return self._on(self.twin, host_inputs, self.device)

    def float64(self, host_inputs: list[Any]) -> list[Any]:
        return self._on(copy.deepcopy(self.host_module).double(), host_inputs, "cpu", self.torch.float64)

    def same_dtype_cpu(self, host_inputs: list[Any]) -> list[Any] | None:
        return self._on(copy.deepcopy(self.host_module), host_inputs, "cpu")


#: Shapes of the optimizer workloads' parameters: a matrix, a bias, a small odd matrix.
OPTIMIZER_SHAPES = ((64, 32), (32,), (16, 7))
OPTIMIZER_LR = 0.01


class OptimizerBound(Bound):
    """One optimizer step captured whole: the gradients are the static inputs (each
    parameter's ``.grad`` is its static gradient buffer); outputs: the parameters after the
    step and the first parameter's moment estimates. Eager twins (device, dtype) and a
    float64 twin (CPU) take the same steps from the same start."""

    stateful = True

    def __init__(self, torch: Any, name: str, device: Any, dtype: Any, gen: Any, on_gpu: bool) -> None:
        self.torch = torch
        self.name = name
        self.device = device
        self.dtype = dtype
        self.on_gpu = on_gpu
        self.start = [_randn(torch, gen, shape, dtype) for shape in OPTIMIZER_SHAPES]
        self.params = [p.to(device, copy=True).requires_grad_(True) for p in self.start]
        # Each parameter's .grad is its static gradient buffer (the graph reads it there).
        self.static = _to(torch, self.fresh_inputs(gen), device)
        for p, g in zip(self.params, self.static):
            p.grad = g
        self.optimizer = self._optimizer(self.params, gpu=on_gpu)
        self.twin: tuple[list[Any], Any] | None = None
        self.twin64: tuple[list[Any], Any] | None = None

    def _optimizer(self, params: list[Any], gpu: bool, reference: bool = False) -> Any:
        optim = self.torch.optim
        if reference:
            # The float64 reference: the plain per-parameter loop.
            cls = optim.Adam if self.name == "adam_capturable" else optim.AdamW
            return cls(params, lr=OPTIMIZER_LR, foreach=False)
        if self.name == "adam_capturable":
            # capturable: the step count lives on the device, so the step can be captured.
            # A CPU device under test has no capturable optimizers.
            return optim.Adam(params, lr=OPTIMIZER_LR, capturable=gpu, foreach=True)
        return optim.AdamW(params, lr=OPTIMIZER_LR, fused=True, capturable=gpu)

    def output_names(self) -> list[str]:
        return [f"param[{i}]" for i in range(len(self.params))] + ["exp_avg[0]", "exp_avg_sq[0]"]

    @staticmethod
    def _outputs(params: list[Any], optimizer: Any) -> list[Any]:
        state = optimizer.state[params[0]]
        return [p.detach() for p in params] + [state["exp_avg"], state["exp_avg_sq"]]

    def step(self) -> list[Any]:
        self.optimizer.step()
        return self._outputs(self.params, self.optimizer)

    def fresh_inputs(self, gen: Any) -> list[Any]:
        return [_randn(self.torch, gen, shape, self.dtype, 0.1) for shape in OPTIMIZER_SHAPES]

    def reset(self) -> None:
        torch = self.torch
        with torch.no_grad():
            for p, start in zip(self.params, self.start):
                p.copy_(start)
            for state in self.optimizer.state.values():
                for key in ("exp_avg", "exp_avg_sq", "step"):
                    if isinstance(state.get(key), torch.Tensor):
                        state[key].zero_()
        twin = [p.to(self.device, copy=True).requires_grad_(True) for p in self.start]
        self.twin = (twin, self._optimizer(twin, gpu=self.on_gpu))
        twin64 = [p.to(torch.float64, copy=True).requires_grad_(True) for p in self.start]
        self.twin64 = (twin64, self._optimizer(twin64, gpu=False, reference=True))

    @staticmethod
    def _advance(params: list[Any], optimizer: Any, grads: list[Any]) -> list[Any]:
        for p, g in zip(params, grads):
            p.grad = g
        optimizer.step()
        return OptimizerBound._outputs(params, optimizer)

    def eager(self, host_inputs: list[Any]) -> list[Any]:
        assert self.twin is not None
        return self._advance(*self.twin, _to(self.torch, host_inputs, self.device))

    def float64(self, host_inputs: list[Any]) -> list[Any]:
        assert self.twin64 is not None
        return self._advance(*self.twin64, _to(self.torch, host_inputs, "cpu", self.torch.float64))


# -- replayers ----------------------------------------------------------------------------------


class EagerReplayer:
    """The CPU stand-in for a graph: each replay runs the step eagerly and copies its results
    into static output buffers, as a graph's replay overwrites its static outputs. It tests
    the protocol and its judge where no graph exists."""

    kind = "eager_self_test"

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.outputs: list[Any] = []

    def capture(self, bound: Bound) -> None:
        self.bound = bound
        self.outputs = [o.detach().clone() for o in bound.step()]

    def peek(self) -> list[Any] | None:
        return [o.clone() for o in self.outputs]

    def replay(self) -> list[Any]:
        results = self.bound.step()  # with autograd: a step may run a backward pass
        with self.torch.no_grad():
            for static, new in zip(self.outputs, results):
                static.copy_(new)
        return self.outputs

    def after_replay(self) -> list[tuple[str, sweep_oracle.LeafFailure]] | None:
        """Failures of the replay's own checks (None: this replayer checks nothing more)."""
        return None

    def finish(self) -> dict[str, Any]:
        return {}


class CudaGraphReplayer:
    """A CUDA graph: warm-up on a side stream, capture (``torch.cuda.graph``), replay.

    ``capture_error_mode="thread_local"``: only this thread's unsafe calls abort the
    capture (another thread of the worker may touch the device meanwhile)."""

    kind = "cuda_graph"

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch = torch
        self.device = device
        self.graph: Any = None
        self.outputs: list[Any] = []

    def _warm_up(self, run: Callable[[], Any]) -> None:
        torch = self.torch
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_ITERS):
                run()
        torch.cuda.current_stream(self.device).wait_stream(side)

    def capture(self, bound: Bound) -> None:
        torch = self.torch
        self.bound = bound
        if bound.makes_own_graphs:
            bound.make_graphs()
            return
        self._warm_up(bound.step)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.outputs = bound.step()

    def peek(self) -> list[Any] | None:
        return [o.detach().clone() for o in self.outputs] if self.outputs else None

    def replay(self) -> list[Any]:
        if self.bound.makes_own_graphs:
            return self.bound.step()
        self.graph.replay()
        return self.outputs

    def after_replay(self) -> list[tuple[str, sweep_oracle.LeafFailure]] | None:
        """Failures of the replay's own checks (None: this replayer checks nothing more)."""
        return None

    def finish(self) -> dict[str, Any]:
        return {}


class AllocatorPressure:
    """Allocations between capture and replay, and between replays.

    Each ``churn`` allocates tensors of many sizes: half are filled with NaN and freed at once
    (freed blocks holding garbage: a graph that reads memory it does not own reads NaN), the
    other half are *bystanders*, filled with a code of their own and kept alive across the
    next replays; ``check`` says which bystanders changed (a replay wrote memory that the
    allocator had handed to someone else)."""

    def __init__(self, torch: Any, device: Any, largest: int) -> None:
        self.torch = torch
        self.device = device
        self.largest = largest
        self.bystanders: list[tuple[Any, float]] = []
        self.allocations = 0
        self.churns = 0

    def churn(self) -> None:
        torch = self.torch
        # Sizes from 1 element to ``largest``, odd and even, in a fixed order.
        sizes = [max(1, (self.largest >> shift) + odd) for shift in range(0, 16, 2) for odd in (0, 3)]
        freed = []
        for i, n in enumerate(sizes):
            if i % 2 == 0:
                freed.append(torch.empty(n, device=self.device).fill_(math.nan))
            else:
                code = float(1000 + len(self.bystanders))
                self.bystanders.append((torch.full((n,), code, device=self.device), code))
            self.allocations += 1
        del freed
        self.churns += 1

    def check(self) -> list[tuple[str, sweep_oracle.LeafFailure]]:
        torch = self.torch
        problems = []
        for i, (tensor, code) in enumerate(self.bystanders):
            changed = tensor.to("cpu") != code
            if bool(changed.any()):
                first = int(torch.nonzero(changed)[0, 0])
                problems.append(
                    (
                        f"bystander[{i}]",
                        sweep_oracle.LeafFailure(
                            sweep_oracle.WRONG_VALUE,
                            f"{int(changed.sum())} of {tensor.numel()} elements of a tensor allocated between capture "
                            "and replay changed during the replay: a graph wrote memory it does not own",
                            index=[first],
                            expected=repr(code),
                            found=repr(float(tensor[first])),
                            bad_elements=int(changed.sum()),
                            elements=tensor.numel(),
                        ),
                    )
                )
        return problems

    def release(self) -> None:
        self.bystanders.clear()


class SharedPoolReplayer:
    """Two CUDA graphs sharing one memory pool: ``g1`` computes the workload, ``g2``
    (captured with ``pool=g1.pool()``) computes ``post`` of ``g1``'s static outputs, the
    pattern PyTorch documents for chained graphs. They are replayed in capture order, with
    allocator pressure before each and the device's cached blocks released once between
    capture and the first replay (the private pool must survive ``empty_cache``)."""

    kind = "shared_pool"

    def __init__(self, torch: Any, device: Any, pressure: AllocatorPressure) -> None:
        self.torch = torch
        self.device = device
        self.pressure = pressure
        self.mid: list[Any] = []
        self.out: list[Any] = []

    def capture(self, bound: Bound) -> None:
        torch = self.torch
        assert isinstance(bound, ChainedBound)
        self.bound = bound
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_ITERS):
                bound.stage2(bound.stage1())
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.g1 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g1, capture_error_mode="thread_local"):
            self.mid = bound.stage1()
        self.g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g2, pool=self.g1.pool(), capture_error_mode="thread_local"):
            self.out = bound.stage2(self.mid)
        torch.cuda.empty_cache()

    def peek(self) -> list[Any] | None:
        return [o.detach().clone() for o in self.mid + self.out]

    def replay(self) -> list[Any]:
        self.pressure.release()
        self.pressure.churn()
        self.g1.replay()
        self.pressure.churn()
        self.g2.replay()
        return self.mid + self.out

    def after_replay(self) -> list[tuple[str, sweep_oracle.LeafFailure]] | None:
        return self.pressure.check()

    def finish(self) -> dict[str, Any]:
        self.pressure.release()
        return {}


class EagerPoolReplayer(EagerReplayer):
    """The CPU stand-in of ``SharedPoolReplayer``: both stages eagerly into static buffers,
    with the same allocator pressure and bystander checks."""

    kind = "eager_self_test"

    def __init__(self, torch: Any, pressure: AllocatorPressure) -> None:
        super().__init__(torch)
        self.pressure = pressure

    def replay(self) -> list[Any]:
        self.pressure.release()
        self.pressure.churn()
        bound = self.bound
        assert isinstance(bound, ChainedBound)
        with self.torch.no_grad():
            mid = bound.stage1()
            self.pressure.churn()
            for static, new in zip(self.outputs, mid + bound.stage2(mid)):
                static.copy_(new)
        return self.outputs

    def after_replay(self) -> list[tuple[str, sweep_oracle.LeafFailure]] | None:
        return self.pressure.check()

    def finish(self) -> dict[str, Any]:
        self.pressure.release()
        return {}


class CompiledReplayer:
    """A ``torch.compile`` function called with the static inputs (updated in place between
    calls). Under ``mode="reduce-overhead"`` Inductor's CUDA graph trees warm up on the first
    call, record on the second and replay from the third; each call is marked as a new step
    (``torch.compiler.cudagraph_mark_step_begin``), and its outputs are read back at once:
    CUDA graph trees overwrite a call's outputs on a later replay unless they are cloned.
    One compiled function serves every bound it is given (another input shape re-records).

    The second call's first output (the recording's) is kept un-cloned, with a clone: after
    the later calls ``finish`` says what reading it gives. PyTorch documents that it may be
    overwritten and that reading an overwritten output raises: reported, never judged."""

    kind = "reduce_overhead"

    def __init__(self, torch: Any, **compile_options: Any) -> None:
        self.torch = torch
        self.options = compile_options
        self.compiled: Any = None
        self.kept: tuple[Any, Any] | None = None
        self.calls = 0

    def capture(self, bound: Bound) -> None:
        assert isinstance(bound, (KernelBound, GroupBound))
        self.bound = bound
        self.calls = 0
        self.kept = None
        if self.compiled is None:
            self.compiled = self.torch.compile(bound.function(), **self.options)

    def peek(self) -> list[Any] | None:
        return None

    def replay(self) -> list[Any]:
        torch = self.torch
        mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        if mark is not None:
            mark()
        outputs = list(self.compiled(*self.bound.static))
        self.calls += 1
        if self.calls == 2 and outputs:
            self.kept = (outputs[0], outputs[0].detach().clone())
        return outputs

    def after_replay(self) -> list[tuple[str, sweep_oracle.LeafFailure]] | None:
        return None

    def finish(self) -> dict[str, Any]:
        """How the kept output reads after the later calls (never a failure)."""
        if self.kept is None or self.calls < 3:
            return {}
        held, clone = self.kept
        self.kept = None
        try:
            same = bool(self.torch.equal(held.to("cpu"), clone.to("cpu")))
            behaviour = "unchanged" if same else "overwritten"
        except Exception as exc:  # noqa: BLE001 - the documented refusal to read it
            behaviour = "access_refused" if "overwritten" in str(exc).lower() else f"raised {type(exc).__name__}"
        return {"earlier_output": behaviour}


# -- the protocol -------------------------------------------------------------------------------


class ReplayTally(CaseTally):
    """Cases of one probe in the sweep's observation format, and how the replays compare
    with eager bit for bit (never a failure: a fact the metrics report)."""

    def __init__(self) -> None:
        super().__init__(message_chars=300)
        self.bitwise_equal = 0
        self.eager_compared = 0
        #: Replays, by workload, whose outputs differ from eager's in some bit (within the bound).
        self.not_bitwise: dict[str, int] = {}
        self.facts: dict[str, Any] = {}

    def output(self, op: str, dtype_name: str, metrics: dict[str, Any], notes: list[str]) -> ProbeOutput:
        measurement = self.measurement(op, dtype_name)
        notes = list(notes) + self.notes
        unjudged = self.unjudged_note()
        if unjudged:
            notes.append(unjudged)
        metrics = {
            **metrics,
            **self.facts,
            "eager_comparisons": self.eager_compared,
            "bitwise_equal_to_eager": self.bitwise_equal,
            "not_bitwise_equal_to_eager": ",".join(f"{k}:{v}" for k, v in sorted(self.not_bitwise.items())) or "none",
        }
        return ProbeOutput(measurement=measurement, metrics=metrics, notes=notes)


def _same_bits(torch: Any, a: Any, b: Any) -> bool:
    """Whether two host tensors hold the same bytes (NaN payloads included)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return False
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return False
    return bool(torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)))


def judge_outputs(
    torch: Any,
    found: list[Any],
    expected: list[Any],
    names: list[str],
    dtype_name: str,
    *,
    previous: list[Any] | None = None,
    same_dtype_cpu: Callable[[], list[Any] | None] | None = None,
    fallback: Callable[[int, Any, sweep_oracle.LeafFailure], sweep_oracle.LeafFailure | None] | None = None,
) -> tuple[str, sweep_oracle.LeafFailure] | None:
    """The first wrong output (its name and failure), or None when all are right.

    Each output is judged by ``sweep_oracle.compare_leaf`` with the dtype's base bound
    (``sweep_db.BASE_TOLERANCE``), ``same_dtype_cpu`` giving the yardstick of the CPU in the
    same dtype. A wrong output that holds the previous replay's bytes exactly is a stale
    replay. ``fallback(index, found, failure)`` is asked about a wrong value before it fails
    (the compiled probe's float64 rule): None there means right."""
    atol, rtol = sweep_db.BASE_TOLERANCE[dtype_name]
    if len(found) != len(expected):
        return "outputs", sweep_oracle.LeafFailure(
            sweep_oracle.STRUCTURE, f"{len(found)} outputs where the reference has {len(expected)}"
        )
    cache: list[Any] = []

    def yardstick(index: int) -> Any:
        if same_dtype_cpu is None:
            return None
        if not cache:
            cache.append(same_dtype_cpu())
        values = cache[0]
        return None if values is None or index >= len(values) else values[index]

    for index, (f, e) in enumerate(zip(found, expected)):
        failure = sweep_oracle.compare_leaf(
            torch,
            f,
            e.detach() if isinstance(e, torch.Tensor) else e,
            dtype_name=dtype_name,
            atol=atol,
            rtol=rtol,
            same_dtype_cpu=(lambda i=index: yardstick(i)) if same_dtype_cpu is not None else None,
        )
        if failure is not None and fallback is not None and failure.cls == sweep_oracle.WRONG_VALUE:
            failure = fallback(index, f, failure)
        if failure is None:
            continue
        if previous is not None and index < len(previous) and _same_bits(torch, f, previous[index]):
            failure = sweep_oracle.LeafFailure(
                STALE_REPLAY,
                "the output holds the previous replay's values exactly: the replay read stale inputs or did not run "
                f"({failure.detail})",
                index=failure.index,
                expected=failure.expected,
                found=failure.found,
                max_err=failure.max_err,
                allowed=failure.allowed,
                zeros=failure.zeros,
                all_zero=failure.all_zero,
                bad_elements=failure.bad_elements,
                elements=failure.elements,
            )
        name = names[index] if index < len(names) else f"out[{index}]"
        return name, failure
    return None


def _error_text(exc: BaseException) -> str:
    first = (str(exc) or type(exc).__name__).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}"[:300]


class _ContextLost(RuntimeError):
    """The device context is unusable after a device error: the probe stops."""


def _fault(dtype_name: str, workload: str, sample: int, kind: str) -> tuple[Any, Any, Any]:
    """The simulation engine, the fault that hits this replay (or None) and its call."""
    engine = simulate.engine()
    if engine is None or not engine.wants("graph"):
        return None, None, None
    call = simulate.CallInfo(
        op="graph", method=workload, dtype=dtype_name, on_device=True, variant=f"replay{sample}", direction=kind
    )
    return engine, engine.decide(call), call


def judge_replays(
    ctx: ProbeContext,
    bound: Bound,
    replayer: Any,
    tally: ReplayTally,
    dtype_name: str,
    *,
    label: str | None = None,
    replays: int = REPLAYS,
    float64_at: tuple[int, ...] = FLOAT64_REPLAYS,
    seed_tag: str | None = None,
    fallback_to_float64: bool = False,
) -> None:
    """The judging protocol, the same for every replayer.

    Capture (``replayer.capture``), then replays 0 … ``replays``: replay 0 runs on the
    inputs the capture saw; before each later one the static inputs are updated in place
    (``static.copy_(new)``) with fresh random data. After each replay the outputs are read
    back at once and judged against eager on the device (direction ``eager``) and, at
    ``float64_at``, against float64 on the CPU (direction ``float64``, with the CPU in the
    same dtype as yardstick). Each comparison is a case; a replayer with checks of its own
    (``after_replay``: the pool's bystanders) adds one more case per replay, direction
    ``bystanders``.

    ``fallback_to_float64`` (compiled code): an output that differs from eager beyond the
    bound passes when it is within the bound of float64, or no further from float64 than
    twice eager's own error (a compiler that keeps intermediates in float32 where eager
    rounds each operation to the dtype).
    """
    torch = ctx.torch
    label = label or bound.name
    where = f"{label}.capture"
    gen = ctx.cpu_generator(f"{seed_tag or label}.inputs")
    try:
        replayer.capture(bound)
        bound.reset()
    except Exception as exc:  # noqa: BLE001 - judged below
        _exception(ctx, tally, where, "capture", 0, exc)
        return
    names = bound.output_names()
    previous: list[Any] | None = None
    for sample in range(replays + 1):
        variant = f"{label}.replay{sample}"
        engine, fault, call = _fault(dtype_name, bound.name, sample, replayer.kind)
        try:
            host_inputs = bound.captured_inputs() if sample == 0 else bound.fresh_inputs(gen)
            if sample > 0:
                bound.load(torch, host_inputs)
            before = previous
            if before is None and fault is not None and fault.effect == "stale":
                peeked = replayer.peek()
                before = _host(torch, peeked) if peeked is not None else None
            if fault is not None and fault.effect in ("exception", "crash", "hang", "oom"):
                engine.apply(fault, call, None)
            found = _host(torch, replayer.replay())
            ctx.sync()
        except Exception as exc:  # noqa: BLE001 - judged below
            _exception(ctx, tally, variant, "replay", sample, exc)
            return
        if fault is not None:
            found = [
                engine.apply(fault, call, f.clone(), snapshot=before[i] if before is not None and i < len(before) else None)
                if isinstance(f, torch.Tensor) and f.numel()
                else f
                for i, f in enumerate(found)
            ]
        try:
            eager = _host(torch, bound.eager(host_inputs))
            ctx.sync()
        except Exception as exc:  # noqa: BLE001 - judged below
            _exception(ctx, tally, variant, "eager", sample, exc)
            return
        wanted64 = sample in float64_at
        references: list[Any] = []

        def float64_reference(h: list[Any] = host_inputs) -> list[Any] | None:
            """The float64 CPU result of this replay's inputs, computed once (None with the
            reason kept when the reference itself fails)."""
            if not references:
                try:
                    references.append(_host(torch, bound.float64(h)))
                except Exception as exc:  # noqa: BLE001 - no reference: not judged
                    references.append(None)
                    references.append(_error_text(exc))
            return references[0]

        if bound.stateful and float64_reference() is None:
            # The float64 twin takes every step: without it the later replays have no reference.
            tally.unjudge("no_float64_reference", f"{variant}: {references[-1]}")
            return

        def yardstick(h: list[Any] = host_inputs) -> list[Any] | None:
            values = bound.same_dtype_cpu(h)
            return None if values is None else _host(torch, values)

        fallback = _float64_fallback(torch, float64_reference, eager, dtype_name) if fallback_to_float64 else None
        tally.eager_compared += 1
        if len(found) == len(eager) and all(_same_bits(torch, f, e) for f, e in zip(found, eager)):
            tally.bitwise_equal += 1
        else:
            tally.not_bitwise[bound.name] = tally.not_bitwise.get(bound.name, 0) + 1
        _record(
            tally,
            variant,
            "eager",
            sample,
            judge_outputs(torch, found, eager, names, dtype_name, previous=previous, fallback=fallback),
        )
        if wanted64:
            ref64 = float64_reference()
            if ref64 is None:
                tally.unjudge("no_float64_reference", f"{variant}: {references[-1]}")
            else:
                verdict = judge_outputs(
                    torch,
                    found,
                    ref64,
                    names,
                    dtype_name,
                    previous=previous,
                    same_dtype_cpu=None if bound.stateful else yardstick,
                )
                _record(tally, variant, "float64", sample, verdict)
        bystanders = replayer.after_replay()
        if bystanders is not None:
            _record(tally, variant, "bystanders", sample, bystanders[0] if bystanders else None)
        previous = found
    extra = replayer.finish()
    if extra:
        tally.facts.update({f"{label}.{k}": v for k, v in extra.items()})


def _float64_fallback(
    torch: Any, float64_reference: Callable[[], list[Any] | None], eager: list[Any], dtype_name: str
) -> Callable[[int, Any, sweep_oracle.LeafFailure], sweep_oracle.LeafFailure | None]:
    """The compiled probe's second look at an output that differs from eager beyond the
    bound: right when it is within the bound of float64, or no further from float64 than
    twice eager's own error (``compare_leaf``'s same-dtype yardstick, here eager's result)."""
    atol, rtol = sweep_db.BASE_TOLERANCE[dtype_name]

    def judge(index: int, found: Any, failure: sweep_oracle.LeafFailure) -> sweep_oracle.LeafFailure | None:
        ref64 = float64_reference()
        if ref64 is None or index >= len(ref64):
            return failure
        return sweep_oracle.compare_leaf(
            torch,
            found,
            ref64[index],
            dtype_name=dtype_name,
            atol=atol,
            rtol=rtol,
            same_dtype_cpu=lambda: eager[index] if index < len(eager) else None,
        )

    return judge


def _record(tally: ReplayTally, variant: str, direction: str, sample: int, verdict: tuple[str, sweep_oracle.LeafFailure] | None) -> None:
    output, failure = verdict if verdict is not None else ("", None)
    tally.record(variant, direction, sample, output, failure)


def _exception(ctx: ProbeContext, tally: ReplayTally, variant: str, step: str, sample: int, exc: BaseException) -> None:
    """An exception in a case: a device error when it is a fault of the device's stack (and
    the probe stops if the device context did not survive it), else unjudged."""
    text = _error_text(exc)
    print(f"gpuprobe graph: {variant} {step}: {text}", file=sys.stderr, flush=True)
    if is_device_fault(text):
        tally.device_error(variant, step, sample, text)
        if ctx.is_gpu:
            problem = device_context_problem(ctx.torch, ctx.device)
            if problem is not None:
                raise _ContextLost(f"{variant} {step}: {text}; the device context is unusable afterwards ({problem})")
        return
    tally.unjudge(f"{step}_refused", f"{variant}: {text}")


# -- probes -------------------------------------------------------------------------------------


#: Warnings PyTorch gives on a healthy stack along this family's paths, kept out of the
#: observations' notes (each would otherwise read as a finding):
BENIGN_WARNINGS = (
    # The autograd engine's device thread meets cuBLAS before a context is current on it
    # (the first backward of a graphed callable); PyTorch makes the primary context current.
    r"Attempting to run cuBLAS, but there was no current CUDA context",
    # make_graphed_callables warms up and captures the backward on its own side stream; the
    # parameters' gradient accumulators made there stay alive with the graphed callable, so
    # each later backward on the default stream is told it may cost a synchronization (the
    # values, which the probe judges, are unaffected).
    r"The AccumulateGrad node's stream does not match the stream of the node that produced",
    # Inductor's performance hint: the probes switch TF32 off on purpose.
    r"TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled",
)


@contextlib.contextmanager
def _on_device(ctx: ProbeContext) -> Iterator[None]:
    """TF32 off (float32 is judged as float32), the device under test current, and the
    benign warnings of these paths silenced. On a CPU device under test, one intra-op
    thread: the self-test's tensors are small, and on a busy host threads only wait for
    each other (the MLP workloads took 3 s with two threads, 0.02 s with one)."""
    torch = ctx.torch
    with contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        for message in BENIGN_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        if ctx.is_gpu:
            stack.enter_context(torch.cuda.device(ctx.device))
        else:
            stack.callback(torch.set_num_threads, torch.get_num_threads())
            torch.set_num_threads(1)
        stack.enter_context(tf32_mode(torch, False))
        yield


def _base_notes(ctx: ProbeContext) -> list[str]:
    return [] if ctx.is_gpu else [CPU_NOTE]


def _progress(ctx: ProbeContext, what: str) -> None:
    print(f"gpuprobe graph: {ctx.probe_id} {what}", file=sys.stderr, flush=True)


def _replayer(ctx: ProbeContext) -> Any:
    return CudaGraphReplayer(ctx.torch, ctx.device) if ctx.is_gpu else EagerReplayer(ctx.torch)


def _finish(ctx: ProbeContext, tally: ReplayTally, op: str, dtype_name: str, workloads: list[str], started: float,
            notes: list[str] | None = None) -> ProbeOutput:
    metrics = {
        "workloads": ",".join(workloads),
        "replays": REPLAYS + 1,
        "replayer": "cuda_graph" if ctx.is_gpu else "eager_self_test",
        "seconds": round(time.monotonic() - started, 3),
    }
    return tally.output(op, dtype_name, metrics, _base_notes(ctx) + list(notes or []))


def _run_workloads(ctx: ProbeContext, tally: ReplayTally, dtype_name: str, bounds: list[Callable[[], Bound]],
                   replayer_for: Callable[[], Any]) -> None:
    for make in bounds:
        try:
            bound = make()
        except Exception as exc:  # noqa: BLE001 - judged as any other case
            _exception(ctx, tally, getattr(make, "workload", "workload"), "setup", 0, exc)
            continue
        _progress(ctx, bound.name)
        judge_replays(ctx, bound, replayer_for(), tally, dtype_name)


def _named(name: str, make: Callable[[], Bound]) -> Callable[[], Bound]:
    make.workload = name  # type: ignore[attr-defined]
    return make


def run_capture(ctx: ProbeContext, dtype: str, workloads: list[str]) -> ProbeOutput:
    """Each kernel workload captured alone and replayed (``graph.capture.<dtype>``)."""
    torch = ctx.torch
    dtype_name = DTYPES[dtype]
    started = time.monotonic()
    tally = ReplayTally()
    with _on_device(ctx):
        makers = [
            _named(name, lambda k=KERNELS[name]: KernelBound(torch, k, ctx.device, getattr(torch, dtype_name), ctx.cpu_generator(k.name)))
            for name in workloads
        ]
        try:
            _run_workloads(ctx, tally, dtype_name, makers, lambda: _replayer(ctx))
        except _ContextLost as exc:
            raise RuntimeError(str(exc)) from None
    return _finish(ctx, tally, "graph.capture", dtype_name, workloads, started)


def run_training(ctx: ProbeContext, dtype: str, workloads: list[str]) -> ProbeOutput:
    """Training steps in graphs (``graph.training.<dtype>``)."""
    torch = ctx.torch
    dtype_name = DTYPES[dtype]
    dt = getattr(torch, dtype_name)
    started = time.monotonic()
    tally = ReplayTally()
    notes = []
    if not ctx.is_gpu:
        notes.append("CPU: the optimizers run without capturable=True (a CPU has no capturable optimizers)")
    builders: dict[str, Callable[[], Bound]] = {
        "mlp_graphed_callables": lambda: MlpBound(torch, ctx.device, dt, ctx.cpu_generator("mlp")),
        "mlp_graphed_accumulate": lambda: MlpBound(
            torch, ctx.device, dt, ctx.cpu_generator("mlp_accumulate"), "mlp_graphed_accumulate"
        ),
        "adam_capturable": lambda: OptimizerBound(torch, "adam_capturable", ctx.device, dt, ctx.cpu_generator("adam"), ctx.is_gpu),
        "adamw_fused": lambda: OptimizerBound(torch, "adamw_fused", ctx.device, dt, ctx.cpu_generator("adamw"), ctx.is_gpu),
    }
    with _on_device(ctx):
        try:
            _run_workloads(ctx, tally, dtype_name, [_named(n, builders[n]) for n in workloads], lambda: _replayer(ctx))
        except _ContextLost as exc:
            raise RuntimeError(str(exc)) from None
    return _finish(ctx, tally, "graph.training", dtype_name, workloads, started, notes)


def run_pool(ctx: ProbeContext, dtype: str, workloads: list[str]) -> ProbeOutput:
    """Two graphs sharing one pool, under allocator pressure (``graph.pool.<dtype>``)."""
    torch = ctx.torch
    dtype_name = DTYPES[dtype]
    dt = getattr(torch, dtype_name)
    started = time.monotonic()
    tally = ReplayTally()
    # Up to 4 Mi float32 elements (16 MiB) per allocation on a GPU; 64 Ki on the CPU.
    largest = 1 << 22 if ctx.is_gpu else 1 << 16
    pressures: list[AllocatorPressure] = []

    def replayer() -> Any:
        pressure = AllocatorPressure(torch, ctx.device, largest)
        pressures.append(pressure)
        return SharedPoolReplayer(torch, ctx.device, pressure) if ctx.is_gpu else EagerPoolReplayer(torch, pressure)

    with _on_device(ctx):
        makers = [
            _named(name, lambda k=KERNELS[name]: ChainedBound(KernelBound(torch, k, ctx.device, dt, ctx.cpu_generator(k.name))))
            for name in workloads
        ]
        try:
            _run_workloads(ctx, tally, dtype_name, makers, replayer)
        except _ContextLost as exc:
            raise RuntimeError(str(exc)) from None
    out = _finish(ctx, tally, "graph.pool", dtype_name, workloads, started)
    out.metrics["allocations_between_replays"] = sum(p.allocations for p in pressures)
    return out


def compile_unavailable(torch: Any) -> str | None:
    """Why ``torch.compile`` with Inductor cannot run on the GPU here, or None."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    try:
        from torch.utils._triton import has_triton  # type: ignore
    except Exception:  # noqa: BLE001
        return "torch.utils._triton is missing: Inductor's GPU backend cannot be checked"
    try:
        if not has_triton():
            return "Triton is not usable here (Inductor's GPU code generator)"
    except Exception as exc:  # noqa: BLE001
        return f"Triton check failed: {_error_text(exc)}"
    return None


def _other_batch(bound: KernelBound) -> int:
    """Another leading size for the re-recording: about three quarters, odd."""
    return max(1, bound.batch * 3 // 4) | 1


def run_reduce_overhead(
    ctx: ProbeContext, dtype: str, groups: dict[str, list[str]], training: list[str] | None = None
) -> ProbeOutput:
    """``torch.compile(mode="reduce-overhead")`` (``graph.reduce_overhead.<dtype>``)."""
    if not ctx.is_gpu:
        raise SkipProbe("reduce-overhead uses CUDA graphs; the device under test is the CPU")
    torch = ctx.torch
    missing = compile_unavailable(torch)
    if missing:
        raise SkipProbe(missing)
    return run_compiled(ctx, dtype, groups, {"mode": "reduce-overhead"}, training)


class CompiledTrainingReplayer(CudaGraphReplayer):
    """A compiled module's training step (``MlpBound`` with compile options): the bound
    compiles and runs itself, as under ``make_graphed_callables``; no device call of its own."""

    kind = "reduce_overhead"


def run_compiled(
    ctx: ProbeContext,
    dtype: str,
    groups: dict[str, list[str]],
    options: dict[str, Any],
    training: list[str] | None = None,
) -> ProbeOutput:
    """The compiled protocol for each group: 5 calls at the original shape, 3 at another
    (re-recording), then 1 back at the original (the first recording replayed). Then each
    ``training`` workload (``MLP_WORKLOADS``): the MLP's forward and backward compiled with
    the same options, 5 steps of accumulated micro-batches."""
    torch = ctx.torch
    dtype_name = DTYPES[dtype]
    dt = getattr(torch, dtype_name)
    started = time.monotonic()
    tally = ReplayTally()
    workloads = [w for names in groups.values() for w in names] + list(training or [])
    with _on_device(ctx):
        for group, names in groups.items():
            try:
                bound = GroupBound(
                    group, [KernelBound(torch, KERNELS[n], ctx.device, dt, ctx.cpu_generator(n)) for n in names]
                )
                resized = bound.resized(ctx.cpu_generator(f"{group}.resized"), _other_batch)
            except Exception as exc:  # noqa: BLE001
                _exception(ctx, tally, group, "setup", 0, exc)
                continue
            replayer = CompiledReplayer(torch, **options)
            _progress(ctx, f"{group}: compile and {REPLAYS + 1} calls")
            try:
                before = tally.device_error_count + sum(tally.unjudged.values())
                judge_replays(ctx, bound, replayer, tally, dtype_name, label=group, fallback_to_float64=True)
                if tally.device_error_count + sum(tally.unjudged.values()) > before:
                    continue
                _progress(ctx, f"{group}: another input shape")
                judge_replays(
                    ctx, resized, replayer, tally, dtype_name, label=f"{group}.reshape", replays=2, float64_at=(0,),
                    fallback_to_float64=True,
                )
                judge_replays(
                    ctx, bound, replayer, tally, dtype_name, label=f"{group}.back", replays=0, float64_at=(),
                    seed_tag=f"{group}.back", fallback_to_float64=True,
                )
            except _ContextLost as exc:
                raise RuntimeError(str(exc)) from None
        for name in training or []:
            try:
                mlp = MlpBound(torch, ctx.device, dt, ctx.cpu_generator(name), name, compile_options=options)
            except Exception as exc:  # noqa: BLE001
                _exception(ctx, tally, name, "setup", 0, exc)
                continue
            _progress(ctx, f"{name}: compile and {REPLAYS + 1} steps")
            try:
                judge_replays(ctx, mlp, CompiledTrainingReplayer(torch, ctx.device), tally, dtype_name, fallback_to_float64=True)
            except _ContextLost as exc:
                raise RuntimeError(str(exc)) from None
    out = _finish(ctx, tally, "graph.reduce_overhead", dtype_name, workloads, started)
    out.metrics["replayer"] = "torch.compile(" + ", ".join(f"{k}={v!r}" for k, v in options.items()) + ")"
    out.metrics["calls_per_group"] = REPLAYS + 1 + 3 + 1
    behaviours = {v for k, v in out.metrics.items() if k.endswith(".earlier_output")}
    if behaviours:
        out.notes.append(
            "an output kept from the first call without a clone, read after the later calls: "
            + ", ".join(sorted(behaviours))
            + " (CUDA graph trees overwrite outputs on later replays unless cloned, as documented; not judged)"
        )
    return out
