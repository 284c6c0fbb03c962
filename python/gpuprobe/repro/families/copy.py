"""copy family: host/device transfers, tiny copies, device-to-device copies and round trips
(``copy_run``), rebuilt from the probe's input pattern and compared bit for bit.
"""

from __future__ import annotations

import math

from gpuprobe.repro.families.base import Case, canary_helpers, pattern_helpers
from gpuprobe.repro.script import BIT_EXACT_HELPERS, Recipe


def _transfer(case: Case) -> Recipe:
    from gpuprobe.worker.probes.copy import run as copy_run

    p = case.params
    direction, memory, method, nb, dtype = p["direction"], p["memory"], p["method"], p["non_blocking"], p["dtype"]
    shapes = [tuple(s) for s in p["shapes"]]
    chosen = case.chosen(len(shapes), "copy")
    cases = [{"trial": t, "shape": shapes[t], "seed": case.derive(copy_run.trial_tag(t))} for t in chosen]
    largest = max(math.prod(c["shape"]) for c in cases)
    pinned = memory == "pinned"
    canary = method == "copy_"
    needs = ["torch", "numpy"] if method == "numpy" else ["torch"]
    host = "ref.pin_memory()" if pinned else "ref.clone()"
    if direction == "h2d":
        build = [f"    src = {host}  # {memory} host memory"]
        if method == "numpy":
            build = ["    src = ref.numpy().copy()  # a numpy array"]
        if canary:
            build.append(
                "    out = fill_canary(torch, torch.empty(case['shape'], dtype=DTYPE, device=device))  # destination"
            )
        call = {
            "to": "inputs['src'].to(device, non_blocking=NON_BLOCKING)",
            "cuda": "inputs['src'].cuda(device, non_blocking=NON_BLOCKING)",
            "copy_": "inputs['out'].copy_(inputs['src'], non_blocking=NON_BLOCKING)",
            "numpy": "torch.from_numpy(inputs['src']).to(device, non_blocking=NON_BLOCKING)",
        }[method]
        what = "host-to-device copy"
    else:
        build = ["    on_device = ref.to(device, copy=True)  # staged on the device"]
        if canary:
            build.append(
                "    out = fill_canary(torch, torch.empty(case['shape'], dtype=DTYPE"
                + (", pin_memory=True" if pinned else "")
                + "))  # host destination"
            )
        call = {
            "cpu": "inputs['on_device'].to('cpu', non_blocking=True)"
            if nb
            else "inputs['on_device'].cpu()",
            "to": "inputs['on_device'].to('cpu', non_blocking=NON_BLOCKING)",
            "copy_": "inputs['out'].copy_(inputs['on_device'], non_blocking=NON_BLOCKING)",
            "numpy": "torch.from_numpy(inputs['on_device'].cpu().numpy())",
        }[method]
        what = "device-to-host copy"
    build_text = "\n".join(build)
    outputs = "'out': out, " if canary else ""
    keys = "'src': src" if direction == "h2d" else "'on_device': on_device"
    body = f'''\
DTYPE_NAME = {dtype!r}
NON_BLOCKING = {nb!r}
#: The failing copy: its shape and the seed of its data (trial {chosen[0]} of the probe's {len(shapes)}).
CASES = {cases!r}


def case_label(case):
    return f"{{DTYPE_NAME}} {{'x'.join(map(str, case['shape']))}}, pattern seed {{case['seed']}}"


def build(case, device):
    global DTYPE
    DTYPE = getattr(torch, DTYPE_NAME)
    numel = 1
    for d in case["shape"]:
        numel *= d
    ref = pattern(torch, numel, DTYPE_NAME, case["seed"], tuple(case["shape"]))
{build_text}
    return {{"ref": ref, {outputs}{keys}}}


def run_case(case, inputs, device):
    """The copy under test."""
    return {call}


def check(case, inputs, result):
    """Bit for bit against the host data that was copied."""
    return compare_bits(result.cpu(), inputs["ref"])
'''
    helpers = pattern_helpers(largest) + ("\n\n\n" + canary_helpers() if canary else "") + "\n\n\n" + BIT_EXACT_HELPERS
    readable = (
        call.replace("inputs['src']", "src")
        .replace("inputs['out']", "dst")
        .replace("inputs['on_device']", "t")
        .replace("NON_BLOCKING", repr(nb))
    )
    summary = (
        f"One {'pinned' if pinned else 'pageable'} {what} of a {dtype} tensor of shape "
        f"{'x'.join(map(str, shapes[chosen[0]]))} with `{readable}`, compared bit for bit with the data that was sent."
    )
    return Recipe(
        summary=summary,
        reference="the host data that was copied (bit for bit)",
        tolerance="none: bit-exact",
        what=f"the {what} returned wrong data",
        helpers=helpers,
        body=body,
        needs=needs,
    )


