//! How a run's probes are grouped into worker lanes, and how many lanes each device's
//! Python probes are spread over.
//!
//! Grouping ([`lanes_for`]): one lane per (worker kind, device, placement), and for side
//! probes one per family (or per the lane a family names). Each lane is one worker at a
//! time, running its probes in order.
//!
//! Sizing ([`sized_lanes`]): a lane is as slow as the sum of its probes, so the one that
//! holds the most work sets the wall time (on the H100 the shared lane ran 662 probes one
//! after another for 16 s while the other lanes were done by 13 s, bench/RESULTS.md). Where
//! the host has cores and the GPU has memory to spare ([`LaneBudget`]), the heaviest
//! lanes are cut into several, each a worker of its own that runs beside the others:
//! - only the shared lane and side lanes of a family that names no lane of its own are cut
//!   (a family that names its lanes, like the sweep's, has chosen its grouping; exclusive
//!   and first lanes run alone by definition);
//! - a lane is cut only while each piece keeps at least [`MIN_PIECE_S`] of estimated
//!   work, since a piece's worker pays the framework's import and a context of its own;
//! - pieces hold whole sub-families (`nn.sdpa`, `copy.h2d`) where they can, so that a
//!   sub-family's shared set-up (a library's handles, its compiled kernels) is paid once,
//!   and each piece keeps the probes' planned order;
//! - when the budget has no lane to spare for the next cut, the two lightest uncut lanes
//!   share one worker instead, if together they stay under the heaviest piece that cut
//!   leaves: a side family of a few probes (the multi-GPU probes, all skipped on one GPU;
//!   the allocator's child processes) no longer holds a worker of its own while the
//!   heaviest lane sets the wall time. A lane a family names may share with another
//!   family's lane while it is lighter than [`MIN_PIECE_S`] (on the H200 the standard
//!   tier's threaded copies' and optimizers' lanes, 2 s and 3 s, held two of the twelve
//!   workers while the shared lane ran 10 s in two pieces), never with a lane of its own
//!   family (the sweep names its lanes to spread over them); exclusive and first lanes never
//!   share.
//!
//! Work is estimated per probe from the seconds its catalog publishes (`typical_s`: each
//! Python family's `TYPICAL_SECONDS` by id prefix, in its `specs.py`, and the native
//! catalog's, measured on the H200 host, bench/RESULTS.md "The standard tier's lanes"),
//! else [`DEFAULT_SECONDS`]. Where the GPU's kernels are
//! compiled at their first use on this machine and its kernel cache is empty (CUDA's
//! `ComputeCache` on a fresh machine), the probes that pay for that compilation are
//! estimated from [`FIRST_USE_SECONDS`] instead: on the H100's first run the attention
//! probes took 48 probe-seconds against 14 warm, and their lane set the run's wall time.
//! Estimates only place probes; every planned probe runs whatever its estimate.

use gpuprobe_model::{DeviceRef, Placement, ProbeSpec, longest_prefix_value};
use gpuprobe_runner::Task;

use super::Lane;

/// A piece of a cut lane carries at least this much estimated work (seconds). An extra
/// worker costs more than its start (importing the framework, creating a context, about
/// 2 s of one core): lanes side by side share the host's cores, the GPU and the copy
/// engines, and on the H100 a probe ran up to twice as long beside many others. Cut into
/// pieces of 1 s, the quick tier took 5.2-5.4 s instead of 3.8 s; cut in two pieces of
/// about 2 s each, each piece still took 1.9 s (bench/RESULTS.md "Lane sizing"). The
/// standard tier's heaviest lanes (13-18 s) are cut; the quick tier's (2 s) are not.
pub(super) const MIN_PIECE_S: f64 = 4.5;

/// Device memory each Python lane may need: its context (about 0.5 GiB) and the working
/// set of the largest shared probe (1 GiB round-trip copies).
pub(super) const MEMORY_PER_LANE: u64 = 2 << 30;

/// Seconds of one probe on a machine whose kernel cache is empty, for the prefixes whose
/// first use compiles kernels, by the longest prefix of its id listed (whole parts), as the
/// catalog's `typical_s` is (which holds for every other probe). Measured on the H100 host's first standard run
/// after the machine started (bench/RESULTS.md "Lane sizing and the first run"): the
/// attention probes 0.43 s each (0.08 warm), the two masked-attention matrix probes
/// 5.9 s each (0.67 warm), convolutions 0.55 s (0.24), the VAE blocks 0.50 s (0.16),
/// runtime compilation 0.46 s (0.12).
pub(super) const FIRST_USE_SECONDS: &[(&str, f64)] = &[
    ("nn.conv2d", 0.554),
    ("nn.sdpa", 0.333),
    ("nn.sdpa.matrix", 5.920),
    ("nn.vae", 0.499),
    // Tracing, code generation and Triton's compiles of a program on an empty cache (every
    // pass of the full tier).
    ("compile", 30.000),
    ("compile.standard", 30.000),
    ("graph.reduce_overhead", 20.000),
    // The first optimizer of a process imports torch._dynamo and loads its kernels.
    ("optim.adamw.fp32", 5.000),
    ("native.rtc", 0.455),
];

/// The estimate of a probe whose catalog publishes no `typical_s`.
pub(super) const DEFAULT_SECONDS: f64 = 0.1;

