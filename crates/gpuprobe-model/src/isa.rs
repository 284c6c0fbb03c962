//! AMD GPU ISA identity: the name (`gfx1151`), the KFD `gfx_target_version` number and the
//! `HSA_OVERRIDE_GFX_VERSION` value, which all encode one (major, minor, stepping) triple.
//!
//! An ISA name is `gfx` + major (decimal) + minor (one hex digit) + stepping (one hex digit):
//! `gfx1151` is 11.5.1, `gfx90a` is 9.0.10, `gfx942` is 9.4.2. KFD topology writes the triple
//! as `major * 10000 + minor * 100 + stepping`; the override variable holds it in decimal
//! (`11.5.1`, `9.0.10`), and libhsakmt then reports that ISA instead of the real one. The
//! fingerprint readers and the lint both decode through this one module, so they cannot
//! disagree about what a value means.

use std::fmt;

use thiserror::Error;

/// A gfx ISA as a (major, minor, stepping) triple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GfxIsa {
    /// Major version (11 for gfx1151).
    pub major: u32,
    /// Minor version, 0–15 (5 for gfx1151).
    pub minor: u32,
    /// Stepping, 0–15 (1 for gfx1151, 10 for gfx90a).
    pub stepping: u32,
}

impl GfxIsa {
    /// Parses `gfx1151`, `gfx90a`, `amdgcn-amd-amdhsa--gfx1151` or `gfx90a:sramecc+:xnack-`
    /// (target features are ignored). Generic targets (`gfx11-generic`) give `None`.
    pub fn parse(name: &str) -> Option<GfxIsa> {
        let name = name.trim();
        let name = name.rsplit("--").next().unwrap_or(name);
        let name = name.split(':').next().unwrap_or(name).to_ascii_lowercase();
        let digits = name.strip_prefix("gfx")?;
        if digits.len() < 3 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let (major, tail) = digits.split_at(digits.len() - 2);
        let major: u32 = major.parse().ok()?;
        let mut tail = tail.chars();
        let minor = tail.next()?.to_digit(16)?;
        let stepping = tail.next()?.to_digit(16)?;
        Some(GfxIsa {
            major,
            minor,
            stepping,
        })
    }

    /// Decodes a KFD `gfx_target_version` (`major * 10000 + minor * 100 + stepping`):
    /// 110501 → gfx1151, 90402 → gfx942, 90010 → gfx90a. `None` for 0 (a CPU node) and for
    /// values whose minor or stepping does not fit one hex digit.
    pub fn from_target_version(version: u64) -> Option<GfxIsa> {
        let major = u32::try_from(version / 10000).ok()?;
        let minor = u32::try_from((version / 100) % 100).ok()?;
        let stepping = u32::try_from(version % 100).ok()?;
        if major == 0 || minor > 15 || stepping > 15 {
            return None;
        }
        Some(GfxIsa {
            major,
            minor,
            stepping,
        })
    }

    /// The ISA name (`gfx1151`, `gfx90a`).
    pub fn name(&self) -> String {
        format!("gfx{}{:x}{:x}", self.major, self.minor, self.stepping)
    }

    /// The override value that names this ISA (`11.5.1`, `9.0.10`).
    pub fn override_value(&self) -> String {
        format!("{}.{}.{}", self.major, self.minor, self.stepping)
    }

    /// Same major and minor: the ISA-compatible siblings an override may legitimately map
    /// between (gfx1031 → gfx1030, gfx1152 → gfx1150).
    pub fn is_sibling_of(&self, other: &GfxIsa) -> bool {
        self.major == other.major && self.minor == other.minor
    }
}

impl fmt::Display for GfxIsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Why an override value cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OverrideError {
    /// Not three dot-separated decimal numbers.
    #[error("{0:?} is not of the form major.minor.stepping (e.g. 10.3.0)")]
    NotATriple(String),
    /// Minor or stepping above 15 cannot name an ISA.
    #[error("{0:?} has a minor or stepping above 15, which names no gfx ISA")]
    OutOfRange(String),
}