def _tiny(case: Case) -> Recipe:
    from gpuprobe.worker.probes.copy import run as copy_run

    p = case.params
    direction, memory, nb = p["direction"], p["memory"], p["non_blocking"]
    count = p["threads"] * p["iterations"]
    sizes = copy_run.tiny_sizes(count)
    total = sum(sizes)
    # A crash or hang: the first copy (each is a fresh allocation of its own).
    trial = case.chosen(count, "tiny copy")[0]
    offset = sum(sizes[:trial])
    pinned = memory == "pinned"
    c = {"copy": trial, "offset": offset, "elements": sizes[trial], "total": total, "seed": case.derive("data")}
    if direction == "h2d":
        build = "    src = piece.pin_memory() if PINNED else piece.clone()  # a fresh host allocation"
        call = "inputs['src'].to(device, non_blocking=NON_BLOCKING)"
        keys = "'src': src"
        what = "host-to-device copy"
    else:
        build = (
            "    src = ref.to(device, copy=True)[case['offset'] : case['offset'] + case['elements']]\n"
            "    out = fill_canary(torch, torch.empty(case['elements'], dtype=torch.float32, pin_memory=PINNED))"
            if (nb or pinned)
            else "    src = ref.to(device, copy=True)[case['offset'] : case['offset'] + case['elements']]\n    out = None"
        )
        call = (
            "inputs['out'].copy_(inputs['src'], non_blocking=NON_BLOCKING)"
            if (nb or pinned)
            else "inputs['src'].cpu()"
        )
        keys = "'src': src, 'out': out"
        what = "device-to-host copy"
    body = f'''\
PINNED = {pinned!r}
NON_BLOCKING = {nb!r}
#: The failing copy: copy number {trial} of the probe's {count} tiny copies ({c["elements"]} float32
#: elements at offset {offset} of one {total}-element pattern).
CASES = [{c!r}]


def case_label(case):
    return f"copy {{case['copy']}}: {{case['elements']}} float32 elements ({{4 * case['elements']}} bytes)"


def build(case, device):
    ref = pattern(torch, case["total"], "float32", case["seed"])
    piece = ref[case["offset"] : case["offset"] + case["elements"]]
{build}
    return {{"ref": piece.clone(), {keys}}}


def run_case(case, inputs, device):
    """The tiny copy under test."""
    return {call}


def check(case, inputs, result):
    """Bit for bit against the host data that was copied."""
    return compare_bits(result.cpu(), inputs["ref"])
'''
    helpers = pattern_helpers(total)
    if direction == "d2h" and (nb or pinned):
        helpers += "\n\n\n" + canary_helpers()
    helpers += "\n\n\n" + BIT_EXACT_HELPERS
    return Recipe(
        summary=(
            f"One tiny ({4 * c['elements']} B) {memory} {what} (non_blocking={nb}), the copy that "
            f"failed among the probe's {count}, compared bit for bit."
        ),
        reference="the host data that was copied (bit for bit)",
        tolerance="none: bit-exact",
        what=f"the tiny {what} returned wrong data",
        helpers=helpers,
        body=body,
    )


def _d2d(case: Case) -> Recipe:
    from gpuprobe.worker.probes.copy import run as copy_run

    p = case.params
    method, dtype = p["method"], p["dtype"]
    shapes = [tuple(s) for s in p["shapes"]]
    chosen = case.chosen(len(shapes), "copy")
    cases = [{"trial": t, "shape": shapes[t], "seed": case.derive(copy_run.trial_tag(t))} for t in chosen]
    largest = max(math.prod(c["shape"]) for c in cases)
    call = "inputs['on_device'].clone()" if method == "clone" else "inputs['out'].copy_(inputs['on_device'])"
    out_line = (
        "    out = fill_canary(torch, torch.empty(case['shape'], dtype=getattr(torch, DTYPE_NAME), device=device))"
        if method == "copy_"
        else "    out = None"
    )
    body = f'''\
DTYPE_NAME = {dtype!r}
CASES = {cases!r}


def case_label(case):
    return f"{{DTYPE_NAME}} {{'x'.join(map(str, case['shape']))}}, pattern seed {{case['seed']}}"


def build(case, device):
    numel = 1
    for d in case["shape"]:
        numel *= d
    ref = pattern(torch, numel, DTYPE_NAME, case["seed"], tuple(case["shape"]))
    on_device = ref.to(device, copy=True)
{out_line}
    return {{"ref": ref, "on_device": on_device, "out": out}}


def run_case(case, inputs, device):
    """The device-to-device copy under test."""
    return {call}


def check(case, inputs, result):
    """Bit for bit against the data that was on the device."""
    return compare_bits(result.cpu(), inputs["ref"])
'''
    helpers = pattern_helpers(largest)
    if method == "copy_":
        helpers += "\n\n\n" + canary_helpers()
    helpers += "\n\n\n" + BIT_EXACT_HELPERS
    return Recipe(
        summary=f"One device-to-device copy ({method}) of a {dtype} tensor, compared bit for bit.",
        reference="the data that was on the device (bit for bit)",
        tolerance="none: bit-exact",
        what="the device-to-device copy returned wrong data",
        helpers=helpers,
        body=body,
    )


