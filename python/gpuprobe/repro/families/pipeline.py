"""pipeline family (``pipeline_run``): the DataLoader and Accelerate probes (the latent-cache
dataset defined in the script, every batch compared bit for bit as it arrived and on the
device) and the save/load probes (safetensors or ``torch.save``, reloaded onto the host and
the device).
"""

from __future__ import annotations

from gpuprobe.repro.families.base import Case, pattern_helpers
from gpuprobe.repro.script import BIT_EXACT_HELPERS, Recipe
from gpuprobe.worker import patterns


#: The probe's dataset (``pipeline_data.LatentDataset``) as the scripts define it.
_DATASET = '''#: The probe's dataset: latent-cache items computed from a seed and the item index alone.
FIELDS = @@FIELDS@@


class LatentDataset:
    """``length`` items, each a dict of tensors derived from ``seed`` and the item index
    (gpuprobe's pipeline dataset). Defined here, so DataLoader workers can unpickle it."""

    def __init__(self, length, seed):
        self.length = int(length)
        self.seed = int(seed)

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        import torch  # a spawned worker imports this file without running main()

        if not 0 <= index < self.length:
            raise IndexError(index)
        item = {}
        for name, (dtype, shape) in FIELDS.items():
            numel = 1
            for dim in shape:
                numel *= dim
            item[name] = pattern(torch, numel, dtype, derive_seed(self.seed, f"item{index}", name), shape)
        item["index"] = torch.tensor(index, dtype=torch.int64)
        return item
'''

#: Every batch against the dataset, as it arrived from the loader and after the move.
CHECK_BATCHES = '''def check(case, inputs, result):
    """Every tensor of every batch, bit for bit against the dataset itself, as it arrived
    from the loader and after the move to the device."""
    dataset, ok = inputs["dataset"], True
    if len(result) * case["batch"] < case["items"]:
        print(f"  the loader yielded {len(result)} batches of {case['batch']}; {case['items']} items were expected")
        return False
    for number, (batch, moved) in enumerate(result):
        items = [dataset[i] for i in range(number * case["batch"], min(case["items"], (number + 1) * case["batch"]))]
        expected = {name: torch.stack([item[name] for item in items]) for name in items[0]}
        for stage, tensors in (("as it arrived from the loader", batch), ("after the move to the device", moved)):
            for name, value in tensors.items():
                if not bool(torch.equal(bits(value.cpu()), bits(expected[name]))):
                    print(f"  batch {number}, {name} {stage}:")
                    compare_bits(value.cpu(), expected[name])
                    ok = False
    if ok:
        print(f"  all {len(result)} batches identical to the dataset, on the host and on the device")
    return ok
'''


def dataset_source() -> str:
    from gpuprobe.worker.probes.pipeline import data as pipeline_data

    return _DATASET.replace("@@FIELDS@@", repr(pipeline_data.FIELDS))


def _dataloader(case: Case) -> Recipe:
    from gpuprobe.worker.probes.pipeline import run as pipeline_run

    DATASET = dataset_source()
    p = case.params
    workers, start_method, pin_memory = int(p["workers"]), p["start_method"], bool(p["pin_memory"])
    c = {"dataset_seed": case.derive("dataset"), "items": pipeline_run.ITEMS, "batch": pipeline_run.BATCH}
    loader_args = f"batch_size=case['batch'], shuffle=False, num_workers={workers}, pin_memory={pin_memory!r}"
    if workers:
        loader_args += f", multiprocessing_context={start_method!r}"
    body = f'''\
{DATASET}
CASES = [{c!r}]


def case_label(case):
    return "DataLoader({loader_args.replace("case['batch']", str(pipeline_run.BATCH))})"


def build(case, device):
    from torch.utils.data import DataLoader

    dataset = LatentDataset(case["items"], case["dataset_seed"])
    loader = DataLoader(dataset, {loader_args})
    return {{"dataset": dataset, "loader": loader}}


def run_case(case, inputs, device):
    """The pipeline under test: iterate the loader and move every batch to the device, as a
    training loop does."""
    arrived = []
    for batch in inputs["loader"]:
        moved = {{name: value.to(device, non_blocking={pin_memory!r}) for name, value in batch.items()}}
        arrived.append((batch, moved))
    return arrived


{CHECK_BATCHES}'''
    helpers = pattern_helpers(patterns.BLOCK + 1) + "\n\n\n" + BIT_EXACT_HELPERS
    where = "in the main process" if not workers else f"in {workers} {start_method} worker processes"
    return Recipe(
        summary=(
            f"A DataLoader over the probe's latent-cache dataset (64 items, batches of 16, loaded {where}, "
            f"pin_memory={pin_memory}); every batch is moved to the device and compared bit for bit "
            "with the dataset, as it arrived and after the move."
        ),
        reference="the dataset itself, rebuilt from its seed (bit for bit)",
        tolerance="none: bit-exact",
        what="DataLoader batches differ from the dataset",
        helpers=helpers,
        body=body,
    )


