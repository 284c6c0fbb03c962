"""The sweep's benign-difference rules, one by one: each accepts the difference it documents
and nothing next to it (docs/probes.md, section "sweep")."""

from __future__ import annotations

import math
import types
from typing import Any

import pytest
import torch

from gpuprobe.worker.probes.sweep import cases as sweep_cases
from gpuprobe.worker.probes.sweep import db as sweep_db
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
from gpuprobe.worker.probes.sweep import ref as sweep_ref
from gpuprobe.worker.probes.sweep import run as sweep_run

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
    targets = sweep_cases.transform_targets(torch, sample, "size1")
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
        self.made_by = "in-process"

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
    tally = sweep_run.SweepTally()
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


# --------------------------------------------------------------------- the new axes' rules


def _ints(found: list[int], expected: list[int], dtype: torch.dtype, **options: Any) -> sweep_oracle.LeafFailure | None:
    return sweep_oracle.compare_leaf(
        torch, torch.tensor(found, dtype=dtype), torch.tensor(expected, dtype=torch.int64),
        dtype_name="float32", atol=0.0, rtol=0.0, **options,
    )


def test_integers_are_exact_but_overflow_and_conversion_are_undefined() -> None:
    # One apart is wrong for an integer.
    assert _ints([1, 2, 4], [1, 2, 3], torch.int32) is not None
    # An overflow one side computed wider: 192 written into int64 where int8 wrapped to -64.
    assert _ints([192], [-64], torch.int64, wrap_dtype=torch.int8) is None
    # Outside the range but not congruent modulo 2^8: a wrong value, not an overflow.
    assert _ints([200], [-64], torch.int64, wrap_dtype=torch.int8) is not None
    # A float beyond the integer's range converts to its extreme (x86: the minimum, CUDA saturates).
    assert _ints([2**31 - 1], [-(2**31)], torch.int32) is None
    # A narrowing out= of a value beyond the written dtype.
    assert _ints([-32768 + 5], [2**20 + 5], torch.int16) is None
    # An unsigned dtype's 0 is an ordinary value, not a conversion's extreme.
    assert _ints([0], [3], torch.uint8) is not None
    # The truncation slack of linspace-like ops: one, and no more.
    assert _ints([3], [4], torch.uint8, rounding_slack=1) is None
    assert _ints([2], [4], torch.uint8, rounding_slack=1) is not None


def test_a_nonfinite_complex_number_is_judged_whole() -> None:
    def leaf(found: complex, expected: complex) -> sweep_oracle.LeafFailure | None:
        return sweep_oracle.compare_leaf(
            torch, torch.tensor([found, 1 + 1j], dtype=torch.complex64), torch.tensor([expected, 1 + 1j], dtype=torch.complex128),
            dtype_name="float32", atol=1e-5, rtol=1e-5,
        )

    # (inf + 0j)·w: NaN parts or an infinity, by the formula: both non-finite numbers.
    assert leaf(complex(NAN, NAN), complex(INF, 0.0)) is None
    assert leaf(complex(NAN, 0.0), complex(NAN, NAN)) is None
    # A number non-finite on one side only still fails.
    assert leaf(complex(0.0, 0.0), complex(NAN, NAN)).cls == sweep_oracle.NAN_LOST
    assert leaf(complex(NAN, 0.0), complex(1.0, 0.0)).cls == sweep_oracle.NONFINITE_INVENTED
    # Plain (0-dim .item()) complex values: NaN parts match NaN parts.
    assert sweep_oracle.compare_leaf(torch, complex(NAN, 0.0), complex(NAN, 0.0), dtype_name="float32", atol=1e-5, rtol=1e-5) is None
    assert sweep_oracle.compare_leaf(torch, complex(INF, 0.0), complex(-INF, 0.0), dtype_name="float32", atol=1e-5, rtol=1e-5) is not None


def test_value_classes_inject_the_sample_dtypes_edges() -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        info = torch.finfo(dtype)
        assert sweep_cases.injected_value(torch, "max", dtype) == float(info.max)
        assert sweep_cases.injected_value(torch, "lowest", dtype) == float(info.min)
        sub = sweep_cases.injected_value(torch, "subnormal", dtype)
        assert 0 < sub < info.smallest_normal and torch.tensor(sub, dtype=dtype).item() == sub
    # √max/16 has a finite square; float16's would be 16, not huge.
    huge = sweep_cases.injected_value(torch, "huge", torch.float32)
    assert math.isfinite(huge * huge) and huge * huge < torch.finfo(torch.float32).max
    assert sweep_cases.injected_value(torch, "huge", torch.float16) is None
    assert sweep_cases.injected_value(torch, "intmin", torch.uint8) is None
    assert sweep_cases.injected_value(torch, "intmax", torch.int16) == 32767
    # The reference's float64 tensor gets the float32 value, and negnan keeps its sign bit.
    x = torch.zeros(4, dtype=torch.float64)
    for transform in ("max", "negnan", "negzero"):
        out = sweep_cases._transform_fn(torch, transform, 7, torch.float32)(x)
        changed = out[torch.signbit(out) | (out != 0)]
        assert changed.numel() == 1, (transform, out)
        if transform == "max":
            assert float(changed) == float(torch.finfo(torch.float32).max)
        else:
            assert bool(torch.signbit(changed).all())


def _one_sample(key: str, dtype: str) -> tuple[Any, list[Any]]:
    info = sweep_db.load(torch).entry(key)
    return info, sweep_cases.generate_samples(torch, info, dtype, 0, requires_grad=False)


