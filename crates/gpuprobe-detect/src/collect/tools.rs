//! Optional external tools, run with a wall-clock limit and never allowed to hang the
//! collector: `rocminfo`, `amd-smi static --json`, `nvidia-smi` (csv query and
//! dashboard), `dkms status`, `mokutil --sb-state`, and `dmesg` as the kernel-log
//! fallback. Their output goes through the same parsers as `gpuprobe triage` and only
//! fills gaps left by sysfs.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuprobe_model::Fingerprint;
use gpuprobe_model::fingerprint::Vendor;

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

fn find(env: &BTreeMap<String, String>, name: &str) -> Option<PathBuf> {
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

/// Runs a tool with a time limit and returns its stdout.
pub(crate) fn run(
    env: &BTreeMap<String, String>,
    name: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<String, ToolError> {
    let program = find(env, name).ok_or(ToolError::NotFound)?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("LC_ALL", "C")
        .spawn()
        .map_err(|e| ToolError::Spawn(e.to_string()))?;
    // Drain the pipes on threads so a chatty tool cannot block on a full pipe.
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let err_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                // The reader threads end when the pipes close; a grandchild holding them
                // open would keep them alive, so they are not joined.
                return Err(ToolError::Timeout(timeout));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(ToolError::Spawn(e.to_string())),
        }
    };
    let out = String::from_utf8_lossy(&out_thread.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&err_thread.join().unwrap_or_default()).into_owned();
    if !status.success() && out.trim().is_empty() {
        return Err(ToolError::Failed {
            status: status.to_string(),
            stderr: err
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .to_owned(),
        });
    }
    Ok(out)
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
}
