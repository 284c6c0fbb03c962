use gpuprobe_model::{DeviceRef, Layer, ProbeId};
use gpuprobe_model::{FailClass, ProbeResult, Verdict};
use gpuprobe_model::{Fingerprint, PythonEnv, TorchInfo};
use gpuprobe_model::{Measurement, Observation, OutputDigest};

use super::*;
use crate::test_support;

/// A node's report: `digests` are (probe, digest value) on cuda:0 from seed 1.
fn node(host: &str, torch: &str, digests: &[(&str, &str)]) -> Report {
    let mut fingerprint = Fingerprint::default();
    fingerprint.host.hostname = Some(host.into());
    fingerprint.python = Some(PythonEnv {
        torch: Some(TorchInfo {
            version: torch.into(),
            ..TorchInfo::default()
        }),
        ..PythonEnv::default()
    });
    let results = digests
        .iter()
        .map(|(probe, value)| {
            let mut r = ProbeResult::new(
                ProbeId::new(*probe),
                DeviceRef::Gpu(0),
                Layer::Framework,
                Verdict::Pass,
            );
            r.observation = Some(Observation {
                probe: ProbeId::new(*probe),
                device: DeviceRef::Gpu(0),
                measurement: Measurement::Metrics,
                metrics: Default::default(),
                notes: Vec::new(),
                output_digest: Some(Box::new(OutputDigest {
                    value: (*value).into(),
                    seed: 1,
                    outputs: 1,
                    cpu_threads: None,
                })),
            });
            r
        })
        .collect();
    test_support::report(fingerprint, results, Vec::new())
}

fn merge(reports: &[Report]) -> FleetView {
    let mut fleet = Fleet::new();
    for (i, r) in reports.iter().enumerate() {
        fleet.add(&format!("r{i}/report.json"), &format!("dir{i}"), r);
    }
    fleet.finish()
}

fn flagged(view: &FleetView) -> Vec<&str> {
    view.flagged.iter().map(|f| f.node.as_str()).collect()
}

#[test]
fn the_rule_needs_three_carriers_and_a_strict_majority() {
    assert_eq!(judge_slot(&[2]), SlotJudgement::NotEnoughPeers);
    assert_eq!(judge_slot(&[1, 1]), SlotJudgement::NotEnoughPeers);
    assert_eq!(judge_slot(&[3]), SlotJudgement::Majority(0));
    assert_eq!(judge_slot(&[1, 2]), SlotJudgement::Majority(1));
    assert_eq!(judge_slot(&[2, 2]), SlotJudgement::NoMajority, "a tie");
    assert_eq!(judge_slot(&[1, 1, 1]), SlotJudgement::NoMajority);
    assert_eq!(
        judge_slot(&[2, 1, 1]),
        SlotJudgement::NoMajority,
        "2 of 4 is no strict majority"
    );
    assert_eq!(judge_slot(&[3, 1, 1]), SlotJudgement::Majority(0));
}

#[test]
fn the_minority_node_is_flagged_and_no_other() {
    let mut reports: Vec<Report> = (1..=4)
        .map(|i| {
            node(
                &format!("n{i}"),
                "2.11",
                &[("ops.matmul.fp16", "aa"), ("nn.conv2d.bf16", "cc")],
            )
        })
        .collect();
    reports.push(node(
        "n5",
        "2.11",
        &[("ops.matmul.fp16", "ab"), ("nn.conv2d.bf16", "cc")],
    ));
    let view = merge(&reports);
    assert_eq!(flagged(&view), ["n5"]);
    let flag = &view.flagged[0];
    assert_eq!(flag.probes.len(), 1);
    assert_eq!((flag.probes[0].agree, flag.probes[0].peers), (4, 4));
    assert_eq!(flag.probes[0].majority_digest, "aa");
    assert_eq!(view.groups.len(), 1);
    assert_eq!(view.groups[0].compared, 2);
    assert_eq!(view.exit_status, ExitStatus::ProblemsFound);
    let text = render_text(&view);
    assert!(
        text.contains(
            "node n5: 1 probe's outputs differ from the 4 of 4 identical-stack peers that agree"
        ),
        "{text}"
    );
    assert!(view.nodes.iter().filter(|n| n.flagged).count() == 1);
}