def test_value_classes_reach_only_where_they_are_defined() -> None:
    applies = lambda key, dtype, transform: any(  # noqa: E731
        sweep_cases.applicable(torch, info, s, transform, dtype) for info, samples in [_one_sample(key, dtype)] for s in samples
    )
    # Integer classes: integer dtypes, signed for intmin/negative, never floats.
    assert applies("add", "int32", "intmin") and applies("add", "int32", "negative")
    assert not applies("add", "float32", "negative") and not applies("add", "float32", "intmax")
    assert applies("add", "uint8", "intmax") and not applies("add", "uint8", "negative")
    # An entry of integer dtypes alone takes indices or counts: no extremes.
    assert not applies("bincount", "int64", "intmax")
    # NaN and infinities never reach integer tensors; a declared domain bounds the finite classes.
    assert not applies("add", "int32", "nan")
    assert not applies("log", "float32", "lowest") and applies("log", "float32", "max")
    # Probabilities get nothing outside [0, 1]; the sign of a complex zero picks a branch cut.
    assert not applies("bernoulli", "float32", "max") and applies("bernoulli", "float32", "subnormal")
    assert not applies("log", "complex64", "negzero")
    # Call variants follow what the entry declares.
    assert applies("add", "float32", "inplace") and applies("add", "float32", "out_narrow")
    assert not applies("add", "bfloat16", "out_narrow")
    assert not applies("nn.functional.conv2d", "float32", "inplace")


def test_an_in_place_variant_skips_samples_that_broadcast_their_input() -> None:
    info, samples = _one_sample("sub", "float32")
    broadcasting = [s for s in samples if getattr(s, "broadcasts_input", False)]
    assert broadcasting, "the database's sub samples include one that broadcasts its input"
    assert not any(sweep_cases.applicable(torch, info, s, "inplace", "float32") for s in broadcasting)


def test_call_variants_are_judged_against_the_functional_call() -> None:
    # The reference of an out= case is the functional call's value, computed after the CPU's
    # own out= call showed it is valid.
    info, samples = _one_sample("mul", "float32")
    index = next(i for i, s in enumerate(samples) if sweep_cases.applicable(torch, info, s, "out_noncontig", "float32"))
    request = {
        "key": "mul", "dtype": "float32", "seed": 0, "requires_grad": False, "sample": index,
        "transform": "out_noncontig", "backward": False, "digest": sweep_cases.digest(torch, samples[index]),
    }
    reply = sweep_ref.handle(torch, request, {})
    functional = sweep_ref.handle(torch, {**request, "transform": "base"}, {})
    assert reply["ok"] and torch.equal(reply["outputs"][0], functional["outputs"][0])
    own = sweep_ref.handle(torch, {**request, "mode": "variant_same_dtype"}, {})
    assert own["ok"] and torch.equal(own["outputs"][0], functional["outputs"][0].float())
    # A cast into out= that the dtype rules refuse is refused by the CPU too: the same call fails there.
    values = sweep_cases.run_case(torch, info, samples[index], sweep_cases.Case(index, "out_narrow", False), 0, device="cpu", upcast=False, dtype_name="float32")
    assert values[0].dtype == torch.float16


def test_integer_probes_compute_promoted_floats_in_float64_in_the_reference() -> None:
    info, samples = _one_sample("sqrt", "int32")
    request = {
        "key": "sqrt", "dtype": "int32", "seed": 0, "requires_grad": False, "sample": 0,
        "transform": "base", "backward": False, "digest": sweep_cases.digest(torch, samples[0]),
    }
    assert sweep_ref.handle(torch, request, {})["outputs"][0].dtype == torch.float64
    assert sweep_ref.handle(torch, {**request, "mode": "same_dtype"}, {})["outputs"][0].dtype == torch.float32
    assert torch.get_default_dtype() == torch.float32


def test_range_limited_failures_are_named_not_judged() -> None:
    wrong = sweep_oracle.LeafFailure(sweep_oracle.WRONG_VALUE, "")
    lost = sweep_oracle.LeafFailure(sweep_oracle.NAN_LOST, "")
    floats, ints = torch.zeros(2), torch.zeros(2, dtype=torch.int32)
    assert sweep_run._range_limited("max", wrong, floats, torch)
    assert not sweep_run._range_limited("max", lost, floats, torch)
    assert not sweep_run._range_limited("huge", wrong, floats, torch)
    # intmax/intmin: floating outputs convert the extreme; integer outputs stay exact.
    assert sweep_run._range_limited("intmax", wrong, floats, torch)
    assert not sweep_run._range_limited("intmax", wrong, ints, torch)


def test_leaf_bounds_follow_the_less_precise_output() -> None:
    info = sweep_db.load(torch).entry("add")
    assert sweep_run._leaf_bounds(torch, info, "float32", torch.zeros(1, dtype=torch.float16), 1e-5, 1e-5)[0] == "float16"
    assert sweep_run._leaf_bounds(torch, info, "float32", torch.zeros(1, dtype=torch.float64), 1e-5, 1e-5) == ("float32", 1e-5, 1e-5)
    assert sweep_run._leaf_bounds(torch, info, "complex64", torch.zeros(1, dtype=torch.complex64), 1e-5, 1e-5)[0] == "float32"
    assert sweep_run._leaf_bounds(torch, info, "int32", torch.zeros(1, dtype=torch.float32), 0.0, 0.0)[0] == "float32"


