//! `gpuprobe fleet`: many nodes' reports merged into one view. Nodes are grouped by their
//! stack ([`stack_key`]: what must be identical for two nodes to compute identical bits);
//! the view says which probes fail on which nodes, and runs the **cross-node
//! differential**: a node whose output digests (docs/probes.md, "Output digests") differ
//! from those of the majority of its identical-stack peers is flagged, even when every
//! value it computed passed its tolerance.
//!
//! Reports are handed over one at a time ([`Fleet::add`]; the caller reads them through the
//! runner) and only what the views need is kept: per node its name, stack, verdict counts,
//! failing probes (at most [`MAX_PROBLEMS_KEPT`] named) and digests as small interned
//! numbers. Memory grows with nodes × digested probes, never with the size of a report.
//!
//! The differential's rule ([`judge_slot`]): one probe's digest on one device from one seed
//! is judged within a stack group only when at least [`MIN_PEERS`] nodes carry it and a
//! strict majority of them agree; a node outside that majority is flagged. Ties, groups
//! with fewer nodes and digests fewer nodes carry are "not enough peers": never a flag.
//! Nodes of different stacks are never compared.
//!
//! Rendering: [`render_text`] (terminal), [`html::render`] (one offline page), and the
//! [`FleetView`] itself serialized as JSON.

use std::collections::{BTreeMap, HashMap};

use gpuprobe_model::Summary;
use gpuprobe_model::Tier;
use gpuprobe_model::{ExitStatus, Report};
use serde::Serialize;

pub(crate) mod html;
mod terminal;
#[cfg(test)]
mod tests;

pub use terminal::render as render_text;

/// Nodes that must carry a digest before it is judged (two can only disagree, never out-vote).
pub(crate) const MIN_PEERS: usize = 3;
/// Failing probes named per node (the count is always kept).
pub(crate) const MAX_PROBLEMS_KEPT: usize = 100;

/// What must be identical for two nodes' outputs to be comparable bit for bit: GPU models,
/// drivers, the CUDA or ROCm userspace and its libraries, the framework build, the Python
/// packages that carry kernels, the CPU model (for the CPU device and host-side code),
/// gpuprobe's own version (the probes' inputs) and the environment variables that steer
/// kernels. Not the host name, the time, the GPU count or which GPUs a job sees.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub(crate) struct StackKey {
    /// Fact name → value; a fact that could not be read is absent.
    pub facts: BTreeMap<String, String>,
}

/// Environment variables that differ from node to node (or job to job) without changing
/// the kernels a device runs.
fn per_node_variable(name: &str) -> bool {
    name.ends_with("_VISIBLE_DEVICES") || name == "CUDA_DEVICE_ORDER" || name.starts_with("SLURM_")
}

