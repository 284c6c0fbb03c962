//! Supervision of probe runs on one device.
//!
//! Probes run in order in one worker process (so the framework is imported once). When a
//! probe hangs, the worker's process group is killed and the probe is recorded as HANG;
//! when the worker dies, the probe it was running is recorded as CRASH with the signal and
//! the last lines it printed. Either way a fresh worker continues with the next probe.
//! Probes marked `isolated` get a worker of their own. Every probe ends with exactly one
//! result: nothing is silently dropped.
//!
//! A worker's start (interpreter plus framework import, seconds for torch) dominates the
//! time of an isolated probe, and a lane may hold dozens of them. So once a batch's worker
//! has said hello and been started, the workers of the next batches (up to
//! [`SupervisorConfig::workers_ahead`]) are spawned ahead of their turn, holding at the start
//! line: their imports overlap the current probes, and on its turn each only needs the start
//! line. A probe often takes less than one import, so one worker ahead would still leave
//! most of each import in the way. A waiting worker has imported the framework but has not
//! touched the device, so it holds no device memory; it is spawned only after the current
//! worker is past its own import, so they do not compete.
//!
//! A run can be cancelled ([`Cancel`], on Ctrl-C): every supervisor then kills its workers'
//! process groups (the one running and those waiting ahead), records nothing more, and
//! returns. A probe that was running gets no result, so the run directory stays resumable
//! and a resumed run runs it again.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use gpuprobe_model::CRASH_TELLING_MARKERS;
use gpuprobe_model::Observation;
use gpuprobe_model::{DeviceRef, ProbeId};
use gpuprobe_model::{Outcome, WorkerEvent};

use crate::error::RunnerError;
use crate::kmsg::KernelLogWatcher;
use crate::process::{kill_group, signal_name};
use crate::worker::{Next, RunningWorker, WorkerCommand, WorkerExit, WorkerMessage};
use crate::zygote::Zygote;

/// One probe to run on one device: the plan's own task type.
pub use gpuprobe_model::Task;

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
    /// How many later batches' workers may be started ahead of their turn, holding at the
    /// start line (0: each worker starts on its turn).
    pub workers_ahead: usize,
    /// Stops the run early when cancelled (by default, one that never is).
    pub cancel: Cancel,
    /// Forks Python workers from one pre-imported interpreter when set (`zygote`).
    pub zygote: Option<Arc<Zygote>>,
}

/// How often a supervisor waiting on a worker looks at its [`Cancel`]: short enough that a
/// Ctrl-C ends the workers at once, long enough to cost nothing.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// Asks running supervisors to stop: each kills its workers' process groups, records no
/// further result and returns, and none starts another worker. Clones share one flag; once
/// cancelled it stays cancelled.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    state: Arc<CancelState>,
}

#[derive(Debug, Default)]
struct CancelState {
    cancelled: AtomicBool,
    /// The signal that cancelled, 0 when none did ([`Cancel::cancel_by_signal`]).
    signal: AtomicI32,
    /// Supervisors running now, so a caller can wait for their workers to be gone.
    active: AtomicUsize,
}

impl Cancel {
    /// A flag not cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels: every supervisor sharing this flag stops within moments.
    pub fn cancel(&self) {
        self.state.cancelled.store(true, Ordering::SeqCst);
    }

    /// Cancels because `signal` came (Ctrl-C, SIGTERM), remembering the first such signal
    /// so that whoever sees the run stop can say why; whether this was the first.
    pub fn cancel_by_signal(&self, signal: i32) -> bool {
        let first = self
            .state
            .signal
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        self.cancel();
        first
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.state.cancelled.load(Ordering::SeqCst)
    }

    /// The first signal that cancelled ([`Cancel::cancel_by_signal`]), if one did.
    pub fn signal(&self) -> Option<i32> {
        match self.state.signal.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(signal),
        }
    }

    /// Waits until no supervisor sharing this flag runs (their workers are then ended and
    /// reaped), at most `timeout`; whether none runs.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if self.state.active.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Counts a supervisor as running until the guard is dropped.
    fn enter(&self) -> Active {
        self.state.active.fetch_add(1, Ordering::SeqCst);
        Active(self.state.clone())
    }
}

