"""Framework switches: the wire format, applying and reading back on the CPU torch, the start-up
hook of ``gpuprobe run --profile``, the worker, the simulation's live cures, ``apply_profile``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomllib
from conftest import PACKAGE_DIR, REPO, load_preset, run_plan
from judge_mirror import result_classes

from gpuprobe import ProfileError, apply_profile, switches
from gpuprobe.switches import SWITCHES, SwitchError
from gpuprobe.worker import main as worker_main
from gpuprobe.worker import ops_math, simulate
from gpuprobe.worker.probes.sweep import cases as sweep_cases
from gpuprobe.worker.simulate import FaultEngine, SimulationError, parse_fault

torch = pytest.importorskip("torch")

HOOK_DIR = PACKAGE_DIR / "gpuprobe" / "startup"
CUDNN_SDP_OFF = "torch.backends.cuda.enable_cudnn_sdp=False"
PROBE_SIDE = "gpuprobe.inputs.contiguous"
AOT_CACHE = "torch._functorch.config.enable_autograd_cache"
AOT_CACHE_OFF = f"{AOT_CACHE}=False"


@pytest.fixture(autouse=True)
def restore_switches() -> Iterator[None]:
    """Every switch as it was before the test: they are process-wide torch state."""
    before = {}
    for name in SWITCHES:
        # A switch this torch lacks has nothing to restore.
        with contextlib.suppress(SwitchError):
            before[name] = switches.read(torch, name)
    yield
    for name, value in before.items():
        # Raw: the state before may lie outside the allowed values (linalg ``default``).
        switches._set(torch, SWITCHES[name], value)


def child_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", switches.ENV_VAR, "GPUPROBE_SWITCHES_INHERIT")
    }
    env.update(extra)
    return env


def run_child(code: str, env: dict[str, str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


# -- the wire format -------------------------------------------------------------------------


def test_parse_keeps_the_order_and_ignores_blanks() -> None:
    text = f" {CUDNN_SDP_OFF} ; torch.backends.cudnn.benchmark = False;;torch.set_float32_matmul_precision=high;"
    assert switches.parse(text) == [
        ("torch.backends.cuda.enable_cudnn_sdp", "False"),
        ("torch.backends.cudnn.benchmark", "False"),
        ("torch.set_float32_matmul_precision", "high"),
    ]
    assert switches.parse("") == switches.parse(None) == switches.parse(" ; ") == []
    assert switches.from_environ({}) == []
    assert switches.from_environ({switches.ENV_VAR: CUDNN_SDP_OFF}) == [
        ("torch.backends.cuda.enable_cudnn_sdp", "False")
    ]
    pairs = switches.parse(text)
    assert switches.parse(switches.format_pairs(pairs)) == pairs


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("torch.backends.cudnn.enabled", "'torch.backends.cudnn.enabled' is not NAME=VALUE"),
        (
            "torch.backends.cudnn.enabld=False",
            "'torch.backends.cudnn.enabld=False': 'torch.backends.cudnn.enabld' is not",
        ),
        ("HSA_ENABLE_SDMA=0", "is not a framework switch"),
        (
            "torch.backends.cudnn.enabled=0",
            "'torch.backends.cudnn.enabled=0': torch.backends.cudnn.enabled takes False or True",
        ),
        ("torch.backends.cudnn.enabled=false", "takes False or True, not 'false'"),
        ("torch._dynamo.config.disable=False", "takes True, not 'False'"),
        ("torch.backends.cuda.preferred_blas_library=hipblaslt", "takes cublas or cublaslt"),
        (f"{CUDNN_SDP_OFF};torch.backends.cuda.enable_cudnn_sdp=True", "given twice"),
    ],
)
def test_parse_errors_name_the_pair(text: str, complaint: str) -> None:
    with pytest.raises(SwitchError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        switches.parse(text)


def test_the_table_is_consistent() -> None:
    for name, switch in SWITCHES.items():
        assert switch.name == name and name.startswith(("torch.", "gpuprobe."))
        assert switch.allowed and switch.description
        assert switch.probe_side == name.startswith("gpuprobe.")
        for value in switch.allowed:
            assert switches.parse(f"{name}={value}") == [(name, value)]


# -- applying and reading back -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, s in SWITCHES.items() for v in s.allowed])
def test_every_switch_applies_and_reads_back(name: str, value: str) -> None:
    try:
        switches.read(torch, name)
    except SwitchError as exc:
        pytest.skip(str(exc))
    applied = switches.apply(torch, [(name, value)])
    assert applied == [switches.Applied(name, value, value)]
    assert switches.read(torch, name) == value
    assert switches.is_on(name, value, torch) and switches.is_on(name, value)


def test_switches_apply_in_order_and_change_torch() -> None:
    pairs = switches.parse(
        f"{CUDNN_SDP_OFF};torch.backends.cudnn.enabled=False;torch.use_deterministic_algorithms=warn_only"
    )
    switches.apply(torch, pairs)
    assert torch.backends.cuda.cudnn_sdp_enabled() is False
    assert torch.backends.cudnn.enabled is False
    assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    # Later wins on the same state: the order is the given one.
    switches.apply(
        torch, [("torch.set_float32_matmul_precision", "medium"), ("torch.set_float32_matmul_precision", "highest")]
    )
    assert torch.get_float32_matmul_precision() == "highest"


def test_a_switch_this_torch_lacks_is_refused() -> None:
    old = types.SimpleNamespace(__version__="2.1.0")
    with pytest.raises(SwitchError, match=r"^torch 2\.1\.0 has no torch\.backends\.cuda\.enable_cudnn_sdp$"):
        switches.apply(old, [("torch.backends.cuda.enable_cudnn_sdp", "False")])
    with pytest.raises(SwitchError, match="has no torch._inductor.config.triton.cudagraphs"):
        switches.read(old, "torch._inductor.config.triton.cudagraphs")
    assert switches.is_on("torch.backends.cudnn.enabled", "False", old) is False


def test_a_switch_that_does_not_read_back_is_refused() -> None:
    class Stubborn:
        """A settings object that ignores what is set (a build where the flag is fixed)."""

        enabled = True

        def __setattr__(self, key: str, value: Any) -> None:
            pass

    fake = types.SimpleNamespace(__version__="9.9", backends=types.SimpleNamespace(cudnn=Stubborn()))
    with pytest.raises(SwitchError, match=r"torch.backends.cudnn.enabled=False: set, but torch reads back True"):
        switches.apply(fake, [("torch.backends.cudnn.enabled", "False")])

    def broken(flag: bool) -> None:
        raise RuntimeError("no cuDNN in this build")

    fake = types.SimpleNamespace(
        __version__="9.9", backends=types.SimpleNamespace(cuda=types.SimpleNamespace(enable_cudnn_sdp=broken))
    )
    with pytest.raises(SwitchError, match="enable_cudnn_sdp=False: RuntimeError: no cuDNN in this build"):
        switches.apply(fake, [("torch.backends.cuda.enable_cudnn_sdp", "False")])


def test_probe_side_switch_holds_no_torch_state() -> None:
    assert not switches.probe_side_on(PROBE_SIDE)
    assert switches.apply(torch, [(PROBE_SIDE, "True")], in_job=True) == []  # never in a job
    assert not switches.probe_side_on(PROBE_SIDE)
    assert switches.apply(types.SimpleNamespace(), [(PROBE_SIDE, "True")]) == [
        switches.Applied(PROBE_SIDE, "True", "True")
    ]
    assert switches.probe_side_on(PROBE_SIDE) and sweep_cases.dense_inputs()
    assert switches.is_on(PROBE_SIDE, "True") and switches.read(None, PROBE_SIDE) == "True"


def test_python_lines() -> None:
    assert (
        switches.python_line("torch.backends.cuda.enable_cudnn_sdp", "False")
        == "torch.backends.cuda.enable_cudnn_sdp(False)"
    )
    assert switches.python_line("torch.backends.cudnn.enabled", "False") == "torch.backends.cudnn.enabled = False"
    assert (
        switches.python_line("torch.use_deterministic_algorithms", "warn_only")
        == "torch.use_deterministic_algorithms(True, warn_only=True)"
    )
    assert (
        switches.python_line("torch.use_deterministic_algorithms", "True") == "torch.use_deterministic_algorithms(True)"
    )
    assert (
        switches.python_line("torch._dynamo.config.disable", "True")
        == "import torch._dynamo; torch._dynamo.config.disable = True"
    )
    assert switches.python_import("torch._dynamo.config.disable") == "import torch._dynamo"
    assert (
        switches.python_line(AOT_CACHE, "False")
        == "import torch._functorch.config; torch._functorch.config.enable_autograd_cache = False"
    )
    assert switches.python_import(AOT_CACHE) == "import torch._functorch.config"
    assert switches.python_import("torch.backends.cudnn.enabled") == "import torch"
    assert (
        switches.python_line("torch.backends.cuda.preferred_blas_library", "cublaslt")
        == "torch.backends.cuda.preferred_blas_library('cublaslt')"
    )
    assert (
        switches.python_line("torch.set_float32_matmul_precision", "high")
        == "torch.set_float32_matmul_precision('high')"
    )
    with pytest.raises(SwitchError):
        switches.python_line("torch.backends.cudnn.enabled", "0")
    # Every line runs (after its import) and sets what it says. A program's own line runs
    # with the flags unfrozen (an earlier test may have imported torch.testing._internal,
    # which freezes them for the whole process).
    unfrozen = getattr(torch.backends, "__allow_nonbracketed_mutation")
    for name, switch in SWITCHES.items():
        if switch.probe_side:
            continue
        for value in switch.allowed:
            with unfrozen():
                exec(f"import torch\n{switches.python_line(name, value)}", {})  # noqa: S102
            assert switches.read(torch, name) == value, (name, value)


def test_the_catalogue_lists_the_same_switches() -> None:
    with open(REPO / "kb" / "catalogue.toml", "rb") as handle:
        entries = [e for e in tomllib.load(handle)["entry"] if e.get("kind") == "switch"]
    if not entries:
        pytest.skip("kb/catalogue.toml has no switch entries yet")
    listed: dict[str, set[str]] = {}
    for entry in entries:
        for name in entry["variables"]:
            assert name not in listed, f"{name} is listed twice"
            listed[name] = set(entry["allowed"])
            # The line a user is shown is the one gpuprobe would write.
            for value, line in entry.get("python", {}).items():
                assert line == switches.python_line(name, value), (entry["id"], value)
    assert listed == {name: set(s.allowed) for name, s in SWITCHES.items()}


# -- the start-up hook of ``gpuprobe run --profile`` ------------------------------------------------

TWO_SWITCHES = f"{CUDNN_SDP_OFF};torch.backends.cudnn.enabled=False"
REPORT = (
    "import os, torch; print(torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cudnn.enabled, "
    'os.environ.get("GPUPROBE_SWITCHES"), os.environ.get("PYTHONPATH"))'
)


def test_hook_applies_switches_after_import_torch_and_hides_itself() -> None:
    done = run_child(REPORT, child_env(PYTHONPATH=str(HOOK_DIR), GPUPROBE_SWITCHES=TWO_SWITCHES))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "None", "None"]
    assert "gpuprobe:" not in done.stderr


def test_hook_leaves_the_variables_with_inherit() -> None:
    code = 'import os; print(os.environ.get("GPUPROBE_SWITCHES")); print(os.environ.get("PYTHONPATH"))'
    env = child_env(PYTHONPATH=str(HOOK_DIR), GPUPROBE_SWITCHES=TWO_SWITCHES, GPUPROBE_SWITCHES_INHERIT="1")
    done = run_child(code, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [TWO_SWITCHES, str(HOOK_DIR)]


def test_hook_removes_only_its_own_directory(tmp_path: Path) -> None:
    code = 'import os; print(os.environ.get("PYTHONPATH"))'
    done = run_child(code, child_env(PYTHONPATH=f"{HOOK_DIR}{os.pathsep}{tmp_path}", GPUPROBE_SWITCHES=CUDNN_SDP_OFF))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path)


def test_hook_never_imports_torch_itself() -> None:
    code = 'import sys; print("torch" in sys.modules, any(type(f).__name__ == "_AfterImport" for f in sys.meta_path))'
    done = run_child(code, child_env(PYTHONPATH=str(HOOK_DIR), GPUPROBE_SWITCHES=TWO_SWITCHES))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]  # waiting for the job's own import
    assert done.stderr == ""


def test_hook_reports_a_bad_value_in_one_line_and_the_job_runs() -> None:
    code = 'import sys; print("job ran", "torch" in sys.modules)'
    done = run_child(code, child_env(PYTHONPATH=str(HOOK_DIR), GPUPROBE_SWITCHES="torch.backends.cudnn.enabled=0"))
    assert done.returncode == 0
    assert done.stdout.strip() == "job ran False"
    assert done.stderr.splitlines() == [
        (
            "gpuprobe: profile: switches not applied: 'torch.backends.cudnn.enabled=0': torch.backends.cudnn.enabled "
            "takes False or True, not '0'"
        )
    ]


def test_hook_reports_a_switch_torch_lacks_and_applies_the_others(tmp_path: Path) -> None:
    # A stand-in torch package: only cuDNN's flag, no attention switches.
    package = tmp_path / "torch"
    (package / "backends").mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.0.1"\nfrom . import backends\n')
    (package / "backends" / "__init__.py").write_text("from . import cudnn\n")
    (package / "backends" / "cudnn.py").write_text("enabled = True\n")
    code = "import torch; print(torch.backends.cudnn.enabled)"
    env = child_env(
        PYTHONPATH=f"{HOOK_DIR}{os.pathsep}{tmp_path}",
        GPUPROBE_SWITCHES=f"{CUDNN_SDP_OFF};torch.backends.cudnn.enabled=False",
    )
    done = run_child(code, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert done.stderr.splitlines() == [
        f"gpuprobe: profile: cannot apply {CUDNN_SDP_OFF}: torch 0.0.1 has no torch.backends.cuda.enable_cudnn_sdp"
    ]


def test_hook_chains_to_the_next_sitecustomize(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text('import os\nos.environ["CHAINED"] = "yes"\n')
    code = 'import os; print(os.environ.get("CHAINED"))'
    done = run_child(code, child_env(PYTHONPATH=f"{HOOK_DIR}{os.pathsep}{tmp_path}", GPUPROBE_SWITCHES=CUDNN_SDP_OFF))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "yes"


def test_the_hook_is_inert_when_imported_as_a_module() -> None:
    import importlib

    before = dict(os.environ)
    importlib.import_module("gpuprobe.startup.sitecustomize")
    assert dict(os.environ) == before
    assert not any(type(f).__name__ == "_AfterImport" for f in sys.meta_path)


def test_when_imported_runs_at_once_for_an_imported_module() -> None:
    seen: list[Any] = []
    assert switches.when_imported(seen.append, "json") is None
    assert seen == [json]


# -- the worker ------------------------------------------------------------------------------------

SDPA_PROBES = [
    "nn.sdpa.bf16.default.d64.s1024",
    "nn.sdpa.fp16.default.d64.s1024.bwd",
    "nn.sdpa.bf16.cudnn.d64.s1024",
    "nn.sdpa.bf16.math.d64.s1024",
]


def test_preset_fails_the_default_backend_and_the_switch_cures_it_live() -> None:
    spec = load_preset("sdpa-default-cudnn-nan")
    broken = run_plan(SDPA_PROBES, simulate=spec)
    assert broken.returncode == 0, broken.stderr[-3000:]
    assert result_classes(broken.results()) == {
        "nn.sdpa.bf16.default.d64.s1024": "nan_inf",
        "nn.sdpa.fp16.default.d64.s1024.bwd": "nan_inf",
        "nn.sdpa.bf16.cudnn.d64.s1024": "skip",  # no cuDNN attention on the CPU
        "nn.sdpa.bf16.math.d64.s1024": "pass",
    }
    assert not any("framework switches applied" in log["message"] for log in broken.of("log"))

    cured = run_plan(SDPA_PROBES, simulate=spec, env_extra={switches.ENV_VAR: CUDNN_SDP_OFF})
    assert cured.returncode == 0, cured.stderr[-3000:]
    got = result_classes(cured.results())
    assert got["nn.sdpa.bf16.default.d64.s1024"] == got["nn.sdpa.fp16.default.d64.s1024.bwd"] == "pass"
    assert got["nn.sdpa.bf16.cudnn.d64.s1024"] == "skip"
    messages = [log["message"] for log in cured.of("log")]
    assert f"framework switches applied: {CUDNN_SDP_OFF} (reads back False)" in messages
    assert any("sdpa-default-picks-cudnn-nan" in m and f"cured live by {CUDNN_SDP_OFF}" in m for m in messages)
    # The forced cuDNN backend is cured by nothing.
    assert any("'sdpa-cudnn-nan'" in m and m.endswith("active") for m in messages)


def test_a_refused_switch_makes_every_probe_not_tested() -> None:
    run = run_plan(["nn.sdpa.bf16.math.d64.s128"], env_extra={switches.ENV_VAR: "torch.backends.cudnn.enabled=maybe"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.hello["unusable"].startswith("framework switch refused: 'torch.backends.cudnn.enabled=maybe'")
    assert not run.of("result") and run.of("done")


def test_the_worker_helper() -> None:
    applied, why = worker_main.apply_switches(torch, {switches.ENV_VAR: "torch.backends.cudnn.benchmark=True"})
    assert why is None and applied == [switches.Applied("torch.backends.cudnn.benchmark", "True", "True")]
    assert worker_main.apply_switches(torch, {}) == ([], None)
    applied, why = worker_main.apply_switches(
        types.SimpleNamespace(__version__="1.0"), {switches.ENV_VAR: CUDNN_SDP_OFF}
    )
    assert applied == [] and why == "framework switch refused: torch 1.0 has no torch.backends.cuda.enable_cudnn_sdp"


def test_the_aotautograd_cache_switch_applies_in_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A config module torch does not import by itself: the worker imports it, sets the
    attribute and reads back False."""
    monkeypatch.delenv("TORCHINDUCTOR_AUTOGRAD_CACHE", raising=False)
    run = run_plan([], env_extra={switches.ENV_VAR: AOT_CACHE_OFF})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "unusable" not in run.hello, run.hello
    messages = [log["message"] for log in run.of("log")]
    assert f"framework switches applied: {AOT_CACHE_OFF} (reads back False)" in messages


