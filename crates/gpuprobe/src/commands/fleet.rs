//! `gpuprobe fleet PATH...`: many nodes' reports merged. The runner finds the reports and
//! reads each ([`gpuprobe_runner::find_fleet_reports`],
//! [`gpuprobe_runner::read_report_file`]), one at a time; `gpuprobe_report`'s [`Fleet`](gpuprobe_report::Fleet) keeps
//! what its views need, judges the cross-node differential and renders. Exit 0 when
//! nothing is wrong, 1 when a node is flagged, a node's check did not pass or a report is
//! unreadable, 2 when no report was found (docs/exit-codes.md).

use std::io::Write;

use gpuprobe_model::ExitStatus;
use gpuprobe_report::{
    Fleet, check_export_writable, check_html_writable, console_note, render_fleet_text,
    write_export, write_fleet_page,
};

use crate::cli::FleetArgs;
use crate::errors::CliError;
use crate::errors::{Internal, Result};

const JSON: &str = "fleet JSON";

/// Runs `fleet`.
pub(super) fn run(args: FleetArgs) -> Result<ExitStatus> {
    // An unwritable output is refused before anything is read.
    check_html_writable(args.html.as_deref())?;
    check_export_writable(JSON, args.json.as_deref())?;
    let found = gpuprobe_runner::find_fleet_reports(&args.paths);
    let mut merged = Fleet::new();
    for unfound in &found.unfound {
        merged.add_unreadable(&unfound.path.display().to_string(), &unfound.reason);
    }
    for report in &found.reports {
        let source = report.path.display().to_string();
        match gpuprobe_runner::read_report_file(&report.path) {
            Ok(parsed) => merged.add(&source, &report.fallback_name, &parsed),
            Err(e) => {
                let reason = match &e {
                    gpuprobe_runner::RunFileError::Invalid { source, .. } => {
                        format!("not a gpuprobe report: {source}")
                    }
                    gpuprobe_runner::RunFileError::Unreadable { source, .. } => {
                        format!("cannot read: {source}")
                    }
                };
                merged.add_unreadable(&source, &reason);
            }
        }
    }
    if found.reports.is_empty() {
        return Err(CliError::NoFleetReports {
            paths: args
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
        .into());
    }
    let view = merged.finish();
    if let Some(path) = &args.html {
        write_fleet_page(path, &view)?;
        console_note(&format!("HTML fleet view: {}", path.display()));
    }
    if let Some(path) = &args.json {
        write_export(
            JSON,
            path,
            &format!("{}\n", serde_json::to_string_pretty(&view).internal()?),
        )?;
        console_note(&format!("{JSON}: {}", path.display()));
    }
    write!(crate::output::stdout(), "{}", render_fleet_text(&view)).internal()?;
    Ok(view.exit_status)
}
