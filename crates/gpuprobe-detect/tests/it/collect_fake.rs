//! The live collector on fake sysfs/procfs trees: a Strix Halo APU on the in-box driver,
//! an RX 7900 XTX on DKMS, RX 6800/6700 XT hosts with `HSA_OVERRIDE_GFX_VERSION`, and the
//! NVIDIA H100 test host (modelled on its captured `host.txt`).

use std::collections::BTreeMap;

use gpuprobe_detect::{CollectOptions, collect, render_text};
use gpuprobe_model::Fingerprint;
use gpuprobe_model::{DriverSource, Vendor};

use crate::common::Tree;

const SECURE_BOOT: &str =
    "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A uid different from the one running the tests, so owner checks cannot pass by accident.
fn other_uid(tree: &Tree) -> u32 {
    tree.file("/tmp/probe", "");
    let (uid, _) = tree.owner("/tmp/probe");
    if uid == 4242 { 4243 } else { 4242 }
}

fn host_files(
    tree: &Tree,
    hostname: &str,
    kernel: &str,
    cmdline: &str,
    cpu: &str,
    flags: &str,
    mem_kib: u64,
) {
    tree.file("/proc/sys/kernel/hostname", format!("{hostname}\n"))
        .file("/proc/sys/kernel/ostype", "Linux\n")
        .file("/proc/sys/kernel/osrelease", format!("{kernel}\n"))
        .file("/proc/sys/kernel/arch", "x86_64\n")
        .file("/proc/cmdline", format!("{cmdline}\n"))
        .file("/proc/version", format!("Linux version {kernel} (buildd@host) (gcc 13.3.0) #1 SMP\n"))
        .file("/proc/cpuinfo", format!("processor\t: 0\nmodel name\t: {cpu}\nflags\t\t: {flags}\n\nprocessor\t: 1\nmodel name\t: {cpu}\n"))
        .file("/proc/meminfo", format!("MemTotal:       {mem_kib} kB\nMemFree:        1000 kB\n"))
        .file("/etc/os-release", "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nID=ubuntu\n");
}

fn kfd_node(tree: &Tree, node: u32, props: &[(&str, u64)]) {
    let text: String = props.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    tree.file(
        &format!("/sys/class/kfd/kfd/topology/nodes/{node}/properties"),
        text,
    );
}

fn identity(tree: &Tree, uid: u32, groups: &[u32]) {
    let groups: Vec<String> = groups.iter().map(u32::to_string).collect();
    tree.file("/proc/self/status", format!("Name:\tgpuprobe\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\nGroups:\t{}\n", groups.join(" ")));
}

