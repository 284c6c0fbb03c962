//! The per-ISA facts the lint and the matcher need (family, APU, Instinct, minimum ROCm),
//! and which build targets cover an ISA. Names and `HSA_OVERRIDE_GFX_VERSION` values are
//! decoded by [`gpuprobe_model::isa`] (re-exported here); an override makes libhsakmt report
//! another ISA than the real one (known-issues.md §2a, RKB-010). Facts come from
//! known-issues.md §4.

pub use gpuprobe_model::isa::{GfxIsa, OverrideError, decode_override};

/// What is known about one ISA (known-issues.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchFacts {
    /// ISA name.
    pub isa: &'static str,
    /// Family (`RDNA3.5`, `CDNA2`).
    pub family: &'static str,
    /// Products.
    pub products: &'static str,
    /// Integrated GPU sharing system memory; `None` where the ISA covers both (gfx942 is
    /// MI300X and MI300A).
    pub apu: Option<bool>,
    /// An Instinct (data-centre) part.
    pub instinct: bool,
    /// Lowest ROCm release that supports it on Linux, where the research gives one.
    pub min_rocm: Option<&'static str>,
}

const fn facts(
    isa: &'static str,
    family: &'static str,
    products: &'static str,
    apu: Option<bool>,
    instinct: bool,
    min_rocm: Option<&'static str>,
) -> ArchFacts {
    ArchFacts {
        isa,
        family,
        products,
        apu,
        instinct,
        min_rocm,
    }
}

/// The ISA table of known-issues.md §4.
pub const ARCH_TABLE: &[ArchFacts] = &[
    facts(
        "gfx900",
        "GCN5",
        "Vega 56/64, MI25",
        Some(false),
        false,
        None,
    ),
    facts(
        "gfx902",
        "GCN5 APU",
        "Raven Ridge Vega iGPU",
        Some(true),
        false,
        None,
    ),
    facts(
        "gfx909",
        "GCN5 APU",
        "Picasso Vega iGPU",
        Some(true),
        false,
        None,
    ),
    facts(
        "gfx90c",
        "GCN5 APU",
        "Renoir/Cezanne Vega iGPU (5700G)",
        Some(true),
        false,
        None,
    ),
    facts(
        "gfx906",
        "GCN5",
        "MI50/MI60, Radeon VII",
        Some(false),
        false,
        None,
    ),
    facts("gfx908", "CDNA1", "Instinct MI100", Some(false), true, None),
    facts(
        "gfx90a",
        "CDNA2",
        "Instinct MI210/MI250/MI250X",
        Some(false),
        true,
        None,
    ),
    facts(
        "gfx940",
        "CDNA3",
        "MI300 pre-production",
        Some(false),
        true,
        None,
    ),
    facts(
        "gfx941",
        "CDNA3",
        "MI300 pre-production",
        Some(false),
        true,
        None,
    ),
    facts(
        "gfx942",
        "CDNA3",
        "Instinct MI300X/MI325X, MI300A (APU)",
        None,
        true,
        None,
    ),
    facts(
        "gfx950",
        "CDNA4",
        "Instinct MI350X/MI355X",
        Some(false),
        true,
        Some("7.0.0"),
    ),
    facts(
        "gfx1010",
        "RDNA1",
        "RX 5700/5700 XT/5600 XT",
        Some(false),
        false,
        None,
    ),
    facts(
        "gfx1011",
        "RDNA1",
        "Navi12 (Pro 5600M, V520)",
        Some(false),
        false,
        None,
    ),
    facts("gfx1012", "RDNA1", "RX 5500/5300", Some(false), false, None),
    facts(
        "gfx1013",
        "RDNA1",
        "Cyan Skillfish (BC-250, shared GDDR6)",
        Some(true),
        false,
        None,
    ),
    facts(
        "gfx1030",
        "RDNA2",
        "RX 6800/6900, Pro W6800, V620",
        Some(false),
        false,
        None,
    ),
    facts(
        "gfx1031",
        "RDNA2",
        "RX 6700 XT/6750 XT, 6800M",
        Some(false),
        false,
        None,
    ),
    facts(
        "gfx1032",
        "RDNA2",
        "RX 6600/6650 XT",
        Some(false),
        false,
        None,
    ),
    facts(
        "gfx1033",
        "RDNA2 APU",
        "Van Gogh (Steam Deck)",
        Some(true),
        false,
        None,
    ),
    facts(
        "gfx1034",
        "RDNA2",
        "RX 6500 XT/6400",
        Some(false),
        false,
        None,
    ),
    facts(
        "gfx1035",
        "RDNA2 APU",
        "Rembrandt 680M/660M",
        Some(true),
        false,
        None,
    ),
    facts(
        "gfx1036",
        "RDNA2 APU",
        "Raphael/Granite Ridge iGPU (2 CU)",
        Some(true),
        false,
        None,
    ),
    facts(
        "gfx1100",
        "RDNA3",
        "RX 7900 XTX/XT/GRE, Pro W7900/W7800",
        Some(false),
        false,
        None,
    ),
    facts(
        "gfx1101",
        "RDNA3",
        "RX 7800 XT/7700 XT, Pro W7700, V710",
        Some(false),
        false,
        None,
    ),
    facts(
        "gfx1102",
        "RDNA3",
        "RX 7600 (XT), Pro W7600",
        Some(false),
        false,
        None,
    ),
    facts(
        "gfx1103",
        "RDNA3 APU",
        "Radeon 780M/760M/740M",
        Some(true),
        false,
        None,
    ),
    facts(
        "gfx1150",
        "RDNA3.5",
        "Strix Point 890M/880M",
        Some(true),
        false,
        None,
    ),
    facts(
        "gfx1151",
        "RDNA3.5",
        "Strix Halo 8060S/8050S/8040S",
        Some(true),
        false,
        Some("7.2.0"),
    ),
    facts(
        "gfx1152",
        "RDNA3.5",
        "Krackan Point 860M",
        Some(true),
        false,
        None,
    ),
    facts("gfx1153", "RDNA3.5", "840M/820M", Some(true), false, None),
    facts(
        "gfx1200",
        "RDNA4",
        "RX 9060 / 9060 XT",
        Some(false),
        false,
        Some("6.4.0"),
    ),
    facts(
        "gfx1201",
        "RDNA4",
        "RX 9070 / 9070 XT / 9070 GRE, Radeon AI PRO R9700",
        Some(false),
        false,
        Some("6.4.0"),
    ),
];

