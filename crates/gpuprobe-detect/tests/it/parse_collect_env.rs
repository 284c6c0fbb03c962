//! collect_env: the ROCm (TheRock nightly, gfx1151) and CUDA (H100) variants.

use gpuprobe_detect::parse::collect_env;
use gpuprobe_model::Fingerprint;
use gpuprobe_model::Vendor;

use crate::common::fixture;

#[test]
fn rocm_therock_gfx1151() {
    let info = collect_env::parse(&fixture(
        "collect_env/gfx1151-therock-nightly-rocm-issue5890.txt",
    ))
    .expect("parses");
    assert_eq!(
        info.torch_version.as_deref(),
        Some("2.11.0a0+rocm7.11.0a20260106")
    );
    assert_eq!(info.debug_build, Some(false));
    assert_eq!(info.cuda_build, None);
    assert_eq!(info.rocm_build.as_deref(), Some("7.2.53150"));
    assert_eq!(info.os.as_deref(), Some("Ubuntu 25.10 (x86_64)"));
    assert_eq!(info.python_version.as_deref(), Some("3.12.12"));
    assert_eq!(info.kernel_release.as_deref(), Some("6.17.0-8-generic"));
    assert_eq!(info.gpu_available, Some(true));
    assert_eq!(info.cuda_runtime, None, "`Could not collect`");
    assert_eq!(info.gpu_models, vec!["Radeon 8060S Graphics (gfx1151)"]);
    assert_eq!(info.nvidia_driver, None);
    assert_eq!(info.hip_runtime.as_deref(), Some("7.2.53150"));
    assert_eq!(info.miopen_runtime.as_deref(), Some("3.5.1"));
    assert_eq!(info.allocator_config, None);
    assert!(info.is_rocm());

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.host.distro_pretty.as_deref(), Some("Ubuntu 25.10"));
    assert_eq!(fp.host.cpu_arch.as_deref(), Some("x86_64"));
    assert_eq!(fp.host.kernel_release.as_deref(), Some("6.17.0-8-generic"));
    assert_eq!(
        fp.rocm
            .as_ref()
            .and_then(|r| r.hip_version.clone())
            .as_deref(),
        Some("7.2.53150")
    );
    let torch = fp
        .python
        .as_ref()
        .and_then(|p| p.torch.clone())
        .expect("torch");
    assert_eq!(torch.hip.as_deref(), Some("7.2.53150"));
    assert!(torch.gpu_available);
    assert_eq!(torch.devices.len(), 1);
    assert_eq!(torch.devices[0].arch.as_deref(), Some("gfx1151"));
    assert_eq!(fp.gpus.len(), 1);
    let g = &fp.gpus[0];
    assert_eq!(g.vendor, Vendor::Amd);
    assert_eq!(g.index, Some(0));
    assert_eq!(g.name.as_deref(), Some("Radeon 8060S Graphics"));
    assert_eq!(g.runtime_isa.as_deref(), Some("gfx1151"));
    assert_eq!(g.is_apu, Some(true));
}