/// Strix Halo (gfx1151) on the in-box driver: 512 MiB carve-out, large GTT, ttm
/// pages_limit, cwsr_enable=1, MES from sysfs fw_version, Secure Boot on, IOMMU
/// passthrough, debugfs denied.
fn strix_halo_tree() -> Tree {
    let tree = Tree::new();
    let uid = other_uid(&tree);
    host_files(
        &tree,
        "strix",
        "6.17.0-19-generic",
        "BOOT_IMAGE=/boot/vmlinuz-6.17.0-19-generic root=UUID=0b1f ro quiet splash iommu=pt ttm.pages_limit=27648000",
        "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S",
        "fpu vme de pse tsc msr sse sse2 avx2",
        131_015_868,
    );
    tree.pci("0000:00:00.0", "0x060000", "0x1022", "0x1507", "0x00");
    tree.pci("0000:c5:00.0", "0x030000", "0x1002", "0x1586", "0xc1");
    tree.pci("0000:c6:00.1", "0x118000", "0x1022", "0x17f0", "0x10"); // the XDNA NPU: not a GPU
    tree.link(
        "/sys/bus/pci/devices/0000:c5:00.0/driver",
        "/sys/bus/pci/drivers/amdgpu",
    );
    let dev = "/sys/bus/pci/devices/0000:c5:00.0";
    tree.file(&format!("{dev}/mem_info_vram_total"), "536870912\n")
        .file(&format!("{dev}/mem_info_vis_vram_total"), "536870912\n")
        .file(&format!("{dev}/mem_info_gtt_total"), "113246208000\n")
        .file(&format!("{dev}/vbios_version"), "113-STRXLGEN-001\n")
        .file(&format!("{dev}/fw_version/mes_fw_version"), "0x00000080\n")
        .file(
            &format!("{dev}/fw_version/mes_kiq_fw_version"),
            "0x0000006f\n",
        )
        .file(&format!("{dev}/fw_version/sdma_fw_version"), "0x0000000e\n");
    tree.link("/sys/class/drm/card1/device", dev);
    tree.link("/sys/class/drm/renderD128/device", dev);
    tree.dir("/sys/class/drm/card1-DP-1");
    kfd_node(
        &tree,
        0,
        &[
            ("cpu_cores_count", 32),
            ("simd_count", 0),
            ("gfx_target_version", 0),
        ],
    );
    kfd_node(
        &tree,
        1,
        &[
            ("cpu_cores_count", 0),
            ("simd_count", 80),
            ("simd_per_cu", 2),
            ("gfx_target_version", 110501),
            ("vendor_id", 4098),
            ("device_id", 5510),
            ("location_id", 50432),
            ("domain", 0),
            ("drm_render_minor", 128),
        ],
    );
    for (name, value) in [
        ("cwsr_enable", "1"),
        ("noretry", "-1"),
        ("mcbp", "-1"),
        ("gttsize", "-1"),
        ("mes", "1"),
    ] {
        tree.file(
            &format!("/sys/module/amdgpu/parameters/{name}"),
            format!("{value}\n"),
        );
    }
    tree.file("/sys/module/ttm/parameters/pages_limit", "27648000\n")
        .file("/sys/module/ttm/parameters/page_pool_size", "27648000\n");
    tree.dir("/sys/kernel/debug");
    tree.file(SECURE_BOOT, [0x06u8, 0, 0, 0, 1]);
    tree.file("/sys/kernel/iommu_groups/0/type", "identity\n")
        .dir("/sys/class/iommu/ivhd0");
    tree.file("/usr/share/libdrm/amdgpu.ids", "# List of AMDGPU IDs\n1.0.0\n1586,\tC1,\tRadeon 8060S Graphics\n1586,\tD1,\tRadeon 8050S Graphics\n");
    tree.file("/opt/rocm-7.2.0/.info/version", "7.2.0-43\n");
    tree.file("/opt/rocm-7.2.0/lib/libamdhip64.so.7.2.26015", "");
    tree.link("/opt/rocm", "/opt/rocm-7.2.0");
    std::os::unix::fs::symlink(
        "libamdhip64.so.7.2.26015",
        tree.root().path("/opt/rocm-7.2.0/lib/libamdhip64.so.7"),
    )
    .expect("symlink");
    std::os::unix::fs::symlink(
        "libamdhip64.so.7",
        tree.root().path("/opt/rocm-7.2.0/lib/libamdhip64.so"),
    )
    .expect("symlink");
    tree.file("/dev/kfd", "")
        .file("/dev/dri/renderD128", "")
        .mode("/dev/kfd", 0o660)
        .mode("/dev/dri/renderD128", 0o660);
    let (_, node_gid) = tree.owner("/dev/kfd");
    identity(&tree, uid, &[44, node_gid]);
    tree.file(
        "/dev/kmsg",
        "6,900,651971687,-;amdgpu 0000:c5:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8 pasid:32771)\n SUBSYSTEM=pci\n6,901,651971715,-;amdgpu 0000:c5:00.0: amdgpu:  Process python pid 2419 thread python pid 2419\n6,902,651971741,-;amdgpu 0000:c5:00.0: amdgpu:\\x09 Faulty UTCL2 client ID: CPF (0x4)\n6,903,700000000,-;usb 1-1: new device\n",
    );
    tree
}

