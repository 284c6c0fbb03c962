//! The user's Python: which interpreter to use, and the embedded probe package it runs.
//!
//! Probes must run in the interpreter the user trains with, with the packages they have, so
//! the choice follows what the user would run: `--python PATH`, then the interpreter that
//! launched gpuprobe through `python -m gpuprobe` (`GPUPROBE_PYTHON`), then an active
//! virtualenv, then an active conda environment, then `python3` on `PATH`. The one used is
//! always reported.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use crate::embedded;
use crate::error::RunnerError;
use crate::worker::WorkerCommand;

/// The interpreter chosen and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonChoice {
    /// Path to the interpreter (as given or found; not canonicalized, so a venv's
    /// `bin/python` stays a venv interpreter).
    pub executable: PathBuf,
    /// How it was chosen: `--python`, `GPUPROBE_PYTHON`, `VIRTUAL_ENV`, `CONDA_PREFIX`, `PATH`.
    pub chosen_by: String,
}

/// Picks the interpreter. `explicit` is `--python`; `env` is the process environment.
/// Fails only when nothing at all can be found; a path that exists but is broken is
/// found here and reported by the worker that fails to start.
pub fn find_python(
    explicit: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Result<PythonChoice, RunnerError> {
    if let Some(path) = explicit {
        return Ok(PythonChoice {
            executable: path.to_path_buf(),
            chosen_by: "--python".into(),
        });
    }
    if let Some(path) = env.get("GPUPROBE_PYTHON").filter(|p| !p.is_empty()) {
        return Ok(PythonChoice {
            executable: PathBuf::from(path),
            chosen_by: "GPUPROBE_PYTHON".into(),
        });
    }
    let mut tried = Vec::new();
    for (var, names) in [
        ("VIRTUAL_ENV", ["bin/python", "bin/python3"]),
        ("CONDA_PREFIX", ["bin/python", "bin/python3"]),
    ] {
        if let Some(prefix) = env.get(var).filter(|p| !p.is_empty()) {
            for name in names {
                let candidate = Path::new(prefix).join(name);
                if candidate.exists() {
                    return Ok(PythonChoice {
                        executable: candidate,
                        chosen_by: var.into(),
                    });
                }
                tried.push(candidate.display().to_string());
            }
        }
    }
    if let Some(path) = env.get("PATH") {
        for dir in std::env::split_paths(path) {
            let candidate = dir.join("python3");
            if is_executable(&candidate) {
                return Ok(PythonChoice {
                    executable: candidate,
                    chosen_by: "PATH".into(),
                });
            }
        }
        tried.push("python3 on PATH".into());
    }
    Err(RunnerError::NoPython(format!(
        "tried {}; pass --python PATH or activate the environment you train with",
        if tried.is_empty() {
            "nothing (no PATH)".to_string()
        } else {
            tried.join(", ")
        }
    )))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Writes the embedded `gpuprobe` Python package under `dir` (as `dir/gpuprobe/...`) and
/// returns `dir`, the directory to put on `sys.path`.
pub fn extract_package(dir: &Path) -> Result<PathBuf, RunnerError> {
    for (rel, contents) in embedded::PYTHON_PACKAGE {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| RunnerError::io("cannot create", parent, e))?;
        }
        fs::write(&path, contents).map_err(|e| RunnerError::io("cannot write", &path, e))?;
    }
    Ok(dir.to_path_buf())
}

/// Number of files in the embedded package (zero means the build found no Python sources).
pub fn embedded_file_count() -> usize {
    embedded::PYTHON_PACKAGE.len()
}

/// The bootstrap passed to `python -c`: puts the extracted package first on `sys.path` and
/// hands over to the worker. Kept tiny because it runs before any of our code can report.
const BOOTSTRAP: &str = "import sys; sys.path.insert(0, sys.argv[1]); \
import gpuprobe.worker.main as m; m.process_main(sys.argv[2:])";

/// The command that starts a Python worker for `plan_file`.
pub fn worker_command(python: &Path, package_dir: &Path, plan_file: &Path) -> WorkerCommand {
    let args: Vec<OsString> = vec![
        "-X".into(),
        "faulthandler".into(),
        "-c".into(),
        BOOTSTRAP.into(),
        package_dir.as_os_str().to_owned(),
        "--plan".into(),
        plan_file.as_os_str().to_owned(),
        "--event-fd".into(),
        gpuprobe_model::protocol::EVENT_FD.to_string().into(),
    ];
    WorkerCommand {
        program: python.to_path_buf(),
        args,
        env: BTreeMap::new(),
        remove_env: Vec::new(),
        waits_for_start: false,
    }
}