/// Decodes an `HSA_OVERRIDE_GFX_VERSION` value (`11.0.0` → gfx1100, `9.0.10` → gfx90a).
pub fn decode_override(value: &str) -> Result<GfxIsa, OverrideError> {
    let value = value.trim();
    let parts: Vec<&str> = value.split('.').collect();
    let numbers: Vec<u32> = parts
        .iter()
        .filter_map(|part| {
            (!part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
                .then(|| part.parse().ok())
                .flatten()
        })
        .collect();
    if parts.len() != 3 || numbers.len() != 3 {
        return Err(OverrideError::NotATriple(value.to_string()));
    }
    if numbers[1] > 15 || numbers[2] > 15 {
        return Err(OverrideError::OutOfRange(value.to_string()));
    }
    Ok(GfxIsa {
        major: numbers[0],
        minor: numbers[1],
        stepping: numbers[2],
    })
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

/// What is known about one ISA (`docs/fingerprint.md`, "Decoders worth knowing"): the one
/// table the fingerprint (names, APU status) and the lint and matcher (Instinct, minimum
/// ROCm) read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GfxFacts {
    /// ISA name (`gfx1151`).
    pub isa: &'static str,
    /// Family (`RDNA3.5`, `CDNA3`).
    pub family: &'static str,
    /// Products using it.
    pub products: &'static str,
    /// APU status.
    pub integration: Integration,
    /// An Instinct (data-centre) part.
    pub instinct: bool,
    /// Lowest ROCm release that supports it on Linux, where the research gives one.
    pub min_rocm: Option<&'static str>,
    /// Official ROCm support on Linux, in words.
    pub rocm_support: &'static str,
}

impl GfxFacts {
    /// Whether the ISA is an APU; `None` where it depends on the part (gfx942).
    pub fn apu(&self) -> Option<bool> {
        match self.integration {
            Integration::Discrete => Some(false),
            Integration::Integrated => Some(true),
            Integration::Depends => None,
        }
    }
}

impl fmt::Display for GfxFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}: {})", self.isa, self.family, self.products)
    }
}

use Integration::{Depends, Discrete, Integrated};