def test_the_aotautograd_cache_variable_beats_the_switch_and_the_trial_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TORCHINDUCTOR_AUTOGRAD_CACHE forces the setting whatever a program sets: with it at 1
    the switch reads back True, so the trial tests nothing and says so."""
    monkeypatch.setenv("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    run = run_plan([], env_extra={switches.ENV_VAR: AOT_CACHE_OFF})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.hello["unusable"] == f"framework switch refused: {AOT_CACHE_OFF}: set, but torch reads back True"


# -- the simulation's live cures -------------------------------------------------------------------


def sdpa_fault(**extra: Any) -> dict[str, Any]:
    return {"name": "live", "op": "sdpa", "when": {"methods": ["default"]}, "effect": {"kind": "nan"}, **extra}


@pytest.mark.parametrize(
    ("setting", "complaint"),
    [
        ("torch.backends.cuda.enable_cudnn_sdp", "takes torch.backends.cuda.enable_cudnn_sdp=False or"),
        ("torch.backends.cuda.enable_cudnn_sdp=0", "framework switch"),
        ("torch.backends.cuda.enable_cudnn_sdpa=False", "neither an environment variable nor a framework switch"),
    ],
)
def test_switch_cures_are_validated(setting: str, complaint: str) -> None:
    for key in ("cured_by", "cured_by_all", "only_when_set"):
        with pytest.raises(SimulationError, match=complaint):
            parse_fault(sdpa_fault(**{key: [setting]}))


def nan_count(engine: FaultEngine) -> int:
    q = torch.ones(1, 1, 8, 4)
    with simulate.bypassed():
        out = ops_math.sdpa("default", lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    assert engine.faults  # still active: the cure is judged per call
    return int(out.isnan().sum())


def test_a_switch_cures_live_at_each_call() -> None:
    engine = simulate.activate(
        {"source": "test", "fault": [sdpa_fault(cured_by=[CUDNN_SDP_OFF, "HSA_ENABLE_SDMA=0"])]}, torch, "cpu", {}
    )
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        assert nan_count(engine) == 4
        assert any("judged live at every call" in m for m in engine.messages)
        torch.backends.cuda.enable_cudnn_sdp(False)
        assert nan_count(engine) == 0
        assert engine.messages == [
            f"simulated fault 'live' (sdpa/nan): cured live by {CUDNN_SDP_OFF} (judged at every call)"
        ]
        torch.backends.cuda.enable_cudnn_sdp(True)
        assert nan_count(engine) == 4
        assert engine.faults[0].matched == 2  # the cured call was never counted
    finally:
        simulate.deactivate()
    # The environment part keeps its construction-time rule.
    assert (
        FaultEngine(
            {"fault": [sdpa_fault(cured_by=[CUDNN_SDP_OFF, "HSA_ENABLE_SDMA=0"])]}, {"HSA_ENABLE_SDMA": "0"}
        ).faults
        == []
    )


def test_live_cured_by_all_and_only_when_set() -> None:
    both = sdpa_fault(name="both", cured_by_all=[CUDNN_SDP_OFF, "torch.backends.cudnn.enabled=False"])
    env_and_switch = sdpa_fault(name="mixed", cured_by_all=[CUDNN_SDP_OFF, "A=1"])
    side = sdpa_fault(name="side", only_when_set=["torch.backends.cuda.enable_flash_sdp=False"])
    call = simulate.CallInfo(op="sdpa", method="default")

    def hits(engine: FaultEngine) -> set[str]:
        return {f.name for f in engine.faults if f.matches(call) and engine._live_cure(f) is None}

    engine = FaultEngine({"fault": [both, env_and_switch, side]}, {})
    engine.bind(torch)
    torch.backends.cuda.enable_flash_sdp(True)
    switches.apply(torch, [("torch.backends.cudnn.enabled", "True")])
    torch.backends.cuda.enable_cudnn_sdp(False)
    assert hits(engine) == {"both", "mixed"}  # one switch of two; the mixed one lacks A=1
    switches.apply(torch, [("torch.backends.cudnn.enabled", "False")])
    assert hits(engine) == {"mixed"}
    torch.backends.cuda.enable_flash_sdp(False)
    assert hits(engine) == {"mixed", "side"}
    with_a = FaultEngine({"fault": [env_and_switch]}, {"A": "1"})
    with_a.bind(torch)
    assert hits(with_a) == set()
    assert with_a.decide(call) is None


def test_probe_side_switch_cures_a_sweep_layout_fault_live() -> None:
    f = {
        "name": "layout",
        "op": "sweep",
        "when": {"variants": ["noncontig"]},
        "effect": {"kind": "zeros"},
        "cured_by": [f"{PROBE_SIDE}=True"],
    }
    engine = FaultEngine({"fault": [f]}, {})
    call = simulate.CallInfo(op="sweep", method="add", variant="noncontig")
    assert engine.decide(call) is not None
    switches.apply(None, [(PROBE_SIDE, "True")])
    assert engine.decide(call) is None


def test_the_aotautograd_cache_switch_cures_a_compile_fault_live() -> None:
    """A step compiled under float16 autocast that is wrong only while AOTAutograd's cache
    is on (a cached graph of another setting served): cured the moment the switch is set."""
    f = {
        "name": "cached-graph",
        "op": "compile",
        "when": {"methods": ["ambient"], "variants": ["autocast_float16"]},
        "effect": {"kind": "zeros"},
        "cured_by": [AOT_CACHE_OFF],
    }
    engine = FaultEngine({"fault": [f]}, {})
    engine.bind(torch)
    call = simulate.CallInfo(op="compile", method="ambient", variant="autocast_float16", on_device=True)
    switches._set(torch, SWITCHES[AOT_CACHE], "True")
    assert engine.decide(call) is not None
    switches.apply(torch, [(AOT_CACHE, "False")])
    assert engine.decide(call) is None


def test_probe_side_switch_makes_layout_inputs_dense() -> None:
    case = sweep_cases.Case(0, "transposed", False)
    sample = types.SimpleNamespace(input=torch.randn(3, 4), args=[], kwargs={})
    (x, _, _), _, _ = sweep_cases.materialize(torch, sample, case, 1, device="cpu", upcast=False)
    assert not x.is_contiguous()
    switches.apply(None, [(PROBE_SIDE, "True")])
    (dense, _, _), _, _ = sweep_cases.materialize(torch, sample, case, 1, device="cpu", upcast=False)
    assert dense.is_contiguous() and torch.equal(dense, x)
    (ref, _, _), _, _ = sweep_cases.materialize(torch, sample, case, 1, device="cpu", upcast=True)
    assert not ref.is_contiguous()  # the reference keeps the layout
    assert sweep_cases.dense_input_notes({"base", "transposed"}) and not sweep_cases.dense_input_notes({"base", "nan"})


# -- apply_profile ----------------------------------------------------------------------------------


def fake_binary(tmp_path: Path, answer: dict[str, Any]) -> str:
    """A stand-in for ``gpuprobe profile export FILE --format json``."""
    path = tmp_path / "gpuprobe"
    path.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(answer))})\n")
    path.chmod(0o755)
    return str(path)


def answer(**extra: Any) -> dict[str, Any]:
    return {"set": {}, "unset": [], "simulated": False, "still_failing": [], **extra}


def test_profile_switches_apply_at_once_after_import_torch(tmp_path: Path) -> None:
    binary = fake_binary(
        tmp_path, answer(switches={"torch.backends.cuda.enable_cudnn_sdp": "False", PROBE_SIDE: "True"})
    )
    torch.backends.cuda.enable_cudnn_sdp(True)
    environ: dict[str, str] = {}
    got = apply_profile(tmp_path / "p.toml", force=True, gpuprobe_bin=binary, environ=environ)
    assert got == {"torch.backends.cuda.enable_cudnn_sdp": "False"}  # probe-side: never in a program
    assert torch.backends.cuda.cudnn_sdp_enabled() is False
    assert environ == {} and not switches.probe_side_on(PROBE_SIDE)


def test_profile_with_env_settings_is_refused_after_import_torch(tmp_path: Path) -> None:
    binary = fake_binary(
        tmp_path, answer(set={"HSA_ENABLE_SDMA": "0"}, switches={"torch.backends.cuda.enable_cudnn_sdp": "False"})
    )
    torch.backends.cuda.enable_cudnn_sdp(True)
    environ: dict[str, str] = {}
    with pytest.raises(ProfileError, match="before torch is imported"):
        apply_profile(tmp_path / "p.toml", force=True, gpuprobe_bin=binary, environ=environ)
    assert environ == {} and torch.backends.cuda.cudnn_sdp_enabled() is True


@pytest.mark.parametrize("bad", [{"torch.backends.cudnn.enabled": "off"}, {"LD_PRELOAD": "x"}, ["not", "a", "table"]])
def test_profile_with_a_bad_switch_is_refused(tmp_path: Path, bad: Any) -> None:
    binary = fake_binary(tmp_path, answer(set={"HSA_ENABLE_SDMA": "0"}, switches=bad))
    environ: dict[str, str] = {}
    with pytest.raises(ProfileError):
        apply_profile(tmp_path / "p.toml", force=True, gpuprobe_bin=binary, environ=environ)
    assert environ == {}


def test_profile_switches_wait_for_the_programs_import_torch(tmp_path: Path) -> None:
    binary = fake_binary(
        tmp_path, answer(set={"HSA_ENABLE_SDMA": "0"}, switches={"torch.backends.cuda.enable_cudnn_sdp": "False"})
    )
    code = textwrap.dedent(
        f"""
        import os, sys
        import gpuprobe
        got = gpuprobe.apply_profile("p.toml", force=True, gpuprobe_bin={binary!r})
        print(sorted(got.items()), "torch" in sys.modules, os.environ["HSA_ENABLE_SDMA"])
        import torch
        print(torch.backends.cuda.cudnn_sdp_enabled())
        """
    )
    done = run_child(code, child_env(PYTHONPATH=str(PACKAGE_DIR)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[('HSA_ENABLE_SDMA', '0'), ('torch.backends.cuda.enable_cudnn_sdp', 'False')] False 0",
        "False",
    ]


def test_an_old_binarys_answer_has_no_switches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = fake_binary(tmp_path, answer(set={"HSA_ENABLE_SDMA": "0"}))
    environ: dict[str, str] = {}
    # A program that has not imported torch yet (as test_profile.py models it).
    monkeypatch.delitem(sys.modules, "torch")
    assert apply_profile(tmp_path / "p.toml", force=True, gpuprobe_bin=binary, environ=environ) == {
        "HSA_ENABLE_SDMA": "0"
    }
    assert environ == {"HSA_ENABLE_SDMA": "0"}
    assert not any(type(f).__name__ == "_AfterImport" for f in sys.meta_path)


def test_switches_apply_after_the_global_flags_were_frozen() -> None:
    """``torch.testing._internal`` (the operator database, many test suites) freezes the
    ``torch.backends`` flags: a switch still applies, as torch's own ``flags()`` would."""
    flag = "__allow_nonbracketed_mutation_flag"
    before = getattr(torch.backends, flag, True)
    torch.backends.disable_global_flags()
    try:
        assert torch.backends.flags_frozen()
        with pytest.raises(RuntimeError):
            torch.backends.cudnn.benchmark = True
        applied = switches.apply(torch, [("torch.backends.cudnn.benchmark", "True"), ("torch.backends.cudnn.enabled", "False")])
        assert [a.read_back for a in applied] == ["True", "False"]
        assert torch.backends.flags_frozen(), "the freeze itself is left as it was"
    finally:
        setattr(torch.backends, flag, before)
