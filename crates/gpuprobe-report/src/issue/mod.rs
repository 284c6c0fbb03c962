//! ISSUE.md: a GitHub-ready issue body for one failing probe result, rendered from the
//! report (fingerprint, findings), the result, the repro manifest, the captured run of the
//! script and the `fix` account that searched from the run. Pure: [`render`] takes the data
//! and returns the markdown, so `gpuprobe repro` writes it and the HTML report embeds it.
//!
//! Every piece of text from outside (worker output, details, the script's output, paths,
//! setting values, KB titles) is inert in the markdown: inline text is escaped
//! ([`inline`]), blocks are fenced with a fence longer than any backtick run they hold
//! ([`fenced`]), and control characters are written out visibly in both.

use std::fmt::Write as _;

use gpuprobe_model::FixAccount;
use gpuprobe_model::Layer;
use gpuprobe_model::Report;
use gpuprobe_model::Vendor;
use gpuprobe_model::{Finding, FindingLayer};
use gpuprobe_model::{ProbeResult, Verdict};
use gpuprobe_model::{Repro, ReproManifest, ScriptOutcome, ScriptRun};
use gpuprobe_model::{visible, visible_line};

/// Scripts longer than this many lines are attached rather than shown inline.
const INLINE_SCRIPT_LINES: usize = 150;
/// The most lines of the script's captured output shown.
const OUTPUT_LINES: usize = 60;

/// Everything ISSUE.md is made of. No I/O: the caller reads the files.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IssueInput<'a> {
    /// The run's report.
    pub report: &'a Report,
    /// The failing result.
    pub result: &'a ProbeResult,
    /// The generator's `repro.json`, when a script was made.
    pub manifest: Option<&'a ReproManifest>,
    /// The script's text (`repro.py`), when one was made.
    pub script: Option<&'a str>,
    /// The captured run of the script, when it ran.
    pub run: Option<&'a ScriptRun>,
    /// The account of a `fix` that searched from this run, when one did.
    pub fix: Option<&'a FixAccount>,
}

