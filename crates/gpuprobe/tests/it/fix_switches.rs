//! Framework switches end to end on the CPU under simulation: `fix` finds and proves the
//! switch that cures a backend-specific fault (`sdpa-default-cudnn-nan`: attention on the
//! backend the dispatcher picks is wrong while cuDNN attention is on), the profile keeps it
//! apart from environment settings, `profile export --format python` prints the line, and
//! `run --profile` applies it in a real child Python, where torch reads the value back; a
//! profile proven on another stack is refused.

use std::path::Path;

use gpuprobe_model::{FixAccount, FixOutcome, Profile, TargetStatus};

use crate::support::*;

const SWITCH: &str = "torch.backends.cuda.enable_cudnn_sdp=False";
const DEFAULT_ATTENTION: &str = "nn.sdpa.bf16.default.d64.s128";

fn fix_account(run_dir: &Path) -> FixAccount {
    let output = gpuprobe()
        .args(["fix", "--json", "--device", "cpu", "--timeout-scale", "0.3"])
        .args([
            "--simulate",
            "sdpa-default-cudnn-nan",
            "--only",
            DEFAULT_ATTENTION,
        ])
        // The attention switches and one environment setting: the search must tell the
        // one cure apart (every catalogue setting of every vendor would take minutes here).
        .args([
            "--candidate",
            "torch.backends.cuda.enable_flash_sdp=False",
            "--candidate",
            "torch.backends.cuda.enable_mem_efficient_sdp=False",
            "--candidate",
            SWITCH,
            "--candidate",
            "CUDA_LAUNCH_BLOCKING=1",
        ])
        .args(["--max-runs", "12", "--python"])
        .arg(python())
        .arg("--run-dir")
        .arg(run_dir)
        .output()
        .expect("gpuprobe runs");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON account ({e}); exit {:?}\nstderr:\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn fix_proves_a_framework_switch_and_run_applies_it_in_the_jobs_python() {
    let started = std::time::SystemTime::now();
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("fix");
    let account = fix_account(&run_dir);
    assert!(account.simulated);
    assert_eq!(account.outcome, FixOutcome::AllCured, "{account:#?}");
    let target = account
        .targets
        .iter()
        .find(|t| t.failure.at.probe.as_str() == DEFAULT_ATTENTION)
        .expect("the default attention probe failed under the preset");
    assert_eq!(target.status, TargetStatus::Cured);
    let chosen: Vec<String> = account.chosen.iter().map(|c| c.describe()).collect();
    assert_eq!(chosen, vec![SWITCH.to_string()], "{chosen:?}");
    let trial = account
        .candidates
        .iter()
        .find(|c| c.setting.describe() == SWITCH)
        .expect("the switch was a candidate");
    assert!(trial.tried && trial.cured.len() == 1 && trial.broke.is_empty());
    assert!(
        trial.sources.contains(&"CAT-SDPA-CUDNN-OFF".to_string()),
        "{:?}",
        trial.sources
    );
    // Other attention switches were tried and cured nothing: the cure is specific.
    let flash = account
        .candidates
        .iter()
        .find(|c| c.setting.describe() == "torch.backends.cuda.enable_flash_sdp=False")
        .expect("flash off was a candidate");
    assert!(flash.tried && flash.cured.is_empty());
    // Every worker of the switch's trial logged the applied switch.
    let logs = std::fs::read_dir(run_dir.join("trials"))
        .unwrap()
        .flatten()
        .filter(|d| {
            std::fs::read_to_string(d.path().join("settings.json"))
                .is_ok_and(|s| s.contains(SWITCH))
        })
        .count();
    assert!(logs >= 1, "a trial directory records the switch");

    // The profile: a switch, no environment setting.
    let profile_path = account.profile.clone().expect("a profile");
    let profile: Profile =
        toml::from_str(&std::fs::read_to_string(&profile_path).unwrap()).unwrap();
    assert!(profile.env.is_empty(), "{:?}", profile.env);
    assert_eq!(
        profile
            .switches
            .get("torch.backends.cuda.enable_cudnn_sdp")
            .map(String::as_str),
        Some("False")
    );
    assert_eq!(profile.cures, vec![DEFAULT_ATTENTION.to_string()]);
    let python_lines = gpuprobe()
        .args(["profile", "export", "--format", "python", &profile_path])
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&python_lines.stdout);
    assert!(
        lines.contains("import torch\ntorch.backends.cuda.enable_cudnn_sdp(False)\n"),
        "{lines}"
    );

    // `run --profile`: the job's own Python reads the switch back; its children do not
    // inherit the hook unless asked.
    let job = "import os, subprocess, sys, torch\n\
               child = subprocess.run([sys.executable, '-c', 'import os; print(os.environ.get(\"GPUPROBE_SWITCHES\"))'], capture_output=True, text=True).stdout.strip()\n\
               print(torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled(), child)\n";
    let run = |extra: &[&str]| {
        let output = gpuprobe()
            .args(["run", "--profile", &profile_path])
            .args(extra)
            .arg("--python")
            .arg(python())
            .arg("--")
            .arg(python())
            .args(["-c", job])
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        (
            String::from_utf8_lossy(&output.stdout).trim().to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let (stdout, stderr) = run(&[]);
    assert_eq!(stdout, "False True None", "{stderr}");
    assert!(stderr.contains("framework switches applied"), "{stderr}");
    assert!(stderr.contains("SIMULATION"), "{stderr}");
    let (stdout, _) = run(&["--switches-to-children"]);
    assert_eq!(stdout, format!("False True {SWITCH}"));
    // No temporary hook directory is left behind (only this test places hooks).
    let leftovers: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("gpuprobe-hook-")
        })
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= started)
        })
        .map(|e| e.path())
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Proven on another stack: refused before the job runs (exit 2), unless --force.
    let mut foreign = profile.clone();
    foreign.proven_on.torch = Some("1.0.0".into());
    let foreign_path = dir.path().join("foreign.toml");
    std::fs::write(&foreign_path, toml::to_string(&foreign).unwrap()).unwrap();
    let refused = gpuprobe()
        .args(["run", "--profile"])
        .arg(&foreign_path)
        .arg("--python")
        .arg(python())
        .args(["--", "sh", "-c", "echo ran"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(refused.stdout.is_empty(), "the job must not run");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("torch: proven on 1.0.0"));
}
