//! Where gpuprobe keeps run directories and its caches.

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

/// Where workers cache Python bytecode when the interpreter cannot cache torch's in place:
/// `$XDG_CACHE_HOME/gpuprobe/bytecode`, else `~/.cache/gpuprobe/bytecode`, else none.
pub fn bytecode_cache(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    if let Some(cache) = env.get("XDG_CACHE_HOME").filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(cache).join("gpuprobe/bytecode"));
    }
    env.get("HOME")
        .filter(|s| !s.is_empty())
        .map(|home| PathBuf::from(home).join(".cache/gpuprobe/bytecode"))
}

/// A fresh run directory path under the default root.
pub fn new_run_dir(env: &BTreeMap<String, String>, command: &str) -> PathBuf {
    runs_root(env).join(format!(
        "{command}-{}-{}",
        file_stamp(SystemTime::now()),
        std::process::id()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytecode_cache_follows_xdg_then_home() {
        let home = ("HOME".to_string(), "/h".to_string());
        let xdg = |value: &str| ("XDG_CACHE_HOME".to_string(), value.to_string());
        assert_eq!(
            bytecode_cache(&BTreeMap::from([xdg("/c"), home.clone()])),
            Some(PathBuf::from("/c/gpuprobe/bytecode"))
        );
        assert_eq!(
            bytecode_cache(&BTreeMap::from([xdg(""), home])),
            Some(PathBuf::from("/h/.cache/gpuprobe/bytecode"))
        );
        assert_eq!(bytecode_cache(&BTreeMap::new()), None);
    }
}
