//! The terminal views of `gpuprobe kb`: the knowledge base's own text
//! (`gpuprobe_kb::render_list`, `render_entry`, `render_matches`), with the colours `check`
//! gives the same things: headings in bold, severities as findings show them (error red,
//! warning yellow, info dim), a confirmed match red, a suspected one yellow.

use gpuprobe_kb::{KbEntry, KbMatch, KnowledgeBase, MatchStatus};
use gpuprobe_model::Severity;
use gpuprobe_model::terminal_safe;

use crate::style::Style;

/// The headings of an entry's sections (`gpuprobe_kb::render_entry`).
const SECTIONS: [&str; 8] = [
    "applies when",
    "confirmed by",
    "while (controls)",
    "argued against by",
    "workarounds",
    "fixed in",
    "notes",
    "citations",
];

/// A severity word in its colour.
fn severity(word: &str, style: Style) -> String {
    match word {
        "error" => style.bad(word),
        "warning" => style.warn(word),
        "info" => style.dim(word),
        _ => word.to_string(),
    }
}

/// `kb show`: one entry, its title and section headings in bold, its severity coloured.
pub fn show(entry: &KbEntry, style: Style) -> String {
    let text = gpuprobe_kb::render_entry(entry);
    let mut out = String::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end_matches('\n');
        let end = &line[bare.len()..];
        if i == 0 || SECTIONS.contains(&bare) {
            out.push_str(&format!("{}{end}", style.bold(bare)));
        } else if i == 1 && bare.starts_with("kind ") {
            // `kind K · severity S · layer L · status T`
            let parts: Vec<String> = bare
                .split(" · ")
                .map(|part| match part.strip_prefix("severity ") {
                    Some(word) => format!("severity {}", severity(word, style)),
                    None => part.to_string(),
                })
                .collect();
            out.push_str(&format!("{}{end}", parts.join(" · ")));
        } else {
            out.push_str(line);
        }
    }
    terminal_safe(&out).into_owned()
}

/// `kb list`: the table fitted to `width` columns (titles wrap under the title column;
/// `None` keeps them whole), its header in bold and each severity coloured.
pub fn list(kb: &KnowledgeBase, style: Style, width: Option<u16>) -> String {
    let text = gpuprobe_kb::render_list_within(kb, width.map(usize::from));
    let mut lines = text.split_inclusive('\n');
    let Some(header) = lines.next() else {
        return text;
    };
    let column = header.find("severity");
    let mut out = format!(
        "{}{}",
        style.bold(header.trim_end_matches('\n')),
        if header.ends_with('\n') { "\n" } else { "" }
    );
    for line in lines {
        // Ids, kinds and severities are ASCII, so the header's byte offset is the row's. A
        // wrapped title's continuation line is blank there, and left as it is.
        let cell = column.and_then(|at| {
            let rest = line.get(at..)?;
            let word = rest.split(' ').next()?;
            Some((at, word))
        });
        match cell {
            Some((at, word)) if !word.is_empty() => {
                let after = &line[at + word.len()..];
                out.push_str(&format!("{}{}{after}", &line[..at], severity(word, style)));
            }
            _ => out.push_str(line),
        }
    }
    terminal_safe(&out).into_owned()
}

