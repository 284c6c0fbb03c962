"""The worker's environment facts (``gpuprobe.worker.envinfo``): torch's build configuration
read the way collect_env reads it, the relevant-distribution list, the interpreter facts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

from gpuprobe.worker import envinfo

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "env"


def _body(name: str) -> str:
    return "".join((FIXTURES / name).read_text().splitlines(keepends=True)[2:])


def test_build_config_of_a_real_cuda_wheel() -> None:
    config = envinfo.build_config(_body("torch-show-config-2.15-cu132.txt"))
    assert config == {
        "compiler": "GCC 13.3",
        "cpu_capability": "AVX512",
        "cuda": "13.2",
        "cudnn": "9.26.0",
    }


def test_build_config_hip_and_miopen_as_collect_env_reads_them() -> None:
    # Constructed from the lines torch's CUDAHooks.cpp prints on ROCm builds
    # (`  - HIP Runtime <version>`, `  - MIOpen <version>`); collect_env takes the last word
    # of the first line containing the name, and so does build_config.
    text = "PyTorch built with:\n  - GCC 11.2\n  - HIP Runtime 6.2.41133\n  - MIOpen 3.2.0\n"
    config = envinfo.build_config(text)
    assert config["hip_runtime"] == "6.2.41133"
    assert config["miopen"] == "3.2.0"
    assert envinfo.build_config("") == {}
    assert envinfo.build_config("garbage\n - \n  - Build settings: =, X") == {}


def test_relevant_packages() -> None:
    for name in ("torch", "nvidia-cudnn-cu12", "pytorch-triton-rocm", "triton", "numpy",
                 "rocm-sdk-core", "mkl", "onnxruntime-gpu", "accelerate"):
        assert envinfo.is_relevant_package(name), name
    for name in ("requests", "pip", "setuptools", "Jinja2"):
        assert not envinfo.is_relevant_package(name), name


def test_first_distribution_on_the_path_wins() -> None:
    def dist(name: str, version: str) -> SimpleNamespace:
        return SimpleNamespace(metadata={"Name": name}, version=version)

    class Broken:
        @property
        def metadata(self) -> dict[str, str]:
            raise OSError("unreadable METADATA")

    fake = SimpleNamespace(
        distributions=lambda: [dist("torch", "2.5.0"), Broken(), dist("Torch", "1.0"),
                               dist("requests", "2.0"), dist("nvidia_nccl_cu12", "2.21.5")]
    )
    assert envinfo.relevant_distributions(fake) == {
        "torch": "2.5.0",
        "nvidia_nccl_cu12": "2.21.5",
    }


def test_interpreter_facts() -> None:
    info = envinfo.interpreter_info()
    assert info["build"] == sys.version.replace("\n", " ")
    assert info["bits"] in (32, 64)
    assert info["platform"]


def _fake_torch(*, cudnn: tuple[int, ...] | None, nccl: object, compiled: bool = True) -> SimpleNamespace:
    """A torch with only what ``loaded_libraries`` asks: cuDNN's availability and runtime
    version, whether CUDA is compiled in, and NCCL's version (an exception is raised)."""

    def nccl_version() -> object:
        if isinstance(nccl, Exception):
            raise nccl
        return nccl

    return SimpleNamespace(
        backends=SimpleNamespace(cudnn=SimpleNamespace(is_available=lambda: cudnn is not None, version=lambda: None)),
        _C=SimpleNamespace(_cudnn=SimpleNamespace(getRuntimeVersion=lambda: cudnn)),
        cuda=SimpleNamespace(_is_compiled=lambda: compiled, nccl=SimpleNamespace(version=nccl_version)),
    )


def test_loaded_libraries_absent_on_a_cpu_only_torch() -> None:
    """A CPU-only torch has no cuDNN and no NCCL: both keys are absent, nothing raises."""
    cpu_only = _fake_torch(cudnn=None, nccl=AttributeError("no _nccl_version"), compiled=False)
    assert envinfo.loaded_libraries(cpu_only) == {}