/// Inline text made inert: control characters visible, markdown and HTML characters
/// escaped, on one line.
pub(crate) fn inline(text: &str) -> String {
    let text = visible_line(text);
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            // `(` and `!` are harmless once `[` and `]` are escaped: no link can form.
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A fenced block holding `text` verbatim (control characters visible): its fence is one
/// backtick longer than the longest run of backticks inside, so nothing can close it early.
pub(crate) fn fenced(lang: &str, text: &str) -> String {
    let text = visible(text);
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.trim_end_matches('\n');
    format!("{fence}{lang}\n{body}\n{fence}\n")
}

/// The project to file the failure with, and why, from the layer the result and the
/// diagnosis place it in, the probe's family and the GPU vendor.
pub(crate) fn upstream(
    result: &ProbeResult,
    findings: &[&Finding],
    vendor: Option<Vendor>,
) -> (String, String) {
    let id = result.probe.as_str();
    let amd = vendor == Some(Vendor::Amd);
    let nvidia = vendor == Some(Vendor::Nvidia);
    // A diagnosis that places it below the framework wins over the probe's own layer.
    let layer = findings
        .iter()
        .filter(|f| f.source == "diagnosis" || f.source == "kb")
        .map(|f| f.layer)
        .min()
        .map(|l| match l {
            FindingLayer::System => Layer::System,
            FindingLayer::Runtime => Layer::Runtime,
            FindingLayer::Framework => Layer::Framework,
            FindingLayer::Pipeline => Layer::Pipeline,
            FindingLayer::Job | FindingLayer::Config => result.layer,
        })
        .map_or(result.layer, |l| l.min(result.layer));
    let gpu_lib = |amd_lib: &str, nv_lib: &str| {
        if amd {
            amd_lib.to_string()
        } else if nvidia {
            nv_lib.to_string()
        } else {
            format!("{amd_lib} (AMD) or {nv_lib} (NVIDIA)")
        }
    };
    match layer {
        Layer::System => (
            if amd {
                "the kernel driver (amdgpu, with the distribution or ROCm/ROCK-Kernel-Driver)"
                    .into()
            } else if nvidia {
                "the kernel driver (NVIDIA driver, NVIDIA developer forums)".into()
            } else {
                "the kernel driver".into()
            },
            "the failure is placed in the system layer (kernel, driver, firmware): the \
             diagnosis points below the GPU runtime"
                .into(),
        ),
        Layer::Runtime => (
            gpu_lib(
                "ROCm/HIP (ROCm/clr)",
                "the CUDA driver (NVIDIA developer forums)",
            ),
            "the failure is placed in the runtime layer: the native CUDA/HIP copies or \
             kernels give it without PyTorch"
                .into(),
        ),
        Layer::Framework => {
            let family: Vec<&str> = id.split('.').take(2).collect();
            let (project, why) = match family.as_slice() {
                ["ops", "matmul"] | ["sweep", "matmul"] | ["ops", "bmm"] => (
                    gpu_lib("rocBLAS/hipBLASLt (with PyTorch)", "cuBLAS (with PyTorch)"),
                    "a matrix product is computed by the vendor BLAS under PyTorch",
                ),
                ["nn", "conv"] | ["nn", "conv2d"] | ["ops", "conv"] => (
                    gpu_lib("MIOpen (with PyTorch)", "cuDNN (with PyTorch)"),
                    "a convolution is computed by the vendor DNN library under PyTorch",
                ),
                _ => (
                    "PyTorch (pytorch/pytorch)".to_string(),
                    "the failure is placed in the framework layer: a PyTorch operation gives it",
                ),
            };
            (project, why.to_string())
        }
        Layer::Pipeline => {
            let project = if id.contains("accelerate") {
                "Accelerate (huggingface/accelerate)"
            } else if id.contains("safetensors") {
                "safetensors (huggingface/safetensors)"
            } else {
                "PyTorch (pytorch/pytorch; DataLoader)"
            };
            (
                project.into(),
                "the failure is placed in the pipeline layer (data loading, Accelerate, \
                 serialization)"
                    .into(),
            )
        }
        Layer::Job => (
            "the project whose job fails".into(),
            "the failure is placed in the user's own job".into(),
        ),
    }
}

/// The findings about this result: those whose evidence or related probes name it.
fn related<'a>(report: &'a Report, result: &ProbeResult) -> Vec<&'a Finding> {
    report
        .findings
        .iter()
        .filter(|f| {
            f.evidence.iter().any(|e| {
                e.probe.as_ref() == Some(&result.probe) || e.text.contains(result.probe.as_str())
            })
        })
        .collect()
}

/// The one-line title.
pub(crate) fn title(input: &IssueInput<'_>) -> String {
    let r = input.result;
    let what = match &r.verdict {
        Verdict::Fail { class, .. } => format!("gives wrong results ({})", class.describe()),
        Verdict::Crash {
            signal: Some(s), ..
        } => format!("crashes (signal {s})"),
        Verdict::Crash { .. } => "crashes".into(),
        Verdict::Hang { .. } => "hangs".into(),
        Verdict::Error { .. } => "raises an error".into(),
        other => format!("is {}", other.label()),
    };
    let fp = &input.report.fingerprint;
    let gpu = fp
        .gpus
        .iter()
        .find_map(|g| g.name.clone())
        .unwrap_or_else(|| r.device.torch_name());
    let torch = fp
        .python
        .as_ref()
        .and_then(|p| p.torch.as_ref())
        .map(|t| format!(" with torch {}", t.version))
        .unwrap_or_default();
    let prefix = if simulated(input) { "[SIMULATED] " } else { "" };
    format!(
        "{prefix}{}",
        inline(&format!("{} {what} on {gpu}{torch}", r.probe.as_str()))
    )
}

