//! What a run will do: which probes a tier and `--only` select, and how the selected
//! probes are grouped into lanes and sized to the host ([`lanes`]).
//!
//! A [`Lane`] is the unit the engine (`crate::exec`) runs: probes of one worker kind on one
//! device, run in order by one worker at a time.

mod lanes;

use gpuprobe_model::{
    Backend, DeviceRef, Placement, ProbeId, ProbeResult, ProbeSpec, RunPlan, Tier,
};
use gpuprobe_runner::Task;

pub use lanes::{LaneBudget, estimated_seconds, lanes_for, sized_lanes};

/// Probes of one worker kind on one device, run in order.
#[derive(Debug, Clone)]
pub struct Lane {
    /// Python or native.
    pub backend: Backend,
    /// The device.
    pub device: DeviceRef,
    /// How the lane shares its device: shared and side lanes run side by side; exclusive
    /// lanes run one at a time, once nothing else runs on their device.
    pub placement: Placement,
    /// The probes.
    pub tasks: Vec<Task>,
}

/// The `needs` marker of probes that run only when `--only` names them: deliberate faults
/// (an illegal memory access, a kernel that never ends) that prove the isolation, and that
/// must never run as part of a tier.
pub(crate) const EXPLICIT_ONLY: &str = "explicit";

/// Probe selection from a catalog: by tier and by `--only` patterns (globs over probe
/// ids, `*` matching any run of characters). A pattern without `*` that is the full id of a
/// cataloged probe names that probe alone (so `check --only <id>` re-runs exactly it; add
/// `.*` for the variants below it); any other pattern without `*` matches ids that start
/// with it followed by a dot (`copy`, `copy.h2d`). Probes marked `EXPLICIT_ONLY` are
/// selected only by an `--only` pattern, whatever the tier.
pub fn select(catalog: &[ProbeSpec], tier: Tier, only: &[String]) -> Vec<ProbeSpec> {
    let is_probe_id = |pattern: &str| catalog.iter().any(|spec| spec.id.as_str() == pattern);
    let patterns: Vec<(&str, bool)> = only
        .iter()
        .map(|pattern| (pattern.as_str(), is_probe_id(pattern)))
        .collect();
    let named = |spec: &ProbeSpec| {
        let id = spec.id.as_str();
        patterns.iter().any(|(pattern, exact)| {
            if *exact {
                id == *pattern
            } else {
                id_matches(pattern, id)
            }
        })
    };
    catalog
        .iter()
        .filter(|spec| {
            if spec.needs.iter().any(|n| n == EXPLICIT_ONLY) {
                named(spec)
            } else {
                tier.includes(spec.tier) && (only.is_empty() || named(spec))
            }
        })
        .cloned()
        .collect()
}

/// The `--only` patterns that select nothing in `tier`, each with the first tier (in the
/// order standard, full, soak) where it would select something, or `None` when no probe of
/// the catalog matches it at all.
pub(crate) fn unmatched_patterns(
    catalog: &[ProbeSpec],
    tier: Tier,
    only: &[String],
) -> Vec<(String, Option<Tier>)> {
    only.iter()
        .filter(|pattern| select(catalog, tier, std::slice::from_ref(pattern)).is_empty())
        .map(|pattern| {
            let elsewhere = [Tier::Standard, Tier::Full, Tier::Soak]
                .into_iter()
                .find(|other| !select(catalog, *other, std::slice::from_ref(pattern)).is_empty());
            (pattern.clone(), elsewhere)
        })
        .collect()
}

/// Whether a probe id matches a selection pattern: a pattern with `*` is a glob
/// ([`gpuprobe_kb::wildcard_matches`], where `?` is one character too); any other
/// (a `?` alone included) names an id or a prefix ending at a dot.
pub(crate) fn id_matches(pattern: &str, id: &str) -> bool {
    if pattern.contains('*') {
        gpuprobe_kb::wildcard_matches(pattern, id)
    } else {
        id == pattern
            || id
                .strip_prefix(pattern)
                .is_some_and(|rest| pattern.ends_with('.') || rest.starts_with('.'))
    }
}