def _roundtrip(case: Case) -> Recipe:
    p = case.params
    memory, numel, dtype, nb = p["memory"], p["numel"], p["dtype"], p["non_blocking"]
    pinned = memory == "pinned"
    c = {"elements": numel, "seed": case.derive("data")}
    body = f'''\
DTYPE_NAME = {dtype!r}
PINNED = {pinned!r}
NON_BLOCKING = {nb!r}
CASES = [{c!r}]


def case_label(case):
    return f"{{case['elements']}} {{DTYPE_NAME}} elements, {{'pinned' if PINNED else 'pageable'}}, pattern seed {{case['seed']}}"


def build(case, device):
    src = pattern(torch, case["elements"], DTYPE_NAME, case["seed"])
    if PINNED:
        src = src.pin_memory()
    back = fill_canary(torch, torch.empty(case["elements"], dtype=src.dtype, pin_memory=PINNED))
    return {{"src": src, "back": back}}


def run_case(case, inputs, device):
    """Host to device, then device to host into a prefilled host buffer, with no
    synchronization in between."""
    moved = inputs["src"].to(device, non_blocking=NON_BLOCKING)
    return inputs["back"].copy_(moved, non_blocking=NON_BLOCKING)


def check(case, inputs, result):
    """Bit for bit against the data that was sent."""
    return compare_bits(result, inputs["src"])
'''
    return Recipe(
        summary=(
            f"A {memory} round trip of {numel} {dtype} elements: t.to(device) then host.copy_(t) "
            f"(non_blocking={nb}), compared bit for bit with what was sent."
        ),
        reference="the host data that was sent (bit for bit)",
        tolerance="none: bit-exact",
        what="the round trip returned wrong data",
        helpers=pattern_helpers(numel) + "\n\n\n" + canary_helpers() + "\n\n\n" + BIT_EXACT_HELPERS,
        body=body,
    )


def _reuse(case: Case) -> Recipe:
    from gpuprobe.worker.probes.copy import run as copy_run

    p = case.params
    memory, nb, trials, numel = p["memory"], bool(p["non_blocking"]), int(p["trials"]), int(p["numel"])
    pinned = memory == "pinned"
    # Every copy up to the failing one: whether a copy replaces the last one depends on the
    # copies before it.
    last = case.chosen(trials, "copy")[-1]
    cases = [{"trial": t, "seed": case.derive(copy_run.trial_tag(t))} for t in range(last + 1)]
    body = f'''\
PINNED = {pinned!r}
NON_BLOCKING = {nb!r}
NUMEL = {numel!r}
#: The probe's copies into one device buffer, up to the one that failed (trial {last} of {trials}).
CASES = {cases!r}
#: The one device buffer every copy writes into (filled with the canary first).
DESTINATION = None


def case_label(case):
    return f"copy {{case['trial']}} of new data into the same device buffer ({{NUMEL}} float32, pattern seed {{case['seed']}})"


def build(case, device):
    global DESTINATION
    if DESTINATION is None:
        DESTINATION = fill_canary(torch, torch.empty(NUMEL, dtype=torch.float32, device=device))
    ref = pattern(torch, NUMEL, "float32", case["seed"])
    return {{"ref": ref, "src": ref.pin_memory() if PINNED else ref.clone()}}


def run_case(case, inputs, device):
    """One copy into the reused buffer."""
    return DESTINATION.copy_(inputs["src"], non_blocking=NON_BLOCKING)


def check(case, inputs, result):
    """The buffer holds this copy's data, bit for bit (not the previous copy's)."""
    return compare_bits(result.cpu(), inputs["ref"])
'''
    return Recipe(
        summary=(
            f"{last + 1} successive {memory} host-to-device dst.copy_(src) of new data into one device buffer "
            f"(non_blocking={nb}), up to the copy that failed; each must replace the last, compared bit for bit."
        ),
        reference="the host data of each copy (bit for bit)",
        tolerance="none: bit-exact",
        what="a copy into a reused device buffer did not replace its contents",
        helpers=pattern_helpers(numel) + "\n\n\n" + canary_helpers() + "\n\n\n" + BIT_EXACT_HELPERS,
        body=body,
    )