#[test]
fn strix_halo_apu_inbox_kernel() {
    let tree = strix_halo_tree();
    let root = tree.root().deny("/sys/kernel/debug");
    let environment = env(&[
        ("PYTORCH_HIP_ALLOC_CONF", "expandable_segments:True"),
        ("HOME", "/home/u"),
        ("HSA_ENABLE_SDMA", "0"),
    ]);
    let opts = CollectOptions {
        read_kernel_log: true,
        ..CollectOptions::default()
    };
    let fp = collect(&root, &environment, &opts);

    assert_eq!(fp.source, "live");
    let h = &fp.host;
    assert_eq!(h.hostname.as_deref(), Some("strix"));
    assert_eq!(h.os.as_deref(), Some("linux"));
    assert_eq!(h.distro_id.as_deref(), Some("ubuntu"));
    assert_eq!(h.distro_version.as_deref(), Some("24.04"));
    assert_eq!(h.kernel_release.as_deref(), Some("6.17.0-19-generic"));
    assert!(
        h.kernel_cmdline
            .as_deref()
            .is_some_and(|c| c.contains("ttm.pages_limit=27648000"))
    );
    assert_eq!(h.cpu_arch.as_deref(), Some("x86_64"));
    assert_eq!(
        h.cpu_model.as_deref(),
        Some("AMD RYZEN AI MAX+ 395 w/ Radeon 8060S")
    );
    assert_eq!(h.mem_total_bytes, Some(131_015_868 * 1024));
    assert!(!h.wsl);
    assert_eq!(h.container, None);
    assert_eq!(h.virtualization, None);
    assert_eq!(h.secure_boot, Some(true));
    assert_eq!(h.iommu.as_deref(), Some("passthrough"));
    assert!(
        h.inaccessible_device_nodes.is_empty(),
        "{:?}",
        h.inaccessible_device_nodes
    );
    assert!(h.uid.is_some_and(|u| u >= 4242));

    assert_eq!(fp.gpus.len(), 1, "{:#?}", fp.gpus);
    let g = &fp.gpus[0];
    assert_eq!(g.vendor, Vendor::Amd);
    assert_eq!(
        g.name.as_deref(),
        Some("Radeon 8060S Graphics"),
        "from amdgpu.ids by device and revision"
    );
    assert_eq!(g.pci_bus.as_deref(), Some("0000:c5:00.0"));
    assert_eq!(g.pci_vendor_id.as_deref(), Some("0x1002"));
    assert_eq!(g.pci_device_id.as_deref(), Some("0x1586"));
    assert_eq!(g.pci_revision.as_deref(), Some("0xc1"));
    assert_eq!(g.native_isa.as_deref(), Some("gfx1151"));
    assert_eq!(g.runtime_isa, None, "no runtime was asked");
    assert_eq!(g.is_apu, Some(true));
    assert_eq!(g.compute_units, Some(40));
    assert_eq!(g.vram_total_bytes, Some(512 << 20));
    assert_eq!(g.vis_vram_total_bytes, Some(512 << 20));
    assert_eq!(g.gtt_total_bytes, Some(113_246_208_000));
    assert_eq!(g.drm_card.as_deref(), Some("card1"));
    assert_eq!(g.render_node.as_deref(), Some("renderD128"));
    assert_eq!(g.vbios.as_deref(), Some("113-STRXLGEN-001"));
    let mes = g
        .firmware
        .iter()
        .find(|f| f.name == "MES")
        .expect("MES firmware");
    assert_eq!(mes.version, "0x00000080");
    assert!(
        g.firmware
            .iter()
            .any(|f| f.name == "MES_KIQ" && f.version == "0x0000006f")
    );
    assert_eq!(g.sources, vec!["pci", "kfd", "drm"]);

    let driver = fp.amdgpu.as_ref().expect("amdgpu");
    assert!(driver.loaded);
    assert_eq!(driver.source, DriverSource::Inbox);
    assert_eq!(driver.version, None);
    assert_eq!(
        driver.params.get("cwsr_enable").map(String::as_str),
        Some("1")
    );
    assert_eq!(driver.params.len(), 5);
    assert_eq!(
        driver.ttm_params.get("pages_limit").map(String::as_str),
        Some("27648000")
    );
    assert_eq!(fp.nvidia, None);
    assert_eq!(
        fp.extra
            .get("gpu.0000:c5:00.0.kernel_driver")
            .map(String::as_str),
        Some("amdgpu")
    );

    let rocm = fp.rocm.as_ref().expect("rocm");
    assert_eq!(rocm.version.as_deref(), Some("7.2.0"));
    assert_eq!(rocm.path.as_deref(), Some("/opt/rocm-7.2.0"));
    assert_eq!(rocm.hip_version.as_deref(), Some("7.2.26015"));
    assert!(!rocm.pip_installed);
    assert_eq!(
        rocm.libraries.len(),
        1,
        "three names, one file: {:?}",
        rocm.libraries
    );
    assert_eq!(
        rocm.libraries[0].path,
        "/opt/rocm-7.2.0/lib/libamdhip64.so.7.2.26015"
    );
    assert_eq!(rocm.libraries[0].version.as_deref(), Some("7.2.26015"));
    assert!(
        !fp.extra.contains_key("rocm.installs"),
        "/opt/rocm is a link, not a second install"
    );

    assert_eq!(fp.env.len(), 2);
    assert_eq!(fp.env.get("HSA_ENABLE_SDMA").map(String::as_str), Some("0"));
    assert!(!fp.env.contains_key("HOME"));

    assert_eq!(fp.kernel_events.len(), 1);
    assert_eq!(
        fp.kernel_events[0].client.as_deref(),
        Some("CPF"),
        "kmsg's \\x09 escape undone"
    );
    assert_eq!(fp.kernel_events[0].pid, Some(2419));

    let debugfs = fp
        .unreadable
        .iter()
        .find(|u| u.what.contains("debugfs"))
        .expect("debugfs listed as unreadable");
    assert!(debugfs.reason.contains("permission denied"), "{debugfs:?}");
}

