"""The guard callbacks in real training runs on the CPU: a few steps of a tiny model per
library, healthy, with a batch that arrives as zeros (a dataset that zeroes one batch) and
with a parameter that turns to NaN (a forward hook that poisons it)."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import pytest
import torch

from gpuprobe import guard

# Lightning's own deprecation notice about torch's pytree, not ours.
pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec:FutureWarning")

BATCH = 4
FEATURES = 8


class Rows(torch.utils.data.Dataset):
    """Regression rows; the rows of batch ``zero_batch`` (unshuffled) are all zeros."""

    def __init__(self, n: int = 32, zero_batch: int | None = None, as_dict: bool = False) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, FEATURES, generator=generator) + 3.0
        self.y = self.x.sum(dim=1)
        self.zero_batch = zero_batch
        self.as_dict = as_dict

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> Any:
        x, y = self.x[index], self.y[index]
        if self.zero_batch is not None and index // BATCH == self.zero_batch:
            x, y = torch.zeros_like(x), torch.zeros_like(y)
        return {"x": x, "labels": y} if self.as_dict else (x, y)


def poison_after(module: torch.nn.Module, calls: int) -> Any:
    """A forward pre-hook that fills ``module.weight`` with NaN from its ``calls``-th call on."""
    seen = {"n": 0}

    def hook(mod: torch.nn.Module, args: Any) -> None:
        seen["n"] += 1
        if seen["n"] >= calls:
            with torch.no_grad():
                mod.weight.fill_(float("nan"))

    return module.register_forward_pre_hook(hook)


def nan_issue(err: guard.GuardError, path_end: str) -> guard.GuardIssue:
    matching = [i for i in err.issues if i.path.endswith(path_end) and i.fail_class == "nan_inf"]
    assert matching, err.issues
    return matching[0]


# -- PyTorch Lightning ------------------------------------------------------------------------


def lightning_run(namespace: str, tmp_path: Any, callback: Any, dataset: Rows, poison: int | None = None) -> Any:
    pl = pytest.importorskip(namespace)

    class Regressor(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(FEATURES, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x).squeeze(-1), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=1e-3)

    module = Regressor()
    if poison is not None:
        poison_after(module.layer, poison)
    trainer = pl.Trainer(
        max_steps=6,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        callbacks=[callback],
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=False)
    trainer.fit(module, loader)
    return trainer


@pytest.mark.parametrize("namespace", ["lightning", "pytorch_lightning"])
def test_lightning_callback(namespace: str, tmp_path: Any) -> None:
    pytest.importorskip(namespace)
    callbacks = importlib.import_module(
        "gpuprobe.callbacks.lightning" if namespace == "lightning" else "gpuprobe.callbacks.pytorch_lightning"
    )
    healthy = callbacks.GuardCallback(every=2)
    trainer = lightning_run(namespace, tmp_path, healthy, Rows())
    assert trainer.global_step == 6 and healthy.watch is not None and healthy.watch.checks == 3

    with pytest.raises(guard.GuardError) as caught:
        lightning_run(namespace, tmp_path, callbacks.GuardCallback(every=2), Rows(zero_batch=2))
    assert [(i.path, i.fail_class) for i in caught.value.issues] == [("batch[0]", "all_zeros"), ("batch[1]", "all_zeros")]
    assert caught.value.issues[0].where == "after batch_to_device (train batch 2)"

    with pytest.raises(guard.GuardError) as caught:
        lightning_run(namespace, tmp_path, callbacks.GuardCallback(every=2), Rows(), poison=3)
    assert nan_issue(caught.value, "layer.weight").where == "at step 4"

    with pytest.warns(guard.GuardWarning, match="all_zeros"):
        trainer = lightning_run(namespace, tmp_path, callbacks.GuardCallback(mode="warn"), Rows(zero_batch=1))
    assert trainer.global_step == 6


def test_lightning_picks_its_installed_namespace() -> None:
    pytest.importorskip("lightning")
    import lightning.pytorch

    from gpuprobe.callbacks.lightning import GuardCallback

    assert issubclass(GuardCallback, lightning.pytorch.Callback)


# -- Hugging Face Trainer ---------------------------------------------------------------------


class TinyRegressor(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(FEATURES, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
        out = self.layer(x).squeeze(-1)
        loss = torch.nn.functional.mse_loss(out, labels) if labels is not None else None
        return {"loss": loss, "logits": out}


def hf_run(tmp_path: Any, callback: Any, dataset: Rows, poison: int | None = None) -> Any:
    transformers = pytest.importorskip("transformers")
    model = TinyRegressor()
    if poison is not None:
        poison_after(model.layer, poison)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        max_steps=6,
        per_device_train_batch_size=BATCH,
        learning_rate=1e-3,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        remove_unused_columns=False,
        dataloader_num_workers=0,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=dataset, callbacks=[callback])
    # An unshuffled sampler, so that the zeroed rows make one whole batch.
    trainer._get_train_sampler = lambda *a, **k: torch.utils.data.SequentialSampler(dataset)
    trainer.train()
    return trainer


def test_huggingface_trainer_callback(tmp_path: Any) -> None:
    pytest.importorskip("transformers")
    from gpuprobe.callbacks.huggingface import GuardTrainerCallback

    healthy = GuardTrainerCallback(every=2)
    trainer = hf_run(tmp_path, healthy, Rows(as_dict=True))
    assert trainer.state.global_step == 6 and healthy.forwards == 6 and healthy.watch.checks == 3
    assert healthy._hook is None  # removed when training ended

    with pytest.raises(guard.GuardError) as caught:
        hf_run(tmp_path, GuardTrainerCallback(every=2), Rows(zero_batch=2, as_dict=True))
    paths = {i.path: i for i in caught.value.issues}
    assert set(paths) == {'inputs["x"]', 'inputs["labels"]'}
    assert paths['inputs["x"]'].fail_class == "all_zeros" and paths['inputs["x"]'].where == "after _prepare_inputs (forward 3)"

    with pytest.raises(guard.GuardError) as caught:
        hf_run(tmp_path, GuardTrainerCallback(every=2), Rows(as_dict=True), poison=3)
    assert nan_issue(caught.value, "layer.weight").where == "at step 4"

    with pytest.warns(guard.GuardWarning, match="all_zeros"):
        trainer = hf_run(tmp_path, GuardTrainerCallback(mode="warn"), Rows(zero_batch=0, as_dict=True))
    assert trainer.state.global_step == 6


# -- Accelerate -------------------------------------------------------------------------------


def accelerate_run(dataset: Rows, poison: int | None = None, mode: str = "raise") -> tuple:
    accelerate = pytest.importorskip("accelerate")
    from gpuprobe.callbacks import accelerate as gpa

    accelerator = accelerate.Accelerator(cpu=True)
    model = TinyRegressor()
    if poison is not None:
        poison_after(model.layer, poison)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=False)
    model, optimizer, loader = gpa.prepare(accelerator, model, optimizer, loader, mode=mode)
    assert isinstance(loader, gpa.GuardedDataLoader) and len(loader) == len(dataset) // BATCH
    watch = guard.watch(model, every=2, mode=mode)
    steps = 0
    for batch in loader:
        loss = model(**batch)["loss"]
        accelerator.backward(loss)
        watch.step()
        optimizer.step()
        optimizer.zero_grad()
        steps += 1
    return steps, loader, watch


def test_accelerate_prepare_guards_batches(tmp_path: Any) -> None:
    steps, loader, watch = accelerate_run(Rows(as_dict=True))
    assert steps == 8 and loader.batches == 8 and watch.checks == 4

    with pytest.raises(guard.GuardError) as caught:
        accelerate_run(Rows(zero_batch=3, as_dict=True))
    issue = caught.value.issues[0]
    assert issue.path == 'batch["x"]' and issue.fail_class == "all_zeros"
    assert issue.where == "after accelerator.prepare (batch 3)"

    with pytest.raises(guard.GuardError) as caught:
        accelerate_run(Rows(as_dict=True), poison=3)
    assert nan_issue(caught.value, "layer.weight").where == "at step 4"

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        steps, _, _ = accelerate_run(Rows(zero_batch=1, as_dict=True), mode="warn")
    assert steps == 8 and any(issubclass(w.category, guard.GuardWarning) for w in seen)
