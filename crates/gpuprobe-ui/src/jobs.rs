//! Checks and fixes started from the page. Each is a child `gpuprobe check --run-dir <runs
//! dir>/<name>` (or `gpuprobe fix --from <a check> --run-dir ...`) of the running binary: the same command, supervision and run directory as one typed at a
//! terminal, so its results land in `results.jsonl` as they are known, its report at the
//! end, and the page reads them from there like any other run's. The child runs in a
//! process group of its own, and stopping it sends SIGINT to that group, as Ctrl-C at a
//! terminal does: the check stops its workers and reports what did not run.
//!
//! What the page asks for is validated here before anything starts ([`CheckRequest::parse`]);
//! each value goes to the child as one `--name=value` argument, never through a shell.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// The most lines of a child's output kept for its page.
const LOG_LINES: usize = 200;

/// A check the page asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CheckRequest {
    /// The tier's name.
    pub tier: String,
    /// `--device`: `all`, `cpu`, `0`, `0,1`.
    pub device: String,
    /// `--only` patterns.
    pub only: Vec<String>,
    /// `--simulate` presets (comma-separated), or empty.
    pub simulate: String,
}

impl CheckRequest {
    /// Reads and checks the form: a known tier, and devices, patterns and presets of the
    /// characters their names are made of.
    pub(crate) fn parse(form: &[(String, String)]) -> Result<CheckRequest, String> {
        let get = |name: &str| {
            form.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        let tier = get("tier");
        if crate::run_index::tier_named(&tier).is_none() {
            return Err(format!("no tier {tier:?}: quick, standard, full or soak"));
        }
        let device = match get("device") {
            d if d.is_empty() => "all".to_string(),
            d => d,
        };
        if !device
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b',' | b':'))
        {
            return Err(format!(
                "devices {device:?}: `all`, `cpu`, or GPU indices such as 0,1"
            ));
        }
        let only: Vec<String> = get("only")
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        if let Some(bad) = only.iter().find(|p| {
            !p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'*' | b'?'))
        }) {
            return Err(format!(
                "pattern {bad:?}: probe ids and families with * and ? (e.g. dtype.*)"
            ));
        }
        let simulate = get("simulate");
        if !simulate
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b',' | b'-' | b'_'))
        {
            return Err(format!(
                "simulation {simulate:?}: preset names separated by commas (docs/probes.md lists them)"
            ));
        }
        let known: Vec<String> = gpuprobe_runner::simulation_presets()
            .into_iter()
            .map(|p| p.name)
            .collect();
        if let Some(unknown) = simulate
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .find(|p| !known.iter().any(|k| k == p))
        {
            return Err(format!(
                "no simulation preset {unknown:?} (the list below names them)"
            ));
        }
        Ok(CheckRequest {
            tier,
            device,
            only,
            simulate,
        })
    }

    /// The child's arguments after the binary.
    pub(crate) fn arguments(&self, run_dir: &Path, python: Option<&Path>) -> Vec<String> {
        let mut args = vec![
            "check".to_string(),
            format!("--tier={}", self.tier),
            format!("--device={}", self.device),
            format!("--run-dir={}", run_dir.display()),
        ];
        args.extend(self.only.iter().map(|p| format!("--only={p}")));
        if !self.simulate.is_empty() {
            args.push(format!("--simulate={}", self.simulate));
        }
        if let Some(python) = python {
            args.push(format!("--python={}", python.display()));
        }
        args
    }
}

/// How a started check stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct JobView {
    /// Whether the child still runs.
    pub running: bool,
    /// Its exit code once it ended (none when a signal ended it).
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did (SIGKILL from the OOM killer, a crash).
    pub signal: Option<i32>,
    /// Whether the user asked it to stop.
    pub stopping: bool,
    /// The last lines it printed (stdout and stderr).
    pub log: Vec<String>,
    /// Whether it was started under fault simulation (`--simulate`): its page says
    /// SIMULATED before its plan is written.
    pub simulated: bool,
}

