//! A probe session: the steps `check` and `fix` share. Find the interpreter, extract the
//! probe package, fetch the probe catalogue, plan the devices (GPU 0 plus the others its
//! worker reports, or the listed ones; the CPU under simulation without a GPU), run the
//! plan through the engine, and build the report with fingerprint, knowledge-base
//! matches, lint and diagnosis.
//!
//! A resumed run continues only under what it ran under (interpreter, torch, gpuprobe):
//! anything else is refused unless `--replan` asks to re-plan, which the report then says.
//! A signal stops the workers and leaves the run resumable ([`interrupt`]).

pub(crate) mod interrupt;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use gpuprobe_doctor::engine::{
    self, EngineConfig, Lane, LaneBudget, PlannedTask, RunPlan, Settings,
};
use gpuprobe_kb::KbMatch;
use gpuprobe_model::fingerprint::{Fingerprint, PythonEnv};
use gpuprobe_model::probe::{Backend, DeviceRef, ProbeSpec, Tier};
use gpuprobe_model::protocol::{SimulationSpec, WorkerEvent};
use gpuprobe_model::report::{Report, Summary, Timings};
use gpuprobe_model::verdict::ProbeResult;
use gpuprobe_model::{ExitStatus, REPORT_SCHEMA_VERSION};
use gpuprobe_runner::rundir::{PLAN_FILE, REPORT_FILE};
use gpuprobe_runner::{
    KernelLogSource, PythonChoice, RunDir, SupervisorConfig, Task, python, simulation,
};

use crate::cli::TierArg;
use crate::progress::ProgressView;
use crate::{paths, user_error};

/// The tier a command-line value names.
pub fn tier_of(arg: TierArg) -> Tier {
    match arg {
        TierArg::Quick => Tier::Quick,
        TierArg::Standard => Tier::Standard,
        TierArg::Full => Tier::Full,
        TierArg::Soak => Tier::Soak,
    }
}

/// Which devices the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceRequest {
    /// Every GPU the framework sees.
    All,
    /// These devices.
    Listed(Vec<DeviceRef>),
}

/// Parses `--device`: `all`, `cpu`, or GPU indices.
pub fn parse_devices(text: &str) -> Result<DeviceRequest> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(DeviceRequest::All);
    }
    let mut devices = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let device = DeviceRef::parse(part).ok_or_else(|| {
            user_error(format!(
                "--device: {part:?} is not `all`, `cpu` or a GPU index"
            ))
        })?;
        if !devices.contains(&device) {
            devices.push(device);
        }
    }
    if devices.is_empty() {
        return Err(user_error("--device: no device given"));
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
    /// Where the run directory goes (default: a fresh one under the state directory).
    pub run_dir: Option<PathBuf>,
    /// Skip native probes.
    pub no_native: bool,
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
    pub fn validate(&self) -> Result<()> {
        if !(self.timeout_scale > 0.0 && self.timeout_scale.is_finite()) {
            return Err(user_error("--timeout-scale must be a positive number"));
        }
        Ok(())
    }
}

/// Supervisor limits for a session, logging into `log_dir`.
pub fn supervisor_config(
    timeout_scale: f64,
    startup_timeout: f64,
    log_dir: PathBuf,
) -> SupervisorConfig {
    SupervisorConfig {
        // The command line holds it to 1..=3600 s (cli::ranges): nothing is clamped here.
        startup_timeout: Duration::from_secs_f64(startup_timeout),
        between_probes_timeout: Duration::from_secs(120),
        timeout_scale,
        log_dir: Some(log_dir),
        // Every session's workers stop on Ctrl-C once a command has installed the handler.
        cancel: interrupt::cancel_token(),
        ..SupervisorConfig::default()
    }
}

