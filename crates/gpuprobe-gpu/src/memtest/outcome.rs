//! What `gpuprobe memtest` reports once the supervised worker is done (or gpuprobe refused
//! to start it): the test's result and report put together ([`MemtestOutcome`]), the exit
//! status it earns, the text view, the one `--json` document every outcome has (a refusal
//! and a command line the parser refused included), and the `--inject-error` option.
//!
//! With `--json` stdout holds exactly one JSON document whatever happens: the report's
//! fields when the test ran, and always `status`, `reason`, `exit_code` and `exit_status`,
//! also when there is no report (no runtime, a crash, a hang) or gpuprobe refused to start
//! the test (an unusable run directory, a bad option). Scripts need the JSON most in the
//! cases where the test did not produce a report.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

use gpuprobe_model::visible_line;
use gpuprobe_model::{ClassifiedError, ExitStatus};
use gpuprobe_model::{ProbeResult, Verdict};
use serde::Serialize;

use super::report::{MemtestReport, memtest_report_from, render_memtest};

/// An `--inject-error` value that is not `BYTE_OFFSET:BIT` with a bit of a 64-bit word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InjectionArgError {
    /// No colon.
    #[error("--inject-error {0:?}: expected BYTE_OFFSET:BIT")]
    Malformed(String),
    /// The offset is not a number.
    #[error("--inject-error: bad offset {0:?}")]
    BadOffset(String),
    /// The bit is not a number.
    #[error("--inject-error: bad bit {0:?}")]
    BadBit(String),
    /// The bit is past 63.
    #[error("--inject-error: the bit must be 0..=63 (a bit of a 64-bit word)")]
    BitOutOfRange,
}

impl ClassifiedError for InjectionArgError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::UsageError
    }
}

/// The memtest probe's worker options: `fraction` of free memory, `passes`, and the error
/// to plant (`--inject-error BYTE_OFFSET:BIT`, a test of the test) when one is given.
pub fn probe_options(
    fraction: f64,
    passes: u32,
    inject_error: Option<&str>,
) -> Result<std::collections::BTreeMap<String, serde_json::Value>, InjectionArgError> {
    let mut options = std::collections::BTreeMap::new();
    options.insert("fraction".to_string(), serde_json::json!(fraction));
    options.insert("passes".to_string(), serde_json::json!(passes));
    if let Some(text) = inject_error {
        options.insert("inject_error".to_string(), parse_injection(text)?);
    }
    Ok(options)
}

/// The full memtest probe of this build's native catalog.
pub fn probe_spec() -> Option<gpuprobe_model::ProbeSpec> {
    crate::native_catalog()
        .into_iter()
        .find(|s| s.id.as_str() == crate::probes::ids::MEMTEST_FULL)
}

/// Parses `--inject-error BYTE_OFFSET:BIT` into the worker option's value.
pub(super) fn parse_injection(text: &str) -> Result<serde_json::Value, InjectionArgError> {
    let (offset, bit) = text
        .split_once(':')
        .ok_or_else(|| InjectionArgError::Malformed(text.to_owned()))?;
    let offset: u64 = offset
        .trim()
        .parse()
        .map_err(|_| InjectionArgError::BadOffset(offset.to_owned()))?;
    let bit: u64 = bit
        .trim()
        .parse()
        .map_err(|_| InjectionArgError::BadBit(bit.to_owned()))?;
    if bit > 63 {
        return Err(InjectionArgError::BitOutOfRange);
    }
    Ok(serde_json::json!({ "offset": offset, "bit": bit }))
}

/// What the test produced: the probe's result, and its report when it wrote one.
#[derive(Debug)]
pub struct MemtestOutcome {
    /// The memtest probe's result.
    pub result: ProbeResult,
    /// The report, when the worker wrote a readable one.
    pub report: Option<MemtestReport>,
    /// Why a report that was there could not be read.
    pub unreadable: Option<String>,
    /// The run directory.
    pub run_dir: PathBuf,
}

impl MemtestOutcome {
    /// Puts the outcome together from the probe's result, reading its report back.
    pub fn from_result(result: ProbeResult, run_dir: PathBuf) -> MemtestOutcome {
        let (report, unreadable) = match result.observation.as_ref().and_then(memtest_report_from) {
            Some(Ok(report)) => (Some(report), None),
            Some(Err(e)) => (None, Some(e.to_string())),
            None => (None, None),
        };
        MemtestOutcome {
            result,
            report,
            unreadable,
            run_dir,
        }
    }

    /// The exit status the test's verdict earns.
    pub fn exit_status(&self) -> ExitStatus {
        status_of(&self.result.verdict)
    }

