//! The JSON summary of a job's runs (`gpuprobe run --summary FILE`).

use std::path::Path;

use super::{JobError, JobOptions, JobOutcome, JobReport};

/// Writes the summary of `report` to `path`, making missing parent directories (as for a
/// profile).
pub(super) fn write_summary(
    path: &Path,
    options: &JobOptions,
    report: &JobReport,
) -> Result<(), JobError> {
    let runs = &report.runs;
    let n = runs.len().max(1) as f64;
    let crashed = runs
        .iter()
        .filter(|r| matches!(r.outcome, JobOutcome::Crashed { .. }))
        .count();
    let hung = runs
        .iter()
        .filter(|r| matches!(r.outcome, JobOutcome::Hung { .. }))
        .count();
    let value = serde_json::json!({
        "command": options.command.iter().map(|a| a.to_string_lossy().to_string()).collect::<Vec<_>>(),
        "profile": options.profile.as_ref().map(|p| p.display().to_string()),
        "runs": runs,
        "crash_rate": crashed as f64 / n,
        "hang_rate": hung as f64 / n,
        "fallback": report.fallback,
        "exit_code": report.exit_code,
    });
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| JobError::CreateDir {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(path, serde_json::to_string_pretty(&value)? + "\n").map_err(|source| {
        JobError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}