def _batch(case: Case) -> Recipe:
    p = case.params
    memory, nb = p["memory"], bool(p["non_blocking"])
    pinned = memory == "pinned"
    fields = {
        "latents": ("bfloat16", [16, 1, 64, 64]),
        "text_embeds": ("float16", [1, 77, 768]),
        "pixel_values": ("float32", [2, 3, 64, 64]),
        "timesteps": ("int64", [16]),
        "attention_mask": ("bool", [16, 77]),
        "guidance_scale": ("float32", []),
        "ids0": ("int64", [8]),
        "ids1": ("int64", [3]),
    }
    seeds = {name: case.derive(name) for name in fields}
    largest = max(math.prod(shape) for _, shape in fields.values())
    body = f'''\
PINNED = {pinned!r}
NON_BLOCKING = {nb!r}
#: The probe's batch: each tensor's dtype and shape, and the seed of its pattern.
FIELDS = {fields!r}
SEEDS = {seeds!r}
CASES = [{{"fields": FIELDS}}]


def case_label(case):
    return f"a dict batch of {{len(FIELDS)}} tensors moved with t.to(device, non_blocking={{NON_BLOCKING}}), {{'pinned' if PINNED else 'pageable'}}"


def make(name):
    dtype, shape = FIELDS[name]
    numel = 1
    for d in shape:
        numel *= d
    return pattern(torch, max(1, numel), dtype, SEEDS[name], tuple(shape))


def build(case, device):
    batch = {{
        "latents": make("latents"), "text_embeds": make("text_embeds"), "pixel_values": make("pixel_values"),
        "timesteps": make("timesteps"), "attention_mask": make("attention_mask"), "guidance_scale": make("guidance_scale"),
        "extra": {{"ids": [make("ids0"), make("ids1")], "caption": "a photo"}},
    }}
    source = map_tensors(batch, lambda t: t.pin_memory()) if PINNED else batch
    return {{"batch": batch, "source": source}}


def map_tensors(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {{k: map_tensors(v, fn) for k, v in obj.items()}}
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tensors(v, fn) for v in obj)
    return obj


def leaves(obj, path=""):
    if isinstance(obj, dict):
        return [leaf for k, v in obj.items() for leaf in leaves(v, f"{{path}}.{{k}}" if path else str(k))]
    if isinstance(obj, (list, tuple)):
        return [leaf for i, v in enumerate(obj) for leaf in leaves(v, f"{{path}}[{{i}}]")]
    return [(path, obj)]


def run_case(case, inputs, device):
    """The batch moved recursively, as a training loop (or Accelerate's send_to_device) does."""
    return map_tensors(inputs["source"], lambda t: t.to(device, non_blocking=NON_BLOCKING))


def check(case, inputs, result):
    """Every tensor of the batch, bit for bit; the other values unchanged."""
    ok = True
    expected, found = leaves(inputs["batch"]), leaves(result)
    if [p for p, _ in expected] != [p for p, _ in found]:
        print(f"  the batch's structure changed: {{[p for p, _ in found]}}")
        return False
    for (path, want), (_, got) in zip(expected, found):
        if not isinstance(want, torch.Tensor):
            if want != got:
                print(f"  {{path}}: {{got!r}}, expected {{want!r}}")
                ok = False
            continue
        print(f"  {{path}}:")
        ok = compare_bits(got.cpu(), want) and ok
    return ok
'''
    return Recipe(
        summary=(
            f"A dict batch of bfloat16, float16, float32, int64 and bool tensors (the probe's shapes and patterns), "
            f"{memory}, moved recursively with t.to(device, non_blocking={nb}); every tensor compared bit for bit."
        ),
        reference="the host batch (bit for bit)",
        tolerance="none: bit-exact",
        what="a tensor of the batch arrived wrong",
        helpers=pattern_helpers(largest) + "\n\n\n" + BIT_EXACT_HELPERS,
        body=body,
    )
