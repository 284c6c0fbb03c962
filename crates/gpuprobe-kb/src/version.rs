//! Version parsing, ordering and range matching for the knowledge base.
//!
//! Two schemes, both total orders:
//! - [`DottedVersion`] for kernels, ROCm, HIP, drivers, firmware and other dotted numbers:
//!   `6.17.0-19-generic`, `6.18-rc6`, `7.2.26015-dd7f95766`, `580.159.04`, `0x00000083`.
//!   A suffix that starts with a pre-release word (`rc`, `alpha`, `a`, `beta`, `b`, `pre`,
//!   `preview`, `dev`) orders *before* the bare release (`6.18-rc6 < 6.18`); any other suffix is
//!   a distribution or build revision and orders *after* it
//!   (`6.17.0 < 6.17.0-19-generic < 6.17.0-20-generic < 6.17.1`).
//! - [`Pep440Version`] for Python packages such as torch: `2.11.0a0+rocm7.11.0a20260106`,
//!   `2.9.1+rocm7.2.0.lw`, `2.11.0+cu130`, `2.12.0.dev20260101`. Only the public version
//!   takes part in ordering; the local tag (after `+`) is kept for prefix matching.
//!
//! [`VersionReq`] is a range: comparators joined by `,` (all must hold), alternatives joined
//! by `||` (any may hold): `>=6.18.2, <6.18.7`, `==7.0.*`, `<5.6 || >=7.13`.
//! Parsing never panics; errors say what was expected.

use std::cmp::Ordering;
use std::fmt;

use thiserror::Error;

/// A version or range that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VersionError {
    /// The text is empty.
    #[error("empty version")]
    Empty,
    /// The text does not start with a number.
    #[error("version {0:?} does not start with a number")]
    NoNumber(String),
    /// A number is too large to hold.
    #[error("number too large in version {0:?}")]
    Overflow(String),
    /// The text is not a valid PEP 440 version.
    #[error(
        "{0:?} is not a PEP 440 version (expected e.g. 2.11.0, 2.11.0a0+rocm7.2, 2.12.0.dev20260101)"
    )]
    NotPep440(String),
    /// A range has no comparator.
    #[error("empty version range")]
    EmptyRange,
    /// A comparator uses `.*` with an operator other than `==` or `!=`.
    #[error("wildcard {0:?} is only allowed with == or !=")]
    WildcardOperator(String),
    /// A range can never hold.
    #[error("range {0:?} can never hold (its lower bound is above its upper bound)")]
    Unsatisfiable(String),
}

/// One part of a version suffix: a number or a word.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Segment {
    // Declared first so numbers order before words (as semver pre-release identifiers do).
    Num(u64),
    Word(String),
}

/// What kind of suffix follows the release numbers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Suffix {
    // Variant order is the ordering: pre-release < release < revision.
    /// A pre-release: rank (dev 0, alpha 1, beta 2, rc 3) and the rest of the suffix.
    Pre(u8, Vec<Segment>),
    /// No suffix.
    Release,
    /// A distribution or build revision (`-19-generic`).
    Revision(Vec<Segment>),
}

/// A dotted version with an optional suffix (kernel, ROCm, HIP, driver, firmware).
#[derive(Debug, Clone)]
pub struct DottedVersion {
    release: Vec<u64>,
    suffix: Suffix,
    raw: String,
}

fn pre_release_rank(word: &str) -> Option<u8> {
    match word {
        "dev" => Some(0),
        "alpha" | "a" => Some(1),
        "beta" | "b" => Some(2),
        "rc" | "c" | "pre" | "preview" => Some(3),
        _ => None,
    }
}

