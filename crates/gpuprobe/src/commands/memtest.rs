//! `gpuprobe memtest`: the native VRAM pattern test, run in a supervised native worker so a
//! hung or crashing driver cannot take gpuprobe down with it. What it reports, text and the
//! one `--json` document every outcome has, is `gpuprobe_gpu::memtest::MemtestOutcome`'s.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use gpuprobe_doctor::engine::{self, EngineConfig, Settings};
use gpuprobe_gpu::memtest::{self as outcome, MemtestOutcome};
use gpuprobe_model::ExitStatus;
use gpuprobe_model::probe::{DeviceRef, ProbeSpec};
use gpuprobe_runner::{KernelLogSource, RunDir, SupervisorConfig, Task};

use crate::cli::MemtestArgs;
use crate::{output, paths};

use super::process_env;

/// Runs `memtest`.
pub(crate) fn run(args: MemtestArgs) -> Result<ExitStatus> {
    let tested = test(&args);
    if !args.json {
        let tested = tested?;
        let mut out = output::stdout();
        write!(out, "{}", tested.render_text(args.device))?;
        out.flush()?;
        return Ok(tested.exit_status());
    }
    match tested {
        Ok(tested) => {
            print_json(&tested.render_json(args.device)?)?;
            Ok(tested.exit_status())
        }
        Err(err) => {
            // gpuprobe refused or failed before the test: still one JSON document on stdout
            // (and the usual error line on stderr for whoever watches it).
            let (status, message) = crate::errors::exit_status_and_message(&err);
            output::eprint_line(&format!("gpuprobe: error: {message}"));
            print_json(&outcome::render_refusal_json(status, message, args.device)?)?;
            Ok(status)
        }
    }
}

/// Whether a command line that the argument parser refused was `memtest ... --json`.
pub(crate) fn wants_json(args: &[OsString]) -> bool {
    outcome::wants_json(args)
}

/// Prints the `usage_error` document for arguments the parser refused (`message` is its
/// explanation).
pub(crate) fn print_usage_error(message: &str, args: &[OsString]) -> Result<()> {
    print_json(&outcome::render_usage_error_json(message, args)?)
}

fn print_json(document: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{document}")?;
    out.flush()?;
    Ok(())
}

/// Runs the test in a supervised native worker.
fn test(args: &MemtestArgs) -> Result<MemtestOutcome> {
    // --fraction and --passes are range-checked by the command line parser.
    let env = process_env();
    let mut options = BTreeMap::new();
    options.insert("fraction".to_string(), serde_json::json!(args.fraction));
    options.insert("passes".to_string(), serde_json::json!(args.passes));
    if let Some(text) = &args.inject_error {
        options.insert("inject_error".to_string(), outcome::parse_injection(text)?);
    }
    let run_path = args
        .run_dir
        .clone()
        .unwrap_or_else(|| paths::new_run_dir(&env, "memtest"));
    let run_dir = RunDir::create(&run_path)?;
    let spec = gpuprobe_gpu::native_catalog()
        .into_iter()
        .find(|s| s.id.as_str() == gpuprobe_gpu::probe_ids::MEMTEST_FULL)
        .ok_or_else(|| anyhow::anyhow!("this build has no memtest probe"))?;
    let device = DeviceRef::Gpu(args.device);
    let plan = run_plan(&spec, device, &options);
    run_dir.write_json(gpuprobe_runner::rundir::PLAN_FILE, &plan)?;
    let config = engine_config(args, &run_dir, options);
    let lanes = engine::lanes_for(vec![Task { spec, device }]);
    let execution = engine::execute(
        lanes,
        &config,
        &run_dir,
        &mut |_, _, _| Vec::new(),
        &mut |_| {},
    );
    let result = execution
        .results
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("the memtest produced no result"))?;
    Ok(MemtestOutcome::from_result(
        result,
        run_dir.path().to_path_buf(),
    ))
}

/// The plan written to the run directory: the memtest probe alone, natively, on `device`.
fn run_plan(
    spec: &ProbeSpec,
    device: DeviceRef,
    options: &BTreeMap<String, serde_json::Value>,
) -> engine::RunPlan {
    engine::RunPlan {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
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
        options: options.clone(),
        tasks: vec![engine::PlannedTask {
            spec: spec.clone(),
            device,
        }],
        started_at: crate::time::rfc3339(SystemTime::now()),
    }
}

/// The engine's settings: one native worker, its timeout scaled by the passes.
fn engine_config(
    args: &MemtestArgs,
    run_dir: &RunDir,
    options: BTreeMap<String, serde_json::Value>,
) -> EngineConfig {
    EngineConfig {
        python: None,
        package_dir: None,
        native_program: std::env::current_exe().ok(),
        seed: 0,
        simulate: None,
        settings: Settings::default(),
        supervisor: SupervisorConfig {
            startup_timeout: Duration::from_secs(120),
            between_probes_timeout: Duration::from_secs(120),
            // The probe's own timeout covers a full pass at low bandwidth; more passes take longer.
            timeout_scale: f64::from(args.passes),
            log_dir: Some(run_dir.workers_dir()),
            ..SupervisorConfig::default()
        },
        options,
        expected_devices: 1,
        kernel_log: KernelLogSource::Live,
    }
}
