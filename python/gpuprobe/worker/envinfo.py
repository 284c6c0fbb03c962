"""Interpreter and framework facts for the ``hello`` event (``TorchInfo``, fingerprint.rs).

``import_torch`` never raises: a missing or broken torch, a CPU-only build asked for a GPU,
or a GPU index out of range all come back as a reason the worker reports as ``unusable``.
"""

from __future__ import annotations

import json
import os
import platform
import re
import stat
import sys
from typing import Any

#: Packages whose versions the hello event always looks up (read from metadata, never
#: imported).
REPORTED_PACKAGES = ("numpy", "accelerate", "safetensors", "transformers", "diffusers")

#: Distributions whose name contains one of these (case-insensitive) are reported too: those
#: ``torch.utils.collect_env`` lists (its COMMON, NVIDIA, ONEAPI and PIP patterns) and the
#: ROCm and GPU-library wheels it leaves out. ``docs/fingerprint.md`` documents the list.
RELEVANT_PATTERNS = (
    # collect_env's COMMON_PATTERNS and PIP_PATTERNS
    "torch", "numpy", "triton", "optree", "mypy", "flake8", "onnx",
    # collect_env's NVIDIA_PATTERNS
    "cuda-cudart", "cuda-cupti", "cuda-libraries", "cuda-opencl", "cuda-nvrtc",
    "cuda-runtime", "cublas", "cudnn", "cufft", "curand", "cusolver", "cusparse", "nccl",
    "nvjitlink", "nvtx",
    # collect_env's ONEAPI_PATTERNS
    "dpcpp-cpp-rt", "intel-cmplr-lib-rt", "intel-cmplr-lib-ur", "intel-cmplr-lic-rt",
    "intel-opencl-rt", "intel-sycl-rt", "mkl", "onemkl-sycl-blas", "onemkl-sycl-dft",
    "onemkl-sycl-lapack", "onemkl-sycl-rng", "onemkl-sycl-sparse", "intel-openmp", "tbb",
    "impi-rt", "impi-devel", "oneccl", "oneccl-devel", "intel-pti", "umf", "tcmlib",
    # beyond collect_env: every NVIDIA and ROCm wheel, and the GPU libraries of ML stacks
    "nvidia-", "rocm", "hip-python", "hipblas", "amd-", "amdsmi", "cupy", "jax", "accelerate", "safetensors",
    "transformers", "diffusers", "bitsandbytes", "xformers", "flash", "deepspeed", "apex",
    "vllm", "lightning", "peft",
)


def is_relevant_package(name: str) -> bool:
    """Whether a distribution name matches :data:`RELEVANT_PATTERNS`."""
    lower = name.lower()
    return any(pattern in lower for pattern in RELEVANT_PATTERNS)

#: What makes a conda record relevant besides :data:`RELEVANT_PATTERNS`, matched against its
#: name, version and build as collect_env matches ``conda list`` rows: collect_env's
#: CONDA_PATTERNS (``cudatoolkit``, ``soumith``, ``magma``; its ``mkl`` is in
#: RELEVANT_PATTERNS) and conda's CUDA packages and builds (``cuda-version``,
#: ``pytorch-cuda``, ``libcublas``, ``cuda12*`` builds).
CONDA_PATTERNS = ("cuda", "soumith", "magma")

#: Bytes read of one ``conda-meta`` record at most; a longer record is skipped with a note.
CONDA_RECORD_MAX_BYTES = 1 << 20

#: ``conda-meta`` records looked at, at most; those past it are counted in a note.
CONDA_MAX_RECORDS = 5000

#: The hosts whose channel URLs conda shows by their path alone (``pytorch``, ``nvidia``).
_CONDA_HOSTS = ("https://conda.anaconda.org/", "http://conda.anaconda.org/", "https://repo.anaconda.com/")


def is_relevant_conda(text: str) -> bool:
    """Whether a conda record (its ``name-version-build``) is reported."""
    lower = text.lower()
    return is_relevant_package(lower) or any(pattern in lower for pattern in CONDA_PATTERNS)


