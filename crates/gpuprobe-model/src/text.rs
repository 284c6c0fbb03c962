//! Text from outside made safe to show: the one sanitizer every renderer uses.
//!
//! Worker stdout and stderr, exception messages, pasted logs, file names, knowledge-base
//! files given with `--kb` and tool output can all hold bytes that a terminal obeys rather
//! than prints: ESC sequences that retitle the window, clear the screen, move the cursor or
//! hide text; BEL; backspaces and carriage returns that overwrite what came before; C1
//! controls that some terminals read as ESC; bidirectional overrides that make text read
//! differently from what it is. gpuprobe never lets such a character reach a terminal as
//! itself: each one is written out as a visible escape (`\x1b`, `\u{202e}`), so the reader
//! sees that it was there and nothing is executed.
//!
//! Two functions, two places:
//! - [`visible`] and [`visible_line`] at the source: a renderer passes every piece of
//!   external text through one of them before it joins the output.
//! - [`terminal_safe`] at the sink: whatever a command is about to write to a terminal
//!   passes through it last. It keeps line breaks, tabs and the SGR colour sequences that
//!   gpuprobe's own styling emits, and escapes every other control character, so a renderer
//!   that forgot [`visible`] still cannot hand the terminal a command.
//!
//! JSON output needs neither: serde escapes control characters in strings.
//!
//! Every function here is total and allocation-free when the text is already clean.
//!
//! Two more helpers fit text that is already safe to the terminal's width, for every
//! renderer alike: [`display_width`] counts the columns a line takes (characters, not
//! bytes, and not gpuprobe's own colour sequences), and [`wrap_words`] breaks text into
//! lines of a given number of columns.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as itself: C0 controls (line break and tab are
/// judged by the caller), DEL, C1 controls, and the Unicode characters that reorder or hide
/// text (bidirectional embeddings, overrides and isolates; line and paragraph separators).
pub(crate) fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// The visible form of one unsafe character: `\x1b` for the 8-bit range, `\u{202e}` above.
fn escape_into(out: &mut String, c: char) {
    let code = u32::from(c);
    if code < 0x100 {
        let _ = write!(out, "\\x{code:02x}");
    } else {
        let _ = write!(out, "\\u{{{code:x}}}");
    }
}

fn escape_where(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) && !keep(c) {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// External text for a multi-line block (a stderr tail, a pasted excerpt): line breaks and
/// tabs stay, every other control character becomes a visible escape. A lone carriage
/// return is escaped too: it would let a line overwrite the one before it.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| c == '\n' || c == '\t')
}

/// External text for one line or one table cell (an exception message, a file name, a
/// value): every control character, line breaks included, becomes a visible escape.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    escape_where(text, |_| false)
}

/// The last guard before a terminal: keeps line breaks, tabs and well-formed SGR colour
/// sequences (`ESC [ digits and semicolons m`, what gpuprobe's styling writes), and makes
/// every other control character visible, including any ESC that does not start an SGR.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b'
            && let Some(len) = sgr_len(rest)
        {
            out.push_str(&rest[..len]);
            rest = &rest[len..];
            continue;
        }
        if is_unsafe(c) && c != '\n' && c != '\t' {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

/// The byte length of the SGR sequence at the start of `text`, if one is there. Bounded so
/// that a long run of digits is not taken for a colour.
fn sgr_len(text: &str) -> Option<usize> {
    let body = text.strip_prefix("\x1b[")?;
    let params = body
        .bytes()
        .take(32)
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    (body.as_bytes().get(params) == Some(&b'm')).then_some(2 + params + 1)
}

/// The columns `text` takes on a terminal: its characters, not counting the SGR colour
/// sequences gpuprobe's styling writes.
pub fn display_width(text: &str) -> usize {
    let mut width = 0;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b'
            && let Some(len) = sgr_len(rest)
        {
            rest = &rest[len..];
            continue;
        }
        width += 1;
        rest = &rest[c.len_utf8()..];
    }
    width
}

