//! `gpuprobe memtest`: the native VRAM pattern test, run in a supervised native worker so a
//! hung or crashing driver cannot take gpuprobe down with it.
//!
//! With `--json` stdout holds exactly one JSON document whatever happens: the report's
//! fields when the test ran, and always `status`, `reason`, `exit_code` and `exit_status`,
//! also when there is no report (no runtime, a crash, a hang) or gpuprobe refused to start
//! the test (an unusable run directory, a bad option). Scripts need the JSON most in the
//! cases where the test did not produce a report.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use gpuprobe_doctor::engine::{self, EngineConfig, Settings};
use gpuprobe_gpu::MemtestReport;
use gpuprobe_model::ExitStatus;
use gpuprobe_model::probe::DeviceRef;
use gpuprobe_model::text::visible_line;
use gpuprobe_model::verdict::{ProbeResult, Verdict};
use gpuprobe_runner::{KernelLogSource, RunDir, SupervisorConfig, Task};
use serde::Serialize;

use crate::cli::MemtestArgs;
use crate::{UserError, output, paths, user_error};

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

/// What the test produced: the probe's result, and its report when it wrote one.
struct Tested {
    result: ProbeResult,
    report: Option<MemtestReport>,
    /// Why a report that was there could not be read.
    unreadable: Option<String>,
    run_dir: PathBuf,
}

/// The `--json` document. The report's own fields sit at the top level when there is a
/// report (as they always did), next to the fields every outcome has.
#[derive(Serialize)]
struct JsonOutcome<'a> {
    command: &'static str,
    /// `passed`, `errors_found`, `crashed`, `hung`, `error`, `skipped`, `not_tested`,
    /// `usage_error` or `internal_failure`.
    status: &'static str,
    /// One line: what happened.
    reason: String,
    exit_code: u8,
    exit_status: ExitStatus,
    /// The GPU index tested (`--device`).
    gpu: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_dir: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<&'a Verdict>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stderr_tail: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    kernel_log: &'a [String],
    #[serde(flatten)]
    report: Option<&'a MemtestReport>,
}

/// The exit status a verdict earns.
fn status_of(verdict: &Verdict) -> ExitStatus {
    match verdict {
        Verdict::Pass => ExitStatus::AllPassed,
        Verdict::Skip { .. } | Verdict::NotTested { .. } => ExitStatus::NothingTested,
        _ => ExitStatus::ProblemsFound,
    }
}

/// The `status` word of a verdict.
fn status_word(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "passed",
        Verdict::Fail { .. } => "errors_found",
        Verdict::Crash { .. } => "crashed",
        Verdict::Hang { .. } => "hung",
        Verdict::Error { .. } => "error",
        Verdict::Skip { .. } => "skipped",
        Verdict::NotTested { .. } => "not_tested",
    }
}

/// Runs `memtest`.
pub fn run(args: MemtestArgs) -> Result<ExitStatus> {
    let tested = test(&args);
    if !args.json {
        return print_text(&args, &tested?);
    }
    match tested {
        Ok(tested) => {
            let status = status_of(&tested.result.verdict);
            let mut reason = match &tested.report {
                Some(report) => report.errors.diagnosis.join("; "),
                None => tested.result.verdict.detail(),
            };
            if let Some(why) = &tested.unreadable {
                reason.push_str(&format!(" (the memtest report could not be read: {why})"));
            }
            if reason.is_empty() {
                reason = status_word(&tested.result.verdict).replace('_', " ");
            }
            print_json(&JsonOutcome {
                command: "memtest",
                status: status_word(&tested.result.verdict),
                reason,
                exit_code: status.code(),
                exit_status: status,
                gpu: args.device,
                run_dir: Some(tested.run_dir.display().to_string()),
                verdict: Some(&tested.result.verdict),
                stderr_tail: &tested.result.stderr_tail,
                kernel_log: &tested.result.kernel_log,
                report: tested.report.as_ref(),
            })?;
            Ok(status)
        }
        Err(err) => {
            // gpuprobe refused or failed before the test: still one JSON document on stdout
            // (and the usual error line on stderr for whoever watches it).
            let status = if err.chain().any(|e| e.is::<UserError>()) {
                ExitStatus::UsageError
            } else {
                ExitStatus::InternalFailure
            };
            output::eprint_line(&format!("gpuprobe: error: {err:#}"));
            print_refusal(status, format!("{err:#}"), args.device)?;
            Ok(status)
        }
    }
}

