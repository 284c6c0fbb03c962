//! nvidia-smi on the real H100 captures: dashboard, `-q`, csv query.

use gpuprobe_detect::parse::nvidia_smi::{self, Format};
use gpuprobe_model::Fingerprint;
use gpuprobe_model::Vendor;

use crate::common::fixture;

const MIB: u64 = 1 << 20;

#[test]
fn dashboard_h100() {
    let info = nvidia_smi::parse(&fixture("nvidia-smi/h100-dashboard.txt")).expect("parses");
    assert_eq!(info.format, Format::Dashboard);
    assert_eq!(info.driver_version.as_deref(), Some("580.159.04"));
    assert_eq!(info.cuda_version.as_deref(), Some("13.0"));
    assert_eq!(info.gpus.len(), 1);
    let g = &info.gpus[0];
    assert_eq!(g.index, Some(0));
    assert_eq!(g.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(g.pci_bus.as_deref(), Some("0000:00:06.0"));
    assert_eq!(g.memory_total_bytes, Some(81559 * MIB));
}

#[test]
fn query_h100() {
    let info = nvidia_smi::parse(&fixture("nvidia-smi/h100-q.txt")).expect("parses");
    assert_eq!(info.format, Format::Query);
    assert_eq!(info.driver_version.as_deref(), Some("580.159.04"));
    assert_eq!(info.cuda_version.as_deref(), Some("13.0"));
    let g = &info.gpus[0];
    assert_eq!(g.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(g.pci_bus.as_deref(), Some("0000:00:06.0"));
    assert_eq!(g.memory_total_bytes, Some(81559 * MIB));
    assert_eq!(g.vbios.as_deref(), Some("96.00.CF.00.01"));
    assert_eq!(
        g.uuid.as_deref(),
        Some("GPU-ea44a5c2-ba8f-5e6b-203c-23dd332e7afb")
    );
    assert_eq!(g.architecture.as_deref(), Some("Hopper"));
    assert_eq!(g.virtualization_mode.as_deref(), Some("Pass-Through"));
    assert_eq!(g.device_id.as_deref(), Some("0x2330"));
    assert_eq!(g.index, Some(0), "Minor Number");
}

#[test]
fn csv_h100() {
    let info = nvidia_smi::parse(&fixture("nvidia-smi/h100-query-csv.txt")).expect("parses");
    assert_eq!(info.format, Format::Csv);
    assert_eq!(info.driver_version.as_deref(), Some("580.159.04"));
    let g = &info.gpus[0];
    assert_eq!(g.index, Some(0));
    assert_eq!(g.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(g.pci_bus.as_deref(), Some("0000:00:06.0"));
    assert_eq!(g.memory_total_bytes, Some(81559 * MIB));
    assert_eq!(g.compute_cap.as_deref(), Some("9.0"));
    assert_eq!(
        g.columns.get("memory.total").map(String::as_str),
        Some("81559 MiB")
    );
}

#[test]
fn all_three_views_merge_into_one_gpu() {
    let mut fp = Fingerprint::default();
    for file in [
        "nvidia-smi/h100-dashboard.txt",
        "nvidia-smi/h100-q.txt",
        "nvidia-smi/h100-query-csv.txt",
    ] {
        nvidia_smi::parse(&fixture(file))
            .expect("parses")
            .apply(&mut fp);
    }
    assert_eq!(fp.gpus.len(), 1, "same PCI address, same GPU");
    let g = &fp.gpus[0];
    assert_eq!(g.vendor, Vendor::Nvidia);
    assert_eq!(g.compute_capability.as_deref(), Some("9.0"));
    assert_eq!(g.pci_device_id.as_deref(), Some("0x2330"));
    assert_eq!(g.vram_total_bytes, Some(81559 * MIB));
    assert_eq!(g.index, None, "nvidia-smi order is PCI order, not CUDA's");
    let driver = fp.nvidia.expect("driver");
    assert_eq!(driver.version.as_deref(), Some("580.159.04"));
    assert_eq!(driver.cuda_driver_version.as_deref(), Some("13.0"));
    assert_eq!(
        fp.extra
            .get("gpu.0000:00:06.0.virtualization_mode")
            .map(String::as_str),
        Some("Pass-Through")
    );
}

#[test]
fn csv_nounits_noheader_variants() {
    let info = nvidia_smi::parse("index, name, memory.total [MiB]\n0, NVIDIA A100-SXM4-80GB, 81920\n1, NVIDIA A100-SXM4-80GB, 81920\n").expect("parses");
    assert_eq!(info.gpus.len(), 2);
    assert_eq!(info.gpus[1].memory_total_bytes, Some(81920 * MIB));
    assert!(
        nvidia_smi::parse("0, NVIDIA A100, 81920\n").is_err(),
        "without a header the columns are unknown"
    );
}
