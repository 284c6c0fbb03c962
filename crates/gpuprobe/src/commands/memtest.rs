//! `gpuprobe memtest`: the native VRAM pattern test, run in a supervised native worker so a
//! hung or crashing driver cannot take gpuprobe down with it.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use gpuprobe_doctor::engine::{self, EngineConfig, Settings};
use gpuprobe_model::ExitStatus;
use gpuprobe_model::probe::DeviceRef;
use gpuprobe_model::verdict::Verdict;
use gpuprobe_runner::{KernelLogSource, RunDir, SupervisorConfig, Task};

use crate::cli::MemtestArgs;
use crate::{paths, user_error};

use super::process_env;

fn parse_injection(text: &str) -> Result<serde_json::Value> {
    let (offset, bit) = text
        .split_once(':')
        .ok_or_else(|| user_error(format!("--inject-error {text:?}: expected BYTE_OFFSET:BIT")))?;
    let offset: u64 = offset
        .trim()
        .parse()
        .map_err(|_| user_error(format!("--inject-error: bad offset {offset:?}")))?;
    let bit: u64 = bit
        .trim()
        .parse()
        .map_err(|_| user_error(format!("--inject-error: bad bit {bit:?}")))?;
    if bit > 63 {
        return Err(user_error(
            "--inject-error: the bit must be 0..=63 (a bit of a 64-bit word)",
        ));
    }
    Ok(serde_json::json!({ "offset": offset, "bit": bit }))
}

/// Runs `memtest`.
pub fn run(args: MemtestArgs) -> Result<ExitStatus> {
    if !(args.fraction > 0.0 && args.fraction <= 1.0) {
        return Err(user_error("--fraction must be in (0, 1]"));
    }
    let env = process_env();
    let mut options = BTreeMap::new();
    options.insert("fraction".to_string(), serde_json::json!(args.fraction));
    options.insert("passes".to_string(), serde_json::json!(args.passes.max(1)));
    if let Some(text) = &args.inject_error {
        options.insert("inject_error".to_string(), parse_injection(text)?);
    }
    let run_path = args
        .run_dir
        .clone()
        .unwrap_or_else(|| paths::new_run_dir(&env, "memtest"));
    let run_dir = RunDir::create(&run_path).map_err(|e| user_error(e.to_string()))?;
    let spec = gpuprobe_gpu::native_catalog()
        .into_iter()
        .find(|s| s.id.as_str() == gpuprobe_gpu::probe_ids::MEMTEST_FULL)
        .ok_or_else(|| anyhow::anyhow!("this build has no memtest probe"))?;
    let device = DeviceRef::Gpu(args.device);
    let plan = engine::RunPlan {
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
    };
    run_dir
        .write_json(gpuprobe_runner::rundir::PLAN_FILE, &plan)
        .map_err(|e| user_error(e.to_string()))?;
    let config = EngineConfig {
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
            timeout_scale: f64::from(args.passes.max(1)),
            log_dir: Some(run_dir.workers_dir()),
            ..SupervisorConfig::default()
        },
        options,
        expected_devices: 1,
        kernel_log: KernelLogSource::Live,
    };
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
    let report = result
        .observation
        .as_ref()
        .and_then(gpuprobe_gpu::memtest_report_from)
        .transpose();
    let mut out = std::io::stdout().lock();
    match report {
        Ok(Some(report)) => {
            if args.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                write!(out, "{}", gpuprobe_gpu::render_memtest(&report))?;
                writeln!(out, "run directory: {}", run_dir.path().display())?;
            }
        }
        Ok(None) | Err(_) => {
            // No report: the test could not run (no runtime, crash, hang); say why.
            writeln!(
                out,
                "memtest on GPU {}: {} {}",
                args.device,
                result.verdict.label(),
                result.verdict.detail()
            )?;
            for line in result.stderr_tail.iter().rev().take(5).rev() {
                writeln!(out, "  {line}")?;
            }
        }
    }
    // A fault the kernel printed while the test ran (an ECC or page fault, a reset) often
    // says more than the test's own result.
    if !args.json && !result.kernel_log.is_empty() {
        writeln!(out, "kernel log while the test ran:")?;
        for line in &result.kernel_log {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(match &result.verdict {
        Verdict::Pass => ExitStatus::AllPassed,
        Verdict::Skip { .. } | Verdict::NotTested { .. } => ExitStatus::NothingTested,
        _ => ExitStatus::ProblemsFound,
    })
}