struct Job {
    pid: u32,
    simulated: bool,
    stopping: bool,
    /// How it ended, once it did: its exit code, or the signal that ended it.
    ended: Option<(Option<i32>, Option<i32>)>,
    log: VecDeque<String>,
}

/// The checks this server started, by run name.
#[derive(Default)]
pub(crate) struct Jobs {
    jobs: Mutex<BTreeMap<String, Arc<Mutex<Job>>>>,
}

impl Jobs {
    /// Starts `request` as a child `check` of `exe` in a new run directory under `root`;
    /// the run's name.
    pub(crate) fn start(
        &self,
        exe: &Path,
        root: &Path,
        python: Option<&Path>,
        request: &CheckRequest,
    ) -> Result<String, String> {
        self.spawn(exe, root, "check", |run_dir| {
            request.arguments(run_dir, python)
        })
    }

    /// Starts `gpuprobe fix --from CHECK` as a child of `exe` in a new run directory under
    /// `root`, its search bounded by `max_runs`; the run's name.
    pub(crate) fn start_fix(
        &self,
        exe: &Path,
        root: &Path,
        python: Option<&Path>,
        from: &Path,
        max_runs: u32,
    ) -> Result<String, String> {
        self.spawn(exe, root, "fix", |run_dir| {
            fix_arguments(from, run_dir, max_runs, python)
        })
    }

