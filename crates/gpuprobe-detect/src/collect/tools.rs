//! Optional external tools, run with a wall-clock limit and never allowed to hang the
//! collector: `rocminfo`, `amd-smi static --json`, `nvidia-smi` (csv query and
//! dashboard), `dkms status`, `mokutil --sb-state`, and `dmesg` as the kernel-log
//! fallback. Their output goes through the same parsers as `gpuprobe triage` and only
//! fills gaps left by sysfs.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use gpuprobe_model::Fingerprint;
use gpuprobe_model::Vendor;

use crate::merge::unreadable;
use crate::parse::{amd_smi, nvidia_smi, rocminfo, system};
use crate::root::Root;

/// Why a tool produced no usable output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ToolError {
    /// Not found in `PATH` or the ROCm bin directories.
    #[error("not installed (not found in PATH)")]
    NotFound,
    /// Could not be started.
    #[error("could not start: {0}")]
    Spawn(String),
    /// Ran past the limit and was killed.
    #[error("killed after {0:?} (no answer)")]
    Timeout(Duration),
    /// Exited with a failure and printed nothing on stdout.
    #[error("failed ({status}): {stderr}")]
    Failed {
        /// Exit status.
        status: String,
        /// First line of stderr.
        stderr: String,
    },
}

pub(super) fn find(env: &BTreeMap<String, String>, name: &str) -> Option<PathBuf> {
    let path = env.get("PATH").cloned().unwrap_or_else(|| {
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned()
    });
    let mut dirs: Vec<String> = path
        .split(':')
        .filter(|d| !d.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(rocm) = env.get("ROCM_PATH") {
        dirs.push(format!("{rocm}/bin"));
    }
    dirs.push("/opt/rocm/bin".to_owned());
    dirs.extend(["/usr/sbin", "/sbin"].map(str::to_owned));
    dirs.into_iter()
        .map(|d| PathBuf::from(d).join(name))
        .find(|p| p.is_file())
}

/// What a program printed, once it exited within its time limit.
#[derive(Debug, Clone)]
pub struct Captured {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its standard output (lossy UTF-8).
    pub stdout: String,
    /// Its standard error (lossy UTF-8).
    pub stderr: String,
}

/// Why [`capture`] has no output to give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    /// Could not be started.
    #[error("could not start: {0}")]
    Spawn(String),
    /// Ran past the limit and was killed.
    #[error("killed after {0:?} (no answer)")]
    Timeout(Duration),
}

