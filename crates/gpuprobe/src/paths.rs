//! Where gpuprobe keeps run directories.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::SystemTime;

use crate::time::file_stamp;

/// The default parent of run directories: `$XDG_STATE_HOME/gpuprobe/runs`, else
/// `~/.local/state/gpuprobe/runs`, else `./gpuprobe-runs`.
pub fn runs_root(env: &BTreeMap<String, String>) -> PathBuf {
    if let Some(state) = env.get("XDG_STATE_HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(state).join("gpuprobe/runs");
    }
    if let Some(home) = env.get("HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(home).join(".local/state/gpuprobe/runs");
    }
    PathBuf::from("gpuprobe-runs")
}

/// A fresh run directory path under the default root.
pub fn new_run_dir(env: &BTreeMap<String, String>, command: &str) -> PathBuf {
    runs_root(env).join(format!(
        "{command}-{}-{}",
        file_stamp(SystemTime::now()),
        std::process::id()
    ))
}