#[test]
fn gfx1100_dkms_legacy_boot_no_iommu_kfd_denied() {
    let tree = Tree::new();
    let uid = other_uid(&tree);
    host_files(
        &tree,
        "navi31",
        "6.8.0-47-generic",
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-47-generic root=UUID=1 ro",
        "AMD Ryzen 7 7800X3D 8-Core Processor",
        "fpu sse avx2",
        65_000_000,
    );
    tree.pci("0000:03:00.0", "0x030000", "0x1002", "0x744c", "0xc8");
    let dev = "/sys/bus/pci/devices/0000:03:00.0";
    tree.file(&format!("{dev}/mem_info_vram_total"), "25753026560\n")
        .file(&format!("{dev}/mem_info_gtt_total"), "33285996544\n");
    tree.file(
        &format!("{dev}/uevent"),
        "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n",
    );
    // card0/device is a plain directory here: the PCI address comes from its uevent.
    tree.file(
        "/sys/class/drm/card0/device/uevent",
        "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n",
    )
    .file(
        "/sys/class/drm/card0/device/mem_info_vram_total",
        "25753026560\n",
    );
    kfd_node(
        &tree,
        1,
        &[
            ("simd_count", 192),
            ("simd_per_cu", 2),
            ("gfx_target_version", 110000),
            ("location_id", 768),
            ("drm_render_minor", 128),
        ],
    );
    tree.file("/sys/module/amdgpu/version", "6.8.5\n")
        .file("/sys/module/amdgpu/parameters/cwsr_enable", "1\n");
    tree.file("/sys/module/amdttm/parameters/pages_limit", "8126464\n")
        .file("/sys/module/ttm/parameters/pages_limit", "1\n");
    tree.file("/sys/kernel/debug/dri/0/name", "amdgpu dev=0000:03:00.0 unique=0000:03:00.0\n").file(
        "/sys/kernel/debug/dri/0/amdgpu_firmware_info",
        "MES_KIQ feature version: 6, firmware version: 0x0000006c\nMES feature version: 1, firmware version: 0x00000071\nVBIOS version: 113-D70201-00\n",
    );
    tree.dir("/sys/firmware/acpi");
    tree.dir("/sys/kernel/mm");
    tree.file("/dev/kfd", "").mode("/dev/kfd", 0o600);
    tree.file("/dev/dri/renderD128", "")
        .mode("/dev/dri/renderD128", 0o666);
    identity(&tree, uid, &[44]);
    let fp = collect(&tree.root(), &env(&[]), &CollectOptions::default());

    let g = &fp.gpus[0];
    assert_eq!(g.native_isa.as_deref(), Some("gfx1100"));
    assert_eq!(g.compute_units, Some(96));
    assert_eq!(g.is_apu, Some(false));
    assert_eq!(g.vram_total_bytes, Some(25_753_026_560));
    assert_eq!(g.drm_card.as_deref(), Some("card0"));
    assert_eq!(
        g.render_node.as_deref(),
        Some("renderD128"),
        "from the KFD drm_render_minor"
    );
    assert_eq!(
        g.name.as_deref(),
        Some("AMD Radeon RX 7900 XT/XTX/GRE (Navi 31)"),
        "no amdgpu.ids: the built-in table"
    );
    let mes = g.firmware.iter().find(|f| f.name == "MES").expect("MES");
    assert_eq!((mes.feature, mes.version.as_str()), (Some(1), "0x00000071"));
    assert_eq!(g.vbios.as_deref(), Some("113-D70201-00"), "from debugfs");
    assert!(g.sources.contains(&"amdgpu_firmware_info".to_owned()));

    let driver = fp.amdgpu.as_ref().expect("amdgpu");
    assert_eq!(driver.source, DriverSource::Dkms);
    assert_eq!(driver.version.as_deref(), Some("6.8.5"));
    assert_eq!(
        driver.ttm_params.get("pages_limit").map(String::as_str),
        Some("8126464"),
        "amdttm, not ttm"
    );
    assert_eq!(
        fp.extra.get("ttm.module").map(String::as_str),
        Some("amdttm")
    );

    assert_eq!(
        fp.host.secure_boot,
        Some(false),
        "no EFI outside a container: legacy boot"
    );
    assert_eq!(
        fp.extra.get("boot.mode").map(String::as_str),
        Some("legacy (no /sys/firmware/efi)")
    );
    assert_eq!(fp.host.iommu.as_deref(), Some("off"));
    assert_eq!(
        fp.host.inaccessible_device_nodes,
        vec!["/dev/kfd"],
        "0600 and owned by someone else"
    );
    assert!(
        !fp.unreadable.iter().any(|u| u.what.contains("debugfs")),
        "{:?}",
        fp.unreadable
    );
    assert_eq!(fp.rocm, None, "no ROCm, no HIP library in this tree");
}

