"""gpuprobe.guard on CPU tensors: the classes, the paths, the host-copy sampling, watch()."""

from __future__ import annotations

import warnings

import pytest
import torch

from gpuprobe import guard


def healthy_batch() -> dict:
    torch.manual_seed(0)
    return {
        "input_ids": torch.arange(1, 33).reshape(4, 8),
        "token_type_ids": torch.zeros(4, 8, dtype=torch.long),
        "mask": torch.zeros(4, 8, dtype=torch.bool),
        "features": [torch.randn(4, 16), (torch.randn(4, 3).half(), "not a tensor")],
        "step": 3,
    }


def host_copy(batch: dict) -> dict:
    def clone(x):
        if isinstance(x, torch.Tensor):
            return x.clone()
        if isinstance(x, dict):
            return {k: clone(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(clone(v) for v in x)
        return x

    return clone(batch)


def warned(*args, **kwargs) -> list:
    """``guard.tensors`` in warn mode, asserting that it warned."""
    with pytest.warns(guard.GuardWarning):
        return guard.tensors(*args, mode="warn", **kwargs)


def test_healthy_batch_passes_with_and_without_host_copy() -> None:
    batch = healthy_batch()
    assert guard.tensors(batch, where="after .to()") == []
    assert guard.tensors(batch, where="after .to()", host_copy=host_copy(batch)) == []


def test_all_zeros_names_the_path_and_where() -> None:
    batch = healthy_batch()
    batch["input_ids"] = torch.zeros(4, 8, dtype=torch.long)
    with pytest.raises(guard.GuardError) as caught:
        guard.tensors(batch, where="after .to()")
    (issue,) = caught.value.issues
    assert issue.path == 'batch["input_ids"]' and issue.where == "after .to()"
    assert issue.fail_class == "all_zeros" and issue.detail == "all 32 elements are zero"
    assert issue.dtype == "int64" and issue.shape == (4, 8) and issue.device == "cpu"
    assert 'batch["input_ids"] after .to(): all_zeros' in str(caught.value)


def test_zeros_that_are_normal_are_left_alone() -> None:
    # token_type_ids and bool masks are zero in healthy batches; so is a host copy of zeros.
    zeros = torch.zeros(5, 5)
    assert guard.tensors({"x": zeros}, host_copy={"x": zeros.clone()}) == []
    assert guard.tensors({"x": zeros}, zeros_ok=["*x*"]) == []
    assert guard.tensors({"x": zeros}, zeros=False) == []
    assert guard.tensors(torch.zeros(1)) == []
    with pytest.raises(guard.GuardError):
        guard.tensors({"token_type_ids": zeros}, zeros_ok=())


def test_nan_and_inf_in_nested_containers() -> None:
    batch = healthy_batch()
    batch["features"][0][2, 5] = float("nan")
    batch["features"][1][0][1, 1] = float("-inf")
    with pytest.raises(guard.GuardError) as caught:
        guard.tensors(batch, where="after .to()")
    paths = {i.path: i for i in caught.value.issues}
    assert set(paths) == {'batch["features"][0]', 'batch["features"][1][0]'}
    assert all(i.fail_class == "nan_inf" for i in paths.values())
    assert "max |x| = nan" in paths['batch["features"][0]'].detail
    assert "max |x| = inf" in paths['batch["features"][1][0]'].detail
    assert guard.tensors(batch, finite=False) == []


def test_nan_with_host_copy_counts_sampled_positions() -> None:
    host = torch.arange(1.0, 17.0)
    device = host.clone()
    device[0] = float("nan")  # position 0 is always sampled
    with pytest.raises(guard.GuardError) as caught:
        guard.tensors(device, host_copy=host)
    assert "1 of 8 sampled positions non-finite where the host copy is finite" in caught.value.issues[0].detail


def test_all_zeros_against_a_nonzero_host_copy() -> None:
    host = torch.arange(1, 33).reshape(4, 8)
    with pytest.raises(guard.GuardError) as caught:
        guard.tensors({"input_ids": torch.zeros_like(host)}, host_copy={"input_ids": host})
    assert caught.value.issues[0].detail == "all 32 elements are zero; the host copy is not"
    # Zero at every sampled position of the host copy, non-zero elsewhere: still caught.
    sparse = torch.zeros(100)
    sparse[50] = 1.0
    with pytest.raises(guard.GuardError, match="host copy is not"):
        guard.tensors(torch.zeros(100), host_copy=sparse, samples=2)


def test_partial_zeros_and_mismatch_at_sampled_positions() -> None:
    host = torch.arange(1, 65, dtype=torch.float32).reshape(8, 8)
    zeroed = host.clone()
    zeroed.view(-1)[::2] = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        issues = guard.tensors(zeroed, where="after copy", host_copy=host, mode="warn")
    (issue,) = issues
    assert issue.fail_class == "partial_zeros" and issue.path == "batch"
    assert issue.detail.startswith("4 of 8 sampled elements zero where the host copy is not; first at [0]: expected 1.0, found 0.0")
    assert len(caught) == 1 and issubclass(caught[0].category, guard.GuardWarning)
    changed = host.clone()
    changed.view(-1)[-1] = 5.0  # the last position is always sampled
    (issue,) = warned(changed, host_copy=host)
    assert issue.fail_class == "mismatch" and "first at [63]: expected 64.0, found 5.0" in issue.detail


def test_non_contiguous_tensors_are_sampled_in_place() -> None:
    host = torch.arange(1.0, 49.0).reshape(6, 8)
    device = host.clone()
    device[5, 7] = -1.0
    # The transposes have the same row-major positions: [5, 7] of host is [7, 5] of host.t().
    (issue,) = warned(device.t(), host_copy=host.t())
    assert "first at [47]: expected 48.0, found -1.0" in issue.detail
    assert guard.tensors(host.t(), host_copy=host.t()) == []


def test_host_copy_in_another_dtype_is_compared_after_conversion() -> None:
    torch.manual_seed(1)
    host = torch.randn(32)
    assert guard.tensors(host.to(torch.bfloat16), host_copy=host) == []
    (issue,) = warned(torch.randn(32).to(torch.bfloat16), host_copy=host)
    assert issue.fail_class == "mismatch"


def test_host_copy_must_match() -> None:
    with pytest.raises(ValueError, match="shape"):
        guard.tensors({"x": torch.ones(3)}, host_copy={"x": torch.ones(4)})
    with pytest.raises(ValueError, match='host_copy has no batch\\["y"\\]'):
        guard.tensors({"x": torch.ones(3), "y": torch.ones(2)}, host_copy={"x": torch.ones(3)})
    with pytest.raises(ValueError, match="mode"):
        guard.tensors(torch.ones(2), mode="ignore")


def test_requires_grad_tensors_build_no_graph() -> None:
    weight = torch.ones(4, requires_grad=True)
    assert guard.tensors(weight * 2) == []
    assert weight.grad is None


def test_watch_checks_every_n_steps() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    watch = guard.watch(model, every=3)
    model(torch.randn(5, 4)).sum().backward()
    with torch.no_grad():
        model[2].bias.fill_(float("nan"))
    assert watch.step() == [] and watch.step() == [] and watch.checks == 0
    with pytest.raises(guard.GuardError) as caught:
        watch.step()
    assert watch.checks == 1
    (issue,) = caught.value.issues
    assert issue.path == "model.2.bias" and issue.fail_class == "nan_inf" and issue.where == "at step 3"


def test_watch_finds_nan_gradients_and_zeroed_parameters() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    torch.nn.init.zeros_(model.bias)  # zero from the start: not a problem
    watch = guard.watch(model, every=1, mode="warn")
    (model(torch.randn(3, 4)).sum() * float("inf")).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        issues = watch.step()
    assert {(i.path, i.fail_class) for i in issues} == {("model.weight.grad", "nan_inf"), ("model.bias.grad", "nan_inf")}
    model.zero_grad()
    with torch.no_grad():
        model.weight.zero_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        issues = watch.step()
    assert [(i.path, i.fail_class) for i in issues] == [("model.weight", "all_zeros")]
    assert "became all zero" in issues[0].detail
    assert guard.watch(model, grads=False, params=False, every=1).step() == []


def test_watch_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="every"):
        guard.watch(torch.nn.Linear(2, 2), every=0)