def test_order_and_count_ties_in_integer_dtypes() -> None:
    info = sweep_db.load(torch).entry("mode")
    assert sweep_db.oracle_for(info, "float32") == "value"
    assert "mode" in sweep_db.COUNT_TIE_OPS and sweep_db.is_exact_dtype("int8")
    lu = sweep_db.load(torch).entry("linalg.lu")
    assert sweep_db.oracle_for(lu, "complex128") == "structure" and sweep_db.oracle_for(lu, "float64") == "value"


# -- error inputs: the device must raise where the database says every device raises ----------


class _ErrorInput:
    def __init__(self, value: Any, regex: str = "planted") -> None:
        self.sample_input = types.SimpleNamespace(input=value, args=(), kwargs={})
        self.error_type = RuntimeError
        self.error_regex = regex


class _Entry:
    """A stand-in database entry: ``op`` on each error input's tensor."""

    name = "planted"
    error_inputs_func = True

    def __init__(self, op: Any, values: list[Any]) -> None:
        self.op, self.values = op, values

    def error_inputs(self, device: str) -> Any:
        return iter([_ErrorInput(v) for v in self.values])

    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        return self.op(x)


def _cpu_context() -> Any:
    return types.SimpleNamespace(torch=torch, device_name="cpu", device=torch.device("cpu"), is_gpu=False, sync=lambda: None)


def _rejects(x: Any) -> Any:
    raise RuntimeError("planted: rejected")


def test_an_error_input_the_device_rejects_is_right() -> None:
    tally = sweep_run.SweepTally()
    sweep_run._run_error_inputs(_cpu_context(), _Entry(_rejects, [torch.ones(2)] * 3), "float32", tally, 0.0, 1e9)
    assert (tally.error_inputs, tally.error_inputs_rejected, tally.passed, tally.invalid_accepted) == (3, 3, 3, 0)


def test_an_error_input_the_cpu_computes_too_is_not_judged() -> None:
    """The database's expectation does not hold on this torch: neither side is blamed."""
    tally = sweep_run.SweepTally()
    sweep_run._run_error_inputs(_cpu_context(), _Entry(torch.abs, [torch.ones(2)]), "float32", tally, 0.0, 1e9)
    assert tally.unjudged == {"error_input_accepted_by_cpu": 1} and tally.cases == 0 and tally.invalid_accepted == 0


def test_an_error_input_only_the_device_accepts_is_invalid_accepted() -> None:
    """The device (here: the stand-in's own op) returns values; the CPU's twin rejects."""

    class DeviceAccepts(_Entry):
        def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
            if x.device.type == "meta":
                return x
            raise RuntimeError("planted: the CPU rejects")

        def error_inputs(self, device: str) -> Any:
            value = torch.empty(2, device="meta") if device == "meta" else torch.ones(2)
            return iter([_ErrorInput(value)])

    ctx = types.SimpleNamespace(torch=torch, device_name="meta", device=torch.device("meta"), is_gpu=False, sync=lambda: None)
    tally = sweep_run.SweepTally()
    sweep_run._run_error_inputs(ctx, DeviceAccepts(None, []), "float32", tally, 0.0, 1e9)
    assert tally.invalid_accepted == 1 and tally.passed == 1, vars(tally)
    assert "the database expects RuntimeError" in tally.invalid_examples[0]


def test_a_device_side_assert_on_an_error_input_rejects_it_and_replaces_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_run, "device_context_problem", lambda torch_, device: "an illegal memory access")
    ctx = types.SimpleNamespace(torch=torch, device_name="cuda:0", device="cuda:0", is_gpu=True, sync=lambda: None)
    tally = sweep_run.SweepTally()
    sweep_run._run_error_inputs(ctx, _Entry(_rejects, [torch.ones(2)] * 3), "float32", tally, 0.0, 1e9)
    assert tally.passed == 1 and tally.error_inputs == 1, vars(tally)  # the rest are not tried
    assert tally.context_lost and "context is unusable" in tally.context_lost


def test_error_inputs_run_once_per_entry_in_its_first_dtype_and_only_in_the_full_tier() -> None:
    database = sweep_db.load(torch)
    gather = database.ops["gather"]
    assert sweep_run._error_inputs_due(torch, gather, "fp32", "cpu", None)
    assert not sweep_run._error_inputs_due(torch, gather, "i64", "cpu", None)
    assert not sweep_run._error_inputs_due(torch, gather, "fp32", "cpu", ("out",))  # a standard subset below full
    # An entry without error inputs has none to try.
    without = next(info for info in database.ops.values() if getattr(info, "error_inputs_func", None) is None)
    assert not any(sweep_run._error_inputs_due(torch, without, d, "cpu", None) for d in sweep_db.DTYPES)


# -- reference inputs: the database's larger set, run as given in the full tier ----------------


def test_reference_inputs_begin_with_the_sample_inputs_and_add_their_own() -> None:
    info = sweep_db.load(torch).ops["add"]
    assert sweep_cases.has_reference_inputs(info)
    plain = sweep_cases.probe_samples(torch, info, "float32", 7, True, reference=False)
    wider = sweep_cases.probe_samples(torch, info, "float32", 7, True, reference=True)
    assert plain.reference == 0 and wider.plain == len(plain.samples) and wider.reference > 0
    assert [sweep_cases.digest(torch, s) for s in wider.samples[: wider.plain]] == [
        sweep_cases.digest(torch, s) for s in plain.samples
    ]


