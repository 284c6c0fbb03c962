//! Kernel drivers: amdgpu (loaded, in-box or DKMS, every module parameter, TTM
//! parameters, firmware versions from debugfs) and the NVIDIA driver (version, open or
//! proprietary module).

use std::collections::BTreeMap;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{AmdgpuDriver, DriverSource, Vendor};

use crate::merge::{fill, gpus_of, note_amdgpu, nvidia_driver, unreadable};
use crate::parse::firmware_info;
use crate::root::{ReadError, Root};
use crate::text::normalize_bdf;

pub(super) fn collect(root: &Root, fp: &mut Fingerprint) {
    amdgpu(root, fp);
    debugfs_firmware(root, fp);
    nvidia(root, fp);
}

/// Reads every parameter of a module; unreadable ones are listed by name.
fn module_params(root: &Root, module: &str, fp: &mut Fingerprint) -> BTreeMap<String, String> {
    let dir = format!("/sys/module/{module}/parameters");
    let mut params = BTreeMap::new();
    let mut denied = Vec::new();
    for name in root.list(&dir).unwrap_or_default() {
        match root.read_trimmed(&format!("{dir}/{name}")) {
            Ok(value) => {
                params.insert(name, value);
            }
            Err(ReadError::Denied) => denied.push(name),
            Err(_) => {}
        }
    }
    if !denied.is_empty() {
        unreadable(
            fp,
            format!("{module} parameters {}", denied.join(", ")),
            "permission denied (needs root)",
        );
    }
    params
}

fn amdgpu(root: &Root, fp: &mut Fingerprint) {
    let loaded = root.exists("/sys/module/amdgpu");
    let amd_gpu = fp.gpus.iter().any(|g| g.vendor == Vendor::Amd);
    if !loaded && !amd_gpu {
        return;
    }
    if !loaded {
        note_amdgpu(fp, false, DriverSource::Unknown, None);
        return;
    }
    // Only out-of-tree (DKMS) builds set a module version.
    let version = root.read_opt("/sys/module/amdgpu/version");
    let source = if version.is_some() {
        DriverSource::Dkms
    } else {
        DriverSource::Inbox
    };
    let params = module_params(root, "amdgpu", fp);
    // The DKMS driver brings its own TTM as `amdttm`.
    let ttm_module = if root.exists("/sys/module/amdttm") {
        "amdttm"
    } else {
        "ttm"
    };
    let ttm_params = module_params(root, ttm_module, fp);
    if ttm_module == "amdttm" {
        fp.extra
            .insert("ttm.module".to_owned(), "amdttm".to_owned());
    }
    fp.amdgpu = Some(AmdgpuDriver {
        loaded: true,
        source,
        version,
        params,
        ttm_params,
    });
}

/// `/sys/kernel/debug/dri/<minor>/amdgpu_firmware_info` (root only); the `name` file next
/// to it (`amdgpu dev=0000:c5:00.0 unique=...`) says which GPU it belongs to.
fn debugfs_firmware(root: &Root, fp: &mut Fingerprint) {
    if !fp.gpus.iter().any(|g| g.vendor == Vendor::Amd)
        || !fp.amdgpu.as_ref().is_some_and(|d| d.loaded)
    {
        return;
    }
    const WHAT: &str = "amdgpu firmware versions (debugfs amdgpu_firmware_info)";
    let minors = match root.list("/sys/kernel/debug/dri") {
        Ok(m) => m,
        Err(ReadError::Missing) => {
            let reason = if root.exists("/sys/kernel/debug") {
                "debugfs not mounted or not visible (needs root)"
            } else {
                "no /sys/kernel/debug"
            };
            unreadable(fp, WHAT, reason);
            return;
        }
        Err(err) => {
            unreadable(fp, WHAT, format!("/sys/kernel/debug: {err}"));
            return;
        }
    };
    let mut any = false;
    for minor in minors {
        let dir = format!("/sys/kernel/debug/dri/{minor}");
        let text = match root.read(&format!("{dir}/amdgpu_firmware_info")) {
            Ok(t) => t,
            Err(ReadError::Missing) => continue,
            Err(err) => {
                unreadable(fp, WHAT, format!("{dir}/amdgpu_firmware_info: {err}"));
                any = true;
                continue;
            }
        };
        any = true;
        let Ok(info) = firmware_info::parse(&text) else {
            continue;
        };
        let bus = root.read_opt(&format!("{dir}/name")).and_then(|n| {
            n.split_whitespace().find_map(|w| {
                w.strip_prefix("dev=")
                    .or_else(|| w.strip_prefix("unique="))
                    .and_then(normalize_bdf)
            })
        });
        let target = bus
            .and_then(|b| {
                fp.gpus
                    .iter()
                    .position(|g| g.pci_bus.as_deref() == Some(b.as_str()))
            })
            .or_else(|| match gpus_of(fp, Vendor::Amd).as_slice() {
                [only] => Some(*only),
                _ => None,
            });
        if let Some(i) = target {
            info.apply_to(&mut fp.gpus[i]);
        }
    }
    if !any {
        unreadable(
            fp,
            WHAT,
            "no amdgpu_firmware_info under /sys/kernel/debug/dri",
        );
    }
}

fn nvidia(root: &Root, fp: &mut Fingerprint) {
    let proc_version = root.read_opt("/proc/driver/nvidia/version");
    let module_version = root.read_opt("/sys/module/nvidia/version");
    if proc_version.is_none() && module_version.is_none() {
        if fp.gpus.iter().any(|g| g.vendor == Vendor::Nvidia) {
            unreadable(
                fp,
                "NVIDIA driver version",
                "no /proc/driver/nvidia/version: the nvidia module is not loaded",
            );
        }
        return;
    }
    // `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...`
    let from_proc = proc_version.as_deref().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
        line.split_whitespace()
            .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
            .map(str::to_owned)
    });
    let flavor = proc_version.as_deref().map(|text| {
        if text.contains("Open Kernel Module") {
            "open".to_owned()
        } else {
            "proprietary".to_owned()
        }
    });
    let driver = nvidia_driver(fp);
    fill(&mut driver.version, module_version.or(from_proc));
    fill(&mut driver.flavor, flavor);
}