/// `kb match`: each match's first line with its severity symbol and its status coloured.
pub fn matches(matches: &[KbMatch], style: Style) -> String {
    let text = gpuprobe_kb::render_matches(matches);
    let mut next = matches.iter();
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        // A match's first line is the only one not indented, in the order of `matches`.
        let Some(m) = next.next().filter(|_| !line.starts_with(' ')) else {
            out.push_str(line);
            continue;
        };
        let symbol = m.severity().symbol();
        let coloured = match m.severity() {
            Severity::Error => style.bad(symbol),
            Severity::Warning => style.warn(symbol),
            Severity::Info => style.dim(symbol),
        };
        let line = line.replacen(symbol, &coloured, 1);
        let (tag, paint): (&str, fn(Style, &str) -> String) = match m.status {
            MatchStatus::Confirmed => ("[CONFIRMED]", Style::bad),
            MatchStatus::Suspected => ("[SUSPECTED]", Style::warn),
            MatchStatus::NotObserved => ("[NOT OBSERVED HERE]", Style::dim),
        };
        out.push_str(&match line.rfind(tag) {
            Some(at) => format!(
                "{}{}{}",
                &line[..at],
                paint(style, tag),
                &line[at + tag.len()..]
            ),
            None => line,
        });
    }
    terminal_safe(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLOR: Style = Style { color: true };

    fn builtin() -> KnowledgeBase {
        KnowledgeBase::load_embedded().kb
    }

    #[test]
    fn plain_views_are_the_knowledge_base_text_unchanged() {
        let kb = builtin();
        assert_eq!(list(&kb, Style::PLAIN, None), gpuprobe_kb::render_list(&kb));
        let entry = kb.get("RKB-001").unwrap();
        assert_eq!(show(entry, Style::PLAIN), gpuprobe_kb::render_entry(entry));
    }

    #[test]
    fn coloured_views_colour_headings_and_severities_only() {
        let kb = builtin();
        let entry = kb.get("RKB-001").unwrap();
        let shown = show(entry, COLOR);
        assert!(shown.starts_with("\u{1b}[1mRKB-001  "), "{shown}");
        assert!(
            shown.contains("severity \u{1b}[1;31merror\u{1b}[0m · layer"),
            "{shown}"
        );
        assert!(
            shown.contains("\n\u{1b}[1mapplies when\u{1b}[0m\n"),
            "{shown}"
        );
        let listed = list(&kb, COLOR, None);
        let row = listed.lines().find(|l| l.starts_with("RKB-001 ")).unwrap();
        assert!(row.contains(" \u{1b}[1;31merror\u{1b}[0m "), "{row}");
        // Without the escapes, the text is the plain one.
        let stripped = regex::Regex::new("\u{1b}\\[[0-9;]*m")
            .unwrap()
            .replace_all(&listed, "")
            .into_owned();
        assert_eq!(stripped, gpuprobe_kb::render_list(&kb));
    }

    #[test]
    fn the_list_fits_80_columns_and_stays_whole_at_200() {
        use crate::test_support::{widest, words};
        let kb = builtin();
        let whole = list(&kb, COLOR, None);
        assert!(widest(&whole) > 100, "the built-in titles run long");
        assert!(widest(&whole) <= 200);
        assert_eq!(list(&kb, COLOR, Some(200)), whole);
        let narrow = list(&kb, COLOR, Some(80));
        assert!(widest(&narrow) <= 80, "{narrow}");
        // Every entry still has one row that starts with its id and carries its severity.
        for entry in kb.entries() {
            let row = narrow
                .lines()
                .find(|l| l.starts_with(&format!("{} ", entry.id)));
            assert!(row.is_some_and(|r| r.contains("\u{1b}[")), "{}", entry.id);
        }
        assert_eq!(words(&narrow), words(&whole));
    }

    #[test]
    fn a_match_line_colours_its_symbol_and_status_and_nothing_else() {
        let kb = builtin();
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/");
        let files = [
            format!("{root}rocminfo/gfx1151-rocm-issue5817.txt").into(),
            format!("{root}dmesg/gfx1151-pagefault-CPF-mes0x83-rocm-issue5724.txt").into(),
        ];
        let cap = gpuprobe_detect::DEFAULT_TRIAGE_MAX_BYTES;
        let triaged = gpuprobe_detect::triage_inputs(&files, cap, &mut |_| {}).unwrap();
        let fingerprint = triaged.outcome.fingerprint;
        let found = gpuprobe_kb::match_all(&kb, &fingerprint, &[]);
        assert_eq!(
            matches(&found, Style::PLAIN),
            gpuprobe_kb::render_matches(&found)
        );
        let plain = gpuprobe_kb::render_matches(&found);
        let coloured = matches(&found, COLOR);
        let stripped = regex::Regex::new("\u{1b}\\[[0-9;]*m")
            .unwrap()
            .replace_all(&coloured, "")
            .into_owned();
        assert_eq!(stripped, plain);
        assert!(!found.is_empty(), "the gfx1151 pastes match known issues");
        let first = coloured.lines().next().unwrap();
        assert!(first.starts_with('\u{1b}'), "{first}");
        assert!(first.ends_with("\u{1b}[0m"), "{first}");
    }
}
