"""The worker's environment facts (``gpuprobe.worker.envinfo``): torch's build configuration
read the way collect_env reads it, the relevant-distribution list, the interpreter facts."""

from __future__ import annotations

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