#[test]
fn cuda_h100_with_leading_warning() {
    let info =
        collect_env::parse(&fixture("collect_env/h100-torch2.11-cu130.txt")).expect("parses");
    assert_eq!(info.torch_version.as_deref(), Some("2.11.0+cu130"));
    assert_eq!(info.cuda_build.as_deref(), Some("13.0"));
    assert_eq!(info.rocm_build, None);
    assert_eq!(info.os.as_deref(), Some("Ubuntu 24.04.3 LTS (x86_64)"));
    assert_eq!(info.python_version.as_deref(), Some("3.12.3"));
    assert_eq!(info.kernel_release.as_deref(), Some("6.18.44-fc-v657-gpu"));
    assert_eq!(info.cuda_runtime.as_deref(), Some("13.0.88"));
    assert_eq!(info.gpu_models, vec!["GPU 0: NVIDIA H100 80GB HBM3"]);
    assert_eq!(info.nvidia_driver.as_deref(), Some("580.159.04"));
    assert_eq!(info.cudnn.len(), 8);
    assert_eq!(
        info.cudnn[0],
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0"
    );
    assert_eq!(info.hip_runtime, None);
    assert_eq!(
        info.cpu.get("Model name").map(String::as_str),
        Some("Intel(R) Xeon(R) Processor")
    );
    assert_eq!(
        info.cpu.get("Hypervisor vendor").map(String::as_str),
        Some("KVM")
    );
    assert_eq!(
        info.packages.get("torch").map(String::as_str),
        Some("2.11.0")
    );
    assert_eq!(
        info.packages.get("nvidia-nccl-cu13").map(String::as_str),
        Some("2.28.9")
    );
    assert_eq!(
        info.packages.get("triton").map(String::as_str),
        Some("3.6.0")
    );
    assert!(
        !info.packages.contains_key("Could"),
        "`[conda] Could not collect` is not a package"
    );
    assert!(!info.is_rocm());

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(
        fp.host.cpu_model.as_deref(),
        Some("Intel(R) Xeon(R) Processor")
    );
    assert_eq!(fp.host.virtualization.as_deref(), Some("kvm"));
    assert_eq!(
        fp.nvidia
            .as_ref()
            .and_then(|n| n.version.clone())
            .as_deref(),
        Some("580.159.04")
    );
    assert_eq!(
        fp.cuda
            .as_ref()
            .and_then(|c| c.runtime_version.clone())
            .as_deref(),
        Some("13.0.88")
    );
    assert_eq!(fp.gpus.len(), 1);
    assert_eq!(fp.gpus[0].vendor, Vendor::Nvidia);
    assert_eq!(fp.gpus[0].name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(fp.gpus[0].index, None, "nvidia-smi -L order is not torch's");
    assert_eq!(fp.gpus[0].compute_capability.as_deref(), Some("9.0"));
    let python = fp.python.expect("python");
    assert_eq!(python.version.as_deref(), Some("3.12.3"));
    assert_eq!(
        python
            .torch
            .as_ref()
            .and_then(|t| t.cuda.clone())
            .as_deref(),
        Some("13.0")
    );
}

#[test]
fn multi_gpu_cuda_lines_follow_the_key() {
    let text = "PyTorch version: 2.5.1+cu124\nCUDA used to build PyTorch: 12.4\nIs CUDA available: True\nGPU models and configuration: \nGPU 0: NVIDIA A100-SXM4-80GB\nGPU 1: NVIDIA A100-SXM4-80GB\n\nNvidia driver version: 550.54.15\n";
    let info = collect_env::parse(text).expect("parses");
    assert_eq!(
        info.gpu_models,
        vec![
            "GPU 0: NVIDIA A100-SXM4-80GB",
            "GPU 1: NVIDIA A100-SXM4-80GB"
        ]
    );
    assert_eq!(info.nvidia_driver.as_deref(), Some("550.54.15"));
}

/// Every value collect_env prints when it has none: `No CUDA` (all CUDA fields when torch
/// sees no CUDA device), `None` (`torch.version.cuda` of a CPU build), `Could not collect`,
/// `N/A` (HIP/MIOpen off ROCm, everything without torch), an empty value, and the other
/// placeholders tools print.
const PLACEHOLDERS: &[&str] = &[
    "No CUDA",
    "None",
    "Could not collect",
    "N/A",
    "",
    "Unknown",
    "Not available",
];

/// The fields whose value could become a GPU, a driver or a version.
const VALUE_FIELDS: &[&str] = &[
    "CUDA used to build PyTorch",
    "ROCM used to build PyTorch",
    "CUDA runtime version",
    "GPU models and configuration",
    "Nvidia driver version",
    "cuDNN version",
    "HIP runtime version",
    "MIOpen runtime version",
    "Caching allocator config",
    "Python version",
    "OS",
    "Python platform",
];

fn placeholder() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    (
        proptest::sample::select(PLACEHOLDERS),
        0u8..3,
        "[ \t]{0,2}",
        "[ \t]{0,2}",
    )
        .prop_map(|(p, case, before, after)| {
            let p = match case {
                0 => p.to_owned(),
                1 => p.to_ascii_lowercase(),
                _ => p.to_ascii_uppercase(),
            };
            format!("{before}{p}{after}")
        })
}