#[test]
fn a_tie_and_a_group_of_two_flag_nobody() {
    let tie = merge(&[
        node("a", "2.11", &[("p", "x")]),
        node("b", "2.11", &[("p", "x")]),
        node("c", "2.11", &[("p", "y")]),
        node("d", "2.11", &[("p", "y")]),
    ]);
    assert!(tie.flagged.is_empty());
    assert_eq!((tie.groups[0].compared, tie.groups[0].no_majority), (0, 1));
    assert_eq!(tie.exit_status, ExitStatus::AllPassed);
    assert!(render_text(&tie).contains("without a strict majority: not enough peers agree"));

    let two = merge(&[
        node("a", "2.11", &[("p", "x")]),
        node("b", "2.11", &[("p", "y")]),
    ]);
    assert!(two.flagged.is_empty());
    assert_eq!(two.groups[0].not_enough_peers, 1);
    assert!(render_text(&two).contains("not enough peers (2 nodes; 3 needed)"));
}

#[test]
fn nodes_of_different_stacks_are_never_compared() {
    // Three nodes on one torch, one on another whose bits differ: two groups, no flag.
    let view = merge(&[
        node("a", "2.11", &[("p", "x")]),
        node("b", "2.11", &[("p", "x")]),
        node("c", "2.11", &[("p", "x")]),
        node("d", "2.12", &[("p", "z")]),
        node("e", "2.12", &[("p", "w")]),
    ]);
    assert!(view.flagged.is_empty(), "{:?}", view.flagged);
    assert_eq!(view.groups.len(), 2);
    assert_eq!(view.groups[1].differs_from_largest, ["torch"]);
    assert_eq!(view.groups[1].nodes, ["d", "e"]);
    // A digest from another seed is another slot: never compared with seed 1's.
    let mut other_seed = node("f", "2.11", &[("p", "q")]);
    if let Some(o) = other_seed.results[0].observation.as_mut() {
        o.output_digest.as_mut().unwrap().seed = 2;
    }
    // Nor one computed with another number of CPU threads.
    let mut other_threads = node("g", "2.11", &[("p", "r")]);
    if let Some(o) = other_threads.results[0].observation.as_mut() {
        o.output_digest.as_mut().unwrap().cpu_threads = Some(3);
    }
    let view = merge(&[
        node("a", "2.11", &[("p", "x")]),
        node("b", "2.11", &[("p", "x")]),
        node("c", "2.11", &[("p", "x")]),
        other_seed,
        other_threads,
    ]);
    assert!(view.flagged.is_empty());
}

#[test]
fn the_stack_key_ignores_host_name_and_per_node_variables() {
    let mut a = node("a", "2.11", &[]);
    let mut b = node("b", "2.11", &[]);
    a.fingerprint
        .env
        .insert("CUDA_VISIBLE_DEVICES".into(), "0".into());
    b.fingerprint
        .env
        .insert("CUDA_VISIBLE_DEVICES".into(), "3".into());
    b.started_at = "2027-01-01T00:00:00Z".into();
    assert_eq!(stack_key(&a), stack_key(&b));
    b.fingerprint
        .env
        .insert("NVIDIA_TF32_OVERRIDE".into(), "0".into());
    assert_ne!(
        stack_key(&a),
        stack_key(&b),
        "a variable that steers kernels splits the group"
    );
}