/// The JSON document of a test gpuprobe did not start: a bad option or a failure before it.
fn print_refusal(status: ExitStatus, reason: String, gpu: u32) -> Result<()> {
    print_json(&JsonOutcome {
        command: "memtest",
        status: if status == ExitStatus::UsageError {
            "usage_error"
        } else {
            "internal_failure"
        },
        reason,
        exit_code: status.code(),
        exit_status: status,
        gpu,
        run_dir: None,
        verdict: None,
        stderr_tail: &[],
        kernel_log: &[],
        report: None,
    })
}

/// Whether a command line that the argument parser refused was `memtest ... --json`: its
/// caller expects JSON on stdout even then. Reads the raw words, since they did not parse.
pub(crate) fn wants_json(args: &[OsString]) -> bool {
    let words: Vec<&str> = args
        .iter()
        .skip(1)
        .map(|a| a.to_str().unwrap_or(""))
        .take_while(|a| *a != "--")
        .collect();
    words.iter().find(|w| !w.starts_with('-')) == Some(&"memtest") && words.contains(&"--json")
}

/// Prints the `usage_error` document for arguments the parser refused (`message` is its
/// explanation); the GPU is the `--device` given when it reads as one, else 0.
pub(crate) fn print_usage_error(message: &str, args: &[OsString]) -> Result<()> {
    let words: Vec<&str> = args.iter().map(|a| a.to_str().unwrap_or("")).collect();
    let device = words.iter().enumerate().find_map(|(i, w)| {
        w.strip_prefix("--device=").or_else(|| {
            (*w == "--device")
                .then(|| words.get(i + 1).copied())
                .flatten()
        })
    });
    let gpu = device.and_then(|d| d.trim().parse().ok()).unwrap_or(0);
    let reason = message
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("bad arguments")
        .trim_start_matches("error: ")
        .to_string();
    print_refusal(ExitStatus::UsageError, reason, gpu)
}

fn print_json(outcome: &JsonOutcome<'_>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string_pretty(outcome)?)?;
    out.flush()?;
    Ok(())
}

fn print_text(args: &MemtestArgs, tested: &Tested) -> Result<ExitStatus> {
    let result = &tested.result;
    // The device name, worker output and kernel log are external text.
    let mut out = output::stdout();
    match &tested.report {
        Some(report) => {
            write!(out, "{}", gpuprobe_gpu::render_memtest(report))?;
            writeln!(out, "run directory: {}", tested.run_dir.display())?;
        }
        None => {
            // No report: the test could not run (no runtime, crash, hang); say why.
            writeln!(
                out,
                "memtest on GPU {}: {} {}",
                args.device,
                result.verdict.label(),
                visible_line(&result.verdict.detail())
            )?;
            if let Some(why) = &tested.unreadable {
                writeln!(out, "  the memtest report could not be read: {why}")?;
            }
            for line in result.stderr_tail.iter().rev().take(5).rev() {
                writeln!(out, "  {}", visible_line(line))?;
            }
        }
    }
    // A fault the kernel printed while the test ran (an ECC or page fault, a reset) often
    // says more than the test's own result.
    if !result.kernel_log.is_empty() {
        writeln!(out, "kernel log while the test ran:")?;
        for line in &result.kernel_log {
            writeln!(out, "  {}", visible_line(line))?;
        }
    }
    out.flush()?;
    Ok(status_of(&result.verdict))
}

/// Runs the test in a supervised native worker.
fn test(args: &MemtestArgs) -> Result<Tested> {
    // --fraction and --passes are range-checked by the command line parser.
    let env = process_env();
    let mut options = BTreeMap::new();
    options.insert("fraction".to_string(), serde_json::json!(args.fraction));
    options.insert("passes".to_string(), serde_json::json!(args.passes));
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
            timeout_scale: f64::from(args.passes),
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
    let (report, unreadable) = match result
        .observation
        .as_ref()
        .and_then(gpuprobe_gpu::memtest_report_from)
    {
        Some(Ok(report)) => (Some(report), None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    Ok(Tested {
        result,
        report,
        unreadable,
        run_dir: run_dir.path().to_path_buf(),
    })
}