/// What a paste of placeholders must not produce: a GPU, a driver, a runtime or library
/// version.
fn assert_nothing_invented(info: &collect_env::CollectEnv, fp: &Fingerprint, text: &str) {
    assert!(info.gpu_models.is_empty(), "{:?}\n{text}", info.gpu_models);
    assert_eq!(info.cuda_build, None, "{text}");
    assert_eq!(info.rocm_build, None, "{text}");
    assert_eq!(info.cuda_runtime, None, "{text}");
    assert_eq!(info.nvidia_driver, None, "{text}");
    assert!(info.cudnn.is_empty(), "{:?}\n{text}", info.cudnn);
    assert_eq!(info.hip_runtime, None, "{text}");
    assert_eq!(info.miopen_runtime, None, "{text}");
    assert_eq!(info.python_version, None, "{text}");
    assert_eq!(info.os, None, "{text}");
    assert!(fp.gpus.is_empty(), "{:?}\n{text}", fp.gpus);
    assert!(
        fp.nvidia
            .as_ref()
            .and_then(|n| n.version.as_ref())
            .is_none(),
        "{:?}\n{text}",
        fp.nvidia
    );
    assert!(
        fp.cuda
            .as_ref()
            .and_then(|c| c.runtime_version.as_ref())
            .is_none(),
        "{:?}\n{text}",
        fp.cuda
    );
    assert!(
        fp.rocm
            .as_ref()
            .and_then(|r| r.hip_version.as_ref())
            .is_none(),
        "{:?}\n{text}",
        fp.rocm
    );
    assert!(fp.extra.is_empty(), "{:?}\n{text}", fp.extra);
    assert_eq!(fp.host.distro_pretty, None, "{text}");
    assert_eq!(fp.host.os, None, "{text}");
    if let Some(torch) = fp.python.as_ref().and_then(|p| p.torch.as_ref()) {
        assert_eq!(torch.cuda, None, "{text}");
        assert_eq!(torch.hip, None, "{text}");
        assert!(torch.devices.is_empty(), "{:?}\n{text}", torch.devices);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    /// Whatever placeholder stands in whichever field, with a real torch version (CUDA, ROCm
    /// or CPU build) and either availability, no GPU, driver or version comes out of it.
    #[test]
    fn collect_env_placeholders_never_become_gpu_driver_or_version(
        values in proptest::collection::vec(placeholder(), VALUE_FIELDS.len()),
        torch in proptest::sample::select(&["2.1.2+cu121", "2.8.0+rocm6.4", "2.8.0+cpu", "2.8.0a0+gitfc14c65"][..]),
        available in proptest::sample::select(&["True", "False", "Yes", "No", "N/A"][..]),
        gpu_lines_after in proptest::option::of(placeholder()),
    ) {
        let mut text = format!(
            "Collecting environment information...\nPyTorch version: {torch}\nIs debug build: False\nIs CUDA available: {available}\n"
        );
        for (field, value) in VALUE_FIELDS.iter().zip(&values) {
            text.push_str(&format!("{field}: {value}\n"));
            if *field == "GPU models and configuration" && value.trim().is_empty() {
                // A multi-line value starts on the next line.
                if let Some(line) = &gpu_lines_after {
                    text.push_str(&format!("{line}\n\n"));
                }
            }
        }
        let info = collect_env::parse(&text).expect("recognised");
        let mut fp = Fingerprint::default();
        info.apply(&mut fp);
        assert_nothing_invented(&info, &fp, &text);
    }

    /// A placeholder in the torch version is no torch at all.
    #[test]
    fn collect_env_placeholder_torch_version_is_no_torch(value in placeholder()) {
        let text = format!("Collecting environment information...\nPyTorch version: {value}\nIs CUDA available: False\n");
        let info = collect_env::parse(&text).expect("recognised");
        assert_eq!(info.torch_version, None, "{text}");
        let mut fp = Fingerprint::default();
        info.apply(&mut fp);
        assert!(fp.python.as_ref().and_then(|p| p.torch.as_ref()).is_none(), "{text}");
    }
}

/// The most common paste in bug reports: a CUDA build of torch on a machine where CUDA is
/// not available. Every CUDA field says `No CUDA`; none of it is a GPU or a driver.
#[test]
fn cpu_only_paste_has_no_gpu_driver_or_runtime() {
    let info = collect_env::parse(&fixture(
        "collect_env/cpu-only-cu121-no-gpu-vllm-issue4858.txt",
    ))
    .expect("parses");
    assert_eq!(info.torch_version.as_deref(), Some("2.1.2+cu121"));
    assert_eq!(info.cuda_build.as_deref(), Some("12.1"));
    assert_eq!(info.rocm_build, None);
    assert_eq!(info.gpu_available, Some(false));
    assert_eq!(info.cuda_runtime, None, "`No CUDA`");
    assert!(info.gpu_models.is_empty(), "{:?}", info.gpu_models);
    assert_eq!(info.nvidia_driver, None, "`No CUDA`");
    assert!(info.cudnn.is_empty(), "{:?}", info.cudnn);
    assert_eq!(info.hip_runtime, None, "`N/A`");
    assert_eq!(info.miopen_runtime, None, "`N/A`");
    assert!(!info.is_rocm());
    assert!(!info.is_windows());

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert!(fp.gpus.is_empty(), "{:?}", fp.gpus);
    assert!(fp.nvidia.is_none(), "{:?}", fp.nvidia);
    assert!(fp.rocm.is_none(), "{:?}", fp.rocm);
    assert!(fp.extra.is_empty(), "{:?}", fp.extra);
    assert_eq!(fp.host.os.as_deref(), Some("linux"));
    assert_eq!(fp.host.distro_pretty.as_deref(), Some("Ubuntu 22.04.4 LTS"));
    assert_eq!(
        fp.host.kernel_release.as_deref(),
        Some("5.15.0-105-generic")
    );
    assert_eq!(
        fp.host.cpu_model.as_deref(),
        Some("AMD Ryzen 5 6600H with Radeon Graphics")
    );
    let torch = fp
        .python
        .as_ref()
        .and_then(|p| p.torch.clone())
        .expect("torch");
    assert!(!torch.gpu_available);
    assert!(torch.devices.is_empty());
    // The wheel's own CUDA (what it was built with) is a fact; the toolkit is `No CUDA`.
    assert_eq!(torch.cuda.as_deref(), Some("12.1"));
    let text = gpuprobe_detect::render_text(&fp);
    assert!(!text.contains("No CUDA"), "{text}");
}

/// A ROCm build of torch on Windows (AMD's PyTorch for Windows, HIP SDK 6.4): the OS,
/// its build, the CPU, the GPU and the HIP/MIOpen versions.
#[test]
fn windows_rocm_paste_gfx1201() {
    let info = collect_env::parse(&fixture(
        "collect_env/windows-rx9070xt-gfx1201-hip6.4-rocm-issue5441.txt",
    ))
    .expect("parses");
    assert!(info.is_windows());
    assert!(info.is_rocm());
    assert_eq!(
        info.os.as_deref(),
        Some("Microsoft Windows 11 Pro (10.0.26100 64-bit)")
    );
    assert_eq!(info.windows_build.as_deref(), Some("10.0.26100"));
    assert_eq!(info.kernel_release, None, "Windows has no Linux kernel");
    assert_eq!(info.rocm_build.as_deref(), Some("6.4.50101-9a6572ae7"));
    assert_eq!(info.hip_runtime.as_deref(), Some("6.4.50101"));
    assert_eq!(info.miopen_runtime.as_deref(), Some("3.4.1"));
    assert_eq!(info.gpu_models, vec!["AMD Radeon RX 9070 XT (gfx1201)"]);
    assert_eq!(info.nvidia_driver, None);
    assert_eq!(
        info.cpu.get("Name").map(String::as_str),
        Some("AMD Ryzen 5 9600X 6-Core Processor")
    );

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.host.os.as_deref(), Some("windows"));
    assert!(!fp.host.wsl);
    assert_eq!(
        fp.host.distro_pretty.as_deref(),
        Some("Microsoft Windows 11 Pro")
    );
    assert_eq!(fp.host.distro_id.as_deref(), Some("windows"));
    assert_eq!(fp.host.distro_version.as_deref(), Some("10.0.26100"));
    assert_eq!(
        fp.host.cpu_arch.as_deref(),
        Some("x86_64"),
        "from `(AMD64)`"
    );
    assert_eq!(
        fp.host.cpu_model.as_deref(),
        Some("AMD Ryzen 5 9600X 6-Core Processor")
    );
    assert_eq!(fp.host.kernel_release, None);
    assert_eq!(
        fp.rocm
            .as_ref()
            .and_then(|r| r.hip_version.clone())
            .as_deref(),
        Some("6.4.50101")
    );
    assert_eq!(fp.gpus.len(), 1);
    let g = &fp.gpus[0];
    assert_eq!(g.vendor, Vendor::Amd);
    assert_eq!(g.index, Some(0));
    assert_eq!(g.name.as_deref(), Some("AMD Radeon RX 9070 XT"));
    assert_eq!(g.runtime_isa.as_deref(), Some("gfx1201"));
    assert_eq!(g.is_apu, Some(false));
    assert!(fp.nvidia.is_none());
}