/// What every probe costs beyond its own seconds: the worker's begin and result messages,
/// judging and recording (the H100's shared lane ran 662 probes in 16 s, about 1.5 s more
/// than their own seconds).
const PER_PROBE_OVERHEAD_S: f64 = 0.003;

/// The estimated seconds of one probe: on a machine whose kernel cache is empty
/// (`first_use`), `FIRST_USE_SECONDS` where it lists the probe; else the seconds its
/// catalog publishes with it (`typical_s`), else `DEFAULT_SECONDS`.
pub fn estimated_seconds(spec: &ProbeSpec, first_use: bool) -> f64 {
    let id = spec.id.as_str();
    let first_use_own = if first_use {
        longest_prefix_value(FIRST_USE_SECONDS, id)
    } else {
        None
    };
    let own = first_use_own
        .or(spec.typical_s.filter(|s| s.is_finite() && *s >= 0.0))
        .unwrap_or(DEFAULT_SECONDS);
    own + PER_PROBE_OVERHEAD_S
}

/// The first two parts of a probe id (`nn.sdpa` of `nn.sdpa.bf16.cudnn.d64`).
fn sub_family(id: &str) -> &str {
    match id.match_indices('.').nth(1) {
        Some((end, _)) => &id[..end],
        None => id,
    }
}

/// How many lanes each device's probes may use at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneBudget {
    /// Lanes side by side on one device: shared and side, Python and native (exclusive
    /// and first lanes run alone and do not count).
    pub lanes: usize,
    /// The GPU's kernel cache is empty: probes whose first use compiles kernels are
    /// estimated from `FIRST_USE_SECONDS`.
    pub first_use: bool,
}

impl LaneBudget {
    /// No lane is cut: one worker per lane, as the probes group.
    pub const UNCUT: LaneBudget = LaneBudget {
        lanes: 0,
        first_use: false,
    };

    /// The budget of a host with `cores` CPU cores whose GPUs have at least
    /// `free_memory` bytes free each (`None`: not known); `kernel_cache_empty`: the GPU
    /// driver's kernel cache holds nothing yet (a machine's first run).
    ///
    /// Three in four cores: each lane's worker needs a core for its probes' host side, and
    /// some lanes start helpers (the sweep's reference processes, DataLoader workers); on
    /// the H100's 16 cores, 17 lanes ran the standard tier slower than 14, the probes
    /// contending for the GPU. A first run is different: its heaviest lane compiles
    /// kernels on the host, one core per worker (the H100's CPU was 47% busy), so it
    /// may use every core, and its estimates are `FIRST_USE_SECONDS`. Without a known
    /// free memory nothing is cut: a small GPU that holds a context per lane plus the
    /// probes' buffers would fail its probes for want of memory, a false alarm.
    pub fn for_host(
        cores: usize,
        free_memory: Option<u64>,
        kernel_cache_empty: bool,
    ) -> LaneBudget {
        let Some(free) = free_memory else {
            return LaneBudget::UNCUT;
        };
        let by_memory = usize::try_from(free / MEMORY_PER_LANE).unwrap_or(usize::MAX);
        let by_cores = if kernel_cache_empty {
            cores.max(1)
        } else {
            (cores * 3 / 4).max(1)
        };
        LaneBudget {
            lanes: by_memory.min(by_cores),
            first_use: kernel_cache_empty,
        }
    }
}

/// Groups tasks into lanes by (backend, device, placement), keeping their order; side
/// probes get one lane per family (or per the lane their family names), so each family's
/// slow parts overlap with the others.
pub fn lanes_for(tasks: Vec<Task>) -> Vec<Lane> {
    grouped(tasks).into_iter().map(|group| group.lane).collect()
}

/// [`lanes_for`], then the heaviest cuttable lanes of each GPU cut into pieces while
/// `budget` has lanes to spare (the module header says which and how).
pub fn sized_lanes(tasks: Vec<Task>, budget: LaneBudget) -> Vec<Lane> {
    let mut groups = grouped(tasks);
    // Each lane's current cut: piece of every task, and the pieces' estimated seconds.
    let first_use = budget.first_use;
    let mut cuts: Vec<Assignment> = groups
        .iter()
        .map(|g| assign(&g.lane, 1, first_use))
        .collect();
    let mut devices: Vec<DeviceRef> = Vec::new();
    for group in &groups {
        if !devices.contains(&group.lane.device) {
            devices.push(group.lane.device);
        }
    }
    // The budget is the GPUs' memory: a CPU self-test keeps its lanes as they group.
    devices.retain(|device| matches!(device, DeviceRef::Gpu(_)));
    for device in devices {
        let side_by_side: Vec<usize> = (0..groups.len())
            .filter(|&i| {
                let lane = &groups[i].lane;
                lane.device == device && !lane.placement.alone()
            })
            .collect();
        if budget.lanes == 0 {
            continue;
        }
        let mut spare = budget.lanes.saturating_sub(side_by_side.len());
        let mut settled: Vec<usize> = Vec::new();
        loop {
            // The lane with the heaviest piece, cut once more if every piece of the new cut
            // still holds the minimum; else it stays as it is, and the next is tried.
            let heaviest = side_by_side
                .iter()
                .copied()
                .filter(|&i| {
                    groups[i].cuttable()
                        && !settled.contains(&i)
                        && cuts[i].pieces() < groups[i].lane.tasks.len()
                })
                .max_by(|&a, &b| cuts[a].heaviest().total_cmp(&cuts[b].heaviest()));
            let Some(i) = heaviest else { break };
            let finer = assign(&groups[i].lane, cuts[i].pieces() + 1, first_use);
            if finer.lightest() < MIN_PIECE_S {
                settled.push(i);
                continue;
            }
            if spare == 0 {
                // No lane to spare: two light lanes share a worker, if together they stay
                // under what the heaviest piece will be after this cut.
                let after = side_by_side
                    .iter()
                    .map(|&j| {
                        if j == i {
                            finer.heaviest()
                        } else {
                            cuts[j].heaviest()
                        }
                    })
                    .fold(0.0, f64::max);
                let Some((keep, join)) = lightest_pair(&groups, &cuts, &side_by_side, i, after)
                else {
                    break;
                };
                merge(&mut groups, keep, join);
                cuts[keep] = assign(&groups[keep].lane, 1, first_use);
                cuts[join] = assign(&groups[join].lane, 1, first_use);
                spare += 1;
            }
            cuts[i] = finer;
            spare -= 1;
        }
    }
    groups
        .into_iter()
        .zip(cuts)
        .filter(|(group, _)| !group.lane.tasks.is_empty())
        .flat_map(|(group, cut)| cut.apply(group.lane))
        .collect()
}