/// The plan's tasks not yet in `done`, grouped into lanes and cut to `budget`
/// ([`sized_lanes`]).
pub(crate) fn remaining_lanes(
    plan: &RunPlan,
    done: &[ProbeResult],
    budget: LaneBudget,
) -> Vec<Lane> {
    let finished: std::collections::HashSet<(ProbeId, DeviceRef)> =
        done.iter().map(|r| (r.probe.clone(), r.device)).collect();
    let tasks: Vec<Task> = plan
        .tasks
        .iter()
        .filter(|t| !finished.contains(&(t.spec.id.clone(), t.device)))
        .cloned()
        .collect();
    sized_lanes(tasks, budget)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::spec;

    #[test]
    fn deliberate_faults_run_only_when_named() {
        let spec = |id: &str, tier: Tier, needs: &[&str]| ProbeSpec {
            tier,
            needs: needs.iter().map(|s| s.to_string()).collect(),
            ..spec(id)
        };
        let catalog = vec![
            spec("copy.a", Tier::Quick, &[]),
            spec("fault.spin", Tier::Quick, &[EXPLICIT_ONLY]),
        ];
        let ids =
            |selected: Vec<ProbeSpec>| selected.into_iter().map(|s| s.id.0).collect::<Vec<_>>();
        assert_eq!(ids(select(&catalog, Tier::Full, &[])), ["copy.a"]);
        assert_eq!(
            ids(select(&catalog, Tier::Quick, &["fault".into()])),
            ["fault.spin"]
        );
        assert_eq!(
            ids(select(&catalog, Tier::Quick, &["*".into()])),
            ["copy.a", "fault.spin"]
        );
    }

    #[test]
    fn patterns_that_select_nothing_say_where_their_probes_are() {
        let spec = |id: &str, tier: Tier| ProbeSpec {
            tier,
            backend: Backend::Native,
            ..spec(id)
        };
        let catalog = vec![
            spec("native.copy.small", Tier::Quick),
            spec("native.copy.huge", Tier::Full),
            spec("native.memtest.full", Tier::Soak),
        ];
        let only: Vec<String> = [
            "native.copy",
            "native.memtest.full",
            "native.copy.huge",
            "nope",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            unmatched_patterns(&catalog, Tier::Quick, &only),
            [
                ("native.memtest.full".to_string(), Some(Tier::Soak)),
                ("native.copy.huge".to_string(), Some(Tier::Full)),
                ("nope".to_string(), None),
            ]
        );
        assert_eq!(
            unmatched_patterns(&catalog, Tier::Full, &only),
            [
                ("native.memtest.full".to_string(), Some(Tier::Soak)),
                ("nope".to_string(), None),
            ]
        );
    }

    #[test]
    fn a_full_probe_id_names_that_probe_alone() {
        let catalog = vec![
            spec("copy.h2d.medium"),
            spec("copy.h2d.medium.fp16"),
            spec("copy.h2d.small.fp16"),
        ];
        let ids = |only: &[&str]| {
            let only: Vec<String> = only.iter().map(|s| s.to_string()).collect();
            select(&catalog, Tier::Quick, &only)
                .into_iter()
                .map(|s| s.id.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&["copy.h2d.medium"]), ["copy.h2d.medium"]);
        assert_eq!(
            ids(&["copy.h2d.medium.*"]),
            ["copy.h2d.medium.fp16"],
            "variants by glob"
        );
        assert_eq!(
            ids(&["copy.h2d"]),
            [
                "copy.h2d.medium",
                "copy.h2d.medium.fp16",
                "copy.h2d.small.fp16"
            ],
            "a prefix that is no probe id still selects everything below it"
        );
        assert_eq!(ids(&["copy.h2d.small"]), ["copy.h2d.small.fp16"]);
    }

    #[test]
    fn selection_patterns() {
        assert!(id_matches("copy", "copy.h2d.pinned"));
        assert!(!id_matches("copy", "copying.x"));
        assert!(id_matches("rng.rand.", "rng.rand.fp32"));
        assert!(!id_matches("rng.rand.", "rng.randn.fp32"));
        assert!(id_matches("copy.*.pinned*", "copy.h2d.pinned.tiny"));
        assert!(id_matches("*bf16*", "dtype.bf16.fp32.to.device"));
        assert!(!id_matches("rng.*", "copy.h2d"));
        // `?` is a wildcard only in a pattern with `*`.
        assert!(id_matches("dist.p2p.?-?*", "dist.p2p.0-1"));
        assert!(!id_matches("dist.p2p.?-?", "dist.p2p.0-1"));
        assert!(id_matches(
            "dtype.bf16.fp32.to.device",
            "dtype.bf16.fp32.to.device"
        ));
    }
}