/// A CPU build of torch on Windows: Windows is recognised, no GPU is made up, and the CPU
/// comes from the `Name:` line Windows prints instead of lscpu's `Model name:`.
#[test]
fn windows_cpu_only_paste() {
    let info = collect_env::parse(&fixture(
        "collect_env/windows-cpu-only-torch2.8-pytorch-pr137846.txt",
    ))
    .expect("parses");
    assert!(info.is_windows());
    assert!(!info.is_rocm());
    assert_eq!(info.cuda_build, None, "`None`");
    assert_eq!(info.windows_build.as_deref(), Some("10.0.22631"));
    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.host.os.as_deref(), Some("windows"));
    assert_eq!(
        fp.host.distro_pretty.as_deref(),
        Some("Microsoft Windows 11 Enterprise")
    );
    assert_eq!(fp.host.cpu_arch.as_deref(), Some("x86_64"));
    assert_eq!(
        fp.host.cpu_model.as_deref(),
        Some("12th Gen Intel(R) Core(TM) i7-1270P")
    );
    assert!(fp.gpus.is_empty(), "{:?}", fp.gpus);
    assert!(fp.nvidia.is_none());
    assert!(fp.cuda.is_none());
}

/// Older Windows pastes: no build in the OS line, `Yes`/`No` flags, the CPU section as
/// `Key=value`, and a cuDNN list of Windows paths.
#[test]
fn older_windows_layout() {
    let text = "Collecting environment information...\nPyTorch version: 1.5.0+cu101\nIs debug build: No\nCUDA used to build PyTorch: 10.1\n\nOS: Microsoft Windows 10 Home Single Language\nPython version: 3.7 (64-bit runtime)\nPython platform: Windows-10-10.0.19041-SP0\nIs CUDA available: Yes\nCUDA runtime version: 10.1.243\nGPU models and configuration: GPU 0: TITAN RTX\nNvidia driver version: 442.92\ncuDNN version: Probably one of the following:\nC:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v10.1\\bin\\cudnn64_7.dll\nC:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v10.1\\bin\\cudnn_ops_infer64_8.dll\n\nCPU:\nArchitecture=9\nName=Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz\n\nVersions of relevant libraries:\n[pip] numpy==1.19.0\n";
    let info = collect_env::parse(text).expect("parses");
    assert!(info.is_windows());
    assert_eq!(info.debug_build, Some(false));
    assert_eq!(info.gpu_available, Some(true));
    assert_eq!(info.windows_build.as_deref(), Some("10.0.19041"));
    assert_eq!(info.cudnn.len(), 2, "{:?}", info.cudnn);
    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.host.os.as_deref(), Some("windows"));
    assert_eq!(
        fp.host.distro_pretty.as_deref(),
        Some("Microsoft Windows 10 Home Single Language")
    );
    assert_eq!(
        fp.host.cpu_model.as_deref(),
        Some("Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz")
    );
    assert_eq!(fp.host.cpu_arch, None, "no `(AMD64)` to read it from");
    assert_eq!(
        fp.nvidia
            .as_ref()
            .and_then(|n| n.version.clone())
            .as_deref(),
        Some("442.92")
    );
    assert_eq!(fp.gpus.len(), 1);
    assert_eq!(fp.gpus[0].name.as_deref(), Some("TITAN RTX"));
}

