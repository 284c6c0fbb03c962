//! collect_env: the ROCm (TheRock nightly, gfx1151) and CUDA (H100) variants.

use gpuprobe_detect::parse::collect_env;
use gpuprobe_model::Fingerprint;
use gpuprobe_model::fingerprint::Vendor;

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
