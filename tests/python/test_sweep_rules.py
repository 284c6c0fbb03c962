"""The sweep's benign-difference rules, one by one: each accepts the difference it documents
and nothing next to it (docs/probes.md, section "sweep")."""

from __future__ import annotations

import math
import types
from typing import Any

import pytest
import torch

from gpuprobe.worker.probes import sweep_cases, sweep_db, sweep_oracle, sweep_ref, sweep_run

NAN, INF = math.nan, math.inf


def _leaf(found: list[float], expected: list[float], **options: Any) -> sweep_oracle.LeafFailure | None:
    return sweep_oracle.compare_leaf(
        torch,
        torch.tensor(found, dtype=torch.float32),
        torch.tensor(expected, dtype=torch.float64),
        dtype_name="float32",
        atol=1e-5,
        rtol=1e-5,
        **options,
    )


def test_indeterminate_forms_under_an_injected_infinity() -> None:
    # rms_norm of [inf, 0.7]: the reference has NaN at the infinity and 0 beside it.
    assert _leaf([NAN, NAN], [NAN, 0.0], inf_input=True) is None
    assert _leaf([NAN, NAN], [NAN, INF], inf_input=True) is None
    # Without an injected infinity the same NaN is invented.
    failure = _leaf([NAN, NAN], [NAN, 0.0])
    assert failure is not None and failure.cls == sweep_oracle.NONFINITE_INVENTED
    # A reference without an indeterminate form of its own (softmax of a row holding -inf
    # is exactly 0 there): a device NaN still fails.
    failure = _leaf([NAN, 1.0], [0.0, 1.0], inf_input=True)
    assert failure is not None and failure.cls == sweep_oracle.NONFINITE_INVENTED
    # A NaN where the reference holds a finite non-zero value is never a limit.
    failure = _leaf([NAN, NAN], [NAN, 0.5], inf_input=True)
    assert failure is not None and failure.cls == sweep_oracle.NONFINITE_INVENTED


def test_structure_oracle_allows_nonfinite_only_under_injected_nonfinite_input() -> None:
    assert _leaf([NAN, 1.0], [2.0, 3.0], oracle="structure", nonfinite_input=True) is None
    failure = _leaf([NAN, 1.0], [2.0, 3.0], oracle="structure")
    assert failure is not None and failure.cls == sweep_oracle.NONFINITE_INVENTED


@pytest.mark.parametrize(
    ("message", "fault"),
    [
        ("RuntimeError: Expected contiguous tensor, but got non-contiguous tensor for argument #2", False),
        ("RuntimeError: view size is not compatible with input tensor's size and stride", False),
        ("ValueError: Expected more than 1 value per channel when training", False),
        ("AcceleratorError: CUDA error: invalid argument", True),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", True),
        ("RuntimeError: cuDNN error: CUDNN_STATUS_BAD_PARAM", True),
        (
            "RuntimeError: Expected mha_graph.execute(handle, variant_pack, workspace_ptr.get()).is_good() "
            "to be true, but got false.",
            True,
        ),
        ("RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx", True),
        ("RuntimeError: false INTERNAL ASSERT FAILED at Foo.cpp:12", True),
        ("NotImplementedError: \"foo_cuda\" not implemented for 'BFloat16'", True),
        ("OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", True),
    ],
)
def test_device_faults_are_told_from_argument_checks(message: str, fault: bool) -> None:
    assert sweep_run._is_device_fault(message) is fault


def test_a_backend_without_the_kernel_is_a_declared_limitation() -> None:
    text = "NotImplementedError: Could not run 'aten::_sparse_mm_reduce_impl' with arguments from the 'SparseCsrCUDA' backend."
    assert sweep_run._declared_limitation(text) == "unsupported_on_device"
    assert sweep_run._declared_limitation("NotImplementedError: \"foo_cuda\" not implemented for 'Half'") is None


def _sample(input: Any, *args: Any, **kwargs: Any) -> Any:
    return types.SimpleNamespace(input=input, args=args, kwargs=kwargs)


def test_mixed_precision_samples_name_their_least_precise_float() -> None:
    sample = _sample(torch.zeros(2, 3, dtype=torch.float64), aweights=torch.ones(3), fweights=torch.ones(3, dtype=torch.int32))
    assert sweep_cases.least_precise_float(torch, sample) == "float32"
    assert sweep_cases.least_precise_float(torch, _sample(torch.zeros(2, dtype=torch.bfloat16), torch.zeros(2, dtype=torch.float16))) == "bfloat16"
    assert sweep_cases.least_precise_float(torch, _sample(torch.zeros(2, dtype=torch.int64))) is None


def test_empty_and_size1_slice_batched_tensors_not_parameter_vectors() -> None:
    x = torch.randn(5, 5, 3)
    running_mean, weight = torch.zeros(5), torch.ones(5)
    other = torch.randn(5, 1, 3)
    sample = _sample(x, running_mean, weight, other)
    targets = sweep_cases._targets(torch, sample, "size1")
    assert targets == {id(x), id(other)}


