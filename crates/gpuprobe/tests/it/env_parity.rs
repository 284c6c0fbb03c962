//! `gpuprobe env --json` holds every fact `python -m torch.utils.collect_env` reports, fact
//! by fact: both run with the test interpreter and the same environment, and each value
//! collect_env prints (placeholders such as `N/A`, `Could not collect` and `No CUDA` left
//! out) must be in the fingerprint with an equal value under the normalisation rules of
//! `docs/fingerprint.md` ("Parity with collect_env"). A fact collect_env prints that this
//! table does not know fails the test, so a new line of collect_env forces a decision.

use std::collections::BTreeSet;
use std::process::Command;

use gpuprobe_detect::parse::buildinfo::cpu_list;
use gpuprobe_detect::parse::collect_env;
use gpuprobe_model::Fingerprint;

use crate::support::{gpuprobe, python};

/// A value collect_env prints instead of a fact.
fn placeholder(value: &str) -> bool {
    matches!(
        value.trim(),
        "" | "N/A" | "Could not collect" | "No CUDA" | "None" | "No relevant packages"
    )
}

/// The part of `text` after the first `marker`, as collect_env's regular expressions
/// (`gcc (.*)`, `clang version (.*)`, `cmake (.*)`) capture it.
fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    text.split_once(marker).map(|(_, rest)| rest)
}

fn yes_no(flag: Option<bool>) -> Option<String> {
    flag.map(|f| if f { "True" } else { "False" }.to_owned())
}

/// `{'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}` → its pairs.
fn python_dict(text: &str) -> Vec<(String, String)> {
    text.trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .split(", '")
        .filter_map(|pair| {
            let (k, v) = pair.split_once("': ")?;
            Some((
                k.trim_matches('\'').to_owned(),
                v.trim().trim_matches('\'').to_owned(),
            ))
        })
        .collect()
}

/// What env reports for a top-level collect_env line, normalised to collect_env's format;
/// `Err` for a line the table does not know.
fn env_value(fp: &Fingerprint, key: &str, printed: &str) -> Result<Option<String>, String> {
    let python = fp.python.as_ref();
    let torch = python.and_then(|p| p.torch.as_ref());
    let toolchain = &fp.toolchain;
    let value = match key {
        "PyTorch version" => torch.map(|t| t.version.clone()),
        "Is debug build" => yes_no(torch.and_then(|t| t.debug)),
        "CUDA used to build PyTorch" => torch.and_then(|t| t.cuda.clone()),
        "ROCm SDK used to build PyTorch" => torch.and_then(|t| t.rocm.clone()),
        "HIP used to build PyTorch" | "ROCM used to build PyTorch" => {
            torch.and_then(|t| t.hip.clone())
        }
        "OS" => match (&fp.host.distro_pretty, &fp.host.cpu_arch) {
            (Some(name), Some(arch)) => Some(format!("{name} ({arch})")),
            _ => None,
        },
        "GCC version" => toolchain
            .gcc
            .as_ref()
            .and_then(|t| after(&t.banner, "gcc ").map(str::to_owned)),
        "Clang version" => toolchain
            .clang
            .as_ref()
            .and_then(|t| after(&t.banner, "clang version ").map(str::to_owned)),
        "CMake version" => toolchain
            .cmake
            .as_ref()
            .and_then(|t| after(&t.banner, "cmake ").map(str::to_owned)),
        "Libc version" => match (&fp.host.libc_name, &fp.host.libc_version) {
            (Some(n), Some(v)) => Some(format!("{n}-{v}")),
            _ => None,
        },
        "Python version" => {
            python.and_then(|p| Some(format!("{} ({}-bit runtime)", p.build.as_ref()?, p.bits?)))
        }
        "Python platform" => python.and_then(|p| p.platform.clone()),
        "Is CUDA available" => yes_no(torch.map(|t| t.gpu_available)),
        "CUDA runtime version" => toolchain.nvcc.as_ref().and_then(|t| t.version.clone()),
        "CUDA_MODULE_LOADING set to" => torch.and_then(|t| t.cuda_module_loading.clone()),
        "Nvidia driver version" => fp.nvidia.as_ref().and_then(|n| n.version.clone()),
        "Is XPU available" => yes_no(torch.and_then(|t| t.xpu_available)),
        "HIP runtime version" => torch
            .and_then(|t| t.build.as_ref())
            .and_then(|b| b.hip_runtime.clone()),
        "MIOpen runtime version" => torch
            .and_then(|t| t.build.as_ref())
            .and_then(|b| b.miopen.clone()),
        "Is XNNPACK available" => yes_no(torch.and_then(|t| t.xnnpack)),
        "Caching allocator config" => {
            // A Python dict of the allocator variables set: each must be in `env`.
            let all_present = python_dict(printed)
                .iter()
                .all(|(k, v)| fp.env.get(k) == Some(v));
            all_present.then(|| printed.to_owned())
        }
        // Compared line by line below.
        "GPU models and configuration" | "cuDNN version" => Some(printed.to_owned()),
        other => return Err(format!("collect_env line `{other}` has no env field")),
    };
    Ok(value)
}

