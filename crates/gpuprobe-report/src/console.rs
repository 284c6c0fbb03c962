//! How gpuprobe's output meets the terminal, decided once per process (`docs/cli.md`):
//! whether to colour (`--color`, `NO_COLOR`, `CLICOLOR_FORCE`, `CLICOLOR`, `TERM`, `CI`),
//! how wide tables may be (the terminal, then `COLUMNS`, then 100 columns) and free text
//! (the same, but only on a terminal or under `COLUMNS`), how progress
//! shows (a bar on a terminal, a line per finished family elsewhere, nothing with
//! `--quiet`), and the writers for stdout and stderr: anstream streams, which strip
//! gpuprobe's colours where they are not wanted, behind the terminal guard.
//!
//! The rules are pure functions of the facts passed in ([`wants_color`], [`width`]), so
//! each is tested; [`Console::detect`] gathers the facts from this process.

use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};
use std::sync::OnceLock;

use anstream::{AutoStream, ColorChoice};
use gpuprobe_model::env_vars;

use crate::guard::Guarded;
use crate::style::Style;
use crate::terminal::TerminalOptions;

/// `--color`: when to colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorWhen {
    /// Colour a terminal, unless the environment says otherwise (`wants_color`).
    #[default]
    Auto,
    /// Colour, wherever the output goes and whatever `NO_COLOR` says.
    Always,
    /// Never colour.
    Never,
}

impl ColorWhen {
    /// The values `--color` takes, in the order help lists them.
    pub const NAMES: [&'static str; 3] = ["auto", "always", "never"];

    /// The choice a `--color` value names (`None` for anything else).
    pub fn from_name(name: &str) -> Option<ColorWhen> {
        match name {
            "auto" => Some(ColorWhen::Auto),
            "always" => Some(ColorWhen::Always),
            "never" => Some(ColorWhen::Never),
            _ => None,
        }
    }
}

/// Whether output to a stream is coloured. `--color always` and `never` decide alone.
/// Otherwise, as anstream decides it: a non-empty `NO_COLOR` turns colour off (an empty
/// one does not: <https://no-color.org>); a non-empty `CLICOLOR_FORCE` turns it on, even
/// off a terminal; `CLICOLOR=0` turns it off; a terminal is coloured when `TERM` names one
/// that is not `dumb`, or `CLICOLOR` or `CI` is set.
pub(crate) fn wants_color(
    when: ColorWhen,
    is_terminal: bool,
    env: &BTreeMap<String, String>,
) -> bool {
    let set = |name: &str| env.get(name).map(String::as_str);
    let non_empty = |name: &str| set(name).is_some_and(|v| !v.is_empty());
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto if non_empty(env_vars::NO_COLOR) => false,
        ColorWhen::Auto if non_empty(env_vars::CLICOLOR_FORCE) => true,
        ColorWhen::Auto if set(env_vars::CLICOLOR) == Some("0") => false,
        ColorWhen::Auto => {
            let term = set(env_vars::TERM).is_some_and(|t| t != "dumb");
            is_terminal
                && (term || set(env_vars::CLICOLOR).is_some() || set(env_vars::CI).is_some())
        }
    }
}

/// Columns assumed when neither the terminal nor `COLUMNS` tells.
pub(crate) const DEFAULT_WIDTH: u16 = 100;

/// The width tables are fitted to: the terminal's (`terminal`, where one reports more than
/// 0 columns: 0 means it does not know), else `COLUMNS` when it is a positive integer, else
/// [`DEFAULT_WIDTH`].
pub(crate) fn width(terminal: Option<u16>, env: &BTreeMap<String, String>) -> u16 {
    terminal
        .filter(|&columns| columns > 0)
        .or_else(|| columns(env))
        .unwrap_or(DEFAULT_WIDTH)
}

/// `COLUMNS`, when it is a positive integer.
fn columns(env: &BTreeMap<String, String>) -> Option<u16> {
    env.get(env_vars::COLUMNS)
        .and_then(|v| v.trim().parse::<u16>().ok())
        .filter(|&columns| columns > 0)
}

/// How progress is shown while probes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar redrawn in place (stderr is a terminal).
    Bar,
    /// Plain lines, one per finished family (and per probe with `--verbose`), never a bar
    /// or a carriage return: logs, CI, Slurm output files.
    Lines,
    /// Nothing (`--quiet`).
    Off,
}

/// The output settings of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Console {
    /// `--quiet`: only the verdict or summary, and errors.
    pub quiet: bool,
    /// Colour stdout.
    pub stdout_color: bool,
    /// Colour stderr.
    pub stderr_color: bool,
    /// Columns for tables on stdout.
    pub width: u16,
    /// Columns for free text and for listings read a line at a time (`check`'s findings,
    /// `fix`'s account, `kb list`): [`Console::width`] on a terminal or where `COLUMNS`
    /// sets it; none in a pipe or a file without `COLUMNS`, so that their lines stay whole
    /// for `grep`, `awk` and logs, as they always were.
    pub text_width: Option<u16>,
    /// How progress shows on stderr.
    pub progress: ProgressMode,
}

