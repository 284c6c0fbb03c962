//! Combining facts about the same GPU from several sources (sysfs, KFD, rocminfo,
//! amd-smi, nvidia-smi, torch), and reconciling the Python worker's view with the PCI
//! view ([`merge_python`]).
//!
//! The rule everywhere: the first source to state a fact keeps it (the live collector
//! reads sysfs first, so sysfs wins over tools); later sources only fill gaps, and every
//! source that contributed is listed in `GpuInfo::sources`.

use gpuprobe_model::Fingerprint;
use gpuprobe_model::env_vars;
use std::collections::BTreeMap;

use gpuprobe_model::{
    AmdgpuDriver, CudaInfo, DriverSource, FirmwareVersion, GpuInfo, NvidiaDriver, PythonEnv,
    RocmInfo, TorchDevice, Unreadable, Vendor,
};

use crate::isa;
use crate::text::normalize_bdf;

/// Sets `slot` when it is empty.
pub(crate) fn fill<T>(slot: &mut Option<T>, value: Option<T>) {
    if slot.is_none() {
        *slot = value;
    }
}

/// Adds `item` to `list` unless it is already there.
pub(crate) fn push_unique<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// Records an unreadable fact once.
pub(crate) fn unreadable(fp: &mut Fingerprint, what: impl Into<String>, reason: impl Into<String>) {
    push_unique(
        &mut fp.unreadable,
        Unreadable {
            what: what.into(),
            reason: reason.into(),
        },
    );
}

/// Records what a source says about the amdgpu driver and returns the record: created
/// when absent, `loaded` raised when the source saw it loaded, the source kind and version
/// filled only where still unknown (the first source to know wins).
pub(crate) fn note_amdgpu(
    fp: &mut Fingerprint,
    loaded: bool,
    source: DriverSource,
    version: Option<String>,
) -> &mut AmdgpuDriver {
    let driver = fp.amdgpu.get_or_insert_with(|| AmdgpuDriver {
        loaded: false,
        source: DriverSource::Unknown,
        version: None,
        params: BTreeMap::new(),
        ttm_params: BTreeMap::new(),
    });
    driver.loaded |= loaded;
    if driver.source == DriverSource::Unknown {
        driver.source = source;
    }
    fill(&mut driver.version, version);
    driver
}

/// The NVIDIA driver record, created empty when absent.
pub(crate) fn nvidia_driver(fp: &mut Fingerprint) -> &mut NvidiaDriver {
    fp.nvidia.get_or_insert(NvidiaDriver {
        version: None,
        cuda_driver_version: None,
        flavor: None,
    })
}

/// Indices of the GPUs of one vendor.
pub(crate) fn gpus_of(fp: &Fingerprint, vendor: Vendor) -> Vec<usize> {
    fp.gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| g.vendor == vendor)
        .map(|(i, _)| i)
        .collect()
}

/// Adds a firmware version unless that component is already listed.
pub(crate) fn add_firmware(gpu: &mut GpuInfo, firmware: FirmwareVersion) {
    if !gpu.firmware.iter().any(|f| f.name == firmware.name) {
        gpu.firmware.push(firmware);
    }
}

/// Copies every fact of `incoming` that `existing` lacks.
pub(crate) fn fill_gpu(existing: &mut GpuInfo, incoming: GpuInfo) {
    fill(&mut existing.index, incoming.index);
    fill(&mut existing.name, incoming.name);
    fill(&mut existing.pci_bus, incoming.pci_bus);
    fill(&mut existing.pci_vendor_id, incoming.pci_vendor_id);
    fill(&mut existing.pci_device_id, incoming.pci_device_id);
    fill(&mut existing.pci_revision, incoming.pci_revision);
    fill(&mut existing.native_isa, incoming.native_isa);
    fill(&mut existing.runtime_isa, incoming.runtime_isa);
    if existing.isa_features.is_empty() {
        existing.isa_features = incoming.isa_features;
    }
    fill(
        &mut existing.compute_capability,
        incoming.compute_capability,
    );
    fill(&mut existing.is_apu, incoming.is_apu);
    fill(&mut existing.vram_total_bytes, incoming.vram_total_bytes);
    fill(
        &mut existing.vis_vram_total_bytes,
        incoming.vis_vram_total_bytes,
    );
    fill(&mut existing.gtt_total_bytes, incoming.gtt_total_bytes);
    fill(&mut existing.compute_units, incoming.compute_units);
    fill(&mut existing.cacheline_bytes, incoming.cacheline_bytes);
    fill(&mut existing.drm_card, incoming.drm_card);
    fill(&mut existing.render_node, incoming.render_node);
    fill(&mut existing.vbios, incoming.vbios);
    for fw in incoming.firmware {
        add_firmware(existing, fw);
    }
    for source in incoming.sources {
        push_unique(&mut existing.sources, source);
    }
}