def _save_load(case: Case) -> Recipe:
    from gpuprobe.worker.probes.pipeline import run as pipeline_run

    fmt, large = case.params["fmt"], bool(case.params["large"])
    shapes = {name: (d, list(shape)) for name, (d, shape) in pipeline_run.save_load_tensors(large).items()}
    tensors = {name: {"dtype": d, "shape": shape, "seed": case.derive(name)} for name, (d, shape) in shapes.items()}
    largest = max(pipeline_run._numel(tuple(t["shape"])) for t in tensors.values())
    if fmt == "safetensors":
        imports = "    from safetensors.torch import load_file, save_file\n"
        save, load = "save_file(inputs['on_device'], path)", "load_file(path, device=target)"
        needs = ["torch", "safetensors"]
    else:
        imports = ""
        save = "torch.save(inputs['on_device'], path)"
        load = "torch.load(path, map_location=target, weights_only=True)"
        needs = ["torch"]
    body = f'''\
import os
import tempfile

FORMAT = {fmt!r}
#: The probe's tensors: dtype, shape and the seed of their pattern.
TENSORS = {tensors!r}
CASES = [{{"tensors": TENSORS}}]


def case_label(case):
    return f"{{FORMAT}}: save {{len(case['tensors'])}} tensors from the device, reload onto the host and the device"


def build(case, device):
    refs = {{}}
    for name, t in case["tensors"].items():
        numel = 1
        for d in t["shape"]:
            numel *= d
        refs[name] = pattern(torch, numel, t["dtype"], t["seed"], tuple(t["shape"]))
    on_device = {{name: ref.to(device, copy=True) for name, ref in refs.items()}}
    sync(device)
    return {{"refs": refs, "on_device": on_device, "dir": tempfile.mkdtemp(prefix="repro-save-")}}


def run_case(case, inputs, device):
    """The save from the device and the reloads under test."""
{imports}    path = os.path.join(inputs["dir"], "tensors." + ("safetensors" if FORMAT == "safetensors" else "pt"))
    {save}
    loaded = {{}}
    for target in dict.fromkeys(("cpu", str(device))):
        loaded[target] = {load}
        sync(device)
    os.remove(path)
    os.rmdir(inputs["dir"])
    return loaded


def check(case, inputs, result):
    """Every tensor as reloaded onto each target, bit for bit against what was saved."""
    ok = True
    for target, tensors in result.items():
        for name, ref in inputs["refs"].items():
            print(f"  {{name}} reloaded onto {{target}}:")
            ok = compare_bits(tensors[name].cpu(), ref) and ok
    return ok
'''
    what = "safetensors (save_file / load_file)" if fmt == "safetensors" else "torch.save / torch.load(weights_only=True)"
    return Recipe(
        summary=(
            f"The probe's tensors ({', '.join(f'{n}: {t[0]} {tuple(t[1])}' for n, t in shapes.items())}) written from "
            f"the device with {what}, reloaded onto the host and onto the device, compared bit for bit."
        ),
        reference="the tensors that were saved (bit for bit)",
        tolerance="none: bit-exact",
        what=f"tensors reloaded through {fmt} differ from what was saved",
        helpers=pattern_helpers(largest) + "\n\n\n" + BIT_EXACT_HELPERS,
        body=body,
        needs=needs,
    )


