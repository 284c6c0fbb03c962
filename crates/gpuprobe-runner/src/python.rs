//! The user's Python: which interpreter to use, and the embedded probe package it runs.
//!
//! Probes must run in the interpreter the user trains with, with the packages they have, so
//! the choice follows what the user would run: `--python PATH`, then the interpreter that
//! launched gpuprobe through `python -m gpuprobe` (`GPUPROBE_PYTHON`), then an active
//! virtualenv, then an active conda environment, then `python3` on `PATH`. The one used is
//! always reported.
//!
//! An interpreter named with `--python` is the user's argument: one that does not exist, is
//! not an executable file, or runs but is no Python is refused up front
//! ([`validate_explicit`]) rather than turned into a run whose every probe is NOT-TESTED.
//! A Python that runs but lacks torch or GPU support stays a test result.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuprobe_model::env_vars;

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

/// Why an interpreter named with `--python` cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--python {}: {reason}", path.display())]
pub struct BadInterpreter {
    /// The path as given.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// Picks the interpreter. `explicit` is `--python`; `env` is the process environment.
/// Fails when nothing at all can be found, or when `explicit` names no executable file; a
/// file that exists but is a broken interpreter is found here and reported by the worker
/// that fails to start.
pub fn find_python(
    explicit: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Result<PythonChoice, RunnerError> {
    if let Some(path) = explicit {
        let executable =
            resolve_explicit(path, env).map_err(|bad| RunnerError::NoPython(bad.to_string()))?;
        return Ok(PythonChoice {
            executable,
            chosen_by: "--python".into(),
        });
    }
    if let Some(path) = env.get(env_vars::GPUPROBE_PYTHON).filter(|p| !p.is_empty()) {
        return Ok(PythonChoice {
            executable: PathBuf::from(path),
            chosen_by: env_vars::GPUPROBE_PYTHON.into(),
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

/// Where `--python PATH` points: a bare name is looked up on `PATH` as a shell would; any
/// other path is made absolute (without resolving links, so a venv's `bin/python` stays
/// a venv interpreter), so the plan names the same file from any directory. Fails when
/// that is no executable file.
pub fn resolve_explicit(
    path: &Path,
    env: &BTreeMap<String, String>,
) -> Result<PathBuf, BadInterpreter> {
    let bad = |reason: &str| BadInterpreter {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    if path.as_os_str().is_empty() {
        return Err(bad("an empty path"));
    }
    let bare = path.components().count() == 1 && !path.to_string_lossy().contains('/');
    let candidate = if bare {
        env.get("PATH")
            .into_iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(path))
            .find(|candidate| is_executable(candidate))
            .ok_or_else(|| bad("not found on PATH"))?
    } else {
        std::path::absolute(path).map_err(|e| bad(&e.to_string()))?
    };
    match fs::metadata(&candidate) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(bad("no such file")),
        Err(e) => Err(bad(&e.to_string())),
        Ok(meta) if meta.is_dir() => Err(bad("is a directory, not an interpreter")),
        Ok(meta) if !meta.is_file() => Err(bad("is not a regular file")),
        Ok(_) if !is_executable(&candidate) => Err(bad("is not executable")),
        Ok(_) => Ok(candidate),
    }
}

/// How long an interpreter may take to print its version when `--python` is checked. One
/// that does not answer in time is refused: every worker, the catalog query and the
/// fingerprint would each wait minutes on it only to report nothing. A Python answers this
/// in well under a second; the margin is for a cold network file system.
pub(crate) const VERSION_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// What the check runs: prints a marker and the version, using nothing but `sys`.
const VERSION_CHECK: &str =
    "import sys; sys.stdout.write('gpuprobe-python %d\\n' % sys.hexversion)";

/// Checks an interpreter named with `--python` before anything runs with it: it must be an
/// executable file ([`resolve_explicit`]) and run as a Python. Returns the choice to use.
///
/// "Runs as a Python" is generous on purpose: a program that prints the version, that is
/// killed by a signal, or whose error output names Python (`Fatal Python error`, a missing
/// module) is an interpreter, perhaps a broken one, and what breaks it is a finding the
/// workers report. Refused are files that cannot be executed at all, programs that run,
/// fail and never mention Python (`/bin/true`, `ls`), and programs that give no answer
/// within ten seconds (a hung interpreter).
pub fn validate_explicit(
    path: &Path,
    env: &BTreeMap<String, String>,
) -> Result<PythonChoice, BadInterpreter> {
    validate_explicit_within(path, env, VERSION_CHECK_TIMEOUT)
}

/// [`validate_explicit`] with the time the interpreter is given to answer.
fn validate_explicit_within(
    path: &Path,
    env: &BTreeMap<String, String>,
    limit: Duration,
) -> Result<PythonChoice, BadInterpreter> {
    let executable = resolve_explicit(path, env)?;
    let bad = |reason: String| BadInterpreter {
        path: path.to_path_buf(),
        reason,
    };
    let mut child = Command::new(&executable)
        .args(["-c", VERSION_CHECK])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so a wrapper's children go with it if it must be ended.
        .process_group(0)
        .spawn()
        .map_err(|e| bad(format!("cannot be run: {e}")))?;
    let readers: Vec<std::thread::JoinHandle<String>> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut stream| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stream.by_ref().take(64 * 1024).read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    })
    .collect();
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => break None,
        }
    };
    let choice = PythonChoice {
        executable,
        chosen_by: "--python".into(),
    };
    let Some(status) = status else {
        crate::process::kill_group(child.id());
        let _ = child.wait();
        return Err(bad(format!(
            "gave no answer within {} s when asked for its version: a hung interpreter \
             (or a file system this slow; try again once it is warm)",
            limit.as_secs_f64()
        )));
    };
    let output: String = readers
        .into_iter()
        .map(|reader| reader.join().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let printed_version = output
        .lines()
        .any(|line| line.trim_start().starts_with("gpuprobe-python "));
    if printed_version || status.code().is_none() || output.contains("Python") {
        return Ok(choice);
    }
    let said =
        crate::supervisor::telling_line(&output.lines().map(str::to_string).collect::<Vec<_>>())
            .map(|line| format!(": {}", line.chars().take(200).collect::<String>()))
            .unwrap_or_default();
    Err(bad(format!(
        "runs, but is not a Python interpreter (asked for its version, it exited with code {}{said})",
        status.code().unwrap_or(-1)
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
    extract_matching(dir, |_| true)?;
    Ok(dir.to_path_buf())
}

/// Writes the embedded files whose relative path `wanted` accepts under `dir`; returns how
/// many were written.
pub(crate) fn extract_matching(
    dir: &Path,
    wanted: impl Fn(&str) -> bool,
) -> Result<usize, RunnerError> {
    let mut written = 0;
    for (rel, contents) in embedded::PYTHON_PACKAGE {
        if !wanted(rel) {
            continue;
        }
        written += 1;
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| RunnerError::io("cannot create", parent, e))?;
        }
        fs::write(&path, contents).map_err(|e| RunnerError::io("cannot write", &path, e))?;
    }
    Ok(written)
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
        gpuprobe_model::EVENT_FD.to_string().into(),
    ];
    WorkerCommand {
        program: python.to_path_buf(),
        args,
        env: BTreeMap::new(),
        remove_env: Vec::new(),
        waits_for_start: false,
    }
}

/// What a worker sent in a non-probing mode.
#[derive(Debug, Default)]
pub(crate) struct Queried {
    /// Every event it sent up to `done`.
    pub(crate) events: Vec<gpuprobe_model::WorkerEvent>,
    /// Why the first line that names an event (`{"event": ...}`) could not be read as one:
    /// such a line is otherwise dropped like any stray output, and a catalog dropped so
    /// would take every Python probe with it without saying why.
    pub(crate) unreadable: Option<String>,
}

/// The reason `line` names a protocol event that this build cannot read, or `None` when it
/// is no event at all (stray output on the event descriptor).
fn unreadable_event(line: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    let event = value.get("event")?.as_str()?.to_string();
    let error = serde_json::from_value::<gpuprobe_model::WorkerEvent>(value).err()?;
    Some(format!(
        "the worker's {event} event could not be read: {error}"
    ))
}

/// Runs a worker in a non-probing mode (`catalog` or `env`) and returns every event it sent
/// up to `done`; fails with the reason when it cannot start, hangs or dies first.
pub(crate) fn query_worker(
    command_for: impl Fn(&Path) -> WorkerCommand,
    plan_path: &Path,
    mode: gpuprobe_model::WorkerMode,
    timeout: std::time::Duration,
    options: BTreeMap<String, serde_json::Value>,
) -> Result<Queried, String> {
    use gpuprobe_model::{PROTOCOL_VERSION, WorkerEvent, WorkerPlan};

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
        thread_budget: None,
    };
    let text = serde_json::to_string(&plan).map_err(|e| e.to_string())?;
    fs::write(plan_path, text).map_err(|e| format!("cannot write {}: {e}", plan_path.display()))?;
    let command = command_for(plan_path);
    let program = command.program.display().to_string();
    let mut worker = RunningWorker::spawn(&command, None).map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + timeout;
    let mut queried = Queried::default();
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
                queried.events.push(*event);
                if done {
                    worker.wait();
                    return Ok(queried);
                }
            }
            Next::Message(WorkerMessage::Garbage(line)) => {
                if queried.unreadable.is_none() {
                    queried.unreadable = unreadable_event(&line);
                }
            }
            Next::Message(WorkerMessage::Closed) => {
                let exit = worker.wait();
                if queried
                    .events
                    .iter()
                    .any(|e| matches!(e, WorkerEvent::Catalog { .. } | WorkerEvent::Hello { .. }))
                    && exit.code == Some(0)
                {
                    return Ok(queried);
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

/// What a catalog listing returned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListedCatalog {
    /// Every probe the worker can run.
    pub probes: Vec<gpuprobe_model::ProbeSpec>,
    /// The GPUs the framework sees, when the listing imported it (it expanded a family);
    /// `None`: not known before a worker runs.
    pub devices: Option<Vec<gpuprobe_model::TorchDevice>>,
}

/// The probe catalog (mode `catalog`: the framework is not imported, so this takes a
/// fraction of a second).
///
/// `options` go into the catalog plan: `expand` names the families whose probes depend on
/// the installed framework (the sweep's operators); listing them makes the worker import it,
/// and then it also lists the GPUs the framework sees.
pub fn fetch_catalog(
    command_for: impl Fn(&Path) -> WorkerCommand,
    plan_path: &Path,
    timeout: std::time::Duration,
    options: BTreeMap<String, serde_json::Value>,
) -> Result<ListedCatalog, String> {
    use gpuprobe_model::{WorkerEvent, WorkerMode};
    let queried = query_worker(
        command_for,
        plan_path,
        WorkerMode::Catalog,
        timeout,
        options,
    )?;
    let mut unusable = None;
    for event in queried.events {
        match event {
            WorkerEvent::Catalog { probes, devices } => {
                return Ok(ListedCatalog { probes, devices });
            }
            WorkerEvent::Hello {
                unusable: Some(reason),
                ..
            } => unusable = Some(reason),
            _ => {}
        }
    }
    Err(unusable
        .or(queried.unreadable)
        .unwrap_or_else(|| "the worker sent no catalog".into()))
}

/// The interpreter and framework as the worker sees them (mode `env`).
pub fn fetch_env(
    choice: &PythonChoice,
    command_for: impl Fn(&Path) -> WorkerCommand,
    plan_path: &Path,
    timeout: std::time::Duration,
) -> gpuprobe_model::PythonEnv {
    use gpuprobe_model::PythonEnv;
    use gpuprobe_model::{WorkerEvent, WorkerMode};
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
        Ok(queried) => {
            for event in queried.events {
                if let WorkerEvent::Hello {
                    python_version,
                    interpreter,
                    torch,
                    unusable,
                    packages,
                    conda,
                    ..
                } = event
                {
                    env.version = python_version;
                    env.set_interpreter(interpreter.as_deref());
                    env.torch = torch;
                    env.torch_error = unusable;
                    env.packages = packages;
                    env.conda = conda.map(|conda| *conda);
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

    /// A worker that writes `lines` on the event descriptor and exits.
    fn scripted(lines: &[&str]) -> impl Fn(&Path) -> WorkerCommand {
        let script: String = lines.iter().map(|l| format!("echo '{l}' >&3\n")).collect();
        move |_| WorkerCommand {
            program: PathBuf::from("sh"),
            args: vec!["-c".into(), script.clone().into()],
            env: BTreeMap::new(),
            remove_env: Vec::new(),
            waits_for_start: false,
        }
    }

    #[test]
    fn a_catalog_this_build_cannot_read_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("catalog.json");
        let timeout = std::time::Duration::from_secs(30);
        let spec = r#"{"id":"x.y","tier":"quick","layer":"framework","rule":{"kind":"ulps"},"backend":"python","timeout_s":1.0,"description":"d"}"#;
        let catalog = format!(r#"{{"event":"catalog","probes":[{spec}]}}"#);
        let done = r#"{"event":"done"}"#;
        let err = fetch_catalog(scripted(&[&catalog, done]), &plan, timeout, BTreeMap::new())
            .unwrap_err();
        assert!(
            err.starts_with("the worker's catalog event could not be read: unknown variant `ulps`"),
            "{err}"
        );
        // Stray output on the descriptor is still no reason to refuse a readable catalog.
        let good = catalog.replace("ulps", "bit_exact");
        let listed = fetch_catalog(
            scripted(&["not json", r#"{"no":"event"}"#, &good, done]),
            &plan,
            timeout,
            BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(listed.probes.len(), 1);
    }

    #[test]
    fn explicit_wins() {
        let dir = tempfile::tempdir().unwrap();
        let python = dir.path().join("python");
        fs::write(&python, "").unwrap();
        fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let choice = find_python(Some(&python), &env(&[("VIRTUAL_ENV", "/v")])).unwrap();
        assert_eq!(choice.chosen_by, "--python");
        assert_eq!(choice.executable, python);
    }

    #[test]
    fn an_explicit_path_that_is_no_executable_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        fs::write(&plain, "").unwrap();
        let empty = env(&[]);
        for (path, why) in [
            (Path::new("/nonexistent/bin/python"), "no such file"),
            (dir.path(), "directory"),
            (plain.as_path(), "not executable"),
        ] {
            let err = find_python(Some(path), &empty).unwrap_err().to_string();
            assert!(err.contains(why), "{path:?}: {err}");
            assert!(err.contains(&path.display().to_string()), "{err}");
        }
    }

    #[test]
    fn a_bare_name_is_looked_up_on_path_and_a_relative_one_made_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let python = dir.path().join("mypython");
        fs::write(&python, "").unwrap();
        fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let path_env = env(&[("PATH", dir.path().to_str().unwrap())]);
        assert_eq!(
            resolve_explicit(Path::new("mypython"), &path_env).unwrap(),
            python
        );
        assert!(resolve_explicit(Path::new("nope-python"), &path_env).is_err());
        let relative = resolve_explicit(Path::new("./no-such-python"), &path_env);
        assert!(
            relative
                .unwrap_err()
                .to_string()
                .contains("./no-such-python")
        );
    }

    #[test]
    fn a_program_that_is_no_python_is_refused_and_a_broken_python_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let script = |name: &str, body: &str| {
            let path = dir.path().join(name);
            fs::write(&path, body).unwrap();
            fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            path
        };
        let empty = env(&[]);
        let not_python = script(
            "not-python",
            "#!/bin/sh\necho 'usage: tool FILE' >&2\nexit 2\n",
        );
        let err = validate_explicit(&not_python, &empty).unwrap_err();
        assert!(err.reason.contains("not a Python"), "{err}");
        assert!(err.reason.contains("usage: tool FILE"), "{err}");
        let no_format = script("no-shebang", "\x7fELF garbage");
        assert!(validate_explicit(&no_format, &empty).is_err());
        let broken = script(
            "broken-python",
            "#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n",
        );
        assert!(validate_explicit(&broken, &empty).is_ok());
        let fake = script(
            "fake-python",
            "#!/bin/sh\necho noise\necho 'gpuprobe-python 51120112'\n",
        );
        assert!(validate_explicit(&fake, &empty).is_ok());
        let real = validate_explicit(Path::new("python3"), &env(&[("PATH", "/usr/bin:/bin")]));
        if Path::new("/usr/bin/python3").exists() {
            assert_eq!(real.unwrap().chosen_by, "--python");
        }
    }

    #[test]
    fn an_interpreter_that_does_not_answer_in_time_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let hung = dir.path().join("hung-python");
        fs::write(&hung, "#!/bin/sh\nsleep 30\n").unwrap();
        fs::set_permissions(&hung, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let started = Instant::now();
        let err =
            validate_explicit_within(&hung, &env(&[]), Duration::from_millis(300)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10), "waited on it");
        assert!(
            err.to_string()
                .contains("gave no answer within 0.3 s when asked for its version"),
            "{err}"
        );
        assert!(VERSION_CHECK_TIMEOUT <= Duration::from_secs(10));
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
            !embedded::PYTHON_PACKAGE.is_empty(),
            "the build embedded no Python files"
        );
        let dir = tempfile::tempdir().unwrap();
        extract_package(dir.path()).unwrap();
        assert!(dir.path().join("gpuprobe/worker/main.py").is_file());
    }
}
