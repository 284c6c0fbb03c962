//! Executing a prepared session: the machine's fingerprint gathered in the background,
//! what is left of the plan run through the engine (the other GPUs planned once GPU 0's
//! worker has counted them, unless the plan had them all: [`super::spread`]), progress told
//! to the caller's observer, then the report assembled ([`super::assemble`]).

use std::collections::BTreeMap;
use std::thread::JoinHandle;
use std::time::Instant;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::WorkerEvent;
use gpuprobe_model::{Backend, DeviceRef, ProbeId, ProbeSpec};
use gpuprobe_runner::{PLAN_FILE, Task};

use super::assemble::{self, Finished};
use super::interrupt::{Interrupted, Stopped};
use super::options::{DeviceRequest, applies_to};
use super::{Completed, Prepared, SessionError, SessionProgress};
use crate::exec;
use crate::plan::{self, Lane, LaneBudget};

/// Starts fingerprinting this machine in the background (tools, kernel log).
pub fn spawn_collector(env: &BTreeMap<String, String>) -> Collector {
    let fingerprint_env = env.clone();
    let fingerprint = std::thread::spawn(move || {
        gpuprobe_detect::collect(
            &gpuprobe_detect::Root::live(),
            &fingerprint_env,
            &gpuprobe_detect::CollectOptions::live(),
        )
    });
    // Beside the planning, so that the lanes can be sized when the probes start.
    let memory_env = env.clone();
    let gpu_headroom = std::thread::spawn(move || {
        gpuprobe_detect::gpu_headroom(
            &gpuprobe_detect::Root::live(),
            &memory_env,
            FREE_MEMORY_TIMEOUT,
        )
    });
    Collector {
        fingerprint,
        gpu_headroom,
    }
}

/// How long the free-memory query may take: past it the lanes are not cut (a slow
/// `nvidia-smi` must not delay every probe).
const FREE_MEMORY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// What is found out about the machine while a session plans and runs.
pub struct Collector {
    /// The fingerprint (tools, kernel log), joined after the probes.
    pub(crate) fingerprint: JoinHandle<Fingerprint>,
    /// The least free GPU memory, joined before the probes start (lane sizing).
    gpu_headroom: JoinHandle<gpuprobe_detect::GpuHeadroom>,
}

/// Runs what is left of the plan and builds the report (written to `report.json`).
pub fn execute(
    prepared: Prepared,
    verbose: bool,
    collector: Collector,
    progress: &mut dyn SessionProgress,
    started: Instant,
    started_at: &str,
) -> Result<Completed, SessionError> {
    let Prepared {
        run_dir,
        mut plan,
        config,
        catalog,
        device_request,
        mut notes,
        python,
    } = prepared;
    let cut = run_dir.repair_results().map_err(SessionError::RunDir)?;
    let (previous, torn) = run_dir.load_results().map_err(SessionError::RunDir)?;
    let torn = torn + usize::from(cut);
    if torn > 0 {
        notes.push(format!(
            "{torn} unreadable line(s) in results.jsonl were ignored (a run killed mid-write)"
        ));
    }
    let headroom = collector.gpu_headroom.join().unwrap_or_default();
    let budget = LaneBudget::for_host(
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        headroom.least_free,
        headroom.kernel_cache_empty,
    );
    if budget.first_use && budget.lanes > 0 {
        notes.push(
            "the GPU driver's kernel cache is empty (this machine's first run): the probes that compile kernels at first use were spread over more lanes".to_string(),
        );
    }
    let lanes = plan::remaining_lanes(&plan, &previous, budget);
    let mut stack = run_dir.read_stack().unwrap_or_default();
    progress.started(&format!("{} tier", plan.tier.name()));
    // A resume's earlier results count as planned and finished, so that progress (and a
    // family's line in a log) counts them.
    let recorded: Vec<ProbeId> = previous.iter().map(|r| r.probe.clone()).collect();
    progress.update(&exec::Progress::Planned(&recorded));
    for result in &previous {
        progress.update(&exec::Progress::Finished(result));
    }

    let selected: Vec<ProbeSpec> = plan::select(&catalog, plan.tier, &plan.only);
    let mut planned_devices: Vec<DeviceRef> = plan.tasks.iter().map(|t| t.device).collect();
    planned_devices.dedup();
    let mut added_tasks: Vec<Task> = Vec::new();
    // A spread plan has every GPU already: adding one at hello would run its stack probes
    // twice.
    let planned_up_front = plan.spread.is_some();
    let mut expand = |backend: Backend, device: DeviceRef, hello: &WorkerEvent| -> Vec<Lane> {
        // The first torch a Python worker reports is the run's: a resume compares with it.
        if backend == Backend::Python
            && stack.torch.is_none()
            && let WorkerEvent::Hello {
                torch: Some(torch), ..
            } = hello
        {
            stack.torch = Some(torch.version.clone());
            let _ = run_dir.write_stack(&stack);
        }
        // Device 0's Python worker tells how many GPUs torch sees; plan the others.
        if device_request != DeviceRequest::All
            || planned_up_front
            || backend != Backend::Python
            || device != DeviceRef::Gpu(0)
        {
            return Vec::new();
        }
        let WorkerEvent::Hello {
            torch: Some(torch), ..
        } = hello
        else {
            return Vec::new();
        };
        let mut lanes = Vec::new();
        for info in torch.devices.iter().skip(1) {
            let device = DeviceRef::Gpu(info.index);
            if planned_devices.contains(&device) {
                continue;
            }
            planned_devices.push(device);
            let tasks: Vec<Task> = selected
                .iter()
                .filter(|spec| applies_to(spec, device))
                .map(|spec| Task {
                    spec: spec.clone(),
                    device,
                })
                .collect();
            added_tasks.extend(tasks.iter().cloned());
            lanes.extend(plan::sized_lanes(tasks, budget));
        }
        lanes
    };
    let probes_started = Instant::now();
    let mut execution = exec::execute(lanes, &config, &run_dir, &mut expand, &mut |event| {
        progress.update(&event)
    });
    let probes_ended = Instant::now();
    progress.finished();
    if !added_tasks.is_empty() {
        plan.tasks.extend(added_tasks);
        let _ = run_dir.write_json(PLAN_FILE, &plan);
    }
    if let Some(interrupted) = Interrupted::of(&config.supervisor.cancel, || Stopped::Session {
        command: plan.command.clone(),
        done: previous.len() + execution.results.len(),
        planned: plan.tasks.len(),
        run_dir: run_dir.path().to_path_buf(),
    }) {
        // The workers are stopped and every finished result is in the run directory; a
        // report of part of the plan would read as the whole, so none is made.
        return Err(SessionError::Interrupted(interrupted));
    }
    if config.supervisor.cancel.is_cancelled() {
        // Cancelled without a signal: the caller's time budget is spent (`check --health
        // --budget`). The report covers the whole plan, so what did not run is NOT-TESTED
        // (and counts against "at least half judged"); it is not recorded in the run
        // directory, so `check --resume` runs it.
        let not_run = budget_spent_results(&plan.tasks, &previous, &execution.results);
        execution.results.extend(not_run);
        notes.push("the time budget was spent: the probe runs left were not tested".to_string());
    }
    for err in &execution.write_errors {
        notes.push(format!("could not record a result: {err}"));
    }
    if let Some(reason) = &execution.kernel_log_unreadable {
        notes.push(format!(
            "the kernel log was not watched during the probes ({reason}): page faults and resets are not linked to the probes that ran when they were printed; run as root, or with kernel.dmesg_restrict=0, to link them"
        ));
    }
    if verbose {
        notes.extend(execution.logs.iter().cloned());
    }
    assemble::assemble(Finished {
        run_dir,
        plan,
        config,
        catalog,
        device_request,
        notes,
        python,
        previous,
        execution,
        fingerprint: collector.fingerprint,
        started,
        probes_started,
        probes_ended,
        started_at,
    })
}