def test_loaded_libraries_present_each_on_its_own() -> None:
    """The runtime versions torch loaded, as text; NCCL failing never hides cuDNN."""
    both = _fake_torch(cudnn=(9, 1, 0), nccl=(2, 21, 5, "a0"))
    assert envinfo.loaded_libraries(both) == {"cudnn_runtime": "9.1.0", "nccl_runtime": "2.21.5.a0"}
    no_nccl = _fake_torch(cudnn=(9, 1, 0), nccl=RuntimeError("built without NCCL"))
    assert envinfo.loaded_libraries(no_nccl) == {"cudnn_runtime": "9.1.0"}


def test_loaded_libraries_of_the_real_torch() -> None:
    """The test interpreter's torch: whatever it loaded is reported with the runtime's own
    numbers (PyPI's CUDA wheel brings cuDNN and NCCL even on a machine without a GPU)."""
    import torch

    loaded = envinfo.loaded_libraries(torch)
    if torch.backends.cudnn.is_available():
        assert loaded["cudnn_runtime"] == ".".join(str(p) for p in torch._C._cudnn.getRuntimeVersion())
    else:
        assert "cudnn_runtime" not in loaded
    assert set(loaded) <= {"cudnn_runtime", "nccl_runtime"}
    assert {k: v for k, v in envinfo.torch_info(torch).items() if k in loaded} == loaded


def _conda_prefix(tmp_path: Path) -> Path:
    """A fake conda environment: records as conda writes them (a current one with a full
    channel URL, an older one with ``schannel``), an irrelevant one, and broken ones."""
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    records = {
        "pytorch-2.1.0-py3.10_cuda12.1_cudnn8.9.2_0.json": {
            "name": "pytorch", "version": "2.1.0", "build": "py3.10_cuda12.1_cudnn8.9.2_0",
            "channel": "https://conda.anaconda.org/pytorch/linux-64", "subdir": "linux-64",
            "files": ["lib/python3.10/site-packages/torch/__init__.py"],
        },
        "cudatoolkit-11.8.0-h6a678d5_0.json": {
            "name": "cudatoolkit", "version": "11.8.0", "build": "h6a678d5_0",
            "schannel": "nvidia", "channel": "https://conda.anaconda.org/nvidia/linux-64",
        },
        "nccl-2.18.5.1-h6103f9b_0.json": {
            "name": "nccl", "version": "2.18.5.1", "build": "h6103f9b_0",
            "channel": "https://user:secret@conda.example.com/t/tk-123/conda-forge/linux-64",
            "subdir": "linux-64",
        },
        "numpy-1.26.0-py310h5f9d8c6_0.json": {
            "name": "numpy", "version": "1.26.0", "build": "py310h5f9d8c6_0",
            "channel": "https://repo.anaconda.com/pkgs/main/linux-64", "subdir": "linux-64",
        },
        "openssl-3.0.12-h7f8727e_0.json": {"name": "openssl", "version": "3.0.12", "build": "h7f8727e_0"},
    }
    for file_name, record in records.items():
        (meta / file_name).write_text(json.dumps(record))
    (meta / "cudnn-8.9.2.26-cuda12_0.json").write_text('{"name": "cudnn", "version": ')
    (meta / "magma-cuda121-2.6.1-1.json").write_text('["not", "an", "object"]')
    (meta / "history").write_text("==> 2024-01-01 <==\n")
    return tmp_path


def test_conda_records_are_read_marked_and_broken_ones_skipped_with_a_note(tmp_path: Path) -> None:
    conda = envinfo.conda_environment(str(_conda_prefix(tmp_path)))
    assert conda is not None
    assert conda["prefix"] == str(tmp_path)
    assert conda["packages"] == {
        "pytorch": {"version": "2.1.0", "build": "py3.10_cuda12.1_cudnn8.9.2_0", "channel": "pytorch"},
        "cudatoolkit": {"version": "11.8.0", "build": "h6a678d5_0", "channel": "nvidia"},
        # Credentials in a channel URL never reach the report.
        "nccl": {
            "version": "2.18.5.1", "build": "h6103f9b_0", "channel": "https://conda.example.com/conda-forge",
        },
        "numpy": {"version": "1.26.0", "build": "py310h5f9d8c6_0", "channel": "pkgs/main"},
    }
    assert conda["skipped"] == [
        "cudnn-8.9.2.26-cuda12_0.json: not JSON: Expecting value: line 1 column 30 (char 29)",
        "magma-cuda121-2.6.1-1.json: not a JSON object",
    ]
    # A venv or a system Python has no conda-meta: no conda facts at all.
    assert envinfo.conda_environment(str(tmp_path / "conda-meta")) is None


