//! Spreading the stack's probes over identical GPUs (`--device all`).
//!
//! The sweep and width families test the software stack (operator × dtype × call variant,
//! numeric widths): the same framework and libraries answer them on every GPU of one model,
//! so on a node with several identical GPUs each of their probes runs on ONE of them, while
//! every GPU still runs all its other probes (memory, GEMM, native, copies: what tests the
//! hardware). GPUs are identical when torch reports the same name, total memory and arch;
//! a GPU unlike every other runs everything.
//!
//! This needs the GPUs before the plan is made: the full tier's catalog listing imports
//! the framework anyway and lists them ([`gpuprobe_runner::ListedCatalog::devices`]). The
//! assignment is recorded in the plan (its tasks, and [`SpreadPlan`]), so a resume runs what
//! is left where it was planned and a re-plan keeps it; the GPUs are then all planned up
//! front and none is added when GPU 0's worker says hello.

use std::collections::BTreeMap;

use gpuprobe_model::TorchDevice;
use gpuprobe_model::{DeviceRef, ProbeId, ProbeSpec};

use super::options::tasks_on;
use gpuprobe_model::Task;

/// The families whose probes test the software stack rather than the GPU they run on:
/// one run on one of several identical GPUs says what a run on each would.
pub(super) const SPREAD_FAMILIES: &[&str] = &["sweep", "width"];

/// Whether a probe runs on one GPU of an identical group rather than on each: decided by
/// its family (the id's first part, as the catalog names families).
pub(super) fn spreadable(spec: &ProbeSpec) -> bool {
    SPREAD_FAMILIES.contains(&spec.id.family())
}

pub(super) use gpuprobe_model::{SpreadGroup, SpreadPlan};

/// What makes two GPUs identical: name, total memory and arch, all known.
fn identity(device: &TorchDevice) -> Option<(&str, u64, &str)> {
    let name = device.name.trim();
    if name.is_empty() {
        return None;
    }
    Some((name, device.total_memory?, device.arch.as_deref()?))
}

/// The spread for the GPUs a catalog listing found, or `None` when no two of them are
/// identical (the run then plans as without a list: GPU 0, then the others at its hello).
pub(super) fn plan_for(devices: &[TorchDevice]) -> Option<SpreadPlan> {
    let mut gpus: Vec<u32> = devices.iter().map(|d| d.index).collect();
    gpus.sort_unstable();
    gpus.dedup();
    if gpus.len() != devices.len() {
        // The same index twice: not a list to plan by.
        return None;
    }
    let mut by_identity: BTreeMap<(&str, u64, &str), Vec<u32>> = BTreeMap::new();
    for device in devices {
        if let Some(key) = identity(device) {
            by_identity.entry(key).or_default().push(device.index);
        }
    }
    let mut groups: Vec<SpreadGroup> = by_identity
        .into_iter()
        .filter(|(_, members)| members.len() >= 2)
        .map(|((name, _, _), mut members)| {
            members.sort_unstable();
            SpreadGroup {
                gpus: members,
                name: name.to_string(),
            }
        })
        .collect();
    if groups.is_empty() {
        return None;
    }
    groups.sort_by_key(|g| g.gpus[0]);
    Some(SpreadPlan { gpus, groups })
}

/// The plan's tasks: each selected probe on every GPU of `spread`, except that a spreadable
/// probe runs on one GPU of each identical group. `earlier` (a re-planned run's tasks)
/// keeps a probe on the GPU it was planned on there; the others go, longest first, to the
/// group's least loaded GPU by their estimated seconds (ties: the lowest index), so the
/// same catalog always gives the same assignment.
pub(super) fn tasks(selected: &[ProbeSpec], spread: &SpreadPlan, earlier: &[Task]) -> Vec<Task> {
    let assigned: Vec<BTreeMap<&ProbeId, u32>> = spread
        .groups
        .iter()
        .map(|group| assign(selected, group, earlier))
        .collect();
    let kept = |task: &Task| -> bool {
        let DeviceRef::Gpu(gpu) = task.device else {
            return true;
        };
        if !spreadable(&task.spec) {
            return true;
        }
        match spread.groups.iter().position(|g| g.gpus.contains(&gpu)) {
            Some(group) => assigned[group].get(&task.spec.id) == Some(&gpu),
            None => true,
        }
    };
    let mut tasks = tasks_on(&spread.devices(), selected);
    tasks.retain(kept);
    tasks
}