/// The stack key of a report (see [`StackKey`]).
pub(crate) fn stack_key(report: &Report) -> StackKey {
    let fp = &report.fingerprint;
    let mut facts = BTreeMap::new();
    let mut put = |name: &str, value: Option<String>| {
        if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
            facts.insert(name.to_string(), value);
        }
    };
    let mut gpus: Vec<String> = fp
        .gpus
        .iter()
        .map(|g| {
            let mut model = g.name.clone().unwrap_or_else(|| {
                format!(
                    "{:?} {}",
                    g.vendor,
                    g.pci_device_id.as_deref().unwrap_or("?")
                )
            });
            if let Some(cc) = &g.compute_capability {
                model.push_str(&format!(" (sm {cc})"));
            } else if let Some(isa) = g.effective_isa() {
                model.push_str(&format!(" ({isa})"));
            }
            model
        })
        .collect();
    gpus.sort();
    gpus.dedup();
    put(
        "gpus",
        Some(if gpus.is_empty() {
            "none".into()
        } else {
            gpus.join(", ")
        }),
    );
    put(
        "nvidia_driver",
        fp.nvidia.as_ref().and_then(|n| n.version.clone()),
    );
    put(
        "amdgpu_driver",
        fp.amdgpu.as_ref().map(|a| {
            format!("{:?} {}", a.source, a.version.as_deref().unwrap_or(""))
                .trim()
                .to_string()
        }),
    );
    put(
        "cuda",
        fp.cuda.as_ref().and_then(|c| c.runtime_version.clone()),
    );
    put(
        "rocm",
        fp.rocm.as_ref().map(|r| {
            format!(
                "{} hip {}",
                r.version.as_deref().unwrap_or("?"),
                r.hip_version.as_deref().unwrap_or("?")
            )
        }),
    );
    let mut components: Vec<String> = fp
        .cuda
        .iter()
        .flat_map(|c| c.components.iter())
        .chain(fp.rocm.iter().flat_map(|r| r.components.iter()))
        .map(|c| format!("{}={}", c.name, c.version))
        .collect();
    components.sort();
    components.dedup();
    put("gpu_libraries", Some(components.join(" ")));
    if let Some(python) = &fp.python {
        put("python", python.version.clone());
        if let Some(torch) = &python.torch {
            let mut text = torch.version.clone();
            for (what, value) in [
                ("git", &torch.git_version),
                ("cuda", &torch.cuda),
                ("hip", &torch.hip),
                ("cudnn", &torch.cudnn_runtime),
                ("nccl", &torch.nccl_runtime),
            ] {
                if let Some(value) = value {
                    text.push_str(&format!(" {what} {value}"));
                }
            }
            put("torch", Some(text));
            put(
                "torch_cpu_capability",
                torch.build.as_ref().and_then(|b| b.cpu_capability.clone()),
            );
        }
        put(
            "packages",
            Some(
                python
                    .packages
                    .iter()
                    .map(|(name, version)| format!("{name}={version}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
        );
    }
    let cpu = fp.host.cpu.as_ref().and_then(|c| {
        let parts: Vec<&str> = [&c.vendor_id, &c.family, &c.model]
            .into_iter()
            .filter_map(|p| p.as_deref())
            .collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    });
    put(
        "cpu",
        match (&fp.host.cpu_model, cpu) {
            (Some(model), Some(ids)) => Some(format!("{model} ({ids})")),
            (model, ids) => model.clone().or(ids),
        },
    );
    put(
        "gpuprobe",
        Some(match &report.build {
            Some(build) => format!("{} {}", report.tool_version, build.commit),
            None => report.tool_version.clone(),
        }),
    );
    put(
        "environment",
        Some(
            fp.env
                .iter()
                .filter(|(name, _)| !per_node_variable(name))
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join(" "),
        ),
    );
    StackKey { facts }
}

impl StackKey {
    /// A short line naming the stack: GPUs, driver, CUDA or ROCm, torch.
    pub(crate) fn label(&self) -> String {
        let fact = |name: &str| self.facts.get(name).map(String::as_str);
        let mut parts = Vec::new();
        match fact("gpus") {
            Some("none") | None => {
                parts.push("no GPU".to_string());
                if let Some(cpu) = fact("cpu") {
                    parts.push(format!("CPU {cpu}"));
                }
            }
            Some(gpus) => parts.push(gpus.to_string()),
        }
        if let Some(driver) = fact("nvidia_driver") {
            parts.push(format!("driver {driver}"));
        }
        if let Some(driver) = fact("amdgpu_driver") {
            parts.push(format!("amdgpu {driver}"));
        }
        if let Some(cuda) = fact("cuda") {
            parts.push(format!("CUDA {cuda}"));
        }
        if let Some(rocm) = fact("rocm") {
            parts.push(format!("ROCm {rocm}"));
        }
        if let Some(torch) = fact("torch") {
            let version = torch.split(' ').next().unwrap_or(torch);
            parts.push(format!("torch {version}"));
        }
        parts.join(" · ")
    }

    /// The facts whose values differ from `other`'s (one missing on either side included).
    pub(crate) fn differences(&self, other: &StackKey) -> Vec<String> {
        let mut names: Vec<&String> = self.facts.keys().chain(other.facts.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter(|name| self.facts.get(*name) != other.facts.get(*name))
            .cloned()
            .collect()
    }
}

/// One probe on one device from one seed (on the CPU device: with one thread count): the
/// unit whose digests are compared.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Slot {
    probe: String,
    device: String,
    seed: u64,
    cpu_threads: Option<u32>,
}

/// Interns values so that each node keeps small numbers, not strings.
#[derive(Debug)]
struct Interner<T> {
    ids: HashMap<T, u32>,
    values: Vec<T>,
}

impl<T: Clone + Eq + std::hash::Hash> Interner<T> {
    fn new() -> Self {
        Interner {
            ids: HashMap::new(),
            values: Vec::new(),
        }
    }

    fn id(&mut self, value: &T) -> u32 {
        if let Some(id) = self.ids.get(value) {
            return *id;
        }
        let id = u32::try_from(self.values.len()).unwrap_or(u32::MAX);
        self.ids.insert(value.clone(), id);
        self.values.push(value.clone());
        id
    }

    fn get(&self, id: u32) -> &T {
        &self.values[id as usize]
    }
}

/// One node, as kept while reports stream in.
#[derive(Debug)]
struct Node {
    source: String,
    started_at: String,
    stack: u32,
    simulated: bool,
    tier: Tier,
    summary: Summary,
    exit_code: u8,
    problems: Vec<(String, String, &'static str)>,
    problems_total: usize,
    digests: Vec<(u32, u32)>,
    older_reports: usize,
}

/// The merge in progress: hand it reports one by one, then [`Fleet::finish`].
#[derive(Debug)]
pub struct Fleet {
    nodes: BTreeMap<String, Node>,
    stacks: Interner<StackKey>,
    slots: Interner<Slot>,
    values: Interner<String>,
    unreadable: Vec<UnreadableReport>,
    reports_read: usize,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet::new()
    }
}

impl Fleet {
    /// An empty merge.
    pub fn new() -> Fleet {
        Fleet {
            nodes: BTreeMap::new(),
            stacks: Interner::new(),
            slots: Interner::new(),
            values: Interner::new(),
            unreadable: Vec::new(),
            reports_read: 0,
        }
    }

    /// The name a report's node goes by: its fingerprint's host name, else `fallback` (the
    /// directory or file it was found in).
    pub fn node_name(report: &Report, fallback: &str) -> String {
        report
            .fingerprint
            .host
            .hostname
            .clone()
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| fallback.to_string())
    }

    /// Takes one report, found at `source`. Of several reports of one node the newest
    /// (by start time; the first read on a tie) counts and the others are counted as older.
    pub fn add(&mut self, source: &str, fallback_name: &str, report: &Report) {
        self.reports_read += 1;
        let name = Fleet::node_name(report, fallback_name);
        let older_reports = match self.nodes.get(&name) {
            Some(kept) if kept.started_at.as_str() >= report.started_at.as_str() => {
                if let Some(kept) = self.nodes.get_mut(&name) {
                    kept.older_reports += 1;
                }
                return;
            }
            Some(kept) => kept.older_reports + 1,
            None => 0,
        };
        let stack = self.stacks.id(&stack_key(report));
        let mut problems = Vec::new();
        let mut problems_total = 0;
        let mut digests = Vec::new();
        for result in &report.results {
            let device = result.device.torch_name();
            if result.verdict.is_problem() {
                problems_total += 1;
                if problems.len() < MAX_PROBLEMS_KEPT {
                    problems.push((
                        result.probe.0.clone(),
                        device.clone(),
                        result.verdict.label(),
                    ));
                }
            }
            if let Some(digest) = result
                .observation
                .as_ref()
                .and_then(|o| o.output_digest.as_ref())
            {
                let slot = self.slots.id(&Slot {
                    probe: result.probe.0.clone(),
                    device,
                    seed: digest.seed,
                    cpu_threads: digest.cpu_threads,
                });
                digests.push((slot, self.values.id(&digest.value)));
            }
        }
        let simulated = report.simulation.is_some() || report.results.iter().any(|r| r.simulated);
        self.nodes.insert(
            name,
            Node {
                source: source.to_string(),
                started_at: report.started_at.clone(),
                stack,
                simulated,
                tier: report.tier,
                summary: report.summary,
                exit_code: report.exit_code,
                problems,
                problems_total,
                digests,
                older_reports,
            },
        );
    }

    /// Records a report that could not be read; the merge goes on without it.
    pub fn add_unreadable(&mut self, source: &str, reason: &str) {
        self.unreadable.push(UnreadableReport {
            source: source.to_string(),
            reason: reason.to_string(),
        });
    }

    /// Whether nothing at all was handed over (no report, readable or not).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.unreadable.is_empty()
    }

    /// Groups the nodes, judges every digest and returns the views' model.
    pub fn finish(self) -> FleetView {
        let Fleet {
            nodes,
            stacks,
            slots,
            values,
            unreadable,
            reports_read,
        } = self;
        let names: Vec<&String> = nodes.keys().collect();
        // Stack groups, largest first (then by label): group numbers are stable for one input.
        let mut members: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (index, node) in nodes.values().enumerate() {
            members.entry(node.stack).or_default().push(index);
        }
        let mut order: Vec<(u32, Vec<usize>)> = members.into_iter().collect();
        order.sort_by(|a, b| {
            b.1.len()
                .cmp(&a.1.len())
                .then_with(|| stacks.get(a.0).label().cmp(&stacks.get(b.0).label()))
                .then_with(|| stacks.get(a.0).cmp(stacks.get(b.0)))
        });
        let mut group_of_node = vec![0usize; nodes.len()];
        let node_list: Vec<&Node> = nodes.values().collect();
        let mut groups = Vec::new();
        let mut flags: BTreeMap<usize, Vec<DifferingOutput>> = BTreeMap::new();
        let largest = order.first().map(|(stack, _)| stacks.get(*stack).clone());
        for (number, (stack, indices)) in order.iter().enumerate() {
            let key = stacks.get(*stack);
            for &i in indices {
                group_of_node[i] = number + 1;
            }
            // slot → digest value → nodes holding it.
            let mut by_slot: BTreeMap<u32, BTreeMap<u32, Vec<usize>>> = BTreeMap::new();
            for &i in indices {
                for &(slot, value) in &node_list[i].digests {
                    by_slot
                        .entry(slot)
                        .or_default()
                        .entry(value)
                        .or_default()
                        .push(i);
                }
            }
            let mut compared = 0;
            let mut not_enough_peers = 0;
            let mut no_majority = 0;
            for (slot, holders) in &by_slot {
                let counts: Vec<usize> = holders.values().map(Vec::len).collect();
                match judge_slot(&counts) {
                    SlotJudgement::NotEnoughPeers => not_enough_peers += 1,
                    SlotJudgement::NoMajority => no_majority += 1,
                    SlotJudgement::Majority(winner) => {
                        compared += 1;
                        let carriers: usize = counts.iter().sum();
                        let (majority_value, agreeing) = holders
                            .iter()
                            .nth(winner)
                            .map(|(value, nodes)| (*value, nodes.len()))
                            .unwrap_or((0, 0));
                        for (value, holders_of_value) in holders {
                            if *value == majority_value {
                                continue;
                            }
                            let slot = slots.get(*slot);
                            for &i in holders_of_value {
                                flags.entry(i).or_default().push(DifferingOutput {
                                    probe: slot.probe.clone(),
                                    device: slot.device.clone(),
                                    seed: slot.seed,
                                    digest: values.get(*value).clone(),
                                    majority_digest: values.get(majority_value).clone(),
                                    agree: agreeing,
                                    peers: carriers - 1,
                                });
                            }
                        }
                    }
                }
            }
            groups.push(GroupView {
                group: number + 1,
                label: key.label(),
                facts: key.facts.clone(),
                differs_from_largest: match &largest {
                    Some(largest) if number > 0 => key.differences(largest),
                    _ => Vec::new(),
                },
                nodes: indices.iter().map(|&i| names[i].clone()).collect(),
                compared,
                not_enough_peers,
                no_majority,
            });
        }
        let flagged: Vec<FlaggedNode> = flags
            .into_iter()
            .map(|(i, mut probes)| {
                probes.sort_by(|a, b| (&a.probe, &a.device).cmp(&(&b.probe, &b.device)));
                FlaggedNode {
                    node: names[i].clone(),
                    group: group_of_node[i],
                    simulated: node_list[i].simulated,
                    probes,
                }
            })
            .collect();
        let mut failing: BTreeMap<(String, String), Vec<FailingNode>> = BTreeMap::new();
        for (i, node) in node_list.iter().enumerate() {
            for (probe, device, verdict) in &node.problems {
                failing
                    .entry((probe.clone(), device.clone()))
                    .or_default()
                    .push(FailingNode {
                        node: names[i].clone(),
                        verdict,
                    });
            }
        }
        let mut failing: Vec<FailingProbe> = failing
            .into_iter()
            .map(|((probe, device), nodes)| FailingProbe {
                probe,
                device,
                nodes,
            })
            .collect();
        failing.sort_by_key(|p| std::cmp::Reverse(p.nodes.len()));
        let node_views: Vec<NodeView> = node_list
            .iter()
            .enumerate()
            .map(|(i, node)| NodeView {
                name: names[i].clone(),
                source: node.source.clone(),
                started_at: node.started_at.clone(),
                tier: node.tier,
                group: group_of_node[i],
                simulated: node.simulated,
                exit_code: node.exit_code,
                summary: node.summary,
                problems: node
                    .problems
                    .iter()
                    .map(|(probe, device, verdict)| format!("{probe} on {device}: {verdict}"))
                    .collect(),
                problems_total: node.problems_total,
                digests: node.digests.len(),
                older_reports: node.older_reports,
                flagged: flagged.iter().any(|f| f.node == *names[i]),
            })
            .collect();
        let problems = !flagged.is_empty()
            || !unreadable.is_empty()
            || node_views.iter().any(|n| n.exit_code != 0);
        let exit_status = if problems {
            ExitStatus::ProblemsFound
        } else {
            ExitStatus::AllPassed
        };
        FleetView {
            reports_read,
            older_reports: node_views.iter().map(|n| n.older_reports).sum(),
            simulated_nodes: node_views.iter().filter(|n| n.simulated).count(),
            nodes: node_views,
            groups,
            failing,
            flagged,
            unreadable,
            exit_status,
            exit_code: exit_status.code(),
        }
    }
}

