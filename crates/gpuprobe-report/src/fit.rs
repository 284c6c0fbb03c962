//! Lines that are not tables, fitted to the width tables are fitted to
//! ([`crate::console::width`]: the terminal, then `COLUMNS`, then 100 columns): a line that
//! does not fit is broken at spaces, and its continuation lines are indented under its text,
//! so a wrapped finding or note still reads as one item. Without a width (a renderer asked
//! for no fitting), every line stays whole.

use gpuprobe_model::{display_width, wrap_words};

/// The fewest columns of text a wrapped line keeps beside its lead. On a terminal narrower
/// than its lead plus this, lines run past the edge rather than shrink to a word each.
pub(crate) const MIN_TEXT: usize = 24;

/// `lead` (it may hold colour) then `text` (plain, one line), wrapped so that no line is
/// wider than `width`, continuation lines indented by `indent` spaces; each piece of `text`
/// goes through `paint` (a colour), the indentation does not. Ends with a line break.
pub(crate) fn hanging(
    lead: &str,
    indent: usize,
    text: &str,
    width: Option<u16>,
    paint: impl Fn(&str) -> String,
) -> String {
    let lead_width = display_width(lead);
    let (first, rest) = match width {
        Some(width) => {
            let width = usize::from(width);
            (
                width.saturating_sub(lead_width).max(MIN_TEXT),
                width.saturating_sub(indent).max(MIN_TEXT),
            )
        }
        None => (usize::MAX, usize::MAX),
    };
    let mut out = String::new();
    for (i, piece) in wrap_words(text, first, rest).iter().enumerate() {
        if i == 0 {
            out.push_str(lead);
        } else {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&paint(piece));
        out.push('\n');
    }
    if out.is_empty() {
        out.push_str(lead.trim_end());
        out.push('\n');
    }
    out
}

/// `text` cut to `max` characters, the last one an ellipsis when anything was cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let kept: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{kept}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> String {
        text.to_string()
    }

    #[test]
    fn a_long_line_wraps_under_its_text_and_a_short_one_stays_whole() {
        let text = "probe: copy.h2d.pageable.4x4.blocking on cpu: all zeros: the whole output";
        let wrapped = hanging("   lead ", 8, text, Some(48), plain);
        assert_eq!(
            wrapped,
            "   lead probe: copy.h2d.pageable.4x4.blocking on\n        cpu: all zeros: the whole output\n"
        );
        // Narrower than the lead and MIN_TEXT: the text keeps MIN_TEXT columns.
        let narrow = hanging("   lead ", 8, text, Some(20), plain);
        assert!(
            narrow.lines().all(|l| l.chars().count() <= 8 + MIN_TEXT),
            "{narrow}"
        );
        assert_eq!(
            hanging("   lead ", 8, text, None, plain),
            format!("   lead {text}\n")
        );
        assert_eq!(
            hanging("   lead ", 8, "short", Some(40), plain),
            "   lead short\n"
        );
    }

    #[test]
    fn colour_in_the_lead_takes_no_columns_and_each_piece_is_painted() {
        let wrapped = hanging(
            "\u{1b}[31mx\u{1b}[0m ",
            2,
            "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii",
            Some(40),
            |t| format!("<{t}>"),
        );
        assert_eq!(
            wrapped,
            "\u{1b}[31mx\u{1b}[0m <aaaa bbbb cccc dddd eeee ffff gggg>\n  <hhhh iiii>\n"
        );
    }

    #[test]
    fn a_cut_ends_with_an_ellipsis() {
        assert_eq!(cut("abcdef", 6), "abcdef");
        assert_eq!(cut("abcdefg", 6), "abcde…");
        assert_eq!(cut("üüüüüüü", 3), "üü…");
    }
}
