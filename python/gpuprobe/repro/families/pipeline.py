"""pipeline family: the DataLoader probes (``pipeline_run``), the latent-cache dataset defined
in the script and every batch compared bit for bit, as it arrived and after the move.
"""

from __future__ import annotations

from gpuprobe.repro.families.base import Case, pattern_helpers
from gpuprobe.repro.script import BIT_EXACT_HELPERS, Recipe
from gpuprobe.worker import patterns


def _dataloader(case: Case) -> Recipe:
    from gpuprobe.worker.probes import pipeline_data, pipeline_run

    p = case.params
    workers, start_method, pin_memory = int(p["workers"]), p["start_method"], bool(p["pin_memory"])
    c = {"dataset_seed": case.derive("dataset"), "items": pipeline_run.ITEMS, "batch": pipeline_run.BATCH}
    loader_args = f"batch_size=case['batch'], shuffle=False, num_workers={workers}, pin_memory={pin_memory!r}"
    if workers:
        loader_args += f", multiprocessing_context={start_method!r}"
    body = f'''\
#: The probe's dataset: latent-cache items computed from a seed and the item index alone.
FIELDS = {pipeline_data.FIELDS!r}
CASES = [{c!r}]


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
        item = {{}}
        for name, (dtype, shape) in FIELDS.items():
            numel = 1
            for dim in shape:
                numel *= dim
            item[name] = pattern(torch, numel, dtype, derive_seed(self.seed, f"item{{index}}", name), shape)
        item["index"] = torch.tensor(index, dtype=torch.int64)
        return item


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


def check(case, inputs, result):
    """Every tensor of every batch, bit for bit against the dataset itself, as it arrived
    from the loader and after the move to the device."""
    dataset, ok = inputs["dataset"], True
    if len(result) * case["batch"] < case["items"]:
        print(f"  the loader yielded {{len(result)}} batches of {{case['batch']}}; {{case['items']}} items were expected")
        return False
    for number, (batch, moved) in enumerate(result):
        items = [dataset[i] for i in range(number * case["batch"], min(case["items"], (number + 1) * case["batch"]))]
        expected = {{name: torch.stack([item[name] for item in items]) for name in items[0]}}
        for stage, tensors in (("as it arrived from the loader", batch), ("after the move to the device", moved)):
            for name, value in tensors.items():
                if not bool(torch.equal(bits(value.cpu()), bits(expected[name]))):
                    print(f"  batch {{number}}, {{name}} {{stage}}:")
                    compare_bits(value.cpu(), expected[name])
                    ok = False
    if ok:
        print(f"  all {{len(result)}} batches identical to the dataset, on the host and on the device")
    return ok
'''
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
