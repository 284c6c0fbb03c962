//! Real faults on a real GPU, end to end through `gpuprobe check` (feature `gpu-tests`, off by
//! default and in CI): an illegal memory access, a kernel that never ends, an out-of-memory
//! error, a worker killed by a signal, a worker that segfaults in native code and one that
//! aborts are each reported with their class, and the run goes on with the next probe on a
//! GPU that still computes the right numbers. Also: the alloc, pipeline and dist families
//! raise no false alarm on a healthy GPU.
//!
//! On a GPU host: `GPUPROBE_TEST_PYTHON=$(which python3) cargo test -p gpuprobe --features
//! gpu-tests --test it gpu_faults`, or a test binary built elsewhere with `GPUPROBE_TEST_BIN`
//! naming the gpuprobe binary to run.

use std::path::Path;
use std::process::Output;

use gpuprobe_model::Report;
use gpuprobe_model::Verdict;

use crate::support::*;

/// The probe that follows the deliberate faults in catalog order: a bit-exact round trip
/// and an exact matmul on the same GPU.
const RECOVERY: &str = "fault.recovery.roundtrip";
/// A copy probe that runs before the faults (catalog order), as the baseline. A full id
/// selects that probe alone, so the run holds exactly three probes.
const BEFORE: &str = "copy.d2d.medium.clone";

/// `gpuprobe check --json` on GPU 0 with the test interpreter, Python probes only.
fn check_gpu(run_dir: &Path, extra: &[&str]) -> (Output, Report) {
    let output = gpuprobe()
        .args([
            "check",
            "--json",
            "--device",
            "0",
            "--no-native",
            "--python",
        ])
        .arg(python())
        .arg("--run-dir")
        .arg(run_dir)
        .args(extra)
        .output()
        .expect("gpuprobe runs");
    let report = serde_json::from_slice::<Report>(&output.stdout).ok();
    let report = expect_report(&output, report);
    (output, report)
}

/// Runs one deliberate fault between the baseline and the recovery probe.
fn fault_run(fault: &str, timeout_scale: &str) -> (tempfile::TempDir, Output, Report) {
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = check_gpu(
        &dir.path().join("run"),
        &[
            "--only",
            BEFORE,
            "--only",
            fault,
            "--only",
            RECOVERY,
            "--timeout-scale",
            timeout_scale,
        ],
    );
    (dir, output, report)
}

/// Python workers the run started (one plan file each).
fn python_workers(run_dir: &Path) -> usize {
    std::fs::read_dir(run_dir.join("workers"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("plan-python-"))
                .count()
        })
        .unwrap_or(0)
}

/// The order in which results were recorded.
fn order(report: &Report) -> Vec<&str> {
    report.results.iter().map(|r| r.probe.as_str()).collect()
}

/// The baseline and the recovery probe passed, in that order around the fault.
fn assert_survived(report: &Report, fault: &str) {
    assert_eq!(order(report), [BEFORE, fault, RECOVERY]);
    assert_eq!(result(report, BEFORE).verdict, Verdict::Pass);
    assert_eq!(
        result(report, RECOVERY).verdict,
        Verdict::Pass,
        "the GPU is not usable after {fault}: {:?}",
        result(report, RECOVERY)
    );
}

