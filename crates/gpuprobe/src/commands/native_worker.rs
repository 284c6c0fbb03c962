//! `gpuprobe __native-worker`: the binary re-executed as a worker for native probes. It
//! speaks the same protocol as the Python worker, on descriptor 3.

use gpuprobe_model::ExitStatus;
use gpuprobe_model::WorkerPlan;

use crate::cli::NativeWorkerArgs;
use crate::errors::{Internal, Result};

/// Runs the worker.
pub(super) fn run(args: NativeWorkerArgs) -> Result<ExitStatus> {
    // A worker must never outlive its supervisor (a hung driver call would otherwise keep
    // the GPU busy after gpuprobe was killed).
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let text = std::fs::read_to_string(&args.plan)
        .internal()
        .map_err(|e| e.context(format!("cannot read {}", args.plan.display())))?;
    let plan: WorkerPlan = serde_json::from_str(&text)
        .internal()
        .map_err(|e| e.context(format!("{} is not a worker plan", args.plan.display())))?;
    let mut events = gpuprobe_gpu::open_event_fd()
        .internal()
        .map_err(|e| e.context("descriptor 3 is not open for events".to_string()))?;
    gpuprobe_gpu::run_worker(&plan, &mut |event| {
        let _ = gpuprobe_gpu::write_event(&mut events, event);
    });
    Ok(ExitStatus::AllPassed)
}
