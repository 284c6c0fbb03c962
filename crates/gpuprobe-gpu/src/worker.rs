//! The native worker: `gpuprobe __native-worker --plan <plan.json>` runs [`run_worker`] and
//! streams the same JSON-lines protocol as the Python worker (hello, catalog, begin, result,
//! log, done) on file descriptor 3.
//!
//! Plan options read here (all optional): `runtime` (`auto`, `cuda`, `hip`), `cuda_lib`,
//! `nvrtc_lib`, `hip_lib`, `hiprtc_lib` (explicit library files), `torch_lib_dir`,
//! `site_packages` (list), `kernel_source` (`embedded` or `nvrtc`, CUDA only); the memtest
//! options are listed at [`crate::memtest::MemtestOptions::apply`].

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use gpuprobe_model::{DeviceRef, ProbeId};
use gpuprobe_model::{EVENT_FD, Outcome, PROTOCOL_VERSION, WorkerEvent, WorkerMode, WorkerPlan};
use serde_json::Value;

use crate::backend::DeviceRuntime;
use crate::error::GpuError;
use crate::kernels::{CudaKernelSource, KernelSet, LaunchShape};
use crate::loader::{LibraryKind, SearchConfig};
use crate::probes::{ProbeEnv, error_outcome, native_catalog, run_probe};
use crate::runtime::{NativeEnv, RuntimePreference, Runtimes, discover};

/// Prefix of the `log` event that carries the [`NativeEnv`] summary as JSON.
pub(crate) const NATIVE_ENV_LOG_PREFIX: &str = "native-env ";

/// Reads the [`NativeEnv`] back from a `log` event message written by the env mode.
pub fn parse_native_env_log(message: &str) -> Option<NativeEnv> {
    serde_json::from_str(message.strip_prefix(NATIVE_ENV_LOG_PREFIX)?).ok()
}

/// The library search a plan asks for: this process's environment, overridden by the plan's
/// options.
pub(crate) fn search_config(plan: &WorkerPlan) -> SearchConfig {
    let mut cfg = SearchConfig::from_process_env();
    let text = |key: &str| {
        plan.options
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    for (key, kind) in [
        ("cuda_lib", LibraryKind::CudaDriver),
        ("nvrtc_lib", LibraryKind::Nvrtc),
        ("hip_lib", LibraryKind::HipRuntime),
        ("hiprtc_lib", LibraryKind::Hiprtc),
    ] {
        if let Some(path) = text(key) {
            cfg.overrides.insert(kind, PathBuf::from(path));
        }
    }
    cfg.torch_lib_dir = text("torch_lib_dir").map(PathBuf::from);
    if let Some(list) = plan.options.get("site_packages").and_then(Value::as_array) {
        cfg.site_packages = list
            .iter()
            .filter_map(Value::as_str)
            .map(PathBuf::from)
            .collect();
    }
    cfg
}

fn preference(plan: &WorkerPlan) -> RuntimePreference {
    match plan.options.get("runtime").and_then(Value::as_str) {
        Some("cuda") => RuntimePreference::Cuda,
        Some("hip") => RuntimePreference::Hip,
        _ => RuntimePreference::Auto,
    }
}

fn hello(unusable: Option<String>, packages: BTreeMap<String, String>) -> WorkerEvent {
    WorkerEvent::Hello {
        protocol: PROTOCOL_VERSION,
        pid: std::process::id(),
        worker: "native".into(),
        executable: std::env::current_exe()
            .ok()
            .map(|p| p.display().to_string()),
        python_version: None,
        interpreter: None,
        torch: None,
        unusable,
        packages,
        conda: None,
        simulated: false,
    }
}

/// The flat `packages` entries of the hello event: one line per library and device.
pub(crate) fn env_packages(env: &NativeEnv) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("native.cuda".into(), env.cuda.summary());
    out.insert("native.nvrtc".into(), env.cuda.compiler.summary());
    out.insert("native.hip".into(), env.hip.summary());
    out.insert("native.hiprtc".into(), env.hip.compiler.summary());
    for (runtime, report) in [("cuda", &env.cuda), ("hip", &env.hip)] {
        for device in &report.devices {
            out.insert(
                format!("native.{runtime}.device.{}", device.ordinal),
                format!(
                    "{} · {} · {:.1} GiB · {}",
                    device.name,
                    device.arch,
                    device.total_memory as f64 / (1u64 << 30) as f64,
                    device.pci_bus_id.as_deref().unwrap_or("no PCI id")
                ),
            );
        }
    }
    out
}