/// The ISA table, read through [`gfx_facts`].
pub(crate) const GFX_TABLE: &[GfxFacts] = &[
    GfxFacts {
        isa: "gfx900",
        family: "GCN5",
        products: "Vega 56/64, MI25",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "dropped",
    },
    GfxFacts {
        isa: "gfx902",
        family: "GCN5 APU",
        products: "Raven Ridge Vega iGPU",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "never official",
    },
    GfxFacts {
        isa: "gfx909",
        family: "GCN5 APU",
        products: "Picasso Vega iGPU",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "never official",
    },
    GfxFacts {
        isa: "gfx90c",
        family: "GCN5 APU",
        products: "Renoir/Cezanne Vega iGPU (e.g. Ryzen 5700G)",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "never official",
    },
    GfxFacts {
        isa: "gfx906",
        family: "GCN5",
        products: "MI50/MI60, Radeon VII, Radeon Pro VII",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "deprecated, then removed in ROCm 6.x",
    },
    GfxFacts {
        isa: "gfx908",
        family: "CDNA1",
        products: "Instinct MI100",
        integration: Discrete,
        instinct: true,
        min_rocm: None,
        rocm_support: "official (Instinct)",
    },
    GfxFacts {
        isa: "gfx90a",
        family: "CDNA2",
        products: "Instinct MI210, MI250, MI250X",
        integration: Discrete,
        instinct: true,
        min_rocm: None,
        rocm_support: "official",
    },
    GfxFacts {
        isa: "gfx940",
        family: "CDNA3",
        products: "pre-production MI300",
        integration: Discrete,
        instinct: true,
        min_rocm: None,
        rocm_support: "removed in ROCm 7.0",
    },
    GfxFacts {
        isa: "gfx941",
        family: "CDNA3",
        products: "pre-production MI300",
        integration: Discrete,
        instinct: true,
        min_rocm: None,
        rocm_support: "removed in ROCm 7.0",
    },
    GfxFacts {
        isa: "gfx942",
        family: "CDNA3",
        products: "MI300X, MI325X (discrete); MI300A (APU)",
        integration: Depends,
        instinct: true,
        min_rocm: None,
        rocm_support: "official",
    },
    GfxFacts {
        isa: "gfx950",
        family: "CDNA4",
        products: "MI350X, MI355X",
        integration: Discrete,
        instinct: true,
        min_rocm: Some("7.0.0"),
        rocm_support: "ROCm 7.0+",
    },
    GfxFacts {
        isa: "gfx1010",
        family: "RDNA1",
        products: "RX 5700/5700 XT/5600 XT, Pro W5700 (Navi10)",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "never official",
    },
    GfxFacts {
        isa: "gfx1011",
        family: "RDNA1",
        products: "Navi12: Pro 5600M, V520",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "never official",
    },
    GfxFacts {
        isa: "gfx1012",
        family: "RDNA1",
        products: "RX 5500/5300 (Navi14)",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "never official",
    },
    GfxFacts {
        isa: "gfx1013",
        family: "RDNA1",
        products: "Cyan Skillfish (BC-250, shared GDDR6)",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "unofficial",
    },
    GfxFacts {
        isa: "gfx1030",
        family: "RDNA2",
        products: "Navi21: RX 6800/6800 XT/6900 XT/6950 XT, Pro W6800, V620",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "official for W6800 and V620 only",
    },
    GfxFacts {
        isa: "gfx1031",
        family: "RDNA2",
        products: "Navi22: RX 6700 XT/6750 XT, 6800M",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "unofficial (override 10.3.0)",
    },
    GfxFacts {
        isa: "gfx1032",
        family: "RDNA2",
        products: "Navi23: RX 6600/6600 XT/6650 XT",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "unofficial (override 10.3.0)",
    },
    GfxFacts {
        isa: "gfx1033",
        family: "RDNA2 APU",
        products: "Van Gogh (Steam Deck)",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "unofficial",
    },
    GfxFacts {
        isa: "gfx1034",
        family: "RDNA2",
        products: "Navi24: RX 6500 XT/6400",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "unofficial (override 10.3.0)",
    },
    GfxFacts {
        isa: "gfx1035",
        family: "RDNA2 APU",
        products: "Rembrandt: Radeon 680M/660M",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "unofficial",
    },
    GfxFacts {
        isa: "gfx1036",
        family: "RDNA2 APU",
        products: "Raphael/Granite Ridge desktop iGPU (2 CU)",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "unofficial",
    },
    GfxFacts {
        isa: "gfx1100",
        family: "RDNA3",
        products: "Navi31: RX 7900 XTX/XT/GRE, Pro W7900/W7800",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "official since ROCm 5.7",
    },
    GfxFacts {
        isa: "gfx1101",
        family: "RDNA3",
        products: "Navi32: RX 7800 XT/7700 XT/7700, Pro W7700, V710",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "official",
    },
    GfxFacts {
        isa: "gfx1102",
        family: "RDNA3",
        products: "Navi33: RX 7600 (XT), Pro W7600",
        integration: Discrete,
        instinct: false,
        min_rocm: None,
        rocm_support: "official",
    },
    GfxFacts {
        isa: "gfx1103",
        family: "RDNA3 APU",
        products: "Phoenix/Hawk Point: Radeon 780M/760M/740M",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "listed under Ryzen (inbox driver)",
    },
    GfxFacts {
        isa: "gfx1150",
        family: "RDNA3.5",
        products: "Strix Point: Radeon 890M/880M",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "listed (Ryzen matrix, inbox driver)",
    },
    GfxFacts {
        isa: "gfx1151",
        family: "RDNA3.5",
        products: "Strix Halo: Radeon 8060S/8050S/8040S, 8065S",
        integration: Integrated,
        instinct: false,
        min_rocm: Some("7.2.0"),
        rocm_support: "ROCm 7.2.0+ on kernels with the KFD fixes",
    },
    GfxFacts {
        isa: "gfx1152",
        family: "RDNA3.5",
        products: "Krackan Point: Radeon 860M",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "around ROCm 7.13",
    },
    GfxFacts {
        isa: "gfx1153",
        family: "RDNA3.5",
        products: "Radeon 840M/820M",
        integration: Integrated,
        instinct: false,
        min_rocm: None,
        rocm_support: "around ROCm 7.13",
    },
    GfxFacts {
        isa: "gfx1200",
        family: "RDNA4",
        products: "Navi44: RX 9060 / 9060 XT",
        integration: Discrete,
        instinct: false,
        min_rocm: Some("6.4.0"),
        rocm_support: "official (ROCm 6.4.x+)",
    },
    GfxFacts {
        isa: "gfx1201",
        family: "RDNA4",
        products: "Navi48: RX 9070 / 9070 XT / 9070 GRE, Radeon AI PRO R9700",
        integration: Discrete,
        instinct: false,
        min_rocm: Some("6.4.0"),
        rocm_support: "official (ROCm 6.4.x+)",
    },
    GfxFacts {
        isa: "gfx1250",
        family: "next Instinct",
        products: "preview",
        integration: Discrete,
        instinct: true,
        min_rocm: None,
        rocm_support: "preview",
    },
];