/// Which GPU of `group` runs each spreadable probe of `selected` (greedy, longest first).
fn assign<'a>(
    selected: &'a [ProbeSpec],
    group: &SpreadGroup,
    earlier: &[Task],
) -> BTreeMap<&'a ProbeId, u32> {
    let mut load: BTreeMap<u32, f64> = group.gpus.iter().map(|g| (*g, 0.0)).collect();
    let mut assigned: BTreeMap<&ProbeId, u32> = BTreeMap::new();
    let mut left: Vec<(&ProbeSpec, f64)> = Vec::new();
    for spec in selected.iter().filter(|s| spreadable(s)) {
        if assigned.contains_key(&spec.id) {
            continue;
        }
        let seconds = crate::plan::estimated_seconds(spec, false);
        let kept = earlier.iter().find_map(|task| match task.device {
            DeviceRef::Gpu(gpu) if task.spec.id == spec.id && group.gpus.contains(&gpu) => {
                Some(gpu)
            }
            _ => None,
        });
        match kept {
            Some(gpu) => {
                assigned.insert(&spec.id, gpu);
                *load.entry(gpu).or_default() += seconds;
            }
            None => left.push((spec, seconds)),
        }
    }
    left.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.id.cmp(&b.0.id)));
    for (spec, seconds) in left {
        let (&gpu, _) = load
            .iter()
            .min_by(|a, b| a.1.total_cmp(b.1).then_with(|| a.0.cmp(b.0)))
            .expect("a group has GPUs");
        assigned.insert(&spec.id, gpu);
        *load.entry(gpu).or_default() += seconds;
    }
    assigned
}

/// The report's note on each identical group that had spreadable probes planned:
/// `spread: 2,950 sweep and width probe runs over GPUs 0-3 (identical NVIDIA H200): ...`.
pub(super) fn notes(spread: &SpreadPlan, tasks: &[Task]) -> Vec<String> {
    spread
        .groups
        .iter()
        .filter_map(|group| {
            let runs = tasks
                .iter()
                .filter(|task| {
                    spreadable(&task.spec)
                        && matches!(task.device, DeviceRef::Gpu(gpu) if group.gpus.contains(&gpu))
                })
                .count();
            (runs > 0).then(|| {
                format!(
                    "spread: {} {} probe runs over GPUs {} (identical {}): each ran on one \
                     GPU; every GPU ran its other probes (--no-spread runs each on every GPU)",
                    thousands(runs),
                    SPREAD_FAMILIES.join(" and "),
                    gpu_list(&group.gpus),
                    group.name
                )
            })
        })
        .collect()
}

