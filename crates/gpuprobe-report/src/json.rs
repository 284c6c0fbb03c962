//! The JSON report and its schema (reading one back is the runner's:
//! `gpuprobe_runner::read_report_file`).

use gpuprobe_model::Report;

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
