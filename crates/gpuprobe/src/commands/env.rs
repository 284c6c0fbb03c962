//! `gpuprobe env`: the stack fingerprint and the config lint over it, without running a
//! probe.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use gpuprobe_detect::{CollectOptions, Root};
use gpuprobe_model::ExitStatus;
use gpuprobe_model::finding::Finding;
use gpuprobe_model::fingerprint::{Fingerprint, PythonEnv};
use gpuprobe_report::style::Style;
use gpuprobe_runner::python;
use serde::Serialize;

use crate::cli::EnvArgs;

use super::process_env;

/// A scratch directory removed when dropped (for the extracted probe package).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Option<Scratch> {
        let dir = std::env::temp_dir().join(format!("gpuprobe-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        Some(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the user's interpreter reports (torch build and devices), or why it could not.
pub(crate) fn python_env(explicit: Option<&Path>) -> Option<PythonEnv> {
    let env = process_env();
    let choice = match python::find_python(explicit, &env) {
        Ok(choice) => choice,
        Err(err) => {
            return Some(PythonEnv {
                torch_error: Some(err.to_string()),
                ..PythonEnv::default()
            });
        }
    };
    let Some(scratch) = Scratch::new() else {
        return Some(PythonEnv {
            executable: choice.executable.display().to_string(),
            chosen_by: choice.chosen_by,
            torch_error: Some("cannot create a temporary directory for the probe package".into()),
            ..PythonEnv::default()
        });
    };
    let package = match python::extract_package(&scratch.0) {
        Ok(dir) => dir,
        Err(err) => {
            return Some(PythonEnv {
                executable: choice.executable.display().to_string(),
                chosen_by: choice.chosen_by,
                torch_error: Some(err.to_string()),
                ..PythonEnv::default()
            });
        }
    };
    let plan = scratch.0.join("env-plan.json");
    Some(python::fetch_env(
        &choice,
        |plan| python::worker_command(&choice.executable, &package, plan),
        &plan,
        Duration::from_secs(120),
    ))
}

/// Collection options for a live machine.
pub(crate) fn live_options(run_tools: bool) -> CollectOptions {
    CollectOptions {
        run_tools,
        tool_timeout: Duration::from_secs(5),
        read_kernel_log: true,
    }
}

/// The live fingerprint, with the interpreter's view merged in.
pub(crate) fn live_fingerprint(python: Option<&Path>, run_tools: bool) -> Fingerprint {
    let env = process_env();
    let mut fingerprint = gpuprobe_detect::collect(&Root::live(), &env, &live_options(run_tools));
    if let Some(python_env) = python_env(python) {
        gpuprobe_detect::merge_python(&mut fingerprint, python_env);
        // Runtime libraries that live next to torch (pip-installed ROCm/CUDA).
        gpuprobe_detect::scan_python_libraries(&gpuprobe_detect::Root::live(), &mut fingerprint);
    }
    fingerprint
}

/// The JSON shape of `env --json` (the same fields as `triage --json`'s).
#[derive(Serialize)]
struct EnvReport<'a> {
    fingerprint: &'a Fingerprint,
    findings: &'a [Finding],
}

/// Runs `env`: the fingerprint, then what the lint finds in it (settings that are no-ops,
/// folklore or harmful, stack combinations with known faults). Exits 1 when a finding is an
/// error, as `check` would before running its first probe.
pub(crate) fn run(args: EnvArgs) -> Result<ExitStatus> {
    gpuprobe_doctor::session::validate_python(args.python.as_deref(), &process_env())?;
    let fingerprint = live_fingerprint(args.python.as_deref(), !args.no_tools);
    let findings = gpuprobe_kb::lint(&fingerprint);
    let mut out = crate::output::stdout();
    if args.json {
        let report = EnvReport {
            fingerprint: &fingerprint,
            findings: &findings,
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        write!(out, "{}", gpuprobe_detect::render_text(&fingerprint))?;
        writeln!(out)?;
        if findings.is_empty() {
            writeln!(
                out,
                "lint: nothing to flag in these settings and this stack"
            )?;
        } else {
            write!(
                out,
                "{}",
                gpuprobe_report::terminal::render_findings(
                    &findings,
                    Style::for_output(
                        std::io::stdout().is_terminal(),
                        std::env::var("NO_COLOR").ok().as_deref(),
                    )
                )
            )?;
        }
    }
    Ok(super::findings_status(&findings))
}