/// lscpu keys env does not report, and why (`docs/fingerprint.md`).
fn lscpu_not_reported(key: &str) -> bool {
    // Byte order, op modes, BogoMIPS, clock rates, cache sizes, CPU-vulnerability
    // mitigations, VT-x/AMD-V and BIOS strings do not bear on GPU bugs.
    const KEYS: &[&str] = &[
        "CPU op-mode(s)",
        "Byte Order",
        "BogoMIPS",
        "CPU MHz",
        "CPU max MHz",
        "CPU min MHz",
        "CPU(s) scaling MHz",
        "Frequency boost",
        "Virtualization",
        "BIOS Vendor ID",
        "BIOS Model name",
        "BIOS CPU family",
        "Dispatching mode",
        "Off-line CPU(s) list",
        "Core(s) per cluster",
        "Cluster(s)",
        "Physical sockets",
        "Physical chips",
        "Physical cores/chip",
    ];
    KEYS.contains(&key)
        || key.starts_with("Vulnerability ")
        || (key.starts_with('L') && key.ends_with(" cache"))
}

fn cpu_set(list: &str) -> Option<BTreeSet<u32>> {
    cpu_list(list).map(|v| v.into_iter().collect())
}

/// What env reports for an lscpu line, normalised; `Err` for a key the table does not know.
fn env_cpu_value(fp: &Fingerprint, key: &str, printed: &str) -> Result<Option<String>, String> {
    let cpu = fp.host.cpu.as_ref();
    let text = |v: Option<&String>| v.cloned();
    let number = |v: Option<u32>| v.map(|n| n.to_string());
    let value = match key {
        "Architecture" => text(fp.host.cpu_arch.as_ref()),
        "Model name" => text(fp.host.cpu_model.as_ref()),
        "CPU(s)" => number(cpu.and_then(|c| c.logical_cpus)),
        "On-line CPU(s) list" => cpu
            .and_then(|c| c.online.as_deref())
            .filter(|online| cpu_set(online) == cpu_set(printed))
            .map(|_| printed.to_owned()),
        "Vendor ID" => text(cpu.and_then(|c| c.vendor_id.as_ref())),
        "CPU family" => text(cpu.and_then(|c| c.family.as_ref())),
        "Model" => text(cpu.and_then(|c| c.model.as_ref())),
        "Stepping" => text(cpu.and_then(|c| c.stepping.as_ref())),
        "Thread(s) per core" => number(cpu.and_then(|c| c.threads_per_core)),
        "Core(s) per socket" => number(cpu.and_then(|c| c.cores_per_socket)),
        "Socket(s)" => number(cpu.and_then(|c| c.sockets)),
        "Address sizes" => text(cpu.and_then(|c| c.address_sizes.as_ref())),
        "Hypervisor vendor" => text(cpu.and_then(|c| c.hypervisor_vendor.as_ref())),
        "Virtualization type" => text(cpu.and_then(|c| c.virtualization_type.as_ref())),
        "Flags" => cpu
            .filter(|c| {
                c.flags.iter().map(String::as_str).collect::<BTreeSet<_>>()
                    == printed.split_whitespace().collect()
            })
            .map(|_| printed.to_owned()),
        "NUMA node(s)" => cpu.map(|c| c.numa_nodes.len().to_string()),
        numa if numa.starts_with("NUMA node") && numa.ends_with(" CPU(s)") => {
            let node = numa.trim_start_matches("NUMA ").trim_end_matches(" CPU(s)");
            cpu.and_then(|c| c.numa_nodes.get(node))
                .filter(|list| cpu_set(list) == cpu_set(printed))
                .map(|_| printed.to_owned())
        }
        other => return Err(format!("lscpu line `{other}` has no env field")),
    };
    Ok(value)
}