    /// The text view; `gpu` is the index tested (`--device`).
    pub fn render_text(&self, gpu: u32) -> String {
        let result = &self.result;
        let mut out = String::new();
        // The device name, worker output and kernel log are external text.
        match &self.report {
            Some(report) => {
                out.push_str(&render_memtest(report));
                let _ = writeln!(out, "run directory: {}", self.run_dir.display());
            }
            None => {
                // No report: the test could not run (no runtime, crash, hang); say why.
                let _ = writeln!(
                    out,
                    "memtest on GPU {gpu}: {} {}",
                    result.verdict.label(),
                    visible_line(&result.verdict.detail())
                );
                if let Some(why) = &self.unreadable {
                    let _ = writeln!(out, "  the memtest report could not be read: {why}");
                }
                for line in result.stderr_tail.iter().rev().take(5).rev() {
                    let _ = writeln!(out, "  {}", visible_line(line));
                }
            }
        }
        // A fault the kernel printed while the test ran (an ECC or page fault, a reset)
        // often says more than the test's own result.
        if !result.kernel_log.is_empty() {
            out.push_str("kernel log while the test ran:\n");
            for line in &result.kernel_log {
                let _ = writeln!(out, "  {}", visible_line(line));
            }
        }
        out
    }

    /// The `--json` document (pretty-printed, no trailing newline); `gpu` is the index
    /// tested (`--device`).
    pub fn render_json(&self, gpu: u32) -> serde_json::Result<String> {
        let verdict = &self.result.verdict;
        let status = status_of(verdict);
        let mut reason = match &self.report {
            Some(report) => report.errors.diagnosis.join("; "),
            None => verdict.detail(),
        };
        if let Some(why) = &self.unreadable {
            reason.push_str(&format!(" (the memtest report could not be read: {why})"));
        }
        if reason.is_empty() {
            reason = status_word(verdict).replace('_', " ");
        }
        serde_json::to_string_pretty(&JsonOutcome {
            command: "memtest",
            status: status_word(verdict),
            reason,
            exit_code: status.code(),
            exit_status: status,
            gpu,
            run_dir: Some(self.run_dir.display().to_string()),
            verdict: Some(verdict),
            stderr_tail: &self.result.stderr_tail,
            kernel_log: &self.result.kernel_log,
            report: self.report.as_ref(),
        })
    }
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

/// The JSON document of a test gpuprobe did not start: a bad option or a failure before
/// it (`status` is `usage_error` or `internal_failure` by `status`).
pub fn render_refusal_json(
    status: ExitStatus,
    reason: String,
    gpu: u32,
) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&JsonOutcome {
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
pub fn wants_json(args: &[OsString]) -> bool {
    let words: Vec<&str> = args
        .iter()
        .skip(1)
        .map(|a| a.to_str().unwrap_or(""))
        .take_while(|a| *a != "--")
        .collect();
    words.iter().find(|w| !w.starts_with('-')) == Some(&"memtest") && words.contains(&"--json")
}

/// The `usage_error` document for arguments the parser refused (`message` is its
/// explanation); the GPU is the `--device` given when it reads as one, else 0.
pub fn render_usage_error_json(message: &str, args: &[OsString]) -> serde_json::Result<String> {
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
    render_refusal_json(ExitStatus::UsageError, reason, gpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn injection_values_parse_or_say_why_not() {
        assert_eq!(
            parse_injection("4096:3").unwrap(),
            serde_json::json!({ "offset": 4096, "bit": 3 })
        );
        let messages = ["x", "a:1", "1:b", "1:64"].map(|t| {
            let err = parse_injection(t).unwrap_err();
            assert_eq!(err.exit_status(), ExitStatus::UsageError);
            err.to_string()
        });
        assert_eq!(
            messages,
            [
                "--inject-error \"x\": expected BYTE_OFFSET:BIT",
                "--inject-error: bad offset \"a\"",
                "--inject-error: bad bit \"b\"",
                "--inject-error: the bit must be 0..=63 (a bit of a 64-bit word)",
            ]
        );
    }

    #[test]
    fn only_memtest_with_json_wants_json() {
        assert!(wants_json(&words("gpuprobe memtest --bogus --json")));
        assert!(!wants_json(&words("gpuprobe check --json")));
        assert!(!wants_json(&words("gpuprobe memtest -- --json")));
    }

    #[test]
    fn a_refused_command_line_names_the_device_and_the_first_line() {
        let json = render_usage_error_json(
            "error: unexpected argument '--bogus'\n\nUsage: ...",
            &words("gpuprobe memtest --device=2 --bogus --json"),
        )
        .unwrap();
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(doc["status"], "usage_error");
        assert_eq!(doc["gpu"], 2);
        assert_eq!(doc["exit_code"], 2);
        assert_eq!(doc["reason"], "unexpected argument '--bogus'");
    }
}
