//! Workers forked from the zygote (`gpuprobe_runner::zygote`) behave as spawned ones: a
//! worker killed by a signal is a CRASH with that signal and a fresh (forked) worker goes
//! on, the thread cap reaches torch, and `GPUPROBE_ZYGOTE=0` starts every worker the
//! ordinary way with the same verdicts. `GPUPROBE_ZYGOTE=1` makes the test independent of
//! this host's cores (on its own the zygote is used only where more workers than cores
//! would import torch at once).

use std::path::Path;

use gpuprobe_model::Report;
use gpuprobe_model::Verdict;

use crate::support::*;

/// Two Python lanes on the CPU (the tiny copies are a side lane of their own), so the run
/// starts a zygote; the signal faults kill three of its forked workers.
const PROBES: &[&str] = &[
    "--only",
    "fault.signal",
    "--only",
    "fault.recovery.roundtrip",
    "--only",
    "copy.h2d.pageable.tiny.*",
];

fn worker_logs(run: &Path) -> Vec<String> {
    let mut logs = Vec::new();
    for lane in std::fs::read_dir(run.join("workers")).unwrap().flatten() {
        if lane.path().is_dir() {
            for log in std::fs::read_dir(lane.path()).unwrap().flatten() {
                logs.push(std::fs::read_to_string(log.path()).unwrap_or_default());
            }
        }
    }
    logs
}

fn verdicts(report: &Report) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = report
        .results
        .iter()
        .map(|r| {
            let verdict = match &r.verdict {
                Verdict::Crash { signal, .. } => format!("crash {signal:?}"),
                other => format!("{other:?}"),
            };
            (r.probe.as_str().to_owned(), verdict)
        })
        .collect();
    all.sort();
    all
}

/// `check --json` of [`PROBES`] on the CPU with `GPUPROBE_ZYGOTE` set to `choice` (`1`: used
/// whatever this host's cores, `0`: never).
fn check_with_zygote(run: &Path, choice: &str) -> Report {
    let output = gpuprobe()
        .args(["check", "--json", "--device", "cpu", "--python"])
        .arg(python())
        .arg("--run-dir")
        .arg(run)
        .args(PROBES)
        .env("GPUPROBE_ZYGOTE", choice)
        .output()
        .unwrap();
    expect_report(&output, serde_json::from_slice(&output.stdout).ok())
}

#[test]
fn forked_workers_crash_recover_and_cap_threads_as_spawned_ones_do() {
    let dir = tempfile::tempdir().unwrap();
    let forked_run = dir.path().join("forked");
    let forked = check_with_zygote(&forked_run, "1");
    assert!(forked_run.join("workers/zygote.log").is_file());
    let logs = worker_logs(&forked_run);
    assert!(
        logs.iter()
            .all(|log| !log.contains("started the ordinary way")),
        "{logs:#?}"
    );
    // Every worker of both lanes was forked (the three crashed ones, their successors and
    // the side lane's), and each applied its thread cap.
    let forks: Vec<&String> = logs
        .iter()
        .filter(|log| log.contains("forked from the zygote"))
        .collect();
    assert_eq!(forks.len(), logs.len(), "{logs:#?}");
    for log in forks {
        let line = log
            .lines()
            .find(|l| l.contains("forked from the zygote"))
            .unwrap();
        let cap = line
            .split("OMP_NUM_THREADS=")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap();
        assert!(line.ends_with(&format!("torch threads {cap}")), "{line}");
    }
    for (probe, signal) in [
        ("fault.signal.kill", 9),
        ("fault.signal.segv", 11),
        ("fault.signal.abort", 6),
    ] {
        let Verdict::Crash { signal: seen, .. } = &result(&forked, probe).verdict else {
            panic!("{probe}: {:?}", result(&forked, probe).verdict)
        };
        assert_eq!(*seen, Some(signal), "{probe}");
    }
    assert_eq!(
        result(&forked, "fault.recovery.roundtrip").verdict,
        Verdict::Pass
    );

    let spawned_run = dir.path().join("spawned");
    let spawned = check_with_zygote(&spawned_run, "0");
    assert!(!spawned_run.join("workers/zygote.log").exists());
    assert!(
        worker_logs(&spawned_run)
            .iter()
            .all(|log| !log.contains("forked from the zygote"))
    );
    assert_eq!(verdicts(&forked), verdicts(&spawned));
}
