"""nn family: the convolution probes (``nn_run.run_conv``: ``conv2d``, depthwise, transposed,
forward or with the input and weight gradients), the case with the largest error rebuilt
from its seeds and judged against float64 on the CPU with the probe's bound.
"""

from __future__ import annotations

import math

from gpuprobe.repro.families.base import Case
from gpuprobe.repro.families.ops import TOLERANCE_HELPERS
from gpuprobe.repro.script import Recipe

#: The call of each kind of convolution, as ``nn_run._conv_apply`` makes it.
_APPLY = {
    "depthwise": (
        "mid = F.conv2d(x, p['dw'], p['db'], stride=c['stride'], padding=c['pad'], groups=c['cin'])\n"
        "    return F.conv2d(mid, p['pw'], p['pb'])"
    ),
    "conv_transpose2d": (
        "return F.conv_transpose2d(x, p['w'], p['b'], stride=c['stride'], padding=c['pad'], output_padding=c['out_pad'])"
    ),
    "conv2d": "return F.conv2d(x, p['w'], p['b'], stride=c['stride'], padding=c['pad'], dilation=c.get('dil', 1))",
}


def _params(kind: str, c: dict[str, int]) -> dict[str, tuple[list[int], float]]:
    """The shapes and standard deviations of the weights (``nn_run._conv_params``)."""
    cin, cout, k = c["cin"], c["cout"], c["k"]
    if kind == "depthwise":
        return {
            "dw": ([cin, 1, k, k], 1.0 / k),
            "db": ([cin], 0.1),
            "pw": ([cout, cin, 1, 1], 1.0 / math.sqrt(cin)),
            "pb": ([cout], 0.1),
        }
    if kind == "conv_transpose2d":
        return {"w": ([cin, cout, k, k], 1.0 / math.sqrt(cin * k * k / c["stride"] ** 2)), "b": ([cout], 0.1)}
    return {"w": ([cout, cin, k, k], 1.0 / math.sqrt(cin * k * k)), "b": ([cout], 0.1)}


def _conv(case: Case) -> Recipe:
    p = case.params
    kind, dtype, rule_dtype, backward = p["kind"], p["dtype"], p["rule_dtype"], bool(p["backward"])
    tolerance = float(p["tolerance"])
    shapes = list(p["cases"])
    cases = []
    for t in case.chosen(len(shapes), "convolution", by="worst"):
        c = dict(shapes[t])
        tag = f"case{t}"
        params = {name: {"shape": shape, "std": std, "seed": case.derive(tag + name)} for name, (shape, std) in _params(kind, c).items()}
        cases.append({"case": t, "conv": c, "x_seed": case.derive(tag + "x"), "grad_seed": case.derive(tag + "g"), "params": params})
    weight = "pw" if kind == "depthwise" else "w"
    method = "conv_transpose2d" if kind == "conv_transpose2d" else "conv2d"
    tf32 = rule_dtype == "tf32"
    body = f'''\
KIND = {kind!r}
DTYPE_NAME = {dtype!r}
#: TF32 for float32 convolutions, as the probe set it (its {rule_dtype} rule).
ALLOW_TF32 = {tf32!r}
#: The judge's bound for this probe (normwise relative error of each output and gradient).
TOLERANCE = {tolerance!r}
#: The input and weight gradients are checked too (the gradient of the output seeded).
BACKWARD = {backward!r}
#: The convolution with the largest error: its sizes and the seeds of its input, weights
#: (with their standard deviations) and output gradient.
CASES = {cases!r}


def case_label(case):
    c = case["conv"]
    layout = ", channels_last" if c.get("channels_last") else ""
    return (f"{{KIND}} {{DTYPE_NAME}}: input {{c['n']}}x{{c['cin']}}x{{c['h']}}x{{c['w']}}, {{c['cout']}} out channels, "
            f"kernel {{c['k']}}, stride {{c['stride']}}, padding {{c['pad']}}{{layout}}")


def randn(shape, seed, std=1.0):
    """Seeded normal values on the host (float32)."""
    values = torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    return values.mul_(std) if std != 1.0 else values


def apply(F, x, p, c):
    {_APPLY[kind]}


def build(case, device):
    c, dt = case["conv"], getattr(torch, DTYPE_NAME)
    if DTYPE_NAME == "float32":
        torch.backends.cuda.matmul.allow_tf32 = ALLOW_TF32
        torch.backends.cudnn.allow_tf32 = ALLOW_TF32
    x = randn([c["n"], c["cin"], c["h"], c["w"]], case["x_seed"]).to(dt)
    params = {{name: randn(q["shape"], q["seed"], q["std"]).to(dt) for name, q in case["params"].items()}}
    layout = torch.channels_last if c.get("channels_last") else torch.contiguous_format
    dx = x.to(device, copy=True).contiguous(memory_format=layout)
    dparams = {{n: t.to(device, copy=True).contiguous(memory_format=layout) if t.dim() == 4 else t.to(device, copy=True)
               for n, t in params.items()}}
    x64, params64 = x.to(torch.float64), {{n: t.to(torch.float64) for n, t in params.items()}}
    grad = None
    if BACKWARD:
        for t in (dx, dparams[{weight!r}], x64, params64[{weight!r}]):
            t.requires_grad_(True)
    ref = apply(torch.nn.functional, x64, params64, c)  # float64 on the CPU
    expected = [ref.detach()]
    if BACKWARD:
        grad = randn(list(ref.shape), case["grad_seed"]).to(dt)
        ref.backward(grad.to(torch.float64))
        expected += [x64.grad, params64[{weight!r}].grad]
        grad = grad.to(device, copy=True)
    return {{"x": dx, "params": dparams, "grad": grad, "expected": expected}}


def run_case(case, inputs, device):
    """The convolution under test (and its backward pass)."""
    out = apply(torch.nn.functional, inputs["x"], inputs["params"], case["conv"])
    if not BACKWARD:
        return [out.detach()]
    out.backward(inputs["grad"])
    return [out.detach(), inputs["x"].grad, inputs["params"][{weight!r}].grad]


def check(case, inputs, result):
    """Each output and gradient against float64 on the CPU, within the probe's tolerance."""
    ok = True
    for name, got, want in zip(("output", "input gradient", "weight gradient"), result, inputs["expected"]):
        print(f"  {{name}}:")
        ok = compare_tolerance(got, want, TOLERANCE) and ok
    return ok
'''
    what = {"depthwise": "depthwise + pointwise conv2d", "conv_transpose2d": "conv_transpose2d", "conv2d": "conv2d"}[kind]
    return Recipe(
        summary=(
            f"One {dtype} {what}{' with its input and weight gradients' if backward else ''} (TF32 "
            f"{'on' if tf32 else 'off'}), the case with the largest error, seeded normal input and weights, "
            f"against float64 on the CPU (F.{method})."
        ),
        reference="float64 on the CPU from the same (rounded) input and weights",
        tolerance=f"normwise relative error <= {tolerance:.3g} for each output and gradient (the judge's bound for {rule_dtype})",
        what=f"the {what} result is wrong",
        helpers=TOLERANCE_HELPERS,
        body=body,
    )


RECIPES = {"gpuprobe.worker.probes.nn_run:run_conv": _conv}
