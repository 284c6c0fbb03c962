//! `gpuprobe profile`: show a profile, check it against this machine, export its settings
//! (`.env`, shell, JSON). Every action validates the profile first: a profile with a
//! setting outside the catalogue is refused (exit 2) before anything is printed. Reading,
//! checking and exporting are `gpuprobe_doctor::profile`'s; this adapter renders.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use gpuprobe_model::ExitStatus;
use gpuprobe_model::{Profile, StackKey};

use crate::cli::{ExportFormatArg, ProfileAction, ProfileArgs};
use crate::errors::{Internal, Result};
use gpuprobe_doctor::profile::{self as profiles, ExportFormat};

use crate::errors::CliError;

use super::process_env;

/// Runs `profile`.
pub(super) fn run(args: ProfileArgs) -> Result<ExitStatus> {
    let env = process_env();
    // Profiles are files from anywhere: their free text (who made it, costs, notes) goes
    // out behind the terminal guard.
    let mut out = crate::output::stdout();
    match args.action {
        ProfileAction::Show { profile } => {
            let loaded = profiles::load(&profile)?;
            write!(out, "{}", gpuprobe_report::render_profile(&loaded)).internal()?;
            Ok(ExitStatus::AllPassed)
        }
        ProfileAction::Check { profile, python } => {
            let loaded = profiles::load(&profile)?;
            let here = proven_here(&profile, &loaded, python.as_deref(), &env)?;
            let simulated = if loaded.simulated {
                " — SIMULATED, not proven on real hardware"
            } else {
                ""
            };
            writeln!(
                out,
                "{}: valid; proven on this stack ({}){simulated}",
                profile.display(),
                here.describe(),
            )
            .internal()?;
            Ok(ExitStatus::AllPassed)
        }
        ProfileAction::Stack { python } => {
            let here = gpuprobe_doctor::live_key(python.as_deref(), &env);
            let text = toml::to_string(&here)
                .internal()
                .map_err(|e| e.context("cannot serialize the stack key".to_string()))?;
            write!(out, "[proven_on]\n{text}").internal()?;
            Ok(ExitStatus::AllPassed)
        }
        ProfileAction::Export {
            profile,
            format,
            check_stack,
            python,
        } => {
            let loaded = profiles::load(&profile)?;
            if check_stack {
                proven_here(&profile, &loaded, python.as_deref(), &env)?;
            }
            let format = match format {
                ExportFormatArg::Env => ExportFormat::Env,
                ExportFormatArg::Shell => ExportFormat::Shell,
                ExportFormatArg::Json => ExportFormat::Json,
                ExportFormatArg::Python => ExportFormat::Python,
            };
            write!(out, "{}", profiles::export(&loaded, format)).internal()?;
            Ok(ExitStatus::AllPassed)
        }
    }
}

/// This machine's stack key when `loaded` was proven on it; otherwise the error that names
/// what differs.
fn proven_here(
    path: &Path,
    loaded: &Profile,
    python: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Result<StackKey, CliError> {
    let here = gpuprobe_doctor::live_key(python, env);
    let differences = loaded.proven_on.differences(&here);
    if differences.is_empty() {
        Ok(here)
    } else {
        Err(CliError::ProfileProvenElsewhere {
            path: path.to_path_buf(),
            differences: differences.join("; "),
        })
    }
}
