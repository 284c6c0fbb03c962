"""Unit tests of the worker's building blocks (in process)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PACKAGE_DIR, REPO
from gpuprobe.worker import catalog, envinfo, patterns, stats
from gpuprobe.worker.compare import CompareAccumulator
from gpuprobe.worker.probes.copy import run as copy_run
from gpuprobe.worker.probes.dtype import run as dtype_run

torch = pytest.importorskip("torch")


# -- seeds and patterns ------------------------------------------------------------------------


def test_derive_seed_is_stable_and_separates_probes() -> None:
    a = patterns.derive_seed(1234, "copy.h2d.pageable.tiny.nonblocking")
    assert a == patterns.derive_seed(1234, "copy.h2d.pageable.tiny.nonblocking")
    assert 0 <= a < 2**63
    others = {
        patterns.derive_seed(1235, "copy.h2d.pageable.tiny.nonblocking"),
        patterns.derive_seed(1234, "copy.h2d.pinned.tiny.nonblocking"),
        patterns.derive_seed(1234, "copy.h2d.pageable.tiny.nonblocking", "trial1"),
    }
    assert a not in others and len(others) == 3
    # Independent of Python's per-process hash randomization.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from gpuprobe.worker.patterns import derive_seed; print(derive_seed(1234, 'x.y'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(PACKAGE_DIR)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONHASHSEED="77"),
    )
    assert int(out.stdout) == patterns.derive_seed(1234, "x.y")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_patterns_are_finite_nonzero_and_not_periodic(dtype: str) -> None:
    n = 1 << 18
    values = patterns.pattern(torch, n, dtype, seed=99)
    assert values.dtype == getattr(torch, dtype) and values.numel() == n
    as_float = values.float()
    assert bool(torch.isfinite(as_float).all()) and not bool((as_float == 0).any())
    bits = values.view(torch.int16 if dtype != "float32" else torch.int32)
    for shift in (1, 1 << 10, 1 << 16):
        same = (bits[shift:] == bits[:-shift]).float().mean().item()
        assert same < 0.01, (shift, same)
    assert torch.equal(values, patterns.pattern(torch, n, dtype, seed=99))
    assert not torch.equal(values, patterns.pattern(torch, n, dtype, seed=100))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_large_patterns_vary_from_block_to_block(dtype: str) -> None:
    block = patterns.BLOCK
    n = 3 * block + 5
    values = patterns.pattern(torch, n, dtype, seed=4)
    as_float = values.float()
    assert bool(torch.isfinite(as_float).all()) and not bool((as_float == 0).any())
    bits = values.view(torch.int16 if dtype != "float32" else torch.int32)
    first = patterns._bits_for(torch, patterns.hash32(torch, 0, block, 4), dtype)
    assert torch.equal(bits[:block], first)
    for k in (1, 2):
        same = (bits[k * block : (k + 1) * block] == bits[:block]).float().mean().item()
        assert same < 0.01, (k, same)
    assert torch.equal(values, patterns.pattern(torch, n, dtype, seed=4))


def test_pattern_index_wraparound_is_detectable() -> None:
    # Elements 2^31 apart differ: a copy that wraps its index at 2^31 cannot pass.
    seed = 5
    low = patterns.hash32(torch, 0, 4096, seed)
    high = patterns.hash32(torch, 1 << 31, (1 << 31) + 4096, seed)
    assert int((low == high).sum()) == 0


def test_canaries_are_outside_the_pattern_range() -> None:
    for dtype in ("float32", "float16", "bfloat16"):
        values = patterns.pattern(torch, 1 << 16, dtype, seed=3)
        canary = patterns.fill_canary(torch, torch.empty(4, dtype=getattr(torch, dtype)))
        assert bool(torch.isfinite(canary.float()).all()) and not bool((canary == 0).any())
        assert canary.float().abs().max() > values.float().abs().max()
        view = torch.int16 if dtype != "float32" else torch.int32
        assert not bool((values.view(view) == patterns.canary_value(dtype)).any())


# -- comparison ------------------------------------------------------------------------------


def test_compare_counts_and_classes() -> None:
    ref = torch.tensor([1.0, 2.0, 3.0, 4.0])
    acc = CompareAccumulator(torch)
    acc.add(ref.clone(), ref)
    acc.add(torch.zeros(4), ref)
    acc.add(torch.tensor([1.0, 0.0, float("nan"), 4.0]), ref)
    canary = patterns.canary_value("float32")
    stale = patterns.fill_canary(torch, torch.empty(4))
    stale[0] = 1.0
    acc.add(stale, ref, canary=canary)
    s = acc.stats()
    assert s["kind"] == "compare" and s["n"] == 16 and s["trials"] == 4
    assert s["mismatches"] == 4 + 2 + 3
    assert s["zeros_where_nonzero"] == 5 and s["nonfinite_where_finite"] == 1 and s["unchanged"] == 3
    assert s["failed_trials"] == 3 and s["all_zero_trials"] == 1
    first = s["first_mismatch"]
    assert first["trial"] == 1 and first["index"] == 0
    assert first["expected"] == "1.0 (0x3f800000)" and first["found"] == "0.0 (0x00000000)"


def test_compare_nan_payloads_and_negative_zero() -> None:
    ref = torch.tensor([float("nan"), 0.0, 1.0], dtype=torch.float32).to(torch.bfloat16)
    out = ref.clone()
    out.view(torch.int16)[0] = 0x7FFF  # another NaN payload
    strict, lenient = CompareAccumulator(torch), CompareAccumulator(torch)
    assert strict.add(out, ref) == 1
    assert lenient.add(out, ref, nan_equal=True) == 0
    signed = CompareAccumulator(torch)
    assert signed.add(torch.tensor([-0.0]), torch.tensor([0.0])) == 1  # bits differ


def test_segmented_compare_finds_all_zero_copies() -> None:
    sizes = torch.tensor([1, 3, 2, 4])
    ref = torch.arange(1.0, 11.0)
    out = ref.clone()
    out[1:4] = 0  # copy 1 entirely zero
    out[7] = 0  # copy 3 partly zero
    acc = CompareAccumulator(torch)
    acc.add_segmented(out, ref, sizes)
    s = acc.stats()
    assert s["trials"] == 4 and s["failed_trials"] == 2 and s["all_zero_trials"] == 1
    assert s["mismatches"] == 4 and s["zeros_where_nonzero"] == 4
    assert s["first_mismatch"]["trial"] == 1 and s["first_mismatch"]["index"] == 0


def test_compare_handles_chunks_and_wrong_shapes() -> None:
    n = (1 << 24) + 5
    ref = torch.ones(n, dtype=torch.float16)
    out = ref.clone()
    out[-1] = 0
    acc = CompareAccumulator(torch)
    assert acc.add(out, ref) == 1
    assert acc.stats()["first_mismatch"]["index"] == n - 1
    wrong = CompareAccumulator(torch)
    assert wrong.add(torch.ones(3), torch.ones(4)) == 4


# -- statistics ------------------------------------------------------------------------------


def test_p_zero_choices() -> None:
    assert stats.p_zero_uniform("float32") == 2.0**-24
    assert stats.p_zero_uniform("float16") == 2.0**-11
    assert stats.p_zero_uniform("bfloat16") == 2.0**-8
    assert stats.p_zero_uniform("float64") == 2.0**-24
    assert stats.p_zero_normal("float32") == pytest.approx(2.0**-23)
    # float16: P(|x| < 2^-25) = erf(2^-25 / sqrt 2), about 2.4e-8, plus the allowance.
    assert stats.p_zero_normal("float16") == pytest.approx(math.erf(2.0**-25 / math.sqrt(2)) + 2.0**-23)
    assert stats.p_zero_uniform_int(-5, 5) == 0.1 and stats.p_zero_uniform_int(1, 5) == 0.0


def test_sample_stats_of_known_samples() -> None:
    samples = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, float("nan")])
    s = stats.sample_stats(torch, samples, {"kind": "uniform", "low": 0.0, "high": 1.0}, "float32")
    assert s["n"] == 6 and s["nonfinite"] == 1 and s["zeros"] == 1 and s["out_of_range"] == 1
    assert s["mean"] == 0.5 and s["var"] == pytest.approx(0.15625)
    assert s["min"] == 0.0 and s["max"] == 1.0 and s["chi2_dof"] == 63


def test_chi_square_is_near_its_dof_for_good_samples_and_huge_for_bad() -> None:
    g = torch.Generator().manual_seed(1)
    good = stats.sample_stats(
        torch, torch.randn(1 << 18, generator=g), {"kind": "normal", "mean": 0.0, "std": 1.0}, "float32"
    )
    assert 20 < good["chi2"] < 140
    bad = stats.sample_stats(
        torch, torch.rand(1 << 18, generator=g), {"kind": "normal", "mean": 0.0, "std": 1.0}, "float32"
    )
    assert bad["chi2"] > 10_000
    ints = stats.sample_stats(
        torch, torch.randint(0, 128, (1 << 16,), generator=g), {"kind": "uniform_int", "low": 0, "high": 128}, "int64"
    )
    assert 20 < ints["chi2"] < 140
    odd_range = stats.sample_stats(
        torch, torch.randint(0, 100, (100,)), {"kind": "uniform_int", "low": 0, "high": 100}, "int64"
    )
    assert "chi2" not in odd_range


# -- environment facts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "rocm", "environ", "expected"),
    [
        ("2.10.0+rocm7.1", True, {}, None),
        (
            "2.10.0+rocm7.1",
            True,
            {"PYTORCH_HIP_ALLOC_CONF": "a:1", "PYTORCH_CUDA_ALLOC_CONF": "b:2"},
            {"variable": "PYTORCH_CUDA_ALLOC_CONF", "value": "b:2", "shadowed": ["PYTORCH_HIP_ALLOC_CONF"]},
        ),
        (
            "2.8.0+rocm6.4",
            True,
            {"PYTORCH_ALLOC_CONF": "a:1", "PYTORCH_HIP_ALLOC_CONF": "c:3"},
            {"variable": "PYTORCH_HIP_ALLOC_CONF", "value": "c:3", "shadowed": ["PYTORCH_ALLOC_CONF"]},
        ),
        ("2.8.0+cu128", False, {"PYTORCH_HIP_ALLOC_CONF": "c:3"}, None),
        (
            "2.9.1+cu130",
            False,
            {"PYTORCH_ALLOC_CONF": "a:1", "PYTORCH_CUDA_ALLOC_CONF": "b:2", "PYTORCH_HIP_ALLOC_CONF": "c:3"},
            {
                "variable": "PYTORCH_CUDA_ALLOC_CONF",
                "value": "b:2",
                "shadowed": ["PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"],
            },
        ),
        (
            "2.15.0+cu132",
            False,
            {"PYTORCH_ALLOC_CONF": "a:1", "PYTORCH_HIP_ALLOC_CONF": "c:3"},
            {"variable": "PYTORCH_HIP_ALLOC_CONF", "value": "c:3", "shadowed": ["PYTORCH_ALLOC_CONF"]},
        ),
    ],
)
def test_allocator_conf_precedence(version: str, rocm: bool, environ: dict, expected: dict | None) -> None:
    assert envinfo.allocator_conf(version, rocm, environ) == expected


def test_allocator_conf_is_measured_when_torch_says_what_it_parsed() -> None:
    import torch

    if getattr(torch._C, "_accelerator_getAllocatorSettings", None) is None:
        pytest.skip("this torch does not expose its parsed allocator settings")
    environ = {"PYTORCH_ALLOC_CONF": "a:1", "PYTORCH_CUDA_ALLOC_CONF": "b:2"}

    class Reads:
        """A stand-in torch whose allocator parsed PYTORCH_ALLOC_CONF."""

        class _C:
            @staticmethod
            def _accelerator_getAllocatorSettings() -> str:
                return "a:1"

    conf = envinfo.allocator_conf("2.15.0", False, environ, torch=Reads)
    assert conf == {"variable": "PYTORCH_ALLOC_CONF", "value": "a:1", "shadowed": ["PYTORCH_CUDA_ALLOC_CONF"]}


def test_torch_version_parsing() -> None:
    assert envinfo.torch_version_tuple("2.10.0a0+rocm7.11.0a20251122") == (2, 10)
    assert envinfo.torch_version_tuple("garbage") == (0, 0)


def test_device_problem_reasons() -> None:
    assert envinfo.device_problem(torch, "cpu") is None
    assert "unknown device" in envinfo.device_problem(torch, "gpu0")
    if not torch.cuda.is_available():
        assert envinfo.device_problem(torch, "cuda:0") is not None


# -- catalog ---------------------------------------------------------------------------------


def test_tiers_nest() -> None:
    quick = {p.id for p in catalog.probes_in_tier("quick")}
    standard = {p.id for p in catalog.probes_in_tier("standard")}
    full = {p.id for p in catalog.probes_in_tier("full")}
    soak = {p.id for p in catalog.probes_in_tier("soak")}
    assert quick < standard < full
    # The soak tier is the standard tier plus the probes that exist only for it.
    assert standard < soak
    assert all(catalog.all_probes()[pid].tier == "soak" for pid in soak - standard)


def test_quick_dtype_matrix_is_the_float_matrix_on_the_device() -> None:
    quick = [p for p in catalog.probes_in_tier("quick") if p.id.startswith("dtype.")]
    assert len(quick) == 4 * 3 * 3
    assert all(p.params["where"] == "device" for p in quick)
    assert {p.params["method"] for p in quick} == {"to", "type", "float", "half", "bfloat16", "double"}


def test_every_probe_implementation_resolves() -> None:
    for probe in catalog.all_probes().values():
        assert callable(probe.resolve()), probe.id


# -- probe building blocks--------------------------------------------------------------------------


def test_dtype_inputs_respect_the_defined_domain() -> None:
    for src in ("float32", "float16", "bfloat16", "float64", "float8_e4m3fn"):
        values = dtype_run.build_inputs(torch, src, "int8", 7).to(torch.float64)
        assert bool(torch.isfinite(values).all())
        assert bool((values.trunc() >= -128).all()) and bool((values.trunc() <= 127).all())
        to_fp8 = dtype_run.build_inputs(torch, src, "float8_e4m3fn", 7).to(torch.float64)
        assert not bool(torch.isinf(to_fp8).any()) and not bool((to_fp8.abs() > 448).any())
    wide = dtype_run.build_inputs(torch, "int64", "float16", 7)
    assert bool((wide.abs() <= 2**24).all())
    ties = dtype_run.build_inputs(torch, "float32", "float16", 7).to(torch.float64)
    assert bool((ties == 1 + 2.0**-11).any()) or bool((ties == 2.0**-25).any())  # exact ties present


def test_send_to_device_keeps_structure() -> None:
    batch = {"a": torch.ones(2), "b": [torch.zeros(1), "text"], "c": (torch.ones(1),), "d": 3}
    moved = copy_run.send_to_device(batch, torch.device("cpu"), non_blocking=False, torch=torch)
    assert set(moved) == set(batch) and moved["b"][1] == "text" and isinstance(moved["c"], tuple) and moved["d"] == 3
    assert torch.equal(moved["a"], batch["a"]) and moved["a"].data_ptr() != batch["a"].data_ptr()


def test_memory_check_skips_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuprobe.worker import context
    from gpuprobe.worker.context import ProbeContext, SkipProbe

    monkeypatch.setattr(context, "host_available_bytes", lambda: 2 << 30)
    ctx = ProbeContext(torch, "cpu", 1, "copy.roundtrip.pageable.huge.blocking.fp16")
    with pytest.raises(SkipProbe, match="GiB of free host memory"):
        context.require_memory(ctx, 4 << 30, 4 << 30)


# -- the user-facing package -------------------------------------------------------------------


def test_package_import_is_light() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import gpuprobe; "
        "print(gpuprobe.__version__, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(PACKAGE_DIR)], capture_output=True, text=True, check=True)
    version, has_torch = out.stdout.split()
    assert version.count(".") == 2 and has_torch == "False"
    assert (PACKAGE_DIR / "gpuprobe" / "py.typed").exists()


def test_find_gpuprobe_bin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sysconfig

    import gpuprobe

    monkeypatch.delenv("GPUPROBE_BIN", raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(gpuprobe, "_candidate_dirs", lambda: [str(empty)])
    with pytest.raises(gpuprobe.GpuprobeNotFoundError) as info:
        gpuprobe.find_gpuprobe_bin()
    assert isinstance(info.value, FileNotFoundError) and str(empty) in str(info.value)
    monkeypatch.undo()

    scripts = tmp_path / "scripts"
    scripts.mkdir()
    binary = scripts / ("gpuprobe" + (sysconfig.get_config_var("EXE") or ""))
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    real_get_path = sysconfig.get_path
    monkeypatch.setattr(
        sysconfig,
        "get_path",
        lambda name, *a, **k: str(scripts) if name == "scripts" and not a and not k else real_get_path(name, *a, **k),
    )
    assert gpuprobe.find_gpuprobe_bin() == str(binary)


def test_gpuprobe_bin_names_the_binary_and_must_be_executable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import gpuprobe

    monkeypatch.setattr(gpuprobe, "_candidate_dirs", lambda: [])
    binary = tmp_path / "my-gpuprobe"
    binary.write_text("#!/bin/sh\n")
    monkeypatch.setenv("GPUPROBE_BIN", str(binary))
    with pytest.raises(gpuprobe.GpuprobeNotFoundError, match="not an executable file"):
        gpuprobe.find_gpuprobe_bin()
    binary.chmod(0o755)
    assert gpuprobe.find_gpuprobe_bin() == str(binary)


def test_cargo_install_is_searched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import gpuprobe

    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "cargo"))
    assert str(tmp_path / "cargo" / "bin") in gpuprobe._candidate_dirs()


@pytest.mark.skipif(sys.platform == "win32", reason="exec on Unix only")
def test_python_m_gpuprobe_execs_the_binary_with_this_interpreter(tmp_path: Path) -> None:
    # A `pip install --target` layout: <target>/gpuprobe and <target>/bin/gpuprobe.
    target = tmp_path / "target"
    (target / "bin").mkdir(parents=True)
    os.symlink(PACKAGE_DIR / "gpuprobe", target / "gpuprobe")
    fake = target / "bin" / "gpuprobe"
    fake.write_text('#!/bin/sh\necho "python=$GPUPROBE_PYTHON args=$*"\n')
    fake.chmod(0o755)
    code = (
        "import sys, runpy; sys.path.insert(0, sys.argv[1]); "
        "sys.argv = ['gpuprobe', 'check', '--tier', 'quick']; runpy.run_module('gpuprobe', run_name='__main__')"
    )
    out = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"python={sys.executable} args=check --tier quick"


def test_docs_counts_match_the_catalog() -> None:
    text = (PACKAGE_DIR.parent / "docs" / "probes.md").read_text(encoding="utf-8")
    families = {p.id.split(".")[0] for p in catalog.all_probes().values()}
    for family in families:
        row = re.search(rf"^\| {family} \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", text, re.MULTILINE)
        assert row, family
        probes = [p for p in catalog.all_probes().values() if p.id.startswith(family + ".")]
        named = [p for p in probes if "explicit" in p.needs]
        counts = [sum(1 for p in probes if p.tier == tier and p not in named) for tier in ("quick", "standard", "full", "soak")]
        assert [int(g) for g in row.groups()] == [*counts, len(named), len(probes)], family
    probes = list(catalog.all_probes().values())
    named = [p for p in probes if "explicit" in p.needs]
    counts = [sum(1 for p in probes if p.tier == tier and p not in named) for tier in ("quick", "standard", "full", "soak")]
    total = re.search(r"^\| \*\*all\*\* \| " + r" \| ".join([r"\*\*(\d+)\*\*"] * 6) + r" \|$", text, re.MULTILINE)
    assert total, "docs/probes.md has no **all** row"
    assert [int(g) for g in total.groups()] == [*counts, len(named), len(probes)], "the **all** row"
    assert "## Judging" in text and "### statistical" in text
    for preset in sorted((PACKAGE_DIR.parent / "simulate" / "presets").glob("*.toml")):
        assert f"| `{preset.stem}` |" in text, preset.stem


# -- documentation links -----------------------------------------------------------------------

# Paths written from the repository root that documentation and doc comments point at.
_REPO_PATH = re.compile(r"(?<![\w./:-])((?:crates|python|docs|bench|kb|fixtures|simulate|scripts)/[\w./-]*[\w/])(#[\w-]+)?")
_MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
_MD_NAME = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.md)\b")
# Words that stand for a name the reader picks (`crates/gpuprobe/src/commands/NAME.rs`).
_PLACEHOLDERS = {"NAME", "NNN", "TARGET"}
# Files the build writes (ignored by git), and names of files a run writes, not the repository.
_GENERATED = {"crates/gpuprobe-kb/BUILD_COMMIT"}
_RUN_FILES = {"ISSUE.md"}
# A docstring: the first string of a module, or one right after a `def ...:`/`class ...:` line.
_DOCSTRING = re.compile(r'(?:\A|:\n)\s*[rRuU]?"""(.*?)"""', re.DOTALL)
_SKIP_DIRS = {"target", ".git", ".venv", ".dev", "__pycache__", ".pytest_cache", ".whl"}


def _repo_files(top: str, suffix: str = "") -> list[Path]:
    found = []
    for root, dirs, names in os.walk(REPO / top):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        found += [Path(root) / n for n in names if n.endswith(suffix)]
    return found


def _heading_anchors(markdown: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to dashes,
    repeats numbered."""
    anchors: set[str] = set()
    fenced = False
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6}\s+(.*?)\s*#*$", line)):
            base = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
            anchor, n = base, 0
            while anchor in anchors:
                n += 1
                anchor = f"{base}-{n}"
            anchors.add(anchor)
    return anchors


