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
}
