//! The gpuprobe commands a report suggests (`→ gpuprobe check --only 'copy' --all`, `fix`'s
//! `use it:` line), written so that, copied into a shell as printed, they test the same
//! stack as the run that suggested them.
//!
//! A suggestion made without the options that chose the stack would test another one: a
//! `check` without the run's `--python` finds another interpreter (another torch), one
//! without `--device cpu` probes every GPU, one without `--simulate` runs without the
//! planted faults, and a `run --profile` without the `--python` the profile was proven with
//! compares the profile with another torch and refuses it. [`StackOptions`] holds those
//! options and [`StackOptions::carry`] puts them into a suggested command.
//!
//! Every value is quoted with [`shell_word`]: a path or a simulation file can hold spaces,
//! quotes, `$(...)` or control characters, and none of that may run, break the command, or
//! reach the terminal as itself.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::text::is_unsafe;

/// Characters that need no quoting in a POSIX shell word.
fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c)
}

/// `text` as one shell word that a POSIX shell (bash, zsh) reads back as exactly `text`:
/// as it is when every character is plain, single-quoted otherwise (`'` written `'\''`), and
/// ANSI-C quoted (`$'…'`, bash and zsh) when it holds a control character or a character
/// that reorders text, each written as an escape, so the line stays one visible line that
/// the terminal prints rather than obeys.
pub fn shell_word(text: &str) -> Cow<'_, str> {
    if !text.is_empty() && text.chars().all(is_plain) {
        return Cow::Borrowed(text);
    }
    if !text.chars().any(is_unsafe) {
        return Cow::Owned(format!("'{}'", text.replace('\'', r"'\''")));
    }
    let mut out = String::from("$'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '\'' => out.push_str(r"\'"),
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            '\r' => out.push_str(r"\r"),
            c if is_unsafe(c) && u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            // `\xHH` would be a raw byte; above ASCII the code point is written.
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    Cow::Owned(out)
}

/// One option and its value as shell text: `--flag WORD`, or `--flag=WORD` when the value
/// starts with `-` (which the parser would otherwise take for another option).
fn option_words(flag: &str, value: &str) -> String {
    if value.starts_with('-') {
        shell_word(&format!("{flag}={value}")).into_owned()
    } else {
        format!("{flag} {}", shell_word(value))
    }
}

/// The options that chose what a run tested, as the user gave them (absent: the default,
/// which a copied command gets again by leaving the option out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackOptions {
    /// `--python`: the interpreter, and so the torch, whose stack was tested (an absolute
    /// path, so a command copied into another directory names the same file).
    pub python: Option<String>,
    /// `--device`, when not every GPU.
    pub device: Option<String>,
    /// `--simulate`, when the run planted faults.
    pub simulate: Option<String>,
    /// `--tier`, when not the default: a probe of a higher tier is not selected by
    /// `--only` in the default one.
    pub tier: Option<String>,
}

impl StackOptions {
    /// Whether there is nothing to carry.
    pub fn is_empty(&self) -> bool {
        self == &StackOptions::default()
    }

    /// The options, as shell text, that `gpuprobe <subcommand>` takes of these; `rest` is
    /// the suggestion's text after the subcommand, whose own options win (and with which
    /// some cannot be combined: `--resume` and `--from` take the stack from their run).
    fn words_for(&self, subcommand: &str, rest: &str) -> Vec<String> {
        let has = |flag: &str| {
            rest.split_whitespace()
                .any(|word| word == flag || word.starts_with(&format!("{flag}=")))
        };
        let from_a_run = has("--resume") || has("--from");
        let mut options: Vec<(&str, &Option<String>)> = Vec::new();
        match subcommand {
            "check" | "fix" => {
                options.push(("--python", &self.python));
                if !from_a_run {
                    options.push(("--tier", &self.tier));
                    options.push(("--device", &self.device));
                    options.push(("--simulate", &self.simulate));
                }
            }
            // `env` reads the interpreter's torch; `run` compares a profile with it.
            "env" | "run" => options.push(("--python", &self.python)),
            _ => {}
        }
        options
            .into_iter()
            .filter(|(flag, _)| !has(flag))
            .filter_map(|(flag, value)| value.as_deref().map(|v| option_words(flag, v)))
            .collect()
    }

