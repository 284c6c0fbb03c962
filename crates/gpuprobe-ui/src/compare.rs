//! Two runs side by side: which (probe, device) newly fails, which was cured, which fails in
//! both, what changed in the stack fingerprint, and the KB findings of each. The "before"
//! run is the older one as the user picked them; nothing here judges which is better.

use std::collections::BTreeMap;

use gpuprobe_model::ProbeResult;
use gpuprobe_model::Report;
use serde::Serialize;

/// One (probe, device) whose verdict the comparison names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Change {
    /// The probe id.
    pub probe: String,
    /// The device (`cpu`, `0`).
    pub device: String,
    /// Its verdict before (`PASS`, `FAIL`, or `-` when it did not run).
    pub before: String,
    /// Its verdict after.
    pub after: String,
    /// The after run's detail of a problem (or the before run's, for a cure).
    pub detail: String,
}

/// One fingerprint fact that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct StackChange {
    /// What kind of fact: `driver`, `kernel`, `torch`, `libraries`, `GPU`, `host`, `other`.
    pub area: &'static str,
    /// The fact's name, dotted (`nvidia.version`).
    pub fact: String,
    /// Its value before, or empty when absent.
    pub before: String,
    /// Its value after.
    pub after: String,
}

/// One KB or diagnosis finding of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct FindingLine {
    /// Its id (`RKB-001`).
    pub id: String,
    /// `error`, `warning`, `info`.
    pub severity: String,
    /// Its title.
    pub title: String,
}

/// What differs between two runs.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Comparison {
    /// A problem after, none before (a pass, or it did not run).
    pub newly_failing: Vec<Change>,
    /// A problem before, a pass after.
    pub cured: Vec<Change>,
    /// A problem in both.
    pub still_failing: Vec<Change>,
    /// How many (probe, device) passed in both.
    pub still_passing: usize,
    /// The fingerprint facts that differ, by area.
    pub stack: Vec<StackChange>,
    /// The before run's findings.
    pub findings_before: Vec<FindingLine>,
    /// The after run's findings.
    pub findings_after: Vec<FindingLine>,
    /// Whether A was made under fault simulation (every page that shows it says SIMULATED).
    pub before_simulated: bool,
    /// Whether B was.
    pub after_simulated: bool,
}

fn key(r: &ProbeResult) -> (String, String) {
    (r.probe.to_string(), r.device.to_string())
}

fn detail(r: &ProbeResult) -> String {
    use gpuprobe_model::Verdict;
    match &r.verdict {
        Verdict::Fail { detail, .. } => detail.clone(),
        other => {
            // Each kind words its own field: `detail`, `reason`, `message`.
            let value = serde_json::to_value(other).unwrap_or_default();
            ["detail", "reason", "message"]
                .iter()
                .find_map(|k| value.get(k).and_then(|d| d.as_str().map(String::from)))
                .unwrap_or_default()
        }
    }
}

/// Whether a report was made under fault simulation.
fn simulated(report: &Report) -> bool {
    report.simulation.is_some() || report.results.iter().any(|r| r.simulated)
}

/// Compares `before` with `after`.
pub(crate) fn compare(before: &Report, after: &Report) -> Comparison {
    let earlier: BTreeMap<_, _> = before.results.iter().map(|r| (key(r), r)).collect();
    let later: BTreeMap<_, _> = after.results.iter().map(|r| (key(r), r)).collect();
    let mut out = Comparison {
        before_simulated: simulated(before),
        after_simulated: simulated(after),
        ..Comparison::default()
    };
    let change = |(probe, device): &(String, String),
                  b: Option<&&ProbeResult>,
                  a: Option<&&ProbeResult>,
                  detail_of: &ProbeResult| Change {
        probe: probe.clone(),
        device: device.clone(),
        before: b.map_or("-".into(), |r| r.verdict.label().to_string()),
        after: a.map_or("-".into(), |r| r.verdict.label().to_string()),
        detail: detail(detail_of),
    };
    for (k, a) in &later {
        let b = earlier.get(k);
        let problem_after = a.verdict.is_problem();
        let problem_before = b.is_some_and(|r| r.verdict.is_problem());
        match (problem_before, problem_after) {
            (false, true) => out.newly_failing.push(change(k, b, Some(a), a)),
            (true, true) => out.still_failing.push(change(k, b, Some(a), a)),
            (true, false) if a.verdict.label() == "PASS" => {
                out.cured
                    .push(change(k, b, Some(a), b.expect("a problem before")))
            }
            (false, false) if a.verdict.label() == "PASS" && b.is_some() => out.still_passing += 1,
            _ => {}
        }
    }
    out.stack = stack_changes(before, after);
    out.findings_before = findings(before);
    out.findings_after = findings(after);
    out
}

fn findings(report: &Report) -> Vec<FindingLine> {
    report
        .findings
        .iter()
        .map(|f| FindingLine {
            id: f.id.clone(),
            severity: serde_json::to_value(f.severity)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            title: f.title.clone(),
        })
        .collect()
}

/// Every scalar of the fingerprint, by dotted name. The kernel log lines and the facts that
/// could not be read are events of the moment, not the stack: left out.
fn flatten(report: &Report) -> BTreeMap<String, String> {
    fn walk(prefix: &str, value: &serde_json::Value, out: &mut BTreeMap<String, String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    let name = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&name, v, out);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(&format!("{prefix}.{i}"), v, out);
                }
            }
            serde_json::Value::Null => {}
            serde_json::Value::String(s) => {
                out.insert(prefix.to_string(), s.clone());
            }
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let mut out = BTreeMap::new();
    if let Ok(value) = serde_json::to_value(&report.fingerprint) {
        walk("", &value, &mut out);
    }
    out.retain(|k, _| {
        !(k.starts_with("kernel_events.") || k.starts_with("unreadable.") || k == "source")
    });
    out
}