/// Refuses an interpreter named with `--python` that is no interpreter at all (missing, not
/// executable, not a Python): a usage error, found before any work. Returns the choice.
pub(crate) fn validate_python(
    explicit: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Result<Option<PythonChoice>> {
    explicit
        .map(|path| python::validate_explicit(path, env).map_err(|e| user_error(e.to_string())))
        .transpose()
}

/// Everything a session needs once the plan is known.
pub struct Prepared {
    /// The run directory.
    pub run_dir: RunDir,
    /// The plan (also in `plan.json`).
    pub plan: RunPlan,
    /// How workers start.
    pub config: EngineConfig,
    /// Every probe the workers know (Python, then native).
    pub catalog: Vec<ProbeSpec>,
    /// The devices asked for.
    pub device_request: DeviceRequest,
    /// Remarks for the report.
    pub notes: Vec<String>,
    /// The interpreter.
    pub python: Option<PythonChoice>,
}

/// A finished session.
pub struct Completed {
    /// The report (also in `report.json`).
    pub report: Report,
    /// The run directory.
    pub run_dir: RunDir,
    /// The plan, with any devices added while it ran.
    pub plan: RunPlan,
    /// How workers were started.
    pub config: EngineConfig,
    /// Every probe the workers know.
    pub catalog: Vec<ProbeSpec>,
    /// The interpreter.
    pub python: Option<PythonChoice>,
    /// Knowledge-base matches behind the report's KB findings.
    pub matches: Vec<KbMatch>,
}

/// Starts fingerprinting this machine in the background (tools, kernel log).
pub fn spawn_collector(env: &BTreeMap<String, String>) -> Collector {
    let fingerprint_env = env.clone();
    let fingerprint = std::thread::spawn(move || {
        gpuprobe_detect::collect(
            &gpuprobe_detect::Root::live(),
            &fingerprint_env,
            &crate::commands::env::live_options(true),
        )
    });
    // Beside the planning, so that the lanes can be sized when the probes start.
    let memory_env = env.clone();
    let free_gpu_memory = std::thread::spawn(move || {
        gpuprobe_detect::least_free_gpu_memory(
            &gpuprobe_detect::Root::live(),
            &memory_env,
            FREE_MEMORY_TIMEOUT,
        )
    });
    Collector {
        fingerprint,
        free_gpu_memory,
    }
}

/// How long the free-memory query may take: past it the lanes are not cut (a slow
/// `nvidia-smi` must not delay every probe).
const FREE_MEMORY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// What is found out about the machine while a session plans and runs.
pub struct Collector {
    /// The fingerprint (tools, kernel log), joined after the probes.
    fingerprint: JoinHandle<Fingerprint>,
    /// The least free GPU memory, joined before the probes start (lane sizing).
    free_gpu_memory: JoinHandle<Option<u64>>,
}

/// Plans a new session: run directory, interpreter, probe package, catalogue, devices.
pub fn prepare_new(
    options: &SessionOptions,
    env: &BTreeMap<String, String>,
    started_at: &str,
) -> Result<Prepared> {
    options.validate()?;
    let tier = options.tier;
    let device_request = parse_devices(&options.device)?;
    let simulate: Option<SimulationSpec> = options
        .simulate
        .as_deref()
        .map(simulation::resolve)
        .transpose()
        .map_err(|e| user_error(e.to_string()))?;
    // Last of the arguments (it runs the interpreter), but before any work.
    let explicit_python = validate_python(options.python.as_deref(), env)?;
    let run_path = options
        .run_dir
        .clone()
        .unwrap_or_else(|| paths::new_run_dir(env, options.command));
    let created_here = !run_path.exists();
    let run_dir = RunDir::create(&run_path).map_err(|e| user_error(e.to_string()))?;
    let mut notes = Vec::new();

    let python = match explicit_python {
        Some(choice) => Some(choice),
        None => match python::find_python(None, env) {
            Ok(choice) => Some(choice),
            Err(err) => {
                notes.push(err.to_string());
                None
            }
        },
    };
    let package_dir = python::extract_package(&run_dir.path().join("python"))
        .with_context(|| "cannot extract the probe package into the run directory")?;
    let expand = expanded_families(tier, &options.only);
    let bytecode_cache = paths::bytecode_cache(env);
    let mut catalog = python_catalog(
        python.as_ref(),
        &package_dir,
        &run_dir,
        &expand,
        bytecode_cache.as_deref(),
        &mut notes,
    );
    if !options.no_native {
        catalog.extend(gpuprobe_gpu::native_catalog());
    }

    let selected = engine::select(&catalog, tier, &options.only);
    let unmatched: Vec<String> = if catalog.is_empty() {
        Vec::new()
    } else {
        engine::unmatched_patterns(&catalog, tier, &options.only)
            .into_iter()
            .map(|(pattern, elsewhere)| match elsewhere {
                Some(other) => format!(
                    "--only {pattern} matches no probe of the {} tier; it matches probes of the {} tier (--tier {})",
                    tier.name(),
                    other.name(),
                    other.name()
                ),
                None => format!("--only {pattern} matches no probe in any tier"),
            })
            .collect()
    };
    if selected.is_empty() && !catalog.is_empty() {
        // Nothing ran and nothing will: a directory made only to list the catalogue would
        // be a run that never was (`runs list` would show it). One that was there stays.
        if created_here {
            let _ = std::fs::remove_dir_all(&run_path);
        }
        return Err(user_error(format!(
            "no probe of the {} tier matches --only {}{}",
            tier.name(),
            options.only.join(" --only "),
            unmatched
                .iter()
                .map(|line| format!("\n  {line}"))
                .collect::<String>()
        )));
    }
    notes.extend(unmatched);
    let devices = initial_devices(&device_request, simulate.is_some(), &mut notes);
    let tasks: Vec<PlannedTask> = devices
        .iter()
        .flat_map(|device| {
            selected
                .iter()
                .filter(move |spec| applies_to(spec, *device))
                .map(move |spec| PlannedTask {
                    spec: spec.clone(),
                    device: *device,
                })
        })
        .collect();
    let plan = RunPlan {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command: options.command.into(),
        tier,
        only: options.only.clone(),
        devices: match &device_request {
            DeviceRequest::All => None,
            DeviceRequest::Listed(list) => Some(list.clone()),
        },
        python: python.as_ref().map(|p| p.executable.display().to_string()),
        python_chosen_by: python.as_ref().map(|p| p.chosen_by.clone()),
        native: !options.no_native,
        seed: options.seed,
        simulate: simulate.clone(),
        settings: Settings::default(),
        options: options.probe_options.clone(),
        tasks,
        started_at: started_at.to_string(),
    };
    run_dir
        .write_json(PLAN_FILE, &plan)
        .map_err(|e| user_error(e.to_string()))?;
    let config = EngineConfig {
        python: python.clone(),
        package_dir: Some(package_dir),
        native_program: std::env::current_exe().ok(),
        seed: options.seed,
        kernel_log: kernel_log_source(simulate.as_ref()),
        simulate,
        settings: Settings::default(),
        supervisor: supervisor_config(
            options.timeout_scale,
            options.startup_timeout,
            run_dir.workers_dir(),
        ),
        options: worker_options(
            &options.probe_options,
            python.as_ref(),
            bytecode_cache.as_deref(),
        ),
        // Only GPU 0 is planned so far; the other GPUs join once its worker has counted them.
        expected_devices: if devices == [DeviceRef::Gpu(0)] && device_request == DeviceRequest::All
        {
            gpu_count_hint()
        } else {
            1
        },
    };
    Ok(Prepared {
        run_dir,
        plan,
        config,
        catalog,
        device_request,
        notes,
        python,
    })
}

/// Reopens a run directory for `fix` (to build on it, or to finish its starting check): its
/// plan, the interpreter it used (unless `python_override` replaces it), the catalogue, and
/// a freshly extracted probe package. The package and the catalogue query go into `work`
/// (the new run's directory, the old one then being only read), or the run directory itself
/// when `work` is none. Unlike [`prepare_resume`] it does not compare the interpreter with
/// the run's.
pub fn prepare_existing(
    dir: &Path,
    work: Option<&RunDir>,
    python_override: Option<&Path>,
    supervisor: SupervisorConfig,
    env: &BTreeMap<String, String>,
) -> Result<Prepared> {
    let explicit = validate_python(python_override, env)?;
    let run_dir = RunDir::open(dir).map_err(|e| user_error(e.to_string()))?;
    let work = work.cloned().unwrap_or_else(|| run_dir.clone());
    let plan: RunPlan = run_dir
        .read_json(PLAN_FILE)
        .map_err(|e| user_error(e.to_string()))?;
    let stack = run_dir
        .read_stack()
        .map_err(|e| user_error(e.to_string()))?;
    let python = match explicit {
        Some(choice) => Some(choice),
        None => planned_python(&plan).or_else(|| python::find_python(None, env).ok()),
    };
    let package_dir = python::extract_package(&work.path().join("python"))
        .with_context(|| "cannot extract the probe package into the run directory")?;
    let mut notes = vec![format!("resumed run started {}", plan.started_at)];
    notes.extend(stack.replans.iter().cloned());
    let catalog = catalog_for(&plan, python.as_ref(), &package_dir, &work, env, &mut notes);
    Ok(reopened(
        run_dir,
        plan,
        python,
        package_dir,
        catalog,
        supervisor,
        env,
        notes,
    ))
}

/// Reopens a run directory to finish it (`check --resume`): what is left of its plan, under
/// the interpreter it used (or `python_override`, which must be the same).
///
/// Continuing under anything else would make one report of two stacks, so a resume is
/// refused (a usage error naming both sides) when the interpreter differs from the run's
/// (or is gone), when it now reports another torch than the run's workers did, or when
/// another gpuprobe version planned the run. With `replan` it goes on instead: the plan is
/// made again from the run's tier, patterns and devices with this interpreter and this
/// gpuprobe, the results already recorded are kept, and every later report of the run says
/// so.
pub fn prepare_resume(
    dir: &Path,
    python_override: Option<&Path>,
    replan: bool,
    supervisor: SupervisorConfig,
    env: &BTreeMap<String, String>,
) -> Result<Prepared> {
    let explicit = validate_python(python_override, env)?;
    let run_dir = RunDir::open(dir).map_err(|e| user_error(e.to_string()))?;
    let mut plan: RunPlan = run_dir
        .read_json(PLAN_FILE)
        .map_err(|e| user_error(e.to_string()))?;
    let mut stack = run_dir
        .read_stack()
        .map_err(|e| user_error(e.to_string()))?;
    let planned = planned_python(&plan);
    let mut differences = Vec::new();
    if let Some(run) = &planned
        && explicit.is_none()
        && std::fs::metadata(&run.executable).is_err()
    {
        differences.push(format!(
            "the run's interpreter {} is gone",
            run.executable.display()
        ));
    }
    let python = match (explicit, planned) {
        (Some(now), Some(run)) => {
            if !same_interpreter(&run.executable, &now.executable) {
                differences.push(format!(
                    "the run used the interpreter {}{}; this resume would use {}",
                    run.executable.display(),
                    stack
                        .torch
                        .as_deref()
                        .map(|t| format!(" (torch {t})"))
                        .unwrap_or_default(),
                    now.executable.display()
                ));
            }
            Some(now)
        }
        (Some(now), None) => {
            differences.push(format!(
                "the run found no interpreter; this resume would use {}",
                now.executable.display()
            ));
            Some(now)
        }
        (None, Some(run)) if differences.is_empty() => Some(run),
        (None, Some(_)) => python::find_python(None, env).ok(),
        (None, None) => None,
    };
    let tool_version = env!("CARGO_PKG_VERSION");
    if plan.tool_version != tool_version {
        differences.push(format!(
            "gpuprobe {} planned the run; this is gpuprobe {tool_version}",
            plan.tool_version
        ));
    }
    let package_dir = python::extract_package(&run_dir.path().join("python"))
        .with_context(|| "cannot extract the probe package into the run directory")?;
    // Same interpreter: is its torch still the one the run's workers reported? (A torch
    // upgraded in place would otherwise pass unnoticed.) Only asked when nothing else
    // differs, since any difference already needs --replan.
    if differences.is_empty()
        && let (Some(run_torch), Some(choice)) = (&stack.torch, &python)
    {
        let now = python::fetch_env(
            choice,
            |plan| python::worker_command(&choice.executable, &package_dir, plan),
            &run_dir.workers_dir().join("resume-env-plan.json"),
            supervisor.startup_timeout,
        );
        let now_torch = now.torch.as_ref().map(|t| t.version.as_str());
        if now_torch != Some(run_torch.as_str()) {
            differences.push(format!(
                "the run's probes ran under torch {run_torch}; {} now reports {}",
                choice.executable.display(),
                match (now_torch, &now.torch_error) {
                    (Some(version), _) => format!("torch {version}"),
                    (None, Some(error)) => format!("no usable torch ({error})"),
                    (None, None) => "no torch".into(),
                }
            ));
        }
    }
    if !differences.is_empty() && !replan {
        return Err(user_error(format!(
            "cannot resume {} as it was planned: {}.\n\
             Finishing it so would report results of two different stacks as one run. Resume \
             without --python to use the run's interpreter, start a new run, or add --replan \
             to continue anyway (the report then says what changed).",
            dir.display(),
            differences.join("; ")
        )));
    }
    let mut notes = vec![format!("resumed run started {}", plan.started_at)];
    let catalog = catalog_for(
        &plan,
        python.as_ref(),
        &package_dir,
        &run_dir,
        env,
        &mut notes,
    );
    if !differences.is_empty() {
        let (done, _) = run_dir
            .load_results()
            .map_err(|e| user_error(e.to_string()))?;
        let replanned = replanned_tasks(&plan, &catalog);
        stack.replans.push(format!(
            "re-planned on resume (--replan): {}; the {} result(s) recorded before came from the \
             earlier plan, the rest from {} planned probe run(s) under {}",
            differences.join("; "),
            done.len(),
            replanned.len(),
            python
                .as_ref()
                .map(|p| p.executable.display().to_string())
                .unwrap_or_else(|| "no interpreter".into())
        ));
        stack.torch = None;
        plan.tasks = replanned;
        plan.tool_version = tool_version.to_string();
        plan.python = python.as_ref().map(|p| p.executable.display().to_string());
        plan.python_chosen_by = python.as_ref().map(|p| p.chosen_by.clone());
        run_dir
            .write_json(PLAN_FILE, &plan)
            .map_err(|e| user_error(e.to_string()))?;
        run_dir
            .write_stack(&stack)
            .map_err(|e| user_error(e.to_string()))?;
    } else if replan {
        notes.push("--replan: nothing differs from the run's plan; resumed as planned".into());
    }
    notes.extend(stack.replans.iter().cloned());
    Ok(reopened(
        run_dir,
        plan,
        python,
        package_dir,
        catalog,
        supervisor,
        env,
        notes,
    ))
}

/// The interpreter a plan names, as the run chose it.
fn planned_python(plan: &RunPlan) -> Option<PythonChoice> {
    plan.python.as_ref().map(|p| PythonChoice {
        executable: PathBuf::from(p),
        chosen_by: plan
            .python_chosen_by
            .clone()
            .unwrap_or_else(|| "plan".into()),
    })
}

/// Whether two interpreter paths name the same interpreter: the same path once made
/// absolute. Links are deliberately not followed: a venv's `bin/python` links to the base
/// interpreter but runs with the venv's packages, and a wrapper script may change what runs.
fn same_interpreter(a: &Path, b: &Path) -> bool {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || absolute(a) == absolute(b)
}

/// The catalogue a reopened plan is run from: the Python probes its interpreter lists (the
/// framework-dependent families its tier needs), and the native ones when it has them.
fn catalog_for(
    plan: &RunPlan,
    python: Option<&PythonChoice>,
    package_dir: &Path,
    work: &RunDir,
    env: &BTreeMap<String, String>,
    notes: &mut Vec<String>,
) -> Vec<ProbeSpec> {
    let expand = expanded_families(plan.tier, &plan.only);
    let bytecode_cache = paths::bytecode_cache(env);
    let mut catalog = python_catalog(
        python,
        package_dir,
        work,
        &expand,
        bytecode_cache.as_deref(),
        notes,
    );
    if plan.native {
        catalog.extend(gpuprobe_gpu::native_catalog());
    }
    catalog
}

/// A plan's tasks made again from `catalog`: its tier and patterns, on every device it had
/// planned (the GPUs found while it ran included).
fn replanned_tasks(plan: &RunPlan, catalog: &[ProbeSpec]) -> Vec<PlannedTask> {
    let selected = engine::select(catalog, plan.tier, &plan.only);
    let mut devices: Vec<DeviceRef> = Vec::new();
    for task in &plan.tasks {
        if !devices.contains(&task.device) {
            devices.push(task.device);
        }
    }
    devices
        .iter()
        .flat_map(|device| {
            selected
                .iter()
                .filter(move |spec| applies_to(spec, *device))
                .map(move |spec| PlannedTask {
                    spec: spec.clone(),
                    device: *device,
                })
        })
        .collect()
}

/// A reopened run, ready to execute.
#[allow(clippy::too_many_arguments)]
fn reopened(
    run_dir: RunDir,
    plan: RunPlan,
    python: Option<PythonChoice>,
    package_dir: PathBuf,
    catalog: Vec<ProbeSpec>,
    supervisor: SupervisorConfig,
    env: &BTreeMap<String, String>,
    notes: Vec<String>,
) -> Prepared {
    let bytecode_cache = paths::bytecode_cache(env);
    let device_request = match &plan.devices {
        None => DeviceRequest::All,
        Some(list) => DeviceRequest::Listed(list.clone()),
    };
    let config = EngineConfig {
        python: python.clone(),
        package_dir: Some(package_dir),
        native_program: std::env::current_exe().ok(),
        seed: plan.seed,
        kernel_log: kernel_log_source(plan.simulate.as_ref()),
        simulate: plan.simulate.clone(),
        settings: plan.settings.clone(),
        supervisor,
        options: worker_options(&plan.options, python.as_ref(), bytecode_cache.as_deref()),
        // What is left is regrouped from the planned tasks, which already name every GPU
        // the first run found.
        expected_devices: 1,
    };
    Prepared {
        run_dir,
        plan,
        config,
        catalog,
        device_request,
        notes,
        python,
    }
}

/// The kernel log a run watches: the live one, except under simulation, whose results must
/// not depend on what the host's kernel happens to print.
fn kernel_log_source(simulate: Option<&SimulationSpec>) -> KernelLogSource {
    if simulate.is_some() {
        KernelLogSource::Off
    } else {
        KernelLogSource::Live
    }
}

/// Native probes test a GPU runtime: they do not apply to the CPU as device under test.
pub fn applies_to(spec: &ProbeSpec, device: DeviceRef) -> bool {
    !(spec.backend == Backend::Native && device == DeviceRef::Cpu)
}

/// The worker option naming gpuprobe's bytecode cache, used only where the interpreter
/// cannot cache torch's bytecode in place (`python/gpuprobe/worker/bytecode.py`).
const BYTECODE_CACHE_OPTION: &str = "bytecode_cache";

/// Adds the bytecode cache, when there is one, to a worker plan's options.
fn add_bytecode_cache(
    options: &mut BTreeMap<String, serde_json::Value>,
    bytecode_cache: Option<&Path>,
) {
    if let Some(dir) = bytecode_cache {
        options.insert(
            BYTECODE_CACHE_OPTION.into(),
            serde_json::json!(dir.display().to_string()),
        );
    }
}

/// The options every worker's plan carries: the probe options, where the native worker
/// should look for runtime libraries, and the bytecode cache.
fn worker_options(
    probe_options: &BTreeMap<String, serde_json::Value>,
    python: Option<&PythonChoice>,
    bytecode_cache: Option<&Path>,
) -> BTreeMap<String, serde_json::Value> {
    let mut options = native_library_hints(python);
    add_bytecode_cache(&mut options, bytecode_cache);
    options.extend(probe_options.clone());
    options
}

/// The catalogue query's options: the families to expand (which imports the framework) and
/// the bytecode cache that import may need.
fn catalog_options(
    expand: &[&str],
    bytecode_cache: Option<&Path>,
) -> BTreeMap<String, serde_json::Value> {
    let mut options = BTreeMap::new();
    if !expand.is_empty() {
        options.insert("expand".to_string(), serde_json::json!(expand));
        add_bytecode_cache(&mut options, bytecode_cache);
    }
    options
}

/// Where the native worker should also look for GPU runtime libraries: the user's
/// site-packages (pip-installed ROCm and CUDA libraries) and torch's own `lib`, derived
/// from the interpreter's location without starting it.
fn native_library_hints(python: Option<&PythonChoice>) -> BTreeMap<String, serde_json::Value> {
    let mut options = BTreeMap::new();
    let Some(prefix) = python
        .and_then(|p| p.executable.parent())
        .and_then(Path::parent)
    else {
        return options;
    };
    let mut sites: Vec<String> = Vec::new();
    for lib in ["lib", "lib64"] {
        let Ok(entries) = std::fs::read_dir(prefix.join(lib)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with("python3") {
                let site = entry.path().join("site-packages");
                if site.is_dir() {
                    sites.push(site.display().to_string());
                }
            }
        }
    }
    sites.sort();
    if let Some(torch_lib) = sites
        .iter()
        .map(|s| Path::new(s).join("torch/lib"))
        .find(|p| p.is_dir())
    {
        options.insert(
            "torch_lib_dir".into(),
            serde_json::json!(torch_lib.display().to_string()),
        );
    }
    if !sites.is_empty() {
        options.insert("site_packages".into(), serde_json::json!(sites));
    }
    options
}

/// The families whose probes depend on the installed framework and that this run needs:
/// the sweep's operators (PyTorch's operator database, read at run time) for the full
/// tier, or when an `--only` pattern may name one. Listing them costs a framework import,
/// so the quick and standard tiers do without.
pub(crate) fn expanded_families(tier: Tier, only: &[String]) -> Vec<&'static str> {
    let named = only
        .iter()
        .any(|p| p.starts_with("sweep") || p.starts_with('*'));
    if tier == Tier::Full || named {
        vec!["sweep"]
    } else {
        Vec::new()
    }
}