def test_reference_samples_run_as_given_and_transforms_keep_to_the_sample_inputs() -> None:
    info = sweep_db.load(torch).ops["add"]
    chosen = sweep_cases.probe_samples(torch, info, "float32", 7, True, reference=True)
    cases = sweep_cases.choose_cases(torch, info, chosen.samples, 7, True, "float32", plain=chosen.plain)
    tail = {c.sample for c in cases if c.sample >= chosen.plain}
    assert 1 <= len(tail) <= sweep_cases.REFERENCE_SAMPLES
    assert all(c.transform == "base" for c in cases if c.sample >= chosen.plain)
    # Without the reference inputs' own samples the cases are what they were.
    before = sweep_cases.choose_cases(torch, info, chosen.samples[: chosen.plain], 7, True, "float32")
    assert [c for c in cases if c.sample < chosen.plain] == before


def test_reference_samples_holding_nonfinite_values_skip_entries_undefined_on_them() -> None:
    """An orthogonal polynomial's degree is a loop bound (the rule that keeps its transforms
    to the value-keeping ones): its reference samples holding NaN/Inf are not run. A
    decomposition takes them, judged by its own rule (``nonfinite_swallowed``)."""
    nan_sample = types.SimpleNamespace(input=torch.tensor([[1.0, math.nan], [0.0, 1.0]]), args=(), kwargs={})
    fine = types.SimpleNamespace(input=torch.eye(2), args=(), kwargs={})
    inverse = types.SimpleNamespace(name="linalg.inv", variant_test_name="")
    polynomial = types.SimpleNamespace(name="special.chebyshev_polynomial_t", variant_test_name="")
    add = types.SimpleNamespace(name="add", variant_test_name="")
    assert sweep_cases.reference_indices(torch, polynomial, [fine, nan_sample, fine], 1) == [2]
    assert sweep_cases.reference_indices(torch, inverse, [fine, nan_sample, fine], 1) == [1, 2]
    assert sweep_cases.reference_indices(torch, add, [fine, nan_sample, fine], 1) == [1, 2]
    mode = types.SimpleNamespace(name="mode", variant_test_name="")
    assert sweep_cases.reference_indices(torch, mode, [fine, nan_sample], 1) == []


def test_a_sample_holding_nan_or_inf_is_judged_as_if_injected() -> None:
    sample = types.SimpleNamespace(input=torch.tensor([1.0, math.inf]), args=(torch.tensor([math.nan, 2.0]),), kwargs={})
    held = sweep_cases.held_nonfinite(torch, sample)
    assert held == (True, True)
    plain = sweep_cases.judging("add", "float32", "base")
    rules = sweep_cases.judging("add", "float32", "base", held)
    assert not plain.nonfinite_input and rules.nonfinite_input and rules.inf_input and not rules.compare_integers
    # An infinity where the reference has NaN (inf - inf by another order) is accepted then.
    assert _leaf([INF], [NAN], inf_input=rules.inf_input, nonfinite_input=rules.nonfinite_input) is None
    assert _leaf([INF], [NAN]) is not None


def test_the_reference_process_builds_the_same_reference_sample() -> None:
    info = sweep_db.load(torch).ops["add"]
    chosen = sweep_cases.probe_samples(torch, info, "float32", 7, False, reference=True)
    index = chosen.plain  # the first of the reference inputs' own
    request = {
        "key": "add", "dtype": "float32", "seed": 7, "requires_grad": False, "sample": index, "transform": "base",
        "backward": False, "digest": sweep_cases.digest(torch, chosen.samples[index]), "reference_inputs": True,
    }
    reply = sweep_ref.handle(torch, request, {})
    assert reply["ok"], reply
    # Without the flag the reference would build the sample inputs only: no such sample.
    assert sweep_ref.handle(torch, {**request, "reference_inputs": False}, {})["kind"] == "mismatch"


# -- non-finite input of decompositions and solvers: a NaN that vanishes is its own class ----------


def test_decompositions_take_nonfinite_inputs_and_keep_the_other_value_classes_out() -> None:
    database = sweep_db.load(torch)
    inverse = database.ops["linalg.inv"]
    sample = sweep_cases.generate_samples(torch, inverse, "float32", 0, requires_grad=False)[0]
    for transform in sorted(sweep_cases.NONFINITE_TRANSFORMS):
        assert sweep_cases.applicable(torch, inverse, sample, transform), transform
    # Huge, extreme and subnormal values make a matrix ill-conditioned: not a device fault.
    for transform in ("huge", "max", "lowest", "subnormal", "negzero", "broadcast", "tail257"):
        assert not sweep_cases.applicable(torch, inverse, sample, transform), transform
    # The orthogonal polynomials (a degree the kernels loop up to) and the general eigenvalue
    # problem (its host LAPACK dies on NaN) take none.
    for key in ("special.chebyshev_polynomial_t", "linalg.eigvals"):
        info = database.ops[key]
        first = sweep_cases.generate_samples(torch, info, "float32", 0, requires_grad=False)[0]
        assert not sweep_cases.applicable(torch, info, first, "nan"), key
    rules = sweep_cases.judging("linalg.inv", "float32", "nan")
    assert rules.swallow_only and not sweep_cases.judging("linalg.inv", "float32", "base").swallow_only
    assert not sweep_cases.judging("add", "float32", "nan").swallow_only


def _swallowed(found: list[float], expected: list[float], cpu: list[float] | None = None) -> sweep_oracle.LeafFailure | None:
    return sweep_oracle.swallowed_nonfinite(
        torch,
        torch.tensor(found, dtype=torch.float32),
        torch.tensor(expected, dtype=torch.float64),
        (lambda: torch.tensor(cpu, dtype=torch.float32)) if cpu is not None else None,
    )