impl Console {
    /// The settings from the facts: `--color`, `--quiet`, whether stdout and stderr are
    /// terminals, stdout's terminal width and the environment.
    pub fn decide(
        when: ColorWhen,
        quiet: bool,
        terminals: (bool, bool),
        terminal_width: Option<u16>,
        env: &BTreeMap<String, String>,
    ) -> Console {
        let (stdout_terminal, stderr_terminal) = terminals;
        Console {
            quiet,
            stdout_color: wants_color(when, stdout_terminal, env),
            stderr_color: wants_color(when, stderr_terminal, env),
            width: width(terminal_width.filter(|_| stdout_terminal), env),
            text_width: (stdout_terminal || columns(env).is_some())
                .then(|| width(terminal_width.filter(|_| stdout_terminal), env)),
            progress: match (quiet, stderr_terminal) {
                (true, _) => ProgressMode::Off,
                (false, true) => ProgressMode::Bar,
                (false, false) => ProgressMode::Lines,
            },
        }
    }

    /// The settings of this process under `--color when` and `--quiet`.
    pub fn detect(when: ColorWhen, quiet: bool, env: &BTreeMap<String, String>) -> Console {
        let columns = terminal_size::terminal_size_of(io::stdout()).map(|(w, _)| w.0);
        let terminals = (io::stdout().is_terminal(), io::stderr().is_terminal());
        Console::decide(when, quiet, terminals, columns, env)
    }

    /// The colours for stdout.
    pub fn stdout_style(&self) -> Style {
        Style {
            color: self.stdout_color,
        }
    }

    /// The terminal view's options for stdout: colours, width, `--quiet`.
    pub fn terminal_options(&self) -> TerminalOptions {
        TerminalOptions {
            style: self.stdout_style(),
            width: Some(self.width),
            text_width: self.text_width,
            quiet: self.quiet,
            ..TerminalOptions::default()
        }
    }
}

static CURRENT: OnceLock<Console> = OnceLock::new();

/// Fixes this process's settings (the first call wins; the binary makes it once, after
/// parsing its arguments).
pub(crate) fn configure(console: Console) -> Console {
    *CURRENT.get_or_init(|| console)
}

/// Fixes this process's settings from `--color` (a name of [`ColorWhen::NAMES`]; any
/// other reads as `auto`), `--quiet` and the process's environment.
pub fn setup(color: &str, quiet: bool) -> Console {
    let when = ColorWhen::from_name(color).unwrap_or_default();
    configure(Console::detect(when, quiet, &process_env()))
}

fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// This process's settings: those `configure`d, or those of `--color auto` without
/// `--quiet`.
pub fn current() -> Console {
    *CURRENT.get_or_init(|| Console::detect(ColorWhen::Auto, false, &process_env()))
}

fn choice(color: bool) -> ColorChoice {
    if color {
        ColorChoice::AlwaysAnsi
    } else {
        ColorChoice::Never
    }
}

/// Standard output: colours stripped unless wanted, behind the terminal guard.
pub fn stdout() -> Guarded<AutoStream<io::StdoutLock<'static>>> {
    let color = current().stdout_color;
    Guarded::new(AutoStream::new(io::stdout().lock(), choice(color)))
}

/// Standard error: colours stripped unless wanted, behind the terminal guard.
pub fn stderr() -> Guarded<AutoStream<io::StderrLock<'static>>> {
    let color = current().stderr_color;
    Guarded::new(AutoStream::new(io::stderr().lock(), choice(color)))
}

