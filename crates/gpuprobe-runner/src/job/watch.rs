//! One run of the job, watched: its output passed through chunk by chunk while scanned for
//! fatal GPU messages, its group signalled and given the terminal, a hang detected from
//! silence and GPU idleness, and its end classified ([`JobOutcome`]).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use gpuprobe_model::JOB_FATAL_MARKERS;
use nix::sys::signal::Signal;

use super::activity::ActivitySource;
use super::exec::launcher;
use super::{EnvChanges, JobError, JobOutcome, JobRun};
use crate::process::{CRASH_SIGNALS, Foreground, kill_group, signal_group, signal_words};
use crate::signals::Signals;

/// Runs the job once and watches it.
pub(crate) fn run_once(
    command: &[OsString],
    env: &EnvChanges,
    hang_timeout: Option<f64>,
    activity: &ActivitySource,
    signals: &Signals,
    device: &'static str,
    say: &mut dyn FnMut(&str),
) -> JobRun {
    let started = Instant::now();
    let mut child = match spawn(command, env) {
        Ok(child) => child,
        Err(err) => {
            say(&err.to_string());
            return JobRun {
                device,
                outcome: JobOutcome::Failed,
                exit_code: i32::from(err.exec_exit_code()),
                seconds: 0.0,
            };
        }
    };
    let leader = child.id();
    signals.set_group(i32::try_from(leader).unwrap_or(0));
    let foreground = Foreground::give(i32::try_from(leader).unwrap_or(0));
    let last_output_ms = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(pump(
            out,
            false,
            started,
            Arc::clone(&last_output_ms),
            Arc::clone(&seen),
        ));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(pump(
            err,
            true,
            started,
            Arc::clone(&last_output_ms),
            Arc::clone(&seen),
        ));
    }
    let (done_tx, done_rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let status = child.wait();
        let _ = done_tx.send(());
        status
    });
    let hung = match hang_timeout {
        Some(timeout) => {
            let silence = Silence {
                started,
                last_output_ms: &last_output_ms,
                activity,
                timeout,
            };
            silence.wait_or_hang(&done_rx, leader, say)
        }
        None => {
            // Only the job's end ends the wait.
            let _ = done_rx.recv();
            false
        }
    };
    let status = waiter.join().ok().and_then(|s| s.ok());
    if hung {
        // Whatever the job left behind in its group goes too.
        kill_group(leader);
    }
    signals.set_group(0);
    drop(foreground);
    drain(readers);
    let seconds = started.elapsed().as_secs_f64();
    let (code, signal) = match status {
        Some(status) => (status.code(), status.signal()),
        None => (None, None),
    };
    let exit_code = code.unwrap_or_else(|| 128 + signal.unwrap_or(0));
    let fatal = seen.lock().map(|s| s.fatal.clone()).unwrap_or(None);
    let ending = Ending {
        hung,
        signal,
        exit_code,
        fatal,
        forwarded: signals.forwarded(),
    };
    let outcome = ending.outcome(activity);
    if let (JobOutcome::Succeeded, Some(line)) = (&outcome, &ending.fatal) {
        say(&format!(
            "note: a GPU fault message appeared but the job exited 0: {line}"
        ));
    }
    JobRun {
        device,
        outcome,
        exit_code,
        seconds,
    }
}

/// Starts the job in a process group of its own, with its output piped to the supervisor.
/// Started through `gpuprobe __exec-job` (see [`super::exec`]), which clears the signal mask
/// this process runs with (so signals can be waited for) and then becomes the job.
fn spawn(command: &[OsString], env: &EnvChanges) -> Result<Child, JobError> {
    let mut launcher = launcher(command);
    for name in &env.remove {
        launcher.env_remove(name);
    }
    launcher
        .envs(&env.set)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| JobError::Exec {
            program: PathBuf::from(&command[0]),
            source,
        })
}

/// The hang watch: the job is hung after `timeout` seconds without output and without GPU
/// activity.
struct Silence<'a> {
    started: Instant,
    last_output_ms: &'a AtomicU64,
    activity: &'a ActivitySource,
    timeout: f64,
}