/// Runs a worker in a non-probing mode (`catalog` or `env`) and returns every event it sent
/// up to `done`; fails with the reason when it cannot start, hangs or dies first.
pub fn query_worker(
    command_for: impl Fn(&Path) -> WorkerCommand,
    plan_path: &Path,
    mode: gpuprobe_model::protocol::WorkerMode,
    timeout: std::time::Duration,
    options: BTreeMap<String, serde_json::Value>,
) -> Result<Vec<gpuprobe_model::protocol::WorkerEvent>, String> {
    use gpuprobe_model::protocol::{PROTOCOL_VERSION, WorkerEvent, WorkerPlan};

    use crate::worker::{Next, RunningWorker, WorkerMessage};

    let plan = WorkerPlan {
        protocol: PROTOCOL_VERSION,
        mode,
        device: None,
        probes: Vec::new(),
        seed: 0,
        simulate: None,
        options,
        wait_for_start: false,
    };
    let text = serde_json::to_string(&plan).map_err(|e| e.to_string())?;
    fs::write(plan_path, text).map_err(|e| format!("cannot write {}: {e}", plan_path.display()))?;
    let command = command_for(plan_path);
    let program = command.program.display().to_string();
    let mut worker = RunningWorker::spawn(&command, None).map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + timeout;
    let mut events = Vec::new();
    loop {
        match worker.next(deadline) {
            Next::TimedOut => {
                worker.kill_hung();
                return Err(format!(
                    "{program} did not answer within {} s",
                    timeout.as_secs()
                ));
            }
            Next::Message(WorkerMessage::Event(event)) => {
                let done = matches!(*event, WorkerEvent::Done);
                events.push(*event);
                if done {
                    worker.wait();
                    return Ok(events);
                }
            }
            Next::Message(WorkerMessage::Garbage(_)) => {}
            Next::Message(WorkerMessage::Closed) => {
                let exit = worker.wait();
                if events
                    .iter()
                    .any(|e| matches!(e, WorkerEvent::Catalog { .. } | WorkerEvent::Hello { .. }))
                    && exit.code == Some(0)
                {
                    return Ok(events);
                }
                let tail = worker.tail();
                let why = crate::supervisor::telling_line(&tail).unwrap_or_else(|| {
                    match (exit.signal, exit.code) {
                        (Some(sig), _) => format!("killed by signal {sig}"),
                        (None, Some(code)) => format!("exit code {code} and no output"),
                        _ => "no output".into(),
                    }
                });
                return Err(format!("{program} failed: {why}"));
            }
        }
    }
}

/// The probe catalogue (mode `catalog`: the framework is not imported, so this takes a
/// fraction of a second).
///
/// `options` go into the catalogue plan: `expand` names the families whose probes depend on
/// the installed framework (the sweep's operators); listing them makes the worker import it.
pub fn fetch_catalog(
    command_for: impl Fn(&Path) -> WorkerCommand,
    plan_path: &Path,
    timeout: std::time::Duration,
    options: BTreeMap<String, serde_json::Value>,
) -> Result<Vec<gpuprobe_model::ProbeSpec>, String> {
    use gpuprobe_model::protocol::{WorkerEvent, WorkerMode};
    let events = query_worker(
        command_for,
        plan_path,
        WorkerMode::Catalog,
        timeout,
        options,
    )?;
    let mut unusable = None;
    for event in events {
        match event {
            WorkerEvent::Catalog { probes } => return Ok(probes),
            WorkerEvent::Hello {
                unusable: Some(reason),
                ..
            } => unusable = Some(reason),
            _ => {}
        }
    }
    Err(unusable.unwrap_or_else(|| "the worker sent no catalogue".into()))
}

/// The interpreter and framework as the worker sees them (mode `env`).
pub fn fetch_env(
    choice: &PythonChoice,
    command_for: impl Fn(&Path) -> WorkerCommand,
    plan_path: &Path,
    timeout: std::time::Duration,
) -> gpuprobe_model::fingerprint::PythonEnv {
    use gpuprobe_model::fingerprint::PythonEnv;
    use gpuprobe_model::protocol::{WorkerEvent, WorkerMode};
    let mut env = PythonEnv {
        executable: choice.executable.display().to_string(),
        chosen_by: choice.chosen_by.clone(),
        ..PythonEnv::default()
    };
    match query_worker(
        command_for,
        plan_path,
        WorkerMode::Env,
        timeout,
        BTreeMap::new(),
    ) {
        Ok(events) => {
            for event in events {
                if let WorkerEvent::Hello {
                    python_version,
                    torch,
                    unusable,
                    packages,
                    ..
                } = event
                {
                    env.version = python_version;
                    env.torch = torch;
                    env.torch_error = unusable;
                    env.packages = packages;
                }
            }
        }
        Err(err) => env.torch_error = Some(err),
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn explicit_wins() {
        let choice =
            find_python(Some(Path::new("/x/python")), &env(&[("VIRTUAL_ENV", "/v")])).unwrap();
        assert_eq!(choice.chosen_by, "--python");
    }

    #[test]
    fn virtualenv_before_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::write(bin.join("python"), "").unwrap();
        let choice = find_python(
            None,
            &env(&[
                ("VIRTUAL_ENV", dir.path().to_str().unwrap()),
                ("PATH", "/usr/bin"),
            ]),
        )
        .unwrap();
        assert_eq!(choice.chosen_by, "VIRTUAL_ENV");
        assert_eq!(choice.executable, bin.join("python"));
    }

    #[test]
    fn nothing_found_is_a_clear_error() {
        let err = find_python(None, &env(&[("PATH", "/nonexistent-dir")])).unwrap_err();
        assert!(err.to_string().contains("--python"), "{err}");
    }

    #[test]
    fn package_is_embedded_and_extracts() {
        assert!(
            embedded_file_count() > 0,
            "the build embedded no Python files"
        );
        let dir = tempfile::tempdir().unwrap();
        extract_package(dir.path()).unwrap();
        assert!(dir.path().join("gpuprobe/worker/main.py").is_file());
    }
}