/// The Python probe catalogue, from the user's interpreter, or from any `python3` when that
/// one cannot even start (the probes are then listed and reported NOT-TESTED with the
/// reason instead of vanishing).
fn python_catalog(
    python: Option<&PythonChoice>,
    package_dir: &Path,
    run_dir: &RunDir,
    expand: &[&str],
    bytecode_cache: Option<&Path>,
    notes: &mut Vec<String>,
) -> Vec<ProbeSpec> {
    let options = catalog_options(expand, bytecode_cache);
    let plan_path = run_dir.workers_dir().join("catalog.json");
    // Listing the sweep's operators imports the framework and its operator database.
    let timeout = Duration::from_secs(if expand.is_empty() { 60 } else { 240 });
    let mut candidates: Vec<PathBuf> = python
        .map(|p| vec![p.executable.clone()])
        .unwrap_or_default();
    candidates.push(PathBuf::from("python3"));
    for (i, interpreter) in candidates.iter().enumerate() {
        let result = python::fetch_catalog(
            |plan| python::worker_command(interpreter, package_dir, plan),
            &plan_path,
            timeout,
            options.clone(),
        );
        match result {
            Ok(catalog) => {
                if i > 0 {
                    notes.push(format!("probe list taken from {}", interpreter.display()));
                }
                return catalog;
            }
            Err(err) => notes.push(err),
        }
    }
    Vec::new()
}