/// Runs a plan, calling `emit` for every event in protocol order. Never panics on bad
/// input or missing runtimes: those become the hello's `unusable`, skips or error outcomes.
pub fn run_worker(plan: &WorkerPlan, emit: &mut dyn FnMut(&WorkerEvent)) {
    if plan.protocol != PROTOCOL_VERSION {
        emit(&hello(
            Some(format!(
                "plan protocol {} not supported (this worker speaks {PROTOCOL_VERSION})",
                plan.protocol
            )),
            BTreeMap::new(),
        ));
        emit(&WorkerEvent::Done);
        return;
    }
    match plan.mode {
        WorkerMode::Catalog => {
            emit(&hello(None, BTreeMap::new()));
            emit(&WorkerEvent::Catalog {
                probes: native_catalog(),
                devices: None,
            });
        }
        WorkerMode::Env => {
            let runtimes = discover(&search_config(plan), preference(plan));
            emit(&hello(
                runtimes.env.unusable_reason(),
                env_packages(&runtimes.env),
            ));
            if let Ok(json) = serde_json::to_string(&runtimes.env) {
                emit(&WorkerEvent::Log {
                    level: "info".into(),
                    message: format!("{NATIVE_ENV_LOG_PREFIX}{json}"),
                });
            }
        }
        WorkerMode::Run => run_plan(plan, emit),
    }
    emit(&WorkerEvent::Done);
}

fn run_plan(plan: &WorkerPlan, emit: &mut dyn FnMut(&WorkerEvent)) {
    let runtimes = discover(&search_config(plan), preference(plan));
    let unusable = runtimes.env.unusable_reason();
    emit(&hello(unusable.clone(), env_packages(&runtimes.env)));
    let device = plan.device.unwrap_or(DeviceRef::Gpu(0));
    let skip_all = |reason: String, emit: &mut dyn FnMut(&WorkerEvent)| {
        for probe in &plan.probes {
            emit(&WorkerEvent::Begin {
                probe: probe.clone(),
                device,
            });
            emit(&WorkerEvent::Result {
                probe: probe.clone(),
                device,
                outcome: Outcome::Skip {
                    reason: reason.clone(),
                },
                elapsed_s: Some(0.0),
            });
        }
    };
    let DeviceRef::Gpu(ordinal) = device else {
        skip_all("native probes need a GPU device".into(), emit);
        return;
    };
    if let Some(reason) = unusable {
        skip_all(reason, emit);
        return;
    }
    // Started ahead of its turn: wait before creating a context, so that nothing is
    // allocated on the device while other lanes still use it.
    if plan.wait_for_start && !start_line_arrived(std::io::stdin().lock()) {
        return;
    }
    let backend = match runtimes.open(ordinal) {
        Ok(backend) => backend,
        Err(
            error @ (GpuError::DeviceOutOfRange { .. }
            | GpuError::NoDevice { .. }
            | GpuError::Load(_)),
        ) => {
            skip_all(error.to_string(), emit);
            return;
        }
        Err(error) => {
            // Creating the context failed on a present device: a finding for every probe.
            for probe in &plan.probes {
                emit(&WorkerEvent::Begin {
                    probe: probe.clone(),
                    device,
                });
                emit(&WorkerEvent::Result {
                    probe: probe.clone(),
                    device,
                    outcome: error_outcome(&error),
                    elapsed_s: Some(0.0),
                });
            }
            return;
        }
    };
    run_probes(plan, &runtimes, backend.as_ref(), device, emit);
}

/// Reads the supervisor's start line; false at end of input (the supervisor is gone) or on
/// anything else, and the worker then exits without running a probe.
fn start_line_arrived(mut input: impl std::io::BufRead) -> bool {
    let mut line = String::new();
    matches!(input.read_line(&mut line), Ok(n) if n > 0)
        && line.trim_end() == gpuprobe_model::START_LINE
}

fn run_probes(
    plan: &WorkerPlan,
    runtimes: &Runtimes,
    backend: &dyn DeviceRuntime,
    device: DeviceRef,
    emit: &mut dyn FnMut(&WorkerEvent),
) {
    let compilers = runtimes.compilers();
    let info = backend.device();
    let shape = LaunchShape::for_device(
        info.multiprocessors,
        info.max_threads_per_multiprocessor,
        256,
        1,
    );
    let source = match plan.options.get("kernel_source").and_then(Value::as_str) {
        Some("nvrtc") => CudaKernelSource::Nvrtc,
        _ => CudaKernelSource::Embedded,
    };
    let mut kernels = KernelSet::load(backend, &compilers, source, shape);
    if let Err(error) = &kernels {
        emit(&WorkerEvent::Log {
            level: "warn".into(),
            message: format!("kernel module could not be loaded: {error}"),
        });
    }
    let env = ProbeEnv {
        backend,
        compilers: &compilers,
        native_env: &runtimes.env,
        device,
        seed: plan.seed,
        options: &plan.options,
    };
    for probe in &plan.probes {
        emit(&WorkerEvent::Begin {
            probe: probe.clone(),
            device,
        });
        let started = Instant::now();
        let outcome = run_guarded(&env, &mut kernels, probe, emit);
        emit(&WorkerEvent::Result {
            probe: probe.clone(),
            device,
            outcome,
            elapsed_s: Some(started.elapsed().as_secs_f64()),
        });
    }
}