def _unresolved(target: Path, anchor: str) -> str | None:
    if not target.exists():
        return "no such file"
    if anchor and target.suffix == ".md" and anchor not in _heading_anchors(target):
        return f"no heading #{anchor}"
    return None


def _repo_path_problems(text: str) -> list[str]:
    """Each `crates/...`-style path in `text` that names nothing in the repository."""
    problems = []
    for match in _REPO_PATH.finditer(text):
        path, anchor = match.group(1), (match.group(2) or "#")[1:]
        placeholder = any(part in _PLACEHOLDERS for part in re.split(r"[/.-]", path))
        # An upstream project's file, cited as `owner/repo path`.
        upstream = re.search(r"\b[\w.-]+/[\w.-]+ `?$", text[: match.start()])
        if placeholder or upstream or path.rstrip("/") in _GENERATED:
            continue
        rest = re.match(r"[\w./*-]*", text[match.end() :]).group(0)
        if "*" in rest:  # a glob: something must match it
            if not any(REPO.glob(path + rest)):
                problems.append(f"{path}{rest}: matches nothing")
        elif not re.match(r"[-.]*[<{$…]", text[match.end() :]) and (why := _unresolved(REPO / path, anchor)):
            problems.append(f"{path}{match.group(2) or ''}: {why}")
    return problems


