//! The JUnit XML of a run, for CI systems: `<testsuites>` holding one `<testsuite>` per
//! device and probe family, one `<testcase classname="FAMILY" name="PROBE [DEVICE]">` per
//! probe run. FAIL is a `<failure>`, CRASH, HANG and ERROR an `<error>`, SKIP and
//! NOT-TESTED `<skipped>`; each suite's `<properties>` summarize the stack fingerprint. The
//! layout validates against the schema of the JUnit layout CI systems read (`junit.xsd`,
//! `crates/gpuprobe-report/tests/fixtures/junit/`).
//!
//! Probe details, worker output and fingerprint values can hold anything: every text and
//! attribute is XML-escaped, and the characters XML 1.0 forbids (control characters other
//! than tab, newline and carriage return) are replaced by U+FFFD. A SIMULATED run says so in
//! the name of its `<testsuites>`, in a property of every suite and in the message of every
//! failure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpuprobe_model::DeviceRef;
use gpuprobe_model::Report;
use gpuprobe_model::{ProbeResult, Verdict};

use super::Stack;

/// The longest `message` attribute, in characters; the element's text keeps the whole
/// detail.
const MAX_MESSAGE_CHARS: usize = 500;

/// Renders the report as one JUnit XML document.
pub fn render(report: &Report) -> String {
    let simulated = report.simulation.is_some();
    let mut suites: BTreeMap<(DeviceRef, &str), Vec<&ProbeResult>> = BTreeMap::new();
    for result in &report.results {
        suites
            .entry((result.device, result.probe.family()))
            .or_default()
            .push(result);
    }
    let properties = properties(report);
    let summary = report.summary;
    let total_time: f64 = report.results.iter().map(elapsed).sum();
    let mut name = format!("gpuprobe {} ({} tier)", report.command, report.tier.name());
    if simulated {
        name.push_str(" SIMULATED");
    }

    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{}\">",
        attribute(&name),
        summary.total,
        summary.failed,
        summary.crashed + summary.hung + summary.errors,
        seconds(total_time),
    );
    for (id, ((device, family), results)) in suites.iter().enumerate() {
        let count =
            |pick: fn(&Verdict) -> bool| results.iter().filter(|r| pick(&r.verdict)).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" package=\"gpuprobe\" id=\"{id}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\" timestamp=\"{}\" hostname=\"{}\">",
            attribute(&format!("{family} [{}]", device.torch_name())),
            results.len(),
            count(|v| matches!(v, Verdict::Fail { .. })),
            count(|v| matches!(
                v,
                Verdict::Crash { .. } | Verdict::Hang { .. } | Verdict::Error { .. }
            )),
            count(|v| matches!(v, Verdict::Skip { .. } | Verdict::NotTested { .. })),
            seconds(results.iter().copied().map(elapsed).sum()),
            attribute(&report.started_at),
            attribute(
                report
                    .fingerprint
                    .host
                    .hostname
                    .as_deref()
                    .unwrap_or("localhost")
            ),
        );
        out.push_str("    <properties>\n");
        for (name, value) in &properties {
            let _ = writeln!(
                out,
                "      <property name=\"{}\" value=\"{}\"/>",
                attribute(name),
                attribute(value)
            );
        }
        out.push_str("    </properties>\n");
        for result in results {
            testcase(&mut out, family, result);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn testcase(out: &mut String, family: &str, result: &ProbeResult) {
    let _ = write!(
        out,
        "    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"",
        attribute(family),
        attribute(&format!(
            "{} [{}]",
            result.probe.as_str(),
            result.device.torch_name()
        )),
        seconds(elapsed(result)),
    );
    let marker = if result.simulated { "SIMULATED: " } else { "" };
    let message = format!("{marker}{}", result.verdict.detail());
    let (element, kind) = match &result.verdict {
        Verdict::Pass => {
            out.push_str("/>\n");
            return;
        }
        Verdict::Fail { class, .. } => ("failure", class.describe().to_string()),
        Verdict::Crash { .. } | Verdict::Hang { .. } | Verdict::Error { .. } => {
            ("error", result.verdict.label().to_string())
        }
        Verdict::Skip { .. } | Verdict::NotTested { .. } => {
            let _ = writeln!(
                out,
                ">\n      <skipped message=\"{}\" type=\"{}\"/>\n    </testcase>",
                attribute(&clip(&message)),
                result.verdict.label()
            );
            return;
        }
    };
    let mut body = message.clone();
    for (heading, lines) in [
        ("worker stderr", &result.stderr_tail),
        ("kernel log", &result.kernel_log),
        ("settings", &result.settings),
    ] {
        if !lines.is_empty() {
            let _ = write!(body, "\n\n{heading}:\n{}", lines.join("\n"));
        }
    }
    let _ = writeln!(
        out,
        ">\n      <{element} message=\"{}\" type=\"{}\">{}</{element}>\n    </testcase>",
        attribute(&clip(&message)),
        attribute(&kind),
        text(&body),
    );
}

/// The stack fingerprint's summary and the run's facts, as `(name, value)` pairs.
fn properties(report: &Report) -> Vec<(String, String)> {
    let stack = Stack::of(report);
    let fp = &report.fingerprint;
    let mut props: Vec<(String, String)> = vec![
        ("gpuprobe.version".into(), report.tool_version.clone()),
        ("gpuprobe.commit".into(), stack.commit),
        ("gpuprobe.kb_version".into(), stack.kb_version),
        ("run.command".into(), report.command.clone()),
        ("run.tier".into(), report.tier.name().into()),
        ("run.started_at".into(), report.started_at.clone()),
        ("run.wall_s".into(), seconds(report.wall_s)),
        ("run.exit_code".into(), report.exit_code.to_string()),
        (
            "run.simulated".into(),
            report.simulation.is_some().to_string(),
        ),
    ];
    if let Some(sim) = &report.simulation {
        props.push(("run.simulation".into(), sim.source.clone()));
    }
    let host = &fp.host;
    for (name, value) in [
        ("host.os", host.distro_pretty.as_ref().or(host.os.as_ref())),
        ("host.kernel", host.kernel_release.as_ref()),
        ("host.cpu", host.cpu_model.as_ref()),
        (
            "python.version",
            fp.python.as_ref().and_then(|p| p.version.as_ref()),
        ),
    ] {
        if let Some(value) = value {
            props.push((name.into(), value.clone()));
        }
    }
    props.push(("torch.version".into(), stack.torch));
    props.push(("driver.version".into(), stack.driver));
    for (i, gpu) in fp.gpus.iter().enumerate() {
        let index = gpu.index.map_or(i as u32, |index| index);
        let mut words = vec![gpu.name.clone().unwrap_or_else(|| "unknown GPU".into())];
        words.extend(gpu.native_isa.clone());
        props.push((format!("gpu.{index}"), words.join(" ")));
    }
    props
}

fn elapsed(result: &ProbeResult) -> f64 {
    result
        .elapsed_s
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(0.0)
}

/// Seconds as the schema's time type wants them: digits, a point, three decimals.
fn seconds(value: f64) -> String {
    // Not `>= 0.0`: an empty sum is -0.0, which would print as `-0.000`.
    let value = if value.is_finite() && value > 0.0 {
        value
    } else {
        0.0
    };
    format!("{value:.3}")
}

/// The first line of a message, cut to [`MAX_MESSAGE_CHARS`].
fn clip(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default();
    match line.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// A character XML 1.0 allows in a document (`Char` of the XML 1.0 grammar), C1 controls
/// excluded as well: they are allowed but discouraged, and mean nothing in a report.
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || !(c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}')
}

/// Element text: `&`, `<` and `>` escaped (so `]]>` and `</failure>` stay text), forbidden
/// characters replaced.
pub(crate) fn text(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if !allowed(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// An attribute value between double quotes: [`text`]'s escapes, the quotes, and tab,
/// newline and carriage return as character references (a parser would otherwise turn
/// them into spaces).
pub(crate) fn attribute(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c => out.push_str(&text(c.encode_utf8(&mut [0; 4]))),
        }
    }
    out
}
