//! Execution of probe plans: the execute → judge → record spine.
//!
//! A plan is a set of lanes, one per (worker kind, device). Each lane runs in its own thread
//! under the supervisor, so every GPU (and the native and Python layers of each) is tested
//! in parallel. Results are judged here, on arrival, and appended to the run directory
//! before anything else happens, so a killed run keeps every finished result. A lane's
//! worker hello can add lanes (e.g. device 0's worker reports how many GPUs torch sees).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Instant;

use gpuprobe_model::LaneTiming;
use gpuprobe_model::{Backend, DeviceRef, Placement, ProbeId, ProbeSpec, Tier};
use gpuprobe_model::{PROTOCOL_VERSION, SimulationSpec, WorkerEvent, WorkerMode, WorkerPlan};
use gpuprobe_model::{ProbeResult, Verdict};
use gpuprobe_runner::{
    KernelLogSource, PythonChoice, RawOutcome, RawResult, RunDir, RunnerError, SupervisorConfig,
    SupervisorEvent, Task, WorkerCommand, Zygote, supervise,
};

use crate::judge::judge;
use crate::schedule::{Launch, Scheduler};

pub use gpuprobe_model::{RunPlan, Settings};

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

/// Probes of one worker kind on one device, run in order.
#[derive(Debug, Clone)]
pub struct Lane {
    /// Python or native.
    pub backend: Backend,
    /// The device.
    pub device: DeviceRef,
    /// How the lane shares its device: shared and side lanes run side by side; exclusive
    /// lanes run one at a time, once nothing else runs on their device.
    pub placement: Placement,
    /// The probes.
    pub tasks: Vec<Task>,
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

/// A lane's timing as it is launched: what it holds, no milestone reached yet.
/// The probes of `lanes`' tasks, one per planned run.
fn probes_of(lanes: &[Lane]) -> Vec<ProbeId> {
    lanes
        .iter()
        .flat_map(|l| l.tasks.iter().map(|t| t.spec.id.clone()))
        .collect()
}

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

/// Decides, on a worker's hello, whether more lanes are needed.
pub type Expander<'a> = dyn FnMut(Backend, DeviceRef, &WorkerEvent) -> Vec<Lane> + 'a;

/// The variable that caps a worker's CPU threads (PyTorch's intra-op pool reads it at import,
/// and the worker's own children inherit it).
pub const THREADS_VARIABLE: &str = "OMP_NUM_THREADS";

/// Runs the lanes (and any the expander adds), judging and recording every result.
///
/// The [`Scheduler`] decides when each lane starts: shared and side lanes at once, exclusive
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
    let mut specs: HashMap<(ProbeId, DeviceRef), ProbeSpec> = HashMap::new();
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
        let start =
            |launches: Vec<Launch>,
             specs: &mut HashMap<(ProbeId, DeviceRef), ProbeSpec>,
             clocks: &mut BTreeMap<usize, LaneTiming>,
             results_left: &mut HashMap<usize, HashSet<(ProbeId, DeviceRef)>>| {
                for launch in launches {
                    clocks.insert(launch.id, lane_timing(&launch.lane, seconds()));
                    results_left.insert(
                        launch.id,
                        launch
                            .lane
                            .tasks
                            .iter()
                            .map(|t| (t.spec.id.clone(), t.device))
                            .collect(),
                    );
                    for task in &launch.lane.tasks {
                        specs.insert((task.spec.id.clone(), task.device), task.spec.clone());
                    }
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

        let mut clocks: BTreeMap<usize, LaneTiming> = BTreeMap::new();
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
        // Results each launched lane still owes. A lane that owes none has finished with
        // its device although its worker may still be exiting (the driver tearing its
        // context down took 0.1-0.2 s on the H200): what waits for the device (an exclusive
        // lane's gate) need not wait for that exit, since an exiting worker only returns
        // memory.
        let mut results_left: HashMap<usize, HashSet<(ProbeId, DeviceRef)>> = HashMap::new();
        on_progress(Progress::Planned(&probes_of(&lanes)));
        start(
            scheduler.admit(lanes),
            &mut specs,
            &mut clocks,
            &mut results_left,
        );
        // Launched lanes whose worker has not exited yet (each sends LaneDone once).
        let mut exited = 0usize;
        while scheduler.busy() || exited < results_left.len() {
            let Ok(message) = receiver.recv() else { break };
            match message {
                LaneMessage::LaneDone(lane_id) => {
                    exited += 1;
                    if let Some(clock) = clocks.get_mut(&lane_id) {
                        clock.done_s = seconds();
                    }
                    start(
                        scheduler.finished(lane_id),
                        &mut specs,
                        &mut clocks,
                        &mut results_left,
                    );
                }
                LaneMessage::Event(lane_id, event) => {
                    let Some((backend, device)) = scheduler.lane(lane_id) else {
                        continue;
                    };
                    if let Some(clock) = clocks.get_mut(&lane_id) {
                        let now = Some(seconds());
                        match &event {
                            SupervisorEvent::Hello(_) => {
                                clock.workers += 1;
                                clock.first_hello_s = clock.first_hello_s.or(now);
                            }
                            SupervisorEvent::Started(..) => {
                                clock.first_begin_s = clock.first_begin_s.or(now);
                            }
                            SupervisorEvent::Finished(_) => clock.last_result_s = now,
                            SupervisorEvent::Log(_) => {}
                        }
                    }
                    match event {
                        SupervisorEvent::Hello(hello) => {
                            let new_lanes = expand(backend, device, &hello);
                            let added = probes_of(&new_lanes);
                            if !added.is_empty() {
                                on_progress(Progress::Planned(&added));
                            }
                            start(
                                scheduler.admit(new_lanes),
                                &mut specs,
                                &mut clocks,
                                &mut results_left,
                            );
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
                            let Some(spec) = specs.get(&(raw.probe.clone(), raw.device)) else {
                                execution.logs.push(format!(
                                    "result for unplanned probe {} on {}",
                                    raw.probe, raw.device
                                ));
                                continue;
                            };
                            let drained = results_left.get_mut(&lane_id).is_some_and(|left| {
                                left.remove(&(raw.probe.clone(), raw.device)) && left.is_empty()
                            });
                            let result = to_result(spec, raw, config);
                            if let Err(err) = run_dir.append_result(&result) {
                                execution.write_errors.push(err.to_string());
                            }
                            on_progress(Progress::Finished(&result));
                            execution.results.push(result);
                            if drained {
                                // Its last result: the lane is done with its device.
                                start(
                                    scheduler.finished(lane_id),
                                    &mut specs,
                                    &mut clocks,
                                    &mut results_left,
                                );
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
        execution.lanes = clocks.into_values().collect();
    });
    execution
}

/// Supervises one launched lane to its end, sending its events and then `LaneDone`.
fn run_lane(
    launch: Launch,
    config: &EngineConfig,
    run_dir: &RunDir,
    cap_threads: bool,
    zygote: Option<Arc<Zygote>>,
    kernel_log: &KernelLogSource,
    send: &mut dyn FnMut(LaneMessage),
) {
    let Launch {
        id,
        lane,
        gate,
        threads,
    } = launch;
    let plan_dir = run_dir.workers_dir();
    let mut batch = 0usize;
    let mut make_command = |tasks: &[Task], ahead: bool| -> Result<WorkerCommand, RunnerError> {
        batch += 1;
        let name = format!(
            "plan-{}-{}-{id}-{batch}.json",
            lane.backend.name(),
            device_file_name(lane.device)
        );
        let plan_path = plan_dir.join(name);
        // A worker started ahead of its turn (the next batch's, while the current one runs)
        // or before the gate opened waits; one that replaces a crashed worker later starts
        // at once.
        let wait = ahead || gate.as_ref().is_some_and(|g| !g.is_open());
        // A CPU under test keeps its threads: a CPU kernel's rounding may follow them.
        let budget = (cap_threads
            && lane.backend == Backend::Python
            && matches!(lane.device, DeviceRef::Gpu(_)))
        .then(|| thread_budget_path(run_dir));
        write_plan(
            &plan_path,
            lane.device,
            tasks,
            config,
            wait,
            budget.as_deref(),
        )?;
        let mut command = worker_command(lane.backend, config, &plan_path)?;
        command.waits_for_start = wait;
        if cap_threads && lane.backend == Backend::Python {
            command
                .env
                .insert(THREADS_VARIABLE.into(), threads.to_string());
        }
        Ok(command)
    };
    // Each lane logs its workers in a folder of its own: lanes run side by side.
    let mut supervisor = config.supervisor.clone();
    supervisor.start_gate = gate.clone();
    supervisor.zygote = zygote;
    if let Some(dir) = &supervisor.log_dir {
        let lane_dir = dir.join(format!(
            "{}-{}-{id}",
            lane.backend.name(),
            device_file_name(lane.device)
        ));
        supervisor.log_dir = std::fs::create_dir_all(&lane_dir).ok().map(|_| lane_dir);
    }
    // Each lane reads the log on its own from the moment it starts: a line printed while
    // lanes run side by side is recorded with every probe that was running then.
    let mut watcher = kernel_log.open().and_then(Result::ok);
    supervise(
        lane.tasks,
        &mut make_command,
        &supervisor,
        watcher.as_mut(),
        &mut |event| send(LaneMessage::Event(id, event)),
    );
    send(LaneMessage::LaneDone(id));
}

/// The zygote for this run's Python workers (`gpuprobe_runner::zygote`), when it pays
/// (`zygote::worth_it`: two or more Python lanes, unless `GPUPROBE_ZYGOTE=0`) and is safe:
/// the ordinary interpreter and package, and no settings under test (a variable a worker is
/// given could be read when torch is imported, which the zygote has done before any worker
/// exists). `None` when not wanted; the error says why one could not start.
fn start_zygote(lanes: &[Lane], config: &EngineConfig) -> Option<Result<Zygote, String>> {
    let python_lanes = lanes
        .iter()
        .filter(|l| l.backend == Backend::Python)
        .count();
    let (env, unset) = config.settings.worker_env();
    if !env.is_empty()
        || !unset.is_empty()
        || !gpuprobe_runner::worth_it(gpuprobe_runner::choice_from_environment(), python_lanes)
    {
        return None;
    }
    let python = config.python.as_ref()?;
    let package = config.package_dir.as_ref()?;
    let log = config
        .supervisor
        .log_dir
        .as_ref()
        .map(|dir| dir.join("zygote.log"));
    Some(Zygote::start(
        &python.executable,
        package,
        &config.options,
        log.as_deref(),
        config.supervisor.startup_timeout,
    ))
}

/// The file that holds the Python workers' CPU thread budget (the plan's `thread_budget`).
fn thread_budget_path(run_dir: &RunDir) -> std::path::PathBuf {
    run_dir.workers_dir().join("threads")
}

/// Publishes `threads` as the budget every Python worker on a GPU applies before its next
/// probe: written beside and renamed into place, so a worker reads a whole number or the
/// last one. Lanes end at different times (on the H200 the standard tier's ten Python lanes
/// over 3.5 s), and the last ones, whose probes' host side (references, inputs) runs on the
/// threads they started with, would otherwise leave the cores the finished lanes freed idle:
/// the `ops` probes took 8.9 probe-seconds with 2 threads and 5.6 with 8.
fn write_thread_budget(run_dir: &RunDir, threads: usize) -> std::io::Result<()> {
    let path = thread_budget_path(run_dir);
    let staged = path.with_extension("new");
    std::fs::write(&staged, format!("{threads}\n"))?;
    std::fs::rename(&staged, &path)
}

fn device_file_name(device: DeviceRef) -> String {
    match device {
        DeviceRef::Cpu => "cpu".into(),
        DeviceRef::Gpu(i) => format!("gpu{i}"),
    }
}

fn write_plan(
    path: &std::path::Path,
    device: DeviceRef,
    tasks: &[Task],
    config: &EngineConfig,
    wait_for_start: bool,
    thread_budget: Option<&std::path::Path>,
) -> Result<(), RunnerError> {
    let plan = WorkerPlan {
        protocol: PROTOCOL_VERSION,
        mode: WorkerMode::Run,
        device: Some(device),
        probes: tasks.iter().map(|t| t.spec.id.clone()).collect(),
        seed: config.seed,
        simulate: config.simulate.clone(),
        options: config.options.clone(),
        wait_for_start,
        thread_budget: thread_budget.map(std::path::Path::to_path_buf),
    };
    let text =
        serde_json::to_string_pretty(&plan).map_err(|e| RunnerError::Protocol(e.to_string()))?;
    std::fs::write(path, text).map_err(|e| RunnerError::io("cannot write worker plan", path, e))
}

/// The command that starts a worker of `backend` for the plan at `plan_path`.
pub fn worker_command(
    backend: Backend,
    config: &EngineConfig,
    plan_path: &std::path::Path,
) -> Result<WorkerCommand, RunnerError> {
    let mut command = match backend {
        Backend::Python => {
            let python = config
                .python
                .as_ref()
                .ok_or_else(|| RunnerError::NoPython("no interpreter was found".into()))?;
            let package = config.package_dir.as_ref().ok_or_else(|| {
                RunnerError::Protocol("the probe package was not extracted".into())
            })?;
            gpuprobe_runner::worker_command(&python.executable, package, plan_path)
        }
        Backend::Native => {
            let program = config.native_program.clone().ok_or_else(|| {
                RunnerError::Protocol("the gpuprobe executable could not be located".into())
            })?;
            WorkerCommand {
                program,
                args: vec![
                    "__native-worker".into(),
                    "--plan".into(),
                    plan_path.as_os_str().to_owned(),
                ],
                env: BTreeMap::new(),
                remove_env: Vec::new(),
                waits_for_start: false,
            }
        }
    };
    let (env, unset) = config.settings.worker_env();
    command.env.extend(env);
    command.remove_env.extend(unset);
    Ok(command)
}

/// Turns a raw result into a judged, recordable one.
pub fn to_result(spec: &ProbeSpec, raw: RawResult, config: &EngineConfig) -> ProbeResult {
    let mut stderr_tail = raw.output_tail;
    let (verdict, observation) = match raw.outcome {
        RawOutcome::Observed(observation) => (judge(spec, &observation), Some(*observation)),
        RawOutcome::Skip(reason) => (Verdict::Skip { reason }, None),
        RawOutcome::Error {
            error_type,
            message,
            traceback,
        } => {
            if let Some(tb) = traceback {
                let lines: Vec<&str> = tb.lines().collect();
                stderr_tail = lines[lines.len().saturating_sub(15)..]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
            }
            (
                Verdict::Error {
                    message: format!("{error_type}: {message}"),
                },
                None,
            )
        }
        RawOutcome::Crash {
            signal,
            exit_code,
            message,
        } => (
            Verdict::Crash {
                signal,
                exit_code,
                message,
            },
            None,
        ),
        RawOutcome::Hang { timeout_s } => (Verdict::Hang { timeout_s }, None),
        RawOutcome::NotTested(reason) => (Verdict::NotTested { reason }, None),
    };
    ProbeResult {
        probe: raw.probe,
        device: raw.device,
        layer: spec.layer,
        verdict,
        observation,
        elapsed_s: raw.elapsed_s,
        stderr_tail,
        kernel_log: raw.kernel_log,
        settings: config.settings.describe(),
        simulated: config.simulate.is_some(),
        report_group: spec.report_group.clone(),
    }
}

/// The `needs` marker of probes that run only when `--only` names them: deliberate faults
/// (an illegal memory access, a kernel that never ends) that prove the isolation, and that
/// must never run as part of a tier.
pub const EXPLICIT_ONLY: &str = "explicit";

/// Probe selection from a catalogue: by tier and by `--only` patterns (globs over probe
/// ids, `*` matching any run of characters). A pattern without `*` that is the full id of a
/// catalogued probe names that probe alone (so `check --only <id>` re-runs exactly it; add
/// `.*` for the variants below it); any other pattern without `*` matches ids that start
/// with it followed by a dot (`copy`, `copy.h2d`). Probes marked [`EXPLICIT_ONLY`] are
/// selected only by an `--only` pattern, whatever the tier.
pub fn select(catalog: &[ProbeSpec], tier: Tier, only: &[String]) -> Vec<ProbeSpec> {
    let is_probe_id = |pattern: &str| catalog.iter().any(|spec| spec.id.as_str() == pattern);
    let patterns: Vec<(&str, bool)> = only
        .iter()
        .map(|pattern| (pattern.as_str(), is_probe_id(pattern)))
        .collect();
    let named = |spec: &ProbeSpec| {
        let id = spec.id.as_str();
        patterns.iter().any(|(pattern, exact)| {
            if *exact {
                id == *pattern
            } else {
                id_matches(pattern, id)
            }
        })
    };
    catalog
        .iter()
        .filter(|spec| {
            if spec.needs.iter().any(|n| n == EXPLICIT_ONLY) {
                named(spec)
            } else {
                tier.includes(spec.tier) && (only.is_empty() || named(spec))
            }
        })
        .cloned()
        .collect()
}

/// The `--only` patterns that select nothing in `tier`, each with the first tier (in the
/// order standard, full, soak) where it would select something, or `None` when no probe of
/// the catalogue matches it at all.
pub fn unmatched_patterns(
    catalog: &[ProbeSpec],
    tier: Tier,
    only: &[String],
) -> Vec<(String, Option<Tier>)> {
    only.iter()
        .filter(|pattern| select(catalog, tier, std::slice::from_ref(pattern)).is_empty())
        .map(|pattern| {
            let elsewhere = [Tier::Standard, Tier::Full, Tier::Soak]
                .into_iter()
                .find(|other| !select(catalog, *other, std::slice::from_ref(pattern)).is_empty());
            (pattern.clone(), elsewhere)
        })
        .collect()
}

/// Whether a probe id matches a selection pattern: a pattern with `*` is a glob
/// ([`gpuprobe_kb::wildcard_matches`], where `?` is one character too); any other
/// (a `?` alone included) names an id or a prefix ending at a dot.
pub fn id_matches(pattern: &str, id: &str) -> bool {
    if pattern.contains('*') {
        gpuprobe_kb::wildcard_matches(pattern, id)
    } else {
        id == pattern
            || id
                .strip_prefix(pattern)
                .is_some_and(|rest| pattern.ends_with('.') || rest.starts_with('.'))
    }
}

/// The plan's tasks not yet in `done`, grouped into lanes and cut to `budget`
/// ([`sized_lanes`]).
pub fn remaining_lanes(plan: &RunPlan, done: &[ProbeResult], budget: LaneBudget) -> Vec<Lane> {
    let finished: std::collections::HashSet<(ProbeId, DeviceRef)> =
        done.iter().map(|r| (r.probe.clone(), r.device)).collect();
    let tasks: Vec<Task> = plan
        .tasks
        .iter()
        .filter(|t| !finished.contains(&(t.spec.id.clone(), t.device)))
        .cloned()
        .collect();
    sized_lanes(tasks, budget)
}

pub use crate::lanes::{LaneBudget, lanes_for, sized_lanes};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::spec;

    #[test]
    fn the_thread_budget_is_a_whole_number_in_the_file_the_plans_name() {
        let temp = tempfile::tempdir().unwrap();
        let run_dir = RunDir::create(&temp.path().join("run")).unwrap();
        write_thread_budget(&run_dir, 6).unwrap();
        write_thread_budget(&run_dir, 8).unwrap();
        let path = thread_budget_path(&run_dir);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "8\n");
        assert!(
            !path.with_extension("new").exists(),
            "nothing staged is left"
        );
        // A budget that cannot be written is an error the engine logs, not a panic.
        let gone = RunDir::create(&temp.path().join("gone")).unwrap();
        std::fs::remove_dir_all(temp.path().join("gone")).unwrap();
        assert!(write_thread_budget(&gone, 4).is_err());
    }

    #[test]
    fn deliberate_faults_run_only_when_named() {
        let spec = |id: &str, tier: Tier, needs: &[&str]| ProbeSpec {
            tier,
            needs: needs.iter().map(|s| s.to_string()).collect(),
            ..spec(id)
        };
        let catalog = vec![
            spec("copy.a", Tier::Quick, &[]),
            spec("fault.spin", Tier::Quick, &[EXPLICIT_ONLY]),
        ];
        let ids =
            |selected: Vec<ProbeSpec>| selected.into_iter().map(|s| s.id.0).collect::<Vec<_>>();
        assert_eq!(ids(select(&catalog, Tier::Full, &[])), ["copy.a"]);
        assert_eq!(
            ids(select(&catalog, Tier::Quick, &["fault".into()])),
            ["fault.spin"]
        );
        assert_eq!(
            ids(select(&catalog, Tier::Quick, &["*".into()])),
            ["copy.a", "fault.spin"]
        );
    }

    #[test]
    fn patterns_that_select_nothing_say_where_their_probes_are() {
        let spec = |id: &str, tier: Tier| ProbeSpec {
            tier,
            backend: Backend::Native,
            ..spec(id)
        };
        let catalog = vec![
            spec("native.copy.small", Tier::Quick),
            spec("native.copy.huge", Tier::Full),
            spec("native.memtest.full", Tier::Soak),
        ];
        let only: Vec<String> = [
            "native.copy",
            "native.memtest.full",
            "native.copy.huge",
            "nope",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            unmatched_patterns(&catalog, Tier::Quick, &only),
            [
                ("native.memtest.full".to_string(), Some(Tier::Soak)),
                ("native.copy.huge".to_string(), Some(Tier::Full)),
                ("nope".to_string(), None),
            ]
        );
        assert_eq!(
            unmatched_patterns(&catalog, Tier::Full, &only),
            [
                ("native.memtest.full".to_string(), Some(Tier::Soak)),
                ("nope".to_string(), None),
            ]
        );
    }

    #[test]
    fn a_full_probe_id_names_that_probe_alone() {
        let catalog = vec![
            spec("copy.h2d.medium"),
            spec("copy.h2d.medium.fp16"),
            spec("copy.h2d.small.fp16"),
        ];
        let ids = |only: &[&str]| {
            let only: Vec<String> = only.iter().map(|s| s.to_string()).collect();
            select(&catalog, Tier::Quick, &only)
                .into_iter()
                .map(|s| s.id.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&["copy.h2d.medium"]), ["copy.h2d.medium"]);
        assert_eq!(
            ids(&["copy.h2d.medium.*"]),
            ["copy.h2d.medium.fp16"],
            "variants by glob"
        );
        assert_eq!(
            ids(&["copy.h2d"]),
            [
                "copy.h2d.medium",
                "copy.h2d.medium.fp16",
                "copy.h2d.small.fp16"
            ],
            "a prefix that is no probe id still selects everything below it"
        );
        assert_eq!(ids(&["copy.h2d.small"]), ["copy.h2d.small.fp16"]);
    }

    #[test]
    fn selection_patterns() {
        assert!(id_matches("copy", "copy.h2d.pinned"));
        assert!(!id_matches("copy", "copying.x"));
        assert!(id_matches("rng.rand.", "rng.rand.fp32"));
        assert!(!id_matches("rng.rand.", "rng.randn.fp32"));
        assert!(id_matches("copy.*.pinned*", "copy.h2d.pinned.tiny"));
        assert!(id_matches("*bf16*", "dtype.bf16.fp32.to.device"));
        assert!(!id_matches("rng.*", "copy.h2d"));
        // `?` is a wildcard only in a pattern with `*`.
        assert!(id_matches("dist.p2p.?-?*", "dist.p2p.0-1"));
        assert!(!id_matches("dist.p2p.?-?", "dist.p2p.0-1"));
        assert!(id_matches(
            "dtype.bf16.fp32.to.device",
            "dtype.bf16.fp32.to.device"
        ));
    }
}