def _md_name_problems(text: str, known: set[str]) -> list[str]:
    """Pages named without a repository path (`NOTES.md`, `notes/NOTES.md`) that no file of
    the repository is."""
    return [
        f"{name}: no such page"
        for name in _MD_NAME.findall(text)
        if not _REPO_PATH.match(name) and name.rsplit("/", 1)[-1] not in known | _RUN_FILES
    ]


def _link_problems(text: str, known: set[str]) -> list[str]:
    return _repo_path_problems(text) + _md_name_problems(text, known)


def test_documentation_points_only_at_files_that_exist() -> None:
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "fixtures" / "README.md", REPO / "fuzz" / "README.md"]
    pages += _repo_files("docs", ".md") + _repo_files("bench", ".md")
    known = {p.name for p in _repo_files(".", ".md")}
    problems: list[str] = []
    for page in pages:
        fenced = False
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("```"):
                fenced = not fenced
            if fenced:
                continue  # example output, not links
            where = f"{page.relative_to(REPO)}:{number}"
            for link in _MD_LINK.findall(line):
                if re.match(r"[a-z]+:", link):
                    continue
                path, _, anchor = link.partition("#")
                if why := _unresolved((page.parent / path) if path else page, anchor):
                    problems.append(f"{where}: ({link}): {why}")
            problems += [f"{where}: {p}" for p in _link_problems(line, known)]
    for source in _repo_files("crates", ".rs"):
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            text = line.lstrip()
            if text.startswith(("//!", "///")) and (found := _link_problems(text, known)):
                problems += [f"{source.relative_to(REPO)}:{number}: {p}" for p in found]
    for module in _repo_files("python", ".py"):
        code = module.read_text(encoding="utf-8")
        for doc in _DOCSTRING.finditer(code):
            if found := _link_problems(doc.group(1), known):
                number = code.count("\n", 0, doc.start(1)) + 1
                problems += [f"{module.relative_to(REPO)}:{number}: {p}" for p in found]
    assert not problems, "\n".join(problems)


def test_the_link_check_catches_a_missing_file_heading_or_page() -> None:
    assert _repo_path_problems("see `docs/probes.md#judging` and `crates/gpuprobe/src/main.rs`") == []
    known = {"README.md"}
    assert _link_problems("see `docs/probes.md#nowhere`", known) == ["docs/probes.md#nowhere: no heading #nowhere"]
    assert _link_problems("in `crates/gpuprobe-core/lib.rs`", known) == ["crates/gpuprobe-core/lib.rs: no such file"]
    assert _link_problems("logs in `bench/nowhere/run1-*`", known) == ["bench/nowhere/run1-*: matches nothing"]
    assert _link_problems("(NOTES.md §4), README.md", known) == ["NOTES.md: no such page"]
    assert _link_problems("(`shared/notes/peers.md`)", known) == ["shared/notes/peers.md: no such page"]
    # Placeholders, upstream files and what a run writes are not the repository's.
    assert _link_problems("`crates/gpuprobe/src/commands/NAME.rs`, ROCm/amdsmi `docs/how-to/x.md`", known) == []
    assert _link_problems("the run's `ISSUE.md`", known) == []
