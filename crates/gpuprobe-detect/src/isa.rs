//! GPU identity tables: ISA strings split into name and target features, APU status from
//! the model's gfx table ([`gpuprobe_model::gfx_facts`]), small PCI-id tables for AMD and
//! NVIDIA parts, the libdrm `amdgpu.ids` marketing-name file, and NVIDIA compute
//! capability by name.
//!
//! Sources: the gfx table follows the ROCm documentation's compatibility lists and release
//! history, the chip ids real tool output (`fixtures/`); NVIDIA compute capabilities follow
//! NVIDIA's "CUDA GPUs" list.

use gpuprobe_model::{Integration, gfx_facts};

/// Splits an ISA string into its name and target features:
/// `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-` → (`gfx90a`, [`sramecc+`, `xnack-`]).
pub(crate) fn split_isa(isa: &str) -> (String, Vec<String>) {
    let trimmed = isa.trim();
    let without_triple = trimmed.rsplit("--").next().unwrap_or(trimmed);
    let mut parts = without_triple.split(':');
    let name = parts.next().unwrap_or_default().trim().to_owned();
    let features = parts
        .map(|f| f.trim().to_owned())
        .filter(|f| !f.is_empty())
        .collect();
    (name, features)
}

/// Whether a GPU with this ISA (and PCI device id, for gfx942) is an APU.
pub(crate) fn is_apu(isa: &str, pci_device_id: Option<u16>) -> Option<bool> {
    match gfx_facts(isa)?.integration {
        Integration::Discrete => Some(false),
        Integration::Integrated => Some(true),
        // MI300A is device 0x74a0; the other gfx942 parts are discrete.
        Integration::Depends => pci_device_id.map(|id| id == 0x74a0),
    }
}

/// An AMD part identified by PCI device id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AmdDevice {
    /// PCI device id.
    pub device_id: u16,
    /// Native ISA.
    pub isa: &'static str,
    /// Product name.
    pub name: &'static str,
}

/// AMD device ids seen in real tool output (`fixtures/`) and a few well-known parts;
/// used to name a GPU when `amdgpu.ids` is absent and to detect ISA spoofing in logs.
pub(crate) const AMD_DEVICES: &[AmdDevice] = &[
    AmdDevice {
        device_id: 0x1586,
        isa: "gfx1151",
        name: "AMD Radeon 8060S Graphics (Strix Halo)",
    },
    AmdDevice {
        device_id: 0x73bf,
        isa: "gfx1030",
        name: "AMD Radeon RX 6800/6800 XT/6900 XT (Navi 21)",
    },
    AmdDevice {
        device_id: 0x73df,
        isa: "gfx1031",
        name: "AMD Radeon RX 6700/6700 XT/6750 XT (Navi 22)",
    },
    AmdDevice {
        device_id: 0x744c,
        isa: "gfx1100",
        name: "AMD Radeon RX 7900 XT/XTX/GRE (Navi 31)",
    },
    AmdDevice {
        device_id: 0x1681,
        isa: "gfx1035",
        name: "AMD Radeon 680M/660M (Rembrandt)",
    },
    AmdDevice {
        device_id: 0x15bf,
        isa: "gfx1103",
        name: "AMD Radeon 780M/760M/740M (Phoenix)",
    },
    AmdDevice {
        device_id: 0x164e,
        isa: "gfx1036",
        name: "AMD Radeon Graphics (Raphael iGPU)",
    },
    AmdDevice {
        device_id: 0x7550,
        isa: "gfx1201",
        name: "AMD Radeon RX 9070/9070 XT (Navi 48)",
    },
    AmdDevice {
        device_id: 0x7551,
        isa: "gfx1201",
        name: "AMD Radeon AI PRO R9700 (Navi 48)",
    },
    AmdDevice {
        device_id: 0x738c,
        isa: "gfx908",
        name: "AMD Instinct MI100",
    },
    AmdDevice {
        device_id: 0x740f,
        isa: "gfx90a",
        name: "AMD Instinct MI210",
    },
    AmdDevice {
        device_id: 0x740c,
        isa: "gfx90a",
        name: "AMD Instinct MI250/MI250X",
    },
    AmdDevice {
        device_id: 0x74a0,
        isa: "gfx942",
        name: "AMD Instinct MI300A",
    },
    AmdDevice {
        device_id: 0x74a1,
        isa: "gfx942",
        name: "AMD Instinct MI300X",
    },
    AmdDevice {
        device_id: 0x74b5,
        isa: "gfx942",
        name: "AMD Instinct MI300X VF",
    },
];