/// The two lightest lanes that may share a worker (`keep`, then `join`): uncut side or
/// shared lanes of one worker kind, other than `cutting`, that [`may_share`], whose work
/// together is at most `limit` seconds; `None` when no pair is that light.
fn lightest_pair(
    groups: &[Group],
    cuts: &[Assignment],
    candidates: &[usize],
    cutting: usize,
    limit: f64,
) -> Option<(usize, usize)> {
    let mut light: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&j| {
            j != cutting
                && !groups[j].lane.placement.alone()
                && cuts[j].pieces() == 1
                && !groups[j].lane.tasks.is_empty()
                // A named lane shares only while it is too light to be worth a worker of
                // its own: in the full tier the named training, optimizer and graph lanes,
                // minutes each, once shared one worker, and a sweep lane waited 300 s
                // behind them.
                && (!groups[j].named() || cuts[j].heaviest() < MIN_PIECE_S)
        })
        .collect();
    light.sort_by(|&a, &b| {
        cuts[a]
            .heaviest()
            .total_cmp(&cuts[b].heaviest())
            .then(a.cmp(&b))
    });
    let mut best: Option<(f64, usize, usize)> = None;
    for (n, &a) in light.iter().enumerate() {
        for &b in &light[n + 1..] {
            let load = cuts[a].heaviest() + cuts[b].heaviest();
            if groups[a].lane.backend == groups[b].lane.backend
                && may_share(&groups[a], &groups[b])
                && load <= limit
                && best.is_none_or(|(l, ..)| load < l)
            {
                best = Some((load, a.min(b), a.max(b)));
            }
        }
    }
    best.map(|(_, keep, join)| (keep, join))
}

/// Whether two lanes may run in one worker: lanes that one family named to spread its
/// probes over stay apart, and so does a named lane from its own family's other lanes.
fn may_share(a: &Group, b: &Group) -> bool {
    fn families(group: &Group, named_only: bool) -> Vec<&str> {
        group
            .lane
            .tasks
            .iter()
            .filter(|t| !named_only || t.spec.lane.is_some())
            .map(|t| t.spec.id.family())
            .collect()
    }
    let apart = |x: &Group, y: &Group| {
        let theirs = families(y, false);
        families(x, true).iter().any(|f| theirs.contains(f))
    };
    !apart(a, b) && !apart(b, a)
}

/// Moves lane `join`'s tasks to the end of lane `keep` (the earlier in the plan), leaving
/// `join` empty. A lane holding shared probes stays shared.
fn merge(groups: &mut [Group], keep: usize, join: usize) {
    let moved = std::mem::take(&mut groups[join].lane.tasks);
    if groups[join].lane.placement == Placement::Shared {
        groups[keep].lane.placement = Placement::Shared;
    }
    groups[keep].lane.tasks.extend(moved);
}

struct Group {
    lane: Lane,
}

impl Group {
    /// Whether it holds probes of a lane their family named (after a merge too).
    fn named(&self) -> bool {
        self.lane.tasks.iter().any(|t| t.spec.lane.is_some())
    }

    /// Whether [`sized_lanes`] may cut it: not alone on its device, nor holding a named lane's
    /// probes (a family that names its lanes has chosen its grouping).
    fn cuttable(&self) -> bool {
        !self.lane.placement.alone() && !self.named()
    }
}