fn navi2x_tree(device: &str, target_version: u64) -> Tree {
    let tree = Tree::new();
    let uid = other_uid(&tree);
    host_files(
        &tree,
        "navi2x",
        "6.6.8-arch1-1",
        "initrd=\\initramfs-linux.img root=/dev/nvme0n1p2 rw",
        "AMD Ryzen 9 3900X 12-Core Processor",
        "fpu sse",
        65_742_604,
    );
    tree.pci("0000:0d:00.0", "0x030000", "0x1002", device, "0xc1");
    kfd_node(
        &tree,
        1,
        &[
            ("simd_count", 80),
            ("simd_per_cu", 2),
            ("gfx_target_version", target_version),
            ("location_id", 3328),
        ],
    );
    tree.dir("/sys/module/amdgpu/parameters")
        .dir("/sys/firmware");
    identity(&tree, uid, &[]);
    tree
}

#[test]
fn gfx1030_native_with_override_set() {
    let tree = navi2x_tree("0x73bf", 100300);
    let fp = collect(
        &tree.root(),
        &env(&[("HSA_OVERRIDE_GFX_VERSION", "10.3.0")]),
        &CollectOptions::default(),
    );
    let g = &fp.gpus[0];
    assert_eq!(g.native_isa.as_deref(), Some("gfx1030"));
    assert_eq!(
        fp.env.get("HSA_OVERRIDE_GFX_VERSION").map(String::as_str),
        Some("10.3.0")
    );
    let decoded = gpuprobe_model::decode_override(&fp.env["HSA_OVERRIDE_GFX_VERSION"])
        .expect("decodes")
        .name();
    assert_eq!(
        Some(decoded.as_str()),
        g.native_isa.as_deref(),
        "the override equals the native ISA: unneeded"
    );
    assert_eq!(
        fp.host.inaccessible_device_nodes,
        vec!["/dev/kfd", "/dev/dri/renderD*"],
        "no device nodes in this tree"
    );
    assert!(
        fp.unreadable
            .iter()
            .any(|u| u.what == "device node /dev/kfd")
    );
    assert!(
        fp.unreadable
            .iter()
            .any(|u| u.what.starts_with("DRM devices")),
        "{:?}",
        fp.unreadable
    );
}

#[test]
fn rx6700xt_gfx1031_with_override_to_gfx1030() {
    let tree = navi2x_tree("0x73df", 100301);
    let fp = collect(
        &tree.root(),
        &env(&[("HSA_OVERRIDE_GFX_VERSION", "10.3.0")]),
        &CollectOptions::default(),
    );
    let g = &fp.gpus[0];
    assert_eq!(
        g.native_isa.as_deref(),
        Some("gfx1031"),
        "KFD is immune to the override"
    );
    assert_eq!(
        g.name.as_deref(),
        Some("AMD Radeon RX 6700/6700 XT/6750 XT (Navi 22)")
    );
    let decoded = gpuprobe_model::decode_override(&fp.env["HSA_OVERRIDE_GFX_VERSION"])
        .expect("decodes")
        .name();
    assert_eq!(decoded, "gfx1030");
    assert_ne!(Some(decoded.as_str()), g.native_isa.as_deref());
    assert_eq!(
        gpuprobe_model::gfx_facts("gfx1031").map(|i| i.rocm_support),
        Some("unofficial (override 10.3.0)")
    );
}

