//! One worker process: started in its own process group with a private event descriptor,
//! its events read as JSON lines, its stdout/stderr kept as a log and a short tail.
//!
//! The event descriptor is a pipe mapped to fd 3 in the child, so whatever libraries print
//! on stdout or stderr can never corrupt the protocol; those streams go to the worker log.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};
use gpuprobe_model::{EVENT_FD, START_LINE, WorkerEvent};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::error::RunnerError;
use crate::process::kill_group;
use crate::zygote::{ChildFds, Zygote};

/// How many output lines a worker's tail keeps.
const TAIL_LINES: usize = 40;

/// A worker to start: program, arguments and environment changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The executable (a Python interpreter, or gpuprobe itself for native probes).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables to set (settings under test, profile values).
    pub env: BTreeMap<String, String>,
    /// Variables to remove from the inherited environment.
    pub remove_env: Vec<String>,
    /// Whether its plan says `wait_for_start`: the worker then gets a pipe as stdin and
    /// waits, after its hello, for the start line (its supervisor's [`StartGate`] says when).
    ///
    /// [`StartGate`]: crate::StartGate
    pub waits_for_start: bool,
}

/// What arrives from a worker.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerMessage {
    /// A protocol event.
    Event(Box<WorkerEvent>),
    /// A line on the event descriptor that is not a protocol event.
    Garbage(String),
    /// The event descriptor was closed (the worker exited or closed it).
    Closed,
}

/// The result of waiting for the next message.
#[derive(Debug)]
pub(crate) enum Next {
    /// A message arrived.
    Message(WorkerMessage),
    /// The deadline passed first.
    TimedOut,
}

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkerExit {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Signal, when one killed it.
    pub signal: Option<i32>,
}

impl From<ExitStatus> for WorkerExit {
    fn from(status: ExitStatus) -> Self {
        WorkerExit {
            code: status.code(),
            signal: status.signal(),
        }
    }
}

/// A running worker.
pub(crate) struct RunningWorker {
    process: Process,
    events: Receiver<WorkerMessage>,
    tail: Arc<Mutex<VecDeque<String>>>,
    readers: Vec<thread::JoinHandle<()>>,
    /// The start line's pipe, for a worker that waits for it.
    start: Option<Box<dyn Write + Send>>,
}

/// The worker's process: one this process started, or one the zygote forked and this
/// process adopted (`zygote`), waited for by its id.
enum Process {
    Spawned(Child),
    Forked { pid: u32, exit: Option<WorkerExit> },
}

impl Process {
    fn id(&self) -> u32 {
        match self {
            Process::Spawned(child) => child.id(),
            Process::Forked { pid, .. } => *pid,
        }
    }

    /// Its exit, when it has ended (`Err` when it cannot be waited for).
    fn try_wait(&mut self) -> Result<Option<WorkerExit>, ()> {
        match self {
            Process::Spawned(child) => child.try_wait().map(|s| s.map(Into::into)).map_err(|_| ()),
            Process::Forked { pid, exit } => {
                if exit.is_none() {
                    *exit = wait_forked(*pid, WaitPidFlag::WNOHANG)?;
                }
                Ok(*exit)
            }
        }
    }

    /// Waits for it to end.
    fn wait(&mut self) -> Result<WorkerExit, ()> {
        match self {
            Process::Spawned(child) => child.wait().map(Into::into).map_err(|_| ()),
            Process::Forked { pid, exit } => {
                if exit.is_none() {
                    *exit = wait_forked(*pid, WaitPidFlag::empty())?;
                }
                exit.ok_or(())
            }
        }
    }
}

fn wait_forked(pid: u32, flags: WaitPidFlag) -> Result<Option<WorkerExit>, ()> {
    loop {
        match waitpid(Pid::from_raw(pid as i32), Some(flags)) {
            Ok(WaitStatus::Exited(_, code)) => {
                return Ok(Some(WorkerExit {
                    code: Some(code),
                    signal: None,
                }));
            }
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                return Ok(Some(WorkerExit {
                    code: None,
                    signal: Some(signal as i32),
                }));
            }
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(_) => continue, // stopped or continued: not an end
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return Err(()),
        }
    }
}

