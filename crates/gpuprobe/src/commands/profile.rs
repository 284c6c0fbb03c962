//! `gpuprobe profile`: show a profile, check it against this machine, export its settings
//! (`.env`, shell, JSON). Every action validates the profile first: a profile with a
//! setting outside the catalogue is refused (exit 2) before anything is printed. Reading,
//! checking and exporting are `gpuprobe_doctor::profile_file`'s; this adapter renders.

use std::io::Write;

use anyhow::Result;
use gpuprobe_model::ExitStatus;
use gpuprobe_model::profile::Profile;

use crate::cli::{ExportFormatArg, ProfileAction, ProfileArgs};
use gpuprobe_doctor::profile_file::{self as profiles, ExportFormat};
use gpuprobe_doctor::stack;

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
            write!(out, "{}", show(&loaded))?;
            Ok(ExitStatus::AllPassed)
        }
        ProfileAction::Check { profile, python } => {
            let loaded = profiles::load(&profile)?;
            let here = stack::live_key(python.as_deref(), &env);
            let differences = loaded.proven_on.differences(&here);
            if differences.is_empty() {
                writeln!(
                    out,
                    "{}: valid; proven on this stack ({}){}",
                    profile.display(),
                    here.describe(),
                    if loaded.simulated {
                        " — SIMULATED, not proven on real hardware"
                    } else {
                        ""
                    }
                )?;
                Ok(ExitStatus::AllPassed)
            } else {
                Err(CliError::ProfileProvenElsewhere {
                    path: profile,
                    differences: differences.join("; "),
                }
                .into())
            }
        }
        ProfileAction::Stack { python } => {
            let here = stack::live_key(python.as_deref(), &env);
            let text = toml::to_string(&here)
                .map_err(|e| anyhow::anyhow!("cannot serialize the stack key: {e}"))?;
            write!(out, "[proven_on]\n{text}")?;
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
                let here = stack::live_key(python.as_deref(), &env);
                let differences = loaded.proven_on.differences(&here);
                if !differences.is_empty() {
                    return Err(CliError::ProfileProvenElsewhere {
                        path: profile,
                        differences: differences.join("; "),
                    }
                    .into());
                }
            }
            let format = match format {
                ExportFormatArg::Env => ExportFormat::Env,
                ExportFormatArg::Shell => ExportFormat::Shell,
                ExportFormatArg::Json => ExportFormat::Json,
            };
            write!(out, "{}", profiles::export(&loaded, format))?;
            Ok(ExitStatus::AllPassed)
        }
    }
}

/// A profile for people.
fn show(profile: &Profile) -> String {
    let mut out = String::new();
    if profile.simulated {
        out.push_str(
            "SIMULATED profile: made under fault simulation, not proven on real hardware\n",
        );
    }
    out.push_str(&format!(
        "{}, {}\nproven on: {}\n",
        profile.created_by,
        profile.created_at,
        profile.proven_on.describe()
    ));
    if profile.env.is_empty() && profile.unset.is_empty() {
        out.push_str("settings: none (nothing tried cured the failures)\n");
    } else {
        out.push_str("settings:\n");
        for (name, value) in &profile.env {
            out.push_str(&format!("  {name}={value}\n"));
        }
        for name in &profile.unset {
            out.push_str(&format!("  unset {name}\n"));
        }
    }
    for setting in &profile.settings {
        let mut line = format!(
            "  why {}: cures {}",
            setting.setting,
            setting.cures.join(", ")
        );
        if !setting.together_with.is_empty() {
            line.push_str(&format!(
                " (together with {})",
                setting.together_with.join(", ")
            ));
        }
        if !setting.sources.is_empty() {
            line.push_str(&format!(" [{}]", setting.sources.join(", ")));
        }
        if !setting.cost.is_empty() {
            line.push_str(&format!("; cost: {}", setting.cost));
        }
        out.push_str(&line);
        out.push('\n');
    }
    for (title, list) in [
        ("cures", &profile.cures),
        ("still failing", &profile.still_failing),
        ("did not reproduce", &profile.flaky),
        (
            "needs root or a reboot (reported, never applied)",
            &profile.system_changes,
        ),
        (
            "other changes (reported, not tested)",
            &profile.other_changes,
        ),
    ] {
        if list.is_empty() {
            continue;
        }
        out.push_str(&format!("{title}:\n"));
        for item in list {
            out.push_str(&format!("  {item}\n"));
        }
    }
    if let Some(cost) = &profile.measured_cost {
        out.push_str(&format!("measured cost: {cost}\n"));
    }
    if let Some(evidence) = &profile.evidence {
        out.push_str(&format!("evidence: {evidence}\n"));
    }
    out
}