/// Finds the GPU in `gpus` that `incoming` describes, by PCI address, else by framework
/// index, else (when neither side has an address) by a unique same-vendor candidate
/// with a compatible name or ISA.
pub(crate) fn find_same_gpu(gpus: &[GpuInfo], incoming: &GpuInfo) -> Option<usize> {
    if let Some(bus) = incoming.pci_bus.as_deref() {
        if let Some(i) = gpus.iter().position(|g| g.pci_bus.as_deref() == Some(bus)) {
            return Some(i);
        }
        // A known address that matches nobody is a different GPU, unless some GPU of that
        // vendor has no address yet.
        let without_bus: Vec<usize> = gpus
            .iter()
            .enumerate()
            .filter(|(_, g)| g.vendor == incoming.vendor && g.pci_bus.is_none())
            .map(|(i, _)| i)
            .collect();
        return match without_bus.as_slice() {
            [only] if compatible(&gpus[*only], incoming) => Some(*only),
            _ => None,
        };
    }
    if let Some(index) = incoming.index
        && let Some(i) = gpus
            .iter()
            .position(|g| g.vendor == incoming.vendor && g.index == Some(index))
    {
        return Some(i);
    }
    let candidates: Vec<usize> = gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| g.vendor == incoming.vendor && compatible(g, incoming))
        .map(|(i, _)| i)
        .collect();
    match candidates.as_slice() {
        [only] => Some(*only),
        _ => None,
    }
}

/// Whether two records could be the same GPU (no conflicting identity facts).
fn compatible(a: &GpuInfo, b: &GpuInfo) -> bool {
    let differ = |x: &Option<String>, y: &Option<String>| matches!((x, y), (Some(x), Some(y)) if !x.eq_ignore_ascii_case(y));
    !(differ(&a.pci_device_id, &b.pci_device_id)
        || differ(&a.pci_bus, &b.pci_bus)
        || matches!((a.index, b.index), (Some(x), Some(y)) if x != y))
}

/// Adds a GPU to the fingerprint, merging it into the record of the same GPU if any.
pub(crate) fn merge_gpu(fp: &mut Fingerprint, incoming: GpuInfo) {
    match find_same_gpu(&fp.gpus, &incoming) {
        Some(i) => fill_gpu(&mut fp.gpus[i], incoming),
        None => fp.gpus.push(incoming),
    }
}

/// The GPU's PCI device id as a number (`0x7550` → 0x7550), when known and well formed.
pub(crate) fn pci_device_id(gpu: &GpuInfo) -> Option<u16> {
    gpu.pci_device_id
        .as_deref()
        .and_then(|d| u16::from_str_radix(d.trim_start_matches("0x"), 16).ok())
}

/// Fills derived facts that follow from what is already known: APU status and product
/// facts from the gfx table, compute capability from an NVIDIA name.
pub(crate) fn derive_gpu_facts(gpu: &mut GpuInfo) {
    let device_id = pci_device_id(gpu);
    if gpu.vendor == Vendor::Amd {
        if gpu.is_apu.is_none()
            && let Some(isa_name) = amd_hardware_isa(gpu)
        {
            gpu.is_apu = isa::is_apu(&isa_name, device_id);
        }
        if gpu.name.is_none() {
            gpu.name = device_id
                .and_then(isa::amd_device)
                .map(|d| d.name.to_owned());
        }
    }
    if gpu.vendor == Vendor::Nvidia {
        if gpu.name.is_none() {
            gpu.name = device_id
                .and_then(isa::nvidia_device_name)
                .map(str::to_owned);
        }
        if gpu.compute_capability.is_none() {
            gpu.compute_capability = gpu
                .name
                .as_deref()
                .and_then(isa::nvidia_compute_capability)
                .map(str::to_owned);
        }
    }
}

/// The ISA an AMD GPU's hardware is: the native ISA, else the one its PCI device id or
/// marketing name belongs to, else the runtime's. The runtime ISA comes last because an
/// `HSA_OVERRIDE_GFX_VERSION` changes it: a Radeon 680M (gfx1035, an APU) run as gfx1030
/// is still an APU.
pub(crate) fn amd_hardware_isa(gpu: &GpuInfo) -> Option<String> {
    gpu.native_isa
        .clone()
        .or_else(|| {
            pci_device_id(gpu)
                .and_then(isa::amd_device)
                .map(|d| d.isa.to_owned())
        })
        .or_else(|| {
            gpu.name
                .as_deref()
                .and_then(isa::amd_isa_from_name)
                .map(str::to_owned)
        })
        .or_else(|| gpu.runtime_isa.clone())
}