impl RunningWorker {
    /// Starts `cmd` with the event pipe on fd 3, stdin closed (a pipe for the start line when
    /// it waits for one), and stdout/stderr appended to `log` (when given) and kept in a tail.
    pub(crate) fn spawn(
        cmd: &WorkerCommand,
        log: Option<&Path>,
    ) -> Result<RunningWorker, RunnerError> {
        let (event_reader, event_writer) =
            std::io::pipe().map_err(|source| RunnerError::Spawn {
                program: cmd.program.clone(),
                source,
            })?;
        let mut command = Command::new(&cmd.program);
        command
            .args(&cmd.args)
            .stdin(if cmd.waits_for_start {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Own process group: a hang is ended by killing the group, which also takes
            // the probe's own children (DataLoader workers, compilers).
            .process_group(0);
        for name in &cmd.remove_env {
            command.env_remove(name);
        }
        command.envs(&cmd.env);
        command
            .fd_mappings(vec![FdMapping {
                parent_fd: event_writer.into(),
                child_fd: EVENT_FD,
            }])
            .map_err(|_| {
                RunnerError::Protocol("event descriptor collides with another mapping".into())
            })?;
        let mut child = command.spawn().map_err(|source| RunnerError::Spawn {
            program: cmd.program.clone(),
            source,
        })?;
        // The command still owns our copy of the pipe's write end; drop it so that the
        // reader sees end-of-file when the worker exits.
        drop(command);
        let start = child
            .stdin
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn Write + Send>);

        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        Self::watch(
            Process::Spawned(child),
            event_reader,
            stdout,
            stderr,
            start,
            log,
        )
    }

    /// Has `zygote` fork the worker `cmd` would start, running `args` (what
    /// [`Zygote::forkable_args`] allowed for `cmd`); the error says why it could not (start
    /// it with [`RunningWorker::spawn`] then).
    pub(crate) fn fork_from(
        zygote: &Zygote,
        args: &[String],
        cmd: &WorkerCommand,
        log: Option<&Path>,
    ) -> Result<RunningWorker, String> {
        let (event_reader, event_writer) = std::io::pipe().map_err(|e| e.to_string())?;
        let (stdout_reader, stdout_writer) = std::io::pipe().map_err(|e| e.to_string())?;
        let (stderr_reader, stderr_writer) = std::io::pipe().map_err(|e| e.to_string())?;
        let (stdin_reader, stdin_writer) = if cmd.waits_for_start {
            let (r, w) = std::io::pipe().map_err(|e| e.to_string())?;
            (Some(OwnedFd::from(r)), Some(w))
        } else {
            (None, None)
        };
        let fds = ChildFds {
            events: event_writer.into(),
            stdout: stdout_writer.into(),
            stderr: stderr_writer.into(),
            stdin: stdin_reader,
        };
        let pid = zygote.fork(args, &cmd.env, &fds)?;
        // Our copies of the child's ends go now, so each reader sees end-of-file when the
        // worker (and whatever inherited them) is gone.
        drop(fds);
        Self::watch(
            Process::Forked { pid, exit: None },
            event_reader,
            Some(stdout_reader),
            Some(stderr_reader),
            stdin_writer.map(|w| Box::new(w) as Box<dyn Write + Send>),
            log,
        )
        .map_err(|e| e.to_string())
    }

    /// Reads a started worker's events and output.
    fn watch(
        process: Process,
        event_reader: impl Read + Send + 'static,
        stdout: Option<impl Read + Send + 'static>,
        stderr: Option<impl Read + Send + 'static>,
        start: Option<Box<dyn Write + Send>>,
        log: Option<&Path>,
    ) -> Result<RunningWorker, RunnerError> {
        let mut process = process;
        let log_file = match log {
            Some(path) => match File::options().create(true).append(true).open(path) {
                Ok(file) => Some(Arc::new(Mutex::new(file))),
                Err(e) => {
                    kill_group(process.id());
                    let _ = process.wait();
                    return Err(RunnerError::io("cannot open worker log", path, e));
                }
            },
            None => None,
        };
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES)));
        let mut readers = Vec::new();
        if let Some(stdout) = stdout {
            readers.push(spawn_output_reader(
                stdout,
                "out",
                tail.clone(),
                log_file.clone(),
            ));
        }
        if let Some(stderr) = stderr {
            readers.push(spawn_output_reader(
                stderr,
                "err",
                tail.clone(),
                log_file.clone(),
            ));
        }
        let (sender, events) = mpsc::channel();
        readers.push(thread::spawn(move || {
            read_messages(BufReader::new(event_reader), |message| {
                sender.send(message).is_ok()
            });
        }));
        Ok(RunningWorker {
            process,
            events,
            tail,
            readers,
            start,
        })
    }

    /// Lets a worker that waits for the start line begin its probes (once; later calls and
    /// workers that do not wait are no-ops). A worker that already died is noticed through
    /// its event pipe, so a failed write is not an error here.
    pub(crate) fn start(&mut self) {
        if let Some(mut pipe) = self.start.take() {
            let _ = writeln!(pipe, "{START_LINE}");
        }
    }

    /// The worker's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Waits for the next message until `deadline`.
    pub(crate) fn next(&self, deadline: Instant) -> Next {
        let timeout = deadline.saturating_duration_since(Instant::now());
        match self.events.recv_timeout(timeout) {
            Ok(message) => Next::Message(message),
            Err(RecvTimeoutError::Timeout) => Next::TimedOut,
            Err(RecvTimeoutError::Disconnected) => Next::Message(WorkerMessage::Closed),
        }
    }

    /// The last lines the worker printed (stdout and stderr interleaved as they arrived).
    pub(crate) fn tail(&self) -> Vec<String> {
        self.tail
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Ends a hung worker: asks it for a traceback (SIGUSR1, which the Python worker
    /// registers with faulthandler), then kills its whole process group.
    pub(crate) fn kill_hung(&mut self) -> WorkerExit {
        let pid = Pid::from_raw(self.process.id() as i32);
        let _ = kill(pid, Signal::SIGUSR1);
        thread::sleep(Duration::from_millis(300));
        kill_group(self.process.id());
        self.wait()
    }

    /// Waits for the process to end (it is killed if it outlives a grace period) and for
    /// its output to be read completely.
    pub(crate) fn wait(&mut self) -> WorkerExit {
        let grace = Instant::now() + Duration::from_secs(10);
        let status = loop {
            match self.process.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < grace => thread::sleep(Duration::from_millis(5)),
                _ => {
                    kill_group(self.process.id());
                    match self.process.wait() {
                        Ok(status) => break status,
                        Err(_) => {
                            return WorkerExit {
                                code: None,
                                signal: None,
                            };
                        }
                    }
                }
            }
        };
        // Children of the worker (e.g. DataLoader processes) may still hold the pipes open;
        // end the group so the readers finish.
        kill_group(self.process.id());
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        status
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        if matches!(self.process.try_wait(), Ok(None)) {
            kill_group(self.process.id());
            let _ = self.process.wait();
        }
    }
}