/// The reason of a probe run the time budget left out.
pub(super) const BUDGET_SPENT: &str = "the time budget was spent before it ran";

/// A NOT-TESTED result for each task of `planned` that neither `previous` nor `finished`
/// holds a result for.
fn budget_spent_results(
    planned: &[Task],
    previous: &[gpuprobe_model::ProbeResult],
    finished: &[gpuprobe_model::ProbeResult],
) -> Vec<gpuprobe_model::ProbeResult> {
    let done: std::collections::BTreeSet<(&ProbeId, DeviceRef)> = previous
        .iter()
        .chain(finished)
        .map(|r| (&r.probe, r.device))
        .collect();
    planned
        .iter()
        .filter(|task| !done.contains(&(&task.spec.id, task.device)))
        .map(|task| gpuprobe_model::ProbeResult {
            report_group: task.spec.report_group.clone(),
            ..gpuprobe_model::ProbeResult::new(
                task.spec.id.clone(),
                task.device,
                task.spec.layer,
                gpuprobe_model::Verdict::NotTested {
                    reason: BUDGET_SPENT.to_string(),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use gpuprobe_model::Layer;
    use gpuprobe_model::{ProbeResult, Verdict};

    use super::*;
    use crate::test_support::spec;

    #[test]
    fn a_spent_budget_makes_what_did_not_run_not_tested_and_nothing_else() {
        let task = |id: &str, device| Task {
            spec: spec(id),
            device,
        };
        let planned = [
            task("copy.a", DeviceRef::Cpu),
            task("copy.b", DeviceRef::Cpu),
            task("copy.b", DeviceRef::Gpu(0)),
            task("copy.c", DeviceRef::Cpu),
        ];
        let done = |id: &str, device| {
            ProbeResult::new(ProbeId::new(id), device, Layer::Framework, Verdict::Pass)
        };
        let left = budget_spent_results(
            &planned,
            &[done("copy.a", DeviceRef::Cpu)],
            &[done("copy.b", DeviceRef::Cpu)],
        );
        let named: Vec<(String, DeviceRef)> = left
            .iter()
            .map(|r| (r.probe.to_string(), r.device))
            .collect();
        assert_eq!(
            named,
            [
                ("copy.b".to_string(), DeviceRef::Gpu(0)),
                ("copy.c".to_string(), DeviceRef::Cpu)
            ]
        );
        assert!(left.iter().all(|r| matches!(
            &r.verdict,
            Verdict::NotTested { reason } if reason == BUDGET_SPENT
        )));
    }
}