def test_conda_reads_are_capped_and_only_regular_files_are_opened(tmp_path: Path, monkeypatch) -> None:
    prefix = _conda_prefix(tmp_path)
    meta = prefix / "conda-meta"
    # A framework's record lists every file it installed: longer than the cap, and real.
    # conda writes its keys sorted, so the channel comes before the long file lists.
    files = [f"lib/python3.10/site-packages/torch/file{i}.py" for i in range(40000)]
    torch_record = {"build": "py3.10_cuda12.1_cudnn8.9.2_0", "channel": "https://conda.anaconda.org/pytorch/linux-64",
                    "files": files, "name": "pytorch", "version": "2.1.0"}
    (meta / "pytorch-2.1.0-py3.10_cuda12.1_cudnn8.9.2_0.json").write_text(json.dumps(torch_record, sort_keys=True))
    assert (meta / "pytorch-2.1.0-py3.10_cuda12.1_cudnn8.9.2_0.json").stat().st_size > envinfo.CONDA_RECORD_MAX_BYTES
    (meta / "cuda-garbage.json").write_bytes(b"{" + b" " * (2 << 20))
    (meta / "cuda-nvcc-12.1.105-0.json").write_bytes(b"\0" * (2 << 20))
    os.mkfifo(meta / "cuda-version-12.1-h1d6eff3_3.json")  # would block a plain open()
    os.symlink("/dev/zero", meta / "libcublas-12.1.0.26-0.json")  # would never end
    conda = envinfo.conda_environment(str(prefix))
    assert conda is not None
    assert conda["packages"]["pytorch"] == {
        "version": "2.1.0", "build": "py3.10_cuda12.1_cudnn8.9.2_0", "channel": "pytorch",
    }
    assert "cuda-garbage.json: larger than 1 MiB and not named name-version-build.json" in conda["skipped"]
    assert "cuda-nvcc-12.1.105-0.json: larger than 1 MiB and not a JSON object" in conda["skipped"]
    assert "cuda-version-12.1-h1d6eff3_3.json: not a regular file" in conda["skipped"]
    assert "libcublas-12.1.0.26-0.json: not a regular file" in conda["skipped"]
    monkeypatch.setattr(envinfo, "CONDA_MAX_RECORDS", 3)
    capped = envinfo.conda_environment(str(prefix))
    assert capped is not None
    assert f"{len(list(meta.glob('*.json'))) - 3} record(s) beyond the first 3 not read" in capped["skipped"]


def test_conda_only_packages_join_the_package_list_and_metadata_wins(tmp_path: Path, monkeypatch) -> None:
    prefix = _conda_prefix(tmp_path)
    monkeypatch.setattr(envinfo.sys, "prefix", str(prefix))
    monkeypatch.setattr(envinfo, "package_versions", lambda: {"torch": "2.1.0", "NumPy": "1.26.4"})
    packages, conda = envinfo.package_facts()
    assert conda is not None and conda["prefix"] == str(prefix)
    # What imports is what the metadata says: pip's numpy wins over conda's record.
    assert packages == {
        "torch": "2.1.0", "NumPy": "1.26.4", "pytorch": "2.1.0", "cudatoolkit": "11.8.0", "nccl": "2.18.5.1",
    }
    assert conda["packages"]["numpy"]["version"] == "1.26.0"
    # Outside conda, the list is the metadata's alone.
    monkeypatch.setattr(envinfo.sys, "prefix", str(tmp_path / "venv"))
    assert envinfo.package_facts() == ({"torch": "2.1.0", "NumPy": "1.26.4"}, None)