/// Splits a suffix into numbers and words at separators and at digit/letter boundaries.
fn split_segments(text: &str) -> Result<Vec<Segment>, VersionError> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut current_is_digit = false;
    let flush = |current: &mut String, is_digit: bool, segments: &mut Vec<Segment>| {
        if current.is_empty() {
            return Ok(());
        }
        let segment = if is_digit {
            Segment::Num(
                current
                    .parse()
                    .map_err(|_| VersionError::Overflow(text.to_string()))?,
            )
        } else {
            Segment::Word(current.to_ascii_lowercase())
        };
        segments.push(segment);
        current.clear();
        Ok(())
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            let is_digit = c.is_ascii_digit();
            if !current.is_empty() && is_digit != current_is_digit {
                flush(&mut current, current_is_digit, &mut segments)?;
            }
            current_is_digit = is_digit;
            current.push(c);
        } else {
            flush(&mut current, current_is_digit, &mut segments)?;
        }
    }
    flush(&mut current, current_is_digit, &mut segments)?;
    Ok(segments)
}

impl DottedVersion {
    /// Parses a dotted version. A leading `v` is ignored; `0x…` is read as one hexadecimal
    /// number (firmware versions such as `0x00000083`).
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let raw = text.trim();
        if raw.is_empty() {
            return Err(VersionError::Empty);
        }
        if let Some(hex) = raw.strip_prefix("0x").or_else(|| raw.strip_prefix("0X")) {
            let value = u64::from_str_radix(hex, 16)
                .map_err(|_| VersionError::NoNumber(raw.to_string()))?;
            return Ok(DottedVersion {
                release: vec![value],
                suffix: Suffix::Release,
                raw: raw.to_string(),
            });
        }
        let body = raw
            .strip_prefix('v')
            .or_else(|| raw.strip_prefix('V'))
            .unwrap_or(raw);
        let mut release = Vec::new();
        let mut rest = body;
        loop {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                break;
            }
            let number = rest[..digits]
                .parse()
                .map_err(|_| VersionError::Overflow(raw.to_string()))?;
            release.push(number);
            rest = &rest[digits..];
            // Continue only on ".<digit>"; anything else starts the suffix.
            match rest.strip_prefix('.') {
                Some(after) if after.starts_with(|c: char| c.is_ascii_digit()) => rest = after,
                _ => break,
            }
        }
        if release.is_empty() {
            return Err(VersionError::NoNumber(raw.to_string()));
        }
        let segments = split_segments(rest)?;
        let suffix = match segments.first() {
            None => Suffix::Release,
            Some(Segment::Word(word)) => match pre_release_rank(word) {
                Some(rank) => Suffix::Pre(rank, segments[1..].to_vec()),
                None => Suffix::Revision(segments),
            },
            Some(Segment::Num(_)) => Suffix::Revision(segments),
        };
        Ok(DottedVersion {
            release,
            suffix,
            raw: raw.to_string(),
        })
    }

    /// The numeric release components (`[6, 17, 0]` for `6.17.0-19-generic`).
    pub fn release(&self) -> &[u64] {
        &self.release
    }

    /// Whether the version carries a pre-release suffix (`-rc6`, `a20260106`).
    pub fn is_pre_release(&self) -> bool {
        matches!(self.suffix, Suffix::Pre(..))
    }

    /// The text it was parsed from.
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

/// Compares release lists as if padded with zeros (`6.18 == 6.18.0`).
fn cmp_release(a: &[u64], b: &[u64]) -> Ordering {
    let len = a.len().max(b.len());
    for i in 0..len {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        match x.cmp(&y) {
            Ordering::Equal => continue,
            other => return other,
        }
    }
    Ordering::Equal
}

impl Ord for DottedVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_release(&self.release, &other.release).then_with(|| self.suffix.cmp(&other.suffix))
    }
}

impl PartialOrd for DottedVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for DottedVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for DottedVersion {}

impl fmt::Display for DottedVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// The pre-release kind of a PEP 440 version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum PreKind {
    Alpha,
    Beta,
    Rc,
}

/// The PEP 440 sort key after the release: (epoch, pre, post, dev), each part ranked so
/// that a missing part sorts where the specification puts it.
type SortKey = (u64, (i8, u8, u64), (i8, u64), (i8, u64));

