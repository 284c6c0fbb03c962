//! `gpuprobe fix` end to end on the CPU under simulation: cures found from the catalogue
//! (also for faults no knowledge-base entry mentions), a cure that breaks a sentinel
//! rejected, a pair found by the group search, the run budget respected, the profile
//! written and applied by `run`.

use std::path::{Path, PathBuf};
use std::process::Output;

use gpuprobe_model::ExitStatus;
use gpuprobe_model::{FixAccount, FixOutcome, Profile, TargetStatus};

use crate::support::*;

/// Runs `gpuprobe fix --json` on the CPU with the test interpreter.
fn fix_json(run_dir: &Path, extra: &[&str]) -> (Output, FixAccount) {
    let output = gpuprobe()
        .args(["fix", "--json", "--device", "cpu", "--python"])
        .arg(python())
        .arg("--run-dir")
        .arg(run_dir)
        .args(if extra.contains(&"--timeout-scale") {
            &[][..]
        } else {
            &["--timeout-scale", "0.3"][..]
        })
        .args(extra)
        .output()
        .expect("gpuprobe runs");
    let account = serde_json::from_slice::<FixAccount>(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON account ({e}); exit {:?}\nstdout:\n{}\nstderr:\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output, account)
}

fn write_fault(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

fn chosen(account: &FixAccount) -> Vec<String> {
    let mut out: Vec<String> = account.chosen.iter().map(|c| c.describe()).collect();
    out.sort();
    out
}

fn status_of(account: &FixAccount, probe: &str) -> TargetStatus {
    account
        .targets
        .iter()
        .find(|t| t.failure.at.probe.as_str() == probe)
        .unwrap_or_else(|| panic!("no target {probe}"))
        .status
}

fn read_profile(path: &str) -> Profile {
    toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Whether any knowledge-base entry offers `variable` as a workaround (the fix must find
/// cures the KB does not offer, from the catalogue alone; an entry's notes may still mention
/// it, e.g. as a setting that only reduced a hang's rate).
fn kb_mentions(variable: &str) -> bool {
    gpuprobe_kb::KnowledgeBase::embedded()
        .entries()
        .any(|entry| {
            entry.workarounds.iter().any(|w| {
                w.setting
                    .as_deref()
                    .is_some_and(|s| s.split('=').next() == Some(variable))
            })
        })
}

/// Trial directories the search left behind (one per worker run).
fn trial_dirs(run_dir: &Path) -> usize {
    std::fs::read_dir(run_dir.join("trials"))
        .map(|d| d.count())
        .unwrap_or(0)
}

const RANDN_CURED_BY_LAUNCH_BLOCKING: &str = r#"
description = "randn on the device returns zeros unless kernel launches block"
[[fault]]
name = "randn-zeros-unless-blocking"
op = "randn"
cured_by = ["HIP_LAUNCH_BLOCKING=1"]
[fault.when]
on_device = true
[fault.effect]
kind = "zeros"
"#;

/// The full search, with every candidate generated: a preset cured by HSA_ENABLE_SDMA=0 and
/// a custom fault cured by HIP_LAUNCH_BLOCKING=1, which no KB entry mentions. Then the
/// profile is exported and applied by `run` to a job that crashes without it.
#[test]
fn fix_finds_catalogue_cures_writes_a_profile_and_run_applies_it() {
    assert!(
        !kb_mentions("HIP_LAUNCH_BLOCKING"),
        "the test needs a setting no KB entry names"
    );
    let dir = tempfile::tempdir().unwrap();
    let fault = write_fault(dir.path(), "randn.toml", RANDN_CURED_BY_LAUNCH_BLOCKING);
    let simulate = format!("h2d-zeros,{}", fault.display());
    let run_dir = dir.path().join("fix");
    let (output, account) = fix_json(
        &run_dir,
        &[
            "--simulate",
            &simulate,
            "--only",
            "copy.h2d.pageable.tiny.nonblocking",
            "--only",
            "rng.randn.fp32",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(account.outcome, FixOutcome::AllCured);
    assert_eq!(account.exit_status, ExitStatus::AllPassed);
    assert!(account.simulated, "the account must say SIMULATED");
    assert_eq!(
        chosen(&account),
        vec!["HIP_LAUNCH_BLOCKING=1", "HSA_ENABLE_SDMA=0"]
    );
    assert_eq!(
        status_of(&account, "copy.h2d.pageable.tiny.nonblocking"),
        TargetStatus::Cured
    );
    assert_eq!(status_of(&account, "rng.randn.fp32"), TargetStatus::Cured);
    // What cured what: each setting cured exactly its own failure.
    let trial = |setting: &str| {
        account
            .candidates
            .iter()
            .find(|c| c.setting.describe() == setting)
            .unwrap_or_else(|| panic!("{setting} was not a candidate"))
    };
    let sdma = trial("HSA_ENABLE_SDMA=0");
    assert_eq!(sdma.cured.len(), 1);
    assert_eq!(
        sdma.cured[0].probe.as_str(),
        "copy.h2d.pageable.tiny.nonblocking"
    );
    assert!(sdma.sources.contains(&"CAT-SDMA-OFF".to_string()));
    let blocking = trial("HIP_LAUNCH_BLOCKING=1");
    assert_eq!(blocking.cured[0].probe.as_str(), "rng.randn.fp32");
    assert!(
        trial("AMD_SERIALIZE_COPY=3").cured.is_empty(),
        "a no-op cures nothing"
    );
    assert!(
        account.candidates.len() >= 10,
        "generic candidates were generated"
    );
    assert!(account.candidates.iter().all(|c| c.tried));
    // The verification and the run count: baseline + each candidate + verification, one
    // trial directory each; no group search was needed.
    let verification = account.verification.as_ref().unwrap();
    assert!(verification.passed && verification.broke.is_empty());
    assert!(account.groups.is_empty());
    assert_eq!(account.budget.trials as usize, account.candidates.len() + 2);
    assert_eq!(trial_dirs(&run_dir), account.budget.trials as usize);
    assert!(!account.sentinels.is_empty());
    assert!(account.sentinels.iter().any(|s| s.probe.family() == "copy"));
    assert!(account.sentinels.iter().any(|s| s.probe.family() == "rng"));
    let cost = account.cost.as_ref().expect("a measured cost");
    assert!(cost.method.contains("SIMULATED"), "{}", cost.method);
    // Pinned staging is reported as a code change, never applied.
    assert!(
        account
            .reported
            .iter()
            .any(|r| r.kind == "code_change" && r.sources.contains(&"CAT-PINNED-STAGING".into()))
    );
    // Progress went to stderr, one line per trial.
    assert_eq!(
        stderr.matches("gpuprobe: fix: trial ").count(),
        account.budget.trials as usize,
        "{stderr}"
    );

    // The profile.
    let profile_path = account.profile.clone().expect("a profile");
    assert_eq!(Path::new(&profile_path), run_dir.join("profile.toml"));
    let profile = read_profile(&profile_path);
    assert!(profile.simulated);
    assert_eq!(
        profile.env.get("HSA_ENABLE_SDMA").map(String::as_str),
        Some("0")
    );
    assert_eq!(
        profile.env.get("HIP_LAUNCH_BLOCKING").map(String::as_str),
        Some("1")
    );
    assert!(profile.still_failing.is_empty());
    assert_eq!(profile.cures.len(), 2);
    assert!(profile.proven_on.torch.is_some(), "{:?}", profile.proven_on);
    assert!(profile.proven_on.kernel.is_some());
    let text = std::fs::read_to_string(&profile_path).unwrap();
    assert!(text.contains("# SIMULATED"), "{text}");

    // Exported as .env and shell lines.
    let export = gpuprobe()
        .args(["profile", "export", "--format", "env", &profile_path])
        .output()
        .unwrap();
    let env = String::from_utf8_lossy(&export.stdout);
    assert!(
        env.contains("\nHIP_LAUNCH_BLOCKING=1\n") && env.contains("\nHSA_ENABLE_SDMA=0\n"),
        "{env}"
    );

    // `run` with the profile makes a job that crashes without these settings succeed.
    let job = script(
        dir.path(),
        "job.sh",
        "#!/bin/sh\nif [ \"$HSA_ENABLE_SDMA\" = 0 ] && [ \"$HIP_LAUNCH_BLOCKING\" = 1 ]; then echo trained; exit 0; fi\n\
         echo 'Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x0. Reason: Unknown.' >&2\nkill -SEGV $$\n",
    );
    let without = gpuprobe().args(["run", "--"]).arg(&job).output().unwrap();
    assert_eq!(without.status.code(), Some(139));
    let with = gpuprobe()
        .args(["run", "--profile", &profile_path, "--python"])
        .arg(python())
        .arg("--")
        .arg(&job)
        .output()
        .unwrap();
    assert_eq!(
        with.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&with.stdout), "trained\n");
    assert!(String::from_utf8_lossy(&with.stderr).contains("SIMULATION"));

    // The terminal account says SIMULATED and what cured what.
    let text = gpuprobe_report::render_fix(&account, gpuprobe_report::Style::PLAIN);
    assert!(text.starts_with(" SIMULATED "));
    assert!(
        text.contains("chosen: HIP_LAUNCH_BLOCKING=1 HSA_ENABLE_SDMA=0"),
        "{text}"
    );
}

/// The preset's only cure breaks large device-to-device copies: it is rejected, and the
/// failures are reported uncured with the reason.
#[test]
fn a_cure_that_breaks_a_sentinel_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("fix");
    let (output, account) = fix_json(
        &run_dir,
        &[
            "--simulate",
            "h2d-zeros-cure-breaks-d2d",
            "--only",
            "copy.h2d.pageable.tiny.nonblocking",
            "--candidate",
            "HSA_ENABLE_SDMA=0",
            "--candidate",
            "AMD_SERIALIZE_COPY=3",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(account.outcome, FixOutcome::NoneCured);
    let sdma = &account.candidates[0];
    assert_eq!(sdma.setting.describe(), "HSA_ENABLE_SDMA=0");
    assert_eq!(sdma.cured.len(), 1, "it does cure the failure");
    assert!(
        sdma.broke
            .iter()
            .any(|b| b.at.probe.as_str().starts_with("copy.d2d.")),
        "it breaks a large D2D copy: {:?}",
        sdma.broke
    );
    assert!(account.chosen.is_empty());
    let target = &account.targets[0];
    assert_eq!(target.status, TargetStatus::NotCured);
    assert!(
        target.rejected[0].starts_with("HSA_ENABLE_SDMA=0: breaks copy.d2d."),
        "{:?}",
        target.rejected
    );
    let profile = read_profile(account.profile.as_ref().unwrap());
    assert!(profile.env.is_empty());
    assert_eq!(
        profile.still_failing,
        vec!["copy.h2d.pageable.tiny.nonblocking"]
    );
}

/// With a second cure available, the breaking one is rejected and the other chosen.
#[test]
fn a_cure_that_breaks_a_sentinel_loses_to_one_that_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let fault = write_fault(
        dir.path(),
        "two-cures.toml",
        r#"
description = "small pageable H2D zeros, cured by either setting; one breaks D2D copies"
[[fault]]
name = "h2d-small-pageable-zeros"
op = "h2d"
cured_by = ["HSA_ENABLE_SDMA=0", "AMD_SERIALIZE_COPY=3"]
[fault.when]
pinned = false
max_bytes = 64
[fault.effect]
kind = "zeros"
fraction = 0.5
[[fault]]
name = "sdma-off-breaks-d2d"
op = "d2d"
only_when_set = ["HSA_ENABLE_SDMA=0"]
[fault.when]
min_bytes = 1048576
[fault.effect]
kind = "partial_zeros"
"#,
    );
    let run_dir = dir.path().join("fix");
    let (output, account) = fix_json(
        &run_dir,
        &[
            "--simulate",
            fault.to_str().unwrap(),
            "--only",
            "copy.h2d.pageable.tiny.nonblocking",
            "--candidate",
            "HSA_ENABLE_SDMA=0",
            "--candidate",
            "AMD_SERIALIZE_COPY=3",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(chosen(&account), vec!["AMD_SERIALIZE_COPY=3"]);
    assert!(!account.candidates[0].broke.is_empty());
    assert_eq!(account.targets[0].cured_by, vec!["AMD_SERIALIZE_COPY=3"]);
}

const RANDN_NEEDS_A_PAIR: &str = r#"
description = "randn zeros cured only by two settings together"
[[fault]]
name = "randn-zeros-pair"
op = "randn"
cured_by_all = ["AMD_SERIALIZE_KERNEL=3", "HSA_DISABLE_FRAGMENT_ALLOCATOR=1"]
[fault.when]
on_device = true
[fault.effect]
kind = "zeros"
"#;

/// A fault that needs two settings together is found by the group search within budget;
/// fp16-convert-nan (whose pair includes HIP_FORCE_DEV_KERNARG=0) is cured too when the
/// catalogue has that setting, and otherwise reported uncured.
#[test]
fn the_group_search_finds_a_pair_within_budget() {
    for variable in ["AMD_SERIALIZE_KERNEL", "HSA_DISABLE_FRAGMENT_ALLOCATOR"] {
        assert!(!kb_mentions(variable), "{variable} is named by a KB entry");
    }
    let catalogue_has_kernarg = gpuprobe_kb::embedded_catalogue().allows("HIP_FORCE_DEV_KERNARG=0");
    let dir = tempfile::tempdir().unwrap();
    let fault = write_fault(dir.path(), "pair.toml", RANDN_NEEDS_A_PAIR);
    let simulate = format!("fp16-convert-nan,{}", fault.display());
    let run_dir = dir.path().join("fix");
    let mut args = vec![
        "--simulate",
        &simulate,
        "--only",
        "rng.randn.fp32",
        "--only",
        "dtype.fp32.fp16.to.device",
        "--candidate",
        "HSA_ENABLE_SDMA=0",
        "--candidate",
        "AMD_SERIALIZE_KERNEL=3",
        "--candidate",
        "HIP_LAUNCH_BLOCKING=1",
        "--candidate",
        "HSA_DISABLE_FRAGMENT_ALLOCATOR=1",
    ];
    if catalogue_has_kernarg {
        args.extend(["--candidate", "HIP_FORCE_DEV_KERNARG=0"]);
    }
    let (output, account) = fix_json(&run_dir, &args);
    let k = account.candidates.len() as u32;
    assert!(
        account.candidates.iter().all(|c| c.cured.is_empty()),
        "no single cure"
    );
    let minimal = account
        .groups
        .iter()
        .find(|g| g.minimal)
        .expect("a minimal group");
    let mut pair: Vec<String> = minimal.settings.iter().map(|s| s.describe()).collect();
    pair.sort();
    assert_eq!(status_of(&account, "rng.randn.fp32"), TargetStatus::Cured);
    assert!(
        account.budget.trials < 2 + k + (1 << k) - 1,
        "{} trials for {k} candidates: no exhaustive search",
        account.budget.trials
    );
    assert_eq!(trial_dirs(&run_dir), account.budget.trials as usize);
    if catalogue_has_kernarg {
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(
            chosen(&account),
            vec![
                "AMD_SERIALIZE_KERNEL=3",
                "HIP_FORCE_DEV_KERNARG=0",
                "HSA_DISABLE_FRAGMENT_ALLOCATOR=1"
            ]
        );
    } else {
        assert_eq!(
            pair,
            vec!["AMD_SERIALIZE_KERNEL=3", "HSA_DISABLE_FRAGMENT_ALLOCATOR=1"]
        );
        assert_eq!(
            output.status.code(),
            Some(1),
            "fp16-convert-nan stays uncured"
        );
        assert_eq!(account.outcome, FixOutcome::PartlyCured);
        assert_eq!(
            status_of(&account, "dtype.fp32.fp16.to.device"),
            TargetStatus::NotCured
        );
        assert_eq!(chosen(&account), pair);
        let profile = read_profile(account.profile.as_ref().unwrap());
        assert_eq!(profile.still_failing, vec!["dtype.fp32.fp16.to.device"]);
        let why = &profile.settings[0];
        assert_eq!(why.cures, vec!["rng.randn.fp32"]);
        assert_eq!(why.together_with.len(), 1, "{why:?}");
    }
}

#[test]
fn the_run_budget_is_enforced_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("fix");
    let (output, account) = fix_json(
        &run_dir,
        &[
            "--simulate",
            "h2d-zeros",
            "--only",
            "copy.h2d.pageable.tiny.nonblocking",
            "--max-runs",
            "3",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(account.budget.exhausted);
    assert_eq!(
        account.budget.trials, 3,
        "baseline, one candidate, verification"
    );
    assert_eq!(trial_dirs(&run_dir), 3);
    assert!(stderr.contains("the run budget ran out after"), "{stderr}");
    assert!(stderr.contains("--max-runs 3"), "{stderr}");
    let untried: Vec<_> = account.candidates.iter().filter(|c| !c.tried).collect();
    assert!(!untried.is_empty());
    assert!(untried.iter().all(|c| {
        c.not_tried_because
            .as_deref()
            .unwrap()
            .contains("--max-runs 3")
    }));
    // The first candidate (the copy engine, first in the catalogue) cured it.
    assert_eq!(chosen(&account), vec!["HSA_ENABLE_SDMA=0"]);
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn a_healthy_stack_has_nothing_to_fix_and_gets_no_profile() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("fix");
    let (output, account) = fix_json(&run_dir, &["--only", "copy.d2d"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(account.outcome, FixOutcome::NothingToFix);
    assert!(account.profile.is_none());
    assert!(!run_dir.join("profile.toml").exists());
    assert_eq!(account.budget.trials, 0);
    let text = gpuprobe()
        .args([
            "fix",
            "--device",
            "cpu",
            "--only",
            "copy.d2d.medium.clone",
            "--python",
        ])
        .arg(python())
        .arg("--run-dir")
        .arg(dir.path().join("fix2"))
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&text.stdout).contains("nothing to fix"));
}

#[test]
fn fix_builds_on_a_finished_check() {
    let dir = tempfile::tempdir().unwrap();
    let check_dir = dir.path().join("check");
    let (output, report) = check_json(
        &check_dir,
        &[
            "--simulate",
            "h2d-zeros",
            "--only",
            "copy.h2d.pageable.tiny.nonblocking",
        ],
    );
    let report = expect_report(&output, report);
    assert_eq!(report.summary.failed, 1);
    let output = gpuprobe()
        .args(["fix", "--json", "--from"])
        .arg(&check_dir)
        .arg("--run-dir")
        .arg(dir.path().join("fix"))
        .args(["--candidate", "HSA_ENABLE_SDMA=0"])
        .output()
        .unwrap();
    let account: FixAccount = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(output.status.code(), Some(0));
    assert!(
        account.simulated,
        "the simulation comes from the run's plan"
    );
    assert_eq!(
        account.source_run.as_deref(),
        Some(check_dir.to_str().unwrap())
    );
    assert_eq!(chosen(&account), vec!["HSA_ENABLE_SDMA=0"]);
    // The starting run is only read.
    assert!(!check_dir.join("trials").exists());
}

#[test]
fn a_hanging_probe_is_survived_and_cured() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("fix");
    let (output, account) = fix_json(
        &run_dir,
        &[
            "--simulate",
            "hang",
            "--only",
            "copy.roundtrip.pageable.large",
            "--timeout-scale",
            "0.05",
            "--candidate",
            "AMD_SERIALIZE_COPY=3",
            "--candidate",
            "HSA_ENABLE_SDMA=0",
        ],
    );
    assert_eq!(account.targets[0].failure.verdict, "HANG");
    assert_eq!(chosen(&account), vec!["HSA_ENABLE_SDMA=0"]);
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn fix_usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["fix", "--max-runs", "1"],
        vec!["fix", "--candidate", "LD_PRELOAD=/tmp/x.so"],
        vec!["fix", "--candidate", "HIP_DISABLE_IPC=1"],
        vec!["fix", "--candidate", "HSA_OVERRIDE_GFX_VERSION=11.0.0"],
    ] {
        let output = gpuprobe().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&output.stderr).starts_with("gpuprobe: error: "));
    }
    let output = gpuprobe()
        .args(["fix", "--from"])
        .arg(dir.path())
        .arg("--run-dir")
        .arg(dir.path().join("fix"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a gpuprobe run"));
}

/// A fix refused before its starting check (an `--only` that matches nothing, a `--from`
/// run whose report is broken) leaves no run directory: none for `runs list` to show as
/// in progress, none for `runs prune` to keep.
#[test]
fn a_fix_refused_before_it_starts_leaves_no_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let broken = dir.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("plan.json"), "{}").unwrap();
    std::fs::write(broken.join("report.json"), "{\"results\": [").unwrap();
    let only = ["fix", "--device", "cpu", "--only", "no.such.probe"];
    let from = ["fix", "--from", broken.to_str().unwrap()];
    for (args, says) in [
        (
            &only[..],
            "--only no.such.probe matches no probe in any tier",
        ),
        (&from[..], "report.json is not a gpuprobe report"),
    ] {
        let output = gpuprobe()
            .args(args)
            .arg("--python")
            .arg(python())
            .env("XDG_STATE_HOME", &state)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        let runs: Vec<_> = std::fs::read_dir(state.join("gpuprobe/runs"))
            .map(|d| d.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert!(runs.is_empty(), "{args:?} left {runs:?}");
    }
    // A directory named with --run-dir that was there before stays, without the fix's files.
    let given = dir.path().join("given");
    std::fs::create_dir_all(&given).unwrap();
    let output = gpuprobe()
        .args(only)
        .arg("--python")
        .arg(python())
        .arg("--run-dir")
        .arg(&given)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(given.is_dir());
    assert!(!given.join("fix-options.json").exists());
    assert!(!given.join("trials.jsonl").exists());
}

/// The field-note symptoms that no setting cured for their reporters (bf16→fp32 zeros,
/// randn zeros, a GPU page-fault abort): the search tries the candidates, says that none
/// cured them, and the profile records them as still failing, with no settings.
#[test]
fn field_note_symptoms_that_no_setting_cures_are_reported_uncured() {
    let dir = tempfile::tempdir().unwrap();
    for (preset, probe) in [
        ("bf16-fp32-zeros", "dtype.bf16.fp32.to.device"),
        ("randn-zeros", "rng.randn.fp32"),
        ("crash", "copy.roundtrip.pageable.large.blocking"),
    ] {
        let run_dir = dir.path().join(preset);
        let (output, account) = fix_json(
            &run_dir,
            &[
                "--simulate",
                preset,
                "--only",
                probe,
                "--candidate",
                "HSA_ENABLE_SDMA=0",
                "--candidate",
                "AMD_SERIALIZE_KERNEL=3",
            ],
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{preset}: {stderr}");
        assert_eq!(account.outcome, FixOutcome::NoneCured, "{preset}");
        assert!(account.simulated, "{preset}");
        assert!(account.chosen.is_empty(), "{preset}: {:?}", account.chosen);
        assert_eq!(
            status_of(&account, probe),
            TargetStatus::NotCured,
            "{preset}"
        );
        assert_eq!(account.candidates.len(), 2, "{preset}");
        assert!(
            account
                .candidates
                .iter()
                .all(|c| c.tried && c.cured.is_empty()),
            "{preset}: {:?}",
            account.candidates
        );
        let profile = read_profile(account.profile.as_ref().expect("a profile"));
        assert!(profile.env.is_empty(), "{preset}");
        assert!(
            profile.still_failing.iter().any(|p| p == probe),
            "{preset}: {:?}",
            profile.still_failing
        );
    }
}