impl Silence<'_> {
    /// Waits for the job to end (`done` delivers or disconnects); when it hangs first, says
    /// so, ends its group (SIGTERM, then SIGKILL after 3 s) and returns `true`.
    fn wait_or_hang(
        &self,
        done: &mpsc::Receiver<()>,
        leader: u32,
        say: &mut dyn FnMut(&str),
    ) -> bool {
        let (started, activity, timeout) = (self.started, self.activity, self.timeout);
        let mut last_gpu_ms = 0u64;
        let mut last_poll = Instant::now();
        let tick = Duration::from_secs_f64((timeout / 4.0).clamp(0.05, 1.0));
        loop {
            match done.recv_timeout(tick) {
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return false,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let now_ms = started.elapsed().as_millis() as u64;
            let active_ms = self.last_output_ms.load(Ordering::SeqCst).max(last_gpu_ms);
            let silent = Duration::from_millis(now_ms.saturating_sub(active_ms));
            if silent >= Duration::from_secs(1)
                && last_poll.elapsed() >= activity.interval(timeout)
                && *activity != ActivitySource::None
            {
                last_poll = Instant::now();
                if activity.busy() == Some(true) {
                    last_gpu_ms = started.elapsed().as_millis() as u64;
                    continue;
                }
            }
            if silent.as_secs_f64() >= timeout {
                say(&format!(
                    "the job hung: no sign of life for {timeout:.0} s (watched: {}); killing its process group",
                    activity.describe()
                ));
                signal_group(leader, Signal::SIGTERM);
                if done.recv_timeout(Duration::from_secs(3)).is_err() {
                    kill_group(leader);
                }
                return true;
            }
        }
    }
}

/// Lets the output readers drain what is left; a background process that keeps the pipes
/// open is not waited for.
fn drain(readers: Vec<thread::JoinHandle<()>>) {
    let drain_until = Instant::now() + Duration::from_secs(2);
    for reader in readers {
        while !reader.is_finished() && Instant::now() < drain_until {
            thread::sleep(Duration::from_millis(5));
        }
        if reader.is_finished() {
            let _ = reader.join();
        }
    }
}

/// How a run of the job ended, before it is classified.
struct Ending {
    /// The hang watch killed it.
    hung: bool,
    /// The signal that ended it.
    signal: Option<i32>,
    /// Its exit code (128 + signal for a signal).
    exit_code: i32,
    /// The first fatal GPU message in its output.
    fatal: Option<String>,
    /// The last signal passed on to it, 0 when none.
    forwarded: i32,
}

impl Ending {
    /// The outcome: a hang; for a signal, interrupted (the signal forwarded or another
    /// non-crash one), failed (SIGPIPE) or crashed; for an exit, succeeded, crashed (a
    /// non-zero exit after a fatal message), interrupted or failed.
    fn outcome(&self, activity: &ActivitySource) -> JobOutcome {
        let Ending {
            hung,
            signal,
            exit_code,
            ref fatal,
            forwarded,
        } = *self;
        if hung {
            JobOutcome::Hung {
                watched: activity.describe(),
            }
        } else if let Some(sig) = signal {
            if forwarded != 0 && sig == forwarded {
                JobOutcome::Interrupted { signal: sig }
            } else if sig == Signal::SIGPIPE as i32 {
                // Its reader went away (`gpuprobe run -- job | head`): what the job would
                // meet without gpuprobe too.
                JobOutcome::Failed
            } else if CRASH_SIGNALS.contains(&sig) {
                let mut reason = format!("killed by {}", signal_words(sig));
                if sig == 9 {
                    reason.push_str(", possibly by the out-of-memory killer");
                }
                if let Some(line) = fatal {
                    reason.push_str(&format!(": {line}"));
                }
                JobOutcome::Crashed { reason }
            } else {
                JobOutcome::Interrupted { signal: sig }
            }
        } else if exit_code == 0 {
            JobOutcome::Succeeded
        } else if let Some(line) = fatal {
            JobOutcome::Crashed {
                reason: format!("exit {exit_code} after: {line}"),
            }
        } else if forwarded != 0 {
            JobOutcome::Interrupted { signal: forwarded }
        } else {
            JobOutcome::Failed
        }
    }
}