/// How one digest slot of one group was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotJudgement {
    /// Fewer than [`MIN_PEERS`] nodes carry it: nothing is judged.
    NotEnoughPeers,
    /// Enough carriers, but no value is held by more than half of them (a tie): nothing is
    /// judged.
    NoMajority,
    /// The value at this index (of the counts given) is held by a strict majority: the
    /// holders of every other value are flagged.
    Majority(usize),
}

/// The differential's rule, given how many nodes hold each distinct digest of one slot.
pub(crate) fn judge_slot(counts: &[usize]) -> SlotJudgement {
    let carriers: usize = counts.iter().sum();
    if carriers < MIN_PEERS {
        return SlotJudgement::NotEnoughPeers;
    }
    match counts.iter().enumerate().max_by_key(|(_, c)| **c) {
        Some((index, &count)) if 2 * count > carriers => SlotJudgement::Majority(index),
        _ => SlotJudgement::NoMajority,
    }
}

/// The merged view: what the terminal, HTML and JSON outputs show.
#[derive(Debug, Clone, Serialize)]
pub struct FleetView {
    /// Readable reports taken, older ones of a node included.
    pub reports_read: usize,
    /// Reports left out because a newer report of the same node was there.
    pub older_reports: usize,
    /// Nodes whose report was made under fault simulation (SIMULATED).
    pub simulated_nodes: usize,
    /// One entry per node, by name.
    pub nodes: Vec<NodeView>,
    /// Stack groups, largest first.
    pub groups: Vec<GroupView>,
    /// Probes that failed somewhere, with the nodes where, most widespread first.
    pub failing: Vec<FailingProbe>,
    /// Nodes whose outputs differ from the majority of their identical-stack peers.
    pub flagged: Vec<FlaggedNode>,
    /// Reports that could not be read.
    pub unreadable: Vec<UnreadableReport>,
    /// What the exit code says.
    pub exit_status: ExitStatus,
    /// The exit code (docs/exit-codes.md, `gpuprobe fleet`).
    pub exit_code: u8,
}

