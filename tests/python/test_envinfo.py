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
