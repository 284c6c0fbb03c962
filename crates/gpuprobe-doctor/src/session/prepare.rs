//! Preparing a session: a new run (run directory, interpreter, probe package, catalog,
//! plan), a run reopened for `fix` to build on, or one resumed to be finished, refused
//! when it would no longer run under what it ran under (unless re-planned).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuprobe_model::SimulationSpec;
use gpuprobe_model::TorchDevice;
use gpuprobe_model::{DeviceRef, ProbeSpec, Tier};
use gpuprobe_runner::{
    KernelLogSource, PLAN_FILE, PythonChoice, RunDir, RunStack, SupervisorConfig, WORKERS_DIR,
    resolve_simulation,
};

use super::options::{
    DeviceRequest, SessionOptions, gpu_count_hint, initial_devices, parse_devices,
    supervisor_config, tasks_on, validate_python,
};
use super::spread::{self, SpreadPlan};
use super::{Prepared, SessionError, SessionHost};
use crate::exec::EngineConfig;
use crate::plan;
use gpuprobe_model::Task;
use gpuprobe_model::{RunPlan, Settings};

/// Plans `check`'s session: a new one from `options`, or with `resume` the rest of that
/// run directory's plan (`prepare_resume`, `replan` as `--replan`).
pub fn prepare_check(
    options: &SessionOptions,
    resume: Option<&Path>,
    replan: bool,
    host: &SessionHost,
    started_at: &str,
) -> Result<Prepared, SessionError> {
    let Some(dir) = resume else {
        return prepare_new(options, host, started_at);
    };
    let supervisor = super::supervisor_config(
        options.timeout_scale,
        options.startup_timeout,
        dir.join(WORKERS_DIR),
        &host.cancel,
    );
    prepare_resume(dir, options.python.as_deref(), replan, supervisor, host)
}