#[test]
fn illegal_memory_access_loses_the_context_and_a_fresh_worker_continues() {
    let fault = "fault.illegal_address.index";
    let (dir, output, report) = fault_run(fault, "1.0");
    assert_survived(&report, fault);
    match &result(&report, fault).verdict {
        // CUDA: a device-side assert, reported as an exception; the worker then finds its
        // context unusable and exits so that a fresh one runs the recovery probe.
        Verdict::Error { message } => {
            assert!(
                message.contains("device-side assert") || message.contains("illegal"),
                "{message}"
            );
            assert_eq!(python_workers(&dir.path().join("run")), 2);
        }
        // ROCm builds without device asserts: the runtime aborts the process.
        Verdict::Crash { .. } => assert_eq!(python_workers(&dir.path().join("run")), 2),
        other => panic!("{fault}: {other:?}"),
    }
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn a_kernel_that_never_ends_is_a_hang_and_the_gpu_is_usable_after() {
    let fault = "fault.hang.kernel";
    // The fault's own timeout is 10 s; half of it is plenty.
    let (dir, output, report) = fault_run(fault, "0.5");
    assert_survived(&report, fault);
    let hung = result(&report, fault);
    let Verdict::Hang { timeout_s } = hung.verdict else {
        panic!("{fault}: {:?}", hung.verdict)
    };
    assert!((timeout_s - 5.0).abs() < 1e-6, "{timeout_s}");
    // The supervisor asked for the stacks before the kill: they name the probe function.
    assert!(
        hung.stderr_tail.iter().any(|l| l.contains("run_hang")),
        "{:?}",
        hung.stderr_tail
    );
    assert_eq!(python_workers(&dir.path().join("run")), 2);
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn out_of_memory_is_an_error_and_the_same_worker_continues() {
    let fault = "fault.oom.huge";
    let (dir, output, report) = fault_run(fault, "1.0");
    assert_survived(&report, fault);
    let Verdict::Error { message } = &result(&report, fault).verdict else {
        panic!("{fault}: {:?}", result(&report, fault).verdict)
    };
    assert!(message.contains("out of memory"), "{message}");
    // No restart: the worker caught the error and ran the next probe itself.
    assert_eq!(python_workers(&dir.path().join("run")), 1);
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn a_worker_killed_by_a_signal_is_a_crash_and_a_fresh_worker_continues() {
    let fault = "fault.signal.kill";
    let (dir, output, report) = fault_run(fault, "1.0");
    assert_survived(&report, fault);
    let Verdict::Crash { signal, .. } = result(&report, fault).verdict else {
        panic!("{fault}: {:?}", result(&report, fault).verdict)
    };
    assert_eq!(signal, Some(9));
    assert_eq!(python_workers(&dir.path().join("run")), 2);
    assert_eq!(output.status.code(), Some(1));
}

/// A worker that died of a real fault in native code while the GPU was in use: a CRASH with
/// `signal` and faulthandler's headline as its message, and a fresh worker ran the recovery.
fn assert_native_crash(fault: &str, signal: i32, headline: &str) {
    let (dir, output, report) = fault_run(fault, "1.0");
    assert_survived(&report, fault);
    let Verdict::Crash {
        signal: got,
        message,
        ..
    } = &result(&report, fault).verdict
    else {
        panic!("{fault}: {:?}", result(&report, fault).verdict)
    };
    assert_eq!(*got, Some(signal), "{message}");
    assert!(message.contains(headline), "{message}");
    assert_eq!(python_workers(&dir.path().join("run")), 2);
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn a_worker_that_segfaults_is_a_crash_with_signal_11_and_a_fresh_worker_continues() {
    assert_native_crash("fault.signal.segv", 11, "Segmentation fault");
}

#[test]
fn a_worker_that_aborts_is_a_crash_with_signal_6_and_a_fresh_worker_continues() {
    assert_native_crash("fault.signal.abort", 6, "Aborted");
}

#[test]
fn every_fault_in_one_run_each_with_its_class() {
    let dir = tempfile::tempdir().unwrap();
    let (_, report) = check_gpu(
        &dir.path().join("run"),
        &["--only", "fault", "--timeout-scale", "0.5"],
    );
    assert_eq!(
        order(&report),
        [
            "fault.illegal_address.index",
            "fault.hang.kernel",
            "fault.oom.huge",
            "fault.signal.kill",
            "fault.signal.segv",
            "fault.signal.abort",
            RECOVERY,
        ]
    );
    let labels: Vec<&str> = report.results.iter().map(|r| r.verdict.label()).collect();
    assert!(matches!(labels[0], "ERROR" | "CRASH"), "{labels:?}");
    assert_eq!(
        labels[1..],
        ["HANG", "ERROR", "CRASH", "CRASH", "CRASH", "PASS"]
    );
    let signals: Vec<Option<i32>> = report.results[3..6]
        .iter()
        .map(|r| match r.verdict {
            Verdict::Crash { signal, .. } => signal,
            _ => None,
        })
        .collect();
    assert_eq!(signals, [Some(9), Some(11), Some(6)]);
}

#[test]
fn the_new_families_raise_no_false_alarm_on_a_healthy_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let (_, report) = check_gpu(
        &dir.path().join("run"),
        &[
            "--tier", "standard", "--only", "alloc", "--only", "pipeline", "--only", "dist",
        ],
    );
    let bad: Vec<_> = report
        .results
        .iter()
        .filter(|r| !passed_or_skipped(&r.verdict))
        .collect();
    assert!(bad.is_empty(), "false alarms on a healthy GPU: {bad:#?}");
    assert!(report.summary.passed >= 15, "{:?}", report.summary);
}