/// The devices to plan before any worker has reported: the listed ones, or GPU 0 (the
/// worker's hello then says how many GPUs there are). With simulation on a machine
/// without a GPU, the CPU is the device under test.
fn initial_devices(
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
pub fn gpu_present() -> bool {
    Path::new("/dev/kfd").exists()
        || Path::new("/dev/nvidia0").exists()
        || Path::new("/dev/dxg").exists()
        || gpuprobe_detect::compute_gpu_count(&gpuprobe_detect::Root::live()) > 0
}

/// About how many GPUs the framework will see, before it is asked: the AMD and NVIDIA GPUs
/// on the PCI bus, or fewer when a `*_VISIBLE_DEVICES` variable lists fewer. Only sizes the
/// workers' CPU thread budgets, so an integrated GPU counted too costs little.
fn gpu_count_hint() -> usize {
    let visible: Vec<String> = gpuprobe_model::env_vars::GPU_VISIBILITY_LISTS
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .collect();
    device_count_hint(
        gpuprobe_detect::compute_gpu_count(&gpuprobe_detect::Root::live()),
        &visible,
    )
}

/// `pci` GPUs, or fewer when a visibility list names fewer; at least 1.
fn device_count_hint(pci: usize, visible_lists: &[String]) -> usize {
    visible_lists
        .iter()
        .map(|list| list.split(',').filter(|d| !d.trim().is_empty()).count())
        .fold(pci, usize::min)
        .max(1)
}

/// Runs what is left of the plan and builds the report (written to `report.json`).
pub fn execute(
    prepared: Prepared,
    verbose: bool,
    collector: Collector,
    started: Instant,
    started_at: &str,
) -> Result<Completed> {
    let Prepared {
        run_dir,
        mut plan,
        config,
        catalog,
        device_request,
        mut notes,
        python,
    } = prepared;
    let (previous, torn) = run_dir
        .load_results()
        .map_err(|e| user_error(e.to_string()))?;
    if torn > 0 {
        notes.push(format!(
            "{torn} unreadable line(s) in results.jsonl were ignored (a run killed mid-write)"
        ));
    }
    let free_gpu_memory = collector.free_gpu_memory.join().unwrap_or(None);
    let budget = LaneBudget::for_host(
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        free_gpu_memory,
    );
    let lanes = plan.remaining_lanes(&previous, budget);
    let mut stack = run_dir.read_stack().unwrap_or_default();
    let view = ProgressView::new(&format!("{} tier", plan.tier.name()), verbose);
    for _ in &previous {
        view.update(&engine::Progress::Planned(1));
    }

    let selected: Vec<ProbeSpec> = engine::select(&catalog, plan.tier, &plan.only);
    let mut planned_devices: Vec<DeviceRef> = plan.tasks.iter().map(|t| t.device).collect();
    planned_devices.dedup();
    let mut added_tasks: Vec<PlannedTask> = Vec::new();
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
            added_tasks.extend(tasks.iter().map(|t| PlannedTask {
                spec: t.spec.clone(),
                device,
            }));
            lanes.extend(engine::sized_lanes(tasks, budget));
        }
        lanes
    };
    let probes_started = Instant::now();
    let execution = engine::execute(lanes, &config, &run_dir, &mut expand, &mut |event| {
        view.update(&event)
    });
    let probes_ended = Instant::now();
    view.finish();
    if !added_tasks.is_empty() {
        plan.tasks.extend(added_tasks);
        let _ = run_dir.write_json(PLAN_FILE, &plan);
    }
    if let Some(signal) = interrupt::interrupted() {
        // The workers are stopped and every finished result is in the run directory; a
        // report of part of the plan would read as the whole, so none is made.
        let done = previous.len() + execution.results.len();
        let line = if plan.command == "check" {
            interrupt::resume_line(done, plan.tasks.len(), run_dir.path())
        } else {
            "gpuprobe: interrupted; the workers are stopped".to_string()
        };
        interrupt::leave(signal, &line);
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

    let mut results = previous;
    results.extend(execution.results);
    let mut fingerprint = collector
        .fingerprint
        .join()
        .unwrap_or_else(|_| Fingerprint {
            source: "live".into(),
            ..Default::default()
        });
    let fingerprint_joined = Instant::now();
    if let Some(python_env) = python_env_from(python.as_ref(), &execution.hellos) {
        gpuprobe_detect::merge_python(&mut fingerprint, python_env);
    }
    // Kernel lines printed during the probes are events of this machine too: parsed, they
    // meet the knowledge base's log signatures (kind, client) like those read at the start.
    gpuprobe_detect::merge_watched_kernel_lines(
        &mut fingerprint,
        results
            .iter()
            .flat_map(|r| r.kernel_log.iter().map(String::as_str)),
    );
    let knowledge = crate::commands::kb::load(None)?;
    let matches = gpuprobe_kb::match_all(&knowledge.kb, &fingerprint, &results);
    let kb_findings: Vec<_> = matches.iter().map(|m| m.to_finding()).collect();
    let findings = gpuprobe_doctor::diagnose::assemble(
        gpuprobe_doctor::diagnose::diagnose(&results, &fingerprint),
        kb_findings,
        gpuprobe_kb::lint(&fingerprint),
    );
    let summary = Summary::of(&results);
    let mut exit_status = exit_status_for(&results, &findings);
    if let Some(absent) = absent_listed_gpus(&device_request, &execution.hellos) {
        // A GPU index past what the framework sees is a wrong argument, not a stack that
        // could not be tested: exit 2, with the results of the devices that do exist kept.
        notes.push(absent.to_string());
        exit_status = ExitStatus::UsageError;
    }
    let seconds = |from: Instant, to: Instant| to.saturating_duration_since(from).as_secs_f64();
    let prepare_s = seconds(started, probes_started);
    let timings = Timings {
        prepare_s,
        probes_s: seconds(probes_started, probes_ended),
        fingerprint_wait_s: seconds(probes_ended, fingerprint_joined),
        report_s: seconds(fingerprint_joined, Instant::now()),
        // The engine measures from its own start, the moment the probes began.
        lanes: execution
            .lanes
            .into_iter()
            .map(|lane| lane.shifted(prepare_s))
            .collect(),
    };
    let report = Report {
        schema_version: REPORT_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command: plan.command.clone(),
        run_dir: Some(run_dir.path().display().to_string()),
        started_at: started_at.to_string(),
        wall_s: started.elapsed().as_secs_f64(),
        tier: plan.tier,
        simulation: config.simulate.clone(),
        fingerprint,
        results,
        findings,
        summary,
        exit_status,
        exit_code: exit_status.code(),
        notes,
        timings: Some(timings),
    };
    run_dir
        .write_json(REPORT_FILE, &report)
        .map_err(|e| user_error(e.to_string()))?;
    Ok(Completed {
        report,
        run_dir,
        plan,
        config,
        catalog,
        python,
        matches,
    })
}