/// The NVIDIA test host as captured in its host.txt: Firecracker VM, /.dockerenv, one
/// H100 at 0000:00:06.0, no DRM, no KFD, and a stray distro libamdhip64.so.5.
fn nvidia_host_tree() -> Tree {
    let tree = Tree::new();
    host_files(
        &tree,
        "vm",
        "6.18.44-fc-v657-gpu",
        "mitigations=auto,no_guest_host,no_guest_guest console=ttyS0 quiet reboot=k panic=1 random.trust_cpu=1 swiotlb=noforce psi=1 pci=realloc=off -- --firecracker-init --addr 0.0.0.0:2024",
        "Intel(R) Xeon(R) Processor",
        "fpu vme de pse tsc msr pae mce cx8 apic sep avx2 hypervisor lahf_lm avx512f",
        131_981_020,
    );
    tree.file("/proc/1/cgroup", "0::/process_api/core\n")
        .file("/.dockerenv", "");
    for (bdf, vendor, device, class) in [
        ("0000:00:00.0", "0x8086", "0x0d57", "0x060000"),
        ("0000:00:01.0", "0x1af4", "0x1042", "0x018000"),
        ("0000:00:02.0", "0x1af4", "0x1042", "0x018000"),
        ("0000:00:03.0", "0x1af4", "0x1041", "0x020000"),
        ("0000:00:04.0", "0x1af4", "0x1053", "0xffff00"),
        ("0000:00:05.0", "0x1af4", "0x1044", "0xffff00"),
        ("0000:00:06.0", "0x10de", "0x2330", "0x030200"),
    ] {
        tree.pci(bdf, class, vendor, device, "0xa1");
    }
    tree.file(
        "/sys/bus/pci/devices/0000:00:06.0/current_link_speed",
        "32.0 GT/s PCIe\n",
    )
    .file(
        "/sys/bus/pci/devices/0000:00:06.0/current_link_width",
        "16\n",
    )
    .file(
        "/sys/bus/pci/devices/0000:00:05.0/current_link_speed",
        "Unknown\n",
    );
    tree.file(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n",
    );
    tree.file("/sys/module/nvidia/version", "580.159.04\n");
    tree.file(
        "/proc/driver/nvidia/gpus/0000:00:06.0/information",
        "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 40\nGPU UUID: \t GPU-ea44a5c2-ba8f-5e6b-203c-23dd332e7afb\nVideo BIOS: \t 96.00.cf.00.01\nBus Type: \t PCIe\nBus Location: \t 0000:00:06.0\nDevice Minor: \t 0\nGPU Excluded:\t No\n",
    );
    tree.dir("/sys/firmware").dir("/sys/kernel");
    tree.file("/lib/x86_64-linux-gnu/libamdhip64.so.5", "");
    tree.file("/usr/local/nvidia/lib64/libcuda.so.580.159.04", "");
    std::os::unix::fs::symlink(
        "libcuda.so.580.159.04",
        tree.root().path("/usr/local/nvidia/lib64/libcuda.so.1"),
    )
    .expect("symlink");
    tree.file(
        "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13",
        "",
    );
    tree.file(
        "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.alt.so.13",
        "",
    );
    tree.file(
        "/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13",
        "",
    );
    tree.file(
        "/usr/local/cuda/version.json",
        r#"{"cuda": {"name": "CUDA SDK", "version": "13.0.2"}}"#,
    );
    tree.file("/dev/nvidiactl", "")
        .file("/dev/nvidia0", "")
        .file("/dev/nvidia-uvm", "")
        .file("/dev/kmsg", "");
    for node in ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm"] {
        tree.mode(node, 0o666);
    }
    identity(&tree, 0, &[]);
    tree
}

fn nvidia_host_env() -> BTreeMap<String, String> {
    env(&[
        ("NVIDIA_VISIBLE_DEVICES", "0"),
        ("TORCH_CUDA_ARCH_LIST", "9.0a"),
        ("NCCL_VERSION", "2.28.3-1"),
        ("CUDA_VERSION", "13.0.2"),
        (
            "LD_LIBRARY_PATH",
            "/usr/local/nvidia/lib64:/usr/local/nvidia/lib",
        ),
        ("CUDA_HOME", "/usr/local/cuda"),
        ("CUDAHOSTCXX", "/opt/gcc/bin/g++"),
        ("PATH", "/opt/torch/.venv/bin:/usr/local/cuda/bin:/usr/bin"),
    ])
}

pub(crate) fn nvidia_host_fingerprint() -> Fingerprint {
    let tree = nvidia_host_tree();
    let root = tree.root().deny("/dev/kmsg");
    let opts = CollectOptions {
        read_kernel_log: true,
        ..CollectOptions::default()
    };
    collect(&root, &nvidia_host_env(), &opts)
}

