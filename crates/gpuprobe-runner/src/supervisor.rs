//! Supervision of probe runs on one device.
//!
//! Probes run in order in one worker process (so the framework is imported once). When a
//! probe hangs, the worker's process group is killed and the probe is recorded as HANG;
//! when the worker dies, the probe it was running is recorded as CRASH with the signal and
//! the last lines it printed. Either way a fresh worker continues with the next probe.
//! Probes marked `isolated` get a worker of their own. Every probe ends with exactly one
//! result: nothing is silently dropped.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use gpuprobe_model::observation::Observation;
use gpuprobe_model::probe::{DeviceRef, ProbeId, ProbeSpec};
use gpuprobe_model::protocol::{Outcome, WorkerEvent};

use crate::error::RunnerError;
use crate::kmsg::KernelLogWatcher;
use crate::worker::{Next, RunningWorker, WorkerCommand, WorkerExit, WorkerMessage};

/// One probe to run on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The probe.
    pub spec: ProbeSpec,
    /// The device.
    pub device: DeviceRef,
}

/// Limits and places for a supervised run.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// How long a worker may take to say hello (interpreter start and framework import).
    pub startup_timeout: Duration,
    /// How long a worker may go between one probe's result and the next probe's begin.
    pub between_probes_timeout: Duration,
    /// Multiplier on every probe's own timeout (slow machines, debugging).
    pub timeout_scale: f64,
    /// Directory for worker logs (`worker-N.log`); none keeps only the tails.
    pub log_dir: Option<PathBuf>,
    /// For workers that wait for the start line: the gate that says when. None starts them
    /// right after their hello.
    pub start_gate: Option<StartGate>,
}

/// When a worker started ahead of its turn may begin its probes: the engine opens it once the
/// lanes it must not overlap have finished. Clones share one gate; once open it stays open.
#[derive(Debug, Clone, Default)]
pub struct StartGate {
    open: Arc<(Mutex<bool>, Condvar)>,
}

impl StartGate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the gate, waking every waiter.
    pub fn open(&self) {
        let (lock, signal) = &*self.open;
        if let Ok(mut open) = lock.lock() {
            *open = true;
        }
        signal.notify_all();
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        self.open.0.lock().map(|open| *open).unwrap_or(true)
    }

    /// Blocks until the gate is open.
    pub fn wait(&self) {
        let (lock, signal) = &*self.open;
        let Ok(mut open) = lock.lock() else { return };
        while !*open {
            match signal.wait(open) {
                Ok(guard) => open = guard,
                Err(_) => return,
            }
        }
    }
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        SupervisorConfig {
            startup_timeout: Duration::from_secs(180),
            between_probes_timeout: Duration::from_secs(60),
            timeout_scale: 1.0,
            log_dir: None,
            start_gate: None,
        }
    }
}

/// What became of one probe run, before judging.
#[derive(Debug, Clone, PartialEq)]
pub enum RawOutcome {
    /// The probe reported facts.
    Observed(Box<Observation>),
    /// The probe does not apply.
    Skip(String),
    /// The probe raised.
    Error {
        /// Exception type or error name.
        error_type: String,
        /// Its message.
        message: String,
        /// Traceback, when given.
        traceback: Option<String>,
    },
    /// The worker died while the probe ran.
    Crash {
        /// Terminating signal.
        signal: Option<i32>,
        /// Exit code.
        exit_code: Option<i32>,
        /// The most telling line of its last output.
        message: String,
    },
    /// The probe exceeded its time.
    Hang {
        /// The limit, seconds.
        timeout_s: f64,
    },
    /// The probe could not be attempted.
    NotTested(String),
}

/// One probe's raw result.
#[derive(Debug, Clone, PartialEq)]
pub struct RawResult {
    /// The probe.
    pub probe: ProbeId,
    /// The device.
    pub device: DeviceRef,
    /// What happened.
    pub outcome: RawOutcome,
    /// Seconds from begin to result.
    pub elapsed_s: Option<f64>,
    /// Worker output tail, for crashes, hangs and errors.
    pub output_tail: Vec<String>,
    /// New kernel log lines of interest seen by the time the result arrived.
    pub kernel_log: Vec<String>,
}