/// The exit status a set of results earns (docs/exit-codes.md). NOT-TESTED is never a
/// problem, but neither is it a pass: a run in which most of the probes that apply could
/// not be attempted ([`Summary::mostly_not_tested`]) has not tested the stack, and exits as
/// one that could test nothing rather than as "all passed".
pub fn exit_status_for(
    results: &[ProbeResult],
    findings: &[gpuprobe_model::Finding],
) -> ExitStatus {
    let judged = results
        .iter()
        .any(|r| r.verdict.is_judged() || r.verdict.is_problem());
    if results.iter().any(|r| r.verdict.is_problem())
        || findings
            .iter()
            .any(|f| f.severity == gpuprobe_model::Severity::Error)
    {
        ExitStatus::ProblemsFound
    } else if !judged || Summary::of(results).mostly_not_tested {
        ExitStatus::NothingTested
    } else {
        ExitStatus::AllPassed
    }
}

/// GPUs named with `--device` that the framework says are not there.
#[derive(Debug, PartialEq)]
pub(crate) struct AbsentGpus {
    /// The indices asked for that do not exist.
    pub missing: Vec<u32>,
    /// How many GPUs the framework sees.
    pub seen: usize,
}

/// How the report's note on absent GPUs begins ([`AbsentGpus`]'s text).
const ABSENT_GPUS_NOTE: &str = "--device ";