fn simulated(input: &IssueInput<'_>) -> bool {
    input.result.simulated
        || input.report.simulation.is_some()
        || input.manifest.is_some_and(|m| m.simulated)
        || input.run.is_some_and(|r| r.simulated)
}

/// The relevant lines of the fingerprint.
fn environment_lines(report: &Report) -> Vec<String> {
    let fp = &report.fingerprint;
    let mut lines = Vec::new();
    for gpu in &fp.gpus {
        let mut parts = vec![gpu.name.clone().unwrap_or_else(|| "GPU".into())];
        parts.extend(gpu.effective_isa().map(str::to_string));
        parts.extend(gpu.compute_capability.as_ref().map(|c| format!("sm {c}")));
        let index = gpu.index.map(|i| format!("GPU {i}: ")).unwrap_or_default();
        lines.push(format!("{index}{}", parts.join(", ")));
    }
    if fp.gpus.is_empty() {
        lines.push("no GPU found".into());
    }
    if let Some(os) = fp.host.distro_pretty.as_ref().or(fp.host.os.as_ref()) {
        lines.push(format!("OS: {os}"));
    }
    if let Some(kernel) = &fp.host.kernel_release {
        lines.push(format!("kernel: {kernel}"));
    }
    if let Some(d) = &fp.nvidia {
        lines.push(format!(
            "NVIDIA driver: {} (CUDA driver API {})",
            d.version.as_deref().unwrap_or("?"),
            d.cuda_driver_version.as_deref().unwrap_or("?")
        ));
    }
    if let Some(d) = &fp.amdgpu {
        lines.push(format!(
            "amdgpu: {}",
            d.version.as_deref().unwrap_or("in-kernel")
        ));
    }
    if let Some(r) = &fp.rocm {
        lines.push(format!(
            "ROCm: {} (HIP {})",
            r.version.as_deref().unwrap_or("?"),
            r.hip_version.as_deref().unwrap_or("?")
        ));
    }
    if let Some(c) = fp.cuda.as_ref().and_then(|c| c.runtime_version.as_ref()) {
        lines.push(format!("CUDA runtime: {c}"));
    }
    if let Some(py) = &fp.python {
        lines.push(format!("Python: {}", py.version.as_deref().unwrap_or("?")));
        match &py.torch {
            Some(t) => {
                let build = t
                    .hip
                    .as_ref()
                    .map(|h| format!(" (HIP {h})"))
                    .or(t.cuda.as_ref().map(|c| format!(" (CUDA {c})")))
                    .unwrap_or_default();
                lines.push(format!("torch: {}{build}", t.version));
            }
            None => lines.push("torch: not importable".into()),
        }
    }
    match &report.build {
        Some(build) => lines.push(format!(
            "gpuprobe: {} (commit {}, kb {})",
            report.tool_version,
            visible_line(&build.commit),
            visible_line(&build.kb_revision)
        )),
        None => lines.push(format!("gpuprobe: {}", report.tool_version)),
    }
    lines
}