def _accelerate(case: Case) -> Recipe:
    from gpuprobe.worker.probes.pipeline import run as pipeline_run

    placement = bool(case.params["device_placement"])
    c = {"dataset_seed": case.derive("dataset"), "items": pipeline_run.ITEMS, "batch": pipeline_run.BATCH}
    move = "batch" if placement else "{name: value.to(device) for name, value in batch.items()}"
    body = f'''\
{dataset_source()}
#: Batches arrive on the device (device_placement=True), or on the host and are moved.
DEVICE_PLACEMENT = {placement!r}
CASES = [{c!r}]


def case_label(case):
    return f"accelerator.prepare(DataLoader(batch_size={{case['batch']}}), device_placement=[{{DEVICE_PLACEMENT}}])"


def build(case, device):
    from accelerate import Accelerator
    from torch.utils.data import DataLoader

    os.environ["ACCELERATE_TORCH_DEVICE"] = str(device)  # the device under test, not the current one
    accelerator = Accelerator(cpu=torch.device(device).type == "cpu")
    dataset = LatentDataset(case["items"], case["dataset_seed"])
    loader = DataLoader(dataset, batch_size=case["batch"], shuffle=False, num_workers=0)
    prepared = accelerator.prepare(loader, device_placement=[DEVICE_PLACEMENT])
    return {{"dataset": dataset, "loader": prepared}}


def run_case(case, inputs, device):
    """The prepared loader under test: every batch as it arrives, and on the device."""
    arrived = []
    for batch in inputs["loader"]:
        arrived.append((batch, {move}))
    return arrived


{CHECK_BATCHES}'''
    return Recipe(
        summary=(
            "An Accelerate-prepared DataLoader over the probe's latent-cache dataset (64 items, batches of 16, "
            f"device_placement={placement}); every batch is compared bit for bit with the dataset, as it arrived "
            "and on the device."
        ),
        reference="the dataset itself, rebuilt from its seed (bit for bit)",
        tolerance="none: bit-exact",
        what="batches of the Accelerate-prepared loader differ from the dataset",
        helpers=pattern_helpers(patterns.BLOCK + 1) + "\n\n\n" + BIT_EXACT_HELPERS,
        body=body,
        needs=["torch", "accelerate"],
    )


def _send_to_device(case: Case) -> Recipe:
    from gpuprobe.worker.probes.pipeline import run as pipeline_run

    c = {"dataset_seed": case.derive("dataset"), "items": pipeline_run.BATCH}
    body = f'''\
{dataset_source()}
CASES = [{c!r}]


def case_label(case):
    return f"accelerate.utils.send_to_device of one batch of {{case['items']}} latent-cache items"


def build(case, device):
    dataset = LatentDataset(case["items"], case["dataset_seed"])
    items = [dataset[i] for i in range(case["items"])]
    ref = {{name: torch.stack([item[name] for item in items]) for name in items[0]}}
    return {{"ref": ref, "source": {{name: value.clone() for name, value in ref.items()}}}}


def run_case(case, inputs, device):
    """Accelerate's send_to_device (non_blocking on a GPU, as the probe calls it)."""
    from accelerate.utils import send_to_device

    return send_to_device(inputs["source"], device, non_blocking=torch.device(device).type != "cpu")


def check(case, inputs, result):
    """Every tensor on the device, bit for bit against the batch that was sent."""
    sync(DEVICE)
    ok = True
    for name, want in inputs["ref"].items():
        print(f"  {{name}}:")
        ok = compare_bits(result[name].cpu(), want) and ok
    return ok
'''
    return Recipe(
        summary=(
            "One batch of the probe's latent-cache dataset (a dict of tensors) moved with Accelerate's "
            "send_to_device (non_blocking on a GPU); every tensor compared bit for bit."
        ),
        reference="the batch that was sent (bit for bit)",
        tolerance="none: bit-exact",
        what="a tensor moved by send_to_device arrived wrong",
        helpers=pattern_helpers(patterns.BLOCK + 1) + "\n\n\n" + BIT_EXACT_HELPERS,
        body=body,
        needs=["torch", "accelerate"],
    )


RECIPES = {
    "gpuprobe.worker.probes.pipeline.run:run_dataloader": _dataloader,
    "gpuprobe.worker.probes.pipeline.run:run_save_load": _save_load,
    "gpuprobe.worker.probes.pipeline.run:run_accelerate": _accelerate,
    "gpuprobe.worker.probes.pipeline.run:run_send_to_device": _send_to_device,
}
