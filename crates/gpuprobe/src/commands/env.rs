//! `gpuprobe env`: the stack fingerprint and the config lint over it, without running a
//! probe.

use std::io::Write;

use anyhow::Result;
use gpuprobe_doctor::live_stack;
use gpuprobe_model::ExitStatus;
use gpuprobe_model::finding::Finding;
use gpuprobe_model::fingerprint::Fingerprint;
use serde::Serialize;

use crate::cli::EnvArgs;

use super::process_env;

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
    let env = process_env();
    gpuprobe_doctor::session::validate_python(args.python.as_deref(), &env)?;
    let fingerprint = live_stack::live_fingerprint(args.python.as_deref(), !args.no_tools, &env);
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
                    crate::output::stdout_style(&env)
                )
            )?;
        }
    }
    Ok(super::findings_status(&findings))
}
