//! Colour for terminal output, only when asked for (a terminal that is not `NO_COLOR`).

/// Whether and how to colour text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Emit ANSI colour codes.
    pub color: bool,
}

impl Style {
    /// Plain text.
    pub const PLAIN: Style = Style { color: false };

    /// The style for output to a stream: colour on a terminal unless `NO_COLOR` holds a
    /// value. The convention (no-color.org) is that only a present, non-empty `NO_COLOR`
    /// turns colour off, so an exported empty one leaves it on.
    pub fn for_output(is_terminal: bool, no_color: Option<&str>) -> Style {
        Style {
            color: is_terminal && no_color.is_none_or(str::is_empty),
        }
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Red, for failures.
    pub fn bad(self, text: &str) -> String {
        self.wrap("1;31", text)
    }

    /// Yellow, for warnings.
    pub fn warn(self, text: &str) -> String {
        self.wrap("33", text)
    }

    /// Green, for passes.
    pub fn good(self, text: &str) -> String {
        self.wrap("32", text)
    }

    /// Dim, for secondary text.
    pub fn dim(self, text: &str) -> String {
        self.wrap("2", text)
    }

    /// Bold, for headings.
    pub fn bold(self, text: &str) -> String {
        self.wrap("1", text)
    }

    /// Reverse video banner, for SIMULATED.
    pub fn banner(self, text: &str) -> String {
        self.wrap("1;7;35", text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_terminal_without_a_non_empty_no_color_gets_colour() {
        assert!(Style::for_output(true, None).color);
        assert!(Style::for_output(true, Some("")).color);
        assert!(!Style::for_output(true, Some("1")).color);
        assert!(!Style::for_output(false, None).color);
        assert!(!Style::for_output(false, Some("")).color);
    }
}