/// The note on absent GPUs among a report's notes, also in a report read back from disk.
pub(crate) fn absent_gpus_note(notes: &[String]) -> Option<&str> {
    notes
        .iter()
        .map(String::as_str)
        .find(|note| note.starts_with(ABSENT_GPUS_NOTE) && note.contains(": no such GPU;"))
}

impl std::fmt::Display for AbsentGpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let missing: Vec<String> = self.missing.iter().map(u32::to_string).collect();
        let range = match self.seen {
            0 => String::new(),
            1 => " (index 0)".to_string(),
            n => format!(" (indices 0 to {})", n - 1),
        };
        write!(
            f,
            "{ABSENT_GPUS_NOTE}{}: no such GPU; torch sees {} GPU(s){range} with this environment's visibility settings",
            missing.join(","),
            self.seen
        )
    }
}

/// Which listed GPUs do not exist, judged from a Python worker whose framework could use
/// the GPU and listed its devices. Without such a worker nothing is known: a framework that
/// sees no GPU at all leaves the run untested (exit 4), not mistaken.
pub(crate) fn absent_listed_gpus(
    request: &DeviceRequest,
    hellos: &[engine::HelloRecord],
) -> Option<AbsentGpus> {
    let DeviceRequest::Listed(listed) = request else {
        return None;
    };
    let seen = hellos.iter().find_map(|hello| match &hello.event {
        WorkerEvent::Hello {
            torch: Some(torch), ..
        } if hello.backend == Backend::Python && torch.gpu_available => Some(torch.devices.len()),
        _ => None,
    })?;
    let missing: Vec<u32> = listed
        .iter()
        .filter_map(|device| match device {
            DeviceRef::Gpu(index) if *index as usize >= seen => Some(*index),
            _ => None,
        })
        .collect();
    (!missing.is_empty()).then_some(AbsentGpus { missing, seen })
}

