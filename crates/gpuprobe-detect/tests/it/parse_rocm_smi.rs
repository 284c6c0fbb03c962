//! rocm-smi: concise table with errors (5.7) and `--showhw` (6.4).

use gpuprobe_detect::parse::rocm_smi::{self, View};
use gpuprobe_model::Fingerprint;
use gpuprobe_model::Vendor;

use crate::common::fixture;

#[test]
fn showhw_two_mi210() {
    let info = rocm_smi::parse(&fixture(
        "rocm-smi/showhw-gfx90a-2xMI210-rocm-issue5315.txt",
    ))
    .expect("parses");
    assert_eq!(info.view, View::Hardware);
    assert!(info.complete);
    assert_eq!(info.gpus.len(), 2);
    let first = &info.gpus[0];
    assert_eq!(first.index, 0);
    assert_eq!(first.node, Some(1));
    assert_eq!(first.device_id.as_deref(), Some("0x740f"));
    assert_eq!(first.gfx_version.as_deref(), Some("gfx90a"));
    assert_eq!(first.vbios.as_deref(), Some("113-D67301V-074"));
    assert_eq!(first.pci_bus.as_deref(), Some("0000:18:00.0"));
    assert_eq!(first.columns.get("GUID").map(String::as_str), Some("544XX"));
    assert_eq!(
        first.columns.get("PARTITION ID").map(String::as_str),
        Some("0")
    );
    let second = &info.gpus[1];
    assert_eq!(second.node, Some(2));
    assert_eq!(second.pci_bus.as_deref(), Some("0000:42:00.0"));

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.gpus.len(), 2);
    for gpu in &fp.gpus {
        assert_eq!(gpu.vendor, Vendor::Amd);
        assert_eq!(
            gpu.native_isa.as_deref(),
            Some("gfx90a"),
            "GFX VER comes from the KFD topology"
        );
        assert_eq!(gpu.pci_device_id.as_deref(), Some("0x740f"));
        assert_eq!(
            gpu.name.as_deref(),
            Some("AMD Instinct MI210"),
            "named from the device-id table"
        );
        assert_eq!(gpu.is_apu, Some(false));
    }
}

#[test]
fn concise_with_errors_unsupported_and_na() {
    let info = rocm_smi::parse(&fixture(
        "rocm-smi/w7900-gfx1100-plus-igpu-rocm-issue2681.txt",
    ))
    .expect("parses");
    assert_eq!(info.view, View::Concise);
    assert!(info.complete);
    assert_eq!(info.gpus.len(), 2);
    let g0 = &info.gpus[0];
    assert_eq!(
        g0.columns.get("Temp (DieEdge)").map(String::as_str),
        Some("N/A")
    );
    assert_eq!(
        g0.columns.get("PwrCap").map(String::as_str),
        Some("Unsupported")
    );
    assert_eq!(g0.columns.get("Perf").map(String::as_str), Some("unknown"));
    let g1 = &info.gpus[1];
    assert_eq!(g1.columns.get("MCLK").map(String::as_str), Some("3000Mhz"));
    assert_eq!(g1.columns.get("VRAM%").map(String::as_str), Some("3%"));
    assert_eq!(
        info.messages
            .iter()
            .filter(|m| m.starts_with("Expected integer value"))
            .count(),
        4
    );
    assert!(
        info.messages
            .iter()
            .any(|m| m.contains("sclk clock is unsupported"))
    );
    assert!(
        info.messages
            .iter()
            .any(|m| m.contains("get_power_cap, Not supported"))
    );
    // No identity facts in this view: no GPU records are invented.
    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert!(fp.gpus.is_empty());
}

#[test]
fn rows_with_collapsed_spacing_still_give_identity() {
    let text = "===== ROCm System Management Interface =====\nGPU NODE DID GUID GFX VER GFX RAS SDMA RAS UMC RAS VBIOS BUS PARTITION ID\n0 1 0x744c 123 gfx1100 N/A N/A N/A 113-D70201-00 0000:03:00.0 0\n===== End of ROCm SMI Log =====\n";
    let info = rocm_smi::parse(text).expect("parses");
    assert_eq!(info.gpus.len(), 1);
    assert_eq!(info.gpus[0].device_id.as_deref(), Some("0x744c"));
    assert_eq!(info.gpus[0].gfx_version.as_deref(), Some("gfx1100"));
    assert_eq!(info.gpus[0].pci_bus.as_deref(), Some("0000:03:00.0"));
    assert_eq!(info.gpus[0].vbios.as_deref(), Some("113-D70201-00"));
}

#[test]
fn rocm6_model_revision_layout() {
    let text = "========== ROCm System Management Interface ==========\n========== Concise Info ==========\nDevice  [Model : Revision]    Temp        Power     Partitions      SCLK    MCLK    Fan  Perf  PwrCap  VRAM%  GPU%\n        Name (20 chars)       (Junction)  (Socket)  (Mem, Compute)\n======================================================\n0       [0x74a1 : 0x00]       35.0°C      133.0W    NPS1, SPX       131Mhz  900Mhz  0%   auto  750.0W    0%   0%\n        AMD Instinct MI300X\n======================================================\n========== End of ROCm SMI Log ==========\n";
    let info = rocm_smi::parse(text).expect("parses");
    assert_eq!(info.gpus.len(), 1);
    assert_eq!(info.gpus[0].device_id.as_deref(), Some("0x74a1"));
    assert_eq!(info.gpus[0].revision.as_deref(), Some("0x00"));
    assert_eq!(info.gpus[0].name.as_deref(), Some("AMD Instinct MI300X"));
}
