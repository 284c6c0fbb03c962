//! The deliberate faults that need no GPU, end to end through `gpuprobe check --device cpu`:
//! a worker killed by SIGKILL, one that segfaults in native code and one that aborts are each
//! a CRASH with their signal, a fresh worker takes over after each, and the probe after them
//! passes. They run in every test run, so the supervisor's handling of real fatal signals is
//! proven without a GPU; the faults that need a device are in `gpu_faults.rs` (GPU hosts).

use gpuprobe_model::Verdict;

use crate::support::*;

const RECOVERY: &str = "fault.recovery.roundtrip";

#[test]
fn workers_that_die_of_a_signal_are_crashes_with_it_and_fresh_workers_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // `fault.signal` (a family prefix) names the three signal faults; deliberate faults run
    // only when named, whatever the tier.
    let (output, report) = check_json(&run, &["--only", "fault.signal", "--only", RECOVERY]);
    let report = expect_report(&output, report);
    let order: Vec<&str> = report.results.iter().map(|r| r.probe.as_str()).collect();
    assert_eq!(
        order,
        [
            "fault.signal.kill",
            "fault.signal.segv",
            "fault.signal.abort",
            RECOVERY
        ]
    );
    for (probe, expected, headline) in [
        ("fault.signal.kill", 9, ""),
        // faulthandler's headline, which the supervisor keeps as the crash's message.
        ("fault.signal.segv", 11, "Segmentation fault"),
        ("fault.signal.abort", 6, "Aborted"),
    ] {
        let Verdict::Crash {
            signal, message, ..
        } = &result(&report, probe).verdict
        else {
            panic!("{probe}: {:?}", result(&report, probe).verdict)
        };
        assert_eq!(*signal, Some(expected), "{probe}: {message}");
        assert!(message.contains(headline), "{probe}: {message}");
    }
    assert_eq!(result(&report, RECOVERY).verdict, Verdict::Pass);
    // One worker per crash plus the one that ran the recovery probe.
    let workers = std::fs::read_dir(run.join("workers"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("plan-python-"))
        .count();
    assert_eq!(workers, 4);
    assert_eq!(output.status.code(), Some(1));
}
