//! `gpuprobe env`: the stack fingerprint and the config lint over it, without running a
//! probe.

use std::io::Write;

use gpuprobe_doctor::live_fingerprint;
use gpuprobe_model::ExitStatus;

use crate::cli::EnvArgs;
use crate::errors::{Internal, Result};
use crate::output;

use super::process_env;

/// Runs `env`: the fingerprint, then what the lint finds in it (settings that are no-ops,
/// folklore or harmful, stack combinations with known faults). Exits 1 when a finding is an
/// error, as `check` would before running its first probe.
pub(crate) fn run(args: EnvArgs) -> Result<ExitStatus> {
    let env = process_env();
    gpuprobe_doctor::session::validate_python(args.python.as_deref(), &env)?;
    let fingerprint = live_fingerprint(args.python.as_deref(), !args.no_tools, &env);
    let findings = gpuprobe_kb::lint(&fingerprint);
    let mut out = output::stdout();
    if args.json {
        let json = gpuprobe_report::env_json(&fingerprint, &findings).internal()?;
        writeln!(out, "{json}").internal()?;
    } else {
        let text = gpuprobe_report::render_env(&fingerprint, &findings, output::stdout_style());
        write!(out, "{text}").internal()?;
    }
    Ok(super::findings_status(&findings))
}