    fn spawn(
        &self,
        exe: &Path,
        root: &Path,
        command_name: &str,
        arguments: impl FnOnce(&Path) -> Vec<String>,
    ) -> Result<String, String> {
        std::fs::create_dir_all(root)
            .map_err(|e| format!("cannot make the runs directory {}: {e}", root.display()))?;
        let run_dir = fresh_run_dir(root, command_name)?;
        // Made now, so that its page is there from the first moment; `check` and `fix` take
        // an empty directory as their run directory.
        std::fs::create_dir(&run_dir)
            .map_err(|e| format!("cannot make the run directory {}: {e}", run_dir.display()))?;
        let name = run_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut command = Command::new(exe);
        {
            use std::os::unix::process::CommandExt;
            command.process_group(0);
        }
        let arguments = arguments(&run_dir);
        let simulated = arguments.iter().any(|a| a.starts_with("--simulate"));
        let mut child = command
            .args(arguments)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let job = Arc::new(Mutex::new(Job {
            pid: child.id(),
            simulated,
            stopping: false,
            ended: None,
            log: VecDeque::new(),
        }));
        let readers: Vec<Box<dyn std::io::Read + Send>> = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        .collect();
        for stream in readers {
            let job = Arc::clone(&job);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut job = job.lock().unwrap_or_else(|e| e.into_inner());
                    if job.log.len() == LOG_LINES {
                        job.log.pop_front();
                    }
                    job.log.push_back(line);
                }
            });
        }
        {
            let job = Arc::clone(&job);
            std::thread::spawn(move || {
                use std::os::unix::process::ExitStatusExt;
                let status = child.wait().ok();
                let ended = (
                    status.and_then(|s| s.code()),
                    status.and_then(|s| s.signal()),
                );
                job.lock().unwrap_or_else(|e| e.into_inner()).ended = Some(ended);
            });
        }
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone(), job);
        Ok(name)
    }

    /// Asks the check `name` to stop (SIGINT to its process group); whether it was one of
    /// this server's still running.
    pub(crate) fn stop(&self, name: &str) -> bool {
        let Some(job) = self.job(name) else {
            return false;
        };
        let mut job = job.lock().unwrap_or_else(|e| e.into_inner());
        if job.ended.is_some() {
            return false;
        }
        job.stopping = true;
        let Ok(pid) = i32::try_from(job.pid) else {
            return false;
        };
        nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGINT,
        )
        .is_ok()
    }

    /// Asks every running child to stop (SIGINT to each process group) and waits up to
    /// `wait` for them to end; how many were running.
    pub(crate) fn stop_all(&self, wait: std::time::Duration) -> usize {
        let names: Vec<String> = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        let stopped = names.iter().filter(|name| self.stop(name)).count();
        let deadline = std::time::Instant::now() + wait;
        while std::time::Instant::now() < deadline
            && names
                .iter()
                .any(|name| self.view(name).is_some_and(|j| j.running))
        {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        stopped
    }

    /// How the check `name` stands, when this server started it.
    pub(crate) fn view(&self, name: &str) -> Option<JobView> {
        let job = self.job(name)?;
        let job = job.lock().unwrap_or_else(|e| e.into_inner());
        Some(JobView {
            running: job.ended.is_none(),
            exit_code: job.ended.and_then(|(code, _)| code),
            signal: job.ended.and_then(|(_, signal)| signal),
            stopping: job.stopping,
            log: job.log.iter().cloned().collect(),
            simulated: job.simulated,
        })
    }

    fn job(&self, name: &str) -> Option<Arc<Mutex<Job>>> {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
}

/// A run directory under `root` named as `check` names its own, that does not exist yet (a
/// second check started within the same second waits for the next).
fn fresh_run_dir(root: &Path, command: &str) -> Result<PathBuf, String> {
    for _ in 0..5 {
        let path = gpuprobe_runner::new_run_dir_in(root, command);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(path);
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    Err("a run directory for a new run could not be named; try again".into())
}

/// The most trial runs a `fix` started from the page may take (`fix --max-runs`).
pub(crate) const MAX_FIX_RUNS: u32 = 200;

/// A `fix` child's arguments after the binary: the search starts from the finished check
/// `from`, as `gpuprobe fix --from` does.
pub(crate) fn fix_arguments(
    from: &Path,
    run_dir: &Path,
    max_runs: u32,
    python: Option<&Path>,
) -> Vec<String> {
    let mut args = vec![
        "fix".to_string(),
        format!("--from={}", from.display()),
        format!("--run-dir={}", run_dir.display()),
        format!("--max-runs={}", max_runs.clamp(1, MAX_FIX_RUNS)),
    ];
    if let Some(python) = python {
        args.push(format!("--python={}", python.display()));
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_check_request_is_validated_and_passed_as_single_arguments() {
        let request = CheckRequest::parse(&form(&[
            ("tier", "quick"),
            ("device", "cpu"),
            ("only", "dtype.* copy.h2d, bool.?"),
            ("simulate", "h2d-zeros,bf16-fp32-zeros"),
        ]))
        .unwrap();
        assert_eq!(request.only, ["dtype.*", "copy.h2d", "bool.?"]);
        let args = request.arguments(Path::new("/runs/check-x"), Some(Path::new("/py")));
        assert_eq!(
            args,
            [
                "check",
                "--tier=quick",
                "--device=cpu",
                "--run-dir=/runs/check-x",
                "--only=dtype.*",
                "--only=copy.h2d",
                "--only=bool.?",
                "--simulate=h2d-zeros,bf16-fp32-zeros",
                "--python=/py"
            ]
        );
        assert_eq!(
            fix_arguments(
                Path::new("/runs/check-x"),
                Path::new("/runs/fix-y"),
                100_000,
                None
            ),
            [
                "fix",
                "--from=/runs/check-x",
                "--run-dir=/runs/fix-y",
                "--max-runs=200"
            ]
        );
        let plain = CheckRequest::parse(&form(&[("tier", "full")])).unwrap();
        assert_eq!(plain.device, "all");
        for bad in [
            form(&[("tier", "huge")]),
            form(&[("tier", "quick"), ("device", "cpu; rm -rf /")]),
            form(&[("tier", "quick"), ("only", "--python=/evil")]),
            form(&[("tier", "quick"), ("only", "a/../b")]),
            form(&[("tier", "quick"), ("simulate", "../../etc/passwd")]),
            form(&[("tier", "quick"), ("simulate", "h2d-zeros,no-such-preset")]),
        ] {
            assert!(CheckRequest::parse(&bad).is_err(), "{bad:?}");
        }
    }
}