/// Which area a fingerprint fact belongs to.
fn area(fact: &str) -> &'static str {
    let top = fact.split('.').next().unwrap_or(fact);
    match top {
        "nvidia" | "amdgpu" => "driver",
        "host" if fact.starts_with("host.kernel") => "kernel",
        "host" => "host",
        "python" if fact.starts_with("python.torch") => "torch",
        "python" | "cuda" | "rocm" | "toolchain" => "libraries",
        "gpus" => "GPU",
        _ => "other",
    }
}

const AREAS: [&str; 7] = [
    "driver",
    "kernel",
    "torch",
    "libraries",
    "GPU",
    "host",
    "other",
];

fn stack_changes(before: &Report, after: &Report) -> Vec<StackChange> {
    let (b, a) = (flatten(before), flatten(after));
    let mut facts: Vec<&String> = b.keys().chain(a.keys()).collect();
    facts.sort();
    facts.dedup();
    let mut changes: Vec<StackChange> = facts
        .into_iter()
        .filter(|f| b.get(*f) != a.get(*f))
        .map(|f| StackChange {
            area: area(f),
            fact: f.clone(),
            before: b.get(f).cloned().unwrap_or_default(),
            after: a.get(f).cloned().unwrap_or_default(),
        })
        .collect();
    changes.sort_by_key(|c| AREAS.iter().position(|a| *a == c.area));
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(results: serde_json::Value, fingerprint: serde_json::Value) -> Report {
        let mut value = serde_json::json!({
            "schema_version": 1, "tool_version": "0.1.0", "command": "check",
            "started_at": "2026-01-01T00:00:00Z", "wall_s": 1.0, "tier": "quick",
            "results": results, "findings": [], "summary": {"total": 0, "passed": 0, "failed": 0,
            "crashed": 0, "hung": 0, "errors": 0, "skipped": 0, "not_tested": 0},
            "exit_status": "all_passed", "exit_code": 0,
        });
        let mut fp =
            serde_json::to_value(gpuprobe_model::Fingerprint::default()).expect("a fingerprint");
        merge(&mut fp, fingerprint);
        value["fingerprint"] = fp;
        serde_json::from_value(value).expect("a report")
    }

    fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
        match (into, from) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    match a.get_mut(&k) {
                        Some(slot) if slot.is_object() => merge(slot, v),
                        _ => {
                            a.insert(k, v);
                        }
                    }
                }
            }
            (slot, v) => *slot = v,
        }
    }

    fn result(probe: &str, fail: bool) -> serde_json::Value {
        let verdict = if fail {
            serde_json::json!({"verdict": "fail", "class": "all_zeros", "detail": "all zeros"})
        } else {
            serde_json::json!({"verdict": "pass"})
        };
        serde_json::json!({"probe": probe, "device": "cpu", "layer": "framework", "verdict": verdict})
    }

    #[test]
    fn newly_failing_cured_and_unchanged_are_told_apart() {
        let before = report(
            serde_json::json!([
                result("a.x", false),
                result("a.y", true),
                result("a.z", true),
                result("a.w", false)
            ]),
            serde_json::json!({"host": {"kernel_release": "6.8.0"}, "nvidia": {"version": "550.1"}}),
        );
        let after = report(
            serde_json::json!([
                result("a.x", true),
                result("a.y", false),
                result("a.z", true),
                result("a.w", false),
                result("a.new", true)
            ]),
            serde_json::json!({"host": {"kernel_release": "6.8.0"}, "nvidia": {"version": "570.2"},
                "python": {"executable": "/p", "chosen_by": "x", "torch": {"version": "2.6.0"}}}),
        );
        let c = compare(&before, &after);
        let probes = |v: &[Change]| v.iter().map(|c| c.probe.clone()).collect::<Vec<_>>();
        assert_eq!(probes(&c.newly_failing), ["a.new", "a.x"]);
        assert_eq!(c.newly_failing[0].before, "-");
        assert_eq!(c.newly_failing[1].detail, "all zeros");
        assert_eq!(probes(&c.cured), ["a.y"]);
        assert_eq!(c.cured[0].detail, "all zeros");
        assert_eq!(probes(&c.still_failing), ["a.z"]);
        assert_eq!(c.still_passing, 1);
        let facts: Vec<(&str, &str, &str)> = c
            .stack
            .iter()
            .map(|s| (s.area, s.fact.as_str(), s.after.as_str()))
            .collect();
        assert_eq!(facts[0], ("driver", "nvidia.version", "570.2"));
        assert!(facts.contains(&("torch", "python.torch.version", "2.6.0")));
        assert!(!facts.iter().any(|f| f.1 == "host.kernel_release"));
    }

    #[test]
    fn a_simulated_run_is_marked_on_its_side_of_the_comparison() {
        let healthy = report(
            serde_json::json!([result("a.x", false)]),
            serde_json::json!({}),
        );
        let mut faulty = result("a.x", true);
        faulty["simulated"] = serde_json::json!(true);
        let simulated = report(serde_json::json!([faulty]), serde_json::json!({}));
        let c = compare(&healthy, &simulated);
        assert!(!c.before_simulated && c.after_simulated);
        let c = compare(&simulated, &healthy);
        assert!(c.before_simulated && !c.after_simulated);
    }
}