/// What the supervisor reports while it works.
#[derive(Debug)]
pub enum SupervisorEvent {
    /// A worker said hello.
    Hello(Box<WorkerEvent>),
    /// A probe began.
    Started(ProbeId, DeviceRef),
    /// A probe ended.
    Finished(RawResult),
    /// A message worth keeping (library warnings, protocol noise, restarts).
    Log(String),
}

/// Builds the command for a worker that must run `tasks` in order (it writes the plan file).
pub type CommandFactory<'a> = dyn FnMut(&[Task]) -> Result<WorkerCommand, RunnerError> + 'a;

/// Runs `tasks` (all on one device), reporting through `on_event`; returns when every task
/// has a result.
pub fn supervise(
    tasks: Vec<Task>,
    make_command: &mut CommandFactory<'_>,
    config: &SupervisorConfig,
    kernel_log: Option<&mut KernelLogWatcher>,
    on_event: &mut dyn FnMut(SupervisorEvent),
) {
    let mut kernel_log = kernel_log;
    let mut worker_number = 0usize;
    for batch in batches(tasks) {
        let mut remaining: VecDeque<Task> = batch.into();
        let mut fruitless_workers = 0;
        while !remaining.is_empty() {
            worker_number += 1;
            let progressed = run_one_worker(
                &mut remaining,
                make_command,
                config,
                worker_number,
                kernel_log.as_deref_mut(),
                on_event,
            );
            if progressed {
                fruitless_workers = 0;
            } else {
                fruitless_workers += 1;
                // Two workers in a row died without finishing anything: give up on the
                // next probe so the run always terminates.
                if fruitless_workers >= 2
                    && let Some(task) = remaining.pop_front()
                {
                    on_event(SupervisorEvent::Finished(not_tested(
                        &task,
                        "two workers in a row exited before this probe could start; see the worker log",
                    )));
                    fruitless_workers = 0;
                }
            }
            if !remaining.is_empty() {
                on_event(SupervisorEvent::Log(format!(
                    "starting a fresh worker for the {} remaining probe(s)",
                    remaining.len()
                )));
            }
        }
    }
}

