//! amd-smi: real dashboards (APU in-box, 2 dGPUs DKMS), the docs' static text sample,
//! and constructed `list` text and `--json` samples.

use gpuprobe_detect::ParseError;
use gpuprobe_detect::parse::amd_smi::{self, Format};
use gpuprobe_model::Fingerprint;
use gpuprobe_model::{DriverSource, Vendor};

use crate::common::fixture;

const MB: u64 = 1 << 20;

#[test]
fn dashboard_strix_halo_apu_inbox() {
    let info = amd_smi::parse(&fixture(
        "amd-smi/gfx1151-strix-halo-inbox-kernel-rocm-issue5553.txt",
    ))
    .expect("parses");
    assert_eq!(info.format, Format::Dashboard);
    assert_eq!(info.tool_version.as_deref(), Some("26.0.2+39589fda"));
    assert_eq!(info.amdgpu_version.as_deref(), Some("6.17.0-5"));
    assert_eq!(info.rocm_version.as_deref(), Some("7.0.2"));
    assert_eq!(info.platform.as_deref(), Some("Linux Baremetal"));
    assert!(info.has_process_table);
    assert_eq!(info.gpus.len(), 1);
    let g = &info.gpus[0];
    assert_eq!(g.bdf.as_deref(), Some("0000:c5:00.0"));
    assert_eq!(g.market_name.as_deref(), Some("Radeon 8060S Graphics"));
    assert_eq!(g.gpu, Some(0));
    assert_eq!(g.hip_id, Some(0));
    assert_eq!(g.vram_used_bytes, Some(161 * MB));
    assert_eq!(
        g.vram_total_bytes,
        Some(512 * MB),
        "an APU shows only the BIOS carve-out"
    );

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    let driver = fp.amdgpu.expect("driver");
    assert_eq!(
        driver.source,
        DriverSource::Inbox,
        "`amdgpu version` is a kernel release"
    );
    assert_eq!(driver.version, None);
    assert_eq!(fp.rocm.and_then(|r| r.version).as_deref(), Some("7.0.2"));
    assert_eq!(fp.gpus[0].index, Some(0), "HIP-ID is the HIP device index");
    assert_eq!(fp.gpus[0].vram_total_bytes, Some(512 * MB));
    assert_eq!(
        fp.extra.get("amd-smi.amdgpu_version").map(String::as_str),
        Some("6.17.0-5")
    );
}

#[test]
fn dashboard_two_rx9070xt_dkms() {
    let info = amd_smi::parse(&fixture(
        "amd-smi/2x-rx9070xt-gfx1201-dkms-rocm-issue5812.txt",
    ))
    .expect("parses");
    assert_eq!(info.tool_version.as_deref(), Some("26.2.0+021c61fc"));
    assert_eq!(info.amdgpu_version.as_deref(), Some("6.16.6"));
    assert_eq!(info.rocm_version.as_deref(), Some("7.1.1"));
    assert_eq!(info.vbios_version.as_deref(), Some("00131162"));
    assert_eq!(info.gpus.len(), 2);
    assert_eq!(info.gpus[0].bdf.as_deref(), Some("0000:04:00.0"));
    assert_eq!(
        info.gpus[0].market_name.as_deref(),
        Some("AMD Radeon RX 9070 XT")
    );
    assert_eq!(info.gpus[0].vram_used_bytes, Some(84 * MB));
    assert_eq!(info.gpus[0].vram_total_bytes, Some(16304 * MB));
    assert_eq!(info.gpus[1].bdf.as_deref(), Some("0000:07:00.0"));
    assert_eq!(info.gpus[1].hip_id, Some(1));
    assert_eq!(info.gpus[1].vram_used_bytes, Some(347 * MB));

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.gpus.len(), 2);
    assert_eq!(fp.gpus[1].vbios.as_deref(), Some("00131162"));
    // A bare `6.16.6` cannot be told from an upstream kernel version: not concluded.
    assert_eq!(fp.amdgpu.expect("driver").source, DriverSource::Unknown);
}

