//! GPUs from sysfs and procfs: PCI display/3D controllers, the KFD topology (native ISA,
//! CU count, render node), DRM memory sizes, VBIOS and readable firmware versions,
//! libdrm's `amdgpu.ids` marketing names, and the NVIDIA driver's per-GPU information.

use std::collections::BTreeMap;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::GfxIsa;
use gpuprobe_model::{FirmwareVersion, GpuInfo, Vendor};

use crate::isa;
use crate::merge::{add_firmware, fill, merge_gpu, push_unique, unreadable};
use crate::root::Root;
use crate::text::{bdf_from_location, normalize_bdf, parse_int, pci_id};

const AMD: u64 = 0x1002;
const NVIDIA: u64 = 0x10de;
const INTEL: u64 = 0x8086;

pub(super) fn collect(root: &Root, fp: &mut Fingerprint) {
    pci(root, fp);
    kfd(root, fp);
    drm(root, fp);
    nvidia_proc(root, fp);
    names(root, fp);
}

fn vendor_of(id: u64) -> Vendor {
    match id {
        AMD => Vendor::Amd,
        NVIDIA => Vendor::Nvidia,
        INTEL => Vendor::Intel,
        _ => Vendor::Other,
    }
}

/// Whether a PCI function is a GPU: a display controller (class 0x03xxxx) of any vendor,
/// or an AMD/NVIDIA processing accelerator (class 0x12xxxx: some Instinct parts and
/// virtual functions).
fn is_gpu(class: u64, vendor_id: u64) -> bool {
    let base_class = class >> 16;
    base_class == 0x03 || (base_class == 0x12 && (vendor_id == AMD || vendor_id == NVIDIA))
}

/// The device nodes a GPU runtime opens: AMD's KFD, NVIDIA's first GPU, WSL's GPU bridge.
const GPU_DEVICE_NODES: [&str; 3] = ["/dev/kfd", "/dev/nvidia0", "/dev/dxg"];

/// Whether `root` shows a device node of an AMD, NVIDIA or WSL GPU, without loading any GPU
/// library. Links are followed, as the runtimes that open them do.
pub fn gpu_device_nodes_present(root: &Root) -> bool {
    GPU_DEVICE_NODES.iter().any(|node| root.path(node).exists())
}

/// How many AMD and NVIDIA GPUs the PCI bus shows (the ones CUDA or ROCm can drive), without
/// loading any GPU library; 0 when the bus cannot be read.
pub fn compute_gpu_count(root: &Root) -> usize {
    let Ok(devices) = root.list("/sys/bus/pci/devices") else {
        return 0;
    };
    devices
        .iter()
        .filter(|name| {
            let read = |file: &str| {
                root.read_opt(&format!("/sys/bus/pci/devices/{name}/{file}"))
                    .and_then(|v| parse_int(&v))
            };
            let vendor_id = read("vendor").unwrap_or(0);
            read("class").is_some_and(|class| is_gpu(class, vendor_id))
                && (vendor_id == AMD || vendor_id == NVIDIA)
        })
        .count()
}

/// Every PCI GPU ([`is_gpu`]).
fn pci(root: &Root, fp: &mut Fingerprint) {
    let devices = match root.list("/sys/bus/pci/devices") {
        Ok(d) => d,
        Err(err) => {
            unreadable(fp, "PCI devices (/sys/bus/pci/devices)", err.to_string());
            return;
        }
    };
    for name in devices {
        let dir = format!("/sys/bus/pci/devices/{name}");
        let Some(class) = root
            .read_opt(&format!("{dir}/class"))
            .and_then(|c| parse_int(&c))
        else {
            continue;
        };
        let vendor_id = root
            .read_opt(&format!("{dir}/vendor"))
            .and_then(|v| parse_int(&v))
            .unwrap_or(0);
        if !is_gpu(class, vendor_id) {
            continue;
        }
        let mut gpu = GpuInfo::new(vendor_of(vendor_id));
        gpu.pci_bus = normalize_bdf(&name).or(Some(name.clone()));
        gpu.pci_vendor_id = Some(pci_id(vendor_id));
        gpu.pci_device_id = root
            .read_opt(&format!("{dir}/device"))
            .and_then(|d| parse_int(&d))
            .map(pci_id);
        gpu.pci_revision = root
            .read_opt(&format!("{dir}/revision"))
            .and_then(|r| parse_int(&r))
            .map(|r| format!("0x{r:02x}"));
        gpu.sources.push("pci".to_owned());
        if let (Some(driver), Some(bus)) = (
            root.link_name(&format!("{dir}/driver")),
            gpu.pci_bus.clone(),
        ) {
            fp.extra.insert(format!("gpu.{bus}.kernel_driver"), driver);
        }
        // The negotiated PCIe link ("16.0 GT/s PCIe", "16"): the HTML report sets
        // host<->device bandwidths against it.
        if let Some(bus) = gpu.pci_bus.clone() {
            for (file, key) in [
                ("current_link_speed", "pcie_link_speed"),
                ("current_link_width", "pcie_link_width"),
            ] {
                if let Some(value) = root
                    .read_opt(&format!("{dir}/{file}"))
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty() && !v.starts_with("Unknown"))
                {
                    fp.extra.insert(format!("gpu.{bus}.{key}"), value);
                }
            }
        }
        merge_gpu(fp, gpu);
    }
}

