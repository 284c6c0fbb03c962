//! The build and runtime environment around the GPU stack, the facts
//! `torch.utils.collect_env` reports beyond the driver and torch: CPU identity and topology
//! (`/proc/cpuinfo`, the sysfs CPU and NUMA lists), the C library (the banner inside
//! `libc.so.6`, read, never run), the versions of cuDNN, NCCL, cuBLAS, MIOpen, RCCL, rocBLAS
//! and hipBLASLt (their version headers and pip wheels), and, when tools may run, the
//! compilers (`gcc`, `clang`, `cmake`, `nvcc`, `hipcc` `--version`) and `lscpu` for what
//! only it knows (the hypervisor vendor from CPUID).

use std::collections::BTreeMap;
use std::time::Duration;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{ComponentVersion, CpuDetails, CudaInfo, RocmInfo, ToolVersion};

use super::tools::{find, run};
use crate::merge::fill;
use crate::parse::buildinfo::{Tool, cpu_list, glibc_version, header_version, lscpu, tool_banner};
use crate::root::Root;

/// CPU identity from the first processor of `/proc/cpuinfo`, topology from sysfs.
pub(super) fn cpu(root: &Root, fp: &mut Fingerprint) {
    let cpuinfo = root.read("/proc/cpuinfo").unwrap_or_default();
    let first_block = cpuinfo.split("\n\n").next().unwrap_or_default();
    let field = |name: &str| {
        first_block.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name)
                .then(|| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        })
    };
    let mut cpu = CpuDetails {
        vendor_id: field("vendor_id").or_else(|| field("CPU implementer")),
        family: field("cpu family"),
        model: field("model"),
        stepping: field("stepping"),
        address_sizes: field("address sizes"),
        flags: field("flags")
            .or_else(|| field("Features"))
            .map(|f| f.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        ..CpuDetails::default()
    };
    let online = root.read_opt("/sys/devices/system/cpu/online");
    let online_cpus = online.as_deref().and_then(cpu_list);
    cpu.logical_cpus = online_cpus
        .as_ref()
        .and_then(|c| u32::try_from(c.len()).ok());
    cpu.online = online;
    if let Some(cpus) = &online_cpus {
        topology(root, cpus, &mut cpu);
    }
    if let Some(nodes) = root
        .read_opt("/sys/devices/system/node/online")
        .as_deref()
        .and_then(cpu_list)
    {
        for node in nodes {
            if let Some(list) =
                root.read_opt(&format!("/sys/devices/system/node/node{node}/cpulist"))
            {
                cpu.numa_nodes.insert(format!("node{node}"), list);
            }
        }
    }
    if cpu != CpuDetails::default() {
        fp.host.cpu = Some(cpu);
    }
}

/// Sockets, cores per socket and threads per core from each online CPU's
/// `topology/{physical_package_id,core_id}` (what lscpu counts).
fn topology(root: &Root, cpus: &[u32], cpu: &mut CpuDetails) {
    let mut cores: BTreeMap<(String, String), u32> = BTreeMap::new();
    for n in cpus {
        let base = format!("/sys/devices/system/cpu/cpu{n}/topology");
        let (Some(package), Some(core)) = (
            root.read_opt(&format!("{base}/physical_package_id")),
            root.read_opt(&format!("{base}/core_id")),
        ) else {
            return;
        };
        *cores.entry((package, core)).or_default() += 1;
    }
    let sockets = cores
        .keys()
        .map(|(p, _)| p)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if sockets == 0 {
        return;
    }
    let threads = cores.values().copied().max().unwrap_or(1);
    cpu.sockets = u32::try_from(sockets).ok();
    cpu.threads_per_core = Some(threads);
    cpu.cores_per_socket = u32::try_from(cores.len() / sockets).ok();
}

/// glibc's version from the banner inside `libc.so.6`; musl by its loader's name.
pub(super) fn libc(root: &Root, fp: &mut Fingerprint) {
    let arch = fp
        .host
        .cpu_arch
        .clone()
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let candidates = [
        format!("/lib/{arch}-linux-gnu/libc.so.6"),
        format!("/usr/lib/{arch}-linux-gnu/libc.so.6"),
        "/lib64/libc.so.6".to_owned(),
        "/usr/lib64/libc.so.6".to_owned(),
        "/lib/libc.so.6".to_owned(),
        "/usr/lib/libc.so.6".to_owned(),
    ];
    for path in &candidates {
        if let Ok(bytes) = root.read_bytes(path)
            && let Some(version) = glibc_version(&bytes)
        {
            fp.host.libc_name = Some("glibc".to_owned());
            fp.host.libc_version = Some(version);
            return;
        }
    }
    if root.exists(&format!("/lib/ld-musl-{arch}.so.1")) {
        fp.host.libc_name = Some("musl".to_owned());
    }
}