fn run_guarded(
    env: &ProbeEnv<'_>,
    kernels: &mut crate::error::GpuResult<KernelSet<'_>>,
    probe: &ProbeId,
    emit: &mut dyn FnMut(&WorkerEvent),
) -> Outcome {
    let mut log = |message: &str| {
        emit(&WorkerEvent::Log {
            level: "info".into(),
            message: format!("{probe}: {message}"),
        })
    };
    // A bug in a probe body must not take the other probes down with it.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_probe(env, kernels, probe.as_str(), &mut log)
    }));
    caught.unwrap_or_else(|panic| Outcome::Error {
        error_type: "Panic".into(),
        message: panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "probe panicked".into()),
        traceback: None,
    })
}

/// Opens the event descriptor (fd 3) for writing. Uses `/proc/self/fd/3`, which reopens a
/// pipe or file without taking over the descriptor; sockets cannot be reopened that way and
/// are adopted directly.
pub fn open_event_fd() -> std::io::Result<std::fs::File> {
    let path = format!("/proc/self/fd/{EVENT_FD}");
    match std::fs::OpenOptions::new().append(true).open(&path) {
        Ok(file) => Ok(file),
        Err(error) => {
            // ENXIO: a socket. Adopt the descriptor if it exists.
            if std::fs::symlink_metadata(&path).is_err() {
                return Err(error);
            }
            adopt_event_fd()
        }
    }
}

fn adopt_event_fd() -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    static TAKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if TAKEN.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return Err(std::io::Error::other(
            "the event descriptor was already adopted",
        ));
    }
    // SAFETY: fd 3 exists (checked through /proc by the caller) and is handed to the worker
    // by its parent for exactly this use; the flag above makes sure it is owned once.
    Ok(unsafe { std::fs::File::from_raw_fd(EVENT_FD) })
}

/// Writes one event as a JSON line and flushes it.
pub fn write_event(out: &mut impl Write, event: &WorkerEvent) -> std::io::Result<()> {
    let mut line = serde_json::to_string(event).map_err(std::io::Error::other)?;
    line.push('\n');
    out.write_all(line.as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(mode: WorkerMode) -> WorkerPlan {
        WorkerPlan {
            protocol: PROTOCOL_VERSION,
            mode,
            device: None,
            probes: vec![],
            seed: 1,
            simulate: None,
            options: BTreeMap::new(),
            wait_for_start: false,
            thread_budget: None,
        }
    }

    #[test]
    fn only_the_start_line_starts_a_waiting_worker() {
        assert!(start_line_arrived(&b"start\n"[..]));
        assert!(start_line_arrived(&b"start"[..]));
        assert!(!start_line_arrived(&b""[..]));
        assert!(!start_line_arrived(&b"stop\n"[..]));
    }

    #[test]
    fn catalog_mode_emits_hello_catalog_done() {
        let mut events = Vec::new();
        run_worker(&plan(WorkerMode::Catalog), &mut |e| events.push(e.clone()));
        assert!(
            matches!(&events[0], WorkerEvent::Hello { worker, unusable: None, .. } if worker == "native")
        );
        assert!(matches!(&events[1], WorkerEvent::Catalog { probes, .. } if !probes.is_empty()));
        assert_eq!(events.last(), Some(&WorkerEvent::Done));
    }

    #[test]
    fn wrong_protocol_is_refused_in_the_hello() {
        let mut p = plan(WorkerMode::Run);
        p.protocol = 99;
        let mut events = Vec::new();
        run_worker(&p, &mut |e| events.push(e.clone()));
        let WorkerEvent::Hello {
            unusable: Some(reason),
            ..
        } = &events[0]
        else {
            panic!("{events:?}");
        };
        assert!(reason.contains("99"));
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn events_are_json_lines() {
        let mut out = Vec::new();
        write_event(&mut out, &WorkerEvent::Done).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "{\"event\":\"done\"}\n");
    }

    #[test]
    fn plan_options_override_library_search() {
        let mut p = plan(WorkerMode::Env);
        p.options
            .insert("hip_lib".into(), Value::from("/x/libamdhip64.so.6"));
        p.options
            .insert("site_packages".into(), serde_json::json!(["/s1", "/s2"]));
        p.options.insert("runtime".into(), Value::from("hip"));
        let cfg = search_config(&p);
        assert_eq!(
            cfg.overrides.get(&LibraryKind::HipRuntime),
            Some(&PathBuf::from("/x/libamdhip64.so.6"))
        );
        assert_eq!(
            cfg.site_packages,
            vec![PathBuf::from("/s1"), PathBuf::from("/s2")]
        );
        assert_eq!(preference(&p), RuntimePreference::Hip);
    }
}
