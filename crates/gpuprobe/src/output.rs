//! Where every command's output goes: stdout and stderr behind the terminal guard.
//!
//! Renderers escape the external text they quote (`gpuprobe_model::text::visible`); this
//! is the second line ([`gpuprobe_report::guard`]): control characters other than
//! gpuprobe's own colours are shown, never obeyed. JSON is unaffected: serde escapes
//! control characters, so a JSON document holds none.

use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};

use gpuprobe_report::guard::Guarded;
use gpuprobe_report::style::Style;

/// Standard output behind the guard.
pub(crate) fn stdout() -> Guarded<io::StdoutLock<'static>> {
    Guarded::new(io::stdout().lock())
}

/// Prints one line on standard error behind the guard (messages that quote file names,
/// worker output or exception text).
pub(crate) fn eprint_line(line: &str) {
    let mut err = Guarded::new(io::stderr().lock());
    let _ = writeln!(err, "{line}");
}

/// The colours for standard output: on a terminal, unless `NO_COLOR` in `env` says not.
pub(crate) fn stdout_style(env: &BTreeMap<String, String>) -> Style {
    Style::for_output(
        io::stdout().is_terminal(),
        env.get("NO_COLOR").map(String::as_str),
    )
}
