//! The zygote: one Python interpreter that imports the framework once and forks the lanes'
//! Python workers, so that a tier pays one torch import instead of one per lane.
//!
//! Why: a tier runs a dozen or more workers side by side, and each imported torch on its
//! own, all at the start: on a 16-core host that was about a fifth of the standard tier's
//! CPU time, and the tier is bound by host CPU (`bench/cpu-profile.py`). The Python half and
//! the protocol are in `python/gpuprobe/worker/zygote.py`.
//!
//! A forked worker is supervised exactly like a spawned one: its own process group, its
//! events on fd 3, stdout and stderr into the worker log, and this process waits for it
//! (it is reparented here: this process becomes a child subreaper, Linux only). Only a
//! worker the ordinary command would start, with no environment change but the thread
//! cap, is forked; any other (settings under test, a profile's variables, another
//! interpreter) starts the ordinary way, as does every worker when the zygote cannot
//! start or dies. It is used where it pays ([`worth_it`]: two or more Python workers);
//! `GPUPROBE_ZYGOTE=1` uses it whenever it may be used, `0` never.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, recv, sendmsg, setsockopt,
    socketpair, sockopt,
};
use nix::sys::time::TimeVal;
use serde_json::Value;

use crate::process::kill_group;
use crate::worker::WorkerCommand;

/// The variable that turns the zygote off (`0`).
pub(crate) const ZYGOTE_VARIABLE: &str = "GPUPROBE_ZYGOTE";
/// The only environment change a forked worker may carry: the thread cap, which the child
/// applies through `torch.set_num_threads` (the OpenMP runtime read the variable when torch
/// loaded in the zygote).
const FORKABLE_VARIABLES: &[&str] = &["OMP_NUM_THREADS"];
/// The descriptor the zygote finds its socket on.
const SOCKET_FD: i32 = 3;
/// How long one fork request may take once the zygote is ready.
const FORK_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest reply read.
const MAX_REPLY: usize = 64 * 1024;

const BOOTSTRAP: &str = "import sys; sys.path.insert(0, sys.argv[1]); \
import gpuprobe.worker.zygote as z; z.process_main(sys.argv[2:])";

/// What `GPUPROBE_ZYGOTE` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZygoteChoice {
    /// Unset (or any other value): the run decides ([`worth_it`]).
    Auto,
    /// `1`: whenever it may be used.
    On,
    /// `0`: never.
    Off,
}

/// The choice `GPUPROBE_ZYGOTE` makes.
pub fn choice_from_environment() -> ZygoteChoice {
    match std::env::var_os(ZYGOTE_VARIABLE)
        .as_deref()
        .and_then(|v| v.to_str())
    {
        Some("0") => ZygoteChoice::Off,
        Some("1") => ZygoteChoice::On,
        _ => ZygoteChoice::Auto,
    }
}

/// Whether forking `python_workers` workers from one import pays: whenever two or more
/// would import. Measured with forked workers' inherited objects frozen out of the
/// collector (`gc.freeze`, so a collection does not write every inherited page): on a
/// 16-core H200 the standard tier's 11 Python workers took 14.38 s against 14.86 s started
/// one by one (median of 3, faster in each round) and 144 CPU seconds against 164; on 2
/// cores, where the imports queue, the CPU standard tier took 26.1 s against 34.7 s
/// (`bench/RESULTS.md`). Before the freeze, forked workers' probes ran 12 % slower and the
/// zygote did not pay on the H200.
pub fn worth_it(choice: ZygoteChoice, python_workers: usize) -> bool {
    match choice {
        ZygoteChoice::Off => false,
        ZygoteChoice::On => python_workers >= 2,
        ZygoteChoice::Auto => python_workers >= 2,
    }
}

/// The descriptors a forked worker gets (the child's ends; the zygote receives copies).
pub struct ChildFds {
    /// Its event descriptor (fd 3 in the worker).
    pub events: OwnedFd,
    /// Its stdout.
    pub stdout: OwnedFd,
    /// Its stderr.
    pub stderr: OwnedFd,
    /// Its stdin, for a worker that waits for the start line.
    pub stdin: Option<OwnedFd>,
}

enum State {
    /// Importing; the first fork waits for its `ready`.
    Starting {
        child: Child,
        socket: OwnedFd,
    },
    Ready {
        child: Child,
        socket: OwnedFd,
    },
    /// It could not start or stopped answering: every worker starts the ordinary way.
    Failed(String),
}

/// A running zygote (see the module header). Dropping it ends its process group.
pub struct Zygote {
    program: PathBuf,
    package_dir: PathBuf,
    ready_timeout: Duration,
    state: Mutex<State>,
}

