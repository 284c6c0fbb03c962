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
