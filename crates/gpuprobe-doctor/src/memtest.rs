//! `gpuprobe memtest` as the engine runs it: the native VRAM pattern probe alone, on one
//! device, in one supervised native worker, so a hung or crashing driver cannot take
//! gpuprobe down with it. The plan goes to the run directory like any check's; what the
//! result means is `gpuprobe_gpu::memtest`'s.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use gpuprobe_model::ProbeResult;
use gpuprobe_model::RunPlan;
use gpuprobe_model::{DeviceRef, ProbeSpec};
use gpuprobe_runner::{KernelLogSource, RunDir, RunnerError, SupervisorConfig, Task};

use crate::exec::{self, EngineConfig};
use crate::plan;
use gpuprobe_model::Settings;

/// One memtest: the probe, where and how long.
#[derive(Debug, Clone)]
pub struct MemtestRequest {
    /// The memtest probe from the native catalog.
    pub spec: ProbeSpec,
    /// The GPU it tests.
    pub device: u32,
    /// The probe's options (`fraction`, `passes`, `inject_error`).
    pub options: BTreeMap<String, serde_json::Value>,
    /// Passes over the memory: the probe's timeout covers one, so it is scaled by these.
    pub passes: u32,
    /// The executable that serves native probes (this one, re-executed).
    pub native_program: Option<PathBuf>,
    /// The version written into the plan.
    pub tool_version: String,
}

/// Runs the memtest in `run_dir` and returns its one result.
pub fn run(request: MemtestRequest, run_dir: &RunDir) -> Result<ProbeResult, RunnerError> {
    let device = DeviceRef::Gpu(request.device);
    run_dir.write_json(gpuprobe_runner::PLAN_FILE, &plan(&request, device))?;
    let config = engine_config(&request, run_dir);
    let lanes = plan::lanes_for(vec![Task {
        spec: request.spec,
        device,
    }]);
    let execution = exec::execute(
        lanes,
        &config,
        run_dir,
        &mut |_, _, _| Vec::new(),
        &mut |_| {},
    );
    execution
        .results
        .into_iter()
        .next()
        .ok_or_else(|| RunnerError::Protocol("the memtest produced no result".into()))
}

/// The plan written to the run directory: the memtest probe alone, natively, on `device`.
fn plan(request: &MemtestRequest, device: DeviceRef) -> RunPlan {
    let spec = &request.spec;
    RunPlan {
        tool_version: request.tool_version.clone(),
        command: "memtest".into(),
        tier: spec.tier,
        only: vec![spec.id.to_string()],
        devices: Some(vec![device]),
        python: None,
        python_chosen_by: None,
        native: true,
        seed: 0,
        simulate: None,
        settings: Settings::default(),
        options: request.options.clone(),
        tasks: vec![Task {
            spec: spec.clone(),
            device,
        }],
        started_at: gpuprobe_runner::rfc3339(SystemTime::now()),
        spread: None,
    }
}

/// The engine's settings: one native worker, its timeout scaled by the passes.
fn engine_config(request: &MemtestRequest, run_dir: &RunDir) -> EngineConfig {
    EngineConfig {
        python: None,
        package_dir: None,
        native_program: request.native_program.clone(),
        seed: 0,
        simulate: None,
        settings: Settings::default(),
        supervisor: SupervisorConfig {
            startup_timeout: Duration::from_secs(120),
            between_probes_timeout: Duration::from_secs(120),
            // The probe's own timeout covers a full pass at low bandwidth; more passes take longer.
            timeout_scale: f64::from(request.passes),
            log_dir: Some(run_dir.workers_dir()),
            ..SupervisorConfig::default()
        },
        options: request.options.clone(),
        expected_devices: 1,
        kernel_log: KernelLogSource::Live,
    }
}