/// Splits tasks into consecutive groups that share a worker; isolated probes go alone.
fn batches(tasks: Vec<Task>) -> Vec<Vec<Task>> {
    let mut out: Vec<Vec<Task>> = Vec::new();
    let mut current = Vec::new();
    for task in tasks {
        if task.spec.isolated {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            out.push(vec![task]);
        } else {
            current.push(task);
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn not_tested(task: &Task, reason: &str) -> RawResult {
    RawResult {
        probe: task.spec.id.clone(),
        device: task.device,
        outcome: RawOutcome::NotTested(reason.to_string()),
        elapsed_s: None,
        output_tail: Vec::new(),
        kernel_log: Vec::new(),
    }
}

struct Running {
    index: usize,
    started: Instant,
    timeout_s: f64,
}

/// Runs one worker over the remaining tasks; returns whether any task got a result.
fn run_one_worker(
    remaining: &mut VecDeque<Task>,
    make_command: &mut CommandFactory<'_>,
    config: &SupervisorConfig,
    worker_number: usize,
    mut kernel_log: Option<&mut KernelLogWatcher>,
    on_event: &mut dyn FnMut(SupervisorEvent),
) -> bool {
    let tasks: Vec<Task> = remaining.iter().cloned().collect();
    let command = match make_command(&tasks) {
        Ok(command) => command,
        Err(err) => {
            finish_all(
                remaining,
                &format!("cannot prepare worker: {err}"),
                on_event,
            );
            return true;
        }
    };
    let log_path = config
        .log_dir
        .as_ref()
        .map(|dir| dir.join(format!("worker-{worker_number}.log")));
    let mut worker = match RunningWorker::spawn(&command, log_path.as_deref()) {
        Ok(worker) => worker,
        Err(err) => {
            finish_all(remaining, &err.to_string(), on_event);
            return true;
        }
    };

    let mut progressed = false;
    let mut hello_seen = false;
    let mut running: Option<Running> = None;
    let mut deadline = Instant::now() + config.startup_timeout;
    let mut garbage_lines = 0usize;
    loop {
        let message = match worker.next(deadline) {
            Next::Message(message) => message,
            Next::TimedOut => {
                let tail_before = worker.tail();
                let _exit = worker.kill_hung();
                let mut tail = worker.tail();
                if tail.is_empty() {
                    tail = tail_before;
                }
                match running.take() {
                    Some(run) => {
                        let task = remaining
                            .remove(run.index)
                            .expect("running task is in remaining");
                        let kernel = read_kernel_log(&mut kernel_log);
                        on_event(SupervisorEvent::Finished(RawResult {
                            probe: task.spec.id.clone(),
                            device: task.device,
                            outcome: RawOutcome::Hang {
                                timeout_s: run.timeout_s,
                            },
                            elapsed_s: Some(run.started.elapsed().as_secs_f64()),
                            output_tail: tail,
                            kernel_log: kernel,
                        }));
                        return true;
                    }
                    None if !hello_seen => {
                        finish_all(
                            remaining,
                            &format!(
                                "the worker did not start within {:.0} s (interpreter or framework import hung); last output: {}",
                                config.startup_timeout.as_secs_f64(),
                                telling_line(&tail).unwrap_or_else(|| "none".into())
                            ),
                            on_event,
                        );
                        return true;
                    }
                    None => {
                        // Stuck between probes: blame the next one, which it was preparing.
                        if let Some(task) = remaining.pop_front() {
                            on_event(SupervisorEvent::Finished(RawResult {
                                probe: task.spec.id.clone(),
                                device: task.device,
                                outcome: RawOutcome::Hang {
                                    timeout_s: config.between_probes_timeout.as_secs_f64(),
                                },
                                elapsed_s: None,
                                output_tail: tail,
                                kernel_log: read_kernel_log(&mut kernel_log),
                            }));
                        }
                        return true;
                    }
                }
            }
        };
        match message {
            WorkerMessage::Event(event) => match *event {
                WorkerEvent::Hello { ref unusable, .. } => {
                    hello_seen = true;
                    let unusable = unusable.clone();
                    on_event(SupervisorEvent::Hello(event));
                    if let Some(reason) = unusable {
                        worker.wait();
                        finish_all(remaining, &reason, on_event);
                        return true;
                    }
                    if command.waits_for_start {
                        // Ready but not yet its turn: no deadline runs while it waits, since
                        // what it waits for is other lanes, each under its own limits.
                        if let Some(gate) = &config.start_gate {
                            gate.wait();
                        }
                        worker.start();
                    }
                    deadline = Instant::now() + config.between_probes_timeout;
                }
                WorkerEvent::Begin { probe, device } => {
                    let Some(index) = remaining
                        .iter()
                        .position(|t| t.spec.id == probe && t.device == device)
                    else {
                        on_event(SupervisorEvent::Log(format!(
                            "worker began an unplanned probe {probe} on {device}"
                        )));
                        continue;
                    };
                    let timeout_s = remaining[index].spec.timeout_s * config.timeout_scale;
                    running = Some(Running {
                        index,
                        started: Instant::now(),
                        timeout_s,
                    });
                    deadline = Instant::now() + Duration::from_secs_f64(timeout_s.max(0.001));
                    on_event(SupervisorEvent::Started(probe, device));
                }
                WorkerEvent::Result {
                    probe,
                    device,
                    outcome,
                    elapsed_s,
                } => {
                    let Some(index) = remaining
                        .iter()
                        .position(|t| t.spec.id == probe && t.device == device)
                    else {
                        on_event(SupervisorEvent::Log(format!(
                            "worker reported an unplanned probe {probe} on {device}"
                        )));
                        continue;
                    };
                    let started = running
                        .take()
                        .filter(|r| r.index == index)
                        .map(|r| r.started);
                    let task = remaining.remove(index).expect("index is valid");
                    let elapsed = elapsed_s.or_else(|| started.map(|s| s.elapsed().as_secs_f64()));
                    let is_error = matches!(outcome, Outcome::Error { .. });
                    let raw = match outcome {
                        Outcome::Observed { observation } => {
                            RawOutcome::Observed(Box::new(observation))
                        }
                        Outcome::Skip { reason } => RawOutcome::Skip(reason),
                        Outcome::Error {
                            error_type,
                            message,
                            traceback,
                        } => RawOutcome::Error {
                            error_type,
                            message,
                            traceback,
                        },
                    };
                    on_event(SupervisorEvent::Finished(RawResult {
                        probe: task.spec.id.clone(),
                        device: task.device,
                        outcome: raw,
                        elapsed_s: elapsed,
                        output_tail: if is_error { worker.tail() } else { Vec::new() },
                        kernel_log: read_kernel_log(&mut kernel_log),
                    }));
                    progressed = true;
                    deadline = Instant::now() + config.between_probes_timeout;
                }
                WorkerEvent::Log { level, message } => {
                    on_event(SupervisorEvent::Log(format!("{level}: {message}")));
                }
                WorkerEvent::Done => {
                    worker.wait();
                    finish_all(
                        remaining,
                        "the worker finished without running this probe",
                        on_event,
                    );
                    return true;
                }
                WorkerEvent::Catalog { .. } => {}
            },
            WorkerMessage::Garbage(line) => {
                garbage_lines += 1;
                if garbage_lines <= 3 {
                    let shown: String = line.chars().take(200).collect();
                    on_event(SupervisorEvent::Log(format!(
                        "ignored a non-protocol line from the worker: {shown}"
                    )));
                }
            }
            WorkerMessage::Closed => {
                let exit = worker.wait();
                let tail = worker.tail();
                if let Some(run) = running.take() {
                    let task = remaining
                        .remove(run.index)
                        .expect("running task is in remaining");
                    on_event(SupervisorEvent::Finished(RawResult {
                        probe: task.spec.id.clone(),
                        device: task.device,
                        outcome: crash_outcome(exit, &tail),
                        elapsed_s: Some(run.started.elapsed().as_secs_f64()),
                        output_tail: tail,
                        kernel_log: read_kernel_log(&mut kernel_log),
                    }));
                    return true;
                }
                if !hello_seen {
                    finish_all(
                        remaining,
                        &format!(
                            "the worker exited before reporting ({}): {}",
                            describe_exit(exit),
                            telling_line(&tail).unwrap_or_else(|| "no output".into())
                        ),
                        on_event,
                    );
                    return true;
                }
                // Exited between probes (e.g. on purpose after an error that poisoned the
                // GPU context): a fresh worker continues.
                return progressed;
            }
        }
    }
}

fn finish_all(
    remaining: &mut VecDeque<Task>,
    reason: &str,
    on_event: &mut dyn FnMut(SupervisorEvent),
) {
    for task in remaining.drain(..) {
        on_event(SupervisorEvent::Finished(not_tested(&task, reason)));
    }
}

fn read_kernel_log(watcher: &mut Option<&mut KernelLogWatcher>) -> Vec<String> {
    watcher
        .as_deref_mut()
        .map(|w| w.new_lines())
        .unwrap_or_default()
}

fn crash_outcome(exit: WorkerExit, tail: &[String]) -> RawOutcome {
    RawOutcome::Crash {
        signal: exit.signal,
        exit_code: exit.code,
        message: telling_line(tail).unwrap_or_else(|| describe_exit(exit)),
    }
}

fn describe_exit(exit: WorkerExit) -> String {
    match (exit.signal, exit.code) {
        (Some(sig), _) => format!("killed by signal {sig} ({})", signal_name(sig)),
        (None, Some(code)) => format!("exit code {code}"),
        _ => "unknown exit".into(),
    }
}

/// The name of a signal number, for messages.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// Markers of the line that best explains a crash, strongest first.
const TELLING_MARKERS: &[&str] = &[
    "Memory access fault",
    "Page not present",
    "HSA_STATUS_ERROR",
    "illegal memory access",
    "Segmentation fault",
    "Fatal Python error",
    "HIP error",
    "CUDA error",
    "hipError",
    "CUDA_ERROR",
    "terminate called",
    "Aborted",
    "Error",
];

/// The most telling line of a worker's last output.
pub fn telling_line(tail: &[String]) -> Option<String> {
    for marker in TELLING_MARKERS {
        if let Some(line) = tail.iter().rev().find(|l| l.contains(marker)) {
            return Some(line.trim().to_string());
        }
    }
    tail.iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telling_line_prefers_the_fault_message() {
        let tail: Vec<String> = [
            "some warning",
            "Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x7f. Reason: Page not present",
            "Fatal Python error: Aborted",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert!(
            telling_line(&tail)
                .unwrap()
                .starts_with("Memory access fault")
        );
        assert_eq!(
            telling_line(&["a".into(), "b".into()]).as_deref(),
            Some("b")
        );
        assert_eq!(telling_line(&[]), None);
    }
}