/// Marketing-name fragments that name one ISA, for pasted logs that show a GPU's name but
/// not its ISA (an amd-smi or rocm-smi dashboard, a Windows `collect_env`). Only names that
/// belong to a single ISA are listed; a longer fragment is tried before a shorter one.
const AMD_NAME_ISA: &[(&str, &str)] = &[
    ("AI PRO R9700", "gfx1201"),
    ("RX 9070", "gfx1201"),
    ("RX 9060", "gfx1200"),
    ("PRO W7900", "gfx1100"),
    ("PRO W7800", "gfx1100"),
    ("RX 7900", "gfx1100"),
    ("RX 7800", "gfx1101"),
    ("RX 7700", "gfx1101"),
    ("RX 7600", "gfx1102"),
    ("RX 6950", "gfx1030"),
    ("RX 6900", "gfx1030"),
    ("RX 6800", "gfx1030"),
    ("RX 6750", "gfx1031"),
    ("RX 6700", "gfx1031"),
    ("RX 6650", "gfx1032"),
    ("RX 6600", "gfx1032"),
    ("8060S", "gfx1151"),
    ("8050S", "gfx1151"),
    ("890M", "gfx1150"),
    ("880M", "gfx1150"),
    ("780M", "gfx1103"),
    ("760M", "gfx1103"),
    ("MI355X", "gfx950"),
    ("MI350X", "gfx950"),
    ("MI325X", "gfx942"),
    ("MI300X", "gfx942"),
    ("MI300A", "gfx942"),
    ("MI250X", "gfx90a"),
    ("MI250", "gfx90a"),
    ("MI210", "gfx90a"),
    ("MI100", "gfx908"),
];

/// The one ISA an AMD marketing name belongs to, when the name says it unambiguously
/// (`AMD Radeon RX 9070 XT` → `gfx1201`); `None` for names this table does not know.
/// A fragment matches only where the model number ends: laptop parts append a letter to
/// a desktop number and are another chip (`RX 6800M` is gfx1031, `RX 6800S` gfx1032,
/// while `RX 6800` is gfx1030).
pub fn amd_isa_from_name(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_uppercase();
    AMD_NAME_ISA
        .iter()
        .find(|(fragment, _)| {
            let fragment = fragment.to_ascii_uppercase();
            name.match_indices(&fragment).any(|(at, _)| {
                !name[at + fragment.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
            })
        })
        .map(|(_, isa)| *isa)
}

/// Looks up an AMD PCI device id.
pub(crate) fn amd_device(device_id: u16) -> Option<&'static AmdDevice> {
    AMD_DEVICES.iter().find(|d| d.device_id == device_id)
}

/// A few NVIDIA PCI device ids (PCI ID repository), used only when the driver's
/// `/proc/driver/nvidia/gpus/*/information` gives no model name.
const NVIDIA_DEVICES: &[(u16, &str)] = &[
    (0x2330, "NVIDIA H100 80GB HBM3"),
    (0x2331, "NVIDIA H100 PCIe"),
    (0x20b0, "NVIDIA A100-SXM4-40GB"),
    (0x20b2, "NVIDIA A100-SXM4-80GB"),
    (0x2684, "NVIDIA GeForce RTX 4090"),
    (0x2204, "NVIDIA GeForce RTX 3090"),
    (0x1eb8, "NVIDIA Tesla T4"),
];

/// Looks up an NVIDIA PCI device id.
pub(crate) fn nvidia_device_name(device_id: u16) -> Option<&'static str> {
    NVIDIA_DEVICES
        .iter()
        .find(|(id, _)| *id == device_id)
        .map(|(_, name)| *name)
}

/// NVIDIA compute capability from a product name, for the families NVIDIA lists
/// (H100/H200 9.0, A100 8.0, L40S 8.9, ...). `None` when the name is not recognised.
pub(crate) fn nvidia_compute_capability(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    let rtx_series = |prefix: char| {
        words
            .iter()
            .any(|w| w.len() == 4 && w.starts_with(prefix) && w.chars().all(|c| c.is_ascii_digit()))
            && has("RTX")
    };
    let cc = if has("GB300") || has("B300") {
        "10.3"
    } else if has("GB200") || has("B200") || has("B100") {
        "10.0"
    } else if has("H100") || has("H200") || has("GH200") || has("H800") || has("H20") {
        "9.0"
    } else if has("L40S")
        || has("L40")
        || has("L4")
        || (has("ADA") && has("RTX"))
        || rtx_series('4')
    {
        "8.9"
    } else if has("A100") || has("A800") || has("A30") {
        "8.0"
    } else if has("A10")
        || has("A40")
        || has("A16")
        || has("A2")
        || rtx_series('3')
        || (has("RTX")
            && words.iter().any(|w| {
                w.len() == 5 && w.starts_with('A') && w[1..].chars().all(|c| c.is_ascii_digit())
            }))
    {
        "8.6"
    } else if has("BLACKWELL") || rtx_series('5') {
        "12.0"
    } else if has("T4") || rtx_series('2') || (has("QUADRO") && has("RTX")) {
        "7.5"
    } else if has("V100") {
        "7.0"
    } else if has("P100") {
        "6.0"
    } else {
        return None;
    };
    Some(cc)
}

/// One entry of libdrm's `amdgpu.ids`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdgpuIdsEntry {
    /// PCI device id.
    pub device_id: u16,
    /// PCI revision.
    pub revision: u8,
    /// Marketing name.
    pub name: String,
}

