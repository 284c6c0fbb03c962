"""The fault engine in process: parsing, conditions, fractions, cures, wrappers, effects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import tomllib
from conftest import PRESET_DIR
from gpuprobe.worker import ops, simulate
from gpuprobe.worker.simulate import CallInfo, FaultEngine, SimulationError, parse_fault

torch = pytest.importorskip("torch")


def fault(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "f", "op": "h2d", "effect": {"kind": "zeros"}}
    base.update(overrides)
    return base


@pytest.fixture
def active() -> Iterator[Any]:
    """Activates simulation in this process for one test, then turns it off."""

    def start(*faults: dict[str, Any], environ: dict[str, str] | None = None) -> FaultEngine:
        return simulate.activate({"source": "test", "fault": list(faults)}, torch, "cpu", environ or {})

    yield start
    simulate.deactivate()


# -- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        (fault(typo=1), "unknown key"),
        (fault(when={"pinnned": True}), "unknown condition"),
        (fault(effect={"kind": "zeros", "colour": "red"}), "unknown effect key"),
        (fault(op="teleport"), "unknown op"),
        (fault(effect={"kind": "melt"}), "unknown effect"),
        (fault(effect={"kind": "zeros", "fraction": 0}), "fraction"),
        (fault(effect={"kind": "zeros", "fraction": 1.5}), "fraction"),
        (fault(effect={"kind": "crash", "signal": "SIGNOPE"}), "signal"),
        (fault(when={"max_bytes": -1}), "max_bytes"),
        (fault(when={"pinned": "yes"}), "pinned"),
        (fault(cured_by="HSA_ENABLE_SDMA=0"), "cured_by"),
        ({"op": "h2d", "effect": {"kind": "zeros"}}, "name"),
    ],
)
def test_malformed_faults_are_refused(raw: dict[str, Any], complaint: str) -> None:
    with pytest.raises(SimulationError, match=complaint):
        parse_fault(raw)


def test_every_preset_is_valid() -> None:
    presets = sorted(PRESET_DIR.glob("*.toml"))
    names = {p.stem for p in presets}
    assert {"h2d-zeros", "bf16-fp32-zeros", "randn-zeros", "crash", "hang"} <= names
    for path in presets:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
        assert set(data) == {"description", "fault"}, path.name
        assert isinstance(data["description"], str) and len(data["description"]) > 20, path.name
        parsed = [parse_fault(raw) for raw in data["fault"]]
        assert parsed, path.name
        assert len({f.name for f in parsed}) == len(parsed), path.name
        for f in parsed:
            assert f.description, (path.name, f.name)


# -- conditions, fractions, cures -------------------------------------------------------------


def test_conditions_select_calls() -> None:
    f = parse_fault(
        fault(
            when={
                "methods": ["to", "copy_"],
                "dtypes": ["fp32"],
                "min_bytes": 8,
                "max_bytes": 64,
                "pinned": False,
                "non_blocking": True,
                "on_device": True,
            }
        )
    )
    good = CallInfo(op="h2d", method="to", dtype="float32", nbytes=60, pinned=False, non_blocking=True, on_device=True)
    assert f.matches(good)
    for change in (
        {"op": "d2h"},
        {"method": "cuda"},
        {"dtype": "float16"},
        {"nbytes": 4},
        {"nbytes": 65},
        {"pinned": True},
        {"pinned": None},
        {"non_blocking": False},
        {"on_device": False},
    ):
        assert not f.matches(CallInfo(**{**good.__dict__, **change})), change
    anything = parse_fault(fault(op="any"))
    assert anything.matches(CallInfo(op="randperm"))


def test_to_dtypes_match_conversions_only() -> None:
    f = parse_fault(fault(op="convert", when={"dtypes": ["bf16"], "to_dtypes": ["torch.float32"]}))
    assert f.matches(CallInfo(op="convert", dtype="bfloat16", to_dtype="float32"))
    assert not f.matches(CallInfo(op="convert", dtype="bfloat16", to_dtype="float16"))
    assert not f.matches(CallInfo(op="convert", dtype="bfloat16"))


@pytest.mark.parametrize(("fraction", "hits"), [(1.0, list(range(12))), (0.5, [0, 2, 4, 6, 8, 10]), (0.25, [0, 4, 8])])
def test_fraction_hits_every_kth_call(fraction: float, hits: list[int]) -> None:
    engine = FaultEngine({"fault": [fault(effect={"kind": "zeros", "fraction": fraction})]}, {})
    call = CallInfo(op="h2d")
    fired = [i for i in range(12) if engine.decide(call) is not None]
    assert fired == hits
    assert engine.faults[0].matched == 12 and engine.faults[0].fired == len(hits)


def test_cures_and_conditional_faults() -> None:
    spec = {
        "fault": [
            fault(name="any-cure", cured_by=["HSA_ENABLE_SDMA=0", "AMD_SERIALIZE_COPY=3"]),
            fault(name="all-cure", cured_by_all=["A=1", "B=2"]),
            fault(name="side-effect", only_when_set=["HSA_ENABLE_SDMA=0"]),
            fault(name="bare-key", cured_by=["SOME_FLAG"]),
        ]
    }

    def active_names(environ: dict[str, str]) -> set[str]:
        return {f.name for f in FaultEngine(spec, environ).faults}

    assert active_names({}) == {"any-cure", "all-cure", "bare-key"}
    assert active_names({"HSA_ENABLE_SDMA": "1"}) == {"any-cure", "all-cure", "bare-key"}  # wrong value
    assert active_names({"HSA_ENABLE_SDMA": "0"}) == {"all-cure", "side-effect", "bare-key"}
    assert active_names({"AMD_SERIALIZE_COPY": "3"}) == {"all-cure", "bare-key"}
    assert active_names({"A": "1"}) == {"any-cure", "all-cure", "bare-key"}
    assert active_names({"A": "1", "B": "2"}) == {"any-cure", "bare-key"}
    assert active_names({"SOME_FLAG": ""}) == {"any-cure", "all-cure"}
    messages = FaultEngine(spec, {"HSA_ENABLE_SDMA": "0"}).messages
    assert any("any-cure" in m and "cured by HSA_ENABLE_SDMA=0" in m for m in messages)
    assert any("side-effect" in m and m.endswith("active") for m in messages)
    assert any("side-effect" in m and "inactive" in m for m in FaultEngine(spec, {}).messages)


def test_pinned_nonblocking_d2h_condition_of_the_rkb002_preset() -> None:
    with open(PRESET_DIR / "roundtrip-pinned-zeros.toml", "rb") as handle:
        data = tomllib.load(handle)
    engine = FaultEngine({"fault": data["fault"]}, {})
    assert engine.decide(CallInfo(op="d2h", method="copy_", pinned=True, non_blocking=True)) is not None
    assert engine.decide(CallInfo(op="d2h", method="copy_", pinned=False, non_blocking=True)) is None
    assert engine.decide(CallInfo(op="d2h", method="copy_", pinned=True, non_blocking=False)) is None
    assert engine.decide(CallInfo(op="h2d", pinned=True, non_blocking=True)) is None
    assert FaultEngine({"fault": data["fault"]}, {"AMD_SERIALIZE_COPY": "2"}).faults == []


# -- effects through the operations layer and the wrappers ------------------------------------


def test_ops_layer_faults_a_copy_once_and_never_the_source(active: Any) -> None:
    engine = active(fault(when={"max_bytes": 64}))
    source = torch.arange(1.0, 5.0)
    with simulate.bypassed():
        moved = ops.h2d(source, "cpu", method="to")
    assert torch.equal(moved, torch.zeros(4))
    assert torch.equal(source, torch.arange(1.0, 5.0))
    assert engine.faults[0].matched == 1  # the wrapped .to inside ops did not count again
    big = torch.arange(1.0, 101.0)
    assert torch.equal(ops.h2d(big, "cpu"), big)


def test_wrappers_fault_library_calls_unless_bypassed(active: Any) -> None:
    engine = active(fault(when={"max_bytes": 64}))
    source = torch.arange(1.0, 5.0)
    moved = source.to("cpu")  # library-style call, on a thread that is not bypassed
    assert torch.equal(moved, torch.zeros(4))
    assert torch.equal(source, torch.arange(1.0, 5.0))
    with simulate.bypassed():
        assert source.to("cpu") is source
        with simulate.exposed():
            assert torch.equal(source.to("cpu"), torch.zeros(4))
    assert torch.equal(source.to(torch.float64), source.double())  # a conversion is not a copy
    assert engine.faults[0].matched == 2


def test_wrapped_conversions_and_generators(active: Any) -> None:
    active(
        fault(name="conv", op="convert", when={"dtypes": ["bfloat16"], "to_dtypes": ["float32"]}),
        fault(name="gen", op="randn", effect={"kind": "nan"}),
    )
    x = torch.full((8,), 1.5, dtype=torch.bfloat16)
    assert torch.equal(x.float(), torch.zeros(8))
    assert torch.equal(x.to(torch.float32), torch.zeros(8))
    assert torch.equal(x.half(), torch.full((8,), 1.5, dtype=torch.float16))
    samples = torch.randn(16)
    assert int(torch.isnan(samples).sum()) == 2  # every 8th element
    assert not torch.isnan(torch.rand(16)).any()


def test_stale_copy_keeps_the_destination(active: Any) -> None:
    active(fault(op="h2d", when={"methods": ["copy_"]}, effect={"kind": "stale"}))
    destination = torch.full((4,), 7.0)
    with simulate.bypassed():
        ops.h2d(torch.ones(4), "cpu", method="copy_", out=destination)
    assert torch.equal(destination, torch.full((4,), 7.0))
    fresh = ops.h2d(torch.ones(4), "cpu", method="to")
    assert torch.equal(fresh, torch.ones(4))  # only copy_ is affected


@pytest.mark.parametrize(
    ("effect", "check"),
    [
        ("zeros", lambda out, ref: bool((out == 0).all())),
        ("partial_zeros", lambda out, ref: int((out == 0).sum()) == 3 and torch.equal(out[1:4], ref[1:4])),
        ("nan", lambda out, ref: int(torch.isnan(out).sum()) == 2),
        ("bitflip", lambda out, ref: int((out != ref).sum()) == 1 and bool(torch.isfinite(out).all())),
        ("stale", lambda out, ref: bool((out.view(torch.int32) == 0x5A5A5A5A).all())),
    ],
)
def test_data_effects(active: Any, effect: str, check: Any) -> None:
    active(fault(op="d2d", effect={"kind": effect}))
    ref = torch.arange(1.0, 13.0)
    with simulate.bypassed():
        out = ops.d2d(ref, method="clone")
    assert check(out, ref)
    assert torch.equal(ref, torch.arange(1.0, 13.0))


def test_nan_on_integers_flips_a_bit(active: Any) -> None:
    active(fault(op="randint", effect={"kind": "nan"}))
    with simulate.bypassed():
        out = ops.randint(0, 10, [64], dtype=torch.int64, device="cpu", generator=torch.Generator().manual_seed(1))
        ref = torch.randint(0, 10, (64,), dtype=torch.int64, generator=torch.Generator().manual_seed(1))
    assert int((out != ref).sum()) == 1


def test_exception_effect_raises_the_message(active: Any) -> None:
    active(fault(op="convert", effect={"kind": "exception", "message": "HIP error: invalid device function"}))
    with simulate.bypassed(), pytest.raises(RuntimeError, match="invalid device function"):
        ops.convert(torch.ones(3), torch.float16, method="half")


def test_inactive_simulation_changes_nothing() -> None:
    simulate.deactivate()
    x = torch.arange(1.0, 5.0)
    assert x.to("cpu") is x
    assert torch.equal(ops.h2d(x, "cpu"), x)


def test_oom_effect_raises_out_of_memory(active: Any) -> None:
    active(fault(op="d2d", effect={"kind": "oom", "message": "HIP out of memory. Tried to allocate 2.00 GiB"}))
    with simulate.bypassed(), pytest.raises(torch.OutOfMemoryError, match="Tried to allocate"):
        ops.d2d(torch.ones(3), method="clone")


# -- how invariant probes count an all-zero generator ------------------------------------------


def _context(probe_id: str) -> Any:
    from gpuprobe.worker.context import ProbeContext

    return ProbeContext(torch, "cpu", 11, probe_id)


@pytest.mark.parametrize("effect", ["zeros", "partial_zeros"])
def test_randperm_violations_count_every_zero(active: Any, effect: str) -> None:
    from gpuprobe.worker.probes.rng import run as rng_run

    active(fault(op="randperm", effect={"kind": effect}))
    with simulate.bypassed():
        check = rng_run.run_randperm(_context("rng.randperm.t"), n=1024).measurement
    assert check["violations"] == check["zero_violations"]
    if effect == "zeros":
        assert check["violations"] == check["checked"] == 1024  # judged "all zeros"
    else:
        assert check["violations"] in (256, 257)  # judged "partial zeros"


def test_randperm_duplicates_are_a_mismatch(active: Any) -> None:
    from gpuprobe.worker.probes.rng import run as rng_run

    active(fault(op="randperm", effect={"kind": "bitflip"}))
    with simulate.bypassed():
        check = rng_run.run_randperm(_context("rng.randperm.t"), n=1024).measurement
    assert check["violations"] in (1, 2) and "more than once" in check["example"]


@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_all_zero_draws_violate_every_item(active: Any, replacement: bool) -> None:
    from gpuprobe.worker.probes.rng import run as rng_run

    active(fault(op="multinomial", effect={"kind": "zeros"}))
    with simulate.bypassed():
        check = rng_run.run_multinomial(
            _context("rng.multinomial.t"), dtype="float32", replacement=replacement
        ).measurement
    assert check["violations"] == check["checked"] == check["zero_violations"]


def test_repeat_of_a_constant_generator(active: Any) -> None:
    from gpuprobe.worker.probes.rng import run as rng_run

    active(fault(op="rand", effect={"kind": "zeros"}))
    with simulate.bypassed():
        check = rng_run.run_repeat(_context("rng.repeat.rand"), op="rand", n=4096).measurement
    assert check["violations"] == check["checked"] == check["zero_violations"] == 4096
    simulate.deactivate()
    with simulate.bypassed():
        healthy = rng_run.run_repeat(_context("rng.repeat.rand"), op="rand", n=4096).measurement
    assert healthy["violations"] == 0


@pytest.mark.parametrize("name", ["SIGABRT", "SIGSEGV", "SIGTERM", "SIGINT"])
def test_crash_dies_by_the_named_signal_after_the_message(name: str) -> None:
    import signal
    import subprocess
    import sys

    from conftest import PACKAGE_DIR

    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from gpuprobe.worker.simulate import crash; "
        f"print('before', flush=True); crash({name!r}, 'HIP error: the launch timed out and was terminated')"
    )
    out = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", code, str(PACKAGE_DIR)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == -getattr(signal, name)
    assert out.stdout == "before\n"
    assert out.stderr.startswith("HIP error: the launch timed out and was terminated\n")