fn parse_properties(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let key = words.next()?;
            let value = words.next()?.parse().ok()?;
            Some((key.to_owned(), value))
        })
        .collect()
}

/// The KFD topology: one node per CPU and per GPU (or GPU partition).
fn kfd(root: &Root, fp: &mut Fingerprint) {
    const NODES: &str = "/sys/class/kfd/kfd/topology/nodes";
    let amd_present = fp.gpus.iter().any(|g| g.vendor == Vendor::Amd);
    let nodes = match root.list(NODES) {
        Ok(n) => n,
        Err(err) => {
            if amd_present {
                let reason = if root.exists("/sys/class/kfd") {
                    err.to_string()
                } else {
                    "no /sys/class/kfd: the amdgpu compute interface (KFD) is not available"
                        .to_owned()
                };
                unreadable(fp, "KFD topology (native ISA)", reason);
            }
            return;
        }
    };
    for node in nodes {
        let Ok(text) = root.read(&format!("{NODES}/{node}/properties")) else {
            continue;
        };
        let props = parse_properties(&text);
        let simd_count = props.get("simd_count").copied().unwrap_or(0);
        if simd_count == 0 {
            continue; // a CPU node
        }
        let mut gpu = GpuInfo::new(Vendor::Amd);
        gpu.native_isa = props
            .get("gfx_target_version")
            .and_then(|v| GfxIsa::from_target_version(*v))
            .map(|isa| isa.name());
        let domain = props.get("domain").copied().unwrap_or(0);
        gpu.pci_bus = props.get("location_id").filter(|l| **l != 0).and_then(|l| {
            bdf_from_location(
                u32::try_from(domain).unwrap_or(u32::MAX),
                u32::try_from(*l).unwrap_or(u32::MAX),
            )
        });
        gpu.pci_device_id = props
            .get("device_id")
            .filter(|d| **d != 0)
            .map(|d| pci_id(*d));
        gpu.pci_vendor_id = props
            .get("vendor_id")
            .filter(|v| **v != 0)
            .map(|v| pci_id(*v));
        if let Some(per_cu) = props.get("simd_per_cu").filter(|s| **s > 0) {
            gpu.compute_units = u32::try_from(simd_count / per_cu).ok();
        }
        gpu.render_node = props
            .get("drm_render_minor")
            .filter(|m| **m >= 128)
            .map(|m| format!("renderD{m}"));
        if props.get("cpu_cores_count").is_some_and(|c| *c > 0) {
            // Older APUs expose one combined CPU+GPU node.
            gpu.is_apu = Some(true);
        }
        gpu.sources.push("kfd".to_owned());
        merge_gpu(fp, gpu);
    }
}

pub(super) fn read_bytes(root: &Root, path: &str) -> Option<u64> {
    root.read_opt(path).and_then(|v| parse_int(&v))
}

/// Whether a `/sys/class/drm` entry is a card (`card0`), not a connector (`card0-DP-1`)
/// or a render node.
pub(super) fn is_drm_card(entry: &str) -> bool {
    entry.starts_with("card") && !entry.contains('-')
}

