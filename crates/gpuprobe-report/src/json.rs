//! The JSON report and its schema, and reading a `report.json` back.

use std::path::{Path, PathBuf};

use gpuprobe_model::{ClassifiedError, ExitStatus, Report};

/// A report file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReadReportError {
    /// It cannot be read.
    #[error("cannot read {}: {source}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not a report.
    #[error("{} is not a gpuprobe report: {source}", .path.display())]
    NotAReport {
        /// The file.
        path: PathBuf,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
}

impl ClassifiedError for ReadReportError {
    /// The file is the user's to fix or to point elsewhere.
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::UsageError
    }
}

/// Reads a report file (`report.json`, or a saved `check --json`).
pub fn read(path: &Path) -> Result<Report, ReadReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadReportError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| ReadReportError::NotAReport {
        path: path.to_path_buf(),
        source,
    })
}

/// The report as pretty JSON (what `check --json` prints and `report.json` holds).
pub fn render(report: &Report) -> String {
    serde_json::to_string_pretty(report)
        .unwrap_or_else(|e| format!("{{\"error\": \"cannot serialize report: {e}\"}}"))
}

/// The JSON Schema of the report, as published in `docs/report.schema.json`.
pub fn schema() -> String {
    let schema = schemars::schema_for!(Report);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    #[test]
    fn published_schema_is_fresh() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/report.schema.json");
        let current = super::schema();
        let published = std::fs::read_to_string(path).unwrap_or_default();
        if std::env::var_os("GPUPROBE_UPDATE_SCHEMA").is_some() {
            std::fs::write(path, &current).unwrap();
            return;
        }
        assert!(
            published == current,
            "docs/report.schema.json is out of date; regenerate it with \
             GPUPROBE_UPDATE_SCHEMA=1 cargo test -p gpuprobe-report published_schema_is_fresh"
        );
    }
}