/// `text` (one line) broken at spaces into lines of at most `first` columns for the first
/// line and `rest` for the others, columns counted as [`display_width`] counts them. A word
/// longer than a line is cut where the line ends, never inside a colour sequence; the
/// spaces at a break are dropped, those inside a line kept. Text that fits comes back as
/// one line, unchanged; empty text as no line.
pub fn wrap_words(text: &str, first: usize, rest: usize) -> Vec<String> {
    let (first, rest) = (first.max(1), rest.max(1));
    if display_width(text) <= first {
        return if text.is_empty() {
            Vec::new()
        } else {
            vec![text.to_owned()]
        };
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    let limit = |lines: &Vec<String>| if lines.is_empty() { first } else { rest };
    for word in text.split(' ') {
        if used > 0 && used + 1 + display_width(word) > limit(&lines) {
            lines.push(std::mem::take(&mut line).trim_end().to_owned());
            used = 0;
        }
        if used > 0 {
            line.push(' ');
            used += 1;
        }
        let mut word = word;
        while display_width(word) > 0 {
            if used >= limit(&lines) {
                lines.push(std::mem::take(&mut line).trim_end().to_owned());
                used = 0;
            }
            let (head, tail) = split_columns(word, limit(&lines) - used);
            used += display_width(head);
            line.push_str(head);
            word = tail;
        }
        // What is left is colour sequences alone: they end the word.
        line.push_str(word);
    }
    if !line.trim_end().is_empty() {
        lines.push(line.trim_end().to_owned());
    }
    lines
}

/// `text` split after `columns` visible characters; a colour sequence goes with the
/// character after it, so none is cut.
fn split_columns(text: &str, columns: usize) -> (&str, &str) {
    let mut taken = 0;
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        if let Some(len) = rest.starts_with('\x1b').then(|| sgr_len(rest)).flatten() {
            at += len;
            continue;
        }
        if taken == columns {
            break;
        }
        taken += 1;
        at += rest.chars().next().map_or(1, char::len_utf8);
    }
    text.split_at(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a hostile `--python` wrapper printed: a window title (OSC), a screen clear and a
    /// cursor home (CSI), a bell, a backspace, a carriage return, a C1 CSI and a
    /// right-to-left override.
    const HOSTILE: &str =
        "ok\x1b]0;pwned\x07\x1b[2J\x1b[H\x08\r\u{9b}31m\u{202e}txt.exe\u{7f}\nnext\tline";

    #[test]
    fn hostile_text_becomes_visible_escapes() {
        let shown = visible(HOSTILE);
        assert_eq!(
            shown,
            "ok\\x1b]0;pwned\\x07\\x1b[2J\\x1b[H\\x08\\x0d\\x9b31m\\u{202e}txt.exe\\x7f\nnext\tline"
        );
        assert_eq!(visible_line("a\nb\tc"), "a\\x0ab\\x09c");
    }

    #[test]
    fn clean_text_is_borrowed_unchanged() {
        for text in ["", "plain ASCII", "µs ≤ 3× 🙂", "multi\nline\twith tab"] {
            assert!(matches!(visible(text), Cow::Borrowed(t) if t == text));
            assert!(matches!(terminal_safe(text), Cow::Borrowed(t) if t == text));
        }
        assert!(matches!(visible_line("µs ≤ 3×"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_sink_keeps_colours_and_escapes_everything_else() {
        let styled = "\x1b[1;31mFAIL\x1b[0m copy\n";
        assert_eq!(terminal_safe(styled), styled);
        assert_eq!(
            terminal_safe("\x1b[31mred\x1b[0m\x1b]0;title\x07\x1b[2J"),
            "\x1b[31mred\x1b[0m\\x1b]0;title\\x07\\x1b[2J"
        );
        // An ESC at the very end, or an SGR cut short, is escaped.
        assert_eq!(terminal_safe("a\x1b"), "a\\x1b");
        assert_eq!(terminal_safe("\x1b[31"), "\\x1b[31");
    }

    #[test]
    fn width_counts_characters_and_not_colour_sequences() {
        assert_eq!(display_width("\x1b[1;31m✖\x1b[0m framework"), 11);
        assert_eq!(display_width("ü…→"), 3);
        // An ESC that starts no colour is a character like any other.
        assert_eq!(display_width("\x1b[2J"), 4);
    }

    #[test]
    fn words_wrap_at_spaces_and_a_long_word_is_cut() {
        assert_eq!(wrap_words("one two three", 20, 20), ["one two three"]);
        assert_eq!(wrap_words("one two three", 7, 5), ["one two", "three"]);
        assert_eq!(wrap_words("one  two three", 8, 8), ["one  two", "three"]);
        assert_eq!(
            wrap_words("a /very/long/path/to/lib.so b", 8, 8),
            ["a", "/very/lo", "ng/path/", "to/lib.s", "o b"]
        );
        assert_eq!(wrap_words("ü ü ü ü", 3, 3), ["ü ü", "ü ü"]);
        assert!(wrap_words("", 5, 5).is_empty());
    }

    #[test]
    fn colour_takes_no_columns_and_is_never_cut() {
        let red = |t: &str| format!("\x1b[1;31m{t}\x1b[0m");
        let text = format!("cures 1/1 · {}", red("BREAKS copy.d2d"));
        assert_eq!(
            wrap_words(&text, 18, 18),
            ["cures 1/1 · \x1b[1;31mBREAKS", "copy.d2d\x1b[0m"]
        );
        assert_eq!(
            wrap_words(&red("abcdef"), 4, 4),
            ["\x1b[1;31mabcd", "ef\x1b[0m"]
        );
        for line in wrap_words(&red(&"word ".repeat(30)), 7, 7) {
            assert!(display_width(&line) <= 7, "{line:?}");
        }
    }

    proptest! {
        #[test]
        fn no_control_character_survives(text in any::<String>()) {
            let line = visible_line(&text);
            prop_assert!(!line.chars().any(is_unsafe));
            let block = visible(&text);
            prop_assert!(!block.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t'));
            // At the sink, every ESC that remains starts an SGR sequence.
            let safe = terminal_safe(&text);
            for (at, c) in safe.char_indices() {
                if c == '\x1b' {
                    prop_assert!(sgr_len(&safe[at..]).is_some(), "{safe:?}");
                } else {
                    prop_assert!(!is_unsafe(c) || c == '\n' || c == '\t');
                }
            }
        }

        #[test]
        fn wrapped_lines_fit_and_keep_every_word(text in "[a-zü \x1b\\[1;m]{0,200}", width in 1usize..40) {
            let lines = wrap_words(&text, width, width);
            for line in &lines {
                prop_assert!(display_width(line) <= width, "{line:?}");
            }
            let words = |t: &str| t.split(' ').filter(|w| !w.is_empty()).collect::<String>();
            prop_assert_eq!(words(&lines.join(" ")), words(&text));
        }

        #[test]
        fn escaping_only_adds(text in any::<String>()) {
            // Every safe character of the input is still there, in order.
            let kept: String = text.chars().filter(|c| !is_unsafe(*c)).collect();
            let shown: String = visible_line(&text).chars().filter(|c| !is_unsafe(*c)).collect();
            let mut rest = shown.as_str();
            for c in kept.chars() {
                let at = rest.find(c);
                prop_assert!(at.is_some());
                rest = &rest[at.unwrap_or(0) + c.len_utf8()..];
            }
        }
    }
}