#[test]
fn nvidia_h100_host_is_described_truthfully() {
    let fp = nvidia_host_fingerprint();
    let h = &fp.host;
    assert_eq!(h.hostname.as_deref(), Some("vm"));
    assert_eq!(h.kernel_release.as_deref(), Some("6.18.44-fc-v657-gpu"));
    assert_eq!(h.distro_pretty.as_deref(), Some("Ubuntu 24.04.3 LTS"));
    assert_eq!(h.cpu_model.as_deref(), Some("Intel(R) Xeon(R) Processor"));
    assert_eq!(h.mem_total_bytes, Some(131_981_020 * 1024));
    assert_eq!(h.container.as_deref(), Some("docker"));
    assert_eq!(h.virtualization.as_deref(), Some("firecracker"));
    assert_eq!(h.secure_boot, None);
    assert_eq!(h.iommu.as_deref(), Some("off"));
    assert_eq!(h.uid, Some(0));
    assert!(h.inaccessible_device_nodes.is_empty());

    assert_eq!(fp.gpus.len(), 1, "only the H100 is a GPU: {:#?}", fp.gpus);
    let g = &fp.gpus[0];
    assert_eq!(g.vendor, Vendor::Nvidia);
    assert_eq!(g.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(g.pci_bus.as_deref(), Some("0000:00:06.0"));
    assert_eq!(g.pci_vendor_id.as_deref(), Some("0x10de"));
    // The negotiated PCIe link, for the HTML report's bandwidth limits.
    assert_eq!(
        fp.extra
            .get("gpu.0000:00:06.0.pcie_link_speed")
            .map(String::as_str),
        Some("32.0 GT/s PCIe")
    );
    assert_eq!(
        fp.extra
            .get("gpu.0000:00:06.0.pcie_link_width")
            .map(String::as_str),
        Some("16")
    );
    assert!(!fp.extra.keys().any(|k| k.contains("0000:00:05.0")));
    assert_eq!(g.pci_device_id.as_deref(), Some("0x2330"));
    assert_eq!(g.compute_capability.as_deref(), Some("9.0"));
    assert_eq!(g.vbios.as_deref(), Some("96.00.cf.00.01"));
    assert_eq!(g.native_isa, None);
    assert_eq!(g.sources, vec!["pci", "nvidia-proc"]);

    assert_eq!(fp.amdgpu, None, "no amdgpu module and no AMD GPU");
    assert!(
        fp.gpus.iter().all(|g| g.vendor != Vendor::Amd),
        "no invented AMD GPU"
    );
    let nvidia = fp.nvidia.as_ref().expect("nvidia driver");
    assert_eq!(nvidia.version.as_deref(), Some("580.159.04"));
    assert_eq!(nvidia.flavor.as_deref(), Some("open"));
    assert_eq!(
        nvidia.cuda_driver_version, None,
        "needs nvidia-smi, which did not run"
    );

    let rocm = fp.rocm.as_ref().expect("the stray HIP file is recorded");
    assert_eq!(rocm.version, None, "no ROCm installation is claimed");
    assert_eq!(rocm.path, None);
    assert_eq!(rocm.hip_version, None);
    assert_eq!(rocm.libraries.len(), 1);
    assert_eq!(
        rocm.libraries[0].path,
        "/lib/x86_64-linux-gnu/libamdhip64.so.5"
    );
    assert_eq!(rocm.libraries[0].version.as_deref(), Some("5"));
    assert_eq!(
        rocm.libraries[0].origin.as_deref(),
        Some("system library directory")
    );

    let cuda = fp.cuda.as_ref().expect("cuda");
    assert_eq!(cuda.runtime_version.as_deref(), Some("13.0.2"));
    let names: Vec<(&str, Option<&str>)> = cuda
        .libraries
        .iter()
        .map(|l| (l.name.as_str(), l.version.as_deref()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("libcuda", Some("580.159.04")),
            ("libcudart", Some("13")),
            ("libnvrtc", Some("13"))
        ]
    );

    assert_eq!(fp.env.len(), 6, "{:?}", fp.env);
    assert!(!fp.env.contains_key("CUDAHOSTCXX") && !fp.env.contains_key("PATH"));
    assert!(
        fp.unreadable
            .iter()
            .any(|u| u.what == "Secure Boot state" && u.reason.contains("container")),
        "{:?}",
        fp.unreadable
    );
    assert!(
        fp.unreadable
            .iter()
            .any(|u| u.what == "kernel log (/dev/kmsg)" && u.reason.contains("permission denied"))
    );
    assert!(
        !fp.unreadable
            .iter()
            .any(|u| u.what.contains("KFD") || u.what.contains("DRM")),
        "nothing AMD is expected here"
    );

    let text = render_text(&fp);
    assert!(text.contains("no ROCm installation found"), "{text}");
    assert!(
        text.contains(
            "a HIP library file is present: libamdhip64  /lib/x86_64-linux-gnu/libamdhip64.so.5"
        ),
        "{text}"
    );
    assert!(text.contains("580.159.04 (open kernel module)"), "{text}");
}

#[test]
fn live_machine_collects_without_panicking() {
    let environment: BTreeMap<String, String> = std::env::vars().collect();
    let fp = collect(
        &gpuprobe_detect::Root::live(),
        &environment,
        &CollectOptions::default(),
    );
    assert_eq!(fp.source, "live");
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_owned());
    assert_eq!(fp.host.kernel_release, kernel);
    assert!(!render_text(&fp).is_empty());
}