/// What the output readers saw.
#[derive(Default)]
struct Seen {
    fatal: Option<String>,
    tail: VecDeque<String>,
}

/// Copies `source` to `sink` chunk by chunk, noting activity and fatal messages.
fn pump(
    mut source: impl Read + Send + 'static,
    to_stderr: bool,
    started: Instant,
    last_output_ms: Arc<AtomicU64>,
    seen: Arc<Mutex<Seen>>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        let mut line = Vec::<u8>::new();
        loop {
            let n = match source.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let chunk = &buffer[..n];
            let written = if to_stderr {
                let mut err = std::io::stderr().lock();
                err.write_all(chunk).and_then(|()| err.flush())
            } else {
                let mut out = std::io::stdout().lock();
                out.write_all(chunk).and_then(|()| out.flush())
            };
            if written.is_err() {
                // Whoever reads gpuprobe's output is gone (`| head`): close the job's pipe
                // too, so it meets the same broken pipe it would without gpuprobe.
                break;
            }
            last_output_ms.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
            for &byte in chunk {
                if byte == b'\n' || line.len() >= 4096 {
                    note_line(&line, &seen);
                    line.clear();
                } else {
                    line.push(byte);
                }
            }
        }
        if !line.is_empty() {
            note_line(&line, &seen);
        }
    })
}

fn note_line(line: &[u8], seen: &Mutex<Seen>) {
    let text = String::from_utf8_lossy(line).trim_end().to_string();
    if text.is_empty() {
        return;
    }
    let Ok(mut seen) = seen.lock() else { return };
    if seen.fatal.is_none() && JOB_FATAL_MARKERS.iter().any(|m| text.contains(m)) {
        seen.fatal = Some(text.chars().take(300).collect());
    }
    seen.tail.push_back(text);
    if seen.tail.len() > 20 {
        seen.tail.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ending(signal: Option<i32>, exit_code: i32, fatal: Option<&str>, forwarded: i32) -> Ending {
        Ending {
            hung: false,
            signal,
            exit_code,
            fatal: fatal.map(str::to_string),
            forwarded,
        }
    }

    #[test]
    fn endings_are_classified_as_shells_and_gpu_faults_suggest() {
        let none = ActivitySource::None;
        let segv = ending(Some(11), 139, Some("CUDA error: x"), 0).outcome(&none);
        assert_eq!(
            segv,
            JobOutcome::Crashed {
                reason: "killed by SIGSEGV (signal 11): CUDA error: x".into()
            }
        );
        let oom = ending(Some(9), 137, None, 0).outcome(&none);
        assert!(matches!(oom, JobOutcome::Crashed { reason } if reason.contains("out-of-memory")));
        assert_eq!(
            ending(Some(2), 130, None, 2).outcome(&none),
            JobOutcome::Interrupted { signal: 2 }
        );
        assert_eq!(
            ending(Some(13), 141, None, 0).outcome(&none),
            JobOutcome::Failed
        );
        assert_eq!(
            ending(None, 0, Some("HIP error"), 0).outcome(&none),
            JobOutcome::Succeeded
        );
        assert_eq!(
            ending(None, 1, Some("HIP error"), 0).outcome(&none),
            JobOutcome::Crashed {
                reason: "exit 1 after: HIP error".into()
            }
        );
        assert_eq!(
            ending(None, 1, None, 15).outcome(&none),
            JobOutcome::Interrupted { signal: 15 }
        );
        assert_eq!(ending(None, 1, None, 0).outcome(&none), JobOutcome::Failed);
        let mut hung = ending(None, 143, None, 0);
        hung.hung = true;
        assert!(matches!(hung.outcome(&none), JobOutcome::Hung { .. }));
    }

    #[test]
    fn fatal_lines_are_remembered() {
        let seen = Mutex::new(Seen::default());
        note_line(b"step 1 ok", &seen);
        note_line(
            b"Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x7f. Reason: Page not present",
            &seen,
        );
        note_line(
            b"RuntimeError: CUDA error: an illegal memory access was encountered",
            &seen,
        );
        let seen = seen.into_inner().unwrap();
        assert!(seen.fatal.unwrap().starts_with("Memory access fault"));
        assert_eq!(seen.tail.len(), 3);
    }
}