/// DRM cards: memory sizes, VBIOS and firmware versions readable without root.
fn drm(root: &Root, fp: &mut Fingerprint) {
    let Ok(entries) = root.list("/sys/class/drm") else {
        if fp.gpus.iter().any(|g| g.vendor == Vendor::Amd) {
            unreadable(
                fp,
                "DRM devices (/sys/class/drm)",
                "not present: VRAM/GTT sizes and VBIOS unknown",
            );
        }
        return;
    };
    for entry in entries {
        let is_card = is_drm_card(&entry);
        let is_render = entry.starts_with("renderD");
        if !is_card && !is_render {
            continue;
        }
        let base = format!("/sys/class/drm/{entry}/device");
        let bus = root
            .link_name(&base)
            .and_then(|n| normalize_bdf(&n))
            .or_else(|| {
                root.read_opt(&format!("{base}/uevent"))?
                    .lines()
                    .find_map(|l| l.strip_prefix("PCI_SLOT_NAME=").and_then(normalize_bdf))
            });
        let Some(bus) = bus else { continue };
        let Some(index) = fp
            .gpus
            .iter()
            .position(|g| g.pci_bus.as_deref() == Some(bus.as_str()))
        else {
            continue;
        };
        if is_render {
            fill(&mut fp.gpus[index].render_node, Some(entry.clone()));
            continue;
        }
        let vram = read_bytes(root, &format!("{base}/mem_info_vram_total"));
        let vis = read_bytes(root, &format!("{base}/mem_info_vis_vram_total"));
        let gtt = read_bytes(root, &format!("{base}/mem_info_gtt_total"));
        let vbios = root.read_opt(&format!("{base}/vbios_version"));
        let mut firmware = Vec::new();
        if let Ok(files) = root.list(&format!("{base}/fw_version")) {
            for file in files {
                let Some(component) = file.strip_suffix("_fw_version") else {
                    continue;
                };
                if let Some(version) = root.read_opt(&format!("{base}/fw_version/{file}")) {
                    firmware.push(FirmwareVersion {
                        name: component.to_ascii_uppercase(),
                        feature: None,
                        version: version.to_ascii_lowercase(),
                    });
                }
            }
        }
        let gpu = &mut fp.gpus[index];
        fill(&mut gpu.drm_card, Some(entry.clone()));
        fill(&mut gpu.vram_total_bytes, vram);
        fill(&mut gpu.vis_vram_total_bytes, vis);
        fill(&mut gpu.gtt_total_bytes, gtt);
        fill(&mut gpu.vbios, vbios);
        for fw in firmware {
            add_firmware(gpu, fw);
        }
        push_unique(&mut gpu.sources, "drm".to_owned());
    }
}

/// `/proc/driver/nvidia/gpus/<bus>/information`: `Model:`, `Bus Location:`, `Video BIOS:`.
fn nvidia_proc(root: &Root, fp: &mut Fingerprint) {
    let Ok(entries) = root.list("/proc/driver/nvidia/gpus") else {
        return;
    };
    for entry in entries {
        let Ok(text) = root.read(&format!("/proc/driver/nvidia/gpus/{entry}/information")) else {
            continue;
        };
        let field = |name: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name)
                    .then(|| v.trim().to_owned())
                    .filter(|v| !v.is_empty() && v != "??.??.??.??.??")
            })
        };
        let mut gpu = GpuInfo::new(Vendor::Nvidia);
        gpu.name = field("Model");
        gpu.pci_bus = field("Bus Location")
            .as_deref()
            .and_then(normalize_bdf)
            .or_else(|| normalize_bdf(&entry));
        gpu.vbios = field("Video BIOS");
        gpu.sources.push("nvidia-proc".to_owned());
        merge_gpu(fp, gpu);
    }
}

/// Marketing names for AMD GPUs from libdrm's `amdgpu.ids`.
fn names(root: &Root, fp: &mut Fingerprint) {
    if !fp
        .gpus
        .iter()
        .any(|g| g.vendor == Vendor::Amd && g.name.is_none())
    {
        return;
    }
    let ids = [
        "/usr/share/libdrm/amdgpu.ids",
        "/opt/amdgpu/share/libdrm/amdgpu.ids",
    ]
    .iter()
    .find_map(|p| root.read(p).ok())
    .map(|text| isa::parse_amdgpu_ids(&text))
    .unwrap_or_default();
    for gpu in fp
        .gpus
        .iter_mut()
        .filter(|g| g.vendor == Vendor::Amd && g.name.is_none())
    {
        let device = gpu
            .pci_device_id
            .as_deref()
            .and_then(parse_int)
            .and_then(|d| u16::try_from(d).ok());
        let revision = gpu
            .pci_revision
            .as_deref()
            .and_then(parse_int)
            .and_then(|r| u8::try_from(r).ok());
        if let Some(device) = device {
            gpu.name = isa::lookup_amdgpu_ids(&ids, device, revision);
        }
    }
}

#[cfg(test)]
mod device_node_tests {
    use super::*;

    #[test]
    fn a_gpu_device_node_under_the_root_is_seen() {
        let tree = tempfile::tempdir().unwrap();
        let root = Root::at(tree.path());
        assert!(!gpu_device_nodes_present(&root));
        std::fs::create_dir_all(tree.path().join("dev")).unwrap();
        std::fs::write(tree.path().join("dev/null"), "").unwrap();
        assert!(!gpu_device_nodes_present(&root), "not a GPU node");
        std::fs::write(tree.path().join("dev/dxg"), "").unwrap();
        assert!(gpu_device_nodes_present(&root));
    }
}