/// A library whose version header is looked for: component name, header path relative to
/// an include directory, the three version macros, and the runtime it belongs to.
struct HeaderSpec {
    name: &'static str,
    header: &'static str,
    macros: [&'static str; 3],
    rocm: bool,
}

const HEADERS: &[HeaderSpec] = &[
    HeaderSpec {
        name: "cudnn",
        header: "cudnn_version.h",
        macros: ["CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"],
        rocm: false,
    },
    HeaderSpec {
        name: "nccl",
        header: "nccl.h",
        macros: ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"],
        rocm: false,
    },
    HeaderSpec {
        name: "cublas",
        header: "cublas_api.h",
        macros: ["CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH"],
        rocm: false,
    },
    HeaderSpec {
        name: "miopen",
        header: "miopen/version.h",
        macros: [
            "MIOPEN_VERSION_MAJOR",
            "MIOPEN_VERSION_MINOR",
            "MIOPEN_VERSION_PATCH",
        ],
        rocm: true,
    },
    HeaderSpec {
        name: "rccl",
        header: "rccl/rccl.h",
        macros: ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"],
        rocm: true,
    },
    HeaderSpec {
        name: "rocblas",
        header: "rocblas/internal/rocblas-version.h",
        macros: [
            "ROCBLAS_VERSION_MAJOR",
            "ROCBLAS_VERSION_MINOR",
            "ROCBLAS_VERSION_PATCH",
        ],
        rocm: true,
    },
    HeaderSpec {
        name: "hipblaslt",
        header: "hipblaslt/hipblaslt-version.h",
        macros: [
            "HIPBLASLT_VERSION_MAJOR",
            "HIPBLASLT_VERSION_MINOR",
            "HIPBLASLT_VERSION_PATCH",
        ],
        rocm: true,
    },
];

/// Include directories of the system, the CUDA and ROCm installs named by the environment
/// or found in their usual places, and the given site-packages (NVIDIA wheels keep
/// `nvidia/<lib>/include`; TheRock keeps `_rocm_sdk_devel/include`).
pub(super) fn include_dirs(
    root: &Root,
    env: &BTreeMap<String, String>,
    sites: &[String],
) -> Vec<String> {
    let mut dirs = vec!["/usr/include".to_owned(), "/usr/local/include".to_owned()];
    let arch = std::env::consts::ARCH;
    dirs.push(format!("/usr/include/{arch}-linux-gnu"));
    for var in ["CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH"] {
        if let Some(p) = env.get(var) {
            dirs.push(format!("{}/include", p.trim_end_matches('/')));
        }
    }
    for parent in ["/usr/local", "/opt"] {
        for entry in root.list(parent).unwrap_or_default() {
            if entry.starts_with("cuda") || entry.starts_with("rocm") {
                dirs.push(format!("{parent}/{entry}/include"));
            }
        }
    }
    for site in sites {
        for entry in root.list(&format!("{site}/nvidia")).unwrap_or_default() {
            dirs.push(format!("{site}/nvidia/{entry}/include"));
        }
        for entry in root.list(site).unwrap_or_default() {
            if entry.starts_with("_rocm_sdk") {
                dirs.push(format!("{site}/{entry}/include"));
            }
        }
    }
    dirs.dedup();
    dirs
}

/// Versions from the headers found in `dirs`, one entry per real header file.
pub(super) fn header_components(root: &Root, dirs: &[String], fp: &mut Fingerprint) {
    let mut seen = Vec::new();
    for dir in dirs {
        for spec in HEADERS {
            let path = format!("{dir}/{}", spec.header);
            let Ok(text) = root.read(&path) else { continue };
            let real = std::fs::canonicalize(root.path(&path))
                .map(|p| root.system_path(&p))
                .unwrap_or(path);
            if seen.contains(&real) {
                continue;
            }
            seen.push(real.clone());
            if let Some(version) = header_version(&text, spec.macros) {
                add_component(fp, spec.rocm, spec.name, version, real);
            }
        }
    }
}

/// The component a pip wheel carries, by its distribution name: `nvidia-cudnn-cu13` →
/// `cudnn`, `nvidia-nccl-cu12` → `nccl`, `nvidia-cublas` → `cublas`, ...; `None` for others.
pub(super) fn wheel_component(distribution: &str) -> Option<(&'static str, bool)> {
    let name = distribution.to_ascii_lowercase().replace('_', "-");
    let table: &[(&str, &str, bool)] = &[
        ("nvidia-cudnn", "cudnn", false),
        ("nvidia-nccl", "nccl", false),
        ("nvidia-cublas", "cublas", false),
        ("nvidia-cusparselt", "cusparselt", false),
        ("nvidia-cuda-runtime", "cudart", false),
        ("nvidia-cuda-nvrtc", "nvrtc", false),
        ("nvidia-nvjitlink", "nvjitlink", false),
        ("nvidia-cufft", "cufft", false),
        ("nvidia-cusolver", "cusolver", false),
        ("nvidia-cusparse", "cusparse", false),
        ("nvidia-nvshmem", "nvshmem", false),
        ("rocm-sdk-core", "rocm-sdk", true),
    ];
    table
        .iter()
        .find(|(prefix, _, _)| {
            name == *prefix
                || name
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with("-cu"))
        })
        .map(|(_, component, rocm)| (*component, *rocm))
}