/// A PEP 440 version (`[N!]N(.N)*[{a|b|rc}N][.postN][.devN][+local]`).
#[derive(Debug, Clone)]
pub struct Pep440Version {
    epoch: u64,
    release: Vec<u64>,
    pre: Option<(PreKind, u64)>,
    post: Option<u64>,
    dev: Option<u64>,
    local: Option<String>,
    raw: String,
}

/// A small cursor over lowercase ASCII text for the PEP 440 grammar.
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn eat(&mut self, prefix: &str) -> bool {
        if self.rest().starts_with(prefix) {
            self.pos += prefix.len();
            true
        } else {
            false
        }
    }

    fn eat_separator(&mut self) -> bool {
        self.eat(".") || self.eat("-") || self.eat("_")
    }

    fn number(&mut self) -> Option<Result<u64, ()>> {
        let digits = self.rest().bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let parsed = self.rest()[..digits].parse().map_err(|_| ());
        self.pos += digits;
        Some(parsed)
    }

    /// Tries `[sep]word[sep][N]` for one of the words; restores the position on failure.
    fn tagged(&mut self, words: &[&str]) -> Option<Result<(String, u64), ()>> {
        let start = self.pos;
        self.eat_separator();
        for word in words {
            if self.eat(word) {
                let before_number = self.pos;
                self.eat_separator();
                let value = match self.number() {
                    Some(Ok(n)) => n,
                    Some(Err(())) => return Some(Err(())),
                    None => {
                        self.pos = before_number;
                        0
                    }
                };
                return Some(Ok(((*word).to_string(), value)));
            }
        }
        self.pos = start;
        None
    }
}

impl Pep440Version {
    /// Parses a PEP 440 version; `v` prefixes and the usual spelling variants (`alpha`,
    /// `-post1`, `_dev`) are accepted and normalised.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let raw = text.trim();
        if raw.is_empty() {
            return Err(VersionError::Empty);
        }
        let lower = raw.to_ascii_lowercase();
        let bad = || VersionError::NotPep440(raw.to_string());
        let (public, local) = match lower.split_once('+') {
            Some((public, local)) => (public, Some(local)),
            None => (lower.as_str(), None),
        };
        if let Some(local) = local {
            let valid = !local.is_empty()
                && local.split(['.', '-', '_']).all(|part| {
                    !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric())
                });
            if !valid {
                return Err(bad());
            }
        }
        let mut cursor = Cursor {
            text: public.strip_prefix('v').unwrap_or(public),
            pos: 0,
        };
        let mut epoch = 0;
        let mut release = Vec::new();
        match cursor.number() {
            Some(Ok(n)) => release.push(n),
            Some(Err(())) => return Err(VersionError::Overflow(raw.to_string())),
            None => return Err(bad()),
        }
        if cursor.eat("!") {
            epoch = release.pop().unwrap_or(0);
            match cursor.number() {
                Some(Ok(n)) => release.push(n),
                Some(Err(())) => return Err(VersionError::Overflow(raw.to_string())),
                None => return Err(bad()),
            }
        }
        loop {
            let start = cursor.pos;
            if !cursor.eat(".") {
                break;
            }
            match cursor.number() {
                Some(Ok(n)) => release.push(n),
                Some(Err(())) => return Err(VersionError::Overflow(raw.to_string())),
                None => {
                    cursor.pos = start;
                    break;
                }
            }
        }
        let overflow = || VersionError::Overflow(raw.to_string());
        let pre = match cursor.tagged(&["alpha", "beta", "preview", "pre", "rc", "a", "b", "c"]) {
            Some(Ok((word, n))) => {
                let kind = match word.as_str() {
                    "alpha" | "a" => PreKind::Alpha,
                    "beta" | "b" => PreKind::Beta,
                    _ => PreKind::Rc,
                };
                Some((kind, n))
            }
            Some(Err(())) => return Err(overflow()),
            None => None,
        };
        let post = match cursor.tagged(&["post", "rev", "r"]) {
            Some(Ok((_, n))) => Some(n),
            Some(Err(())) => return Err(overflow()),
            None => {
                // The implicit post-release form `1.0-1`.
                let start = cursor.pos;
                if cursor.eat("-") {
                    match cursor.number() {
                        Some(Ok(n)) => Some(n),
                        Some(Err(())) => return Err(overflow()),
                        None => {
                            cursor.pos = start;
                            None
                        }
                    }
                } else {
                    None
                }
            }
        };
        let dev = match cursor.tagged(&["dev"]) {
            Some(Ok((_, n))) => Some(n),
            Some(Err(())) => return Err(overflow()),
            None => None,
        };
        if !cursor.rest().is_empty() {
            return Err(bad());
        }
        Ok(Pep440Version {
            epoch,
            release,
            pre,
            post,
            dev,
            local: local.map(str::to_string),
            raw: raw.to_string(),
        })
    }

    /// The numeric release components (`[2, 11, 0]`).
    pub fn release(&self) -> &[u64] {
        &self.release
    }

    /// The local tag after `+` (`rocm7.2.0.lw`, `cu130`), lowercase.
    pub fn local(&self) -> Option<&str> {
        self.local.as_deref()
    }

    /// Whether it is a pre-release or development release.
    pub fn is_pre_release(&self) -> bool {
        self.pre.is_some() || self.dev.is_some()
    }

    /// The text it was parsed from.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The PEP 440 sort key of the public version.
    fn key(&self) -> SortKey {
        // A development release of a final version sorts before its pre-releases.
        let pre = match (self.pre, self.post, self.dev) {
            (None, None, Some(_)) => (-1, 0, 0),
            (Some((kind, n)), _, _) => (0, kind as u8, n),
            (None, _, _) => (1, 0, 0),
        };
        let post = match self.post {
            None => (-1, 0),
            Some(n) => (0, n),
        };
        let dev = match self.dev {
            None => (1, 0),
            Some(n) => (0, n),
        };
        (self.epoch, pre, post, dev)
    }
}

