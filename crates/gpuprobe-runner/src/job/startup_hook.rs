//! The start-up hook that applies a profile's framework switches inside a job's Python
//! (`gpuprobe run --profile`): the hook and the switch table it loads are written from the
//! embedded package to a directory of the run's own, whose `gpuprobe/startup` folder (a
//! `sitecustomize.py`) goes first on the job's `PYTHONPATH`; the switches travel in
//! `GPUPROBE_SWITCHES`. The hook applies them right
//! after the job imports torch, then takes itself and the variable out of the environment
//! the job's children see (unless `GPUPROBE_SWITCHES_INHERIT=1` asks otherwise), and hands
//! over to any `sitecustomize` the job had. The directory goes when the hook is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use gpuprobe_model::{SWITCHES_VARIABLE, switches_value};

use crate::error::RunnerError;
use crate::python::extract_matching;

/// Asks the hook to leave itself and the switches in the environment of the job's children.
pub(super) const INHERIT_VARIABLE: &str = "GPUPROBE_SWITCHES_INHERIT";

/// The hook's directory, relative to the extracted package root.
const HOOK_DIR: &str = "gpuprobe/startup";
/// The files the hook needs (`sitecustomize.py` loads `../switches.py` by path).
const HOOK_FILES: &[&str] = &["gpuprobe/startup/sitecustomize.py", "gpuprobe/switches.py"];

/// A hook placed for one job; the directory is removed when this is dropped.
#[derive(Debug)]
pub struct StartupHook {
    root: PathBuf,
    /// The variables the job gets (`PYTHONPATH`, `GPUPROBE_SWITCHES`, and the inherit flag
    /// when asked).
    pub env: BTreeMap<String, String>,
}

impl StartupHook {
    /// Writes the hook under a fresh directory in `parent` for these switches. `pythonpath`
    /// is the job's own `PYTHONPATH` (kept after the hook's folder). `None` when there are no
    /// switches: nothing to place.
    pub fn place(
        parent: &Path,
        switches: &BTreeMap<String, String>,
        pythonpath: Option<&str>,
        to_children: bool,
    ) -> Result<Option<StartupHook>, RunnerError> {
        let Some(value) = switches_value(switches.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        else {
            return Ok(None);
        };
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let root = parent.join(format!("gpuprobe-hook-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| RunnerError::io("cannot create", &root, e))?;
        // Removes the directory again should anything below fail.
        let mut hook = StartupHook {
            root: root.clone(),
            env: BTreeMap::new(),
        };
        // The hook and the one module it loads by path: the job never imports the package.
        if extract_matching(&root, |rel| HOOK_FILES.contains(&rel))? != HOOK_FILES.len() {
            return Err(RunnerError::io(
                "the embedded package lacks",
                root.join(HOOK_DIR),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        }
        let hook_dir = root.join(HOOK_DIR);
        let mut path = hook_dir.to_string_lossy().to_string();
        if let Some(existing) = pythonpath.filter(|p| !p.is_empty()) {
            path.push(':');
            path.push_str(existing);
        }
        hook.env = BTreeMap::from([
            ("PYTHONPATH".to_string(), path),
            (SWITCHES_VARIABLE.to_string(), value),
        ]);
        if to_children {
            hook.env
                .insert(INHERIT_VARIABLE.to_string(), "1".to_string());
        }
        Ok(Some(hook))
    }

    /// The directory holding the hook.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for StartupHook {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_switches_place_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let hook = StartupHook::place(dir.path(), &BTreeMap::new(), None, false).unwrap();
        assert!(hook.is_none());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_hook_goes_first_and_leaves_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let switches = BTreeMap::from([
            (
                "torch.backends.cuda.enable_cudnn_sdp".to_string(),
                "False".to_string(),
            ),
            (
                "torch.backends.cudnn.enabled".to_string(),
                "False".to_string(),
            ),
        ]);
        let hook = StartupHook::place(dir.path(), &switches, Some("/opt/mine"), false)
            .unwrap()
            .unwrap();
        let root = hook.root().to_path_buf();
        assert!(root.join("gpuprobe/startup/sitecustomize.py").is_file());
        assert!(root.join("gpuprobe/switches.py").is_file());
        let path = &hook.env["PYTHONPATH"];
        assert!(path.ends_with("/gpuprobe/startup:/opt/mine"), "{path}");
        assert_eq!(
            hook.env[SWITCHES_VARIABLE],
            "torch.backends.cuda.enable_cudnn_sdp=False;torch.backends.cudnn.enabled=False"
        );
        assert!(!hook.env.contains_key(INHERIT_VARIABLE));
        drop(hook);
        assert!(!root.exists());
        let inherit = StartupHook::place(dir.path(), &switches, None, true)
            .unwrap()
            .unwrap();
        assert_eq!(inherit.env[INHERIT_VARIABLE], "1");
        assert!(inherit.env["PYTHONPATH"].ends_with("/gpuprobe/startup"));
    }
}
