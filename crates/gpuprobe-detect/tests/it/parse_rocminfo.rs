//! rocminfo on the three real layouts (ROCm 5.7, 6.2 DKMS, 7.11 nightly APU).

use gpuprobe_detect::ParseError;
use gpuprobe_detect::parse::rocminfo::{self, RockModule};
use gpuprobe_model::Fingerprint;
use gpuprobe_model::{DriverSource, Vendor};

use crate::common::fixture;

#[test]
fn gfx1151_apu_rocm_7_nightly() {
    let info = rocminfo::parse(&fixture("rocminfo/gfx1151-rocm-issue5817.txt")).expect("parses");
    assert_eq!(
        info.rock_module,
        Some(RockModule::LoadedWithVersion("6.16.6".to_owned()))
    );
    assert_eq!(info.runtime_version.as_deref(), Some("1.18"));
    assert_eq!(info.xnack_enabled, Some(false));
    assert!(info.complete);
    assert_eq!(info.agents.len(), 2);
    let cpu = &info.agents[0];
    assert_eq!(cpu.name, "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S");
    assert_eq!(cpu.device_type.as_deref(), Some("CPU"));
    assert!(!cpu.is_gpu());
    assert!(!cpu.apu, "the CPU agent's Memory Properties line is empty");
    let gpu = &info.agents[1];
    assert_eq!(gpu.number, Some(2));
    assert_eq!(gpu.name, "gfx1151");
    assert_eq!(gpu.marketing_name.as_deref(), Some("Radeon 8060S Graphics"));
    assert_eq!(gpu.vendor_name.as_deref(), Some("AMD"));
    assert_eq!(gpu.node, Some(1));
    assert_eq!(gpu.chip_id, Some(0x1586));
    assert_eq!(gpu.cacheline_bytes, Some(128));
    assert_eq!(gpu.bdfid, Some(62464));
    assert_eq!(gpu.compute_units, Some(40));
    assert!(gpu.apu);
    assert_eq!(
        gpu.isas,
        vec![
            "amdgcn-amd-amdhsa--gfx1151",
            "amdgcn-amd-amdhsa--gfx11-generic"
        ]
    );

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.gpus.len(), 1);
    let g = &fp.gpus[0];
    assert_eq!(g.vendor, Vendor::Amd);
    assert_eq!(g.runtime_isa.as_deref(), Some("gfx1151"));
    assert_eq!(
        g.native_isa, None,
        "rocminfo reports the runtime's ISA, not the native one"
    );
    assert!(g.isa_features.is_empty());
    assert_eq!(g.pci_device_id.as_deref(), Some("0x1586"));
    assert_eq!(g.pci_bus.as_deref(), Some("0000:f4:00.0"));
    assert_eq!(g.cacheline_bytes, Some(128));
    assert_eq!(g.is_apu, Some(true));
    assert_eq!(g.sources, vec!["rocminfo"]);
    let driver = fp.amdgpu.expect("driver");
    assert_eq!(driver.source, DriverSource::Dkms);
    assert_eq!(driver.version.as_deref(), Some("6.16.6"));
}

#[test]
fn gfx1030_rocm_5_7_older_layout_inbox() {
    let info = rocminfo::parse(&fixture("rocminfo/gfx1030-rocm-issue2773.txt")).expect("parses");
    assert_eq!(info.rock_module, Some(RockModule::Loaded));
    assert_eq!(info.runtime_version.as_deref(), Some("1.1"));
    assert_eq!(info.xnack_enabled, None, "5.7 has no XNACK line");
    assert!(info.complete);
    let gpu = info.gpu_agents().next().expect("gpu agent");
    assert_eq!(gpu.name, "gfx1030");
    assert_eq!(gpu.marketing_name.as_deref(), Some("AMD Radeon RX 6900 XT"));
    assert_eq!(gpu.uuid.as_deref(), Some("GPU-acfa08f5f8ea8075"));
    assert_eq!(gpu.chip_id, Some(0x73bf));
    assert_eq!(gpu.asic_revision, Some(1));
    assert_eq!(gpu.cacheline_bytes, Some(64));
    assert_eq!(gpu.bdfid, Some(3328));
    assert_eq!(gpu.compute_units, Some(80));
    assert!(!gpu.apu);
    assert_eq!(gpu.isas, vec!["amdgcn-amd-amdhsa--gfx1030"]);

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    let g = &fp.gpus[0];
    assert_eq!(g.pci_bus.as_deref(), Some("0000:0d:00.0"));
    assert_eq!(
        g.is_apu,
        Some(false),
        "gfx1030 is discrete per the gfx table"
    );
    assert_eq!(fp.amdgpu.expect("driver").source, DriverSource::Inbox);
}

#[test]
fn gfx1100_rocm_6_2_dkms() {
    let info =
        rocminfo::parse(&fixture("rocminfo/gfx1100-rx7900xtx-rocm-issue3949.txt")).expect("parses");
    assert_eq!(
        info.rock_module,
        Some(RockModule::LoadedWithVersion("6.8.5".to_owned()))
    );
    let gpu = info.gpu_agents().next().expect("gpu agent");
    assert_eq!(gpu.name, "gfx1100");
    assert_eq!(gpu.marketing_name.as_deref(), Some("Radeon RX 7900 XTX"));
    assert_eq!(gpu.chip_id, Some(0x744c));
    assert_eq!(gpu.bdfid, Some(768));
    assert_eq!(gpu.compute_units, Some(96));
    assert_eq!(gpu.cacheline_bytes, Some(64));
    assert!(!gpu.apu, "`Memory Properties:` is empty on a dGPU");
    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.gpus[0].pci_bus.as_deref(), Some("0000:03:00.0"));
    assert_eq!(
        fp.amdgpu
            .as_ref()
            .and_then(|d| d.version.clone())
            .as_deref(),
        Some("6.8.5")
    );
}

#[test]
fn target_features_and_npu_agents() {
    let text = "ROCk module is loaded\n*******\nAgent 1\n*******\n  Name:                    gfx90a\n  Device Type:             GPU\n  Chip ID:                 29711(0x740f)\n  ISA Info:\n    ISA 1\n      Name:                    amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-\n*******\nAgent 2\n*******\n  Name:                    aie2\n  Marketing Name:          AIE-ML\n  Device Type:             DSP\n*** Done ***\n";
    let info = rocminfo::parse(text).expect("parses");
    assert_eq!(info.agents.len(), 2);
    assert_eq!(info.gpu_agents().count(), 1, "the NPU is not a GPU");
    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.gpus.len(), 1);
    assert_eq!(fp.gpus[0].runtime_isa.as_deref(), Some("gfx90a"));
    assert_eq!(fp.gpus[0].isa_features, vec!["sramecc+", "xnack-"]);
}

#[test]
fn truncated_output_is_marked_incomplete() {
    let text = fixture("rocminfo/gfx1151-rocm-issue5817.txt");
    let cut: String = text.lines().take(100).collect::<Vec<_>>().join("\n");
    let info = rocminfo::parse(&cut).expect("parses");
    assert!(!info.complete);
    assert_eq!(
        info.gpu_agents().next().map(|a| a.name.as_str()),
        Some("gfx1151")
    );
}

#[test]
fn unrelated_text_is_not_rocminfo() {
    assert!(matches!(
        rocminfo::parse("hello\nworld\n"),
        Err(ParseError::NotRecognized { .. })
    ));
    let not_loaded = rocminfo::parse("ROCk module is NOT loaded, possibly no GPU devices\n")
        .expect("recognised");
    assert_eq!(not_loaded.rock_module, Some(RockModule::NotLoaded));
}