fn grouped(tasks: Vec<Task>) -> Vec<Group> {
    let mut groups: Vec<(Option<String>, Group)> = Vec::new();
    for task in tasks {
        let backend = task.spec.backend;
        let placement = task.spec.placement;
        let family = (placement == Placement::Side).then(|| {
            task.spec
                .lane
                .clone()
                .unwrap_or_else(|| task.spec.id.family().to_string())
        });
        match groups.iter_mut().find(|(f, g)| {
            g.lane.backend == backend
                && g.lane.device == task.device
                && g.lane.placement == placement
                && *f == family
        }) {
            Some((_, group)) => group.lane.tasks.push(task),
            None => groups.push((
                family,
                Group {
                    lane: Lane {
                        backend,
                        device: task.device,
                        placement,
                        tasks: vec![task],
                    },
                },
            )),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// Which piece each of a lane's tasks goes to, and each piece's estimated seconds.
struct Assignment {
    owner: Vec<usize>,
    loads: Vec<f64>,
}

impl Assignment {
    fn pieces(&self) -> usize {
        self.loads.len()
    }

    fn heaviest(&self) -> f64 {
        self.loads.iter().copied().fold(0.0, f64::max)
    }

    fn lightest(&self) -> f64 {
        self.loads.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// The lane's tasks as one lane per piece, each in the lane's order.
    fn apply(self, lane: Lane) -> Vec<Lane> {
        if self.pieces() <= 1 {
            return vec![lane];
        }
        let Lane {
            backend,
            device,
            placement,
            tasks,
        } = lane;
        let mut out: Vec<Lane> = (0..self.pieces())
            .map(|_| Lane {
                backend,
                device,
                placement,
                tasks: Vec::new(),
            })
            .collect();
        for (task, piece) in tasks.into_iter().zip(self.owner) {
            out[piece].tasks.push(task);
        }
        out.retain(|l| !l.tasks.is_empty());
        out
    }
}

/// Cuts a lane into `pieces` of about equal estimated work. Probes that belong together
/// stay together as long as the balance allows: whole families first, a family heavier
/// than a piece's share as whole sub-families, a sub-family heavier than that probe by
/// probe. Items go heaviest first to the lightest piece.
fn assign(lane: &Lane, pieces: usize, first_use: bool) -> Assignment {
    let seconds: Vec<f64> = lane
        .tasks
        .iter()
        .map(|t| estimated_seconds(&t.spec, first_use))
        .collect();
    let pieces = pieces.max(1);
    // A group over a piece's share is split. A quarter of slack was allowed once (a
    // group's set-up paid twice against a slightly uneven cut), but on the H200 it kept the
    // standard tier's `ops` family (10 s) whole in one piece while the others ended 1-2 s
    // earlier; replayed on nine runs there, splitting at the share ended the side-by-side
    // lanes 0.6 s sooner (bench/RESULTS.md "Lanes balanced by refreshed estimates").
    let share = seconds.iter().sum::<f64>() / pieces as f64;
    let family_of = |i: usize| lane.tasks[i].spec.id.family().to_string();
    let sub_family_of = |i: usize| sub_family(lane.tasks[i].spec.id.as_str()).to_string();
    let mut items: Vec<(f64, Vec<usize>)> = Vec::new();
    for family in group_by(0..lane.tasks.len(), family_of) {
        if weight(&family, &seconds) <= share || family.len() == 1 {
            items.push((weight(&family, &seconds), family));
            continue;
        }
        for sub in group_by(family.into_iter(), sub_family_of) {
            if weight(&sub, &seconds) <= share || sub.len() == 1 {
                items.push((weight(&sub, &seconds), sub));
            } else {
                items.extend(sub.into_iter().map(|i| (seconds[i], vec![i])));
            }
        }
    }
    // Heaviest first; ties keep the planned order, so the same plan always cuts the same way.
    items.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1[0].cmp(&b.1[0])));
    let mut loads = vec![0.0_f64; pieces];
    let mut owner = vec![0usize; lane.tasks.len()];
    for (weight, indices) in items {
        let lightest = (0..pieces)
            .min_by(|&a, &b| loads[a].total_cmp(&loads[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        loads[lightest] += weight;
        for index in indices {
            owner[index] = lightest;
        }
    }
    Assignment { owner, loads }
}

/// Task indices grouped by a key, groups in the order their first member appears.
fn group_by(
    indices: impl Iterator<Item = usize>,
    key: impl Fn(usize) -> String,
) -> Vec<Vec<usize>> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for index in indices {
        let k = key(index);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, members)) => members.push(index),
            None => groups.push((k, vec![index])),
        }
    }
    groups.into_iter().map(|(_, members)| members).collect()
}

fn weight(indices: &[usize], seconds: &[f64]) -> f64 {
    indices.iter().map(|&i| seconds[i]).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::Backend;
    use gpuprobe_model::ProbeSpec;

    /// What the catalog publishes (`typical_s`) for the ids these tests use: examples
    /// from the families' `TYPICAL_SECONDS` (`python/gpuprobe/worker/probes/*/specs.py`)
    /// and the native catalog's, by the same longest-prefix rule.
    const PUBLISHED: &[(&str, f64)] = &[
        ("alloc.config", 3.791),
        ("alloc.usable", 0.479),
        ("copy.h2d", 0.105),
        ("copy.roundtrip", 0.433),
        ("dtype.fp32", 0.013),
        ("native.copy", 0.244),
        ("native.copy.roundtrip.pageable.large", 5.622),
        ("native.copy.roundtrip.pinned.large", 4.427),
        ("native.kernel", 0.076),
        ("nn.conv2d", 0.296),
        ("nn.sdpa", 0.107),
        ("nn.sdpa.matrix.fp16.default.core", 0.548),
        ("nn.vae", 0.353),
        ("ops.matmul", 0.466),
        ("rng.randperm", 0.428),
        ("sweep", 0.700),
        ("train", 1.000),
    ];

    /// A probe spec as its catalog publishes it: with its `typical_s`, where it has one.
    fn spec(id: &str) -> ProbeSpec {
        ProbeSpec {
            typical_s: longest_prefix_value(PUBLISHED, id),
            ..crate::test_support::spec(id)
        }
    }

    fn task(id: &str, placement: Placement, lane: Option<&str>) -> Task {
        Task {
            spec: ProbeSpec {
                placement,
                lane: lane.map(str::to_string),
                backend: Backend::Python,
                ..spec(id)
            },
            device: DeviceRef::Gpu(0),
        }
    }

    fn ids(lane: &Lane) -> Vec<&str> {
        lane.tasks.iter().map(|t| t.spec.id.as_str()).collect()
    }

    fn lane_seconds(lane: &Lane) -> f64 {
        lane.tasks
            .iter()
            .map(|t| estimated_seconds(&t.spec, false))
            .sum()
    }

    /// A standard-tier-like plan: a heavy shared lane of many sub-families, a side family
    /// of two sub-families, a named side lane, an exclusive lane.
    fn plan() -> Vec<Task> {
        let mut tasks = Vec::new();
        for i in 0..20 {
            tasks.push(task(&format!("ops.matmul.c{i}"), Placement::Shared, None));
        }
        for i in 0..30 {
            tasks.push(task(&format!("copy.h2d.c{i}"), Placement::Shared, None));
        }
        for i in 0..200 {
            tasks.push(task(&format!("dtype.fp32.c{i}"), Placement::Shared, None));
        }
        for i in 0..10 {
            tasks.push(task(&format!("rng.randperm.c{i}"), Placement::Shared, None));
        }
        for i in 0..60 {
            tasks.push(task(&format!("nn.sdpa.c{i}"), Placement::Side, None));
        }
        for i in 0..5 {
            tasks.push(task(&format!("nn.conv2d.c{i}"), Placement::Side, None));
        }
        for i in 0..4 {
            tasks.push(task(
                &format!("sweep.add.c{i}"),
                Placement::Side,
                Some("sweep-1"),
            ));
        }
        tasks.push(task("alloc.usable.chunks", Placement::Exclusive, None));
        tasks
    }

    #[test]
    fn probes_group_by_placement_and_side_family() {
        let lanes = lanes_for(plan());
        let placements: Vec<Placement> = lanes.iter().map(|l| l.placement).collect();
        assert_eq!(
            placements,
            [
                Placement::Shared,
                Placement::Side,
                Placement::Side,
                Placement::Exclusive
            ]
        );
        assert_eq!(lanes[0].tasks.len(), 260);
        assert_eq!(lanes[1].tasks.len(), 65, "one lane for the nn family");
    }

    #[test]
    fn without_a_budget_nothing_is_cut() {
        let uncut = lanes_for(plan());
        let sized = sized_lanes(plan(), LaneBudget::UNCUT);
        assert_eq!(uncut.len(), sized.len());
        assert_eq!(
            sized_lanes(
                plan(),
                LaneBudget {
                    lanes: 3,
                    first_use: false
                }
            )
            .len(),
            uncut.len(),
            "three lanes side by side are already planned: none to spare"
        );
    }

    #[test]
    fn the_heaviest_lanes_are_cut_into_balanced_pieces_that_keep_every_probe_once() {
        let planned = plan();
        let lanes = sized_lanes(
            planned.clone(),
            LaneBudget {
                lanes: 8,
                first_use: false,
            },
        );
        // Every probe exactly once.
        let mut all: Vec<&str> = lanes.iter().flat_map(ids).collect();
        all.sort_unstable();
        let mut expected: Vec<&str> = planned.iter().map(|t| t.spec.id.as_str()).collect();
        expected.sort_unstable();
        assert_eq!(all, expected);
        // The named lane and the exclusive lane are untouched.
        let named: Vec<&Lane> = lanes
            .iter()
            .filter(|l| l.tasks.iter().any(|t| t.spec.lane.is_some()))
            .collect();
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].tasks.len(), 4);
        assert_eq!(
            lanes
                .iter()
                .filter(|l| l.placement == Placement::Exclusive)
                .count(),
            1
        );
        // Within the budget, and more lanes than before the cut.
        let side_by_side = lanes
            .iter()
            .filter(|l| l.placement != Placement::Exclusive)
            .count();
        assert!((4..=8).contains(&side_by_side), "{side_by_side}");
        // The pieces of the shared lane: no piece more than 1.5x another, and each keeps
        // the planned order.
        let shared: Vec<&Lane> = lanes
            .iter()
            .filter(|l| l.placement == Placement::Shared)
            .collect();
        assert!(shared.len() >= 2, "{}", shared.len());
        let loads: Vec<f64> = shared.iter().map(|l| lane_seconds(l)).collect();
        let (low, high) = loads
            .iter()
            .fold((f64::MAX, 0.0_f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        assert!(high <= 1.5 * low, "{loads:?}");
        let order: std::collections::HashMap<&str, usize> = planned
            .iter()
            .enumerate()
            .map(|(i, t)| (t.spec.id.as_str(), i))
            .collect();
        for lane in &lanes {
            let positions: Vec<usize> = ids(lane).iter().map(|id| order[id]).collect();
            assert!(positions.windows(2).all(|w| w[0] < w[1]), "{:?}", ids(lane));
        }
        // Whole sub-families where they fit: the cheap dtype probes stay together.
        let with_dtype = lanes
            .iter()
            .filter(|l| ids(l).iter().any(|id| id.starts_with("dtype.")))
            .count();
        assert_eq!(with_dtype, 1);
    }

    #[test]
    fn no_piece_is_cut_below_the_minimum_work() {
        // 50 probes of 0.1 s: 5.2 s in all; two pieces of 2.6 s would be under the
        // minimum: none (the quick tier's shared lane is of this size).
        let tasks: Vec<Task> = (0..50)
            .map(|i| task(&format!("misc.case.c{i}"), Placement::Shared, None))
            .collect();
        let lanes = sized_lanes(
            tasks,
            LaneBudget {
                lanes: 16,
                first_use: false,
            },
        );
        assert_eq!(lanes.len(), 1, "{}", lanes.len());
        let tasks: Vec<Task> = (0..130)
            .map(|i| task(&format!("misc.case.c{i}"), Placement::Shared, None))
            .collect();
        let lanes = sized_lanes(
            tasks,
            LaneBudget {
                lanes: 16,
                first_use: false,
            },
        );
        // 13.4 s of work: two pieces of 6.7 s (three of 4.5 s would be just under).
        assert_eq!(lanes.len(), 2);
        assert!(lanes.iter().all(|l| lane_seconds(l) >= MIN_PIECE_S));
    }

    /// A heavy shared lane (about 11 s), a heavy side family, and three light side
    /// families (4.1 s, 0.1 s, 1.0 s) that each hold a worker.
    fn plan_with_light_lanes() -> Vec<Task> {
        let mut tasks = Vec::new();
        for i in 0..24 {
            tasks.push(task(&format!("ops.matmul.c{i}"), Placement::Shared, None));
        }
        for i in 0..20 {
            tasks.push(task(&format!("nn.vae.c{i}"), Placement::Side, None));
        }
        tasks.push(task("alloc.config.effective", Placement::Side, None));
        tasks.push(task("dist.all_reduce.c0", Placement::Side, None));
        for i in 0..10 {
            tasks.push(task(&format!("misc.case.c{i}"), Placement::Side, None));
        }
        tasks.push(task("alloc.usable.chunks", Placement::Exclusive, None));
        tasks
    }

    #[test]
    fn light_lanes_share_a_worker_so_that_the_heaviest_can_be_cut() {
        let planned = plan_with_light_lanes();
        let before = lanes_for(planned.clone());
        let side_by_side = |lanes: &[Lane]| {
            lanes
                .iter()
                .filter(|l| l.placement != Placement::Exclusive)
                .count()
        };
        assert_eq!(side_by_side(&before), 5);
        let heaviest = |lanes: &[Lane]| lanes.iter().map(lane_seconds).fold(0.0, f64::max);
        // No lane to spare: the two lightest side families (dist, misc) share a worker and
        // the shared lane is cut in two, so the count of workers stays the budget.
        let lanes = sized_lanes(
            planned.clone(),
            LaneBudget {
                lanes: 5,
                first_use: false,
            },
        );
        assert_eq!(side_by_side(&lanes), 5);
        let shared = lanes
            .iter()
            .filter(|l| ids(l).iter().any(|id| id.starts_with("ops.")))
            .count();
        assert_eq!(shared, 2, "the heavy lane is cut");
        let joined: Vec<&Lane> = lanes
            .iter()
            .filter(|l| ids(l).contains(&"dist.all_reduce.c0"))
            .collect();
        assert_eq!(joined.len(), 1);
        assert!(
            ids(joined[0]).contains(&"misc.case.c0"),
            "{:?}",
            ids(joined[0])
        );
        assert!(!ids(joined[0]).contains(&"alloc.config.effective"));
        // The shared worker never becomes the slowest, and the slowest got faster.
        assert!(lane_seconds(joined[0]) <= heaviest(&lanes));
        assert!(heaviest(&lanes) < heaviest(&before));
        // Every probe exactly once.
        let mut all: Vec<&str> = lanes.iter().flat_map(ids).collect();
        all.sort_unstable();
        let mut expected: Vec<&str> = planned.iter().map(|t| t.spec.id.as_str()).collect();
        expected.sort_unstable();
        assert_eq!(all, expected);
    }

    #[test]
    fn lanes_share_a_worker_only_to_let_a_heavier_one_be_cut() {
        // The heavy lane is too light to cut in two (pieces under the minimum): the light
        // lanes keep their own workers.
        let tasks: Vec<Task> = plan_with_light_lanes()
            .into_iter()
            .filter(|t| {
                !t.spec.id.as_str().starts_with("ops.") || t.spec.id.as_str() < "ops.matmul.c2"
            })
            .collect();
        let lanes = sized_lanes(
            tasks.clone(),
            LaneBudget {
                lanes: 5,
                first_use: false,
            },
        );
        assert_eq!(lanes.len(), lanes_for(tasks).len());
        // With the memory or the cores unknown nothing is cut, and nothing shares.
        let lanes = sized_lanes(plan_with_light_lanes(), LaneBudget::UNCUT);
        assert_eq!(
            lanes.iter().map(|l| l.tasks.len()).collect::<Vec<_>>(),
            lanes_for(plan_with_light_lanes())
                .iter()
                .map(|l| l.tasks.len())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_named_lane_worth_a_worker_keeps_it() {
        // A heavy shared lane to cut, an unnamed side family and a named lane of 5 s: the
        // two side lanes together would fit under the cut's pieces, but the named lane is
        // past the minimum a worker is worth, so it does not share and the cut waits.
        let mut tasks = Vec::new();
        for i in 0..86 {
            tasks.push(task(&format!("ops.matmul.c{i}"), Placement::Shared, None));
        }
        for i in 0..20 {
            tasks.push(task(&format!("nn.vae.c{i}"), Placement::Side, None));
        }
        for i in 0..5 {
            tasks.push(task(
                &format!("train.step.c{i}"),
                Placement::Side,
                Some("train"),
            ));
        }
        let budget = LaneBudget {
            lanes: 3,
            first_use: false,
        };
        let lanes = sized_lanes(tasks.clone(), budget);
        assert_eq!(lanes.len(), 3, "{lanes:?}");
        assert!(
            lanes
                .iter()
                .any(|l| ids(l).len() == 5 && ids(l)[0] == "train.step.c0")
        );
        // The same lane unnamed shares, and the shared lane is cut.
        let unnamed: Vec<Task> = tasks
            .into_iter()
            .map(|mut t| {
                t.spec.lane = None;
                t
            })
            .collect();
        let lanes = sized_lanes(unnamed, budget);
        let shared = lanes
            .iter()
            .filter(|l| ids(l)[0].starts_with("ops."))
            .count();
        assert_eq!(shared, 2, "{lanes:?}");
    }

    #[test]
    fn named_lanes_share_only_with_other_families_and_exclusive_lanes_never() {
        // Two lanes the sweep named to spread over, and one the copies named: the lightest
        // lanes of the plan.
        let mut tasks = plan_with_light_lanes();
        tasks.retain(|t| !["dist", "misc"].contains(&t.spec.id.family()));
        tasks.push(task("sweep.add.fp32", Placement::Side, Some("sweep-1")));
        tasks.push(task("sweep.mul.fp32", Placement::Side, Some("sweep-2")));
        tasks.push(task("copy.h2d.tiny", Placement::Side, Some("copy-threads")));
        // A named lane of minutes (the full tier's training steps) keeps its worker.
        for i in 0..8 {
            tasks.push(task(
                &format!("train.step.c{i}"),
                Placement::Side,
                Some("train"),
            ));
        }
        let lanes = sized_lanes(
            tasks,
            LaneBudget {
                lanes: 5,
                first_use: false,
            },
        );
        let holding = |id: &str| -> Vec<&str> {
            let lane = lanes.iter().find(|l| ids(l).contains(&id)).unwrap();
            ids(lane)
        };
        // The sweep's two lanes stay apart; one of them takes the copies' lane in, so that
        // the shared lane can be cut in two.
        assert!(!holding("sweep.add.fp32").contains(&"sweep.mul.fp32"));
        let sweep_and_copy = [holding("sweep.add.fp32"), holding("sweep.mul.fp32")]
            .iter()
            .filter(|l| l.contains(&"copy.h2d.tiny"))
            .count();
        assert_eq!(sweep_and_copy, 1, "{lanes:?}");
        assert!(
            holding("train.step.c0")
                .iter()
                .all(|id| id.starts_with("train.")),
            "{:?}",
            holding("train.step.c0")
        );
        let shared = lanes
            .iter()
            .filter(|l| ids(l).iter().any(|id| id.starts_with("ops.")))
            .count();
        assert_eq!(shared, 2);
        let exclusive: Vec<&Lane> = lanes
            .iter()
            .filter(|l| l.placement == Placement::Exclusive)
            .collect();
        assert_eq!(exclusive.len(), 1);
        assert_eq!(ids(exclusive[0]), ["alloc.usable.chunks"]);
    }

    #[test]
    fn the_budget_follows_the_cores_and_the_free_memory() {
        assert_eq!(LaneBudget::for_host(16, None, false), LaneBudget::UNCUT);
        assert_eq!(
            LaneBudget::for_host(16, Some(80 << 30), false).lanes,
            12,
            "three in four cores"
        );
        assert_eq!(
            LaneBudget::for_host(16, Some(7 << 30), false).lanes,
            3,
            "an 8 GB GPU with 7 GiB free: 2 GiB a lane"
        );
        assert_eq!(LaneBudget::for_host(1, Some(80 << 30), false).lanes, 1);
    }

    #[test]
    fn a_probe_is_estimated_by_the_seconds_its_catalog_publishes() {
        let seconds = |spec: ProbeSpec| estimated_seconds(&spec, false) - PER_PROBE_OVERHEAD_S;
        let published = |id: &str, typical_s: f64| ProbeSpec {
            typical_s: Some(typical_s),
            ..crate::test_support::spec(id)
        };
        // Whatever its id: no table by id prefix decides beside the catalog.
        assert_eq!(seconds(published("brand.new.family", 2.5)), 2.5);
        assert_eq!(seconds(published("nn.sdpa.bf16.cudnn.d64", 0.9)), 0.9);
        assert_eq!(
            seconds(crate::test_support::spec("nn.sdpa.bf16.cudnn.d64")),
            DEFAULT_SECONDS,
            "nothing published: the default"
        );
        // The prefix rule of the examples above: a prefix ends at a dot.
        assert_eq!(longest_prefix_value(PUBLISHED, "nn.sdpax.bf16"), None);
        assert_eq!(
            longest_prefix_value(PUBLISHED, "native.copy.roundtrip.pinned.large"),
            Some(4.427)
        );
    }

    #[test]
    fn a_probe_that_publishes_its_seconds_is_estimated_by_them() {
        let published = |id: &str, typical: Option<f64>, first: bool| {
            let spec = ProbeSpec {
                typical_s: typical,
                ..spec(id)
            };
            estimated_seconds(&spec, first) - PER_PROBE_OVERHEAD_S
        };
        assert_eq!(published("sweep.add.fp32", None, false), DEFAULT_SECONDS);
        assert_eq!(published("sweep.add.fp32", Some(0.2), false), 0.2);
        // A figure that is no duration is ignored.
        assert_eq!(
            published("sweep.add.fp32", Some(f64::NAN), false),
            DEFAULT_SECONDS
        );
        assert_eq!(
            published("sweep.add.fp32", Some(-1.0), false),
            DEFAULT_SECONDS
        );
        // On an empty kernel cache the first-use table still decides for what it lists.
        assert_eq!(published("nn.sdpa.matrix.x", Some(0.5), true), 5.920);
        assert_eq!(published("nn.sdpa.matrix.x", Some(0.5), false), 0.5);
    }

    #[test]
    fn an_empty_kernel_cache_raises_only_the_compiling_probes_estimates() {
        let seconds =
            |id: &str, first: bool| estimated_seconds(&spec(id), first) - PER_PROBE_OVERHEAD_S;
        assert_eq!(seconds("nn.sdpa.bf16.cudnn.d64", true), 0.333);
        assert_eq!(seconds("nn.sdpa.matrix.fp16.default.core", true), 5.92);
        assert_eq!(
            seconds("nn.sdpa.matrix.fp16.default.core", false),
            0.548,
            "warm, the matrix probes are estimated from the warm table"
        );
        assert_eq!(
            seconds("ops.matmul.fp32", true),
            seconds("ops.matmul.fp32", false)
        );
        assert_eq!(seconds("brand.new.family", true), DEFAULT_SECONDS);
    }

    #[test]
    fn a_first_run_cuts_the_compiling_family_finer() {
        // The plan's `nn` side lane: warm (6 s) it stays whole; with an empty kernel cache
        // (23 s) it is the heaviest lane, cut so that its compilation runs on several cores.
        let tasks = plan();
        let attention_pieces = |first_use: bool| {
            sized_lanes(
                tasks.clone(),
                LaneBudget {
                    lanes: 8,
                    first_use,
                },
            )
            .iter()
            .filter(|l| l.tasks.iter().all(|t| t.spec.id.family() == "nn"))
            .count()
        };
        assert_eq!(attention_pieces(false), 1);
        assert!(attention_pieces(true) >= 3, "{}", attention_pieces(true));
        assert_eq!(
            LaneBudget::for_host(16, Some(80 << 30), true),
            LaneBudget {
                lanes: 16,
                first_use: true
            },
            "a first run compiles on every core"
        );
        assert_eq!(
            LaneBudget::for_host(16, Some(7 << 30), true).lanes,
            3,
            "but never past the memory"
        );
    }

    #[test]
    fn related_probes_stay_together_while_the_balance_allows() {
        // Two families of about equal weight (5.6 and 5.1 s), two pieces: each family
        // whole in one piece.
        let mut tasks = Vec::new();
        for i in 0..12 {
            tasks.push(task(&format!("ops.matmul.c{i}"), Placement::Shared, None));
            tasks.push(task(
                &format!("copy.roundtrip.c{i}"),
                Placement::Shared,
                None,
            ));
        }
        let lanes = sized_lanes(
            tasks,
            LaneBudget {
                lanes: 2,
                first_use: false,
            },
        );
        assert_eq!(lanes.len(), 2);
        for lane in &lanes {
            let families: std::collections::BTreeSet<&str> =
                lane.tasks.iter().map(|t| t.spec.id.family()).collect();
            assert_eq!(families.len(), 1, "{:?}", ids(lane));
        }
    }

    #[test]
    fn native_lanes_are_cut_like_python_ones() {
        let tasks: Vec<Task> = [
            "native.copy.roundtrip.pageable.large",
            "native.copy.roundtrip.pinned.large",
            "native.kernel.launch",
        ]
        .iter()
        .map(|id| Task {
            spec: ProbeSpec {
                backend: Backend::Native,
                ..spec(id)
            },
            device: DeviceRef::Gpu(0),
        })
        .collect();
        let lanes = sized_lanes(
            tasks,
            LaneBudget {
                lanes: 4,
                first_use: false,
            },
        );
        assert_eq!(
            lanes.len(),
            2,
            "two heavy copies apart, the light kernel beside one"
        );
        assert!(lanes.iter().all(|l| l.backend == Backend::Native));
    }

    #[test]
    fn native_lanes_and_other_devices_are_never_cut_together() {
        let mut tasks = plan();
        for task in tasks.iter_mut().take(20) {
            task.device = DeviceRef::Gpu(1);
        }
        tasks.push(Task {
            spec: ProbeSpec {
                backend: Backend::Native,
                ..spec("native.copy.big")
            },
            device: DeviceRef::Gpu(0),
        });
        let lanes = sized_lanes(
            tasks,
            LaneBudget {
                lanes: 6,
                first_use: false,
            },
        );
        assert!(lanes.iter().all(|l| {
            l.tasks
                .iter()
                .all(|t| t.device == l.device && t.spec.backend == l.backend)
        }));
        assert_eq!(
            lanes
                .iter()
                .filter(|l| l.backend == Backend::Native)
                .count(),
            1
        );
    }
}