/// The interpreter and framework as the Python workers reported them.
fn python_env_from(
    python: Option<&PythonChoice>,
    hellos: &[engine::HelloRecord],
) -> Option<PythonEnv> {
    let choice = python?;
    let mut python_env = PythonEnv {
        executable: choice.executable.display().to_string(),
        chosen_by: choice.chosen_by.clone(),
        ..Default::default()
    };
    // Prefer a hello that carries torch facts (device 0's), else any.
    let hello = hellos
        .iter()
        .filter(|h| h.backend == Backend::Python)
        .max_by_key(|h| matches!(&h.event, WorkerEvent::Hello { torch: Some(_), .. }));
    if let Some(engine::HelloRecord {
        event:
            WorkerEvent::Hello {
                python_version,
                torch,
                unusable,
                packages,
                ..
            },
        ..
    }) = hello
    {
        python_env.version = python_version.clone();
        python_env.torch = torch.clone();
        python_env.torch_error = unusable.clone();
        python_env.packages = packages.clone();
    }
    Some(python_env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python_hello(device: u32, gpu_available: bool, seen: u32) -> engine::HelloRecord {
        let torch = gpuprobe_model::fingerprint::TorchInfo {
            version: "2.11.0+cu130".into(),
            cuda: Some("13.0".into()),
            gpu_available,
            devices: (0..seen)
                .map(|index| gpuprobe_model::fingerprint::TorchDevice {
                    index,
                    name: "GPU".into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        engine::HelloRecord {
            backend: Backend::Python,
            device: DeviceRef::Gpu(device),
            event: WorkerEvent::Hello {
                protocol: 1,
                pid: 1,
                worker: "python".into(),
                executable: None,
                python_version: None,
                torch: Some(torch),
                unusable: (device >= seen).then(|| format!("cuda:{device} does not exist")),
                packages: BTreeMap::new(),
                simulated: false,
            },
        }
    }

    #[test]
    fn a_listed_gpu_the_framework_does_not_see_is_a_wrong_argument() {
        let listed = |devices: &[u32]| {
            DeviceRequest::Listed(devices.iter().map(|d| DeviceRef::Gpu(*d)).collect())
        };
        let absent = absent_listed_gpus(&listed(&[0, 5, 2]), &[python_hello(5, true, 2)]);
        assert_eq!(
            absent,
            Some(AbsentGpus {
                missing: vec![5, 2],
                seen: 2
            })
        );
        let note = absent.unwrap().to_string();
        assert_eq!(
            absent_gpus_note(&["resumed run".into(), note.clone()]),
            Some(note.as_str())
        );
        assert_eq!(
            note,
            "--device 5,2: no such GPU; torch sees 2 GPU(s) (indices 0 to 1) with this environment's visibility settings"
        );
        assert_eq!(
            absent_listed_gpus(&listed(&[1]), &[python_hello(1, true, 2)]),
            None
        );
        // Every GPU is asked for, or none is listed: nothing can be missing.
        assert_eq!(
            absent_listed_gpus(&DeviceRequest::All, &[python_hello(0, true, 1)]),
            None
        );
        assert_eq!(
            absent_listed_gpus(
                &DeviceRequest::Listed(vec![DeviceRef::Cpu]),
                &[python_hello(0, true, 1)]
            ),
            None
        );
        // A framework that sees no usable GPU says nothing about which exist (exit 4), and
        // neither does a run without a Python worker.
        assert_eq!(
            absent_listed_gpus(&listed(&[3]), &[python_hello(3, false, 0)]),
            None
        );
        assert_eq!(absent_listed_gpus(&listed(&[3]), &[]), None);
    }

    #[test]
    fn workers_and_an_expanding_catalogue_are_told_the_bytecode_cache() {
        let cache = Path::new("/c/gpuprobe/bytecode");
        let options = worker_options(&BTreeMap::new(), None, Some(cache));
        assert_eq!(
            options.get(BYTECODE_CACHE_OPTION),
            Some(&serde_json::json!("/c/gpuprobe/bytecode"))
        );
        assert!(!worker_options(&BTreeMap::new(), None, None).contains_key(BYTECODE_CACHE_OPTION));
        // Listing without expanding imports no framework: nothing to cache, nothing sent.
        assert!(catalog_options(&[], Some(cache)).is_empty());
        let expanding = catalog_options(&["sweep"], Some(cache));
        assert_eq!(expanding.get("expand"), Some(&serde_json::json!(["sweep"])));
        assert!(expanding.contains_key(BYTECODE_CACHE_OPTION));
    }

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

    #[test]
    fn exit_status_rules() {
        use gpuprobe_model::probe::{Layer, ProbeId};
        use gpuprobe_model::verdict::Verdict;
        let result = |verdict| {
            ProbeResult::new(
                ProbeId::new("a.b"),
                DeviceRef::Gpu(0),
                Layer::Framework,
                verdict,
            )
        };
        assert_eq!(
            exit_status_for(&[result(Verdict::Pass)], &[]),
            ExitStatus::AllPassed
        );
        assert_eq!(
            exit_status_for(
                &[
                    result(Verdict::Pass),
                    result(Verdict::Hang { timeout_s: 1.0 })
                ],
                &[]
            ),
            ExitStatus::ProblemsFound
        );
        assert_eq!(
            exit_status_for(&[result(Verdict::NotTested { reason: "x".into() })], &[]),
            ExitStatus::NothingTested
        );
        assert_eq!(exit_status_for(&[], &[]), ExitStatus::NothingTested);
        let not_tested = || result(Verdict::NotTested { reason: "x".into() });
        let skip = || result(Verdict::Skip { reason: "x".into() });
        assert_eq!(
            exit_status_for(&[result(Verdict::Pass), not_tested(), not_tested()], &[]),
            ExitStatus::NothingTested,
            "most of what applies was not tested"
        );
        assert_eq!(
            exit_status_for(&[result(Verdict::Pass), not_tested()], &[]),
            ExitStatus::AllPassed,
            "half is enough"
        );
        assert_eq!(
            exit_status_for(&[result(Verdict::Pass), skip(), skip(), not_tested()], &[]),
            ExitStatus::AllPassed,
            "a SKIP does not apply, so it does not count"
        );
        assert_eq!(
            exit_status_for(
                &[
                    result(Verdict::Hang { timeout_s: 1.0 }),
                    not_tested(),
                    not_tested()
                ],
                &[]
            ),
            ExitStatus::ProblemsFound,
            "a problem is reported whatever else was not tested"
        );
    }
}
