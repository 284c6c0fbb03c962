//! `check` end to end on the CPU: every probe passes with no fault, and every simulation
//! preset is detected and classified.

use gpuprobe_model::DeviceRef;
use gpuprobe_model::{ExitStatus, Severity};
use gpuprobe_model::{FailClass, Verdict};

use crate::support::*;

#[test]
fn every_quick_probe_passes_on_the_cpu_without_faults() {
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = check_json(&dir.path().join("run"), &[]);
    let report = expect_report(&output, report);
    let bad: Vec<_> = report
        .results
        .iter()
        .filter(|r| !passed_or_skipped(&r.verdict))
        .collect();
    assert!(bad.is_empty(), "false alarms on a healthy CPU: {bad:#?}");
    assert!(
        report.summary.passed >= 50,
        "only {} probes passed",
        report.summary.passed
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(report.exit_status, ExitStatus::AllPassed);
    assert!(report.simulation.is_none());
    assert!(report.results.iter().all(|r| !r.simulated));
    // Every result was recorded in the run directory as it arrived.
    let lines = std::fs::read_to_string(dir.path().join("run/results.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), report.results.len());
}

/// Runs one preset over the families it targets and returns the report.
fn simulate(preset: &str, only: &[&str]) -> (std::process::Output, gpuprobe_model::Report) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--simulate", preset, "--timeout-scale", "0.15"];
    for pattern in only {
        args.extend(["--only", pattern]);
    }
    let (output, report) = check_json(&dir.path().join("run"), &args);
    let report = expect_report(&output, report);
    assert!(report.simulation.is_some(), "report does not say SIMULATED");
    assert!(
        report.results.iter().all(|r| r.simulated),
        "a result is not marked simulated"
    );
    (output, report)
}

#[test]
fn h2d_zeros_preset_is_detected_as_all_zeros_on_pageable_copies_only() {
    let (output, report) = simulate("h2d-zeros", &["copy.h2d"]);
    assert_eq!(output.status.code(), Some(1));
    let tiny = result(&report, "copy.h2d.pageable.tiny.nonblocking");
    assert_eq!(
        tiny.verdict.fail_class(),
        Some(FailClass::AllZeros),
        "{:?}",
        tiny.verdict
    );
    let medium = result(&report, "copy.h2d.pageable.medium.blocking");
    assert_eq!(
        medium.verdict,
        Verdict::Pass,
        "copies above 64 B are not targeted"
    );
    let diag = report
        .findings
        .iter()
        .find(|f| f.id == "DIAG-COPY")
        .expect("a copy diagnosis");
    assert_eq!(diag.severity, Severity::Error);
    assert_eq!(diag.layer, gpuprobe_model::FindingLayer::Framework);
}

#[test]
fn bf16_to_fp32_preset_breaks_only_the_device_conversion() {
    let (_, report) = simulate("bf16-fp32-zeros", &["dtype.bf16.fp32", "dtype.fp32.bf16"]);
    for method in ["to", "float", "type"] {
        let r = result(&report, &format!("dtype.bf16.fp32.{method}.device"));
        assert_eq!(
            r.verdict.fail_class(),
            Some(FailClass::AllZeros),
            "{method}: {:?}",
            r.verdict
        );
    }
    assert_eq!(
        result(&report, "dtype.fp32.bf16.to.device").verdict,
        Verdict::Pass
    );
}

#[test]
fn randn_zeros_preset_fails_randn_statistics_as_zeros() {
    let (_, report) = simulate("randn-zeros", &["rng.randn*", "rng.rand."]);
    let randn = result(&report, "rng.randn.fp32");
    assert_eq!(
        randn.verdict.fail_class(),
        Some(FailClass::AllZeros),
        "{:?}",
        randn.verdict
    );
    let like = result(&report, "rng.randn_like.bf16");
    assert_eq!(
        like.verdict.fail_class(),
        Some(FailClass::AllZeros),
        "{:?}",
        like.verdict
    );
    assert_eq!(result(&report, "rng.rand.fp32").verdict, Verdict::Pass);
}

#[test]
fn crash_preset_is_a_crash_with_the_signal_and_the_fault_message_and_the_run_goes_on() {
    let (_, report) = simulate("crash", &["copy.roundtrip", "copy.h2d.pageable.tiny"]);
    let crashed = result(&report, "copy.roundtrip.pageable.large.blocking");
    let Verdict::Crash {
        signal, message, ..
    } = &crashed.verdict
    else {
        panic!("{:?}", crashed.verdict)
    };
    assert_eq!(*signal, Some(6));
    assert!(message.contains("Memory access fault"), "{message}");
    // The probes after the crash ran in a fresh worker.
    assert_eq!(
        result(&report, "copy.h2d.pageable.tiny.nonblocking").verdict,
        Verdict::Pass
    );
    assert!(report.findings.iter().any(|f| f.id == "DIAG-CRASH"));
}

#[test]
fn hang_preset_is_a_hang_and_the_run_goes_on() {
    let (_, report) = simulate("hang", &["copy.roundtrip", "copy.h2d.pageable.tiny"]);
    let hung = result(&report, "copy.roundtrip.pageable.large.blocking");
    assert!(
        matches!(hung.verdict, Verdict::Hang { .. }),
        "{:?}",
        hung.verdict
    );
    assert_eq!(
        result(&report, "copy.h2d.pageable.tiny.nonblocking").verdict,
        Verdict::Pass
    );
}

#[test]
fn every_preset_is_listed_and_resolves() {
    let output = gpuprobe()
        .args(["check", "--simulate", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    for preset in [
        "h2d-zeros",
        "bf16-fp32-zeros",
        "randn-zeros",
        "crash",
        "hang",
    ] {
        assert!(text.contains(preset), "{preset} missing from:\n{text}");
    }
}

#[test]
fn an_only_pattern_outside_the_tier_says_which_tier_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = check_json(
        &dir.path().join("run"),
        &["--only", "native.memtest.full", "--only", "no.such.probe"],
    );
    assert!(report.is_none());
    assert_eq!(output.status.code(), Some(2), "a usage error");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "--only native.memtest.full matches no probe of the quick tier; it matches probes of the soak tier (--tier soak)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("--only no.such.probe matches no probe in any tier"),
        "{stderr}"
    );
    // Nothing ran: no run directory is left behind to look like one.
    assert!(!dir.path().join("run").exists());
}

/// A GPU named with `--device` that got no verdict is not "all passed" because the CPU
/// beside it passed: exit 4 with a note that names it and says why (exit 2, "no such GPU",
/// where the framework sees GPUs and this index is past them).
#[test]
fn a_listed_gpu_that_could_not_be_tested_is_not_all_passed() {
    let dir = tempfile::tempdir().unwrap();
    let output = gpuprobe()
        .args([
            "check", "--json", "--device", "cpu,97", "--only", "copy.d2d",
        ])
        .arg("--python")
        .arg(python())
        .arg("--run-dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let report = serde_json::from_slice::<gpuprobe_model::Report>(&output.stdout).ok();
    let report = expect_report(&output, report);
    let cpu_passed = report
        .results
        .iter()
        .any(|r| r.device == DeviceRef::Cpu && r.verdict == Verdict::Pass);
    assert!(cpu_passed, "{:?}", report.results);
    let says = |words: &str| report.notes.iter().any(|n| n.starts_with(words));
    match output.status.code() {
        Some(4) => assert!(
            says("--device 97: nothing could be tested on cuda:97: "),
            "{:?}",
            report.notes
        ),
        Some(2) => assert!(says("--device 97: no such GPU"), "{:?}", report.notes),
        code => panic!("exit {code:?}: {:?}", report.notes),
    }
    assert_eq!(Some(i32::from(report.exit_code)), output.status.code());
    // `fix` from such a run has nothing proven to build on: not "nothing to fix".
    let output = gpuprobe()
        .args(["fix", "--json", "--device", "cpu,97", "--only", "copy.d2d"])
        .arg("--python")
        .arg(python())
        .arg("--run-dir")
        .arg(dir.path().join("fix"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    match output.status.code() {
        Some(4) => assert!(
            stdout.contains("--device 97: nothing could be tested on cuda:97: "),
            "{stdout}"
        ),
        Some(2) => {}
        code => panic!("fix exit {code:?}: {stdout}"),
    }
}

/// The report says where the time went: the phases add up to no more than the wall time, and
/// each lane's milestones come in order (launched, hello, first probe, last result, done).
#[test]
fn the_report_times_each_phase_and_each_lanes_milestones() {
    let (_, report) = simulate("h2d-zeros", &["copy.h2d"]);
    let timings = report.timings.expect("timings in the report");
    let phases =
        timings.prepare_s + timings.probes_s + timings.fingerprint_wait_s + timings.report_s;
    assert!(
        phases <= report.wall_s + 0.05,
        "{timings:?} vs {}",
        report.wall_s
    );
    assert!(timings.probes_s > 0.0, "{timings:?}");
    assert_eq!(
        timings.lanes.iter().map(|l| l.probes).sum::<usize>(),
        report.results.len(),
        "{timings:?}"
    );
    for lane in &timings.lanes {
        let hello = lane.first_hello_s.expect("every lane's worker said hello");
        let begin = lane.first_begin_s.expect("every lane began a probe");
        let last = lane.last_result_s.expect("every lane had a result");
        assert!(lane.workers >= 1, "{lane:?}");
        assert!(
            lane.launched_s <= hello && hello <= begin && begin <= last && last <= lane.done_s,
            "{lane:?}"
        );
    }
}
