//! `gpuprobe fleet`: five nodes made from real CPU checks (two healthy runs, each copied to
//! two nodes, and one run under the `gemm-conv-lowbit` preset, whose every probe passes),
//! their host names set by a fixture step on the copied reports. The differential flags
//! exactly the corrupted node; a corrupt report is listed and does not stop the merge; the
//! healthy nodes alone exit 0.

use std::path::Path;

use crate::support::*;

/// The probes run: the quick tier's GEMMs, convolution and float reduction (all digested).
const ONLY: [&str; 6] = [
    "--tier",
    "quick",
    "--only",
    "ops.matmul.*",
    "--only",
    "nn.conv2d.*",
];

/// Runs one check into `run_dir` (plus `extra`), and returns its report's JSON.
fn checked(run_dir: &Path, extra: &[&str]) -> serde_json::Value {
    let args: Vec<&str> = ONLY.iter().copied().chain(extra.iter().copied()).collect();
    let (output, report) = check_json(run_dir, &args);
    let report = expect_report(&output, report);
    assert_eq!(
        report.exit_code, 0,
        "every probe passes, the simulated run's too"
    );
    serde_json::from_slice(&std::fs::read(run_dir.join("report.json")).unwrap()).unwrap()
}

/// A node's run directory holding `report` under the host name `host` (the fixture step).
fn node(root: &Path, host: &str, report: &serde_json::Value) {
    let mut report = report.clone();
    report["fingerprint"]["host"]["hostname"] = serde_json::json!(host);
    let dir = root.join(host);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("report.json"), report.to_string()).unwrap();
}

#[test]
fn the_differential_flags_the_corrupted_node_and_no_healthy_one() {
    let tmp = tempfile::tempdir().unwrap();
    let first = checked(&tmp.path().join("run-a"), &[]);
    let second = checked(&tmp.path().join("run-b"), &[]);
    let lowbit = checked(
        &tmp.path().join("run-c"),
        &["--simulate", "gemm-conv-lowbit"],
    );
    let nodes = tmp.path().join("nodes");
    node(&nodes, "node-1", &first);
    node(&nodes, "node-2", &second);
    node(&nodes, "node-3", &first);
    node(&nodes, "node-4", &second);

    // The healthy nodes alone: compared, nothing flagged, exit 0.
    let healthy = gpuprobe().arg("fleet").arg(&nodes).output().unwrap();
    let text = String::from_utf8_lossy(&healthy.stdout);
    assert_eq!(healthy.status.code(), Some(0), "{text}");
    assert!(text.contains("no node flagged"), "{text}");
    assert!(
        text.contains("differential: 3 probe outputs compared"),
        "{text}"
    );

    node(&nodes, "node-5", &lowbit);
    std::fs::write(nodes.join("truncated.json"), "{\"schema_version\": 1,").unwrap();
    let json = tmp.path().join("out/fleet.json");
    let html = tmp.path().join("out/fleet.html");
    let output = gpuprobe()
        .arg("fleet")
        .arg(&nodes)
        .arg("--json")
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "node node-5 SIMULATED: 3 probes' outputs differ from the 4 of 4 identical-stack peers that agree"
        ),
        "{text}"
    );
    let view: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let flagged: Vec<&str> = view["flagged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["node"].as_str().unwrap())
        .collect();
    assert_eq!(flagged, ["node-5"]);
    assert_eq!(view["nodes"].as_array().unwrap().len(), 5);
    assert_eq!(view["simulated_nodes"], 1);
    assert_eq!(view["unreadable"].as_array().unwrap().len(), 1);
    assert!(
        text.contains("truncated.json: not a gpuprobe report"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("SIMULATED") && page.contains("FLAGGED"));

    // Nothing found at all is a usage error.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let none = gpuprobe().arg("fleet").arg(&empty).output().unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no gpuprobe report found"));
}