#[test]
fn static_text_docs_sample_mi300a() {
    let info =
        amd_smi::parse(&fixture("amd-smi/static-text-mi300a-docs-sample.txt")).expect("parses");
    assert_eq!(info.format, Format::Text);
    assert_eq!(info.gpus.len(), 1);
    let g = &info.gpus[0];
    assert_eq!(g.gpu, Some(0));
    assert_eq!(g.market_name.as_deref(), Some("AMD Instinct MI300A"));
    assert_eq!(g.device_id.as_deref(), Some("0x74a0"));
    assert_eq!(g.revision.as_deref(), Some("0x00"));
    assert_eq!(g.compute_units, Some(228));
    assert_eq!(g.target_graphics_version.as_deref(), Some("gfx942"));
    assert_eq!(g.bdf.as_deref(), Some("0000:01:00.0"));
    assert_eq!(g.vbios_version, None, "N/A is not a value");
    assert_eq!(g.driver_version.as_deref(), Some("6.10.10"));
    assert_eq!(g.vram_total_bytes, Some(96434 * MB));

    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    let gpu = &fp.gpus[0];
    assert_eq!(gpu.native_isa.as_deref(), Some("gfx942"));
    assert_eq!(
        gpu.is_apu,
        Some(true),
        "gfx942 with device 0x74a0 is the MI300A APU"
    );
}

#[test]
fn list_text_constructed() {
    let info = amd_smi::parse(&fixture("amd-smi/list-text-constructed.txt")).expect("parses");
    assert_eq!(info.format, Format::Text);
    let g = &info.gpus[0];
    assert_eq!(g.bdf.as_deref(), Some("0000:c5:00.0"));
    assert_eq!(
        g.uuid.as_deref(),
        Some("00ff1586-0000-1000-8000-000000000000")
    );
    assert_eq!(g.kfd_id.as_deref(), Some("45412"));
    assert_eq!(g.node_id, Some(1));
}

#[test]
fn json_gpu_data_constructed() {
    let info =
        amd_smi::parse(&fixture("amd-smi/static-json-gpu-data-constructed.txt")).expect("parses");
    assert_eq!(info.format, Format::Json);
    assert_eq!(info.gpus.len(), 1);
    let g = &info.gpus[0];
    assert_eq!(g.gpu, Some(0));
    assert_eq!(g.market_name.as_deref(), Some("AMD Radeon RX 7900 XTX"));
    assert_eq!(g.device_id.as_deref(), Some("0x744c"));
    assert_eq!(g.revision.as_deref(), Some("0xc8"));
    assert_eq!(g.compute_units, Some(96));
    assert_eq!(g.target_graphics_version.as_deref(), Some("gfx1100"));
    assert_eq!(g.bdf.as_deref(), Some("0000:03:00.0"));
    assert_eq!(g.vbios_version.as_deref(), Some("022.001.002.008.000001"));
    assert_eq!(g.vbios_part_number.as_deref(), Some("113-D70201-00"));
    assert_eq!(g.driver_version.as_deref(), Some("6.8.5"));
    assert_eq!(g.vram_total_bytes, Some(24560 * MB));
    let mut fp = Fingerprint::default();
    info.apply(&mut fp);
    assert_eq!(fp.gpus[0].vendor, Vendor::Amd);
    assert_eq!(fp.gpus[0].native_isa.as_deref(), Some("gfx1100"));
    assert_eq!(
        fp.gpus[0].index, None,
        "amd-smi's GPU number is not the HIP index"
    );
}

#[test]
fn json_list_constructed() {
    let info =
        amd_smi::parse(&fixture("amd-smi/static-json-list-constructed.txt")).expect("parses");
    assert_eq!(info.gpus.len(), 2);
    assert_eq!(info.gpus[1].gpu, Some(1));
    assert_eq!(info.gpus[1].bdf.as_deref(), Some("0000:42:00.0"));
    assert_eq!(
        info.gpus[1].target_graphics_version.as_deref(),
        Some("gfx90a")
    );
    assert_eq!(info.gpus[1].compute_units, Some(104));
}

#[test]
fn json_version_and_firmware_shapes() {
    let info = amd_smi::parse(r#"[{"tool": "AMDSMI Tool", "version": "24.6.3+9578815", "amdsmi_library_version": "24.6.3.0", "rocm_version": "6.2.1"}]"#).expect("parses");
    assert_eq!(info.rocm_version.as_deref(), Some("6.2.1"));
    assert_eq!(info.tool_version.as_deref(), Some("24.6.3+9578815"));
    let fw = amd_smi::parse(
        r#"{"gpu_data": [{"gpu": 0, "fw_list": [{"fw_id": "MES", "fw_version": "0x00000083"}]}]}"#,
    )
    .expect("parses");
    assert_eq!(fw.gpus[0].firmware[0].name, "MES");
    assert_eq!(fw.gpus[0].firmware[0].version, "0x00000083");
}

#[test]
fn broken_json_is_a_clear_error() {
    let err = amd_smi::parse("{\"gpu_data\": [").expect_err("invalid");
    assert!(
        matches!(
            err,
            ParseError::Json {
                tool: "amd-smi",
                ..
            }
        ),
        "{err}"
    );
}
