//! Finding the result to reproduce, and the native script on a machine without a GPU.

use std::collections::BTreeMap;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::Summary;
use gpuprobe_model::{FailClass, Verdict};
use gpuprobe_model::{Layer, ProbeId, Tier};

use super::*;
use gpuprobe_runner::FIX_ACCOUNT_FILE;

fn result(probe: &str, device: DeviceRef, verdict: Verdict) -> ProbeResult {
    ProbeResult::new(ProbeId::new(probe), device, Layer::Framework, verdict)
}

fn fail() -> Verdict {
    Verdict::Fail {
        class: FailClass::AllZeros,
        detail: "zeros".into(),
    }
}

fn report(results: Vec<ProbeResult>) -> Report {
    Report {
        schema_version: 1,
        tool_version: "0.1.0".into(),
        build: None,
        command: "check".into(),
        run_dir: None,
        started_at: "x".into(),
        wall_s: 0.0,
        tier: Tier::Quick,
        simulation: None,
        fingerprint: Fingerprint::default(),
        summary: Summary::of(&results),
        results,
        findings: vec![],
        exit_status: ExitStatus::ProblemsFound,
        exit_code: 1,
        notes: vec![],
        timings: None,
    }
}

fn sample() -> Report {
    report(vec![
        result("copy.h2d.a", DeviceRef::Gpu(0), Verdict::Pass),
        result("copy.h2d.a", DeviceRef::Gpu(1), fail()),
        result("copy.h2d.b", DeviceRef::Gpu(0), fail()),
        result("copy.h2d.b", DeviceRef::Gpu(1), fail()),
        result("rng.normal", DeviceRef::Gpu(0), Verdict::Pass),
        result("copy.h2d.a", DeviceRef::Gpu(2), fail()),
    ])
}

#[test]
fn an_exact_id_or_a_glob_naming_one_failing_probe_selects_it() {
    let r = sample();
    let picked = select(&r, "copy.h2d.b", None).unwrap();
    assert_eq!(
        (picked.probe.as_str(), picked.device),
        ("copy.h2d.b", DeviceRef::Gpu(0))
    );
    let picked = select(&r, "copy.h2d.b", Some("1")).unwrap();
    assert_eq!(picked.device, DeviceRef::Gpu(1));
    // An exact id fails on one device and passes on another: the failing one.
    let picked = select(&r, "copy.h2d.a", None).unwrap();
    assert_eq!(picked.device, DeviceRef::Gpu(1));
    let picked = select(&r, "*.b", None).unwrap();
    assert_eq!(picked.probe.as_str(), "copy.h2d.b");
}

#[test]
fn a_passing_unknown_or_ambiguous_name_is_a_usage_error_that_lists_the_failures() {
    let r = sample();
    let err = select(&r, "rng.normal", None).unwrap_err();
    assert!(matches!(err, ReproError::NotAFailure { .. }), "{err}");
    assert!(err.to_string().contains("only a failing result"), "{err}");
    let err = select(&r, "ops.*", None).unwrap_err();
    assert!(
        err.to_string().ends_with("are: copy.h2d.a, copy.h2d.b"),
        "{err}"
    );
    let err = select(&r, "copy.*", None).unwrap_err();
    assert!(matches!(err, ReproError::Ambiguous { .. }), "{err}");
    let err = select(&r, "copy.h2d.a", Some("0")).unwrap_err();
    assert!(err.to_string().contains("failed on cuda:1"), "{err}");
    let err = select(&r, "copy.h2d.a", Some("nope")).unwrap_err();
    assert!(matches!(err, ReproError::BadDevice { .. }));
    assert_eq!(err.exit_status(), ExitStatus::UsageError);
    assert_eq!(
        ReproError::NoRepro { why: "x".into() }.exit_status(),
        ExitStatus::NothingTested
    );
}