    /// `suggestion` with these options put right after its subcommand, when it is a
    /// `gpuprobe` command that takes them; any other text comes back unchanged.
    pub fn carry(&self, suggestion: &str) -> String {
        let Some(after) = suggestion.strip_prefix("gpuprobe ") else {
            return suggestion.to_string();
        };
        let subcommand_len = after.find(' ').unwrap_or(after.len());
        let (subcommand, rest) = after.split_at(subcommand_len);
        let words = self.words_for(subcommand, rest);
        if words.is_empty() {
            return suggestion.to_string();
        }
        format!("gpuprobe {subcommand} {}{rest}", words.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a POSIX shell makes of one word written by [`shell_word`] (the subset it
    /// writes: bare, single-quoted with `'\''`, and `$'…'` with the escapes above).
    fn unquote(word: &str) -> String {
        if let Some(body) = word.strip_prefix("$'").and_then(|w| w.strip_suffix('\'')) {
            let mut out = String::new();
            let mut chars = body.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                match chars.next().unwrap() {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'x' => {
                        let hex: String = chars.by_ref().take(2).collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                    }
                    'u' => {
                        let hex: String = chars.by_ref().take(4).collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                    }
                    other => out.push(other),
                }
            }
            return out;
        }
        if word.starts_with('\'') {
            return word[1..word.len() - 1].replace(r"'\''", "'");
        }
        word.to_string()
    }

    #[test]
    fn a_shell_word_reads_back_as_the_text_and_stays_visible() {
        for text in [
            "/usr/bin/python3",
            "",
            "my env/bin/python",
            "it's",
            "$(rm -rf ~)",
            "`id`;echo",
            "a\nb",
            "\x1b]0;pwned\x07",
            "tab\there",
            "back\\slash'quote",
            "\u{202e}txt.exe",
            "café",
        ] {
            let word = shell_word(text);
            assert_eq!(unquote(&word), text, "{word}");
            assert_eq!(
                crate::text::visible_line(&word),
                word,
                "prints as itself: {word}"
            );
        }
        assert_eq!(shell_word("h2d-zeros,copy-stale"), "h2d-zeros,copy-stale");
        assert_eq!(shell_word("$(id)"), "'$(id)'");
        assert_eq!(shell_word("a\nb"), r"$'a\nb'");
    }

    fn options() -> StackOptions {
        StackOptions {
            python: Some("/opt/my env/bin/python".into()),
            device: Some("cpu".into()),
            simulate: Some("h2d-zeros".into()),
            tier: Some("full".into()),
        }
    }

    #[test]
    fn a_suggested_check_carries_every_option_that_chose_the_stack() {
        assert_eq!(
            options().carry("gpuprobe check --only 'copy' --all   (re-run this family alone)"),
            "gpuprobe check --python '/opt/my env/bin/python' --tier full --device cpu \
             --simulate h2d-zeros --only 'copy' --all   (re-run this family alone)"
        );
        assert_eq!(
            options().carry("gpuprobe fix"),
            "gpuprobe fix --python '/opt/my env/bin/python' --tier full --device cpu --simulate h2d-zeros"
        );
        assert_eq!(
            options().carry("gpuprobe env   (what gpuprobe can see of this machine)"),
            "gpuprobe env --python '/opt/my env/bin/python'   (what gpuprobe can see of this machine)"
        );
    }

    #[test]
    fn options_a_command_does_not_take_are_left_out() {
        let options = options();
        assert_eq!(
            options.carry("gpuprobe kb show RKB-001"),
            "gpuprobe kb show RKB-001"
        );
        assert_eq!(options.carry("look at the cable"), "look at the cable");
        // A resumed run takes its devices, tier and simulation from its plan.
        assert_eq!(
            options.carry("gpuprobe check --resume /runs/c"),
            "gpuprobe check --python '/opt/my env/bin/python' --resume /runs/c"
        );
        // The suggestion's own options win.
        assert_eq!(
            options.carry("gpuprobe check --device 0 --only x"),
            "gpuprobe check --python '/opt/my env/bin/python' --tier full --simulate h2d-zeros --device 0 --only x"
        );
        assert_eq!(
            StackOptions::default().carry("gpuprobe check --only x"),
            "gpuprobe check --only x"
        );
    }

    #[test]
    fn a_value_that_starts_with_a_dash_is_joined_to_its_option() {
        let options = StackOptions {
            python: Some("-i".into()),
            ..Default::default()
        };
        assert_eq!(options.carry("gpuprobe env"), "gpuprobe env --python=-i");
    }
}
