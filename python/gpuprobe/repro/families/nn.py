"""nn family: the convolution probes (``nn_run.run_conv``: ``conv2d``, depthwise, transposed,
forward or with the input and weight gradients; the case with the largest error) and the
attention probes (``nn_run.run_sdpa``: one backend, mask and layout), rebuilt from their
seeds and judged against float64 on the CPU with the probe's bound.
"""

from __future__ import annotations

from typing import Any

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


def _conv(case: Case) -> Recipe:
    from gpuprobe.worker.probes.nn import run as nn_run
    from gpuprobe.worker.probes.ops import run as ops_run

    p = case.params
    kind, dtype, rule_dtype, backward = p["kind"], p["dtype"], p["rule_dtype"], bool(p["backward"])
    tolerance = float(p["tolerance"])
    shapes = list(p["cases"])
    cases = []
    for t in case.chosen(len(shapes), "convolution", by="worst"):
        c = dict(shapes[t])
        tag = ops_run.trial_tag(t)
        params = {
            name: {"shape": shape, "std": std, "seed": case.derive(tag + name)}
            for name, (shape, std) in nn_run.conv_param_specs(kind, c).items()
        }
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


RECIPES: dict[str, Any] = {"gpuprobe.worker.probes.nn.run:run_conv": _conv}


def _sdpa(case: Case) -> Recipe:
    import inspect

    from gpuprobe.worker.probes.nn import run as nn_run

    p = case.params
    dtype, backend, head_dim, seq, mask = p["dtype"], p["backend"], int(p["head_dim"]), int(p["seq"]), p["mask"]
    layout, backward, sampled_rows, tolerance = p["layout"], bool(p["backward"]), int(p["sampled_rows"]), float(p["tolerance"])
    designed_seq = seq
    run = nn_run.sdpa_case(case.seed, dtype, head_dim, seq, mask, backward, sampled_rows, case.device_type != "cpu")
    seq = run.seq
    c = {
        "shape": [run.batch, run.heads, seq, head_dim],
        "mask": mask,
        "causal": mask == "causal",
        "sampled_rows": sampled_rows,
        "seed": run.seed,
    }
    helpers = "\n\n\n".join(
        [
            "# Copied from gpuprobe (gpuprobe/worker/probes/nn/run.py): the probe's mask and its float64\n"
            "# attention, one (batch, head) at a time.\nimport math\nfrom typing import Any",
            inspect.getsource(nn_run._allowed_mask).rstrip(),
            inspect.getsource(nn_run._attention_reference).rstrip(),
            TOLERANCE_HELPERS.rstrip(),
        ]
    )
    forced = (
        "    from torch.nn.attention import SDPBackend, sdpa_kernel\n\n"
        f"    return sdpa_kernel([SDPBackend.{nn_run._BACKEND_NAMES[backend]}])"
        if backend != "default"
        else "    import contextlib\n\n    return contextlib.nullcontext()  # the backend PyTorch chooses"
    )
    body = f'''\
DTYPE_NAME = {dtype!r}
#: The attention backend the probe forced (``default``: PyTorch's choice).
BACKEND = {backend!r}
#: Inputs laid out as one packed (batch, seq, 3, heads, head_dim) tensor, as a fused QKV projection makes them.
NONCONTIG = {layout == "noncontig"!r}
BACKWARD = {backward!r}
#: The judge's bound (normwise relative error of the output and of each gradient).
TOLERANCE = {tolerance!r}
#: The case: (batch, heads, seq, head_dim){" (seq scaled down on a CPU from " + str(designed_seq) + ")" if seq != designed_seq else ""}, the mask,
#: query rows compared (0: all) and the seed of q, k, v and the output gradient.
CASES = [{c!r}]


def case_label(case):
    return f"scaled_dot_product_attention {{DTYPE_NAME}} on {{BACKEND}}, shape {{case['shape']}}, mask {{case['mask']}}" + (
        ", packed qkv" if NONCONTIG else "") + (", with gradients" if BACKWARD else "")


def backend_context():
{forced}


def build(case, device):
    dt = getattr(torch, DTYPE_NAME)
    gen = torch.Generator().manual_seed(case["seed"])
    q, k, v = (torch.randn(case["shape"], generator=gen, dtype=torch.float32).to(dt) for _ in range(3))
    grad = torch.randn(case["shape"], generator=gen, dtype=torch.float32).to(dt) if BACKWARD else None
    batch, _, seq, _ = case["shape"]
    rows = None
    if case["sampled_rows"]:
        picks = torch.randperm(seq, generator=gen)[: max(0, case["sampled_rows"] - 96)]
        edges = torch.cat([torch.arange(32), torch.arange(seq // 2 - 16, seq // 2 + 16), torch.arange(seq - 32, seq)])
        rows = torch.unique(torch.cat([picks, edges]))
    allowed = _allowed_mask(torch, case["mask"], batch, seq)
    reference = _attention_reference(torch, q, k, v, allowed, case["causal"], grad, rows)  # float64 on the CPU
    if NONCONTIG:
        packed = torch.stack([t.permute(0, 2, 1, 3) for t in (q, k, v)], dim=2).to(device, copy=True)
        dq, dk, dv = (packed[:, :, i].transpose(1, 2) for i in range(3))
    else:
        dq, dk, dv = (t.to(device, copy=True) for t in (q, k, v))
    if BACKWARD:
        for t in (dq, dk, dv):
            t.requires_grad_(True)
    dmask = None if allowed is None else allowed.to(device, copy=True)
    return {{"q": dq, "k": dk, "v": dv, "mask": dmask, "grad": None if grad is None else grad.to(device, copy=True),
            "rows": rows, "reference": reference}}


def run_case(case, inputs, device):
    """The attention under test on the forced backend (and its backward pass)."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    with backend_context():
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=inputs["mask"], is_causal=case["causal"])
        if BACKWARD:
            out.backward(inputs["grad"])
    return [out.detach()] + ([q.grad, k.grad, v.grad] if BACKWARD else [])


def check(case, inputs, result):
    """The output on the query rows that may attend to a key, and each gradient, against
    float64 on the CPU within the probe's tolerance."""
    reference = inputs["reference"]
    got = result[0].cpu()
    if inputs["rows"] is not None:
        got = got[:, :, inputs["rows"]]
    valid = reference["valid"].unsqueeze(-1).expand(got.shape)
    print(f"  output ({{int(valid.sum())}} of {{valid.numel()}} elements on rows that may attend):")
    ok = compare_tolerance(got[valid], reference["out"][valid], TOLERANCE)
    for name, grad, want in zip(("dq", "dk", "dv"), result[1:], reference["grads"] or []):
        print(f"  {{name}}:")
        if grad is None:
            print("  the backward pass produced no gradient")
            ok = False
            continue
        ok = compare_tolerance(grad, want, TOLERANCE) and ok
    return ok
'''
    return Recipe(
        summary=(
            f"One {dtype} scaled_dot_product_attention on the {backend} backend, shape {c['shape']}, mask {mask}"
            f"{', packed q/k/v' if layout == 'noncontig' else ''}{', with the q, k, v gradients' if backward else ''}, "
            "seeded normal inputs, against float64 attention on the CPU (fully masked rows not compared)."
        ),
        reference="float64 attention on the CPU from the same (rounded) inputs, one (batch, head) at a time",
        tolerance=f"normwise relative error <= {tolerance:.3g} for the output and each gradient (the judge's bound)",
        what=f"attention on the {backend} backend is wrong",
        helpers=helpers,
        body=body,
    )


RECIPES["gpuprobe.worker.probes.nn.run:run_sdpa"] = _sdpa
