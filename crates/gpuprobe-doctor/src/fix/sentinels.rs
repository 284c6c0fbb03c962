//! Sentinel probes: passing probes re-run in every trial, so that a setting which cures
//! one failure but breaks something else (a copy-engine switch that corrupts large
//! device-to-device copies) is caught and rejected.
//!
//! For every device and every probe family that ran there, a few sentinel *slots* are
//! filled from the tier's catalog, spread over the family's cases (the second part of
//! the id: `copy.h2d`, `copy.d2h`, `copy.d2d`, ...), preferring probes that passed in the
//! starting run and ran fast. Families with failures get more slots than the others. Each
//! slot lists its probe and up to two alternatives of the same case: probes that did not
//! run in the starting run may be chosen, and the baseline trial keeps, per slot, the first
//! one that passes (a pinned-memory probe skips on the CPU, a neighbour of a failure may
//! fail too).

use std::collections::{BTreeMap, BTreeSet};

use gpuprobe_model::ProbeRef;
use gpuprobe_model::{DeviceRef, ProbeSpec};
use gpuprobe_model::{ProbeResult, Verdict};

/// How many sentinels to choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SentinelQuota {
    /// Per family without failures.
    pub per_family: usize,
    /// Per family with failures (the neighbours of a failure are the likeliest to break).
    pub per_failing_family: usize,
}

impl Default for SentinelQuota {
    fn default() -> Self {
        SentinelQuota {
            per_family: 3,
            per_failing_family: 5,
        }
    }
}