/// The facts for an ISA (`gfx90a`, `gfx90a:xnack-`, `amdgcn-amd-amdhsa--gfx1151`), when it is
/// in the table.
pub fn gfx_facts(isa: &str) -> Option<&'static GfxFacts> {
    let name = GfxIsa::parse(isa)?.name();
    GFX_TABLE.iter().find(|facts| facts.isa == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in [
            "gfx1151", "gfx90a", "gfx942", "gfx906", "gfx1030", "gfx1201", "gfx90c",
        ] {
            assert_eq!(GfxIsa::parse(name).unwrap().name(), name);
        }
        assert_eq!(
            GfxIsa::parse("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-")
                .unwrap()
                .name(),
            "gfx90a"
        );
        assert_eq!(GfxIsa::parse("gfx11-generic"), None);
        assert_eq!(GfxIsa::parse("sm_90"), None);
    }

    #[test]
    fn target_versions_decode_with_hex_digits() {
        let name = |v| GfxIsa::from_target_version(v).map(|isa| isa.name());
        assert_eq!(name(110501).as_deref(), Some("gfx1151"));
        assert_eq!(name(90402).as_deref(), Some("gfx942"));
        assert_eq!(name(90010).as_deref(), Some("gfx90a"));
        assert_eq!(name(90012).as_deref(), Some("gfx90c"));
        assert_eq!(name(100300).as_deref(), Some("gfx1030"));
        assert_eq!(name(0), None);
        assert_eq!(name(91700), None);
        assert_eq!(name(u64::MAX), None);
    }

    #[test]
    fn overrides_decode_with_hex_digits() {
        assert_eq!(decode_override("9.0.10").unwrap().name(), "gfx90a");
        assert_eq!(decode_override("10.3.0").unwrap().name(), "gfx1030");
        assert_eq!(decode_override(" 11.5.1 ").unwrap().name(), "gfx1151");
        assert_eq!(decode_override("12.0.1").unwrap().name(), "gfx1201");
        assert_eq!(decode_override("9.0.6").unwrap().name(), "gfx906");
        assert_eq!(
            decode_override("11.5.1").unwrap().override_value(),
            "11.5.1"
        );
        for bad in ["11.0", "gfx1100", "+11.0.0", "11.0.0.0", "11..0", ""] {
            assert!(
                matches!(decode_override(bad), Err(OverrideError::NotATriple(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            decode_override("9.0.16"),
            Err(OverrideError::OutOfRange(_))
        ));
    }

    #[test]
    fn the_table_names_every_isa_once_and_parses_back() {
        let mut seen = std::collections::BTreeSet::new();
        for facts in GFX_TABLE {
            assert!(seen.insert(facts.isa), "{} twice", facts.isa);
            assert_eq!(GfxIsa::parse(facts.isa).unwrap().name(), facts.isa);
        }
    }

    #[test]
    fn lookups_ignore_features_and_triples() {
        assert_eq!(gfx_facts("gfx90a:sramecc+:xnack-").unwrap().family, "CDNA2");
        assert_eq!(
            gfx_facts("amdgcn-amd-amdhsa--gfx1151").unwrap().apu(),
            Some(true)
        );
        assert_eq!(gfx_facts("gfx942").unwrap().apu(), None);
        assert_eq!(gfx_facts("gfx1100").unwrap().apu(), Some(false));
        assert!(gfx_facts("gfx942").unwrap().instinct);
        assert!(!gfx_facts("gfx1201").unwrap().instinct);
        assert_eq!(gfx_facts("gfx1151").unwrap().min_rocm, Some("7.2.0"));
        assert_eq!(gfx_facts("gfx1999"), None);
        assert_eq!(gfx_facts("sm_90"), None);
    }
}
