//! This machine's full fingerprint as `gpuprobe env` and `kb match` show it: what the
//! files, the tools and the kernel log say, with the user's interpreter's view (torch's
//! build and devices, the GPU libraries installed beside it) merged in. The interpreter runs
//! the probe package's environment query from a scratch directory removed afterwards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuprobe_detect::{CollectOptions, Root};
use gpuprobe_model::{Fingerprint, PythonEnv};

/// A scratch directory removed when dropped (for the extracted probe package).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Option<Scratch> {
        let dir = std::env::temp_dir().join(format!("gpuprobe-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        Some(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the user's interpreter reports (torch build and devices), or why it could not.
pub(super) fn python_env(
    explicit: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Option<PythonEnv> {
    let choice = match gpuprobe_runner::find_python(explicit, env) {
        Ok(choice) => choice,
        Err(err) => {
            return Some(PythonEnv {
                torch_error: Some(err.to_string()),
                ..PythonEnv::default()
            });
        }
    };
    let Some(scratch) = Scratch::new() else {
        return Some(PythonEnv {
            executable: choice.executable.display().to_string(),
            chosen_by: choice.chosen_by,
            torch_error: Some("cannot create a temporary directory for the probe package".into()),
            ..PythonEnv::default()
        });
    };
    let package = match gpuprobe_runner::extract_package(&scratch.0) {
        Ok(dir) => dir,
        Err(err) => {
            return Some(PythonEnv {
                executable: choice.executable.display().to_string(),
                chosen_by: choice.chosen_by,
                torch_error: Some(err.to_string()),
                ..PythonEnv::default()
            });
        }
    };
    let plan = scratch.0.join("env-plan.json");
    Some(gpuprobe_runner::fetch_env(
        &choice,
        |plan| gpuprobe_runner::worker_command(&choice.executable, &package, plan),
        &plan,
        Duration::from_secs(120),
    ))
}

/// Collection options for a live machine.
pub(super) fn live_options(run_tools: bool) -> CollectOptions {
    CollectOptions {
        run_tools,
        tool_timeout: Duration::from_secs(5),
        read_kernel_log: true,
    }
}

/// The live fingerprint, with the interpreter's view merged in.
pub fn live_fingerprint(
    python: Option<&Path>,
    run_tools: bool,
    env: &BTreeMap<String, String>,
) -> Fingerprint {
    let mut fingerprint = gpuprobe_detect::collect(&Root::live(), env, &live_options(run_tools));
    if let Some(python_env) = python_env(python, env) {
        gpuprobe_detect::merge_python(&mut fingerprint, python_env);
        // Runtime libraries that live next to torch (pip-installed ROCm/CUDA).
        gpuprobe_detect::scan_python_libraries(&Root::live(), &mut fingerprint);
    }
    fingerprint
}
