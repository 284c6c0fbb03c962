//! What the engine tests share: a scripted worker that speaks the protocol, probe tasks, and
//! an engine configuration that runs them.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuprobe_doctor::{EngineConfig, Execution};
use gpuprobe_model::Settings;
use gpuprobe_model::{Backend, DeviceRef, Layer, Placement, ProbeId, ProbeSpec, Rule, Tier};
use gpuprobe_runner::{KernelLogSource, PythonChoice, RunDir, SupervisorConfig, Task};

/// Writes an executable Python "worker" to `dir/worker.py`: it reads its plan (finding
/// `--plan` among any arguments, so it serves as the native program and as the "Python
/// interpreter"), defines `emit(event)` on the event descriptor, then runs `body`.
pub(crate) fn scripted_worker(dir: &Path, body: &str) -> PathBuf {
    let script = dir.join("worker.py");
    std::fs::write(
        &script,
        format!(
            r#"#!/usr/bin/env python3
import json, os, sys, time
plan = json.load(open(sys.argv[sys.argv.index("--plan") + 1]))
out = os.fdopen(3, "w", buffering=1)
def emit(event): out.write(json.dumps(event) + "\n")
{body}"#
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// A 30-second probe of `backend` on GPU 0.
pub(crate) fn task_on(id: &str, placement: Placement, backend: Backend) -> Task {
    Task {
        spec: ProbeSpec {
            id: ProbeId::new(id),
            tier: Tier::Quick,
            layer: Layer::Runtime,
            rule: Rule::Measure,
            backend,
            timeout_s: 30.0,
            description: String::new(),
            needs: vec![],
            isolated: false,
            placement,
            lane: None,
            typical_s: None,
            native_counterpart: None,
            report_group: None,
        },
        device: DeviceRef::Gpu(0),
    }
}

/// The engine configuration that runs `worker` for both backends, with `settings`, logging
/// under `dir`, without watching a kernel log.
pub(crate) fn config(dir: &Path, worker: &Path, settings: Settings) -> EngineConfig {
    EngineConfig {
        python: Some(PythonChoice {
            executable: worker.to_path_buf(),
            chosen_by: "test".into(),
        }),
        package_dir: Some(dir.to_path_buf()),
        native_program: Some(worker.to_path_buf()),
        seed: 1,
        simulate: None,
        settings,
        supervisor: SupervisorConfig {
            startup_timeout: Duration::from_secs(30),
            between_probes_timeout: Duration::from_secs(30),
            timeout_scale: 1.0,
            log_dir: Some(dir.join("logs")),
            ..SupervisorConfig::default()
        },
        options: BTreeMap::new(),
        expected_devices: 1,
        kernel_log: KernelLogSource::Off,
    }
}

/// Runs `tasks` grouped into lanes with `config`, recording under `dir/run`.
pub(crate) fn execute_with(dir: &Path, config: &EngineConfig, tasks: Vec<Task>) -> Execution {
    let run_dir = RunDir::create(&dir.join("run")).unwrap();
    gpuprobe_doctor::execute(
        gpuprobe_doctor::lanes_for(tasks),
        config,
        &run_dir,
        &mut |_, _, _| Vec::new(),
        &mut |_| {},
    )
}