/// Components from the pip wheels the worker listed (`python.packages`).
pub(super) fn wheel_components(fp: &mut Fingerprint) {
    let Some(packages) = fp.python.as_ref().map(|p| p.packages.clone()) else {
        return;
    };
    for (dist, version) in packages {
        if let Some((name, rocm)) = wheel_component(&dist) {
            add_component(fp, rocm, name, version, format!("pip {dist}"));
        }
    }
}

fn add_component(fp: &mut Fingerprint, rocm: bool, name: &str, version: String, source: String) {
    let list = if rocm {
        &mut fp.rocm.get_or_insert_with(RocmInfo::default).components
    } else {
        &mut fp.cuda.get_or_insert_with(CudaInfo::default).components
    };
    let entry = ComponentVersion {
        name: name.to_owned(),
        version,
        source,
    };
    if !list.contains(&entry) {
        list.push(entry);
    }
}

/// Runs each compiler found (`TOOL --version`, killed after `timeout`) and `lscpu`.
pub(super) fn run_tools(env: &BTreeMap<String, String>, timeout: Duration, fp: &mut Fingerprint) {
    let mut extra = env.clone();
    // nvcc and hipcc live in their installs' bin directories, often not on PATH.
    let mut path = env.get("PATH").cloned().unwrap_or_default();
    for home in ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| env.get(*v))
    {
        path.push_str(&format!(":{home}/bin"));
    }
    path.push_str(":/usr/local/cuda/bin");
    extra.insert("PATH".to_owned(), path);
    for tool in Tool::ALL {
        let search = if matches!(tool, Tool::Nvcc | Tool::Hipcc) {
            &extra
        } else {
            env
        };
        let Some(program) = find(search, tool.program()) else {
            continue;
        };
        let Ok(out) = run(search, tool.program(), &["--version"], timeout) else {
            continue;
        };
        let Some(banner) = tool_banner(tool, &out) else {
            continue;
        };
        let version = ToolVersion {
            path: program.display().to_string(),
            version: banner.version,
            banner: banner.banner,
        };
        let slot = match tool {
            Tool::Gcc => &mut fp.toolchain.gcc,
            Tool::Clang => &mut fp.toolchain.clang,
            Tool::Cmake => &mut fp.toolchain.cmake,
            Tool::Nvcc => &mut fp.toolchain.nvcc,
            Tool::Hipcc => &mut fp.toolchain.hipcc,
        };
        *slot = Some(version);
    }
    if let Ok(out) = run(env, "lscpu", &[], timeout) {
        apply_lscpu(&lscpu(&out), fp);
    }
}

/// Fills the CPU facts only lscpu has (the hypervisor from CPUID; the model name of Arm
/// cores, from its part tables) and any the files left empty.
pub(super) fn apply_lscpu(map: &BTreeMap<String, String>, fp: &mut Fingerprint) {
    let get = |k: &str| map.get(k).cloned();
    fill(&mut fp.host.cpu_model, get("Model name"));
    let cpu = fp.host.cpu.get_or_insert_with(CpuDetails::default);
    fill(&mut cpu.hypervisor_vendor, get("Hypervisor vendor"));
    fill(&mut cpu.virtualization_type, get("Virtualization type"));
    fill(&mut cpu.vendor_id, get("Vendor ID"));
    fill(&mut cpu.address_sizes, get("Address sizes"));
    let number = |k: &str| map.get(k).and_then(|v| v.parse::<u32>().ok());
    fill(&mut cpu.sockets, number("Socket(s)"));
    fill(&mut cpu.cores_per_socket, number("Core(s) per socket"));
    fill(&mut cpu.threads_per_core, number("Thread(s) per core"));
}
