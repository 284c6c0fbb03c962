//! The terminal view of `gpuprobe env`: the fingerprint (`gpuprobe_detect::render_text`),
//! its section headings in bold, then what the config lint finds in it.

use gpuprobe_model::Finding;
use gpuprobe_model::Fingerprint;
use gpuprobe_model::terminal_safe;

use crate::style::Style;

/// The JSON shape of `env --json` (the same fields as `triage --json`'s).
#[derive(serde::Serialize)]
struct EnvReport<'a> {
    fingerprint: &'a Fingerprint,
    findings: &'a [Finding],
}

/// `env --json`: the fingerprint and the lint's findings, pretty-printed.
pub fn json(fingerprint: &Fingerprint, findings: &[Finding]) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&EnvReport {
        fingerprint,
        findings,
    })
}

/// The fingerprint and the lint's findings, coloured by `style`.
pub fn render(fingerprint: &Fingerprint, findings: &[Finding], style: Style) -> String {
    let mut out = headings_in_bold(&gpuprobe_detect::render_text(fingerprint), style);
    out.push('\n');
    if findings.is_empty() {
        out.push_str("lint: nothing to flag in these settings and this stack\n");
    } else {
        out.push_str(&crate::terminal::render_findings(findings, style));
    }
    terminal_safe(&out).into_owned()
}

/// `text` with every section heading (a line that does not start with a space) in bold.
pub(crate) fn headings_in_bold(text: &str, style: Style) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.strip_suffix('\n') {
            Some(heading) if !heading.is_empty() && !heading.starts_with(' ') => {
                format!("{}\n", style.bold(heading))
            }
            _ => line.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_headings_are_bold_and_plain_text_is_unchanged() {
        let text = "GPUs\n  GPU 0           gfx1100\n\nPython\n  Interpreter     x\n";
        let bold = Style { color: true };
        let out = headings_in_bold(text, bold);
        assert!(
            out.starts_with("\u{1b}[1mGPUs\u{1b}[0m\n  GPU 0"),
            "{out:?}"
        );
        assert!(out.contains("\n\n\u{1b}[1mPython\u{1b}[0m\n"), "{out:?}");
        assert_eq!(headings_in_bold(text, Style::PLAIN), text);
    }
}
