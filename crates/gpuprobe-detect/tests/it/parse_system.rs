//! amdgpu_firmware_info (real MES lines) and the small system outputs.

use gpuprobe_detect::parse::{firmware_info, system};
use gpuprobe_model::Fingerprint;
use gpuprobe_model::{DriverSource, GpuInfo, Vendor};

use crate::common::fixture;

#[test]
fn firmware_info_mes_lines() {
    let info = firmware_info::parse(&fixture(
        "amdgpu_firmware_info/MES-gfx1151-rocm-issue5724.txt",
    ))
    .expect("parses");
    assert_eq!(info.components.len(), 2);
    let kiq = info.component("MES_KIQ").expect("MES_KIQ");
    assert_eq!(kiq.feature, Some(6));
    assert_eq!(kiq.version, "0x0000006f");
    let mes = info.component("MES").expect("MES");
    assert_eq!(mes.feature, Some(1));
    assert_eq!(mes.version, "0x00000080");

    // Attached to the only AMD GPU.
    let mut fp = Fingerprint::default();
    fp.gpus.push(GpuInfo::new(Vendor::Nvidia));
    let mut amd = GpuInfo::new(Vendor::Amd);
    amd.pci_bus = Some("0000:c5:00.0".to_owned());
    fp.gpus.push(amd);
    info.apply(&mut fp);
    assert!(fp.gpus[0].firmware.is_empty());
    assert_eq!(fp.gpus[1].firmware.len(), 2);
    assert!(fp.unreadable.is_empty());
}

#[test]
fn firmware_info_full_listing_with_program_field() {
    let text = "VCE feature version: 0, firmware version: 0x00000000\nSMC feature version: 0, program: 0, firmware version: 0x00554d00 (85.77.0)\nMES feature version: 1, firmware version: 0x00000083\nVBIOS version: 113-STRXLGEN-001\n";
    let info = firmware_info::parse(text).expect("parses");
    assert_eq!(
        info.components
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        vec!["VCE", "SMC", "MES"]
    );
    assert_eq!(
        info.component("SMC").map(|c| c.version.as_str()),
        Some("0x00554d00")
    );
    assert_eq!(info.vbios.as_deref(), Some("113-STRXLGEN-001"));
}

#[test]
fn dkms_status_both_formats() {
    let entries = system::parse_dkms_status(
        "amdgpu/6.16.13-2278356.24.04, 6.14.0-1018-oem, x86_64: installed\nnvidia, 550.54.15, 5.15.0-91-generic, x86_64: installed (WARNING! Diff between built and installed module!)\n",
    )
    .expect("parses");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].module, "amdgpu");
    assert_eq!(entries[0].version, "6.16.13-2278356.24.04");
    assert_eq!(entries[0].kernel.as_deref(), Some("6.14.0-1018-oem"));
    assert_eq!(entries[0].arch.as_deref(), Some("x86_64"));
    assert_eq!(entries[0].status, "installed");
    assert_eq!(entries[1].module, "nvidia");
    assert_eq!(entries[1].version, "550.54.15");
    assert!(entries[1].status.starts_with("installed (WARNING"));
    let mut fp = Fingerprint::default();
    system::apply_dkms(&entries, &mut fp);
    assert_eq!(
        fp.extra.get("dkms.amdgpu").map(String::as_str),
        Some("amdgpu/6.16.13-2278356.24.04, 6.14.0-1018-oem, x86_64: installed")
    );
    assert!(system::parse_dkms_status("nothing here").is_err());
}

#[test]
fn mokutil_states() {
    assert_eq!(
        system::parse_mokutil("SecureBoot enabled\n"),
        Ok(Some(true))
    );
    assert_eq!(
        system::parse_mokutil("SecureBoot disabled\nPlatform is in Setup Mode\n"),
        Ok(Some(false))
    );
    assert_eq!(
        system::parse_mokutil("This system doesn't support Secure Boot\n"),
        Ok(None)
    );
    assert!(system::parse_mokutil("mokutil: command not found").is_err());
}

#[test]
fn os_release_uname_cmdline() {
    let map = system::parse_os_release(
        "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nID=ubuntu\n",
    )
    .expect("parses");
    let mut fp = Fingerprint::default();
    system::apply_os_release(&map, &mut fp);
    assert_eq!(fp.host.distro_id.as_deref(), Some("ubuntu"));
    assert_eq!(fp.host.distro_version.as_deref(), Some("24.04"));
    assert_eq!(fp.host.distro_pretty.as_deref(), Some("Ubuntu 24.04.3 LTS"));
    assert_eq!(
        system::parse_uname(
            "Linux vm 6.18.44-fc-v657-gpu #1 SMP PREEMPT_DYNAMIC @0 x86_64 x86_64 x86_64 GNU/Linux"
        )
        .as_deref(),
        Ok("6.18.44-fc-v657-gpu")
    );
    assert_eq!(
        system::parse_uname("Linux version 6.17.0-19-generic (buildd@lcy02) (gcc 13)").as_deref(),
        Ok("6.17.0-19-generic")
    );
    assert_eq!(
        system::parse_uname("6.14.0-1018-oem").as_deref(),
        Ok("6.14.0-1018-oem")
    );
    assert!(system::looks_like_cmdline(
        "BOOT_IMAGE=/boot/vmlinuz-6.14.0-1018-oem root=UUID=abc ro quiet splash amdgpu.cwsr_enable=0"
    ));
    assert!(!system::looks_like_cmdline("Name: gfx1151"));
}

#[test]
fn module_parameter_listing() {
    let text = "/sys/module/amdgpu/parameters/cwsr_enable:0\n/sys/module/amdgpu/parameters/noretry:-1\n/sys/module/amdttm/parameters/pages_limit:31457280\n/sys/module/other/parameters/x:1\n";
    let params = system::parse_module_params(text).expect("parses");
    assert_eq!(params.len(), 4);
    let mut fp = Fingerprint::default();
    system::apply_module_params(&params, &mut fp);
    let driver = fp.amdgpu.expect("driver");
    assert_eq!(
        driver.params.get("cwsr_enable").map(String::as_str),
        Some("0")
    );
    assert_eq!(driver.params.get("noretry").map(String::as_str), Some("-1"));
    assert_eq!(
        driver.ttm_params.get("pages_limit").map(String::as_str),
        Some("31457280")
    );
    assert_eq!(
        driver.source,
        DriverSource::Dkms,
        "amdttm only exists with the DKMS driver"
    );
    assert!(!driver.params.contains_key("x"));
}