/// Prints a line that informs (what `fix` is doing, which runs were pruned) on standard
/// error, unless `--quiet`.
pub fn note(line: &str) {
    if !current().quiet {
        let _ = writeln!(stderr(), "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const XTERM: (&str, &str) = ("TERM", "xterm-256color");

    #[test]
    fn auto_colours_a_terminal_and_never_a_pipe() {
        assert!(wants_color(ColorWhen::Auto, true, &env(&[XTERM])));
        assert!(!wants_color(ColorWhen::Auto, false, &env(&[XTERM])));
    }

    #[test]
    fn only_a_non_empty_no_color_turns_colour_off() {
        assert!(!wants_color(
            ColorWhen::Auto,
            true,
            &env(&[XTERM, ("NO_COLOR", "1")])
        ));
        assert!(wants_color(
            ColorWhen::Auto,
            true,
            &env(&[XTERM, ("NO_COLOR", "")])
        ));
    }

    #[test]
    fn color_always_wins_over_no_color_and_never_over_clicolor_force() {
        let no_color = env(&[("NO_COLOR", "1")]);
        assert!(wants_color(ColorWhen::Always, false, &no_color));
        assert!(wants_color(ColorWhen::Always, true, &no_color));
        let force = env(&[XTERM, ("CLICOLOR_FORCE", "1")]);
        assert!(!wants_color(ColorWhen::Never, true, &force));
    }

    #[test]
    fn clicolor_force_colours_a_pipe_unless_no_color_is_set() {
        assert!(wants_color(
            ColorWhen::Auto,
            false,
            &env(&[("CLICOLOR_FORCE", "1")])
        ));
        assert!(!wants_color(
            ColorWhen::Auto,
            false,
            &env(&[("CLICOLOR_FORCE", "")])
        ));
        assert!(!wants_color(
            ColorWhen::Auto,
            false,
            &env(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")])
        ));
    }

    #[test]
    fn clicolor_zero_and_a_dumb_or_unknown_terminal_are_not_coloured() {
        assert!(!wants_color(
            ColorWhen::Auto,
            true,
            &env(&[XTERM, ("CLICOLOR", "0")])
        ));
        assert!(!wants_color(
            ColorWhen::Auto,
            true,
            &env(&[("TERM", "dumb")])
        ));
        assert!(!wants_color(ColorWhen::Auto, true, &env(&[])));
        assert!(wants_color(ColorWhen::Auto, true, &env(&[("CI", "true")])));
        assert!(wants_color(
            ColorWhen::Auto,
            true,
            &env(&[("CLICOLOR", "1")])
        ));
    }

    #[test]
    fn the_color_names_parse_and_nothing_else_does() {
        for name in ColorWhen::NAMES {
            assert!(ColorWhen::from_name(name).is_some(), "{name}");
        }
        assert_eq!(ColorWhen::from_name("always"), Some(ColorWhen::Always));
        assert_eq!(ColorWhen::from_name("yes"), None);
    }

    #[test]
    fn width_comes_from_the_terminal_then_columns_then_100() {
        let columns = env(&[("COLUMNS", "132")]);
        assert_eq!(width(Some(80), &columns), 80);
        assert_eq!(width(None, &columns), 132);
        assert_eq!(width(None, &env(&[])), DEFAULT_WIDTH);
    }

    #[test]
    fn a_terminal_of_0_columns_is_unknown_and_columns_must_be_a_positive_integer() {
        assert_eq!(width(Some(0), &env(&[("COLUMNS", "90")])), 90);
        assert_eq!(width(Some(0), &env(&[])), DEFAULT_WIDTH);
        for bad in ["0", "-5", "wide", "", "1e3", "70000"] {
            assert_eq!(
                width(None, &env(&[("COLUMNS", bad)])),
                DEFAULT_WIDTH,
                "{bad}"
            );
        }
        assert_eq!(width(None, &env(&[("COLUMNS", " 72 ")])), 72);
    }

    #[test]
    fn progress_is_a_bar_on_a_terminal_lines_elsewhere_and_nothing_when_quiet() {
        let none = env(&[]);
        let on = |quiet, stderr| {
            Console::decide(ColorWhen::Auto, quiet, (false, stderr), None, &none).progress
        };
        assert_eq!(on(false, true), ProgressMode::Bar);
        assert_eq!(on(false, false), ProgressMode::Lines);
        assert_eq!(on(true, true), ProgressMode::Off);
        assert_eq!(on(true, false), ProgressMode::Off);
    }

    #[test]
    fn a_piped_stdout_takes_its_width_from_columns_not_from_another_terminal() {
        let columns = env(&[("COLUMNS", "120")]);
        let piped = Console::decide(ColorWhen::Auto, false, (false, true), Some(80), &columns);
        assert_eq!(piped.width, 120);
        let shown = Console::decide(ColorWhen::Auto, false, (true, true), Some(80), &columns);
        assert_eq!(shown.width, 80);
    }

    #[test]
    fn free_text_is_fitted_on_a_terminal_or_to_columns_and_whole_in_a_bare_pipe() {
        let decide = |terminals, env: &BTreeMap<String, String>| {
            Console::decide(ColorWhen::Auto, false, terminals, Some(80), env).text_width
        };
        assert_eq!(decide((true, true), &env(&[])), Some(80));
        assert_eq!(
            decide((false, true), &env(&[("COLUMNS", "120")])),
            Some(120)
        );
        assert_eq!(decide((false, true), &env(&[])), None);
        assert_eq!(decide((false, true), &env(&[("COLUMNS", "wide")])), None);
        // A terminal of 0 columns: COLUMNS, else the default.
        let zero = |env: &BTreeMap<String, String>| {
            Console::decide(ColorWhen::Auto, false, (true, true), Some(0), env).text_width
        };
        assert_eq!(zero(&env(&[])), Some(DEFAULT_WIDTH));
    }

    #[test]
    fn colour_is_decided_per_stream() {
        let term = env(&[XTERM]);
        let console = Console::decide(ColorWhen::Auto, false, (false, true), None, &term);
        assert!(!console.stdout_color && console.stderr_color);
        assert!(!console.stdout_style().color);
    }
}