#[test]
fn pip_therock_and_torch_lib_copies_without_symlinks() {
    let tree = Tree::new();
    let site = "/home/u/venv/lib/python3.12/site-packages";
    tree.file(&format!("{site}/_rocm_sdk_core/lib/libamdhip64.so.7"), "")
        .file(&format!("{site}/_rocm_sdk_core/lib/libhiprtc.so.7"), "")
        .file(&format!("{site}/torch/lib/libamdhip64.so"), "")
        .file(&format!("{site}/torch/lib/libtorch_hip.so"), "");
    tree.dir("/proc").dir("/sys/kernel");
    let fp = collect(
        &tree.root(),
        &env(&[("VIRTUAL_ENV", "/home/u/venv")]),
        &CollectOptions::default(),
    );
    let rocm = fp.rocm.as_ref().expect("rocm");
    assert!(rocm.pip_installed);
    assert_eq!(rocm.version, None);
    let libs: Vec<(&str, &str, Option<&str>)> = rocm
        .libraries
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.origin.as_deref().unwrap_or_default(),
                l.version.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        libs,
        vec![
            ("libamdhip64", "rocm-sdk (pip)", Some("7")),
            ("libamdhip64", "torch/lib", None),
            ("libhiprtc", "rocm-sdk (pip)", Some("7"))
        ]
    );
    assert_eq!(fp.gpus.len(), 0, "libraries are not GPUs");
    assert!(render_text(&fp).contains("pip/TheRock install"));

    // The same environment found through the worker's torch.lib_dir instead of VIRTUAL_ENV.
    let mut fp = collect(&tree.root(), &env(&[]), &CollectOptions::default());
    assert_eq!(fp.rocm, None);
    fp.python = Some(gpuprobe_model::PythonEnv {
        torch: Some(gpuprobe_model::TorchInfo {
            lib_dir: Some(format!("{site}/torch/lib")),
            ..Default::default()
        }),
        ..Default::default()
    });
    gpuprobe_detect::scan_python_libraries(&tree.root(), &mut fp);
    let rocm = fp.rocm.as_ref().expect("rocm");
    assert!(rocm.pip_installed);
    assert_eq!(rocm.libraries.len(), 3);
}

#[test]
fn wsl_and_kubernetes_are_recognised() {
    let tree = Tree::new();
    tree.file(
        "/proc/version",
        "Linux version 5.15.167.4-microsoft-standard-WSL2 (root@host) (gcc 11.2.0) #1 SMP\n",
    )
    .file("/usr/lib/wsl/lib/libcuda.so.1", "")
    .dir("/sys/kernel");
    let fp = collect(
        &tree.root(),
        &env(&[("KUBERNETES_SERVICE_HOST", "10.0.0.1")]),
        &CollectOptions::default(),
    );
    assert!(fp.host.wsl);
    assert_eq!(fp.host.virtualization.as_deref(), Some("hyperv"));
    assert_eq!(fp.host.container.as_deref(), Some("kubernetes"));
    let cuda = fp.cuda.as_ref().expect("cuda");
    assert_eq!(cuda.libraries[0].origin.as_deref(), Some("WSL driver"));
    assert!(
        fp.unreadable
            .iter()
            .any(|u| u.what.starts_with("OS release")),
        "{:?}",
        fp.unreadable
    );
    assert!(
        fp.unreadable
            .iter()
            .any(|u| u.what.starts_with("PCI devices")),
        "{:?}",
        fp.unreadable
    );
}

#[test]
fn compute_gpus_are_counted_from_the_pci_bus() {
    let tree = Tree::new();
    // Two Instinct parts that show as processing accelerators, an NVIDIA display GPU, a
    // server's BMC display (not a compute GPU) and an AMD audio function (not a GPU).
    tree.pci("0000:05:00.0", "0x120000", "0x1002", "0x74a1", "0x00")
        .pci("0000:06:00.0", "0x120000", "0x1002", "0x74a1", "0x00")
        .pci("0000:07:00.0", "0x030000", "0x10de", "0x2330", "0xa1")
        .pci("0000:08:00.0", "0x030000", "0x1a03", "0x2000", "0x52")
        .pci("0000:05:00.1", "0x040300", "0x1002", "0xab28", "0x00");
    assert_eq!(gpuprobe_detect::compute_gpu_count(&tree.root()), 3);
    assert_eq!(
        gpuprobe_detect::compute_gpu_count(&Tree::new().root()),
        0,
        "no bus"
    );
}
