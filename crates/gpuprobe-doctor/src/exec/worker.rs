//! Starting one lane's workers: the plan file each worker reads, the command that starts
//! it, the zygote Python workers are forked from, and the CPU thread budget they follow.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpuprobe_model::{Backend, DeviceRef, PROTOCOL_VERSION, WorkerMode, WorkerPlan};
use gpuprobe_runner::{
    KernelLogSource, RunDir, RunnerError, Task, WorkerCommand, Zygote, supervise,
};

use super::schedule::Launch;
use super::{EngineConfig, LaneMessage, THREADS_VARIABLE};
use crate::plan::Lane;

/// Supervises one launched lane to its end, sending its events and then `LaneDone`.
pub(super) fn run_lane(
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
pub(super) fn start_zygote(
    lanes: &[Lane],
    config: &EngineConfig,
) -> Option<Result<Zygote, String>> {
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
pub(super) fn thread_budget_path(run_dir: &RunDir) -> std::path::PathBuf {
    run_dir.workers_dir().join("threads")
}

/// Publishes `threads` as the budget every Python worker on a GPU applies before its next
/// probe: written beside and renamed into place, so a worker reads a whole number or the
/// last one. Lanes end at different times (on the H200 the standard tier's ten Python lanes
/// over 3.5 s), and the last ones, whose probes' host side (references, inputs) runs on the
/// threads they started with, would otherwise leave the cores the finished lanes freed idle:
/// the `ops` probes took 8.9 probe-seconds with 2 threads and 5.6 with 8.
pub(super) fn write_thread_budget(run_dir: &RunDir, threads: usize) -> std::io::Result<()> {
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
pub(super) fn worker_command(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