#[test]
fn a_run_directory_without_a_report_is_refused() {
    let dir = std::env::temp_dir().join(format!("gpuprobe-repro-locate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = locate_run(Some(&dir), Path::new("/nonexistent")).unwrap_err();
    assert!(err.to_string().contains("holds no report.json"), "{err}");
    let err = locate_run(None, &dir).unwrap_err();
    assert!(matches!(err, ReproError::NoRun { .. }), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The interpreter the native script is tried with: the test interpreter, else python3.
fn python() -> std::path::PathBuf {
    std::env::var_os("GPUPROBE_TEST_PYTHON")
        .map(Into::into)
        .unwrap_or_else(|| "python3".into())
}

#[test]
fn the_native_script_compiles_and_cannot_run_without_a_driver() {
    let dir = std::env::temp_dir().join(format!("gpuprobe-repro-native-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for probe in ["native.copy.roundtrip.pageable", "native.copy.d2d"] {
        for verdict in [
            fail(),
            Verdict::Crash {
                signal: Some(11),
                exit_code: None,
                message: "x".into(),
            },
        ] {
            let r = result(probe, DeviceRef::Gpu(0), verdict);
            let made = native::generate(&r, 42, None, &BTreeMap::new()).unwrap();
            let script = dir.join("repro.py");
            std::fs::write(&script, &made.script).unwrap();
            let compiled = std::process::Command::new(python())
                .args(["-m", "py_compile"])
                .arg(&script)
                .output()
                .unwrap();
            assert!(
                compiled.status.success(),
                "{}",
                String::from_utf8_lossy(&compiled.stderr)
            );
            // This machine has neither libcuda.so.1 nor libamdhip64.so.
            let ran = std::process::Command::new(python())
                .arg(&script)
                .env("LD_LIBRARY_PATH", "/nonexistent")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&ran.stdout);
            let last = stdout.lines().last().unwrap_or("");
            assert_eq!(
                ran.status.code(),
                Some(2),
                "{stdout}{}",
                String::from_utf8_lossy(&ran.stderr)
            );
            assert!(
                last.starts_with("CANNOT RUN: no usable GPU runtime"),
                "{last}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_fix_that_started_from_the_run_is_found() {
    let root = std::env::temp_dir().join(format!("gpuprobe-repro-fix-{}", std::process::id()));
    let run = root.join("check-2026-01-01T00-00-00-1");
    let other = root.join("check-2026-01-01T00-00-01-1");
    let fix = root.join("fix-2026-01-01T00-00-02-1");
    for dir in [&run, &other, &fix] {
        std::fs::create_dir_all(dir.join("workers")).unwrap();
    }
    let account = |source: &Path| {
        serde_json::json!({
            "tool_version": "0.1.0", "started_at": "x", "wall_s": 1.0, "simulated": false,
            "source_run": source, "stack": {},
            "budget": {"max_runs": 40, "trials": 3, "workers": 3, "exhausted": false},
            "outcome": "all_cured", "exit_status": "all_passed", "exit_code": 0,
            "chosen": [{"variable": "HSA_ENABLE_SDMA", "value": "0"}]
        })
        .to_string()
    };
    std::fs::write(fix.join(FIX_ACCOUNT_FILE), account(&run)).unwrap();
    let (dir, found) = fix_from(&run, &root).expect("the fix from this run");
    assert_eq!(dir, fix);
    assert_eq!(found.chosen[0].variable, "HSA_ENABLE_SDMA");
    assert!(
        fix_from(&other, &root).is_none(),
        "a fix from another run is not this one's"
    );
    // A fix's own starting check finds its account one level up.
    let own = fix.join("check");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(fix.join(FIX_ACCOUNT_FILE), account(Path::new("/elsewhere"))).unwrap();
    assert_eq!(fix_from(&own, &root).map(|(d, _)| d), Some(fix.clone()));
    // A broken account is no account.
    std::fs::write(fix.join(FIX_ACCOUNT_FILE), "{").unwrap();
    assert!(fix_from(&own, &root).is_none());
    std::fs::remove_dir_all(&root).unwrap();
}