/// One node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeView {
    /// Host name, or the directory or file its report was found in.
    pub name: String,
    /// Where its report was read.
    pub source: String,
    /// When its run started.
    pub started_at: String,
    /// The tier it ran.
    pub tier: Tier,
    /// Its stack group's number.
    pub group: usize,
    /// Made under fault simulation.
    pub simulated: bool,
    /// The exit code its check earned.
    pub exit_code: u8,
    /// Its verdict counts.
    pub summary: Summary,
    /// Its failing probe runs (`probe on device: VERDICT`), at most [`MAX_PROBLEMS_KEPT`].
    pub problems: Vec<String>,
    /// How many probe runs failed in all.
    pub problems_total: usize,
    /// Output digests its report carries.
    pub digests: usize,
    /// Older reports of this node that were left out.
    pub older_reports: usize,
    /// Its outputs differ from the majority of its identical-stack peers.
    pub flagged: bool,
}

/// One stack group.
#[derive(Debug, Clone, Serialize)]
pub struct GroupView {
    /// Its number (1: the largest).
    pub group: usize,
    /// A short name of the stack.
    pub label: String,
    /// The stack key's facts.
    pub facts: BTreeMap<String, String>,
    /// The facts in which it differs from the largest group (empty for that one).
    pub differs_from_largest: Vec<String>,
    /// Its nodes, by name.
    pub nodes: Vec<String>,
    /// Digest slots (probe, device, seed) judged: carried by enough nodes, with a majority.
    pub compared: usize,
    /// Digest slots carried by fewer than [`MIN_PEERS`] nodes: not judged.
    pub not_enough_peers: usize,
    /// Digest slots without a strict majority (a tie): not judged.
    pub no_majority: usize,
}