/// The fingerprint's text without the host's name: an issue body is public.
fn public_fingerprint(fp: &gpuprobe_model::Fingerprint) -> String {
    gpuprobe_detect::render_text(fp)
        .lines()
        .filter(|l| !l.trim_start().starts_with("Hostname"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// ISSUE.md for one failing result.
pub(crate) fn render(input: &IssueInput<'_>) -> String {
    let r = input.result;
    let report = input.report;
    let sim = simulated(input);
    let findings = related(report, r);
    let vendor = report.fingerprint.gpus.first().map(|g| g.vendor);
    let mut md = String::new();
    let _ = writeln!(md, "# {}\n", title(input));
    if sim {
        let source = report
            .simulation
            .as_ref()
            .map(|s| format!(" ({})", inline(&s.source)))
            .unwrap_or_default();
        let _ = writeln!(
            md,
            "> **SIMULATED.** This failure was produced by gpuprobe's fault simulation{source}, \
             not by real hardware or software. Do not file it upstream.\n"
        );
    }

    // What goes wrong.
    let _ = writeln!(md, "## What goes wrong\n");
    let verdict_words = match &r.verdict {
        Verdict::Fail { .. } => "computes a wrong result",
        Verdict::Crash { .. } => "crashes the process",
        Verdict::Hang { .. } => "hangs (no result in time)",
        Verdict::Error { .. } => "raises an error",
        _ => "does not pass",
    };
    let _ = writeln!(
        md,
        "The probe `{}` {verdict_words} on device `{}` ({}: {}).",
        visible_line(r.probe.as_str()).replace('`', "'"),
        r.device.torch_name(),
        r.verdict.label(),
        inline(&r.verdict.detail())
    );
    if let Some(m) = input.manifest {
        if !m.summary.is_empty() {
            let _ = writeln!(
                md,
                "\nThe case: {}.",
                inline(m.summary.trim_end_matches('.'))
            );
        }
        if !m.reference.is_empty() {
            let _ = writeln!(
                md,
                "Compared with: {}.",
                inline(m.reference.trim_end_matches('.'))
            );
        }
        if !m.tolerance.is_empty() {
            let _ = writeln!(
                md,
                "Tolerance: {}.",
                inline(m.tolerance.trim_end_matches('.'))
            );
        }
    }
    if !r.settings.is_empty() {
        let settings: Vec<String> = r
            .settings
            .iter()
            .map(|s| format!("`{}`", inline_code(s)))
            .collect();
        let _ = writeln!(
            md,
            "\nSettings applied to the run: {}.",
            settings.join(", ")
        );
    }
    if !r.stderr_tail.is_empty() {
        let _ = writeln!(md, "\nThe last lines the process wrote to stderr:\n");
        md.push_str(&fenced("text", &r.stderr_tail.join("\n")));
    }
    let (project, why) = upstream(r, &findings, vendor);
    let _ = writeln!(md, "\n**Where to file it:** {project}: {why}.");
    if sim {
        let _ = writeln!(md, "(SIMULATED: there is nothing to file.)");
    }

    // The repro.
    let _ = writeln!(md, "\n## Reproduce\n");
    match (input.manifest, input.script) {
        (Some(m), Some(script)) => {
            let kind = if m.kind == "ctypes" {
                "Python with ctypes against the CUDA driver API (libcuda.so.1) or HIP \
                 (libamdhip64.so); no PyTorch needed"
            } else {
                "Python"
            };
            let needs = if m.needs.is_empty() {
                "the standard library only".to_string()
            } else {
                m.needs
                    .iter()
                    .map(|n| inline(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                md,
                "A standalone script ({kind}; needs {needs}). Run `python repro.py` (exit 1 \
                 and `REPRODUCED: ...` when the bug is there, exit 0 and `NOT REPRODUCED: ...` \
                 when it is not).\n"
            );
            if sim {
                let _ = writeln!(
                    md,
                    "SIMULATED: on a healthy stack this script does not reproduce anything; \
                     gpuprobe ran it with its fault simulation installed.\n"
                );
            }
            if script.lines().count() <= INLINE_SCRIPT_LINES {
                md.push_str(&fenced("python", script));
            } else {
                let _ = writeln!(
                    md,
                    "The script ({} lines) is attached as `repro.py`.",
                    script.lines().count()
                );
            }
        }
        _ => {
            let _ = writeln!(
                md,
                "No standalone script is attached: `gpuprobe repro {}` makes one where the \
                 probe's family has a generator (docs/repro.md).",
                visible_line(r.probe.as_str()).replace('`', "'")
            );
        }
    }

    // Observed and expected.
    let _ = writeln!(md, "\n## Observed\n");
    match input.run {
        Some(run) => {
            let how = match run.outcome {
                ScriptOutcome::TimedOut => {
                    format!("did not finish in {:.0} s and was killed", run.elapsed_s)
                }
                _ => match (run.exit_code, run.signal) {
                    (Some(code), _) => format!("exited {code} after {:.1} s", run.elapsed_s),
                    (None, Some(sig)) => {
                        format!("was killed by signal {sig} after {:.1} s", run.elapsed_s)
                    }
                    (None, None) => format!("ended after {:.1} s", run.elapsed_s),
                },
            };
            let label = if run.simulated { " (SIMULATED)" } else { "" };
            let _ = writeln!(
                md,
                "`{}`{label} {how}: **{}**.\n",
                inline_code(&run.command),
                run.outcome.label()
            );
            md.push_str(&fenced("text", &tail(&run.stdout, OUTPUT_LINES)));
            if !run.stderr.trim().is_empty() {
                let _ = writeln!(md, "\nstderr:\n");
                md.push_str(&fenced("text", &tail(&run.stderr, OUTPUT_LINES)));
            }
        }
        None => {
            let _ = writeln!(md, "The script was not run here; gpuprobe observed:\n");
            md.push_str(&fenced(
                "text",
                &format!("{} {}", r.verdict.label(), r.verdict.detail()),
            ));
        }
    }
    let _ = writeln!(md, "\n## Expected\n");
    let _ = writeln!(
        md,
        "On a healthy stack the script prints the same header and comparison with no \
         differing elements, ends with a line `NOT REPRODUCED: ...` and exits 0."
    );

    // Environment.
    let _ = writeln!(md, "\n## Environment\n");
    for line in environment_lines(report) {
        let _ = writeln!(md, "- {}", inline(&line));
    }
    let _ = writeln!(
        md,
        "\n<details><summary>Full fingerprint</summary>\n\n{}\n</details>",
        fenced("text", &public_fingerprint(&report.fingerprint))
    );

    // Known issues.
    let _ = writeln!(md, "\n## Related known issues\n");
    if findings.is_empty() {
        let _ = writeln!(md, "gpuprobe's knowledge base names none for this probe.");
    }
    for f in &findings {
        let link = f
            .citations
            .iter()
            .find(|c| c.starts_with("https://"))
            .map(|url| format!(" ([source](<{}>))", url.replace(['<', '>', ' '], "")))
            .unwrap_or_default();
        let cited = f
            .citations
            .iter()
            .filter(|c| !c.starts_with("https://") && !c.starts_with("http://"))
            .map(|c| inline(c))
            .collect::<Vec<_>>();
        let cited = if cited.is_empty() {
            String::new()
        } else {
            format!("; {}", cited.join(", "))
        };
        let _ = writeln!(
            md,
            "- **{}** ({}, {}): {}{cited}{link}",
            inline(&f.id),
            f.layer.name(),
            format!("{:?}", f.confidence).to_lowercase(),
            inline(&f.title)
        );
    }

    // Workarounds.
    let _ = writeln!(md, "\n## Workarounds tried by `gpuprobe fix`\n");
    match input.fix {
        None => {
            let _ = writeln!(md, "No `gpuprobe fix` searched from this run.");
        }
        Some(account) => render_fix(&mut md, account, r),
    }
    md
}

/// Which settings `fix` proved to cure this result, and which it disproved.
fn render_fix(md: &mut String, account: &FixAccount, r: &ProbeResult) {
    let sim = if account.simulated {
        " (SIMULATED)"
    } else {
        ""
    };
    let mut cured = Vec::new();
    let mut disproved = Vec::new();
    let mut not_tried = Vec::new();
    for c in &account.candidates {
        let setting = format!("`{}`", inline_code(&c.setting.to_string()));
        if !c.tried {
            not_tried.push(setting);
        } else if c
            .cured
            .iter()
            .any(|p| p.probe == r.probe && p.device == r.device)
        {
            cured.push(setting);
        } else {
            disproved.push(setting);
        }
    }
    let _ = writeln!(
        md,
        "A `gpuprobe fix`{sim} started from this run tried {} setting(s), each in fresh workers.\n",
        cured.len() + disproved.len()
    );
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let _ = writeln!(md, "- proved to cure this failure: {}", list(&cured));
    let _ = writeln!(md, "- tried and did not cure it: {}", list(&disproved));
    if !not_tried.is_empty() {
        let _ = writeln!(md, "- not tried: {}", list(&not_tried));
    }
    if !account.chosen.is_empty() {
        let chosen: Vec<String> = account
            .chosen
            .iter()
            .map(|c| format!("`{}`", inline_code(&c.to_string())))
            .collect();
        let _ = writeln!(md, "- chosen for the profile: {}", chosen.join(", "));
    }
}

/// Text for a one-backtick code span: control characters visible, no backticks, one line.
fn inline_code(text: &str) -> String {
    visible_line(text).replace('`', "'")
}

/// The last `n` lines of `text`, with a note of what was left out.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= n {
        return text.to_string();
    }
    format!(
        "[{} earlier line(s) left out]\n{}",
        lines.len() - n,
        lines[lines.len() - n..].join("\n")
    )
}

/// ISSUE.md for what `gpuprobe repro` made.
pub fn render_repro(made: &Repro) -> String {
    render(&IssueInput {
        report: &made.report,
        result: &made.result,
        manifest: Some(&made.manifest),
        script: Some(&made.script),
        run: made.run.as_ref(),
        fix: made.fix.as_ref().map(|(_, account)| account),
    })
}

/// What `gpuprobe repro` prints, one line each (`terminal_lines`).
pub fn terminal_text(made: &Repro, issue: &std::path::Path) -> String {
    let mut text = terminal_lines(made, issue).join("\n");
    text.push('\n');
    text
}

/// What `gpuprobe repro` prints: where the files are, what the script said, how to run it.
/// Every path and line from outside goes through [`visible_line`].
pub(crate) fn terminal_lines(made: &Repro, issue: &std::path::Path) -> Vec<String> {
    let (result, manifest, out) = (&made.result, &made.manifest, made.out.as_path());
    let (python, run) = (made.python.as_path(), made.run.as_ref());
    let show = |p: &std::path::Path| visible_line(&p.display().to_string()).into_owned();
    let simulated = result.simulated || manifest.simulated;
    let mut lines = vec![format!(
        "repro of {} on {} ({}){}",
        visible_line(result.probe.as_str()),
        result.device.torch_name(),
        result.verdict.label(),
        if simulated { " · SIMULATED" } else { "" }
    )];
    let kind = if manifest.kind == "ctypes" {
        "Python + ctypes, no torch"
    } else {
        "Python"
    };
    lines.push(format!(
        "  script  {}  ({kind})",
        show(&out.join("repro.py"))
    ));
    lines.push(format!("  issue   {}", show(issue)));
    match run {
        None => lines.push("  ran     not run (--no-run)".into()),
        Some(run) => {
            let said = run
                .last_line
                .as_deref()
                .filter(|_| run.outcome != ScriptOutcome::TimedOut)
                .map_or_else(
                    || run.outcome.label().to_string(),
                    |l| visible_line(l).into_owned(),
                );
            let how = match (run.outcome, run.exit_code) {
                (ScriptOutcome::TimedOut, _) => format!("killed after {:.0} s", run.elapsed_s),
                (_, Some(code)) => format!("exit {code}, {:.1} s", run.elapsed_s),
                (_, None) => format!("signal {}, {:.1} s", run.signal.unwrap_or(0), run.elapsed_s),
            };
            lines.push(format!("  ran     {said}  ({how})"));
            if run.simulated {
                lines.push(
                    "          SIMULATED: run with gpuprobe's fault simulation installed; on a \
                     healthy stack the script alone does not reproduce it"
                        .into(),
                );
            }
        }
    }
    lines.push(format!(
        "  run it  cd {} && {} repro.py",
        show(out),
        show(python)
    ));
    lines
}

#[cfg(test)]
mod tests;
