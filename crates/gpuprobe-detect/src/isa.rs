//! GPU identity tables: ISA strings split into name and target features, the gfx family table
//! (products, APU status, ROCm support), small PCI-id tables for AMD and NVIDIA parts,
//! the libdrm `amdgpu.ids` marketing-name file, and NVIDIA compute capability by name.
//!
//! Sources: the gfx table and the chip ids are those of the project's known-issues
//! research (§4); NVIDIA compute capabilities follow NVIDIA's "CUDA GPUs" list.

use std::fmt;

/// Splits an ISA string into its name and target features:
/// `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-` → (`gfx90a`, [`sramecc+`, `xnack-`]).
pub fn split_isa(isa: &str) -> (String, Vec<String>) {
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

/// Whether a part shares system memory (APU / unified memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integration {
    /// Discrete GPU with its own memory.
    Discrete,
    /// Integrated GPU (APU) using system memory.
    Integrated,
    /// Depends on the part (gfx942: MI300A is an APU, MI300X is not).
    Depends,
}

/// One row of the gfx table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GfxInfo {
    /// ISA name (`gfx1151`).
    pub isa: &'static str,
    /// Family (`RDNA3.5`, `CDNA3`).
    pub family: &'static str,
    /// Products using it.
    pub products: &'static str,
    /// APU status.
    pub integration: Integration,
    /// Official ROCm support on Linux, in words.
    pub rocm_support: &'static str,
}

impl fmt::Display for GfxInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}: {})", self.isa, self.family, self.products)
    }
}

const fn gfx(
    isa: &'static str,
    family: &'static str,
    products: &'static str,
    integration: Integration,
    rocm_support: &'static str,
) -> GfxInfo {
    GfxInfo {
        isa,
        family,
        products,
        integration,
        rocm_support,
    }
}

use Integration::{Depends, Discrete, Integrated};

/// The gfx table (known-issues §4).
pub const GFX_TABLE: &[GfxInfo] = &[
    gfx("gfx900", "GCN5", "Vega 56/64, MI25", Discrete, "dropped"),
    gfx(
        "gfx902",
        "GCN5 APU",
        "Raven Ridge Vega iGPU",
        Integrated,
        "never official",
    ),
    gfx(
        "gfx909",
        "GCN5 APU",
        "Picasso Vega iGPU",
        Integrated,
        "never official",
    ),
    gfx(
        "gfx90c",
        "GCN5 APU",
        "Renoir/Cezanne Vega iGPU (e.g. Ryzen 5700G)",
        Integrated,
        "never official",
    ),
    gfx(
        "gfx906",
        "GCN5",
        "MI50/MI60, Radeon VII, Radeon Pro VII",
        Discrete,
        "deprecated, then removed in ROCm 6.x",
    ),
    gfx(
        "gfx908",
        "CDNA1",
        "Instinct MI100",
        Discrete,
        "official (Instinct)",
    ),
    gfx(
        "gfx90a",
        "CDNA2",
        "Instinct MI210, MI250, MI250X",
        Discrete,
        "official",
    ),
    gfx(
        "gfx940",
        "CDNA3",
        "pre-production MI300",
        Discrete,
        "removed in ROCm 7.0",
    ),
    gfx(
        "gfx941",
        "CDNA3",
        "pre-production MI300",
        Discrete,
        "removed in ROCm 7.0",
    ),
    gfx(
        "gfx942",
        "CDNA3",
        "MI300X, MI325X (discrete); MI300A (APU)",
        Depends,
        "official",
    ),
    gfx("gfx950", "CDNA4", "MI350X, MI355X", Discrete, "ROCm 7.0+"),
    gfx(
        "gfx1010",
        "RDNA1",
        "RX 5700/5700 XT/5600 XT, Pro W5700 (Navi10)",
        Discrete,
        "never official",
    ),
    gfx(
        "gfx1011",
        "RDNA1",
        "Navi12: Pro 5600M, V520",
        Discrete,
        "never official",
    ),
    gfx(
        "gfx1012",
        "RDNA1",
        "RX 5500/5300 (Navi14)",
        Discrete,
        "never official",
    ),
    gfx(
        "gfx1013",
        "RDNA1",
        "Cyan Skillfish (BC-250, shared GDDR6)",
        Integrated,
        "unofficial",
    ),
    gfx(
        "gfx1030",
        "RDNA2",
        "Navi21: RX 6800/6800 XT/6900 XT/6950 XT, Pro W6800, V620",
        Discrete,
        "official for W6800 and V620 only",
    ),
    gfx(
        "gfx1031",
        "RDNA2",
        "Navi22: RX 6700 XT/6750 XT, 6800M",
        Discrete,
        "unofficial (override 10.3.0)",
    ),
    gfx(
        "gfx1032",
        "RDNA2",
        "Navi23: RX 6600/6600 XT/6650 XT",
        Discrete,
        "unofficial (override 10.3.0)",
    ),
    gfx(
        "gfx1033",
        "RDNA2 APU",
        "Van Gogh (Steam Deck)",
        Integrated,
        "unofficial",
    ),
    gfx(
        "gfx1034",
        "RDNA2",
        "Navi24: RX 6500 XT/6400",
        Discrete,
        "unofficial (override 10.3.0)",
    ),
    gfx(
        "gfx1035",
        "RDNA2 APU",
        "Rembrandt: Radeon 680M/660M",
        Integrated,
        "unofficial",
    ),
    gfx(
        "gfx1036",
        "RDNA2 APU",
        "Raphael/Granite Ridge desktop iGPU (2 CU)",
        Integrated,
        "unofficial",
    ),
    gfx(
        "gfx1100",
        "RDNA3",
        "Navi31: RX 7900 XTX/XT/GRE, Pro W7900/W7800",
        Discrete,
        "official since ROCm 5.7",
    ),
    gfx(
        "gfx1101",
        "RDNA3",
        "Navi32: RX 7800 XT/7700 XT/7700, Pro W7700, V710",
        Discrete,
        "official",
    ),
    gfx(
        "gfx1102",
        "RDNA3",
        "Navi33: RX 7600 (XT), Pro W7600",
        Discrete,
        "official",
    ),
    gfx(
        "gfx1103",
        "RDNA3 APU",
        "Phoenix/Hawk Point: Radeon 780M/760M/740M",
        Integrated,
        "listed under Ryzen (inbox driver)",
    ),
    gfx(
        "gfx1150",
        "RDNA3.5",
        "Strix Point: Radeon 890M/880M",
        Integrated,
        "listed (Ryzen matrix, inbox driver)",
    ),
    gfx(
        "gfx1151",
        "RDNA3.5",
        "Strix Halo: Radeon 8060S/8050S/8040S, 8065S",
        Integrated,
        "ROCm 7.2.0+ on kernels with the KFD fixes",
    ),
    gfx(
        "gfx1152",
        "RDNA3.5",
        "Krackan Point: Radeon 860M",
        Integrated,
        "around ROCm 7.13",
    ),
    gfx(
        "gfx1153",
        "RDNA3.5",
        "Radeon 840M/820M",
        Integrated,
        "around ROCm 7.13",
    ),
    gfx(
        "gfx1200",
        "RDNA4",
        "Navi44: RX 9060 / 9060 XT",
        Discrete,
        "official (ROCm 6.4.x+)",
    ),
    gfx(
        "gfx1201",
        "RDNA4",
        "Navi48: RX 9070 / 9070 XT / 9070 GRE, Radeon AI PRO R9700",
        Discrete,
        "official (ROCm 6.4.x+)",
    ),
    gfx("gfx1250", "next Instinct", "preview", Discrete, "preview"),
];

