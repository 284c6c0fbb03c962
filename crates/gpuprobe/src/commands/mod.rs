//! One module per command; `dispatch` picks it.

use gpuprobe_model::ExitStatus;
use gpuprobe_model::{Finding, Severity};

use crate::cli::Command;
use crate::errors::Result;

mod bundle;
pub(crate) mod check;
mod completions;
pub(crate) mod env;
mod fix;
mod fleet;
pub(crate) mod kb;
pub(crate) mod memtest;
mod native_worker;
mod profile;
mod report;
mod repro;
mod run;
mod runs;
mod triage;
mod ui;

/// Runs one command and returns the exit code it earned: a documented [`ExitStatus`]
/// code, or for `run` the job's own exit code.
pub(crate) fn dispatch(command: Command) -> Result<u8> {
    let status: ExitStatus = match command {
        Command::Check(args) if args.health => return check::run_health(args),
        Command::Check(args) => check::run(args)?,
        Command::Env(args) => env::run(args)?,
        Command::Triage(args) => triage::run(args)?,
        Command::Kb(args) => kb::run(args)?,
        Command::Memtest(args) => memtest::run(args)?,
        Command::NativeWorker(args) => native_worker::run(args)?,
        Command::Fix(args) => fix::run(args)?,
        Command::Profile(args) => profile::run(args)?,
        Command::Runs(args) => runs::run(args)?,
        Command::Report(args) => report::run(args)?,
        Command::Fleet(args) => fleet::run(args)?,
        Command::Ui(args) => ui::run(args)?,
        Command::Bundle(args) => bundle::run(args)?,
        Command::Repro(args) => repro::run(args)?,
        Command::Completions(args) => completions::completions(args)?,
        Command::Man(args) => completions::man(args)?,
        Command::Run(args) => return run::run(args),
        Command::ExecJob(args) => return Ok(run::exec_job(&args.command)),
    };
    Ok(status.code())
}

/// The exit status of a command that reports findings without running probes (`env`,
/// `triage`): problems found when one is an error, as `check` would say before its first
/// probe.
fn findings_status(findings: &[Finding]) -> ExitStatus {
    if findings.iter().any(|f| f.severity == Severity::Error) {
        ExitStatus::ProblemsFound
    } else {
        ExitStatus::AllPassed
    }
}

/// The process environment as a map (tests pass their own maps to the pieces below).
pub(crate) fn process_env() -> std::collections::BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::{Confidence, FindingLayer};

    fn finding(severity: Severity) -> Finding {
        Finding {
            id: "LINT-TEST".into(),
            source: "lint".into(),
            severity,
            layer: FindingLayer::Config,
            title: "a setting".into(),
            explanation: String::new(),
            confidence: Confidence::Observed,
            evidence: Vec::new(),
            remedies: Vec::new(),
            citations: Vec::new(),
            next_steps: Vec::new(),
            related: Vec::new(),
        }
    }

    #[test]
    fn an_error_finding_makes_env_and_triage_exit_with_problems_found() {
        assert_eq!(findings_status(&[]), ExitStatus::AllPassed);
        assert_eq!(
            findings_status(&[finding(Severity::Warning), finding(Severity::Info)]),
            ExitStatus::AllPassed
        );
        assert_eq!(
            findings_status(&[finding(Severity::Warning), finding(Severity::Error)]),
            ExitStatus::ProblemsFound
        );
    }
}