/// The facts for an ISA name, when it is in the table.
pub fn arch_facts(isa: &str) -> Option<&'static ArchFacts> {
    let parsed = GfxIsa::parse(isa)?;
    let name = parsed.name();
    ARCH_TABLE.iter().find(|facts| facts.isa == name)
}

/// Whether an ISA is an Instinct (data-centre) part.
pub fn is_instinct(isa: &GfxIsa) -> bool {
    arch_facts(&isa.name()).is_some_and(|facts| facts.instinct)
}

/// Whether an ISA belongs to a consumer generation (RDNA: gfx10, gfx11, gfx12).
pub fn is_consumer_generation(isa: &GfxIsa) -> bool {
    matches!(isa.major, 10..=12)
}

/// Whether a code object built for `target` (an entry of `torch.cuda.get_arch_list()`,
/// possibly a generic target such as `gfx11-generic`) runs on `isa`.
pub fn target_covers(target: &str, isa: &GfxIsa) -> bool {
    let target = target
        .split(':')
        .next()
        .unwrap_or(target)
        .trim()
        .to_ascii_lowercase();
    if let Some(family) = target.strip_suffix("-generic") {
        // gfx11-generic, gfx10-3-generic, gfx9-4-generic: a prefix of (major, minor).
        let mut parts = family.trim_start_matches("gfx").split('-');
        let major = parts.next().and_then(|p| p.parse::<u32>().ok());
        let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
        return match (major, minor) {
            (Some(major), Some(minor)) => isa.major == major && isa.minor == minor,
            (Some(major), None) => isa.major == major,
            _ => false,
        };
    }
    GfxIsa::parse(&target).is_some_and(|t| t == *isa)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_targets_cover_their_family() {
        let gfx1151 = GfxIsa::parse("gfx1151").unwrap();
        assert!(target_covers("gfx11-generic", &gfx1151));
        assert!(!target_covers("gfx10-3-generic", &gfx1151));
        assert!(target_covers(
            "gfx10-3-generic",
            &GfxIsa::parse("gfx1031").unwrap()
        ));
        assert!(target_covers("gfx1151", &gfx1151));
        assert!(!target_covers("gfx1100", &gfx1151));
    }
}