/// A probe that failed on some nodes.
#[derive(Debug, Clone, Serialize)]
pub struct FailingProbe {
    /// The probe id.
    pub probe: String,
    /// The device.
    pub device: String,
    /// Where, with which verdict.
    pub nodes: Vec<FailingNode>,
}

/// One node where a probe failed.
#[derive(Debug, Clone, Serialize)]
pub struct FailingNode {
    /// The node.
    pub node: String,
    /// FAIL, CRASH, HANG or ERROR.
    pub verdict: &'static str,
}

/// A node flagged by the differential.
#[derive(Debug, Clone, Serialize)]
pub struct FlaggedNode {
    /// The node.
    pub node: String,
    /// Its stack group.
    pub group: usize,
    /// Its report was made under fault simulation.
    pub simulated: bool,
    /// Each output that differs.
    pub probes: Vec<DifferingOutput>,
}

/// One probe's outputs that differ from the majority of the node's peers.
#[derive(Debug, Clone, Serialize)]
pub struct DifferingOutput {
    /// The probe id.
    pub probe: String,
    /// The device.
    pub device: String,
    /// The seed of the inputs.
    pub seed: u64,
    /// This node's digest.
    pub digest: String,
    /// The digest the majority holds.
    pub majority_digest: String,
    /// Peers holding the majority digest.
    pub agree: usize,
    /// Peers of the group carrying a digest of this probe (the node itself not counted).
    pub peers: usize,
}

/// A report that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct UnreadableReport {
    /// Where.
    pub source: String,
    /// Why.
    pub reason: String,
}
