//! Host facts: OS release, kernel, command line, CPU, memory, WSL, container,
//! virtualization, Secure Boot and IOMMU.

use std::collections::BTreeMap;

use gpuprobe_model::Fingerprint;

use crate::merge::unreadable;
use crate::parse::system::{apply_os_release, parse_os_release};
use crate::root::{ReadError, Root};

/// UEFI's global-variable GUID; `SecureBoot-<guid>` holds 4 attribute bytes, then 1 data byte.
const SECURE_BOOT_VAR: &str =
    "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";

pub(super) fn collect(root: &Root, env: &BTreeMap<String, String>, fp: &mut Fingerprint) {
    let host = &mut fp.host;
    host.hostname = root.read_opt("/proc/sys/kernel/hostname");
    host.os = match root.read_opt("/proc/sys/kernel/ostype") {
        Some(os) => Some(os.to_ascii_lowercase()),
        None if root.is_live() => Some(std::env::consts::OS.to_owned()),
        None => None,
    };
    host.kernel_release = root.read_opt("/proc/sys/kernel/osrelease");
    host.kernel_cmdline = root.read_opt("/proc/cmdline");
    host.cpu_arch = root
        .read_opt("/proc/sys/kernel/arch")
        .or_else(|| root.is_live().then(|| std::env::consts::ARCH.to_owned()));

    match root
        .read("/etc/os-release")
        .or_else(|_| root.read("/usr/lib/os-release"))
    {
        Ok(text) => {
            if let Ok(map) = parse_os_release(&text) {
                apply_os_release(&map, fp);
            }
        }
        Err(err) => unreadable(fp, "OS release (/etc/os-release)", err.to_string()),
    }
    if fp.host.kernel_release.is_none() {
        unreadable(
            fp,
            "kernel release (/proc/sys/kernel/osrelease)",
            "not readable",
        );
    }

    let cpuinfo = root.read("/proc/cpuinfo").unwrap_or_default();
    let cpu_field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name)
                .then(|| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        })
    };
    fp.host.cpu_model = cpu_field("model name")
        .or_else(|| cpu_field("Model"))
        .or_else(|| cpu_field("Hardware"));
    let hypervisor_flag =
        cpu_field("flags").is_some_and(|f| f.split_whitespace().any(|w| w == "hypervisor"));
    if cpuinfo.is_empty() {
        unreadable(fp, "CPU model (/proc/cpuinfo)", "not readable");
    }

    match root.read("/proc/meminfo") {
        Ok(meminfo) => {
            fp.host.mem_total_bytes = meminfo.lines().find_map(|l| {
                let rest = l.strip_prefix("MemTotal:")?;
                let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
                kib.checked_mul(1024)
            });
        }
        Err(err) => unreadable(fp, "memory size (/proc/meminfo)", err.to_string()),
    }

    let proc_version = root
        .read("/proc/version")
        .unwrap_or_default()
        .to_ascii_lowercase();
    fp.host.wsl = proc_version.contains("microsoft")
        || env.contains_key("WSL_DISTRO_NAME")
        || env.contains_key("WSL_INTEROP");

    fp.host.container = container(root, env);
    fp.host.virtualization = virtualization(
        root,
        hypervisor_flag,
        fp.host.wsl,
        fp.host.kernel_cmdline.as_deref(),
    );

    secure_boot(root, fp);
    iommu(root, fp);
}

fn container(root: &Root, env: &BTreeMap<String, String>) -> Option<String> {
    if env.contains_key("KUBERNETES_SERVICE_HOST") {
        return Some("kubernetes".to_owned());
    }
    if root.exists("/run/.containerenv") {
        return Some("podman".to_owned());
    }
    if root.exists("/.dockerenv") {
        return Some("docker".to_owned());
    }
    if let Some(kind) = root.read_opt("/run/systemd/container") {
        return Some(kind);
    }
    if let Some(kind) = env.get("container").filter(|v| !v.is_empty()) {
        return Some(kind.clone());
    }
    let cgroup = root
        .read("/proc/1/cgroup")
        .or_else(|_| root.read("/proc/self/cgroup"))
        .unwrap_or_default();
    for (marker, kind) in [
        ("kubepods", "kubernetes"),
        ("docker", "docker"),
        ("libpod", "podman"),
        ("lxc", "lxc"),
        ("containerd", "containerd"),
    ] {
        if cgroup.contains(marker) {
            return Some(kind.to_owned());
        }
    }
    None
}

