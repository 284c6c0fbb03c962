//! Execution of probe plans: the execute → judge → record spine.
//!
//! A plan is a set of lanes ([`Lane`]), one per (worker kind, device) and more where the
//! heaviest are cut. Each lane runs in its own thread under the supervisor ([`worker`]
//! starts its workers), so every GPU (and the native and Python layers of each) is tested
//! in parallel; the [`schedule`] decides when each lane starts and how many CPU threads its
//! workers get. Results are judged here, on arrival, and appended to the run directory
//! before anything else happens, so a killed run keeps every finished result. A lane's
//! worker hello can add lanes (e.g. device 0's worker reports how many GPUs torch sees).

pub(crate) mod schedule;
mod worker;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Instant;

use gpuprobe_model::{Backend, DeviceRef, LaneTiming, ProbeId, ProbeResult, ProbeSpec};
use gpuprobe_model::{Settings, SimulationSpec, WorkerEvent};
use gpuprobe_runner::{KernelLogSource, PythonChoice, RunDir, SupervisorConfig, SupervisorEvent};

use crate::plan::Lane;
use crate::verdict::to_result;
use schedule::{Launch, Scheduler};
use worker::{run_lane, start_zygote, thread_budget_path, write_thread_budget};

/// How to start workers.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The user's interpreter, when one was found.
    pub python: Option<PythonChoice>,
    /// Directory holding the extracted `gpuprobe` Python package.
    pub package_dir: Option<PathBuf>,
    /// The gpuprobe executable, re-run as the native worker.
    pub native_program: Option<PathBuf>,
    /// Seed for every random input.
    pub seed: u64,
    /// Faults to simulate (test and demo mode only).
    pub simulate: Option<SimulationSpec>,
    /// Settings applied to every worker.
    pub settings: Settings,
    /// Timeouts and log placement.
    pub supervisor: SupervisorConfig,
    /// Probe options passed in each plan.
    pub options: BTreeMap<String, serde_json::Value>,
    /// How many devices the first lanes stand for: more than 1 when they are GPU 0's and the
    /// other GPUs' lanes will join once its worker has counted them. Only the CPU thread
    /// budgets use it, so that GPU 0's workers do not take the whole host.
    pub expected_devices: usize,
    /// The kernel log each lane watches, so that the lines printed while a probe ran (a page
    /// fault, a reset) are recorded with its result.
    pub kernel_log: KernelLogSource,
}