def test_dropout_samples_alone_get_the_structure_oracle() -> None:
    sdpa = "nn.functional.scaled_dot_product_attention"
    assert sweep_db.sample_is_random(sdpa, _sample(None, dropout_p=0.5))
    assert not sweep_db.sample_is_random(sdpa, _sample(None, dropout_p=0.0, is_causal=True))
    assert sweep_db.sample_is_random("nn.functional.multi_head_attention_forward", _sample(None, training=True))
    # training=True of batch norm is deterministic.
    assert not sweep_db.sample_is_random("nn.functional.batch_norm", _sample(None, training=True))


class _SkewedReference:
    """A reference whose same-layout answer is off by one on layout transforms (a CPU kernel
    that mishandles strided input), and right when asked for contiguous copies."""

    def __init__(self, skew_base: bool = False) -> None:
        self.cache: dict[Any, Any] = {}
        self.skew_base = skew_base
        self.restarts = 0

    def compute(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        mode = request.get("mode", "reference")
        true_request = {**request, "mode": "reference" if mode == "reference_contiguous" else mode}
        reply = sweep_ref.handle(torch, true_request, self.cache)
        # The CPU's strided kernel is wrong in every dtype (so the same-dtype yardstick is too).
        skewed = mode in ("reference", "same_dtype") and (
            request["transform"] in sweep_run.LAYOUT_TRANSFORMS or self.skew_base
        )
        if reply.get("ok") and skewed:
            reply = {**reply, "outputs": [o + 1 if isinstance(o, torch.Tensor) else o for o in reply["outputs"]]}
        return reply


def _case_tally(transform: str, reference: Any) -> Any:
    database = sweep_db.load(torch)
    info = database.entry("add")
    seed = 7
    samples = sweep_cases.generate_samples(torch, info, "float32", seed, requires_grad=False)
    index = next(i for i, s in enumerate(samples) if sweep_cases.applicable(torch, info, s, transform))
    ctx = types.SimpleNamespace(torch=torch, device="cpu", is_gpu=False, sync=lambda: None)
    tally = sweep_run._Tally()
    case = sweep_cases.Case(index, transform, False)
    sweep_run._run_one(ctx, info, "add", "float32", samples, False, case, seed, "value", 1e-5, 1e-5, reference, tally)
    return tally


def test_a_layout_dependent_reference_is_not_blamed_on_the_device() -> None:
    tally = _case_tally("noncontig", _SkewedReference())
    assert tally.failed == {} and tally.unjudged == {"reference_layout": 1}, (tally.failed, tally.unjudged)
    # On the samples as given there is no second opinion: the difference is a failure.
    tally = _case_tally("base", _SkewedReference(skew_base=True))
    assert tally.failed == {"wrong_value": 1}, tally.failed


def test_the_reference_finds_a_sample_generated_in_another_order() -> None:
    # meshgrid's generator iterates over a set of strings ({'xy', 'ij'}), whose order follows
    # the process's hash seed: the reference must run the sample the device ran.
    database = sweep_db.load(torch)
    info = database.entry("meshgrid.variadic_tensors")
    samples = sweep_cases.generate_samples(torch, info, "float32", 3, requires_grad=False)
    first = next(i for i, s in enumerate(samples) if s.kwargs.get("indexing") == "xy" and len(s.args) >= 2)
    twin = next(
        i
        for i, s in enumerate(samples)
        if s.kwargs.get("indexing") == "ij" and [tuple(t.shape) for t in s.args] == [tuple(t.shape) for t in samples[first].args]
    )
    assert sweep_cases.digest(torch, samples[first]) != sweep_cases.digest(torch, samples[twin])
    request = {
        "key": "meshgrid.variadic_tensors",
        "dtype": "float32",
        "seed": 3,
        "requires_grad": False,
        "sample": twin,  # the index the device saw for its 'xy' sample
        "transform": "base",
        "backward": False,
        "digest": sweep_cases.digest(torch, samples[first]),
    }
    reply = sweep_ref.handle(torch, request, {})
    expected = sweep_ref.handle(torch, {**request, "sample": first}, {})
    assert reply["ok"] and [tuple(o.shape) for o in reply["outputs"]] == [tuple(o.shape) for o in expected["outputs"]]


@pytest.mark.parametrize("dtype", [torch.complex32, torch.uint64, torch.uint16])
def test_reference_outputs_torch_cannot_unpickle_travel_widened(dtype: torch.dtype) -> None:
    import pickle

    value = torch.arange(6).reshape(2, 3).to(dtype)
    sent = pickle.loads(pickle.dumps(sweep_ref._transferable(torch, value)))
    assert torch.equal(sent.to(torch.complex64 if dtype.is_complex else torch.int64), value.to(sent.dtype))
