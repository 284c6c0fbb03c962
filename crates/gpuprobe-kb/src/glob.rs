//! Glob patterns for probe ids and ISA names (`copy.h2d.pageable.tiny*`, `gfx11*`).
//!
//! Deliberately small: `*` matches any run of characters (dots included, so one pattern
//! covers every variant below a case), `?` matches one character, everything else matches
//! itself, case-sensitively; the whole text must match. Patterns are validated when the
//! knowledge base loads ([`Glob`]).
//!
//! This is gpuprobe's one glob matcher: the doctor's `--only` probe selection
//! (`gpuprobe_doctor::select`) matches its `*` patterns with
//! [`wildcard_matches`], the same matching without the validation (a user's pattern with
//! another character simply matches that character).

use std::fmt;

use thiserror::Error;

/// A pattern that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum GlobError {
    /// The pattern is empty.
    #[error("empty pattern")]
    Empty,
    /// The pattern holds a character that never occurs in probe ids or ISA names.
    #[error(
        "pattern {pattern:?} contains {found:?}; only letters, digits, '.', '_', '-', '*' and '?' are allowed"
    )]
    BadCharacter {
        /// The pattern.
        pattern: String,
        /// The offending character.
        found: char,
    },
}

/// A validated glob pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glob {
    pattern: Vec<char>,
    text: String,
}

impl Glob {
    /// Validates a pattern.
    pub(crate) fn new(pattern: &str) -> Result<Self, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::Empty);
        }
        if let Some(found) = pattern
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '*' | '?')))
        {
            return Err(GlobError::BadCharacter {
                pattern: pattern.to_string(),
                found,
            });
        }
        Ok(Glob {
            pattern: pattern.chars().collect(),
            text: pattern.to_string(),
        })
    }

    /// Whether the whole of `text` matches.
    pub(crate) fn matches(&self, text: &str) -> bool {
        wildcard_match(&self.pattern, &text.chars().collect::<Vec<_>>())
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Iterative wildcard matching with single-star backtracking: O(len(p) * len(t)) worst case,
/// no recursion, so no pattern can blow the stack.
fn wildcard_match(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// Whether the whole of `text` matches `pattern` (`*` any run of characters, dots
/// included; `?` one character; anything else itself), without validating the pattern.
pub fn wildcard_matches(pattern: &str, text: &str) -> bool {
    wildcard_match(
        &pattern.chars().collect::<Vec<_>>(),
        &text.chars().collect::<Vec<_>>(),
    )
}

/// The first of `patterns` that matches `text`; invalid patterns never match.
pub fn first_match<'a>(patterns: &'a [String], text: &str) -> Option<&'a str> {
    patterns
        .iter()
        .find(|pattern| Glob::new(pattern).is_ok_and(|glob| glob.matches(text)))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_cross_dots() {
        let glob = Glob::new("copy.h2d.pageable.tiny*").unwrap();
        assert!(glob.matches("copy.h2d.pageable.tiny"));
        assert!(glob.matches("copy.h2d.pageable.tiny.nonblocking"));
        assert!(!glob.matches("copy.h2d.pinned.tiny.nonblocking"));
        assert!(Glob::new("gfx11*").unwrap().matches("gfx1151"));
        assert!(!Glob::new("gfx11*").unwrap().matches("gfx1030"));
        assert!(Glob::new("dist.p2p.?-?").unwrap().matches("dist.p2p.0-1"));
        assert!(
            Glob::new("*.fp32.large_m*")
                .unwrap()
                .matches("ops.matmul.fp32.large_m.600k")
        );
        assert!(Glob::new("a[b").is_err());
        assert!(Glob::new("").is_err());
    }

    /// The cases the doctor's `--only` matcher was tested with before it used this one,
    /// and the edge cases both callers rely on.
    #[test]
    fn wildcards_as_probe_selection_uses_them() {
        assert!(wildcard_matches("copy.*.pinned*", "copy.h2d.pinned.tiny"));
        assert!(wildcard_matches("*bf16*", "dtype.bf16.fp32.to.device"));
        assert!(!wildcard_matches("rng.*", "copy.h2d"));
        assert!(wildcard_matches(
            "copy.h2d.medium.*",
            "copy.h2d.medium.fp16"
        ));
        assert!(!wildcard_matches("copy.h2d.medium.*", "copy.h2d.medium"));
        // `*` matches the empty run and several stars backtrack.
        assert!(wildcard_matches("copy*", "copy"));
        assert!(wildcard_matches("*", ""));
        assert!(wildcard_matches("**", "a.b"));
        assert!(wildcard_matches("*a*b*c", "xaxbxbc"));
        assert!(!wildcard_matches("*a*b*c", "xaxbxbcx"));
        // `?` is exactly one character, a dot included.
        assert!(wildcard_matches("gfx11?1", "gfx1151"));
        assert!(!wildcard_matches("gfx11?", "gfx11"));
        assert!(wildcard_matches("copy?h2d", "copy.h2d"));
        // The whole text must match, case-sensitively.
        assert!(!wildcard_matches("copy*", "xcopy.h2d"));
        assert!(!wildcard_matches("*h2d", "copy.h2d.tiny"));
        assert!(!wildcard_matches("COPY.*", "copy.h2d"));
        assert!(!wildcard_matches("gfx11*", "GFX1151"));
        // No validation: any other character matches itself.
        assert!(wildcard_matches("a[b*", "a[bc"));
        assert!(!wildcard_matches("", "a"));
        assert!(wildcard_matches("", ""));
        // A validated glob matches exactly as the unvalidated function does.
        for (pattern, text) in [
            (
                "copy.h2d.pageable.tiny*",
                "copy.h2d.pageable.tiny.nonblocking",
            ),
            ("dist.p2p.?-?", "dist.p2p.0-1"),
            ("gfx11*", "gfx1030"),
        ] {
            let glob = Glob::new(pattern).unwrap();
            assert_eq!(glob.matches(text), wildcard_matches(pattern, text));
        }
    }

    #[test]
    fn first_match_skips_invalid_patterns() {
        let patterns = vec!["a[b*".to_string(), "gfx11*".to_string()];
        assert_eq!(first_match(&patterns, "a[bc"), None);
        assert_eq!(first_match(&patterns, "gfx1151"), Some("gfx11*"));
    }
}
