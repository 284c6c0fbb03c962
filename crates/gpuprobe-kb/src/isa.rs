//! ISA questions the lint and the matcher ask (is it Instinct, a consumer generation, does a
//! build target cover it). Names, `HSA_OVERRIDE_GFX_VERSION` values and the per-ISA facts
//! (family, APU, Instinct, minimum ROCm) live in the model ([`gpuprobe_model::gfx_facts`]),
//! re-exported here; an override makes libhsakmt report another ISA than the real one
//! (`kb/RKB-010-arch-override-wrong.toml`).

pub(crate) use gpuprobe_model::{GfxIsa, OverrideError, decode_override, gfx_facts};

/// Whether an ISA is an Instinct (data-centre) part.
pub(crate) fn is_instinct(isa: &GfxIsa) -> bool {
    gfx_facts(&isa.name()).is_some_and(|facts| facts.instinct)
}

/// Whether an ISA belongs to a consumer generation (RDNA: gfx10, gfx11, gfx12).
pub(crate) fn is_consumer_generation(isa: &GfxIsa) -> bool {
    matches!(isa.major, 10..=12)
}

/// Whether a code object built for `target` (an entry of `torch.cuda.get_arch_list()`,
/// possibly a generic target such as `gfx11-generic`) runs on `isa`.
pub(crate) fn target_covers(target: &str, isa: &GfxIsa) -> bool {
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
