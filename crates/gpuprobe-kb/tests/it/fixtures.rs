//! Fingerprints and probe results for the tests.
//!
//! `h100_host` is modelled on a real capture (NVIDIA H100, driver 580.159.04, torch
//! 2.11.0+cu130, Ubuntu 24.04 in a Firecracker VM, kernel 6.18.44, captured 2026-11-22):
//! its kernel command line and environment are copied verbatim.

use std::collections::BTreeMap;

use gpuprobe_model::{
    AmdgpuDriver, CudaInfo, DriverSource, FirmwareVersion, GpuInfo, HostInfo, LibraryInfo,
    NvidiaDriver, PythonEnv, RocmInfo, TorchDevice, TorchInfo, Unreadable, Vendor,
};
use gpuprobe_model::{DeviceRef, FailClass, Fingerprint, Layer, ProbeId, ProbeResult, Verdict};

pub(crate) const H100_CMDLINE: &str = "mitigations=auto,no_guest_host,no_guest_guest console=ttyS0 quiet reboot=k panic=1 random.trust_cpu=1 swiotlb=noforce psi=1 page_reporting.page_reporting_order=11 deferred_init=lazy nested_pvm=1 rdinit=/process_api pci=realloc=off driver_async_probe=mlx5_core memhp_default_state=online_kernel fc_dmapin=0xeebe0000,0x3000,0xeebf0000 -- --firecracker-init --addr 0.0.0.0:2024 --max-ws-buffer-size 32768 --block-local-connections --log-vsock-port 5002 --control-vsock-port 5001 --listen-vsock-port 2024 --tcp-readiness-only --auth-required";

const NVIDIA_REQUIRE_CUDA: &str = "cuda>=13.0 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 brand=nvidiartx,driver>=535,driver<536 brand=vapps,driver>=535,driver<536 brand=vpc,driver>=535,driver<536 brand=vcs,driver>=535,driver<536 brand=vws,driver>=535,driver<536 brand=cloudgaming,driver>=535,driver<536 brand=unknown,driver>=550,driver<551 brand=grid,driver>=550,driver<551 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551 brand=quadro,driver>=550,driver<551 brand=quadrortx,driver>=550,driver<551 brand=nvidiartx,driver>=550,driver<551 brand=vapps,driver>=550,driver<551 brand=vpc,driver>=550,driver<551 brand=vcs,driver>=550,driver<551 brand=vws,driver>=550,driver<551 brand=cloudgaming,driver>=550,driver<551 brand=unknown,driver>=565,driver<566 brand=grid,driver>=565,driver<566 brand=tesla,driver>=565,driver<566 brand=nvidia,driver>=565,driver<566 brand=quadro,driver>=565,driver<566 brand=quadrortx,driver>=565,driver<566 brand=nvidiartx,driver>=565,driver<566 brand=vapps,driver>=565,driver<566 brand=vpc,driver>=565,driver<566 brand=vcs,driver>=565,driver<566 brand=vws,driver>=565,driver<566 brand=cloudgaming,driver>=565,driver<566 brand=unknown,driver>=570,driver<571 brand=grid,driver>=570,driver<571 brand=tesla,driver>=570,driver<571 brand=nvidia,driver>=570,driver<571 brand=quadro,driver>=570,driver<571 brand=quadrortx,driver>=570,driver<571 brand=nvidiartx,driver>=570,driver<571 brand=vapps,driver>=570,driver<571 brand=vpc,driver>=570,driver<571 brand=vcs,driver>=570,driver<571 brand=vws,driver>=570,driver<571 brand=cloudgaming,driver>=570,driver<571 brand=unknown,driver>=575,driver<576 brand=grid,driver>=575,driver<576 brand=tesla,driver>=575,driver<576 brand=nvidia,driver>=575,driver<576 brand=quadro,driver>=575,driver<576 brand=quadrortx,driver>=575,driver<576 brand=nvidiartx,driver>=575,driver<576 brand=vapps,driver>=575,driver<576 brand=vpc,driver>=575,driver<576 brand=vcs,driver>=575,driver<576 brand=vws,driver>=575,driver<576 brand=cloudgaming,driver>=575,driver<576";