impl Ord for Pep440Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let (epoch_a, pre_a, post_a, dev_a) = self.key();
        let (epoch_b, pre_b, post_b, dev_b) = other.key();
        epoch_a
            .cmp(&epoch_b)
            .then_with(|| cmp_release(&self.release, &other.release))
            .then_with(|| pre_a.cmp(&pre_b))
            .then_with(|| post_a.cmp(&post_b))
            .then_with(|| dev_a.cmp(&dev_b))
    }
}

impl PartialOrd for Pep440Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Pep440Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pep440Version {}

impl fmt::Display for Pep440Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// A version type a [`VersionReq`] can hold.
pub trait RangeVersion: Ord + Clone + fmt::Display + Sized {
    /// Parses one version.
    fn parse_version(text: &str) -> Result<Self, VersionError>;
    /// The numeric release components, for `.*` wildcards.
    fn release_numbers(&self) -> &[u64];
}

impl RangeVersion for DottedVersion {
    fn parse_version(text: &str) -> Result<Self, VersionError> {
        DottedVersion::parse(text)
    }
    fn release_numbers(&self) -> &[u64] {
        self.release()
    }
}

impl RangeVersion for Pep440Version {
    fn parse_version(text: &str) -> Result<Self, VersionError> {
        Pep440Version::parse(text)
    }
    fn release_numbers(&self) -> &[u64] {
        self.release()
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// One comparator of a range.
#[derive(Debug, Clone)]
enum Comparator<V> {
    /// `op version`.
    Compare(Op, V),
    /// `==X.Y.*` (true when the release starts with the prefix) or `!=X.Y.*`.
    Prefix { negated: bool, prefix: Vec<u64> },
}

impl<V: RangeVersion> Comparator<V> {
    fn holds(&self, version: &V) -> bool {
        match self {
            Comparator::Compare(op, bound) => {
                let ordering = version.cmp(bound);
                match op {
                    Op::Eq => ordering == Ordering::Equal,
                    Op::Ne => ordering != Ordering::Equal,
                    Op::Lt => ordering == Ordering::Less,
                    Op::Le => ordering != Ordering::Greater,
                    Op::Gt => ordering == Ordering::Greater,
                    Op::Ge => ordering != Ordering::Less,
                }
            }
            Comparator::Prefix { negated, prefix } => {
                let release = version.release_numbers();
                let matches = prefix
                    .iter()
                    .enumerate()
                    .all(|(i, n)| release.get(i).copied().unwrap_or(0) == *n);
                matches != *negated
            }
        }
    }
}

/// A version range: alternatives (`||`) of comparator lists (`,`, all must hold).
#[derive(Debug, Clone)]
pub struct VersionReq<V> {
    alternatives: Vec<Vec<Comparator<V>>>,
    raw: String,
}

/// A range over [`DottedVersion`]s.
pub type DottedReq = VersionReq<DottedVersion>;
/// A range over [`Pep440Version`]s.
pub type Pep440Req = VersionReq<Pep440Version>;

fn parse_comparator<V: RangeVersion>(text: &str) -> Result<Comparator<V>, VersionError> {
    let text = text.trim();
    let (op, rest) = [
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
    ]
    .iter()
    .find_map(|(symbol, op)| text.strip_prefix(symbol).map(|rest| (*op, rest)))
    .unwrap_or((Op::Eq, text));
    let rest = rest.trim();
    if rest.is_empty() {
        return Err(VersionError::Empty);
    }
    if let Some(prefix) = rest.strip_suffix(".*") {
        if !matches!(op, Op::Eq | Op::Ne) {
            return Err(VersionError::WildcardOperator(text.to_string()));
        }
        let numbers = prefix
            .split('.')
            .map(|part| {
                part.parse::<u64>()
                    .map_err(|_| VersionError::NoNumber(text.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Comparator::Prefix {
            negated: op == Op::Ne,
            prefix: numbers,
        });
    }
    Ok(Comparator::Compare(op, V::parse_version(rest)?))
}

impl<V: RangeVersion> VersionReq<V> {
    /// Parses a range such as `>=6.18.2, <6.18.7` or `==7.0.* || >=7.13`.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let raw = text.trim();
        if raw.is_empty() {
            return Err(VersionError::EmptyRange);
        }
        let mut alternatives = Vec::new();
        for alternative in raw.split("||") {
            let comparators = alternative
                .split(',')
                .map(parse_comparator::<V>)
                .collect::<Result<Vec<_>, _>>()?;
            if comparators.is_empty() {
                return Err(VersionError::EmptyRange);
            }
            if !Self::satisfiable(&comparators) {
                return Err(VersionError::Unsatisfiable(alternative.trim().to_string()));
            }
            alternatives.push(comparators);
        }
        Ok(VersionReq {
            alternatives,
            raw: raw.to_string(),
        })
    }

    /// Whether the bounds of one alternative leave room for a version (lower ≤ upper).
    fn satisfiable(comparators: &[Comparator<V>]) -> bool {
        let mut lower: Option<(&V, bool)> = None; // (bound, inclusive)
        let mut upper: Option<(&V, bool)> = None;
        for comparator in comparators {
            let Comparator::Compare(op, bound) = comparator else {
                continue;
            };
            match op {
                Op::Ge | Op::Gt | Op::Eq => {
                    let inclusive = *op != Op::Gt;
                    if lower.is_none_or(|(current, _)| bound >= current) {
                        lower = Some((bound, inclusive));
                    }
                }
                _ => {}
            }
            match op {
                Op::Le | Op::Lt | Op::Eq => {
                    let inclusive = *op != Op::Lt;
                    if upper.is_none_or(|(current, _)| bound <= current) {
                        upper = Some((bound, inclusive));
                    }
                }
                _ => {}
            }
        }
        match (lower, upper) {
            (Some((low, low_inclusive)), Some((high, high_inclusive))) => match low.cmp(high) {
                Ordering::Less => true,
                Ordering::Equal => low_inclusive && high_inclusive,
                Ordering::Greater => false,
            },
            _ => true,
        }
    }

    /// Whether the version lies in the range.
    pub fn matches(&self, version: &V) -> bool {
        self.alternatives
            .iter()
            .any(|comparators| comparators.iter().all(|c| c.holds(version)))
    }

    /// The range as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The range in normalised form (`>=6.18.2, <6.18.7`).
    pub fn normalized(&self) -> String {
        self.alternatives
            .iter()
            .map(|comparators| {
                comparators
                    .iter()
                    .map(|c| match c {
                        Comparator::Compare(op, v) => format!("{}{}", op.symbol(), v),
                        Comparator::Prefix { negated, prefix } => {
                            let numbers: Vec<String> = prefix.iter().map(u64::to_string).collect();
                            format!(
                                "{}{}.*",
                                if *negated { "!=" } else { "==" },
                                numbers.join(".")
                            )
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .collect::<Vec<_>>()
            .join(" || ")
    }
}

impl<V> fmt::Display for VersionReq<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> DottedVersion {
        DottedVersion::parse(s).unwrap()
    }

    fn p(s: &str) -> Pep440Version {
        Pep440Version::parse(s).unwrap()
    }

    #[test]
    fn kernel_revisions_order_after_the_release() {
        assert!(d("6.17.0") < d("6.17.0-19-generic"));
        assert!(d("6.17.0-19-generic") < d("6.17.0-20-generic"));
        assert!(d("6.17.0-20-generic") < d("6.17.1"));
        assert!(d("6.18-rc6") < d("6.18"));
        assert!(d("6.18-rc6") < d("6.18.0"));
        assert!(d("6.17.9") > d("6.17.0-19.19~24.04.2"));
        assert_eq!(d("6.18"), d("6.18.0"));
        assert_eq!(d("0x00000083").release(), &[0x83]);
    }

    #[test]
    fn pep440_ordering_follows_the_spec() {
        let ordered = [
            "2.10.0",
            "2.11.0.dev20260101",
            "2.11.0a0",
            "2.11.0a0.post1",
            "2.11.0b1",
            "2.11.0rc1",
            "2.11.0",
            "2.11.0.post1",
            "2.11.1",
            "1!0.1",
        ];
        for pair in ordered.windows(2) {
            assert!(p(pair[0]) < p(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(p("2.9.1+rocm7.2.0.lw"), p("2.9.1"));
        assert_eq!(p("2.9.1+rocm7.2.0.lw").local(), Some("rocm7.2.0.lw"));
        assert_eq!(
            p("2.11.0a0+rocm7.11.0a20260106").local(),
            Some("rocm7.11.0a20260106")
        );
        assert!(Pep440Version::parse("2.11.0+").is_err());
        assert!(Pep440Version::parse("2.11.0 foo").is_err());
    }

    #[test]
    fn ranges_hold_where_they_should() {
        let req = DottedReq::parse(">=6.18.2, <6.18.7").unwrap();
        assert!(req.matches(&d("6.18.3")));
        assert!(req.matches(&d("6.18.6-arch1-1")));
        assert!(!req.matches(&d("6.18.7")));
        assert!(!req.matches(&d("6.18.44-fc-v657-gpu")));
        let wildcard = DottedReq::parse("==7.0.*").unwrap();
        assert!(wildcard.matches(&d("7.0.2")));
        assert!(!wildcard.matches(&d("7.1.0")));
        let either = Pep440Req::parse("<2.9 || >=2.11").unwrap();
        assert!(either.matches(&p("2.8.0")));
        assert!(!either.matches(&p("2.10.0")));
        assert!(!either.matches(&p("2.11.0a0+rocm7.11.0a20260106")));
        assert!(either.matches(&p("2.11.0+cu130")));
        assert!(matches!(
            DottedReq::parse(">=6.18.7, <6.18.2"),
            Err(VersionError::Unsatisfiable(_))
        ));
        assert!(matches!(
            DottedReq::parse(">=7.0.*"),
            Err(VersionError::WildcardOperator(_))
        ));
        assert!(DottedReq::parse("").is_err());
        assert!(DottedReq::parse(">=").is_err());
    }
}
