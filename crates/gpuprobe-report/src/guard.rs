//! The terminal guard as a writer: every byte written passes through
//! [`gpuprobe_model::terminal_safe`] a whole line at a time, so gpuprobe's own colour
//! sequences survive and any other control character that slipped into a message (a file
//! name in an error, a worker's line in a verbose message) is shown, never obeyed. The
//! binary puts its stdout and stderr behind it.

use std::io::{self, Write};

use gpuprobe_model::terminal_safe;

/// A writer that hands the terminal guard whole lines. A line is judged whole so that an
/// SGR colour sequence split over two `write` calls (as `write!` does with its pieces) is
/// still recognised as one.
pub struct Guarded<W: Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: Write> Guarded<W> {
    /// `inner` behind the guard.
    pub fn new(inner: W) -> Guarded<W> {
        Guarded {
            inner,
            pending: Vec::new(),
        }
    }

    fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        // Output is formatted from Rust strings, so it is UTF-8; anything else is shown
        // with replacement characters rather than passed on.
        let text = String::from_utf8_lossy(bytes);
        self.inner.write_all(terminal_safe(&text).as_bytes())
    }
}

impl<W: Write> Write for Guarded<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if let Some(last_newline) = self.pending.iter().rposition(|&b| b == b'\n') {
            let rest = self.pending.split_off(last_newline + 1);
            let lines = std::mem::replace(&mut self.pending, rest);
            self.emit(&lines)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let partial = std::mem::take(&mut self.pending);
            self.emit(&partial)?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for Guarded<W> {
    fn drop(&mut self) {
        // A broken pipe at exit has nowhere to be reported; the command already returned.
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through_guard(pieces: &[&str]) -> String {
        let mut sink = Vec::new();
        {
            let mut guarded = Guarded::new(&mut sink);
            for piece in pieces {
                guarded.write_all(piece.as_bytes()).unwrap();
            }
        }
        String::from_utf8(sink).unwrap()
    }

    #[test]
    fn own_colours_pass_even_when_split_across_writes() {
        assert_eq!(
            through_guard(&["\x1b[1", ";31mFAIL\x1b[0m", " x\n"]),
            "\x1b[1;31mFAIL\x1b[0m x\n"
        );
    }

    #[test]
    fn foreign_controls_are_shown_and_a_partial_line_is_flushed_on_drop() {
        assert_eq!(
            through_guard(&["title \x1b]0;pwned\x07\n", "bell\x07 at end"]),
            "title \\x1b]0;pwned\\x07\nbell\\x07 at end"
        );
    }
}