def test_a_nonfinite_value_that_vanishes_from_an_output_is_swallowed() -> None:
    failure = _swallowed([0.0, 1.0, 2.0], [NAN, NAN, 2.0])
    assert failure is not None and failure.cls == sweep_oracle.NONFINITE_SWALLOWED
    assert failure.bad_elements == 2 and failure.index == [0] and failure.expected == "nan"
    assert _swallowed([1.0, 1.0], [INF, 1.0]) is not None
    # A NaN left anywhere in the output: it propagated (where to is the algorithm's choice).
    assert _swallowed([1.0, NAN, 2.0], [NAN, 0.5, 2.0]) is None
    # A finite reference: nothing to swallow (the values are not judged by this rule).
    assert _swallowed([7.0, 8.0], [1.0, 2.0]) is None
    # The CPU in the same dtype returns it all finite too: the library's behaviour everywhere.
    assert _swallowed([0.0, 1.0], [NAN, 1.0], cpu=[0.5, 1.0]) is None
    assert _swallowed([0.0, 1.0], [NAN, 1.0], cpu=[NAN, 1.0]) is not None


class _InProcessReference:
    """The float64 reference computed in this process (``sweep_ref.handle``)."""

    def __init__(self) -> None:
        self.cache: dict[Any, Any] = {}
        self.restarts = 0
        self.made_by = "in-process"

    def compute(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        return sweep_ref.handle(torch, request, self.cache)


def _probe_tally(
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    transforms: tuple[str, ...],
    faults: list[dict[str, Any]] | None = None,
    info: Any = None,
    dtype_name: str = "float32",
) -> Any:
    """The cases of ``transforms`` of one probe, run in this process: the CPU as the device,
    the reference in-process, the simulated ``faults`` active (``simulate.engine``)."""
    from gpuprobe.worker import simulate

    engine = None
    if faults:
        engine = simulate.FaultEngine({"source": "test", "fault": faults})
        engine.bind(torch)
    monkeypatch.setattr(simulate, "engine", lambda: engine)
    entry = sweep_db.load(torch).ops[key]
    seed = 7
    chosen = sweep_cases.probe_samples(torch, entry, dtype_name, seed, True, reference=True)
    cases = [
        c
        for c in sweep_cases.choose_cases(torch, entry, chosen.samples, seed, chosen.with_grad, dtype_name, plain=chosen.plain)
        if c.transform in transforms
    ]
    assert cases, (key, transforms)
    ctx = types.SimpleNamespace(torch=torch, device="cpu", is_gpu=False, sync=lambda: None)
    tally = sweep_run.SweepTally()
    reference = _InProcessReference()
    oracle = sweep_db.oracle_for(entry, dtype_name)
    atol, rtol = sweep_db.tolerance(entry, torch, dtype_name)
    for case in cases:
        sweep_run._run_one(
            ctx, info or entry, key, dtype_name, chosen.samples, chosen.with_grad, case, seed, oracle, atol, rtol,
            reference, tally, reference_inputs=chosen.reference > 0, plain=chosen.plain,
        )
    return tally


def _drop_nan(methods: list[str], variants: list[str]) -> dict[str, Any]:
    return {"name": "planted", "op": "sweep", "when": {"methods": methods, "variants": variants}, "effect": {"kind": "drop_nan"}}


def test_a_decomposition_that_swallows_nan_is_reported_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    nonfinite = tuple(sorted(sweep_cases.NONFINITE_TRANSFORMS))
    healthy = _probe_tally(monkeypatch, "linalg.inv", nonfinite)
    assert healthy.failed == {} and healthy.nonfinite_swallowed == 0 and healthy.device_error_count == 0, vars(healthy)
    assert healthy.cases >= 4 and healthy.passed == healthy.cases
    # Planted: the NaN in the device's outputs become 0, so an inverse of a matrix holding NaN
    # looks valid. Its own class, counted, not a wrong value.
    planted = _probe_tally(monkeypatch, "linalg.inv", ("nan",), [_drop_nan(["linalg.inv"], ["nan"])])
    assert planted.failed == {} and planted.nonfinite_swallowed >= 1, vars(planted)
    output = planted.output(sweep_db.load(torch).ops["linalg.inv"], "linalg.inv", "float32", 7, "value", 1e-5, 1e-5, 1, _InProcessReference(), 0.0)
    assert output.measurement["nonfinite_swallowed"] == planted.nonfinite_swallowed
    assert any("came back as finite numbers" in note and "nan forward sample" in note for note in output.notes), output.notes


def test_a_healthy_svd_under_nan_passes_with_no_class(monkeypatch: pytest.MonkeyPatch) -> None:
    tally = _probe_tally(monkeypatch, "linalg.svd", ("nan",))
    assert tally.failed == {} and tally.nonfinite_swallowed == 0 and tally.device_error_count == 0, vars(tally)
    assert "nan" in tally.variants


class _RaisesOnDevice:
    """A database entry whose device call raises ``exc`` (the reference uses the real one)."""

    def __init__(self, entry: Any, exc: BaseException) -> None:
        self.entry, self.exc = entry, exc
        self.name, self.variant_test_name = entry.name, entry.variant_test_name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self.exc


def test_a_library_error_on_a_nonfinite_matrix_is_a_refusal_not_a_device_error(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = sweep_db.load(torch).ops["linalg.inv"]
    raising = _RaisesOnDevice(entry, torch.linalg.LinAlgError("linalg.inv: The diagonal element 2 is zero"))
    tally = _probe_tally(monkeypatch, "linalg.inv", ("nan",), info=raising)
    assert tally.refused >= 1 and tally.device_error_count == 0, vars(tally)
    # On an input without NaN the same error where the CPU computes is the device's.
    tally = _probe_tally(monkeypatch, "linalg.inv", ("noncontig",), info=raising)
    assert tally.device_error_count >= 1 and tally.refused == 0, vars(tally)


def test_other_differences_under_nonfinite_input_of_a_decomposition_are_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    # NaN planted in every 8th element of the device's outputs: where the reference is finite,
    # a failure on a finite input, unjudged under an infinite one (where a NaN spreads is the
    # algorithm's choice).
    faults = [{"name": "planted", "op": "sweep", "when": {"methods": ["linalg.inv"]}, "effect": {"kind": "nan"}}]
    tally = _probe_tally(monkeypatch, "linalg.inv", ("posinf", "noncontig"), faults)
    assert tally.nonfinite_swallowed == 0
    assert {f["variant"] for f in tally.failures} == {"noncontig"}, tally.failures
    assert tally.unjudged.get("nonfinite_input", 0) >= 1, tally.unjudged


# -- per-argument shapes and large shapes ------------------------------------------------------


def test_per_argument_shapes_change_one_other_tensor_at_a_time() -> None:
    x, weight, bias = torch.randn(2, 3, 5, 5), torch.randn(4, 3, 3, 3), torch.randn(4)
    sample = _sample(x, weight, bias)
    assert sweep_cases.argument_targets(torch, sample, "arg_empty") == [(1, 0), (1, -1), (2, 0)]
    assert sweep_cases.argument_targets(torch, sample, "arg_size1") == [(1, 0), (1, -1), (2, 0)]
    assert sweep_cases.argument_label(torch, sample, (1, -1)) == "args[0] dim -1"
    case = sweep_cases.Case(0, "arg_size1", False, (1, -1))
    (call_input, args, _kwargs), _leaves, _dtype = sweep_cases.materialize(torch, sample, case, 0, device="cpu", upcast=False)
    assert tuple(call_input.shape) == (2, 3, 5, 5) and tuple(args[0].shape) == (4, 3, 3, 1) and tuple(args[1].shape) == (4,)
    case = sweep_cases.Case(0, "arg_empty", False, (2, 0))
    (_input, args, _kwargs), _leaves, _dtype = sweep_cases.materialize(torch, sample, case, 0, device="cpu", upcast=True)
    assert tuple(args[1].shape) == (0,) and args[0].dtype == torch.float64
    # Index tensors (their values point into the others), integer probes, one tensor: none.
    assert sweep_cases.argument_targets(torch, _sample(x, torch.zeros(2, dtype=torch.int64), weight), "arg_size1") == []
    assert sweep_cases.argument_targets(torch, _sample(x.int(), x.int()), "arg_size1", "int32") == []
    assert sweep_cases.argument_targets(torch, _sample(x), "arg_size1") == []
    # A tensor passed twice is the first one too; an empty one has nothing to slice.
    assert sweep_cases.argument_targets(torch, _sample(x, x, torch.empty(0, 3)), "arg_empty") == []
    # A private operator takes its arguments as its public caller checked them.
    private = sweep_db.load(torch).ops["torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"]
    q, k, v = torch.randn(2, 2, 3, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    assert sweep_cases.argument_targets(torch, _sample(q, k, v), "arg_size1")
    assert not sweep_cases.applicable(torch, private, _sample(q, k, v), "arg_size1")


def test_large_shapes_pass_the_thresholds_within_the_budget() -> None:
    database = sweep_db.load(torch)
    total = _sample(torch.randn(3, 4))
    case = sweep_cases.Case(0, "large_batch", False)
    (tiled, _args, _kwargs), _leaves, _dtype = sweep_cases.materialize(torch, total, case, 0, device="cpu", upcast=False)
    assert tuple(tiled.shape) == (sweep_cases.LARGE_BATCH, 4) and torch.equal(tiled[3], total.input[0])
    case = sweep_cases.Case(0, "large_reduced", False)
    (wide, _args, _kwargs), _leaves, _dtype = sweep_cases.materialize(torch, total, case, 0, device="cpu", upcast=False)
    assert tuple(wide.shape) == (3, sweep_cases.LARGE_REDUCED) and torch.equal(wide[:, 4], total.input[:, 0])
    assert sweep_cases.LARGE_BATCH > 65535 and sweep_cases.LARGE_REDUCED > 512 * 4 * 256 and sweep_cases.LARGE_RHS > 1024
    sum_entry, solve = database.ops["sum"], database.ops["linalg.solve"]
    assert sweep_cases.applicable(torch, sum_entry, total, "large_batch")
    assert sweep_cases.applicable(torch, sum_entry, total, "large_reduced")
    # Past the budget (rows of 2^22 / 65537 elements and more), or not a reduction: none.
    assert not sweep_cases.applicable(torch, sum_entry, _sample(torch.randn(2, 8, 9)), "large_batch")
    assert not sweep_cases.applicable(torch, database.ops["add"], total, "large_batch")
    assert not sweep_cases.applicable(torch, database.ops["cumsum"], total, "large_reduced")
    # A solver: batched beyond the matrix for large_batch, a matrix right-hand side for large_rhs.
    a, b = torch.randn(2, 5, 5), torch.randn(2, 5, 3)
    assert sweep_cases.applicable(torch, solve, _sample(a, b), "large_batch")
    assert not sweep_cases.applicable(torch, solve, _sample(a[0], b[0]), "large_batch")
    assert sweep_cases.right_hand_side(torch, solve, _sample(a, b)) == (1, -1)
    assert sweep_cases.right_hand_side(torch, solve, _sample(a, b[..., 0])) is None  # a batch of vectors
    assert sweep_cases.right_hand_side(torch, solve, _sample(a, b, left=False)) is None
    case = sweep_cases.Case(0, "large_rhs", False, (1, -1))
    (_a, args, _kwargs), _leaves, _dtype = sweep_cases.materialize(torch, _sample(a, b), case, 0, device="cpu", upcast=False)
    assert tuple(args[0].shape) == (2, 5, sweep_cases.LARGE_RHS)


def test_large_shapes_run_in_the_full_tier_only_and_forward_only() -> None:
    info = sweep_db.load(torch).ops["sum"]
    samples = sweep_cases.generate_samples(torch, info, "float32", 7, requires_grad=True)
    full = sweep_cases.choose_cases(torch, info, samples, 7, True, "float32")
    large = [c for c in full if c.transform in sweep_cases.LARGE_TRANSFORMS]
    assert {c.transform for c in large} == {"large_batch", "large_reduced"} and not any(c.backward for c in large)
    below = sweep_cases.choose_cases(torch, info, samples, 7, True, "float32", only_new=("negzero",))
    assert not any(c.transform in sweep_cases.LARGE_TRANSFORMS for c in below)


def _partial_zeros(methods: list[str], variants: list[str]) -> dict[str, Any]:
    return {"name": "planted", "op": "sweep", "when": {"methods": methods, "variants": variants}, "effect": {"kind": "partial_zeros"}}


@pytest.mark.parametrize(
    ("key", "transform"),
    [
        ("sum", "large_reduced"),
        ("nn.functional.layer_norm", "large_batch"),
        ("linalg.solve", "large_rhs"),
        ("nn.functional.conv2d", "arg_size1"),
        ("cat", "arg_empty"),
    ],
)
def test_planted_faults_on_the_shape_axes_are_caught_and_a_healthy_cpu_passes(
    monkeypatch: pytest.MonkeyPatch, key: str, transform: str
) -> None:
    healthy = _probe_tally(monkeypatch, key, (transform,))
    assert healthy.failed == {} and healthy.device_error_count == 0 and healthy.cases >= 1, vars(healthy)
    planted = _probe_tally(monkeypatch, key, (transform,), [_partial_zeros([key], [transform])])
    assert planted.failed.get("wrong_value", 0) >= 1, vars(planted)
    assert {f["variant"] for f in planted.failures} == {transform}
    if transform in sweep_cases.TARGETED_TRANSFORMS:
        assert all(" dim " in f["detail"].split(":")[0] for f in planted.failures), planted.failures



def test_a_per_argument_failure_on_an_undefined_cpu_result_is_not_judged() -> None:
    """``argument_undefined``: where the CPU's own same-dtype result is beyond the bound of
    its float64 one (an argument of a size the op does not take, read past its end), the
    device's difference is not judged; where the CPU agrees with itself, it stands."""
    case = sweep_cases.Case(0, "arg_empty", False, argument=(1, 0))
    wanted = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    failure = sweep_oracle.LeafFailure(sweep_oracle.WRONG_VALUE, "off")
    garbage = lambda i: torch.tensor([7.0, -2.0, 3.0])  # noqa: E731
    agrees = lambda i: torch.tensor([1.0, 2.0, 3.0])  # noqa: E731
    args = (0, "float32", 1e-5, 1e-5)
    assert sweep_run._argument_undefined(torch, case, failure, wanted, garbage, *args)
    assert not sweep_run._argument_undefined(torch, case, failure, wanted, agrees, *args)
    plain = sweep_cases.Case(0, "base", False)
    assert not sweep_run._argument_undefined(torch, plain, failure, wanted, garbage, *args)


def test_products_are_not_widened_past_every_dtypes_range() -> None:
    database = sweep_db.load(torch)
    info = database.ops["prod"]
    sample = sweep_cases.generate_samples(torch, info, "float32", 1, requires_grad=False)[0]
    assert not sweep_cases.applicable(torch, info, sample, "large_reduced", "float32")
    summed = database.ops["sum"]
    sample = sweep_cases.generate_samples(torch, summed, "float32", 1, requires_grad=False)
    assert any(sweep_cases.applicable(torch, summed, s, "large_reduced", "float32") for s in sample)


def test_a_per_argument_case_the_cpu_reads_past_is_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """``argument_undefined`` by poisoning: ``native_batch_norm`` with a per-channel
    argument narrowed to size 0 reads past the view's end on the CPU (its result changes
    when the view's base beside it is NaN), so a device that reads other memory there is
    not judged; ``cat`` with an empty argument reads nothing beside it, and a planted fault
    stays a failure (``test_planted_faults_on_the_shape_axes_...``)."""
    healthy = _probe_tally(monkeypatch, "native_batch_norm", ("arg_empty",))
    assert healthy.failed == {} and healthy.unjudged == {} and healthy.cases >= 1, vars(healthy)
    planted = _probe_tally(monkeypatch, "native_batch_norm", ("arg_empty",), [_partial_zeros(["native_batch_norm"], ["arg_empty"])])
    assert planted.failed == {} and planted.unjudged.get("argument_undefined", 0) >= 1, vars(planted)
    assert any("read past its end" in text for text in planted.unjudged_examples), planted.unjudged_examples
    still = _probe_tally(monkeypatch, "cat", ("arg_empty",), [_partial_zeros(["cat"], ["arg_empty"])])
    assert still.failed.get("wrong_value", 0) >= 1 and "argument_undefined" not in still.unjudged, vars(still)


def test_a_poisoned_argument_keeps_its_view_and_poisons_only_beside_it() -> None:
    x = torch.arange(6.0).reshape(2, 3).requires_grad_(True)
    plain = sweep_cases._argument_fn(torch, "arg_size1", -1)(x)
    poisoned = sweep_cases._argument_fn(torch, "arg_size1", -1, poisoned=True)(x)
    assert torch.equal(plain, poisoned) and poisoned.requires_grad
    assert poisoned.untyped_storage().nbytes() == x.untyped_storage().nbytes()
    base = torch.as_strided(poisoned, (2, 3), (3, 1))
    assert bool(base[:, 1:].isnan().all()) and torch.equal(base[:, :1], x[:, :1])
    integer = sweep_cases._argument_fn(torch, "arg_empty", 0, poisoned=True)(torch.arange(4))
    assert integer.numel() == 0 and int(torch.as_strided(integer, (4,), (1,))[0]) == torch.iinfo(torch.int64).max
    # The comparison: NaN equals NaN, the sign of zero does not equal its opposite.
    assert sweep_run.same_bits(torch, [torch.tensor([NAN, 1.0])], [torch.tensor([NAN, 1.0])])
    assert not sweep_run.same_bits(torch, [torch.tensor([0.0])], [torch.tensor([-0.0])])
    assert not sweep_run.same_bits(torch, [torch.tensor([NAN, 1.0])], [torch.tensor([2.0, 1.0])])


class _SlowPerRow:
    """A database entry whose call takes ``per_row`` seconds per row of its input's batch
    (an implementation that loops over the batch on the host)."""

    def __init__(self, entry: Any, per_row: float) -> None:
        self._entry, self._per_row = entry, per_row

    def __getattr__(self, name: str) -> Any:
        return getattr(self._entry, name)

    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        import time

        time.sleep(self._per_row * (x.shape[0] if isinstance(x, torch.Tensor) and x.dim() else 1))
        return self._entry(x, *args, **kwargs)


def test_a_large_case_estimated_past_the_budget_is_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The large-shape guard: a planted op that takes 1 ms per row would take about a minute
    at ``LARGE_BATCH`` rows: not run, unjudged, with the estimate in the notes. The same op
    without the delay runs and passes (its estimate on this CPU stays far under the budget)."""
    monkeypatch.setattr(sweep_run, "LARGE_CALIBRATION_S", 0.05)
    key = "nn.functional.layer_norm"
    entry = sweep_db.load(torch).ops[key]
    slow = _probe_tally(monkeypatch, key, ("large_batch",), info=_SlowPerRow(entry, 1e-3))
    assert slow.cases == 0 and slow.failed == {} and slow.unjudged == {"large_too_slow": 1}, vars(slow)
    assert any("large_batch not run" in note and "65,537 would take about" in note for note in slow.notes), slow.notes
    fast = _probe_tally(monkeypatch, key, ("large_batch",))
    assert fast.cases == 1 and fast.passed == 1 and fast.unjudged == {}, vars(fast)


# -- an out-of-memory error caused by other processes (faults.memory_taken_by_others) -------------

OOM_CROWDED = (
    "CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 220.50 MiB "
    "is free. Process 14041 has 70.92 GiB memory in use."
)


@pytest.mark.parametrize(
    ("message", "crowded"),
    [
        (OOM_CROWDED, True),
        # ROCm words it alike.
        ("HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.98 GiB of which 1.32 GiB is free.", True),
        # Enough was free and the allocation failed anyway: fragmentation or a wrong count, an error.
        (OOM_CROWDED.replace("220.50 MiB", "12.00 GiB"), False),
        ("CUDA out of memory.", False),
        ("simulated: CUDA out of memory. Tried to allocate 1.00 GiB; the memory freed was not reclaimed", False),
    ],
)
def test_an_allocation_larger_than_the_free_memory_is_not_judged(message: str, crowded: bool) -> None:
    from gpuprobe.worker.faults import memory_taken_by_others

    reason = memory_taken_by_others(message)
    assert (reason is not None) == crowded, reason
    if crowded:
        assert "other processes held its memory" in reason


@pytest.mark.parametrize("free", ["1.00 MiB", "40.00 GiB"])
def test_the_worker_skips_a_probe_the_crowded_device_could_not_hold_and_reports_the_rest(free: str) -> None:
    """The worker's rule, end to end under simulation: the same out-of-memory error is a
    SKIP with its reason when less was free than asked for, an ERROR when enough was."""
    from conftest import run_plan

    message = OOM_CROWDED.replace("220.50 MiB", free)
    fault = {"name": "crowded", "op": "elementwise", "effect": {"kind": "oom", "message": message}}
    run = run_plan(["ops.elementwise.add.fp32"], simulate={"source": "test", "fault": [fault]}, timeout=240)
    result = run.results()["ops.elementwise.add.fp32"]
    if free == "1.00 MiB":
        assert result["outcome"] == "skip" and "other processes held its memory" in result["reason"], result
    else:
        assert result["outcome"] == "error" and "OutOfMemoryError" in result["type"], result