#[test]
fn env_reports_every_fact_collect_env_reports() {
    // An allocator setting, so that collect_env's "Caching allocator config" has a value.
    let alloc = ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True");
    let collect = Command::new(python())
        .args(["-m", "torch.utils.collect_env"])
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env(alloc.0, alloc.1)
        .output()
        .expect("collect_env runs");
    let text = String::from_utf8_lossy(&collect.stdout);
    assert!(collect.status.success(), "collect_env failed:\n{text}");
    let parsed = collect_env::parse(&text).expect("collect_env output parses");

    let output = gpuprobe()
        .args(["env", "--json", "--python"])
        .arg(python())
        .env(alloc.0, alloc.1)
        .output()
        .expect("gpuprobe env runs");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "env --json: {e}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let fp: Fingerprint =
        serde_json::from_value(report["fingerprint"].clone()).expect("a fingerprint");

    let mut problems = Vec::new();
    let mut compared = 0;
    for (key, printed) in &parsed.fields {
        if placeholder(printed) || (key == "GPU models and configuration" && printed.is_empty()) {
            continue;
        }
        match env_value(&fp, key, printed) {
            Ok(Some(value)) if value == *printed => compared += 1,
            Ok(other) => problems.push(format!("{key}: collect_env `{printed}`, env {other:?}")),
            Err(unknown) => problems.push(unknown),
        }
    }
    // GPU lines: `GPU 0: NVIDIA H100 ...` (nvidia-smi -L) or `name (gcnArchName)` (ROCm).
    let names: Vec<String> = fp
        .gpus
        .iter()
        .filter_map(|g| g.name.clone())
        .chain(
            fp.python
                .iter()
                .flat_map(|p| &p.torch)
                .flat_map(|t| &t.devices)
                .map(|d| d.name.clone()),
        )
        .collect();
    for model in &parsed.gpu_models {
        if names.iter().any(|n| model.contains(n.as_str())) {
            compared += 1;
        } else {
            problems.push(format!("GPU `{model}` is not among env's GPUs {names:?}"));
        }
    }
    // cuDNN: collect_env lists the libcudnn files of the loader cache; env lists the cuDNN
    // libraries of the same directories.
    let cudnn_dirs: BTreeSet<String> = fp
        .cuda
        .iter()
        .flat_map(|c| &c.libraries)
        .filter(|l| l.name == "libcudnn")
        .filter_map(|l| l.path.rsplit_once('/').map(|(d, _)| d.to_owned()))
        .collect();
    for path in &parsed.cudnn {
        match path.rsplit_once('/') {
            Some((dir, _)) if cudnn_dirs.contains(dir) => compared += 1,
            _ => problems.push(format!("cuDNN `{path}` is not in env's {cudnn_dirs:?}")),
        }
    }
    for (key, printed) in &parsed.cpu {
        if lscpu_not_reported(key) {
            continue;
        }
        match env_cpu_value(&fp, key, printed) {
            Ok(Some(value)) if value == *printed => compared += 1,
            Ok(other) => problems.push(format!("CPU {key}: lscpu `{printed}`, env {other:?}")),
            Err(unknown) => problems.push(unknown),
        }
    }
    let python = fp.python.as_ref().expect("python facts");
    for (name, version) in &parsed.packages {
        // `[conda]` rows are conda's records, joined into the package list (a row matched
        // only by its channel is not: docs/fingerprint.md, "Parity with collect_env").
        let found = python.packages.get(name);
        if found == Some(version) {
            compared += 1;
        } else {
            problems.push(format!("package {name}=={version}: env has {found:?}"));
        }
    }
    assert!(
        problems.is_empty(),
        "env misses or differs on {} of collect_env's facts:\n{}\n\ncollect_env:\n{text}",
        problems.len(),
        problems.join("\n")
    );
    // The CPU venv alone gives torch, build, OS, compiler, libc, Python, CPU and package
    // facts: far more than this floor, which keeps the test from passing on an empty parse.
    assert!(compared >= 25, "only {compared} facts compared:\n{text}");
}

#[test]
fn python_dict_pairs() {
    assert_eq!(
        python_dict("{'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True', 'B': 'x'}"),
        vec![
            (
                "PYTORCH_CUDA_ALLOC_CONF".to_owned(),
                "expandable_segments:True".to_owned()
            ),
            ("B".to_owned(), "x".to_owned())
        ]
    );
}