pub(crate) fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The NVIDIA H100 host of the device capture.
pub(crate) fn h100_host() -> Fingerprint {
    let mut gpu = GpuInfo::new(Vendor::Nvidia);
    gpu.index = Some(0);
    gpu.name = Some("NVIDIA H100 80GB HBM3".into());
    gpu.pci_bus = Some("0000:00:06.0".into());
    gpu.pci_vendor_id = Some("0x10de".into());
    gpu.pci_device_id = Some("0x2330".into());
    gpu.compute_capability = Some("9.0".into());
    gpu.vram_total_bytes = Some(81079 * 1024 * 1024);
    gpu.compute_units = Some(132);
    gpu.sources = vec!["nvidia-smi".into(), "torch".into()];
    Fingerprint {
        source: "live".into(),
        host: HostInfo {
            hostname: Some("vm".into()),
            os: Some("linux".into()),
            distro_id: Some("ubuntu".into()),
            distro_version: Some("24.04".into()),
            distro_pretty: Some("Ubuntu 24.04.3 LTS".into()),
            kernel_release: Some("6.18.44-fc-v657-gpu".into()),
            kernel_cmdline: Some(H100_CMDLINE.into()),
            cpu_arch: Some("x86_64".into()),
            cpu_model: Some("Intel(R) Xeon(R) Processor".into()),
            mem_total_bytes: Some(131_981_020 * 1024),
            wsl: false,
            container: Some("docker".into()),
            virtualization: Some("firecracker".into()),
            secure_boot: None,
            iommu: None,
            uid: Some(0),
            inaccessible_device_nodes: Vec::new(),
            ..Default::default()
        },
        gpus: vec![gpu],
        amdgpu: None,
        nvidia: Some(NvidiaDriver {
            version: Some("580.159.04".into()),
            cuda_driver_version: Some("13.0".into()),
            flavor: Some("open".into()),
        }),
        // A stray HIP runtime in /lib, as on the real host: not a ROCm stack.
        rocm: Some(RocmInfo {
            libraries: vec![LibraryInfo {
                name: "libamdhip64".into(),
                path: "/lib/x86_64-linux-gnu/libamdhip64.so.5".into(),
                version: Some("5".into()),
                origin: Some("ldconfig".into()),
            }],
            ..RocmInfo::default()
        }),
        cuda: Some(CudaInfo {
            runtime_version: Some("13.0".into()),
            libraries: Vec::new(),
            ..Default::default()
        }),
        python: Some(PythonEnv {
            executable: "/opt/torch/.venv/bin/python3".into(),
            chosen_by: "PATH".into(),
            version: Some("3.12.3".into()),
            torch: Some(TorchInfo {
                version: "2.11.0+cu130".into(),
                hip: None,
                cuda: Some("13.0".into()),
                arch_list: ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                gpu_available: true,
                devices: vec![TorchDevice {
                    index: 0,
                    name: "NVIDIA H100 80GB HBM3".into(),
                    arch: Some("sm_90".into()),
                    total_memory: Some(81079 * 1024 * 1024),
                    multi_processor_count: Some(132),
                    pci_bus: Some("0000:00:06.0".into()),
                    integrated: Some(false),
                }],
                allocator_conf: None,
                lib_dir: Some("/opt/torch/.venv/lib/python3.12/site-packages/torch/lib".into()),
                ..Default::default()
            }),
            torch_error: None,
            packages: BTreeMap::new(),
            ..Default::default()
        }),
        env: env(&[
            ("NVIDIA_VISIBLE_DEVICES", "0"),
            ("NVIDIA_REQUIRE_CUDA", NVIDIA_REQUIRE_CUDA),
            ("TORCH_CUDA_ARCH_LIST", "9.0a"),
            ("NCCL_VERSION", "2.28.3-1"),
            ("NVIDIA_DRIVER_CAPABILITIES", "compute,graphics,utility"),
            ("NVIDIA_PRODUCT_NAME", "CUDA"),
            ("CUDA_VERSION", "13.0.2"),
            ("CUDAHOSTCXX", "/opt/gcc/bin/g++"),
            (
                "LD_LIBRARY_PATH",
                "/usr/local/nvidia/lib64:/usr/local/nvidia/lib",
            ),
            ("CUDA_HOME", "/usr/local/cuda"),
            (
                "PATH",
                "/opt/torch/.venv/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/gcc/bin",
            ),
        ]),
        kernel_events: Vec::new(),
        unreadable: vec![Unreadable {
            what: "DRM devices".into(),
            reason: "/sys/class/drm does not exist".into(),
        }],
        extra: BTreeMap::new(),
        toolchain: Default::default(),
    }
}

