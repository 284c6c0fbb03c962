//! The colours of `gpuprobe memtest`'s text (`gpuprobe_gpu`'s `MemtestOutcome::render_text`,
//! which this crate does not depend on): the verdict as `check` colours verdicts (no errors
//! green; errors, and a test that could not run, red), the pattern table's header in bold.

use gpuprobe_model::terminal_safe;

use crate::style::Style;

/// `text`, memtest's own view, coloured by `style`.
pub fn colour(text: &str, style: Style) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches('\n');
        let end = &line[bare.len()..];
        let shown = if bare == "errors    none" {
            style.good(bare)
        } else if bare.starts_with("errors    ") || bare.starts_with("memtest on GPU ") {
            style.bad(bare)
        } else if bare.starts_with("diagnosis ") {
            style.warn(bare)
        } else if bare.starts_with("pattern ") {
            style.bold(bare)
        } else {
            bare.to_string()
        };
        out.push_str(&shown);
        out.push_str(end);
    }
    terminal_safe(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_lines_are_coloured_and_plain_text_is_unchanged() {
        let text = "memtest   GPU\n\npattern   steps\nzeros     2\n\nerrors    none\n";
        assert_eq!(colour(text, Style::PLAIN), text);
        let c = colour(text, Style { color: true });
        assert!(c.contains("\u{1b}[32merrors    none\u{1b}[0m\n"), "{c}");
        assert!(c.contains("\u{1b}[1mpattern   steps\u{1b}[0m\n"), "{c}");
        let bad = colour(
            "errors    3 word(s)\ndiagnosis ECC\n",
            Style { color: true },
        );
        assert!(bad.starts_with("\u{1b}[1;31merrors    3 word(s)"), "{bad}");
        assert!(bad.contains("\u{1b}[33mdiagnosis ECC"), "{bad}");
        let crashed = colour("memtest on GPU 0: CRASH signal 11\n", Style { color: true });
        assert!(
            crashed.starts_with("\u{1b}[1;31mmemtest on GPU 0"),
            "{crashed}"
        );
    }
}
