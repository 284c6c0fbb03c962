//! Where every command's output goes: stdout and stderr as `gpuprobe_report::Console`
//! decides them (colour or not, table width, `--quiet`), behind the terminal guard.
//!
//! Renderers escape the external text they quote (`gpuprobe_model::visible`); this
//! is the second line ([`gpuprobe_report::guard`]): control characters other than
//! gpuprobe's own colours are shown, never obeyed. JSON is unaffected: serde escapes
//! control characters, so a JSON document holds none.

use std::io::Write;

use gpuprobe_report::Style;
pub(crate) use gpuprobe_report::console_stdout as stdout;

/// Prints one line on standard error behind the guard (messages that quote file names,
/// worker output or exception text).
pub(crate) fn eprint_line(line: &str) {
    let _ = writeln!(gpuprobe_report::console_stderr(), "{line}");
}

/// The colours for standard output.
pub(crate) fn stdout_style() -> Style {
    gpuprobe_report::current_console().stdout_style()
}