/// Reads a worker's event stream: each non-blank line becomes one message, handed to
/// `deliver` in order until it returns false (nobody listens any more); once the stream ends
/// or fails, [`WorkerMessage::Closed`] comes last.
///
/// Public so that the protocol fuzz target and its regression replay
/// (`crates/gpuprobe-fuzz-targets`) run the very code every worker's events go through.
pub fn read_messages(mut reader: impl BufRead, mut deliver: impl FnMut(WorkerMessage) -> bool) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Some(message) = decode_line(&buf)
            && !deliver(message)
        {
            return;
        }
    }
    deliver(WorkerMessage::Closed);
}

/// Decodes one line of the event stream (its `\n` or `\r\n` end is dropped): `None` for a
/// blank line, else a protocol event or the line kept as garbage.
///
/// A line that is not UTF-8 is garbage (shown with replacement characters), not the end of
/// the stream: reading lines as `String`s used to stop at such a line and report the
/// worker's events closed while it was still running.
pub(crate) fn decode_line(line: &[u8]) -> Option<WorkerMessage> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    if text.trim().is_empty() {
        return None;
    }
    Some(match serde_json::from_str::<WorkerEvent>(&text) {
        Ok(event) => WorkerMessage::Event(Box::new(event)),
        Err(_) => WorkerMessage::Garbage(text.into_owned()),
    })
}

fn spawn_output_reader(
    stream: impl Read + Send + 'static,
    label: &'static str,
    tail: Arc<Mutex<VecDeque<String>>>,
    log: Option<Arc<Mutex<File>>>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&buf)
                .trim_end_matches(['\n', '\r'])
                .to_string();
            if let Some(log) = &log
                && let Ok(mut file) = log.lock()
            {
                let _ = writeln!(file, "[{label}] {line}");
            }
            if let Ok(mut tail) = tail.lock() {
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
    })
}