/// Parses libdrm's `amdgpu.ids` (`device_id,\trevision_id,\tproduct_name`, hex without
/// `0x`; `#` comments and a version line). Malformed lines are skipped.
pub fn parse_amdgpu_ids(text: &str) -> Vec<AmdgpuIdsEntry> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.starts_with('#') {
                return None;
            }
            let mut fields = line.splitn(3, ',');
            let device_id = u16::from_str_radix(fields.next()?.trim(), 16).ok()?;
            let revision = u8::from_str_radix(fields.next()?.trim(), 16).ok()?;
            let name = fields.next()?.trim().to_owned();
            (!name.is_empty()).then_some(AmdgpuIdsEntry {
                device_id,
                revision,
                name,
            })
        })
        .collect()
}

/// Finds a marketing name in parsed `amdgpu.ids`: the exact revision first, else the
/// only name listed for that device id.
pub(crate) fn lookup_amdgpu_ids(
    entries: &[AmdgpuIdsEntry],
    device_id: u16,
    revision: Option<u8>,
) -> Option<String> {
    if let Some(rev) = revision
        && let Some(hit) = entries
            .iter()
            .find(|e| e.device_id == device_id && e.revision == rev)
    {
        return Some(hit.name.clone());
    }
    let mut names = entries
        .iter()
        .filter(|e| e.device_id == device_id)
        .map(|e| e.name.as_str());
    let first = names.next()?;
    names.all(|n| n == first).then(|| first.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marketing_names_name_their_isa_only_when_unambiguous() {
        assert_eq!(amd_isa_from_name("AMD Radeon RX 9070 XT"), Some("gfx1201"));
        assert_eq!(amd_isa_from_name("Radeon AI PRO R9700"), Some("gfx1201"));
        assert_eq!(amd_isa_from_name("AMD Radeon RX 7900 XTX"), Some("gfx1100"));
        assert_eq!(amd_isa_from_name("AMD Radeon RX 7600 XT"), Some("gfx1102"));
        assert_eq!(amd_isa_from_name("AMD Instinct MI300X VF"), Some("gfx942"));
        assert_eq!(
            amd_isa_from_name("AMD Radeon(TM) 8060S Graphics"),
            Some("gfx1151")
        );
        assert_eq!(
            amd_isa_from_name("AMD Radeon 8060S Graphics"),
            Some("gfx1151")
        );
        assert_eq!(amd_isa_from_name("AMD Radeon Graphics"), None);
        assert_eq!(amd_isa_from_name(""), None);
    }

    #[test]
    fn isa_features_split() {
        assert_eq!(
            split_isa("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"),
            (
                "gfx90a".to_owned(),
                vec!["sramecc+".to_owned(), "xnack-".to_owned()]
            )
        );
        assert_eq!(split_isa("gfx1151"), ("gfx1151".to_owned(), vec![]));
    }

    #[test]
    fn apu_status_follows_table() {
        assert_eq!(is_apu("gfx1151", None), Some(true));
        assert_eq!(is_apu("gfx1100", None), Some(false));
        assert_eq!(is_apu("gfx942", Some(0x74a0)), Some(true));
        assert_eq!(is_apu("gfx942", Some(0x74a1)), Some(false));
        assert_eq!(is_apu("gfx942", None), None);
        assert_eq!(is_apu("gfx9999", None), None);
    }

    #[test]
    fn compute_capability_by_name() {
        assert_eq!(
            nvidia_compute_capability("NVIDIA H100 80GB HBM3"),
            Some("9.0")
        );
        assert_eq!(
            nvidia_compute_capability("NVIDIA A100-SXM4-80GB"),
            Some("8.0")
        );
        assert_eq!(nvidia_compute_capability("NVIDIA A10"), Some("8.6"));
        assert_eq!(
            nvidia_compute_capability("NVIDIA GeForce RTX 4090"),
            Some("8.9")
        );
        assert_eq!(
            nvidia_compute_capability("NVIDIA GeForce RTX 5090"),
            Some("12.0")
        );
        assert_eq!(nvidia_compute_capability("Mystery GPU"), None);
    }

    #[test]
    fn amdgpu_ids_parse_and_lookup() {
        let ids = parse_amdgpu_ids(
            "# comment\n1.0.0\n1586,\tC1,\tAMD Radeon 8060S\n744C,\tC8,\tAMD Radeon RX 7900 XTX\n744C,\tCC,\tAMD Radeon RX 7900 XT\nbad line\n",
        );
        assert_eq!(ids.len(), 3);
        assert_eq!(
            lookup_amdgpu_ids(&ids, 0x1586, Some(0x00)).as_deref(),
            Some("AMD Radeon 8060S")
        );
        assert_eq!(
            lookup_amdgpu_ids(&ids, 0x744c, Some(0xcc)).as_deref(),
            Some("AMD Radeon RX 7900 XT")
        );
        assert_eq!(lookup_amdgpu_ids(&ids, 0x744c, Some(0x00)), None);
    }
}