/// Runs `command` (stdin closed, stdout and stderr captured) and waits at most `timeout`
/// for it to exit; past that it is killed. The pipes are drained on threads, so a program
/// that prints more than a pipe holds cannot block on it.
pub fn capture(mut command: Command, timeout: Duration) -> Result<Captured, CaptureError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CaptureError::Spawn(e.to_string()))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                // The reader threads end when the pipes close; a grandchild holding them
                // open would keep them alive, so they are not joined.
                return Err(CaptureError::Timeout(timeout));
            }
            // Short polls: callers on `gpuprobe run`'s start-up path wait on this.
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(CaptureError::Spawn(e.to_string())),
        }
    };
    Ok(Captured {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Runs a tool with a time limit and returns its stdout.
pub(crate) fn run(
    env: &BTreeMap<String, String>,
    name: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<String, ToolError> {
    let program = find(env, name).ok_or(ToolError::NotFound)?;
    let mut command = Command::new(program);
    command.args(args).env("LC_ALL", "C");
    let out = capture(command, timeout).map_err(|e| match e {
        CaptureError::Spawn(why) => ToolError::Spawn(why),
        CaptureError::Timeout(limit) => ToolError::Timeout(limit),
    })?;
    if !out.status.success() && out.stdout.trim().is_empty() {
        return Err(ToolError::Failed {
            status: out.status.to_string(),
            stderr: out
                .stderr
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .to_owned(),
        });
    }
    Ok(out.stdout)
}

pub(super) fn run_all(
    _root: &Root,
    env: &BTreeMap<String, String>,
    timeout: Duration,
    fp: &mut Fingerprint,
) {
    let amd = fp.gpus.iter().any(|g| g.vendor == Vendor::Amd)
        || fp.amdgpu.as_ref().is_some_and(|d| d.loaded);
    let nvidia = fp.gpus.iter().any(|g| g.vendor == Vendor::Nvidia) || fp.nvidia.is_some();
    if amd {
        match run(env, "rocminfo", &[], timeout) {
            Ok(out) => match rocminfo::parse(&out) {
                Ok(info) => info.apply(fp),
                Err(err) => unreadable(fp, "rocminfo output", err.to_string()),
            },
            Err(err) => unreadable(fp, "rocminfo output (runtime ISA)", err.to_string()),
        }
        match run(env, "amd-smi", &["static", "--json"], timeout) {
            Ok(out) => {
                if let Ok(info) = amd_smi::parse(&out) {
                    info.apply(fp);
                }
            }
            Err(ToolError::NotFound) => {}
            Err(err) => unreadable(fp, "amd-smi static", err.to_string()),
        }
        match run(env, "dkms", &["status"], timeout) {
            Ok(out) => {
                if let Ok(entries) = system::parse_dkms_status(&out) {
                    system::apply_dkms(&entries, fp);
                }
            }
            Err(ToolError::NotFound) => {}
            Err(err) => unreadable(fp, "dkms status", err.to_string()),
        }
    }
    if nvidia {
        let query = "--query-gpu=index,name,pci.bus_id,driver_version,memory.total,compute_cap,vbios_version";
        let csv = run(env, "nvidia-smi", &[query, "--format=csv"], timeout).or_else(|_| {
            run(
                env,
                "nvidia-smi",
                &[
                    "--query-gpu=index,name,pci.bus_id,driver_version,memory.total",
                    "--format=csv",
                ],
                timeout,
            )
        });
        match csv {
            Ok(out) => {
                if let Ok(info) = nvidia_smi::parse(&out) {
                    info.apply(fp);
                }
            }
            Err(err) => unreadable(fp, "nvidia-smi", err.to_string()),
        }
        if let Ok(out) = run(env, "nvidia-smi", &[], timeout)
            && let Ok(info) = nvidia_smi::parse(&out)
        {
            info.apply(fp);
        }
    }
    if fp.host.secure_boot.is_none() && (amd || nvidia) {
        match run(env, "mokutil", &["--sb-state"], timeout) {
            Ok(out) => {
                if let Ok(state) = system::parse_mokutil(&out) {
                    fp.host.secure_boot = state;
                    if state.is_some() {
                        fp.unreadable.retain(|u| u.what != "Secure Boot state");
                    }
                }
            }
            Err(ToolError::NotFound) => {}
            Err(err) => unreadable(fp, "mokutil --sb-state", err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_env() -> BTreeMap<String, String> {
        [("PATH".to_owned(), "/usr/bin:/bin".to_owned())]
            .into_iter()
            .collect()
    }

    #[test]
    fn a_tool_that_hangs_is_killed_at_the_limit() {
        let started = Instant::now();
        let result = run(&path_env(), "sleep", &["30"], Duration::from_millis(300));
        assert_eq!(result, Err(ToolError::Timeout(Duration::from_millis(300))));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn missing_and_failing_tools_say_why() {
        assert_eq!(
            run(
                &path_env(),
                "gpuprobe-no-such-tool",
                &[],
                Duration::from_secs(1)
            ),
            Err(ToolError::NotFound)
        );
        assert!(matches!(
            run(&path_env(), "false", &[], Duration::from_secs(5)),
            Err(ToolError::Failed { .. })
        ));
        assert_eq!(
            run(&path_env(), "echo", &["hello"], Duration::from_secs(5)).as_deref(),
            Ok("hello\n")
        );
    }

    #[test]
    fn capture_reads_more_than_a_pipe_holds_and_keeps_the_status() {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "head -c 1000000 /dev/zero | tr '\\0' x; echo oops >&2; exit 3",
        ]);
        let out = capture(command, Duration::from_secs(10)).unwrap();
        assert_eq!(out.stdout.len(), 1_000_000);
        assert_eq!(out.stderr, "oops\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn capture_says_why_it_has_nothing() {
        assert!(matches!(
            capture(
                Command::new("/nonexistent/gpuprobe-tool"),
                Duration::from_secs(1)
            ),
            Err(CaptureError::Spawn(_))
        ));
        let mut sleeper = Command::new("sleep");
        sleeper.arg("30");
        assert_eq!(
            capture(sleeper, Duration::from_millis(200)).unwrap_err(),
            CaptureError::Timeout(Duration::from_millis(200))
        );
    }
}