/// Plans a new session: run directory, interpreter, probe package, catalog, devices.
pub(crate) fn prepare_new(
    options: &SessionOptions,
    host: &SessionHost,
    started_at: &str,
) -> Result<Prepared, SessionError> {
    let env = &host.env;
    options.validate()?;
    let tier = options.tier;
    let device_request = parse_devices(&options.device)?;
    let simulate: Option<SimulationSpec> = options
        .simulate
        .as_deref()
        .map(resolve_simulation)
        .transpose()
        .map_err(SessionError::Simulation)?;
    // Last of the arguments (it runs the interpreter), but before any work.
    let explicit_python = validate_python(options.python.as_deref(), env)?;
    let run_path = options.run_dir.clone();
    let created_here = !run_path.exists();
    let run_dir = RunDir::create(&run_path).map_err(SessionError::RunDir)?;
    let mut notes = Vec::new();

    let python = match explicit_python {
        Some(choice) => Some(choice),
        None => match gpuprobe_runner::find_python(None, env) {
            Ok(choice) => Some(choice),
            Err(err) => {
                notes.push(err.to_string());
                None
            }
        },
    };
    let package_dir = gpuprobe_runner::extract_package(&run_dir.path().join("python"))
        .map_err(SessionError::ExtractPackage)?;
    let bytecode_cache = host.bytecode_cache.clone();
    let (mut catalog, listed_gpus) = python_catalog_for(
        tier,
        &options.only,
        python.as_ref(),
        &package_dir,
        &run_dir,
        bytecode_cache.as_deref(),
        &mut notes,
    );
    if !options.no_native {
        catalog.extend(host.native_catalog.iter().cloned());
    }

    let selected = plan::select(&catalog, tier, &options.only);
    let unmatched = unmatched_notes(&catalog, tier, &options.only);
    if selected.is_empty() && !catalog.is_empty() {
        // Nothing ran and nothing will: a directory made only to list the catalog would
        // be a run that never was (`runs list` would show it). One that was there stays.
        if created_here {
            let _ = std::fs::remove_dir_all(&run_path);
        }
        return Err(SessionError::NothingSelected {
            tier,
            only: options.only.clone(),
            unmatched,
        });
    }
    notes.extend(unmatched);
    let spread = spread_for(options, &device_request, listed_gpus.as_deref());
    let (devices, tasks) = match &spread {
        Some(spread) => {
            let tasks = spread::tasks(&selected, spread, &[]);
            notes.extend(spread::notes(spread, &tasks));
            (spread.devices(), tasks)
        }
        None => {
            let devices = initial_devices(&device_request, simulate.is_some(), &mut notes);
            let tasks = tasks_on(&devices, &selected);
            (devices, tasks)
        }
    };
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
        spread: spread.clone(),
    };
    run_dir
        .write_json(PLAN_FILE, &plan)
        .map_err(SessionError::RunDir)?;
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
            &host.cancel,
        ),
        options: worker_options(
            &options.probe_options,
            options.tier,
            python.as_ref(),
            bytecode_cache.as_deref(),
        ),
        // Only GPU 0 is planned so far, unless every GPU was planned up front; the other
        // GPUs join once its worker has counted them.
        expected_devices: if spread.is_some() {
            devices.len()
        } else if devices == [DeviceRef::Gpu(0)] && device_request == DeviceRequest::All {
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

/// The spread of a new run: with `--device all` (and `check` not told `--no-spread`), when
/// the catalog listing found two or more identical GPUs. Listed devices never spread:
/// who names GPUs asks for those runs.
fn spread_for(
    options: &SessionOptions,
    request: &DeviceRequest,
    listed_gpus: Option<&[TorchDevice]>,
) -> Option<SpreadPlan> {
    if !options.spread || *request != DeviceRequest::All {
        return None;
    }
    spread::plan_for(listed_gpus?)
}

/// A note for each `--only` pattern that matches no probe of `tier`, naming the tier it
/// matches when it matches one (none when the catalog could not be listed at all).
fn unmatched_notes(catalog: &[ProbeSpec], tier: Tier, only: &[String]) -> Vec<String> {
    if catalog.is_empty() {
        return Vec::new();
    }
    plan::unmatched_patterns(catalog, tier, only)
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
}

/// Reopens a run directory for `fix` (to build on it, or to finish its starting check): its
/// plan, the interpreter it used (unless `python_override` replaces it), the catalog, and
/// a freshly extracted probe package. The package and the catalog query go into `work`
/// (the new run's directory, the old one then being only read), or the run directory itself
/// when `work` is none. Unlike [`prepare_resume`] it does not compare the interpreter with
/// the run's.
pub(crate) fn prepare_existing(
    dir: &Path,
    work: Option<&RunDir>,
    python_override: Option<&Path>,
    supervisor: SupervisorConfig,
    host: &SessionHost,
) -> Result<Prepared, SessionError> {
    let env = &host.env;
    let explicit = validate_python(python_override, env)?;
    let run_dir = RunDir::open(dir).map_err(SessionError::RunDir)?;
    let work = work.cloned().unwrap_or_else(|| run_dir.clone());
    let plan: RunPlan = run_dir.read_json(PLAN_FILE).map_err(SessionError::RunDir)?;
    let stack = run_dir.read_stack().map_err(SessionError::RunDir)?;
    let python = match explicit {
        Some(choice) => Some(choice),
        None => planned_python(&plan).or_else(|| gpuprobe_runner::find_python(None, env).ok()),
    };
    let package_dir = gpuprobe_runner::extract_package(&work.path().join("python"))
        .map_err(SessionError::ExtractPackage)?;
    let mut notes = vec![format!("resumed run started {}", plan.started_at)];
    notes.extend(stack.replans.iter().cloned());
    let catalog = catalog_for(
        &plan,
        python.as_ref(),
        &package_dir,
        &work,
        host,
        &mut notes,
    );
    Ok(Reopened {
        run_dir,
        plan,
        python,
        package_dir,
        catalog,
        supervisor,
        notes,
    }
    .prepared(host))
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
pub(super) fn prepare_resume(
    dir: &Path,
    python_override: Option<&Path>,
    replan: bool,
    supervisor: SupervisorConfig,
    host: &SessionHost,
) -> Result<Prepared, SessionError> {
    let env = &host.env;
    let explicit = validate_python(python_override, env)?;
    let run_dir = RunDir::open(dir).map_err(SessionError::RunDir)?;
    let mut plan: RunPlan = run_dir.read_json(PLAN_FILE).map_err(SessionError::RunDir)?;
    let mut stack = run_dir.read_stack().map_err(SessionError::RunDir)?;
    let mut differences = Vec::new();
    let python = resume_interpreter(&plan, &stack, explicit, env, &mut differences);
    let tool_version = env!("CARGO_PKG_VERSION");
    if plan.tool_version != tool_version {
        differences.push(format!(
            "gpuprobe {} planned the run; this is gpuprobe {tool_version}",
            plan.tool_version
        ));
    }
    let package_dir = gpuprobe_runner::extract_package(&run_dir.path().join("python"))
        .map_err(SessionError::ExtractPackage)?;
    // Only asked when nothing else differs, since any difference already needs --replan.
    if differences.is_empty()
        && let (Some(run_torch), Some(choice)) = (&stack.torch, &python)
        && let Some(difference) =
            torch_moved(run_torch, choice, &package_dir, &run_dir, &supervisor)
    {
        differences.push(difference);
    }
    if !differences.is_empty() && !replan {
        return Err(SessionError::ResumeDiffers {
            dir: dir.to_path_buf(),
            differences,
        });
    }
    let mut notes = vec![format!("resumed run started {}", plan.started_at)];
    let catalog = catalog_for(
        &plan,
        python.as_ref(),
        &package_dir,
        &run_dir,
        host,
        &mut notes,
    );
    if !differences.is_empty() {
        record_replan(
            &run_dir,
            &mut plan,
            &mut stack,
            &catalog,
            python.as_ref(),
            &differences,
        )?;
    } else if replan {
        notes.push("--replan: nothing differs from the run's plan; resumed as planned".into());
    }
    notes.extend(stack.replans.iter().cloned());
    Ok(Reopened {
        run_dir,
        plan,
        python,
        package_dir,
        catalog,
        supervisor,
        notes,
    }
    .prepared(host))
}

/// The interpreter a resume runs under: `explicit` when given, else the run's own. Adds to
/// `differences` what makes it another stack than the run's (the run's interpreter gone,
/// another one named, none planned).
fn resume_interpreter(
    plan: &RunPlan,
    stack: &RunStack,
    explicit: Option<PythonChoice>,
    env: &BTreeMap<String, String>,
    differences: &mut Vec<String>,
) -> Option<PythonChoice> {
    let planned = planned_python(plan);
    if let Some(run) = &planned
        && explicit.is_none()
        && std::fs::metadata(&run.executable).is_err()
    {
        differences.push(format!(
            "the run's interpreter {} is gone",
            run.executable.display()
        ));
    }
    match (explicit, planned) {
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
        (None, Some(_)) => gpuprobe_runner::find_python(None, env).ok(),
        (None, None) => None,
    }
}

/// Whether the run's interpreter now reports another torch than the run's workers did (a
/// torch upgraded in place would otherwise pass unnoticed): the difference, worded, if so.
fn torch_moved(
    run_torch: &str,
    choice: &PythonChoice,
    package_dir: &Path,
    run_dir: &RunDir,
    supervisor: &SupervisorConfig,
) -> Option<String> {
    let now = gpuprobe_runner::fetch_env(
        choice,
        |plan| gpuprobe_runner::worker_command(&choice.executable, package_dir, plan),
        &run_dir.workers_dir().join("resume-env-plan.json"),
        supervisor.startup_timeout,
    );
    let now_torch = now.torch.as_ref().map(|t| t.version.as_str());
    if now_torch == Some(run_torch) {
        return None;
    }
    Some(format!(
        "the run's probes ran under torch {run_torch}; {} now reports {}",
        choice.executable.display(),
        match (now_torch, &now.torch_error) {
            (Some(version), _) => format!("torch {version}"),
            (None, Some(error)) => format!("no usable torch ({error})"),
            (None, None) => "no torch".into(),
        }
    ))
}

/// `--replan`: plans the run's tier, patterns and devices again under this interpreter and
/// this gpuprobe, keeps the results already recorded, and records why in the run's stack so
/// every later report says so.
fn record_replan(
    run_dir: &RunDir,
    plan: &mut RunPlan,
    stack: &mut RunStack,
    catalog: &[ProbeSpec],
    python: Option<&PythonChoice>,
    differences: &[String],
) -> Result<(), SessionError> {
    let (done, _) = run_dir.load_results().map_err(SessionError::RunDir)?;
    let replanned = replanned_tasks(plan, catalog);
    stack.replans.push(format!(
        "re-planned on resume (--replan): {}; the {} result(s) recorded before came from the \
             earlier plan, the rest from {} planned probe run(s) under {}",
        differences.join("; "),
        done.len(),
        replanned.len(),
        python
            .map(|p| p.executable.display().to_string())
            .unwrap_or_else(|| "no interpreter".into())
    ));
    stack.torch = None;
    plan.tasks = replanned;
    plan.tool_version = env!("CARGO_PKG_VERSION").to_string();
    plan.python = python.map(|p| p.executable.display().to_string());
    plan.python_chosen_by = python.map(|p| p.chosen_by.clone());
    run_dir
        .write_json(PLAN_FILE, &*plan)
        .map_err(SessionError::RunDir)?;
    run_dir.write_stack(stack).map_err(SessionError::RunDir)?;
    Ok(())
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

/// The catalog a reopened plan is run from: the Python probes its interpreter lists (the
/// framework-dependent families its tier needs), and the native ones when it has them.
fn catalog_for(
    plan: &RunPlan,
    python: Option<&PythonChoice>,
    package_dir: &Path,
    work: &RunDir,
    host: &SessionHost,
    notes: &mut Vec<String>,
) -> Vec<ProbeSpec> {
    let bytecode_cache = host.bytecode_cache.clone();
    let (mut catalog, _) = python_catalog_for(
        plan.tier,
        &plan.only,
        python,
        package_dir,
        work,
        bytecode_cache.as_deref(),
        notes,
    );
    if plan.native {
        catalog.extend(host.native_catalog.iter().cloned());
    }
    catalog
}

/// A plan's tasks made again from `catalog`: its tier and patterns, on every device it had
/// planned (the GPUs found while it ran included), spread as it was (each stack probe kept
/// on the GPU it had, a new one placed as a new plan would).
fn replanned_tasks(plan: &RunPlan, catalog: &[ProbeSpec]) -> Vec<Task> {
    let selected = plan::select(catalog, plan.tier, &plan.only);
    if let Some(spread) = &plan.spread {
        return spread::tasks(&selected, spread, &plan.tasks);
    }
    let mut devices: Vec<DeviceRef> = Vec::new();
    for task in &plan.tasks {
        if !devices.contains(&task.device) {
            devices.push(task.device);
        }
    }
    tasks_on(&devices, &selected)
}

/// A run directory reopened to run more of its plan (`fix` from a finished run, or
/// `check --resume`), with what it runs under.
struct Reopened {
    run_dir: RunDir,
    plan: RunPlan,
    python: Option<PythonChoice>,
    package_dir: PathBuf,
    catalog: Vec<ProbeSpec>,
    supervisor: SupervisorConfig,
    notes: Vec<String>,
}

impl Reopened {
    /// Ready to execute: the engine's configuration from the plan, as the run was planned.
    fn prepared(self, host: &SessionHost) -> Prepared {
        let Reopened {
            run_dir,
            plan,
            python,
            package_dir,
            catalog,
            supervisor,
            mut notes,
        } = self;
        if let Some(spread) = &plan.spread {
            notes.extend(spread::notes(spread, &plan.tasks));
        }
        let bytecode_cache = host.bytecode_cache.clone();
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
            options: worker_options(
                &plan.options,
                plan.tier,
                python.as_ref(),
                bytecode_cache.as_deref(),
            ),
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

/// The worker option naming the run's tier: a probe listed in a lower tier runs its whole
/// case list when the run is of the full tier (the sweep's standard subset runs a covering
/// subset of its value classes and call variants otherwise).
const TIER_OPTION: &str = "tier";

/// The options every worker's plan carries: the probe options, the run's tier, where the
/// native worker should look for runtime libraries, and the bytecode cache.
fn worker_options(
    probe_options: &BTreeMap<String, serde_json::Value>,
    tier: Tier,
    python: Option<&PythonChoice>,
    bytecode_cache: Option<&Path>,
) -> BTreeMap<String, serde_json::Value> {
    let mut options = native_library_hints(python);
    options.insert(TIER_OPTION.into(), serde_json::json!(tier.name()));
    add_bytecode_cache(&mut options, bytecode_cache);
    options.extend(probe_options.clone());
    options
}

/// The catalog query's options: the families to expand (which imports the framework) and
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
/// the sweep's operators (PyTorch's operator database, read at run time) for the full tier,
/// or when an `--only` pattern that may name one selects nothing from `listed` (the
/// catalog without them) in this tier nor in the full one. Listing them costs a framework
/// import and the database's (about 8 s on a busy host), so the other tiers do without:
/// every probe the listing adds is of the full tier, and their own sweep probes are listed
/// without it. A pattern that selects nothing in this tier but something of the standard
/// or full tier in `listed` gets the same note either way ("it matches probes of the
/// standard tier"); one that selects nothing there still gets the listing, so that its note
/// can say whether the full tier has it.
pub(super) fn expanded_families(
    tier: Tier,
    only: &[String],
    listed: &[ProbeSpec],
) -> Vec<&'static str> {
    let may_name_one = |pattern: &String| pattern.starts_with("sweep") || pattern.starts_with('*');
    let unmatched = |pattern: &String| {
        [tier, Tier::Full]
            .iter()
            .all(|t| plan::select(listed, *t, std::slice::from_ref(pattern)).is_empty())
    };
    if tier == Tier::Full || only.iter().any(|p| may_name_one(p) && unmatched(p)) {
        vec!["sweep"]
    } else {
        Vec::new()
    }
}

/// The Python probe catalog a run at `tier` with `only` needs: listed without the
/// framework first, then once more with the families [`expanded_families`] names, if any.
/// The full tier always expands, so it lists once. When the first listing found nothing
/// (no interpreter could list it), it is not tried again: that could only wait for the
/// same failure a second time. With the catalog, the GPUs the framework sees when the
/// listing used imported it (an expanding one), else `None`.
fn python_catalog_for(
    tier: Tier,
    only: &[String],
    python: Option<&PythonChoice>,
    package_dir: &Path,
    run_dir: &RunDir,
    bytecode_cache: Option<&Path>,
    notes: &mut Vec<String>,
) -> (Vec<ProbeSpec>, Option<Vec<TorchDevice>>) {
    let list = |expand: &[&str], notes: &mut Vec<String>| {
        python_catalog(python, package_dir, run_dir, expand, bytecode_cache, notes)
    };
    let parts = |listed: gpuprobe_runner::ListedCatalog| (listed.probes, listed.devices);
    if tier == Tier::Full {
        return parts(list(&expanded_families(tier, only, &[]), notes));
    }
    // The first listing's notes are kept only when it is the one used.
    let mut first_notes = Vec::new();
    let listed = list(&[], &mut first_notes);
    let expand = expanded_families(tier, only, &listed.probes);
    if listed.probes.is_empty() || expand.is_empty() {
        notes.extend(first_notes);
        return parts(listed);
    }
    parts(list(&expand, notes))
}

/// The Python probe catalog, from the user's interpreter, or from any `python3` when that
/// one cannot even start (the probes are then listed and reported NOT-TESTED with the
/// reason instead of vanishing).
fn python_catalog(
    python: Option<&PythonChoice>,
    package_dir: &Path,
    run_dir: &RunDir,
    expand: &[&str],
    bytecode_cache: Option<&Path>,
    notes: &mut Vec<String>,
) -> gpuprobe_runner::ListedCatalog {
    let options = catalog_options(expand, bytecode_cache);
    let plan_path = run_dir.workers_dir().join("catalog.json");
    // Listing the sweep's operators imports the framework and its operator database.
    let timeout = Duration::from_secs(if expand.is_empty() { 60 } else { 240 });
    let mut candidates: Vec<PathBuf> = python
        .map(|p| vec![p.executable.clone()])
        .unwrap_or_default();
    candidates.push(PathBuf::from("python3"));
    for (i, interpreter) in candidates.iter().enumerate() {
        let result = gpuprobe_runner::fetch_catalog(
            |plan| gpuprobe_runner::worker_command(interpreter, package_dir, plan),
            &plan_path,
            timeout,
            options.clone(),
        );
        match result {
            Ok(mut catalog) => {
                if i > 0 {
                    notes.push(format!("probe list taken from {}", interpreter.display()));
                    // Another interpreter's framework: not the GPUs the run's workers see.
                    catalog.devices = None;
                }
                return catalog;
            }
            Err(err) => notes.push(err),
        }
    }
    gpuprobe_runner::ListedCatalog::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session_options(spread: bool) -> SessionOptions {
        SessionOptions {
            command: "check",
            tier: Tier::Full,
            device: "all".into(),
            only: Vec::new(),
            python: None,
            simulate: None,
            run_dir: PathBuf::from("/runs/check-1"),
            no_native: true,
            spread,
            timeout_scale: 1.0,
            startup_timeout: 30.0,
            seed: 1,
            probe_options: BTreeMap::new(),
        }
    }

    #[test]
    fn every_gpu_asked_for_spreads_and_a_resumed_or_replanned_plan_spreads_the_same() {
        let h200 = |index| TorchDevice {
            index,
            name: "NVIDIA H200".into(),
            arch: Some("sm_90".into()),
            total_memory: Some(150_000_000_000),
            ..Default::default()
        };
        let two = [h200(0), h200(1)];
        let listed = DeviceRequest::Listed(vec![DeviceRef::Gpu(0), DeviceRef::Gpu(1)]);
        assert!(spread_for(&session_options(false), &DeviceRequest::All, Some(&two)).is_none());
        assert!(spread_for(&session_options(true), &listed, Some(&two)).is_none());
        assert!(spread_for(&session_options(true), &DeviceRequest::All, None).is_none());
        let spread = spread_for(&session_options(true), &DeviceRequest::All, Some(&two)).unwrap();

        let full = |id: &str, seconds: f64| ProbeSpec {
            tier: Tier::Full,
            typical_s: Some(seconds),
            ..crate::test_support::spec(id)
        };
        let catalog = vec![
            full("copy.h2d", 1.0),
            full("sweep.add.fp32", 4.0),
            full("sweep.mul.fp32", 3.0),
            full("width.index.int32", 2.0),
        ];
        let selected = plan::select(&catalog, Tier::Full, &[]);
        let planned = spread::tasks(&selected, &spread, &[]);
        let mut plan: RunPlan = serde_json::from_value(serde_json::json!({
            "tool_version": "0",
            "command": "check",
            "tier": "full",
            "seed": 1,
            "tasks": planned,
            "started_at": "2026-01-01T00:00:00Z",
            "spread": spread,
        }))
        .unwrap();
        // plan.json keeps it: a resume runs what is left where it was planned.
        let text = serde_json::to_string(&plan).unwrap();
        let reread: RunPlan = serde_json::from_str(&text).unwrap();
        assert_eq!(reread.spread.as_ref(), Some(&spread));
        let placed = |tasks: &[Task]| -> Vec<String> {
            tasks
                .iter()
                .map(|t| format!("{}@{}", t.spec.id, t.device))
                .collect()
        };
        assert_eq!(
            placed(&planned),
            [
                "copy.h2d@0",
                "sweep.add.fp32@0",
                "copy.h2d@1",
                "sweep.mul.fp32@1",
                "width.index.int32@1"
            ]
        );
        // --replan with today's catalog keeps each stack probe on its GPU.
        assert_eq!(
            placed(&replanned_tasks(&reread, &catalog)),
            placed(&planned)
        );
        // A plan from before (no spread recorded) re-plans every probe on every device.
        plan.spread = None;
        assert_eq!(replanned_tasks(&plan, &catalog).len(), 8);
        assert!(!serde_json::to_string(&plan).unwrap().contains("spread"));
    }

    #[test]
    fn workers_and_an_expanding_catalog_are_told_the_bytecode_cache() {
        let cache = Path::new("/c/gpuprobe/bytecode");
        let options = worker_options(&BTreeMap::new(), Tier::Full, None, Some(cache));
        assert_eq!(options[TIER_OPTION], serde_json::json!("full"));
        assert_eq!(
            options.get(BYTECODE_CACHE_OPTION),
            Some(&serde_json::json!("/c/gpuprobe/bytecode"))
        );
        assert!(
            !worker_options(&BTreeMap::new(), Tier::Quick, None, None)
                .contains_key(BYTECODE_CACHE_OPTION)
        );
        // Listing without expanding imports no framework: nothing to cache, nothing sent.
        assert!(catalog_options(&[], Some(cache)).is_empty());
        let expanding = catalog_options(&["sweep"], Some(cache));
        assert_eq!(expanding.get("expand"), Some(&serde_json::json!(["sweep"])));
        assert!(expanding.contains_key(BYTECODE_CACHE_OPTION));
    }

    #[test]
    fn only_the_full_tier_or_a_sweep_pattern_that_selects_nothing_lists_the_framework_probes() {
        let spec = |id: &str, tier: Tier| ProbeSpec {
            tier,
            ..crate::test_support::spec(id)
        };
        let listed = vec![
            spec("copy.h2d", Tier::Quick),
            spec("sweep.add.fp32", Tier::Standard),
            spec("sweep.opdb", Tier::Full),
        ];
        let only = |patterns: &[&str]| patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        let sweep: &[&str] = &["sweep"];
        let none: &[&str] = &[];
        assert_eq!(expanded_families(Tier::Full, &[], &listed), sweep);
        assert_eq!(expanded_families(Tier::Standard, &[], &listed), none);
        // The standard tier's sweep probes are all listed without the framework.
        assert_eq!(
            expanded_families(Tier::Standard, &only(&["sweep.*"]), &listed),
            none
        );
        assert_eq!(
            expanded_families(Tier::Standard, &only(&["*"]), &listed),
            none
        );
        assert_eq!(
            expanded_families(Tier::Standard, &only(&["sweep.add.fp32"]), &listed),
            none
        );
        // A sweep pattern that selects nothing: the listing says whether the full tier has it.
        let expands = |tier: Tier, pattern: &str| {
            !expanded_families(tier, &only(&[pattern]), &listed).is_empty()
        };
        assert!(expands(Tier::Standard, "sweep.cumsum"));
        assert!(expands(Tier::Soak, "sweep.cumsum"));
        // One that selects something of a higher tier without it: its note says which.
        assert!(!expands(Tier::Quick, "sweep.*"));
        assert!(!expands(Tier::Quick, "sweep.opdb"));
        assert!(!expands(Tier::Soak, "sweep.add"));
        // Other families never need it.
        assert_eq!(
            expanded_families(Tier::Quick, &only(&["rng.nothing"]), &listed),
            none
        );
    }
}