/// Merges what the Python worker reported (interpreter, torch build, torch's device list)
/// into the fingerprint.
///
/// Torch devices are matched to GPUs by PCI address when torch reports one, else by
/// order among the GPUs of the backend's vendor when the counts agree and no
/// `*_VISIBLE_DEVICES` variable reorders them. A matched GPU gets `index` (`cuda:N`),
/// `runtime_isa` (`gcnArchName` without features, or `sm_XY` on CUDA) and `isa_features`;
/// gaps (name, memory, CU count, APU flag) are filled from torch. Devices that cannot be
/// matched are added as GPUs of their own when no PCI GPU of that vendor is known (WSL,
/// restricted containers), and otherwise listed as unreadable. GPUs end up ordered by
/// torch index, then by PCI address.
pub fn merge_python(fp: &mut Fingerprint, python: PythonEnv) {
    if let Some(torch) = python.torch.as_ref() {
        let vendor = if torch.hip.is_some() {
            Vendor::Amd
        } else {
            Vendor::Nvidia
        };
        if let Some(hip) = torch.hip.as_deref() {
            let rocm = fp.rocm.get_or_insert_with(RocmInfo::default);
            fill(&mut rocm.hip_version, Some(hip.to_owned()));
        }
        if let Some(cuda) = torch.cuda.as_deref() {
            let cuda_info = fp.cuda.get_or_insert_with(CudaInfo::default);
            fill(&mut cuda_info.runtime_version, Some(cuda.to_owned()));
        }
        let reordered = fp
            .env
            .keys()
            .any(|k| env_vars::GPU_RENUMBERING.contains(&k.as_str()))
            || fp
                .env
                .get(env_vars::CUDA_DEVICE_ORDER)
                .is_some_and(|v| v != "PCI_BUS_ID");
        let vendor_gpus = gpus_of(fp, vendor);
        let by_order = !reordered && vendor_gpus.len() == torch.devices.len();
        for (position, device) in torch.devices.iter().enumerate() {
            let incoming = gpu_from_torch(device, vendor);
            let target = match incoming.pci_bus.as_deref() {
                Some(bus) => fp
                    .gpus
                    .iter()
                    .position(|g| g.pci_bus.as_deref() == Some(bus)),
                None => None,
            }
            .or_else(|| {
                fp.gpus
                    .iter()
                    .position(|g| g.vendor == vendor && g.index == Some(device.index))
            })
            .or_else(|| {
                by_order
                    .then(|| vendor_gpus.get(position).copied())
                    .flatten()
            });
            match target {
                Some(i) => {
                    let gpu = &mut fp.gpus[i];
                    // torch's view of the runtime wins for the fields it defines.
                    gpu.index = Some(device.index);
                    if incoming.runtime_isa.is_some() {
                        gpu.runtime_isa = incoming.runtime_isa.clone();
                        gpu.isa_features = incoming.isa_features.clone();
                    }
                    fill_gpu(gpu, incoming);
                    derive_gpu_facts(gpu);
                }
                None if vendor_gpus.is_empty() => {
                    let mut gpu = incoming;
                    derive_gpu_facts(&mut gpu);
                    fp.gpus.push(gpu);
                }
                None => unreadable(
                    fp,
                    format!("PCI device of torch cuda:{}", device.index),
                    "torch gave no PCI address and the device order is not known to match",
                ),
            }
        }
        fp.gpus.sort_by(|a, b| match (a.index, b.index) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.pci_bus.cmp(&b.pci_bus),
        });
    }
    fp.python = Some(python);
}

/// A GPU record from one torch device.
fn gpu_from_torch(device: &TorchDevice, vendor: Vendor) -> GpuInfo {
    let mut gpu = GpuInfo::new(vendor);
    gpu.index = Some(device.index);
    gpu.name = Some(device.name.clone()).filter(|n| !n.trim().is_empty());
    gpu.pci_bus = device.pci_bus.as_deref().and_then(normalize_bdf);
    if let Some(arch) = device.arch.as_deref() {
        let (name, features) = isa::split_isa(arch);
        if let Some(cc) = name.strip_prefix("sm_") {
            // `sm_90` → compute capability 9.0 (the last digit is the minor version).
            if cc.len() >= 2 && cc.chars().all(|c| c.is_ascii_digit()) {
                let (major, minor) = cc.split_at(cc.len() - 1);
                gpu.compute_capability = Some(format!("{major}.{minor}"));
            }
        }
        if !name.is_empty() {
            gpu.runtime_isa = Some(name);
            gpu.isa_features = features;
        }
    }
    gpu.vram_total_bytes = device.total_memory;
    gpu.compute_units = device.multi_processor_count;
    gpu.is_apu = device.integrated;
    gpu.sources.push("torch".to_owned());
    gpu
}