/// Looks up an ISA (features are ignored: `gfx90a:xnack-` finds `gfx90a`).
pub fn gfx_info(isa: &str) -> Option<&'static GfxInfo> {
    let (name, _) = split_isa(isa);
    GFX_TABLE.iter().find(|g| g.isa.eq_ignore_ascii_case(&name))
}

/// Whether a GPU with this ISA (and PCI device id, for gfx942) is an APU.
pub fn is_apu(isa: &str, pci_device_id: Option<u16>) -> Option<bool> {
    match gfx_info(isa)?.integration {
        Integration::Discrete => Some(false),
        Integration::Integrated => Some(true),
        // MI300A is device 0x74a0; the other gfx942 parts are discrete.
        Integration::Depends => pci_device_id.map(|id| id == 0x74a0),
    }
}

/// An AMD part identified by PCI device id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmdDevice {
    /// PCI device id.
    pub device_id: u16,
    /// Native ISA.
    pub isa: &'static str,
    /// Product name.
    pub name: &'static str,
}

/// AMD device ids seen in real tool output (known-issues §4) and a few well-known parts;
/// used to name a GPU when `amdgpu.ids` is absent and to detect ISA spoofing in logs.
pub const AMD_DEVICES: &[AmdDevice] = &[
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

/// Looks up an AMD PCI device id.
pub fn amd_device(device_id: u16) -> Option<&'static AmdDevice> {
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
pub fn nvidia_device_name(device_id: u16) -> Option<&'static str> {
    NVIDIA_DEVICES
        .iter()
        .find(|(id, _)| *id == device_id)
        .map(|(_, name)| *name)
}

/// NVIDIA compute capability from a product name, for the families NVIDIA lists
/// (H100/H200 9.0, A100 8.0, L40S 8.9, ...). `None` when the name is not recognised.
pub fn nvidia_compute_capability(name: &str) -> Option<&'static str> {
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
pub fn lookup_amdgpu_ids(
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
