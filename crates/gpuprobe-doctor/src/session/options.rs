//! A session's options and devices: what `check` and `fix` were asked to run (tier,
//! `--device`, patterns, interpreter, limits), checked before any work, the supervisor
//! limits they give, and the devices planned before a worker has counted the GPUs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuprobe_detect::Root;
use gpuprobe_model::Task;
use gpuprobe_model::{Backend, DeviceRef, ProbeSpec, Tier};
use gpuprobe_runner::{Cancel, PythonChoice, SupervisorConfig};

use super::SessionError;

/// Which devices the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceRequest {
    /// Every GPU the framework sees.
    All,
    /// These devices.
    Listed(Vec<DeviceRef>),
}

/// Parses `--device`: `all`, `cpu`, or GPU indices.
pub(super) fn parse_devices(text: &str) -> Result<DeviceRequest, SessionError> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(DeviceRequest::All);
    }
    let mut devices = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let device = DeviceRef::parse(part).ok_or_else(|| SessionError::BadDevice {
            part: part.to_string(),
        })?;
        if !devices.contains(&device) {
            devices.push(device);
        }
    }
    if devices.is_empty() {
        return Err(SessionError::NoDevice);
    }
    Ok(DeviceRequest::Listed(devices))
}

/// What a new session runs (the options `check` and `fix` share).
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The command recorded in the plan and report (`check`, `fix`).
    pub command: &'static str,
    /// Tier.
    pub tier: Tier,
    /// `--device`.
    pub device: String,
    /// `--only` patterns.
    pub only: Vec<String>,
    /// `--python`.
    pub python: Option<PathBuf>,
    /// `--simulate`.
    pub simulate: Option<String>,
    /// Where the run directory goes (the caller names a fresh one when the user did not).
    pub run_dir: PathBuf,
    /// Skip native probes.
    pub no_native: bool,
    /// With `--device all`: run each sweep and width probe on one GPU of identical ones
    /// (`super::spread`); off (`check --no-spread`), every GPU runs every probe.
    pub spread: bool,
    /// Timeout multiplier.
    pub timeout_scale: f64,
    /// Worker start-up limit, seconds.
    pub startup_timeout: f64,
    /// Seed.
    pub seed: u64,
    /// Options for the probes themselves (`soak_seconds`), recorded in the plan so a
    /// resumed run uses them too.
    pub probe_options: BTreeMap<String, serde_json::Value>,
}

impl SessionOptions {
    /// Rejects option values no session can run with.
    pub fn validate(&self) -> Result<(), SessionError> {
        if !(self.timeout_scale > 0.0 && self.timeout_scale.is_finite()) {
            return Err(SessionError::TimeoutScale);
        }
        Ok(())
    }
}

/// Supervisor limits for a session, logging into `log_dir`, stopped when `cancel` is
/// cancelled.
pub(crate) fn supervisor_config(
    timeout_scale: f64,
    startup_timeout: f64,
    log_dir: PathBuf,
    cancel: &Cancel,
) -> SupervisorConfig {
    SupervisorConfig {
        // The command line holds it to 1..=3600 s (cli::ranges): nothing is clamped here.
        startup_timeout: Duration::from_secs_f64(startup_timeout),
        between_probes_timeout: Duration::from_secs(120),
        timeout_scale,
        log_dir: Some(log_dir),
        // The host's flag: every session's workers stop on Ctrl-C once the binary has
        // installed its signal handling.
        cancel: cancel.clone(),
        ..SupervisorConfig::default()
    }
}

/// Refuses an interpreter named with `--python` that is no interpreter at all (missing, not
/// executable, not a Python): a usage error, found before any work. Returns the choice.
pub fn validate_python(
    explicit: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Result<Option<PythonChoice>, SessionError> {
    Ok(explicit
        .map(|path| gpuprobe_runner::validate_explicit(path, env))
        .transpose()?)
}

/// The devices to plan before any worker has reported: the listed ones, or GPU 0 (the
/// worker's hello then says how many GPUs there are). With simulation on a machine
/// without a GPU, the CPU is the device under test.
pub(crate) fn initial_devices(
    request: &DeviceRequest,
    simulate: bool,
    notes: &mut Vec<String>,
) -> Vec<DeviceRef> {
    match request {
        DeviceRequest::Listed(list) => list.clone(),
        DeviceRequest::All => {
            if simulate && !gpu_present() {
                notes.push(
                    "no GPU on this machine: simulating on the CPU as the device under test".into(),
                );
                vec![DeviceRef::Cpu]
            } else {
                vec![DeviceRef::Gpu(0)]
            }
        }
    }
}

/// Whether this machine shows any AMD or NVIDIA GPU (device nodes, or PCI GPUs), without
/// loading any GPU library.
pub(super) fn gpu_present() -> bool {
    let root = Root::live();
    gpuprobe_detect::gpu_device_nodes_present(&root)
        || gpuprobe_detect::compute_gpu_count(&root) > 0
}

/// About how many GPUs the framework will see, before it is asked: the AMD and NVIDIA GPUs
/// on the PCI bus, or fewer when a `*_VISIBLE_DEVICES` variable lists fewer. Only sizes the
/// workers' CPU thread budgets, so an integrated GPU counted too costs little.
pub(crate) fn gpu_count_hint() -> usize {
    let visible: Vec<String> = gpuprobe_model::env_vars::GPU_VISIBILITY_LISTS
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .collect();
    device_count_hint(gpuprobe_detect::compute_gpu_count(&Root::live()), &visible)
}

/// `pci` GPUs, or fewer when a visibility list names fewer; at least 1.
fn device_count_hint(pci: usize, visible_lists: &[String]) -> usize {
    visible_lists
        .iter()
        .map(|list| list.split(',').filter(|d| !d.trim().is_empty()).count())
        .fold(pci, usize::min)
        .max(1)
}

/// Native probes test a GPU runtime: they do not apply to the CPU as device under test.
pub(crate) fn applies_to(spec: &ProbeSpec, device: DeviceRef) -> bool {
    !(spec.backend == Backend::Native && device == DeviceRef::Cpu)
}

/// Each selected probe on each device it applies to, device by device.
pub(crate) fn tasks_on(devices: &[DeviceRef], selected: &[ProbeSpec]) -> Vec<Task> {
    devices
        .iter()
        .flat_map(|device| {
            selected
                .iter()
                .filter(move |spec| applies_to(spec, *device))
                .map(move |spec| Task {
                    spec: spec.clone(),
                    device: *device,
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_count_hint_follows_the_visibility_lists() {
        assert_eq!(device_count_hint(8, &[]), 8);
        assert_eq!(device_count_hint(8, &["0,1".into()]), 2);
        assert_eq!(device_count_hint(8, &["0,1,2".into(), "3".into()]), 1);
        assert_eq!(
            device_count_hint(2, &["0,1,2,3".into()]),
            2,
            "the bus has 2"
        );
        assert_eq!(device_count_hint(0, &[]), 1);
        assert_eq!(device_count_hint(4, &["".into()]), 1, "none visible");
    }

    #[test]
    fn device_lists() {
        assert_eq!(parse_devices("all").unwrap(), DeviceRequest::All);
        assert_eq!(
            parse_devices("0,2,0").unwrap(),
            DeviceRequest::Listed(vec![DeviceRef::Gpu(0), DeviceRef::Gpu(2)])
        );
        assert_eq!(
            parse_devices("cpu").unwrap(),
            DeviceRequest::Listed(vec![DeviceRef::Cpu])
        );
        assert!(parse_devices("gpu").is_err());
    }
}