/// A running supervisor, as counted by its [`Cancel`].
struct Active(Arc<CancelState>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
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

    /// Blocks until the gate is open or `cancel` is cancelled; whether it opened.
    pub fn wait_unless(&self, cancel: &Cancel) -> bool {
        let (lock, signal) = &*self.open;
        let Ok(mut open) = lock.lock() else {
            return true;
        };
        while !*open {
            if cancel.is_cancelled() {
                return false;
            }
            match signal.wait_timeout(open, CANCEL_POLL) {
                Ok((guard, _)) => open = guard,
                Err(_) => return true,
            }
        }
        true
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
            workers_ahead: 3,
            cancel: Cancel::default(),
            zygote: None,
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
/// The second argument, `ahead`, says the worker is started ahead of its turn: its command
/// must then wait for the start line (`waits_for_start`, plan `wait_for_start`), or it is
/// not started ahead.
pub(crate) type CommandFactory<'a> =
    dyn FnMut(&[Task], bool) -> Result<WorkerCommand, RunnerError> + 'a;

/// Runs `tasks` (all on one device), reporting through `on_event`; returns when every task
/// has a result, or at once when [`SupervisorConfig::cancel`] is cancelled (the tasks not
/// finished by then get none).
pub fn supervise(
    tasks: Vec<Task>,
    make_command: &mut CommandFactory<'_>,
    config: &SupervisorConfig,
    kernel_log: Option<&mut KernelLogWatcher>,
    on_event: &mut dyn FnMut(SupervisorEvent),
) {
    let _active = config.cancel.enter();
    let mut kernel_log = kernel_log;
    let mut worker_number = 0usize;
    let batches = batches(tasks);
    let mut ahead = Ahead {
        batches: &batches,
        ready: None,
        spawned: VecDeque::new(),
        next: 1,
    };
    'batches: for (index, batch) in batches.iter().enumerate() {
        // The worker spawned ahead for this batch (if any) runs it first; this batch's
        // workers may in turn spawn the next batches' (never this one's again: when no
        // earlier worker got as far as spawning ahead, the queue is behind).
        ahead.ready = ahead.spawned.pop_front().flatten();
        ahead.next = ahead.next.max(index + 1);
        let mut remaining: VecDeque<Task> = batch.iter().cloned().collect();
        let mut fruitless_workers = 0;
        while !remaining.is_empty() {
            if config.cancel.is_cancelled() {
                break 'batches;
            }
            let progressed = run_one_worker(
                &mut remaining,
                &mut ahead,
                make_command,
                config,
                &mut worker_number,
                kernel_log.as_deref_mut(),
                on_event,
            );
            if config.cancel.is_cancelled() {
                // Nothing it left undone is blamed on a probe: a resumed run runs it.
                break 'batches;
            }
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
    // Workers started ahead for batches that will not run now (only after a cancel): ended
    // here, with their process groups, rather than left to the drop.
    for mut spawned in ahead
        .ready
        .take()
        .into_iter()
        .chain(ahead.spawned.drain(..).flatten())
    {
        stop(&mut spawned.worker);
    }
}

/// Ends a worker at once, with its whole process group, and reaps it.
fn stop(worker: &mut RunningWorker) {
    kill_group(worker.pid());
    worker.wait();
}

/// What waiting on a worker gave.
enum Polled {
    Message(WorkerMessage),
    TimedOut,
    Cancelled,
}

/// The worker's next message before `deadline`, looking at `cancel` all the while; once it
/// is cancelled nothing more is delivered, so no result is made of a worker it ends.
fn next_or_cancelled(worker: &RunningWorker, deadline: Instant, cancel: &Cancel) -> Polled {
    loop {
        if cancel.is_cancelled() {
            return Polled::Cancelled;
        }
        let now = Instant::now();
        if now >= deadline {
            return Polled::TimedOut;
        }
        match worker.next(deadline.min(now + CANCEL_POLL)) {
            Next::Message(message) => {
                return if cancel.is_cancelled() {
                    Polled::Cancelled
                } else {
                    Polled::Message(message)
                };
            }
            Next::TimedOut => continue,
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

/// Workers started ahead of their batch's turn.
struct Ahead<'t> {
    /// Every batch of the run, in order.
    batches: &'t [Vec<Task>],
    /// The worker for the current batch's first run, spawned while an earlier batch ran.
    ready: Option<Spawned>,
    /// One entry per batch after the current one that has been tried ahead (once each), in
    /// order: its worker holding at the start line, or none when the try failed.
    spawned: VecDeque<Option<Spawned>>,
    /// The first batch not tried ahead yet.
    next: usize,
}

impl Ahead<'_> {
    /// Spawns workers ahead for the batches after the current one, up to `depth` of them.
    fn top_up(
        &mut self,
        depth: usize,
        make_command: &mut CommandFactory<'_>,
        config: &SupervisorConfig,
        worker_number: &mut usize,
        on_event: &mut dyn FnMut(SupervisorEvent),
    ) {
        while self.spawned.len() < depth
            && self.next < self.batches.len()
            && !config.cancel.is_cancelled()
        {
            let batch = &self.batches[self.next];
            self.next += 1;
            match spawn_worker(batch, true, make_command, config, worker_number) {
                Ok(spawned) => self.spawned.push_back(Some(spawned)),
                Err(reason) => {
                    on_event(SupervisorEvent::Log(format!(
                        "a later worker is not started ahead ({reason}); it starts on its turn"
                    )));
                    self.spawned.push_back(None);
                }
            }
        }
    }
}

/// A spawned worker and whether it holds at the start line.
struct Spawned {
    worker: RunningWorker,
    waits_for_start: bool,
}

/// Builds the command for `tasks` and spawns it, numbering its log; the error is the reason
/// the tasks cannot be run.
fn spawn_worker(
    tasks: &[Task],
    ahead: bool,
    make_command: &mut CommandFactory<'_>,
    config: &SupervisorConfig,
    worker_number: &mut usize,
) -> Result<Spawned, String> {
    let command =
        make_command(tasks, ahead).map_err(|err| format!("cannot prepare worker: {err}"))?;
    if ahead && !command.waits_for_start {
        // It would begin its probes at once, beside the current worker's.
        return Err("its command does not wait for the start line".into());
    }
    *worker_number += 1;
    let log_path = config
        .log_dir
        .as_ref()
        .map(|dir| dir.join(format!("worker-{worker_number}.log")));
    // Native workers, and Python workers with settings, are never the zygote's.
    let forkable = config
        .zygote
        .as_deref()
        .and_then(|zygote| Some((zygote, zygote.forkable_args(&command)?)));
    let forked = forkable.and_then(|(zygote, args)| {
        RunningWorker::fork_from(zygote, &args, &command, log_path.as_deref())
            .map_err(|why| {
                if let Some(path) = &log_path {
                    note_in_log(path, &format!("started the ordinary way: {why}"));
                }
            })
            .ok()
    });
    let worker = match forked {
        Some(worker) => worker,
        None => {
            RunningWorker::spawn(&command, log_path.as_deref()).map_err(|err| err.to_string())?
        }
    };
    Ok(Spawned {
        worker,
        waits_for_start: command.waits_for_start,
    })
}

/// Adds one line to a worker's log (the log may not exist yet; a failure to write is not
/// worth more than the line).
fn note_in_log(path: &std::path::Path, line: &str) {
    use std::io::Write;
    if let Ok(mut file) = std::fs::File::options()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "[gpuprobe] {line}");
    }
}

/// The probe a worker is running now.
struct Running {
    index: usize,
    started: Instant,
    timeout_s: f64,
}

/// What a message or a timeout did to a worker's turn.
enum Step {
    /// Wait for the next message.
    Continue,
    /// The turn is over; whether any task got a result.
    Return(bool),
}

/// Runs one worker over the remaining tasks (the one spawned ahead for them, if any); returns
/// whether any task got a result.
fn run_one_worker(
    remaining: &mut VecDeque<Task>,
    ahead: &mut Ahead<'_>,
    make_command: &mut CommandFactory<'_>,
    config: &SupervisorConfig,
    worker_number: &mut usize,
    kernel_log: Option<&mut KernelLogWatcher>,
    on_event: &mut dyn FnMut(SupervisorEvent),
) -> bool {
    let spawned = match take_worker(
        remaining,
        ahead,
        make_command,
        config,
        worker_number,
        on_event,
    ) {
        Ok(spawned) => spawned,
        Err(progressed) => return progressed,
    };
    let mut turn = Turn {
        remaining,
        kernel_log,
        worker: spawned.worker,
        waits_for_start: spawned.waits_for_start,
        progressed: false,
        hello_seen: false,
        running: None,
        // For a worker spawned ahead, its startup time counts from its turn, as if spawned
        // now.
        deadline: Instant::now() + config.startup_timeout,
        garbage_lines: 0,
    };
    loop {
        let step = match next_or_cancelled(&turn.worker, turn.deadline, &config.cancel) {
            Polled::Cancelled => {
                stop(&mut turn.worker);
                Step::Return(turn.progressed)
            }
            Polled::TimedOut => Step::Return(turn.timed_out(config, on_event)),
            Polled::Message(WorkerMessage::Event(event)) => {
                turn.event(event, ahead, make_command, config, worker_number, on_event)
            }
            Polled::Message(WorkerMessage::Garbage(line)) => {
                turn.garbage(&line, on_event);
                Step::Continue
            }
            Polled::Message(WorkerMessage::Closed) => Step::Return(turn.closed(on_event)),
        };
        if let Step::Return(progressed) = step {
            return progressed;
        }
    }
}

/// The worker for the remaining tasks: the one spawned ahead for them, else a new one. When
/// there is none, the value to return from the turn: `true` when the tasks were finished as
/// not tested (the worker could not be prepared or started), `false` when cancelled.
fn take_worker(
    remaining: &mut VecDeque<Task>,
    ahead: &mut Ahead<'_>,
    make_command: &mut CommandFactory<'_>,
    config: &SupervisorConfig,
    worker_number: &mut usize,
    on_event: &mut dyn FnMut(SupervisorEvent),
) -> Result<Spawned, bool> {
    if let Some(spawned) = ahead.ready.take() {
        return Ok(spawned);
    }
    if config.cancel.is_cancelled() {
        return Err(false);
    }
    let tasks: Vec<Task> = remaining.iter().cloned().collect();
    match spawn_worker(&tasks, false, make_command, config, worker_number) {
        Ok(spawned) => Ok(spawned),
        Err(_) if config.cancel.is_cancelled() => Err(false),
        Err(reason) => {
            finish_all(remaining, &reason, on_event);
            Err(true)
        }
    }
}

/// One worker's turn over the remaining tasks.
struct Turn<'r, 'k> {
    remaining: &'r mut VecDeque<Task>,
    kernel_log: Option<&'k mut KernelLogWatcher>,
    worker: RunningWorker,
    /// Whether it holds at the start line after its hello.
    waits_for_start: bool,
    /// Whether any task got a result.
    progressed: bool,
    hello_seen: bool,
    running: Option<Running>,
    /// When the worker counts as hung if nothing arrives.
    deadline: Instant,
    garbage_lines: usize,
}

impl Turn<'_, '_> {
    fn kernel_lines(&mut self) -> Vec<String> {
        read_kernel_log(&mut self.kernel_log)
    }

    /// The deadline passed: the probe running is HANG, or the worker never started, or it
    /// is stuck between probes (the next one is blamed). Always ends the turn.
    fn timed_out(
        &mut self,
        config: &SupervisorConfig,
        on_event: &mut dyn FnMut(SupervisorEvent),
    ) -> bool {
        let tail_before = self.worker.tail();
        let _exit = self.worker.kill_hung();
        let mut tail = self.worker.tail();
        if tail.is_empty() {
            tail = tail_before;
        }
        match self.running.take() {
            Some(run) => {
                let task = self
                    .remaining
                    .remove(run.index)
                    .expect("running task is in remaining");
                let kernel = self.kernel_lines();
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
            }
            None if !self.hello_seen => {
                finish_all(
                    self.remaining,
                    &format!(
                        "the worker did not start within {:.0} s (interpreter or framework import hung); last output: {}",
                        config.startup_timeout.as_secs_f64(),
                        telling_line(&tail).unwrap_or_else(|| "none".into())
                    ),
                    on_event,
                );
            }
            None => {
                // Stuck between probes: blame the next one, which it was preparing.
                if let Some(task) = self.remaining.pop_front() {
                    on_event(SupervisorEvent::Finished(RawResult {
                        probe: task.spec.id.clone(),
                        device: task.device,
                        outcome: RawOutcome::Hang {
                            timeout_s: config.between_probes_timeout.as_secs_f64(),
                        },
                        elapsed_s: None,
                        output_tail: tail,
                        kernel_log: self.kernel_lines(),
                    }));
                }
            }
        }
        true
    }

    /// A protocol event from the worker.
    fn event(
        &mut self,
        event: Box<WorkerEvent>,
        ahead: &mut Ahead<'_>,
        make_command: &mut CommandFactory<'_>,
        config: &SupervisorConfig,
        worker_number: &mut usize,
        on_event: &mut dyn FnMut(SupervisorEvent),
    ) -> Step {
        match *event {
            WorkerEvent::Hello { .. } => {
                self.hello(event, ahead, make_command, config, worker_number, on_event)
            }
            WorkerEvent::Begin { probe, device } => {
                self.begin(probe, device, config, on_event);
                Step::Continue
            }
            WorkerEvent::Result {
                probe,
                device,
                outcome,
                elapsed_s,
            } => {
                self.result(probe, device, outcome, elapsed_s, config, on_event);
                Step::Continue
            }
            WorkerEvent::Log { level, message } => {
                on_event(SupervisorEvent::Log(format!("{level}: {message}")));
                Step::Continue
            }
            WorkerEvent::Done => {
                self.worker.wait();
                finish_all(
                    self.remaining,
                    "the worker finished without running this probe",
                    on_event,
                );
                Step::Return(true)
            }
            WorkerEvent::Catalog { .. } => Step::Continue,
        }
    }

    /// The worker's hello: it is past its import. An unusable worker finishes the tasks as
    /// not tested; one that waits for the start line is let go when the gate opens; then
    /// the next batches' workers may be spawned ahead.
    fn hello(
        &mut self,
        event: Box<WorkerEvent>,
        ahead: &mut Ahead<'_>,
        make_command: &mut CommandFactory<'_>,
        config: &SupervisorConfig,
        worker_number: &mut usize,
        on_event: &mut dyn FnMut(SupervisorEvent),
    ) -> Step {
        self.hello_seen = true;
        let unusable = match &*event {
            WorkerEvent::Hello { unusable, .. } => unusable.clone(),
            _ => None,
        };
        on_event(SupervisorEvent::Hello(event));
        if let Some(reason) = unusable {
            self.worker.wait();
            finish_all(self.remaining, &reason, on_event);
            return Step::Return(true);
        }
        if self.waits_for_start {
            // Ready but not yet its turn: no deadline runs while it waits, since what it
            // waits for is other lanes, each under its own limits.
            if let Some(gate) = &config.start_gate
                && !gate.wait_unless(&config.cancel)
            {
                stop(&mut self.worker);
                return Step::Return(self.progressed);
            }
            self.worker.start();
        }
        // This worker is past its import and started: the next batches' workers can import
        // now, while this one runs its probes.
        ahead.top_up(
            config.workers_ahead,
            make_command,
            config,
            worker_number,
            on_event,
        );
        self.deadline = Instant::now() + config.between_probes_timeout;
        Step::Continue
    }

    /// A probe began: its own timeout runs from now.
    fn begin(
        &mut self,
        probe: ProbeId,
        device: DeviceRef,
        config: &SupervisorConfig,
        on_event: &mut dyn FnMut(SupervisorEvent),
    ) {
        let Some(index) = self.position(&probe, device) else {
            on_event(SupervisorEvent::Log(format!(
                "worker began an unplanned probe {probe} on {device}"
            )));
            return;
        };
        let timeout_s = self.remaining[index].spec.timeout_s * config.timeout_scale;
        self.running = Some(Running {
            index,
            started: Instant::now(),
            timeout_s,
        });
        self.deadline = Instant::now() + Duration::from_secs_f64(timeout_s.max(0.001));
        on_event(SupervisorEvent::Started(probe, device));
    }

    /// A probe's result: recorded with the kernel lines seen so far (and the worker's
    /// output tail for an error).
    fn result(
        &mut self,
        probe: ProbeId,
        device: DeviceRef,
        outcome: Outcome,
        elapsed_s: Option<f64>,
        config: &SupervisorConfig,
        on_event: &mut dyn FnMut(SupervisorEvent),
    ) {
        let Some(index) = self.position(&probe, device) else {
            on_event(SupervisorEvent::Log(format!(
                "worker reported an unplanned probe {probe} on {device}"
            )));
            return;
        };
        let started = self
            .running
            .take()
            .filter(|r| r.index == index)
            .map(|r| r.started);
        let task = self.remaining.remove(index).expect("index is valid");
        let elapsed = elapsed_s.or_else(|| started.map(|s| s.elapsed().as_secs_f64()));
        let is_error = matches!(outcome, Outcome::Error { .. });
        let raw = match outcome {
            Outcome::Observed { observation } => RawOutcome::Observed(Box::new(observation)),
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
        let output_tail = if is_error {
            self.worker.tail()
        } else {
            Vec::new()
        };
        on_event(SupervisorEvent::Finished(RawResult {
            probe: task.spec.id.clone(),
            device: task.device,
            outcome: raw,
            elapsed_s: elapsed,
            output_tail,
            kernel_log: self.kernel_lines(),
        }));
        self.progressed = true;
        self.deadline = Instant::now() + config.between_probes_timeout;
    }

    /// Where the task for `probe` on `device` is among the remaining ones.
    fn position(&self, probe: &ProbeId, device: DeviceRef) -> Option<usize> {
        self.remaining
            .iter()
            .position(|t| &t.spec.id == probe && t.device == device)
    }

    /// A line that is not the protocol: the first three are logged.
    fn garbage(&mut self, line: &str, on_event: &mut dyn FnMut(SupervisorEvent)) {
        self.garbage_lines += 1;
        if self.garbage_lines <= 3 {
            let shown: String = line.chars().take(200).collect();
            on_event(SupervisorEvent::Log(format!(
                "ignored a non-protocol line from the worker: {shown}"
            )));
        }
    }

    /// The worker's event stream closed: it exited. The probe running is CRASH; a worker
    /// that never said hello leaves its tasks not tested; one that exited between probes
    /// (e.g. on purpose after an error that poisoned the GPU context) makes way for a fresh
    /// one.
    fn closed(&mut self, on_event: &mut dyn FnMut(SupervisorEvent)) -> bool {
        let exit = self.worker.wait();
        let tail = self.worker.tail();
        if let Some(run) = self.running.take() {
            let task = self
                .remaining
                .remove(run.index)
                .expect("running task is in remaining");
            let kernel_log = self.kernel_lines();
            on_event(SupervisorEvent::Finished(RawResult {
                probe: task.spec.id.clone(),
                device: task.device,
                outcome: crash_outcome(exit, &tail),
                elapsed_s: Some(run.started.elapsed().as_secs_f64()),
                output_tail: tail,
                kernel_log,
            }));
            return true;
        }
        if !self.hello_seen {
            finish_all(
                self.remaining,
                &format!(
                    "the worker exited before reporting ({}): {}",
                    describe_exit(exit),
                    telling_line(&tail).unwrap_or_else(|| "no output".into())
                ),
                on_event,
            );
            return true;
        }
        self.progressed
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

/// The most telling line of a worker's last output.
pub fn telling_line(tail: &[String]) -> Option<String> {
    for marker in CRASH_TELLING_MARKERS {
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

    use std::collections::BTreeMap;
    use std::path::Path;

    use gpuprobe_model::{Backend, Layer, Placement, ProbeSpec, Rule, Tier};

    /// A worker that speaks the protocol. Arguments: note file, name, `wait` or `go`, seconds
    /// per probe, probes. It notes `spawn:<name>` and `pid:<name>:<pid>` when it starts,
    /// `start:<name>` when the start line arrives and `result:<probe>` just before reporting
    /// it, each with its time.
    const FAKE_WORKER: &str = r#"
import json, os, sys, time
notes, name, wait, seconds = sys.argv[1], sys.argv[2], sys.argv[3] == "wait", float(sys.argv[4])
out = os.fdopen(3, "w", buffering=1)
def emit(event): out.write(json.dumps(event) + "\n")
def note(what):
    with open(notes, "a") as f: f.write(f"{what} {time.time()}\n")
note(f"spawn:{name}")
note(f"pid:{name}:{os.getpid()}")
emit({"event": "hello", "protocol": 1, "pid": os.getpid(), "worker": "python"})
if wait:
    if sys.stdin.readline().strip() != "start": sys.exit(0)
    note(f"start:{name}")
for probe in sys.argv[5:]:
    emit({"event": "begin", "probe": probe, "device": "cpu"})
    time.sleep(seconds)
    note(f"result:{probe}")
    emit({"event": "result", "probe": probe, "device": "cpu", "outcome": "observed",
          "observation": {"probe": probe, "device": "cpu", "measurement": {"kind": "metrics"}}})
emit({"event": "done"})
"#;

    fn isolated(id: &str) -> Task {
        Task {
            spec: ProbeSpec {
                id: ProbeId::new(id),
                tier: Tier::Quick,
                layer: Layer::Runtime,
                rule: Rule::Measure,
                backend: Backend::Python,
                timeout_s: 60.0,
                description: String::new(),
                needs: vec![],
                isolated: true,
                placement: Placement::Shared,
                lane: None,
                typical_s: None,
                native_counterpart: None,
                report_group: None,
            },
            device: DeviceRef::Cpu,
        }
    }

    /// The fake worker for `tasks`, named after the first; it waits for the start line when
    /// started ahead, as the engine's workers do.
    fn fake_worker(tasks: &[Task], ahead: bool, notes: &Path, seconds: f64) -> WorkerCommand {
        let mut args: Vec<std::ffi::OsString> = vec![
            "-c".into(),
            FAKE_WORKER.into(),
            notes.into(),
            tasks[0].spec.id.as_str().into(),
            if ahead { "wait" } else { "go" }.into(),
            seconds.to_string().into(),
        ];
        args.extend(tasks.iter().map(|t| t.spec.id.as_str().into()));
        WorkerCommand {
            program: "python3".into(),
            args,
            env: BTreeMap::new(),
            remove_env: Vec::new(),
            waits_for_start: ahead,
        }
    }

    /// What a supervised run did: the factory's calls (first probe, ahead, when), the
    /// results (with when they arrived) and the log messages.
    #[derive(Default)]
    struct Record {
        calls: Vec<(String, bool, Instant)>,
        results: Vec<(RawResult, Instant)>,
        logs: Vec<String>,
    }

    fn supervise_recorded(
        tasks: Vec<Task>,
        dir: &Path,
        command: impl FnMut(&[Task], bool) -> Result<WorkerCommand, RunnerError>,
    ) -> Record {
        supervise_recorded_ahead(tasks, dir, 1, command)
    }

    fn supervise_recorded_ahead(
        tasks: Vec<Task>,
        dir: &Path,
        workers_ahead: usize,
        mut command: impl FnMut(&[Task], bool) -> Result<WorkerCommand, RunnerError>,
    ) -> Record {
        let mut record = Record::default();
        let mut calls = Vec::new();
        let mut make_command = |tasks: &[Task], ahead: bool| {
            calls.push((tasks[0].spec.id.to_string(), ahead, Instant::now()));
            command(tasks, ahead)
        };
        let config = SupervisorConfig {
            startup_timeout: Duration::from_secs(60),
            between_probes_timeout: Duration::from_secs(60),
            log_dir: Some(dir.to_path_buf()),
            workers_ahead,
            ..SupervisorConfig::default()
        };
        supervise(
            tasks,
            &mut make_command,
            &config,
            None,
            &mut |event| match event {
                SupervisorEvent::Finished(result) => record.results.push((result, Instant::now())),
                SupervisorEvent::Log(message) => record.logs.push(message),
                _ => {}
            },
        );
        record.calls = calls;
        record
    }

    /// The fake workers' notes: what -> time.
    fn read_notes(notes: &Path) -> BTreeMap<String, f64> {
        std::fs::read_to_string(notes)
            .unwrap()
            .lines()
            .map(|line| {
                let (what, time) = line.split_once(' ').unwrap();
                (what.to_string(), time.parse().unwrap())
            })
            .collect()
    }

    /// The factory's calls: (first probe, started ahead).
    fn factory_calls(record: &Record) -> Vec<(&str, bool)> {
        record
            .calls
            .iter()
            .map(|(probe, ahead, _)| (probe.as_str(), *ahead))
            .collect()
    }

    /// The probes of the results, in order.
    fn result_probes(record: &Record) -> Vec<&str> {
        record
            .results
            .iter()
            .map(|(r, _)| r.probe.as_str())
            .collect()
    }

    fn summary(record: &Record) -> Vec<(String, RawOutcome)> {
        record
            .results
            .iter()
            .map(|(r, _)| (r.probe.to_string(), r.outcome.clone()))
            .collect()
    }

    #[test]
    fn the_next_isolated_probe_gets_its_worker_while_the_current_one_runs() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        let tasks = vec![isolated("t.a"), isolated("t.b"), isolated("t.c")];
        let record = supervise_recorded(tasks, dir.path(), |tasks, ahead| {
            Ok(fake_worker(tasks, ahead, &notes, 0.3))
        });
        let probes = result_probes(&record);
        assert_eq!(probes, ["t.a", "t.b", "t.c"], "{:?}", record.logs);
        for (result, _) in &record.results {
            assert!(
                matches!(result.outcome, RawOutcome::Observed(_)),
                "{result:?} {:?}",
                record.logs
            );
        }
        let calls = factory_calls(&record);
        assert_eq!(calls, [("t.a", false), ("t.b", true), ("t.c", true)]);
        // Each next worker was spawned while the previous probe still ran.
        for k in 0..2 {
            assert!(
                record.calls[k + 1].2 < record.results[k].1,
                "worker for {} spawned after {} finished",
                record.calls[k + 1].0,
                record.calls[k].0
            );
        }
        let mut logs: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("worker-"))
            .collect();
        logs.sort();
        assert_eq!(logs, ["worker-1.log", "worker-2.log", "worker-3.log"]);
    }

    #[test]
    fn several_workers_wait_ahead_and_each_starts_only_on_its_turn() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        let tasks = vec![
            isolated("t.a"),
            isolated("t.b"),
            isolated("t.c"),
            isolated("t.d"),
        ];
        let record = supervise_recorded_ahead(tasks, dir.path(), 3, |tasks, ahead| {
            Ok(fake_worker(tasks, ahead, &notes, 1.0))
        });
        let probes = result_probes(&record);
        assert_eq!(probes, ["t.a", "t.b", "t.c", "t.d"], "{:?}", record.logs);
        let calls = factory_calls(&record);
        assert_eq!(
            calls,
            [("t.a", false), ("t.b", true), ("t.c", true), ("t.d", true)]
        );
        // All three later workers were spawned while the first probe ran.
        for k in 1..4 {
            assert!(
                record.calls[k].2 < record.results[0].1,
                "worker for {} spawned after t.a finished",
                record.calls[k].0
            );
        }
        // Each began only after the previous probe's result.
        let notes = read_notes(&notes);
        for (previous, next) in [("t.a", "t.b"), ("t.b", "t.c"), ("t.c", "t.d")] {
            assert!(
                notes[&format!("start:{next}")] >= notes[&format!("result:{previous}")],
                "{next} started before {previous} ended: {notes:?}"
            );
        }
    }

    #[test]
    fn a_worker_started_ahead_begins_no_probe_before_its_turn() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        // The probe is long beside an interpreter's start, so a worker let go early would
        // note its start line well before the first probe's result.
        let tasks = vec![isolated("t.a"), isolated("t.b")];
        let record = supervise_recorded(tasks, dir.path(), |tasks, ahead| {
            Ok(fake_worker(tasks, ahead, &notes, 1.0))
        });
        assert_eq!(record.results.len(), 2, "{:?}", record.logs);
        let notes = read_notes(&notes);
        assert!(
            notes["spawn:t.b"] < notes["start:t.b"],
            "the second worker was started ahead and held: {notes:?}"
        );
        assert!(
            notes["result:t.a"] < notes["start:t.b"],
            "the second worker got the start line before the first probe's result: {notes:?}"
        );
    }

    #[test]
    fn an_ahead_worker_that_dies_before_hello_leaves_its_probes_not_tested() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        let tasks = vec![isolated("t.a"), isolated("t.b"), isolated("t.c")];
        let record = supervise_recorded(tasks, dir.path(), |tasks, ahead| {
            let mut command = fake_worker(tasks, ahead, &notes, 0.3);
            if tasks[0].spec.id.as_str() == "t.b" {
                command.program = "sh".into();
                command.args = vec![
                    "-c".into(),
                    "echo 'no module named torch' >&2; exit 3".into(),
                ];
            }
            Ok(command)
        });
        assert_eq!(
            summary(&record)[1],
            (
                "t.b".to_string(),
                RawOutcome::NotTested(
                    "the worker exited before reporting (exit code 3): no module named torch"
                        .into()
                )
            )
        );
        let probes = result_probes(&record);
        assert_eq!(probes, ["t.a", "t.b", "t.c"], "{:?}", record.logs);
        assert!(matches!(
            record.results[2].0.outcome,
            RawOutcome::Observed(_)
        ));
        let calls = factory_calls(&record);
        // t.b's worker never said hello, so t.c's is spawned on its turn.
        assert_eq!(calls, [("t.a", false), ("t.b", true), ("t.c", false)]);
    }

    #[test]
    fn a_failed_start_ahead_is_retried_on_its_turn_and_reported_as_today() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        let tasks = vec![isolated("t.a"), isolated("t.b")];
        let record = supervise_recorded(tasks, dir.path(), |tasks, ahead| {
            if tasks[0].spec.id.as_str() == "t.b" {
                return Err(RunnerError::Protocol("no plan".into()));
            }
            Ok(fake_worker(tasks, ahead, &notes, 0.1))
        });
        let summary = summary(&record);
        assert!(
            matches!(summary[0].1, RawOutcome::Observed(_)),
            "{summary:?}"
        );
        assert_eq!(
            summary[1],
            (
                "t.b".to_string(),
                RawOutcome::NotTested("cannot prepare worker: worker protocol: no plan".into())
            )
        );
        assert!(
            record.logs.iter().any(|l| l.contains("not started ahead")),
            "{:?}",
            record.logs
        );
        let calls = factory_calls(&record);
        assert_eq!(calls, [("t.a", false), ("t.b", true), ("t.b", false)]);
    }

    /// Whether process `pid` still exists (a zombie counts as gone: it runs nothing).
    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
                !state.is_some_and(|s| s.starts_with('Z'))
            })
            .unwrap_or(false)
    }

    #[test]
    fn a_cancel_ends_every_worker_and_records_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        // Each probe would take a minute: only the cancel can end this run in time.
        let tasks = vec![isolated("t.a"), isolated("t.b"), isolated("t.c")];
        let cancel = Cancel::new();
        let config = SupervisorConfig {
            startup_timeout: Duration::from_secs(60),
            between_probes_timeout: Duration::from_secs(60),
            log_dir: Some(dir.path().to_path_buf()),
            workers_ahead: 2,
            cancel: cancel.clone(),
            ..SupervisorConfig::default()
        };
        let mut make_command =
            |tasks: &[Task], ahead: bool| Ok(fake_worker(tasks, ahead, &notes, 60.0));
        let mut results = Vec::new();
        let mut started = Vec::new();
        let began = Instant::now();
        supervise(
            tasks,
            &mut make_command,
            &config,
            None,
            &mut |event| match event {
                SupervisorEvent::Started(probe, _) => {
                    started.push(probe.to_string());
                    // Let the workers started ahead come up (they note their pids), then cancel.
                    std::thread::sleep(Duration::from_millis(1500));
                    cancel.cancel();
                }
                SupervisorEvent::Finished(result) => results.push(result),
                _ => {}
            },
        );
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "the cancel did not end the run promptly: {:?}",
            began.elapsed()
        );
        assert_eq!(started, ["t.a"]);
        assert!(
            results.is_empty(),
            "a cancelled probe got a result: {results:?}"
        );
        let text = std::fs::read_to_string(&notes).unwrap();
        let pids: Vec<i32> = text
            .lines()
            .filter_map(|line| line.strip_prefix("pid:"))
            .filter_map(|rest| rest.split(' ').next()?.rsplit(':').next()?.parse().ok())
            .collect();
        assert!(pids.len() >= 2, "the workers ahead did not start: {text}");
        for pid in pids {
            assert!(!alive(pid), "worker {pid} outlived the cancel");
        }
        assert!(
            cancel.wait_idle(Duration::ZERO),
            "the supervisor still counts as running"
        );
    }

    #[test]
    fn a_cancel_releases_a_worker_waiting_at_a_closed_gate() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        let cancel = Cancel::new();
        let config = SupervisorConfig {
            startup_timeout: Duration::from_secs(60),
            log_dir: Some(dir.path().to_path_buf()),
            start_gate: Some(StartGate::new()),
            cancel: cancel.clone(),
            ..SupervisorConfig::default()
        };
        // The gate never opens: only the cancel can end the wait.
        let mut make_command =
            |tasks: &[Task], _ahead: bool| Ok(fake_worker(tasks, true, &notes, 0.1));
        let began = Instant::now();
        let mut results = Vec::new();
        supervise(
            vec![isolated("t.a")],
            &mut make_command,
            &config,
            None,
            &mut |event| match event {
                SupervisorEvent::Hello(_) => cancel.cancel(),
                SupervisorEvent::Finished(result) => results.push(result),
                _ => {}
            },
        );
        assert!(began.elapsed() < Duration::from_secs(20));
        assert!(results.is_empty(), "{results:?}");
        let text = std::fs::read_to_string(&notes).unwrap();
        assert!(!text.contains("start:"), "the worker was let go: {text}");
    }

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
