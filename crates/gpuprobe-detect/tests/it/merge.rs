//! Reconciling the Python worker's torch view with the PCI view.

use gpuprobe_detect::merge_python;
use gpuprobe_model::Fingerprint;
use gpuprobe_model::{GpuInfo, PythonEnv, TorchDevice, TorchInfo, Vendor};

use crate::collect_fake::nvidia_host_fingerprint;

fn amd_gpu(bus: &str, native: &str) -> GpuInfo {
    let mut g = GpuInfo::new(Vendor::Amd);
    g.pci_bus = Some(bus.to_owned());
    g.native_isa = Some(native.to_owned());
    g
}

fn python(torch: TorchInfo) -> PythonEnv {
    PythonEnv {
        executable: "/venv/bin/python".to_owned(),
        chosen_by: "VIRTUAL_ENV".to_owned(),
        version: Some("3.12.3".to_owned()),
        torch: Some(torch),
        ..PythonEnv::default()
    }
}

#[test]
fn cuda_device_matched_by_pci_address() {
    let mut fp = nvidia_host_fingerprint();
    let torch = TorchInfo {
        version: "2.11.0+cu130".to_owned(),
        cuda: Some("13.0".to_owned()),
        gpu_available: true,
        devices: vec![TorchDevice {
            index: 0,
            name: "NVIDIA H100 80GB HBM3".to_owned(),
            arch: Some("sm_90".to_owned()),
            total_memory: Some(85_017_755_648),
            multi_processor_count: Some(132),
            pci_bus: Some("00000000:00:06.0".to_owned()),
            integrated: Some(false),
        }],
        ..TorchInfo::default()
    };
    merge_python(&mut fp, python(torch));
    let g = &fp.gpus[0];
    assert_eq!(g.index, Some(0));
    assert_eq!(g.runtime_isa.as_deref(), Some("sm_90"));
    assert_eq!(g.compute_units, Some(132));
    assert_eq!(g.vram_total_bytes, Some(85_017_755_648));
    assert_eq!(g.is_apu, Some(false));
    assert_eq!(g.compute_capability.as_deref(), Some("9.0"));
    assert_eq!(g.sources, vec!["pci", "nvidia-proc", "torch"]);
    assert_eq!(
        fp.python.as_ref().map(|p| p.executable.as_str()),
        Some("/venv/bin/python")
    );
    assert_eq!(
        fp.cuda
            .as_ref()
            .and_then(|c| c.runtime_version.clone())
            .as_deref(),
        Some("13.0.2"),
        "the toolkit version found on disk stays"
    );
}

#[test]
fn rocm_devices_matched_by_order_split_features_and_reorder() {
    let mut fp = Fingerprint::default();
    fp.gpus.push(amd_gpu("0000:03:00.0", "gfx90a"));
    fp.gpus.push(amd_gpu("0000:83:00.0", "gfx90a"));
    let device = |index: u32| TorchDevice {
        index,
        name: "AMD Instinct MI210".to_owned(),
        arch: Some("gfx90a:sramecc+:xnack-".to_owned()),
        ..TorchDevice::default()
    };
    let torch = TorchInfo {
        version: "2.9.1+rocm6.4".to_owned(),
        hip: Some("6.4.43482".to_owned()),
        gpu_available: true,
        devices: vec![device(0), device(1)],
        ..TorchInfo::default()
    };
    merge_python(&mut fp, python(torch));
    assert_eq!(fp.gpus[0].index, Some(0));
    assert_eq!(fp.gpus[0].pci_bus.as_deref(), Some("0000:03:00.0"));
    assert_eq!(fp.gpus[1].index, Some(1));
    for g in &fp.gpus {
        assert_eq!(g.runtime_isa.as_deref(), Some("gfx90a"));
        assert_eq!(g.isa_features, vec!["sramecc+", "xnack-"]);
    }
    assert_eq!(
        fp.rocm
            .as_ref()
            .and_then(|r| r.hip_version.clone())
            .as_deref(),
        Some("6.4.43482")
    );
}

#[test]
fn visible_devices_prevent_guessing_by_order() {
    let mut fp = Fingerprint::default();
    fp.gpus.push(amd_gpu("0000:03:00.0", "gfx1100"));
    fp.gpus.push(amd_gpu("0000:0c:00.0", "gfx1036"));
    fp.env
        .insert("HIP_VISIBLE_DEVICES".to_owned(), "1".to_owned());
    let torch = TorchInfo {
        version: "2.10.0+rocm7.1".to_owned(),
        hip: Some("7.1.25424".to_owned()),
        devices: vec![TorchDevice {
            index: 0,
            name: "AMD Radeon Graphics".to_owned(),
            arch: Some("gfx1036".to_owned()),
            ..TorchDevice::default()
        }],
        ..TorchInfo::default()
    };
    merge_python(&mut fp, python(torch));
    assert!(
        fp.gpus.iter().all(|g| g.index.is_none()),
        "no guess: {:#?}",
        fp.gpus
    );
    assert!(
        fp.unreadable
            .iter()
            .any(|u| u.what == "PCI device of torch cuda:0")
    );
}

#[test]
fn override_runtime_isa_differs_from_native() {
    let mut fp = Fingerprint::default();
    fp.gpus.push(amd_gpu("0000:0d:00.0", "gfx1031"));
    let torch = TorchInfo {
        version: "2.5.1+rocm6.2".to_owned(),
        hip: Some("6.2.41133".to_owned()),
        devices: vec![TorchDevice {
            index: 0,
            name: "AMD Radeon RX 6700 XT".to_owned(),
            arch: Some("gfx1030".to_owned()),
            ..TorchDevice::default()
        }],
        ..TorchInfo::default()
    };
    merge_python(&mut fp, python(torch));
    let g = &fp.gpus[0];
    assert_eq!(g.native_isa.as_deref(), Some("gfx1031"));
    assert_eq!(g.runtime_isa.as_deref(), Some("gfx1030"));
    assert_eq!(g.name.as_deref(), Some("AMD Radeon RX 6700 XT"));
}

#[test]
fn devices_without_any_pci_gpu_are_added_from_torch() {
    let mut fp = Fingerprint::default();
    let torch = TorchInfo {
        version: "2.11.0+cu130".to_owned(),
        cuda: Some("13.0".to_owned()),
        devices: vec![TorchDevice {
            index: 0,
            name: "NVIDIA GeForce RTX 4090".to_owned(),
            arch: Some("sm_89".to_owned()),
            ..TorchDevice::default()
        }],
        ..TorchInfo::default()
    };
    merge_python(&mut fp, python(torch));
    assert_eq!(fp.gpus.len(), 1);
    assert_eq!(fp.gpus[0].vendor, Vendor::Nvidia);
    assert_eq!(fp.gpus[0].compute_capability.as_deref(), Some("8.9"));
    assert_eq!(fp.gpus[0].sources, vec!["torch"]);
}