/// `2950` as `2,950`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `0-3` for a run of three or more consecutive indices, else `0,1` or `0,2,5`.
fn gpu_list(gpus: &[u32]) -> String {
    let consecutive = gpus.windows(2).all(|w| w[1] == w[0] + 1);
    match gpus {
        [first, .., last] if consecutive && gpus.len() >= 3 => format!("{first}-{last}"),
        _ => gpus
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::spec;

    fn gpu(index: u32, name: &str, memory: u64, arch: &str) -> TorchDevice {
        TorchDevice {
            index,
            name: name.into(),
            arch: Some(arch.into()),
            total_memory: Some(memory),
            ..Default::default()
        }
    }

    fn h200(index: u32) -> TorchDevice {
        gpu(index, "NVIDIA H200", 150_000_000_000, "sm_90")
    }

    fn timed(id: &str, seconds: f64) -> ProbeSpec {
        ProbeSpec {
            typical_s: Some(seconds),
            ..spec(id)
        }
    }

    /// Each task as `probe@gpu`.
    fn placed(tasks: &[Task]) -> Vec<String> {
        tasks
            .iter()
            .map(|t| format!("{}@{}", t.spec.id, t.device))
            .collect()
    }

    fn catalog() -> Vec<ProbeSpec> {
        vec![
            timed("copy.h2d", 1.0),
            timed("sweep.add.fp32", 4.0),
            timed("sweep.mul.fp32", 3.0),
            timed("width.index.int32", 2.0),
            timed("sweep.div.fp32", 1.0),
            timed("gemm.bf16", 5.0),
        ]
    }

    #[test]
    fn the_stack_families_spread_and_nothing_else() {
        assert!(spreadable(&spec("sweep.add.fp32")));
        assert!(spreadable(&spec("sweep.opdb")));
        assert!(spreadable(&spec("width.index.int32")));
        assert!(!spreadable(&spec("copy.h2d")));
        // A family is the id's first part, not a substring.
        assert!(!spreadable(&spec("sweeping.add")));
        assert!(!spreadable(&spec("native.sweep")));
        assert!(!spreadable(&spec("nn.width.x")));
    }

    #[test]
    fn identical_gpus_are_grouped_and_others_are_not() {
        let plan = plan_for(&[h200(0), h200(1), h200(2), h200(3)]).unwrap();
        assert_eq!(plan.gpus, [0, 1, 2, 3]);
        assert_eq!(
            plan.groups,
            [SpreadGroup {
                gpus: vec![0, 1, 2, 3],
                name: "NVIDIA H200".into()
            }]
        );
        // Another memory size, arch or name is another GPU; an unknown one groups with none.
        let mixed = [
            h200(0),
            gpu(1, "NVIDIA H200", 80_000_000_000, "sm_90"),
            h200(2),
            gpu(3, "NVIDIA H200", 150_000_000_000, "sm_100"),
            gpu(4, "NVIDIA H100", 150_000_000_000, "sm_90"),
            TorchDevice {
                index: 5,
                name: "NVIDIA H200".into(),
                ..Default::default()
            },
        ];
        let plan = plan_for(&mixed).unwrap();
        assert_eq!(plan.gpus, [0, 1, 2, 3, 4, 5]);
        assert_eq!(plan.groups.len(), 1);
        assert_eq!(plan.groups[0].gpus, [0, 2]);
        // Nothing to spread: no plan ahead (GPU 0, then the others at its hello, as before).
        assert_eq!(plan_for(&[h200(0)]), None);
        assert_eq!(plan_for(&[]), None);
        assert_eq!(
            plan_for(&[h200(0), gpu(1, "NVIDIA H100", 1, "sm_90")]),
            None
        );
        assert_eq!(plan_for(&[h200(0), h200(0)]), None, "an index twice");
    }

    #[test]
    fn each_stack_probe_runs_once_balanced_and_the_rest_everywhere() {
        let plan = plan_for(&[h200(0), h200(1)]).unwrap();
        let tasks = tasks(&catalog(), &plan, &[]);
        // Longest first onto the least loaded: add (4) on 0, mul (3) on 1, width (2) on 1,
        // div (1) on 0: 5 s each.
        assert_eq!(
            placed(&tasks),
            [
                "copy.h2d@0",
                "sweep.add.fp32@0",
                "sweep.div.fp32@0",
                "gemm.bf16@0",
                "copy.h2d@1",
                "sweep.mul.fp32@1",
                "width.index.int32@1",
                "gemm.bf16@1",
            ]
        );
        // The same catalog in any order gives the same GPUs.
        let mut reversed = catalog();
        reversed.reverse();
        let mut again = placed(&tasks_for(&reversed, &plan));
        let mut first = placed(&tasks);
        again.sort();
        first.sort();
        assert_eq!(again, first);
        let note = notes(&plan, &tasks);
        assert_eq!(
            note,
            [
                "spread: 4 sweep and width probe runs over GPUs 0,1 (identical NVIDIA H200): each ran on one GPU; every GPU ran its other probes (--no-spread runs each on every GPU)"
            ]
        );
    }

    fn tasks_for(selected: &[ProbeSpec], plan: &SpreadPlan) -> Vec<Task> {
        tasks(selected, plan, &[])
    }

    #[test]
    fn many_probes_balance_across_four_gpus() {
        let plan = plan_for(&[h200(0), h200(1), h200(2), h200(3)]).unwrap();
        let selected: Vec<ProbeSpec> = (0..400)
            .map(|i| timed(&format!("sweep.op{i}.fp32"), 0.1 + f64::from(i % 7)))
            .collect();
        let tasks = tasks_for(&selected, &plan);
        assert_eq!(tasks.len(), 400, "each once");
        let mut load = [0.0f64; 4];
        for task in &tasks {
            let DeviceRef::Gpu(gpu) = task.device else {
                panic!()
            };
            load[gpu as usize] += task.spec.typical_s.unwrap();
        }
        let (low, high) = (
            load.iter().copied().fold(f64::MAX, f64::min),
            load.iter().copied().fold(0.0, f64::max),
        );
        assert!(high - low <= 6.2, "{load:?}");
        assert_eq!(
            notes(&plan, &tasks)[0].split(" (").next(),
            Some("spread: 400 sweep and width probe runs over GPUs 0-3")
        );
    }

    #[test]
    fn a_gpu_unlike_the_others_runs_everything() {
        let plan = plan_for(&[h200(0), gpu(1, "NVIDIA A100", 80, "sm_80"), h200(2)]).unwrap();
        let tasks = tasks_for(&catalog(), &plan);
        let on = |gpu: u32| -> Vec<String> {
            tasks
                .iter()
                .filter(|t| t.device == DeviceRef::Gpu(gpu))
                .map(|t| t.spec.id.to_string())
                .collect()
        };
        assert_eq!(on(1).len(), catalog().len());
        let spread_runs = |gpu: u32| {
            on(gpu)
                .iter()
                .filter(|id| !id.starts_with("copy") && !id.starts_with("gemm"))
                .count()
        };
        assert_eq!(spread_runs(0) + spread_runs(2), 4);
        assert!(
            on(0).contains(&"gemm.bf16".to_string()) && on(2).contains(&"gemm.bf16".to_string())
        );
        assert_eq!(
            notes(&plan, &tasks)[0].split(" (").next(),
            Some("spread: 4 sweep and width probe runs over GPUs 0,2")
        );
        // Two groups: each spreads over its own members.
        let plan = plan_for(&[
            h200(0),
            gpu(1, "NVIDIA A100", 80, "sm_80"),
            h200(2),
            gpu(3, "NVIDIA A100", 80, "sm_80"),
        ])
        .unwrap();
        let tasks = tasks_for(&catalog(), &plan);
        let count = |id: &str| tasks.iter().filter(|t| t.spec.id.as_str() == id).count();
        assert_eq!(count("sweep.add.fp32"), 2, "once per group");
        assert_eq!(count("copy.h2d"), 4);
        assert_eq!(notes(&plan, &tasks).len(), 2);
    }

    #[test]
    fn nothing_to_spread_makes_no_note() {
        let plan = plan_for(&[h200(0), h200(1)]).unwrap();
        let only_hardware = [timed("copy.h2d", 1.0)];
        let tasks = tasks_for(&only_hardware, &plan);
        assert_eq!(placed(&tasks), ["copy.h2d@0", "copy.h2d@1"]);
        assert!(notes(&plan, &tasks).is_empty());
    }

    #[test]
    fn a_replan_keeps_each_probe_where_it_was_planned() {
        let plan = plan_for(&[h200(0), h200(1)]).unwrap();
        let earlier = tasks_for(&catalog(), &plan);
        // The new catalog has one more probe and another estimate for one: the earlier
        // probes stay where they were; the new one goes to the least loaded GPU.
        let mut now = catalog();
        now[1].typical_s = Some(0.5);
        now.push(timed("sweep.new.fp32", 2.0));
        let replanned = tasks(&now, &plan, &earlier);
        let device_of = |tasks: &[Task], id: &str| {
            tasks
                .iter()
                .find(|t| t.spec.id.as_str() == id)
                .map(|t| t.device)
        };
        for id in [
            "sweep.add.fp32",
            "sweep.mul.fp32",
            "width.index.int32",
            "sweep.div.fp32",
        ] {
            assert_eq!(device_of(&replanned, id), device_of(&earlier, id), "{id}");
        }
        // GPU 0 now holds 0.5 + 1, GPU 1 holds 3 + 2.
        assert_eq!(
            device_of(&replanned, "sweep.new.fp32"),
            Some(DeviceRef::Gpu(0))
        );
    }

    #[test]
    fn lists_and_counts_read_well() {
        assert_eq!(thousands(2950), "2,950");
        assert_eq!(thousands(950), "950");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(gpu_list(&[0, 1]), "0,1");
        assert_eq!(gpu_list(&[0, 1, 2, 3]), "0-3");
        assert_eq!(gpu_list(&[0, 2, 5]), "0,2,5");
    }
}