impl Zygote {
    /// Starts the zygote for workers of `python` with the package at `package_dir`; the
    /// import runs in the background and the first [`Zygote::fork`] waits for it (at most
    /// `ready_timeout`). `options` are the run's worker options (the bytecode cache);
    /// `log`, where its own stdout and stderr go. Fails when this platform or process
    /// cannot adopt forked workers.
    pub fn start(
        python: &Path,
        package_dir: &Path,
        options: &BTreeMap<String, Value>,
        log: Option<&Path>,
        ready_timeout: Duration,
    ) -> Result<Zygote, String> {
        adopt_orphans()?;
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| format!("no socket pair: {e}"))?;
        let output = match log {
            Some(path) => {
                let file = File::options()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
                let copy = file.try_clone().map_err(|e| e.to_string())?;
                (Stdio::from(file), Stdio::from(copy))
            }
            None => (Stdio::null(), Stdio::null()),
        };
        let options = serde_json::to_string(options).map_err(|e| e.to_string())?;
        let mut command = Command::new(python);
        command
            .args(["-X", "faulthandler", "-c", BOOTSTRAP])
            .arg(package_dir)
            .arg(options)
            .stdin(Stdio::null())
            .stdout(output.0)
            .stderr(output.1);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        command
            .fd_mappings(vec![FdMapping {
                parent_fd: theirs,
                child_fd: SOCKET_FD,
            }])
            .map_err(|_| "socket descriptor collides with another mapping".to_string())?;
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
        drop(command);
        Ok(Zygote {
            program: python.to_path_buf(),
            package_dir: package_dir.to_path_buf(),
            ready_timeout,
            state: Mutex::new(State::Starting {
                child,
                socket: ours,
            }),
        })
    }

    /// The worker arguments (after the package directory) when `cmd` is a worker this
    /// zygote may fork: the ordinary worker command of the same interpreter and package,
    /// with no environment change but the thread cap.
    pub fn forkable_args(&self, cmd: &WorkerCommand) -> Option<Vec<String>> {
        forkable_args(&self.program, &self.package_dir, cmd)
    }

    /// Forks a worker running `args` with `env` (both as [`Zygote::forkable_args`] allowed)
    /// on `fds`; its process id, reparented to this process. An error means: start it the
    /// ordinary way (the zygote is then marked failed when it is the zygote's fault).
    pub fn fork(
        &self,
        args: &[String],
        env: &BTreeMap<String, String>,
        fds: &ChildFds,
    ) -> Result<u32, String> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| "zygote lock poisoned".to_string())?;
        if let State::Starting { .. } = *state {
            let next = match std::mem::replace(&mut *state, State::Failed(String::new())) {
                State::Starting { mut child, socket } => {
                    match await_ready(&socket, self.ready_timeout) {
                        Ok(()) => State::Ready { child, socket },
                        Err(why) => {
                            end(&mut child);
                            State::Failed(why)
                        }
                    }
                }
                other => other,
            };
            *state = next;
        }
        let socket = match &*state {
            State::Ready { socket, .. } => socket,
            State::Failed(why) => return Err(format!("the zygote is not running: {why}")),
            State::Starting { .. } => unreachable!("a starting zygote was just resolved"),
        };
        let request = serde_json::json!({
            "argv": args,
            "env": env,
            "stdin": fds.stdin.is_some(),
        })
        .to_string();
        let mut raw: Vec<RawFd> = vec![
            fds.events.as_raw_fd(),
            fds.stdout.as_raw_fd(),
            fds.stderr.as_raw_fd(),
        ];
        if let Some(stdin) = &fds.stdin {
            raw.push(stdin.as_raw_fd());
        }
        let outcome = sendmsg::<()>(
            socket.as_raw_fd(),
            &[IoSlice::new(request.as_bytes())],
            &[ControlMessage::ScmRights(&raw)],
            MsgFlags::empty(),
            None,
        )
        .map_err(|e| format!("cannot send the fork request: {e}"))
        .and_then(|_| receive(socket, FORK_TIMEOUT));
        match outcome {
            Ok(reply) => match reply.get("pid").and_then(Value::as_u64) {
                Some(pid) if pid > 1 && pid <= i32::MAX as u64 => Ok(pid as u32),
                _ => Err(reply
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("an unreadable reply")
                    .to_string()),
            },
            Err(why) => {
                // The zygote is gone or stuck: no later worker waits on it.
                if let State::Ready { child, .. } = &mut *state {
                    end(child);
                }
                *state = State::Failed(why.clone());
                Err(why)
            }
        }
    }
}