fn virtualization(
    root: &Root,
    hypervisor_flag: bool,
    wsl: bool,
    cmdline: Option<&str>,
) -> Option<String> {
    let vendor = root
        .read_opt("/sys/class/dmi/id/sys_vendor")
        .unwrap_or_default();
    let product = root
        .read_opt("/sys/class/dmi/id/product_name")
        .unwrap_or_default();
    let both = format!("{vendor} {product}");
    let from_dmi = [
        ("KVM", "kvm"),
        ("QEMU", "qemu"),
        ("VMware", "vmware"),
        ("VirtualBox", "virtualbox"),
        ("innotek", "virtualbox"),
        ("Xen", "xen"),
        ("Amazon EC2", "amazon"),
        ("Google Compute Engine", "google"),
        ("Parallels", "parallels"),
        ("OpenStack", "openstack"),
        ("Cloud Hypervisor", "cloud-hypervisor"),
    ]
    .iter()
    .find(|(marker, _)| both.contains(marker))
    .map(|(_, name)| (*name).to_owned());
    if from_dmi.is_some() {
        return from_dmi;
    }
    if vendor.contains("Microsoft") && product.contains("Virtual Machine") || wsl {
        return Some("hyperv".to_owned());
    }
    if let Some(kind) = root.read_opt("/sys/hypervisor/type") {
        return Some(kind);
    }
    if hypervisor_flag {
        if cmdline.is_some_and(|c| c.contains("firecracker")) {
            return Some("firecracker".to_owned());
        }
        return Some("unidentified hypervisor (CPU hypervisor flag)".to_owned());
    }
    None
}

fn secure_boot(root: &Root, fp: &mut Fingerprint) {
    if root.exists("/sys/firmware/efi") {
        match root.read_bytes(SECURE_BOOT_VAR) {
            Ok(bytes) if bytes.len() >= 5 => fp.host.secure_boot = Some(bytes[4] == 1),
            Ok(_) => unreadable(
                fp,
                "Secure Boot state",
                "SecureBoot EFI variable is shorter than 5 bytes",
            ),
            Err(err) => match err {
                ReadError::Missing => unreadable(
                    fp,
                    "Secure Boot state",
                    "UEFI boot but no SecureBoot variable in efivars",
                ),
                other => unreadable(fp, "Secure Boot state", format!("efivars: {other}")),
            },
        }
        fp.extra.insert("boot.mode".to_owned(), "uefi".to_owned());
    } else if root.exists("/sys/firmware") && fp.host.container.is_none() {
        // No EFI directory outside a container: legacy BIOS boot, where Secure Boot cannot be on.
        fp.host.secure_boot = Some(false);
        fp.extra.insert(
            "boot.mode".to_owned(),
            "legacy (no /sys/firmware/efi)".to_owned(),
        );
    } else {
        unreadable(
            fp,
            "Secure Boot state",
            "no /sys/firmware/efi: legacy BIOS boot, or firmware hidden inside a container",
        );
    }
}

fn iommu(root: &Root, fp: &mut Fingerprint) {
    let cmdline = fp.host.kernel_cmdline.clone().unwrap_or_default();
    let tokens: Vec<&str> = cmdline
        .split_whitespace()
        .filter(|t| {
            t.starts_with("iommu=")
                || t.starts_with("amd_iommu=")
                || t.starts_with("intel_iommu=")
                || t.starts_with("iommu.")
        })
        .collect();
    if !tokens.is_empty() {
        fp.extra
            .insert("iommu.cmdline".to_owned(), tokens.join(" "));
    }
    let units = root.list("/sys/class/iommu").unwrap_or_default();
    let groups = root.list("/sys/kernel/iommu_groups").unwrap_or_default();
    let group_type = groups
        .iter()
        .find_map(|g| root.read_opt(&format!("/sys/kernel/iommu_groups/{g}/type")));
    if !root.exists("/sys/kernel") && !root.exists("/sys/class") {
        unreadable(fp, "IOMMU mode", "/sys is not readable");
        return;
    }
    let mode = if !groups.is_empty() {
        match group_type.as_deref() {
            Some("identity") => "passthrough".to_owned(),
            Some(t) if t.starts_with("DMA") => "translated".to_owned(),
            Some(other) => other.to_owned(),
            None if tokens.contains(&"iommu=pt") => "passthrough".to_owned(),
            None => "translated".to_owned(),
        }
    } else {
        // No groups: nothing is translated, whether the cmdline switched it off, no unit
        // exists, or units are registered without DMA remapping.
        "off".to_owned()
    };
    if !units.is_empty() {
        fp.extra.insert("iommu.units".to_owned(), units.join(" "));
    }
    fp.host.iommu = Some(mode);
}