/// A WSL kernel in `Python platform` is Linux under WSL, which the KB tells apart.
#[test]
fn wsl_kernel_sets_wsl() {
    let text = "PyTorch version: 2.4.0+cu121\nOS: Ubuntu 22.04.2 LTS (x86_64)\nPython platform: Linux-5.15.153.1-microsoft-standard-WSL2-x86_64-with-glibc2.35\nIs CUDA available: True\n";
    let info = collect_env::parse(text).expect("parses");
    assert!(!info.is_windows());
    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.host.os.as_deref(), Some("linux"));
    assert!(fp.host.wsl);
    assert_eq!(
        fp.host.kernel_release.as_deref(),
        Some("5.15.153.1-microsoft-standard-WSL2")
    );
}

/// collect_env prints `No relevant packages` for an empty pip or conda list: not a package
/// called `No` at version `relevant`.
#[test]
fn no_relevant_packages_is_not_a_package() {
    let text = "PyTorch version: 2.1.2\nIs debug build: False\n\nVersions of relevant libraries:\n[pip3] No relevant packages\n[conda] No relevant packages\n[conda] pytorch-cuda              12.1                 ha16c6d3_5    pytorch\n";
    let info = gpuprobe_detect::parse::collect_env::parse(text).expect("parses");
    assert!(!info.packages.contains_key("No"), "{:?}", info.packages);
    assert_eq!(
        info.packages.get("pytorch-cuda").map(String::as_str),
        Some("12.1")
    );
}