/// An AMD GPU with a native ISA.
pub(crate) fn amd_gpu(index: u32, isa: &str, apu: bool) -> GpuInfo {
    let mut gpu = GpuInfo::new(Vendor::Amd);
    gpu.index = Some(index);
    gpu.native_isa = Some(isa.into());
    gpu.runtime_isa = Some(isa.into());
    gpu.is_apu = Some(apu);
    gpu.pci_vendor_id = Some("0x1002".into());
    gpu
}

/// A plain AMD Linux host with one GPU and a ROCm torch.
pub(crate) fn amd_host(isa: &str, apu: bool, kernel: &str, torch: &str) -> Fingerprint {
    let hip = torch.split_once("+rocm").map(|(_, rocm)| {
        format!(
            "{}.26015",
            rocm.split('.').take(2).collect::<Vec<_>>().join(".")
        )
    });
    Fingerprint {
        source: "live".into(),
        host: HostInfo {
            os: Some("linux".into()),
            distro_id: Some("ubuntu".into()),
            distro_version: Some("24.04".into()),
            kernel_release: Some(kernel.into()),
            kernel_cmdline: Some(format!(
                "BOOT_IMAGE=/vmlinuz-{kernel} root=UUID=0b1c ro quiet splash"
            )),
            cpu_arch: Some("x86_64".into()),
            uid: Some(1000),
            ..HostInfo::default()
        },
        gpus: vec![amd_gpu(0, isa, apu)],
        amdgpu: Some(AmdgpuDriver {
            loaded: true,
            source: DriverSource::Inbox,
            version: None,
            params: BTreeMap::new(),
            ttm_params: BTreeMap::new(),
        }),
        nvidia: None,
        rocm: None,
        cuda: None,
        python: Some(PythonEnv {
            executable: "/home/u/venv/bin/python".into(),
            chosen_by: "VIRTUAL_ENV".into(),
            version: Some("3.12.3".into()),
            torch: Some(TorchInfo {
                version: torch.into(),
                hip,
                cuda: None,
                arch_list: vec![isa.to_string()],
                gpu_available: true,
                devices: Vec::new(),
                allocator_conf: None,
                lib_dir: None,
                ..Default::default()
            }),
            torch_error: None,
            packages: BTreeMap::new(),
            ..Default::default()
        }),
        env: BTreeMap::new(),
        kernel_events: Vec::new(),
        unreadable: Vec::new(),
        extra: BTreeMap::new(),
        toolchain: Default::default(),
    }
}

/// Strix Halo (gfx1151 APU) on an inbox kernel with MES firmware 0x83.
pub(crate) fn strix_halo_mes_0x83() -> Fingerprint {
    let mut fp = amd_host("gfx1151", true, "6.17.0-19-generic", "2.11.0+rocm7.2");
    fp.gpus[0].name = Some("AMD Radeon 8060S".into());
    fp.gpus[0].pci_device_id = Some("0x1586".into());
    fp.gpus[0].firmware = vec![
        FirmwareVersion {
            name: "MES".into(),
            feature: Some(1),
            version: "0x00000083".into(),
        },
        FirmwareVersion {
            name: "MES_KIQ".into(),
            feature: Some(6),
            version: "0x0000006f".into(),
        },
    ];
    fp
}

/// A probe result on a device.
pub(crate) fn result(probe: &str, device: u32, verdict: Verdict) -> ProbeResult {
    ProbeResult {
        elapsed_s: Some(0.5),
        ..ProbeResult::new(
            ProbeId::new(probe),
            DeviceRef::Gpu(device),
            Layer::Framework,
            verdict,
        )
    }
}

pub(crate) fn fail(class: FailClass, detail: &str) -> Verdict {
    Verdict::Fail {
        class,
        detail: detail.into(),
    }
}