#[test]
fn the_newest_report_of_a_node_counts() {
    let mut old = node("a", "2.11", &[("p", "bad")]);
    old.started_at = "2026-01-01T00:00:00Z".into();
    let mut new = node("a", "2.11", &[("p", "x")]);
    new.started_at = "2026-02-01T00:00:00Z".into();
    let peers = [
        node("b", "2.11", &[("p", "x")]),
        node("c", "2.11", &[("p", "x")]),
    ];
    for order in [[&old, &new], [&new, &old]] {
        let mut fleet = Fleet::new();
        for r in order.into_iter().chain(peers.iter()) {
            fleet.add("src", "fallback", r);
        }
        let view = fleet.finish();
        assert!(
            view.flagged.is_empty(),
            "the older report's digest must not count"
        );
        assert_eq!(view.nodes.len(), 3);
        assert_eq!(view.older_reports, 1);
        assert_eq!(view.reports_read, 4);
        assert!(render_text(&view).contains("the newest report of each node counts"));
    }
}

#[test]
fn failures_unreadable_reports_and_simulation_are_shown() {
    let mut bad = node("b", "2.11", &[("p", "x")]);
    bad.results.push(ProbeResult::new(
        ProbeId::new("copy.h2d"),
        DeviceRef::Gpu(0),
        Layer::Framework,
        Verdict::Fail {
            class: FailClass::AllZeros,
            detail: "zeros".into(),
        },
    ));
    bad.summary = Summary::of(&bad.results);
    bad.exit_code = 1;
    let mut sim = node("<script>s</script>", "2.11", &[("p", "x")]);
    sim.results[0].simulated = true;
    let mut fleet = Fleet::new();
    fleet.add("a", "a", &node("a", "2.11", &[("p", "x")]));
    fleet.add("b", "b", &bad);
    fleet.add("s", "s", &sim);
    fleet.add_unreadable("broken/report.json", "not a gpuprobe report: EOF");
    let view = fleet.finish();
    assert_eq!(view.exit_status, ExitStatus::ProblemsFound);
    assert_eq!(view.failing.len(), 1);
    assert_eq!(view.failing[0].nodes[0].node, "b");
    assert_eq!(view.simulated_nodes, 1);
    let text = render_text(&view);
    for needle in [
        "copy.h2d on cuda:0: 1 node of 3: b (FAIL)",
        "SIMULATED",
        "broken/report.json: not a gpuprobe report: EOF",
        "1 report unreadable",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
    let page = html::render(&view).unwrap();
    assert!(page.contains("SIMULATED"));
    assert!(page.contains("&lt;script&gt;"), "node names are escaped");
    assert!(!page.contains("<script>"));
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["exit_code"], 1);
    assert_eq!(json["nodes"][0]["name"], "<script>s</script>");
    assert_eq!(json["nodes"][0]["simulated"], true);
}

#[test]
fn a_node_without_a_host_name_goes_by_its_directory() {
    let mut r = node("x", "2.11", &[]);
    r.fingerprint.host.hostname = None;
    assert_eq!(Fleet::node_name(&r, "node-7"), "node-7");
}

#[test]
fn thousands_of_reports_merge_into_small_state() {
    // 3000 nodes in 3 stacks, 8 digests each, one corrupted node per stack.
    let probes: Vec<String> = (0..8).map(|i| format!("ops.p{i}")).collect();
    let mut fleet = Fleet::new();
    for i in 0..3000 {
        let torch = ["2.10", "2.11", "2.12"][i % 3];
        let corrupt = i < 3;
        let digests: Vec<(&str, &str)> = probes
            .iter()
            .map(|p| {
                (
                    p.as_str(),
                    if corrupt && p == "ops.p3" {
                        "bad"
                    } else {
                        "good"
                    },
                )
            })
            .collect();
        let report = node(&format!("node{i:04}"), torch, &digests);
        fleet.add("src", "dir", &report);
    }
    // What is kept per node: the interned digests, no report.
    assert_eq!(fleet.values.values.len(), 2);
    assert_eq!(fleet.slots.values.len(), 8);
    assert_eq!(fleet.stacks.values.len(), 3);
    let view = fleet.finish();
    assert_eq!(flagged(&view), ["node0000", "node0001", "node0002"]);
    assert_eq!(view.groups.len(), 3);
    assert!(view.groups.iter().all(|g| g.compared == 8));
    let text = render_text(&view);
    assert!(
        text.contains("not listed"),
        "healthy nodes are not listed one by one"
    );
    assert!(text.lines().count() < 100);
}