/// The case of a probe id: its first two parts (`copy.d2d` of `copy.d2d.medium.clone`).
fn case_of(id: &str) -> String {
    id.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// Alternatives per slot besides its first choice.
const ALTERNATIVES: usize = 2;

/// Chooses sentinel slots, each a probe and its alternatives in order of preference.
/// `pool` is the tier's catalog; `applies` says whether a probe can run on a device;
/// `results` is the starting run; `targets` are the failures.
pub(super) fn choose(
    pool: &[ProbeSpec],
    applies: &dyn Fn(&ProbeSpec, DeviceRef) -> bool,
    results: &[ProbeResult],
    targets: &[ProbeRef],
    quota: SentinelQuota,
) -> Vec<Vec<ProbeRef>> {
    let mut devices: Vec<DeviceRef> = Vec::new();
    for result in results {
        if !devices.contains(&result.device) {
            devices.push(result.device);
        }
    }
    let target_set: BTreeSet<&ProbeRef> = targets.iter().collect();
    let mut chosen = Vec::new();
    for device in devices {
        let on_device: BTreeMap<&str, &ProbeResult> = results
            .iter()
            .filter(|r| r.device == device)
            .map(|r| (r.probe.as_str(), r))
            .collect();
        // Families that ran: at least one probe there reached a verdict.
        let mut families: Vec<&str> = Vec::new();
        for result in results.iter().filter(|r| r.device == device) {
            let ran = !matches!(
                result.verdict,
                Verdict::Skip { .. } | Verdict::NotTested { .. }
            );
            let family = result.probe.family();
            if ran && !families.contains(&family) {
                families.push(family);
            }
        }
        let failing: BTreeSet<&str> = targets
            .iter()
            .filter(|t| t.device == device)
            .map(|t| t.probe.family())
            .collect();
        for family in families {
            let quota = if failing.contains(family) {
                quota.per_failing_family
            } else {
                quota.per_family
            };
            // Eligible: in the family, applicable, not a target, and not known to fail or
            // skip. Ordered: passed in the starting run first, then faster, then catalog order.
            let mut eligible: Vec<(usize, &ProbeSpec)> = pool
                .iter()
                .enumerate()
                .filter(|(_, spec)| spec.id.family() == family && applies(spec, device))
                .filter(|(_, spec)| {
                    !target_set.contains(&ProbeRef {
                        probe: spec.id.clone(),
                        device,
                    })
                })
                .filter(|(_, spec)| {
                    on_device
                        .get(spec.id.as_str())
                        .is_none_or(|r| matches!(r.verdict, Verdict::Pass))
                })
                .collect();
            let key = |(index, spec): &(usize, &ProbeSpec)| {
                let result = on_device.get(spec.id.as_str());
                let known_good = result.is_some();
                let elapsed = result.and_then(|r| r.elapsed_s).unwrap_or(f64::MAX);
                (!known_good, spec.isolated, elapsed, *index)
            };
            eligible.sort_by(|a, b| {
                key(a)
                    .partial_cmp(&key(b))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            // Round-robin over cases in catalog order, so each case is represented
            // before any gets a second sentinel.
            let mut cases: Vec<String> = Vec::new();
            for (_, spec) in pool
                .iter()
                .enumerate()
                .filter(|(_, s)| s.id.family() == family)
            {
                let case = case_of(spec.id.as_str());
                if !cases.contains(&case) {
                    cases.push(case);
                }
            }
            let mut by_case: BTreeMap<String, Vec<&ProbeSpec>> = BTreeMap::new();
            for (_, spec) in &eligible {
                by_case
                    .entry(case_of(spec.id.as_str()))
                    .or_default()
                    .push(spec);
            }
            // Slots round-robin over cases; a slot takes its case's next probes as
            // alternatives, so no probe is in two slots.
            let mut next: BTreeMap<&String, usize> = BTreeMap::new();
            let mut slots = 0;
            loop {
                let mut any = false;
                for case in &cases {
                    if slots >= quota {
                        break;
                    }
                    let Some(list) = by_case.get(case) else {
                        continue;
                    };
                    let start = next.entry(case).or_insert(0);
                    if *start >= list.len() {
                        continue;
                    }
                    let end = (*start + 1 + ALTERNATIVES).min(list.len());
                    chosen.push(
                        list[*start..end]
                            .iter()
                            .map(|spec| ProbeRef {
                                probe: spec.id.clone(),
                                device,
                            })
                            .collect(),
                    );
                    *start = end;
                    slots += 1;
                    any = true;
                }
                if !any || slots >= quota {
                    break;
                }
            }
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::FailClass;
    use gpuprobe_model::{Layer, ProbeId};

    use crate::test_support::spec;

    fn result(id: &str, verdict: Verdict, elapsed: f64) -> ProbeResult {
        ProbeResult {
            elapsed_s: Some(elapsed),
            ..ProbeResult::new(ProbeId::new(id), DeviceRef::Cpu, Layer::Framework, verdict)
        }
    }

    fn fail() -> Verdict {
        Verdict::Fail {
            class: FailClass::AllZeros,
            detail: String::new(),
        }
    }

    #[test]
    fn spreads_over_cases_and_families() {
        let pool: Vec<ProbeSpec> = [
            "copy.h2d.pageable.tiny",
            "copy.h2d.pageable.medium",
            "copy.h2d.pageable.slow",
            "copy.d2h.pageable.medium",
            "copy.d2d.medium.clone",
            "copy.d2d.medium.copy_",
            "copy.roundtrip.pageable",
            "rng.randn.fp32",
            "rng.rand.fp32",
            "rng.randint.int64",
            "rng.randperm.2p20",
            "dtype.fp32.fp16.to.device",
        ]
        .iter()
        .map(|id| spec(id))
        .collect();
        let results = vec![
            result("copy.h2d.pageable.tiny", fail(), 0.1),
            result("copy.h2d.pageable.medium", Verdict::Pass, 0.2),
            result("copy.h2d.pageable.slow", Verdict::Pass, 5.0),
            result("copy.d2h.pageable.medium", Verdict::Pass, 0.2),
            result("rng.randn.fp32", Verdict::Pass, 0.1),
            result("rng.rand.fp32", Verdict::Pass, 0.1),
            result("rng.randint.int64", Verdict::Pass, 0.1),
            result("rng.randperm.2p20", Verdict::Pass, 0.1),
        ];
        let targets = vec![ProbeRef {
            probe: ProbeId::new("copy.h2d.pageable.tiny"),
            device: DeviceRef::Cpu,
        }];
        let chosen = choose(
            &pool,
            &|_, _| true,
            &results,
            &targets,
            SentinelQuota::default(),
        );
        let ids: Vec<&str> = chosen.iter().map(|slot| slot[0].probe.as_str()).collect();
        // Every copy case is represented (d2d was not run, but is eligible), the fast h2d
        // probe is preferred over the slow one, the target is never a sentinel.
        for wanted in [
            "copy.h2d.pageable.medium",
            "copy.d2h.pageable.medium",
            "copy.d2d.medium.clone",
            "copy.roundtrip.pageable",
        ] {
            assert!(ids.contains(&wanted), "{wanted} in {ids:?}");
        }
        assert!(!ids.contains(&"copy.h2d.pageable.tiny"));
        // Four cases, and every eligible copy probe is in some slot (none twice).
        assert_eq!(ids.iter().filter(|i| i.starts_with("copy.")).count(), 4);
        let all: Vec<&str> = chosen.iter().flatten().map(|r| r.probe.as_str()).collect();
        assert_eq!(all.iter().filter(|i| i.starts_with("copy.")).count(), 6);
        // The h2d slot keeps the slow probe as its alternative; d2d's second probe is the
        // d2d slot's alternative, not a slot of its own.
        let h2d = chosen
            .iter()
            .find(|slot| slot[0].probe.as_str() == "copy.h2d.pageable.medium")
            .unwrap();
        assert_eq!(h2d[1].probe.as_str(), "copy.h2d.pageable.slow");
        let d2d = chosen
            .iter()
            .find(|slot| slot[0].probe.as_str() == "copy.d2d.medium.clone")
            .unwrap();
        assert_eq!(d2d.len(), 2);
        // rng ran without failures: three sentinels; dtype did not run: none.
        assert_eq!(ids.iter().filter(|i| i.starts_with("rng.")).count(), 3);
        assert!(!ids.iter().any(|i| i.starts_with("dtype.")));
    }

    #[test]
    fn failing_and_skipped_probes_are_not_sentinels() {
        let pool = vec![spec("copy.h2d.a"), spec("copy.h2d.b"), spec("copy.d2h.c")];
        let results = vec![
            result("copy.h2d.a", fail(), 0.1),
            result(
                "copy.h2d.b",
                Verdict::Skip {
                    reason: "no".into(),
                },
                0.0,
            ),
            result("copy.d2h.c", Verdict::Pass, 0.1),
        ];
        let chosen = choose(&pool, &|_, _| true, &results, &[], SentinelQuota::default());
        let ids: Vec<&str> = chosen.iter().flatten().map(|r| r.probe.as_str()).collect();
        assert_eq!(ids, vec!["copy.d2h.c"]);
    }
}