#: The platform subdirectory that ends a channel URL (``linux-64``, ``noarch``).
_CONDA_SUBDIR = re.compile(r"/(noarch|(linux|osx|win|emscripten|wasi|zos)-[a-z0-9_]+)$")


def conda_channel(record: dict[str, Any]) -> str:
    """A record's channel as ``conda list`` names it: ``schannel`` where the record has it,
    else its ``channel`` URL without the platform subdirectory, without any credentials
    (``user:password@``, ``/t/<token>``) and, on anaconda.org, without the host."""
    short = record.get("schannel")
    if isinstance(short, str) and short:
        return short
    url = record.get("channel")
    if not isinstance(url, str):
        return ""
    url = re.sub(r"//[^/@]*@", "//", url.strip().rstrip("/"))
    url = re.sub(r"/t/[^/]+", "", url)
    subdir = record.get("subdir")
    if isinstance(subdir, str) and subdir and url.endswith("/" + subdir):
        url = url[: -len(subdir) - 1]
    url = _CONDA_SUBDIR.sub("", url)
    for host in _CONDA_HOSTS:
        if url.startswith(host):
            return url[len(host) :]
    return url


def _name_version_build(file_name: str) -> tuple[str, str, str] | None:
    """(name, version, build) from a record's file name, which conda writes as
    ``name-version-build.json`` (a version or a build never holds a ``-``; a name may)."""
    parts = file_name[: -len(".json")].rsplit("-", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


def _conda_record(path: str, file_name: str) -> tuple[dict[str, str] | None, str]:
    """(name, version, build, channel) of one ``conda-meta`` record, or None and why not.

    Only a regular file is opened (a FIFO would block, a device never end), and only
    :data:`CONDA_RECORD_MAX_BYTES` of it are read. A longer record is a real one too (a
    framework's lists every file it installed): its name, version and build then come from
    its file name and its channel from the part read (conda writes the keys sorted, so
    ``channel`` comes before the long ``files`` and ``paths_data``)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None, "not a regular file"
        with open(path, "rb") as handle:
            data = handle.read(CONDA_RECORD_MAX_BYTES + 1)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror or exc}"
    if len(data) > CONDA_RECORD_MAX_BYTES:
        return _long_conda_record(data, file_name)
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return None, f"not JSON: {first[:120]}"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    name, version = record.get("name"), record.get("version")
    if not isinstance(name, str) or not name or not isinstance(version, str) or not version:
        return None, "no name or version"
    build = record.get("build")
    return {
        "name": name,
        "version": version,
        "build": build if isinstance(build, str) else "",
        "channel": conda_channel(record),
    }, ""


def _long_conda_record(head: bytes, file_name: str) -> tuple[dict[str, str] | None, str]:
    """A record longer than :data:`CONDA_RECORD_MAX_BYTES`, from its first bytes and its
    file name; None where the bytes are no JSON object or the name is no
    ``name-version-build``."""
    limit = f"larger than {CONDA_RECORD_MAX_BYTES // (1 << 20)} MiB"
    text = head[:CONDA_RECORD_MAX_BYTES].decode("utf-8", errors="replace")
    if not text.lstrip().startswith("{"):
        return None, f"{limit} and not a JSON object"
    parts = _name_version_build(file_name)
    if parts is None:
        return None, f"{limit} and not named name-version-build.json"
    fields: dict[str, Any] = {}
    for key in ("schannel", "channel"):
        found = re.search(rf'"{key}"\s*:\s*"([^"\\]*)"', text)
        if found:
            fields[key] = found.group(1)
    name, version, build = parts
    return {"name": name, "version": version, "build": build, "channel": conda_channel(fields)}, ""


def conda_environment(prefix: str | None = None) -> dict[str, Any] | None:
    """The conda environment at ``prefix`` (default ``sys.prefix``): its relevant packages
    from the ``conda-meta/*.json`` records conda writes for each package it installs, name →
    version, build and channel, and the records that could not be read, each with why. None
    where ``prefix`` has no ``conda-meta`` directory (a venv, a system Python).

    Never raises: a broken or unreadable record is skipped with a note, one longer than
    :data:`CONDA_RECORD_MAX_BYTES` is read that far (:func:`_conda_record`), and at most
    :data:`CONDA_MAX_RECORDS` records are looked at."""
    prefix = sys.prefix if prefix is None else prefix
    meta = os.path.join(prefix, "conda-meta")
    if not os.path.isdir(meta):
        return None
    packages: dict[str, dict[str, str]] = {}
    skipped: list[str] = []
    names: list[str] = []
    beyond = 0
    try:
        with os.scandir(meta) as entries:
            for entry in entries:
                if not entry.name.endswith(".json"):
                    continue
                if len(names) < CONDA_MAX_RECORDS:
                    names.append(entry.name)
                else:
                    beyond += 1
    except OSError as exc:
        skipped.append(f"conda-meta: unreadable: {exc.strerror or exc}")
    if beyond:
        skipped.append(f"{beyond} record(s) beyond the first {CONDA_MAX_RECORDS} not read")
    for file_name in sorted(names):
        # A record's file is named name-version-build.json: irrelevant ones are not opened.
        if not is_relevant_conda(file_name[: -len(".json")]):
            continue
        record, why = _conda_record(os.path.join(meta, file_name), file_name)
        if record is None:
            skipped.append(f"{file_name}: {why}")
            continue
        if is_relevant_conda(f"{record['name']}-{record['version']}-{record['build']}"):
            name = record.pop("name")
            packages[name] = record
    return {"prefix": prefix, "packages": packages, "skipped": skipped}


def _package_key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def package_facts() -> tuple[dict[str, str], dict[str, Any] | None]:
    """The hello event's ``packages`` and ``conda``: the relevant distributions (from their
    metadata, :func:`package_versions`), joined in a conda environment by the packages conda
    installed that no distribution metadata lists (``cudatoolkit``, ``cudnn``, ``nccl``,
    ``pytorch`` beside pip's ``torch``): what imports is what the metadata says, so it wins
    where both name a package. Conda's own records, marked as conda's, are the second item."""
    versions = package_versions()
    try:
        conda = conda_environment()
    except Exception as exc:  # noqa: BLE001 - a conda prefix must never break the worker
        why = f"conda-meta: {type(exc).__name__}: {exc}"
        conda = {"prefix": sys.prefix, "packages": {}, "skipped": [why]}
    if conda is not None:
        known = {_package_key(name) for name in versions}
        for name, record in conda["packages"].items():
            if _package_key(name) not in known:
                versions[name] = record["version"]
    return versions, conda


#: The allocator-config variables, newest name first.
ALLOC_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")


def python_version() -> str:
    """``3.11.7``."""
    return platform.python_version()


def package_versions(names: tuple[str, ...] = REPORTED_PACKAGES) -> dict[str, str]:
    """Installed versions of ``names`` and of every distribution that matches
    :data:`RELEVANT_PATTERNS`, read from their metadata in ``sys.path`` order (the first of
    two copies wins, as for the import system and ``pip list``); absent ones are left out."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return {}
    versions: dict[str, str] = relevant_distributions(metadata)
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - broken metadata must not break the worker
            continue
    return versions


def relevant_distributions(metadata: Any) -> dict[str, str]:
    """Name (as its metadata spells it) → version of each relevant installed distribution."""
    found: dict[str, str] = {}
    seen: set[str] = set()
    try:
        dists = list(metadata.distributions())
    except Exception:  # noqa: BLE001 - broken metadata must not break the worker
        return found
    for dist in dists:
        try:
            name = dist.metadata["Name"]
            version = dist.version
        except Exception:  # noqa: BLE001 - one unreadable METADATA file, skip it
            continue
        if not name or not version:
            continue
        key = re.sub(r"[-_.]+", "-", str(name)).lower()
        if key in seen:
            continue
        seen.add(key)
        if is_relevant_package(str(name)):
            found[str(name)] = str(version)
    return found


def interpreter_info() -> dict[str, Any]:
    """The ``hello`` event's ``interpreter``: ``sys.version`` on one line, the pointer width,
    and ``platform.platform()`` (what collect_env prints as Python version and platform)."""
    info: dict[str, Any] = {
        "build": sys.version.replace("\n", " "),
        "bits": sys.maxsize.bit_length() + 1,
    }
    try:
        info["platform"] = platform.platform()
    except Exception:  # noqa: BLE001 - an odd uname must not break the worker
        pass
    return info


def build_config(text: str) -> dict[str, str]:
    """What ``torch._C._show_config()`` says torch was built with.

    ``HIP Runtime`` and ``MIOpen`` are read as collect_env reads them (the last word of the
    first line that contains the name), so both tools report the same values; ``CUDA_VERSION``
    and ``CUDNN_VERSION`` come from the ``Build settings`` line (``KEY=value, ...``).
    """
    out: dict[str, str] = {}
    lines = text.splitlines()
    items = [line.strip()[2:].strip() for line in lines if line.strip().startswith("- ")]
    if items and not items[0].startswith(("Build settings", "CPU capability")):
        out["compiler"] = items[0]
    for prefix, key in (("HIP Runtime", "hip_runtime"), ("MIOpen", "miopen"), ("Magma", "magma")):
        words = next((line.split() for line in lines if prefix in line), None)
        if words:
            out[key] = words[-1]
    for item in items:
        if item.startswith("CPU capability usage:"):
            out["cpu_capability"] = item.split(":", 1)[1].strip()
        if item.startswith("Build settings:"):
            settings = item.split(":", 1)[1]
            for part in settings.split(", "):
                name, sep, value = part.partition("=")
                if not sep or not value.strip():
                    continue
                if name.strip() == "CUDA_VERSION":
                    out["cuda"] = value.strip()
                elif name.strip() == "CUDNN_VERSION":
                    out["cudnn"] = value.strip()
    return out


def _build_facts(torch: Any, info: dict[str, Any]) -> None:
    """Build flags and the build configuration, each on its own: one failing never hides
    the others."""
    version = getattr(torch, "version", None)
    for attr, key in (("rocm", "rocm"), ("git_version", "git_version")):
        value = getattr(version, attr, None)
        if value:
            info[key] = str(value)
    debug = getattr(version, "debug", None)
    if isinstance(debug, bool):
        info["debug"] = debug
    try:
        import torch.backends.xnnpack  # noqa: PLC0415, F401 - a submodule of an imported torch

        info["xnnpack"] = bool(torch.backends.xnnpack.enabled)
    except Exception:  # noqa: BLE001 - an old or trimmed build
        pass
    xpu = getattr(torch, "xpu", None)
    if xpu is not None:
        try:
            info["xpu_available"] = bool(xpu.is_available())
        except Exception:  # noqa: BLE001
            pass
    try:
        config = build_config(str(torch._C._show_config()))
    except Exception:  # noqa: BLE001 - a private helper; absent on some builds
        config = {}
    if config:
        info["build"] = config


def _version_text(parts: Any) -> str | None:
    """``9.26.0`` from a version tuple such as ``(9, 26, 0)`` or ``(2, 30, 7, "a0")``."""
    if not isinstance(parts, (tuple, list)) or not parts:
        return None
    return ".".join(str(part) for part in parts)


def loaded_libraries(torch: Any) -> dict[str, str]:
    """The cuDNN and NCCL that this torch loaded, asked of torch itself (MIOpen and RCCL on a
    ROCm build): a host may have two of each installed, and only torch knows which one its
    process resolved. Absent where torch has none (a CPU-only build, a build without NCCL)
    or cannot load it; each is asked on its own, so one failing never hides the other."""
    out: dict[str, str] = {}
    try:
        cudnn = torch.backends.cudnn
        if cudnn.is_available():
            # The runtime library's own (major, minor, patch); version()'s integer packs them
            # differently across cuDNN 8 and 9, so it is only the fallback.
            runtime = getattr(getattr(torch._C, "_cudnn", None), "getRuntimeVersion", None)
            text = _version_text(runtime()) if runtime is not None else None
            if text is None and cudnn.version() is not None:
                text = str(cudnn.version())
            if text:
                out["cudnn_runtime"] = text
    except Exception:  # noqa: BLE001 - a broken cuDNN must not break the worker
        pass
    try:
        nccl = getattr(torch.cuda, "nccl", None)
        if nccl is not None and bool(torch.cuda._is_compiled()):
            text = _version_text(nccl.version())
            if text:
                out["nccl_runtime"] = text
    except Exception:  # noqa: BLE001 - a build without NCCL raises here
        pass
    return out


def torch_version_tuple(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string such as ``2.10.0a0+rocm7.11``."""
    match = re.match(r"^\s*(\d+)\.(\d+)", version)
    if not match:
        return (0, 0)
    return (int(match.group(1)), int(match.group(2)))


def allocator_conf(
    version: str, is_rocm: bool, environ: dict[str, str] | None = None, torch: Any = None
) -> dict[str, Any] | None:
    """The allocator-config variable this torch reads, its value, and the others set.

    Only the first variable found is parsed; every other one that is set is shadowed.
    When ``torch`` is given and exposes the settings it parsed
    (``torch._C._accelerator_getAllocatorSettings``), the variable whose value torch holds
    is the answer: measured, not assumed. Otherwise the order measured on released torch
    applies: torch 2.11 (CUDA build) and 2.15 read PYTORCH_CUDA_ALLOC_CONF, then
    PYTORCH_HIP_ALLOC_CONF, then PYTORCH_ALLOC_CONF, without a deprecation warning (the
    reverse order that newer c10 sources describe is not what these releases do); torch before 2.9 reads PYTORCH_CUDA_ALLOC_CONF, then (ROCm builds)
    PYTORCH_HIP_ALLOC_CONF, and ignores PYTORCH_ALLOC_CONF.
    """
    env = os.environ if environ is None else environ
    if torch_version_tuple(version) >= (2, 9):
        order = ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"]
    else:
        order = ["PYTORCH_CUDA_ALLOC_CONF"] + (["PYTORCH_HIP_ALLOC_CONF"] if is_rocm else [])
    read = next((name for name in order if name in env), None)
    measured = _measured_variable(torch, env)
    if measured is not None:
        read = measured
    if read is None:
        return None
    shadowed = [name for name in ALLOC_VARS if name != read and name in env]
    out: dict[str, Any] = {"variable": read, "value": env[read], "shadowed": shadowed}
    return out


def _measured_variable(torch: Any, env: Any) -> str | None:
    """The set variable whose value torch's parsed allocator settings equal, when exactly one
    matches (two set to the same value cannot be told apart, and need not be)."""
    getter = getattr(getattr(torch, "_C", None), "_accelerator_getAllocatorSettings", None)
    if getter is None:
        return None
    try:
        settings = str(getter()).strip()
    except Exception:  # noqa: BLE001 - an introspection helper; fall back to the rule
        return None
    matches = [name for name in ALLOC_VARS if name in env and env[name].strip() == settings]
    return matches[0] if len(matches) == 1 else None


def _device_info(torch: Any, index: int, is_rocm: bool) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(index)
    info: dict[str, Any] = {
        "index": index,
        "name": str(getattr(props, "name", "") or torch.cuda.get_device_name(index)),
    }
    arch = None
    if is_rocm:
        arch = getattr(props, "gcnArchName", None) or None
    elif hasattr(props, "major") and hasattr(props, "minor"):
        arch = f"sm_{props.major}{props.minor}"
    if arch:
        info["arch"] = str(arch)
    total = getattr(props, "total_memory", None)
    if isinstance(total, int):
        info["total_memory"] = total
    count = getattr(props, "multi_processor_count", None)
    if isinstance(count, int):
        info["multi_processor_count"] = count
    bus = getattr(props, "pci_bus_id", None)
    dev = getattr(props, "pci_device_id", None)
    domain = getattr(props, "pci_domain_id", None)
    if isinstance(bus, int) and isinstance(dev, int):
        info["pci_bus"] = f"{domain if isinstance(domain, int) else 0:04x}:{bus:02x}:{dev:02x}.0"
    integrated = getattr(props, "is_integrated", None)
    if integrated is not None:
        info["integrated"] = bool(integrated)
    return info


def gpu_devices(torch: Any) -> list[dict[str, Any]]:
    """The ``TorchDevice`` objects of every GPU ``torch`` sees (``cuda:N`` order); one whose
    properties cannot be read keeps its index and says why in place of its name."""
    is_rocm = bool(getattr(torch.version, "hip", None))
    devices = []
    for index in range(torch.cuda.device_count()):
        try:
            devices.append(_device_info(torch, index, is_rocm))
        except Exception as exc:  # noqa: BLE001 - keep the others
            devices.append({"index": index, "name": f"(unreadable: {exc})"})
    return devices


def torch_info(torch: Any) -> dict[str, Any]:
    """The ``TorchInfo`` object for an imported torch."""
    version = str(torch.__version__)
    hip = getattr(torch.version, "hip", None)
    cuda = getattr(torch.version, "cuda", None)
    info: dict[str, Any] = {"version": version}
    if hip:
        info["hip"] = str(hip)
    if cuda:
        info["cuda"] = str(cuda)
    try:
        info["arch_list"] = [str(a) for a in torch.cuda.get_arch_list()]
    except Exception:  # noqa: BLE001 - a CPU build or a broken runtime
        info["arch_list"] = []
    try:
        available = bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        available = False
    info["gpu_available"] = available
    info["devices"] = gpu_devices(torch) if available else []
    if available:
        # collect_env's "CUDA_MODULE_LOADING set to": torch sets LAZY when it initialises
        # CUDA with the variable unset; the device queries above initialised it.
        info["cuda_module_loading"] = os.environ.get("CUDA_MODULE_LOADING", "")
    _build_facts(torch, info)
    info.update(loaded_libraries(torch))
    conf = allocator_conf(version, bool(hip), torch=torch)
    if conf is not None:
        info["allocator_conf"] = conf
    info["lib_dir"] = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "lib")
    return info


def import_torch() -> tuple[Any, str | None]:
    """Imports torch; returns (module or None, reason it cannot be used or None)."""
    try:
        import torch  # noqa: PLC0415 - deliberately lazy
    except Exception as exc:  # noqa: BLE001 - ImportError, OSError from a broken wheel, ...
        return None, f"import torch failed: {type(exc).__name__}: {exc}"
    return torch, None


def device_problem(torch: Any, device: str) -> str | None:
    """Why ``device`` cannot be used with this torch, or None."""
    if device == "cpu":
        return None
    match = re.fullmatch(r"cuda:(\d+)", device)
    if not match:
        return f"unknown device {device!r} (expected cpu or cuda:N)"
    index = int(match.group(1))
    hip = getattr(torch.version, "hip", None)
    cuda = getattr(torch.version, "cuda", None)
    if not hip and not cuda:
        return f"this torch {torch.__version__} is a CPU-only build: it cannot use {device}"
    try:
        available = torch.cuda.is_available()
    except Exception as exc:  # noqa: BLE001
        return f"torch.cuda.is_available() failed: {exc}"
    if not available:
        runtime = f"ROCm/HIP {hip}" if hip else f"CUDA {cuda}"
        return f"torch {torch.__version__} ({runtime}) sees no usable GPU (torch.cuda.is_available() is False)"
    count = torch.cuda.device_count()
    if index >= count:
        return f"{device} does not exist: torch sees {count} GPU(s)"
    return None


def executable() -> str:
    """The interpreter path."""
    return sys.executable or ""