/// What the engine reports while it runs.
#[derive(Debug)]
pub enum Progress<'a> {
    /// More probe runs were planned (lanes added): their probes.
    Planned(&'a [ProbeId]),
    /// A probe started.
    Started(&'a ProbeId, DeviceRef),
    /// A probe finished and was recorded.
    Finished(&'a ProbeResult),
    /// A message worth showing in verbose mode.
    Log(&'a str),
}

/// A worker's hello, kept for the report.
#[derive(Debug, Clone)]
pub struct HelloRecord {
    /// Which worker kind.
    pub backend: Backend,
    /// Which device lane.
    pub device: DeviceRef,
    /// The event.
    pub event: WorkerEvent,
}

/// Everything a run produced.
#[derive(Debug, Default)]
pub struct Execution {
    /// Judged results, in the order they arrived.
    pub results: Vec<ProbeResult>,
    /// Worker hellos.
    pub hellos: Vec<HelloRecord>,
    /// Log messages (library warnings, restarts, protocol noise).
    pub logs: Vec<String>,
    /// Results that could not be written to the run directory (the run went on).
    pub write_errors: Vec<String>,
    /// Why the kernel log could not be watched during the probes, when it was asked for and
    /// could not be read (the results then carry no kernel lines).
    pub kernel_log_unreadable: Option<String>,
    /// Each lane's milestones, in launch order, in seconds since the engine started
    /// (a caller that started earlier shifts them with [`LaneTiming::shifted`]).
    pub lanes: Vec<LaneTiming>,
}

/// The probes of `lanes`' tasks, one per planned run.
fn probes_of(lanes: &[Lane]) -> Vec<ProbeId> {
    lanes
        .iter()
        .flat_map(|l| l.tasks.iter().map(|t| t.spec.id.clone()))
        .collect()
}

/// A lane's timing as it is launched: what it holds, no milestone reached yet.
fn lane_timing(lane: &Lane, launched_s: f64) -> LaneTiming {
    LaneTiming {
        backend: lane.backend,
        device: lane.device,
        placement: lane.placement,
        first_probe: lane
            .tasks
            .first()
            .map(|t| t.spec.id.to_string())
            .unwrap_or_default(),
        probes: lane.tasks.len(),
        workers: 0,
        launched_s,
        first_hello_s: None,
        first_begin_s: None,
        last_result_s: None,
        done_s: launched_s,
    }
}

enum LaneMessage {
    Event(usize, SupervisorEvent),
    LaneDone(usize),
}

/// What the engine keeps of each launched lane while the run goes on: the specs of the
/// probes it will report, its milestones, the results it still owes, and whether its worker
/// has exited.
#[derive(Default)]
struct LaneBook {
    specs: HashMap<(ProbeId, DeviceRef), ProbeSpec>,
    clocks: BTreeMap<usize, LaneTiming>,
    /// Results each launched lane still owes. A lane that owes none has finished with its
    /// device although its worker may still be exiting (the driver tearing its context down
    /// took 0.1-0.2 s on the H200): what waits for the device (an exclusive lane's gate) need
    /// not wait for that exit, since an exiting worker only returns memory.
    results_left: HashMap<usize, HashSet<(ProbeId, DeviceRef)>>,
    /// Launched lanes whose worker has exited (each sends `LaneDone` once).
    exited: usize,
}

impl LaneBook {
    fn launched(&mut self, launch: &Launch, now: f64) {
        self.clocks
            .insert(launch.id, lane_timing(&launch.lane, now));
        self.results_left.insert(
            launch.id,
            launch
                .lane
                .tasks
                .iter()
                .map(|t| (t.spec.id.clone(), t.device))
                .collect(),
        );
        for task in &launch.lane.tasks {
            self.specs
                .insert((task.spec.id.clone(), task.device), task.spec.clone());
        }
    }

    fn exited(&mut self, lane_id: usize, now: f64) {
        self.exited += 1;
        if let Some(clock) = self.clocks.get_mut(&lane_id) {
            clock.done_s = now;
        }
    }

    /// Whether a launched lane's worker is still running.
    fn workers_running(&self) -> bool {
        self.exited < self.results_left.len()
    }

    fn observed(&mut self, lane_id: usize, event: &SupervisorEvent, now: f64) {
        let Some(clock) = self.clocks.get_mut(&lane_id) else {
            return;
        };
        match event {
            SupervisorEvent::Hello(_) => {
                clock.workers += 1;
                clock.first_hello_s = clock.first_hello_s.or(Some(now));
            }
            SupervisorEvent::Started(..) => {
                clock.first_begin_s = clock.first_begin_s.or(Some(now));
            }
            SupervisorEvent::Finished(_) => clock.last_result_s = Some(now),
            SupervisorEvent::Log(_) => {}
        }
    }

    fn spec(&self, probe: &ProbeId, device: DeviceRef) -> Option<&ProbeSpec> {
        self.specs.get(&(probe.clone(), device))
    }

    /// Records that `lane_id` delivered the result of `probe` on `device`; true when it was
    /// the last the lane owed.
    fn delivered(&mut self, lane_id: usize, probe: &ProbeId, device: DeviceRef) -> bool {
        self.results_left
            .get_mut(&lane_id)
            .is_some_and(|left| left.remove(&(probe.clone(), device)) && left.is_empty())
    }

    fn into_timings(self) -> Vec<LaneTiming> {
        self.clocks.into_values().collect()
    }
}

/// Decides, on a worker's hello, whether more lanes are needed.
pub type Expander<'a> = dyn FnMut(Backend, DeviceRef, &WorkerEvent) -> Vec<Lane> + 'a;

/// The variable that caps a worker's CPU threads (PyTorch's intra-op pool reads it at import,
/// and the worker's own children inherit it).
pub const THREADS_VARIABLE: &str = "OMP_NUM_THREADS";

/// Runs the lanes (and any the expander adds), judging and recording every result.
///
/// The `Scheduler` decides when each lane starts: shared and side lanes at once, exclusive
/// lanes alone on their device, the first of them launched early behind a start gate. Each
/// Python worker's CPU threads are capped by its launch's budget unless the user's
/// environment or the run's settings name [`THREADS_VARIABLE`].
pub fn execute(
    lanes: Vec<Lane>,
    config: &EngineConfig,
    run_dir: &RunDir,
    expand: &mut Expander<'_>,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> Execution {
    let mut execution = Execution::default();
    let started = Instant::now();
    let seconds = || started.elapsed().as_secs_f64();
    let (sender, receiver) = mpsc::channel::<LaneMessage>();
    let mut scheduler = Scheduler::new(
        thread::available_parallelism().map_or(1, |n| n.get()),
        config.expected_devices,
    );
    // One try up front: when the log is unreadable the report says so once, and no lane
    // tries again.
    let kernel_log = match config.kernel_log.open() {
        Some(Err(reason)) => {
            execution.kernel_log_unreadable = Some(reason);
            KernelLogSource::Off
        }
        _ => config.kernel_log.clone(),
    };
    let kernel_log = &kernel_log;
    let cap_threads = std::env::var_os(THREADS_VARIABLE).is_none()
        && !config.settings.set.contains_key(THREADS_VARIABLE)
        && !config.settings.unset.iter().any(|k| k == THREADS_VARIABLE);
    let zygote = start_zygote(&lanes, config);
    if let Some(Err(why)) = &zygote {
        execution
            .logs
            .push(format!("workers start one by one: {why}"));
    }
    let zygote = zygote.and_then(Result::ok).map(Arc::new);
    let zygote = &zygote;

    thread::scope(|scope| {
        let start = |launches: Vec<Launch>, book: &mut LaneBook| {
            for launch in launches {
                book.launched(&launch, seconds());
                let sender = sender.clone();
                scope.spawn(move || {
                    run_lane(
                        launch,
                        config,
                        run_dir,
                        cap_threads,
                        zygote.clone(),
                        kernel_log,
                        &mut |event| {
                            let _ = sender.send(event);
                        },
                    )
                });
            }
        };

        let mut book = LaneBook::default();
        // The CPU threads each Python worker on a GPU may use now, as last published.
        let mut published_threads: Option<usize> = None;
        // A resumed run's last budget is not this run's: until the first change, workers keep
        // the threads they start with.
        let _ = std::fs::remove_file(thread_budget_path(run_dir));
        let mut publish_threads = |scheduler: &Scheduler, execution: &mut Execution| {
            let Some(threads) = scheduler.python_threads().filter(|_| cap_threads) else {
                return;
            };
            if published_threads == Some(threads) {
                return;
            }
            published_threads = Some(threads);
            if let Err(err) = write_thread_budget(run_dir, threads) {
                execution.logs.push(format!(
                    "the workers keep the CPU threads they started with: {err}"
                ));
            }
        };
        on_progress(Progress::Planned(&probes_of(&lanes)));
        start(scheduler.admit(lanes), &mut book);
        while scheduler.busy() || book.workers_running() {
            let Ok(message) = receiver.recv() else { break };
            match message {
                LaneMessage::LaneDone(lane_id) => {
                    book.exited(lane_id, seconds());
                    start(scheduler.finished(lane_id), &mut book);
                }
                LaneMessage::Event(lane_id, event) => {
                    let Some((backend, device)) = scheduler.lane(lane_id) else {
                        continue;
                    };
                    book.observed(lane_id, &event, seconds());
                    match event {
                        SupervisorEvent::Hello(hello) => {
                            let new_lanes = expand(backend, device, &hello);
                            let added = probes_of(&new_lanes);
                            if !added.is_empty() {
                                on_progress(Progress::Planned(&added));
                            }
                            start(scheduler.admit(new_lanes), &mut book);
                            execution.hellos.push(HelloRecord {
                                backend,
                                device,
                                event: *hello,
                            });
                        }
                        SupervisorEvent::Started(probe, device) => {
                            on_progress(Progress::Started(&probe, device))
                        }
                        SupervisorEvent::Finished(raw) => {
                            let Some(spec) = book.spec(&raw.probe, raw.device) else {
                                execution.logs.push(format!(
                                    "result for unplanned probe {} on {}",
                                    raw.probe, raw.device
                                ));
                                continue;
                            };
                            let result =
                                to_result(spec, raw, &config.settings, config.simulate.is_some());
                            let drained = book.delivered(lane_id, &result.probe, result.device);
                            if let Err(err) = run_dir.append_result(&result) {
                                execution.write_errors.push(err.to_string());
                            }
                            on_progress(Progress::Finished(&result));
                            execution.results.push(result);
                            if drained {
                                // Its last result: the lane is done with its device.
                                start(scheduler.finished(lane_id), &mut book);
                            }
                        }
                        SupervisorEvent::Log(message) => {
                            let message = format!("[{} {}] {message}", backend.name(), device);
                            on_progress(Progress::Log(&message));
                            execution.logs.push(message);
                        }
                    }
                }
            }
            // Whatever the message changed (a lane finished, lanes were admitted), the
            // share follows; it is written only when it differs from the last one.
            publish_threads(&scheduler, &mut execution);
        }
        execution.lanes = book.into_timings();
    });
    execution
}