/// [`Zygote::forkable_args`] for a zygote of `program` with the package at `package_dir`.
fn forkable_args(program: &Path, package_dir: &Path, cmd: &WorkerCommand) -> Option<Vec<String>> {
    if cmd.program != program || !cmd.remove_env.is_empty() {
        return None;
    }
    if cmd
        .env
        .keys()
        .any(|k| !FORKABLE_VARIABLES.contains(&k.as_str()))
    {
        return None;
    }
    // The ordinary command up to the package directory; what follows is the worker's own
    // command line.
    let prefix: Vec<OsString> = crate::python::worker_command(program, package_dir, Path::new(""))
        .args
        .into_iter()
        .take(5)
        .collect();
    if cmd.args.len() < prefix.len() || cmd.args[..prefix.len()] != prefix[..] {
        return None;
    }
    cmd.args[prefix.len()..]
        .iter()
        .map(|a| a.to_str().map(str::to_owned))
        .collect()
}

impl std::fmt::Debug for Zygote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zygote")
            .field("program", &self.program)
            .field("package_dir", &self.package_dir)
            .finish_non_exhaustive()
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut() {
            match state {
                State::Starting { child, .. } | State::Ready { child, .. } => end(child),
                State::Failed(_) => {}
            }
        }
    }
}

fn end(child: &mut Child) {
    kill_group(child.id());
    let _ = child.wait();
}

/// Makes this process the one that adopts its descendants' orphans, so that a worker the
/// zygote forks (twice, its parent gone) is this process's child to wait for.
#[cfg(target_os = "linux")]
fn adopt_orphans() -> Result<(), String> {
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("cannot adopt workers: {e}"))
}

#[cfg(not(target_os = "linux"))]
fn adopt_orphans() -> Result<(), String> {
    Err("forked workers need Linux (a child subreaper)".into())
}

fn await_ready(socket: &OwnedFd, timeout: Duration) -> Result<(), String> {
    let reply = receive(socket, timeout)?;
    if reply.get("ready").and_then(Value::as_bool) == Some(true) {
        Ok(())
    } else {
        Err(reply
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("it did not say ready")
            .to_string())
    }
}

/// One reply message, within `timeout`.
fn receive(socket: &OwnedFd, timeout: Duration) -> Result<Value, String> {
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; MAX_REPLY];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no answer within {} s", timeout.as_secs()));
        }
        // Wake up at least every second, so a deadline is kept whatever the socket does.
        let wait = TimeVal::new(
            left.as_secs().min(1) as _,
            if left.as_secs() >= 1 {
                0
            } else {
                left.subsec_micros() as _
            },
        );
        setsockopt(socket, sockopt::ReceiveTimeout, &wait).map_err(|e| e.to_string())?;
        match recv(socket.as_raw_fd(), &mut buf, MsgFlags::empty()) {
            Ok(0) => return Err("it exited".into()),
            Ok(n) => {
                return serde_json::from_slice(&buf[..n])
                    .map_err(|e| format!("an unreadable reply: {e}"));
            }
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("cannot read its reply: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ordinary() -> WorkerCommand {
        crate::python::worker_command(
            Path::new("/usr/bin/python3"),
            Path::new("/tmp/pkg"),
            Path::new("/tmp/plan.json"),
        )
    }

    #[test]
    fn the_zygote_pays_wherever_two_workers_would_import() {
        assert!(worth_it(ZygoteChoice::Auto, 13));
        assert!(worth_it(ZygoteChoice::Auto, 2));
        assert!(
            !worth_it(ZygoteChoice::Auto, 1),
            "one worker has nothing to share"
        );
        assert!(worth_it(ZygoteChoice::On, 2));
        assert!(!worth_it(ZygoteChoice::On, 1));
        assert!(!worth_it(ZygoteChoice::Off, 13));
    }

    #[test]
    fn only_the_ordinary_worker_with_at_most_the_thread_cap_is_forked() {
        let python = Path::new("/usr/bin/python3");
        let package = Path::new("/tmp/pkg");
        let mut capped = ordinary();
        capped.env.insert("OMP_NUM_THREADS".into(), "4".into());
        let args = forkable_args(python, package, &capped).unwrap();
        assert_eq!(args, ["--plan", "/tmp/plan.json", "--event-fd", "3"]);

        // Any other variable may be read when torch is imported: started the ordinary way.
        let mut setting = ordinary();
        setting.env.insert(
            "PYTORCH_CUDA_ALLOC_CONF".into(),
            "expandable_segments:True".into(),
        );
        assert_eq!(forkable_args(python, package, &setting), None);
        let mut unset = ordinary();
        unset.remove_env.push("CUDA_VISIBLE_DEVICES".into());
        assert_eq!(forkable_args(python, package, &unset), None);
        // Another interpreter or package, or not a worker at all.
        assert_eq!(
            forkable_args(Path::new("/opt/python3"), package, &ordinary()),
            None
        );
        assert_eq!(
            forkable_args(python, Path::new("/tmp/other"), &ordinary()),
            None
        );
        let mut native = ordinary();
        native.args = vec!["__native-worker".into()];
        assert_eq!(forkable_args(python, package, &native), None);
    }
}
