//! The redaction of a support bundle (`gpuprobe bundle`): a pure text transform that replaces
//! user names, host names, home paths, secrets, GPU serial numbers, MAC addresses and IP
//! addresses with placeholders (`<user-1>`, `<host-1>`, `~`, `<secret-1>`, `<serial-1>`,
//! `<mac-1>`, `<ip-1>`), one per distinct value, the same in every file of the bundle.
//!
//! It reads nothing: what this machine and this user are called comes in as an [`Identity`]
//! (`bundle` collects it). A bundle is redacted in two passes: [`Redactor::learn_text`] /
//! [`Redactor::learn_json`] over every file first, so that a token seen in one file's
//! `HF_TOKEN=...` is also replaced where another file quotes it bare, then
//! [`Redactor::text`] / [`Redactor::json`] over each. JSON is redacted value by value, so it
//! stays valid JSON. `docs/bundle.md` says what is redacted and, as plainly, what is not.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use gpuprobe_model::env_vars;
use regex::{Captures, Regex};
use serde::Serialize;
use serde_json::Value;

/// What a redacted value was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// A user name: the current user's, or any `/home/NAME` path component.
    User,
    /// A host name: this machine's, or a `HOSTNAME` value.
    Host,
    /// The home directory, shown as `~`.
    HomePath,
    /// A token, password, key or other secret-looking value.
    Secret,
    /// A GPU board serial number or UUID.
    Serial,
    /// A MAC address.
    Mac,
    /// An IP address other than loopback.
    Ip,
}

impl Category {
    /// Every category, in the order summaries list them.
    pub const ALL: [Category; 7] = [
        Category::User,
        Category::Host,
        Category::HomePath,
        Category::Secret,
        Category::Serial,
        Category::Mac,
        Category::Ip,
    ];

    /// The words a summary uses.
    pub fn label(self) -> &'static str {
        match self {
            Category::User => "user names",
            Category::Host => "host names",
            Category::HomePath => "home paths",
            Category::Secret => "secrets and tokens",
            Category::Serial => "GPU serial numbers and UUIDs",
            Category::Mac => "MAC addresses",
            Category::Ip => "IP addresses",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Category::User => "user",
            Category::Host => "host",
            Category::HomePath => "home",
            Category::Secret => "secret",
            Category::Serial => "serial",
            Category::Mac => "mac",
            Category::Ip => "ip",
        }
    }
}

/// Who and where the bundle was made: the values redacted wherever they appear, beyond what
/// the patterns find.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Identity {
    /// Home directories (`$HOME`), replaced by `~` as a path prefix.
    pub homes: Vec<String>,
    /// User names (`USER`, `LOGNAME`).
    pub users: Vec<String>,
    /// Host names: the short name and the FQDN, `HOSTNAME`.
    pub hosts: Vec<String>,
    /// Values of environment variables whose names look secret.
    pub secrets: Vec<String>,
}

impl Identity {
    /// The identity an environment reveals, plus the host names read from the machine.
    pub(crate) fn from_env(env: &BTreeMap<String, String>, hostnames: &[String]) -> Identity {
        let mut identity = Identity::default();
        if let Some(home) = env.get(env_vars::HOME) {
            identity.add_home(home);
        }
        for name in [env_vars::USER, env_vars::LOGNAME] {
            if let Some(user) = env.get(name) {
                identity.add_user(user);
            }
        }
        for host in env.get(env_vars::HOSTNAME).into_iter().chain(hostnames) {
            identity.add_host(host);
        }
        for (name, value) in env {
            if secret_name(name) && !value.is_empty() {
                push_new(&mut identity.secrets, value);
            }
        }
        identity
    }

    /// Adds a home directory (a trailing `/` is dropped; `/` alone is no home).
    pub(crate) fn add_home(&mut self, home: &str) {
        let home = home.trim_end_matches('/');
        if home.len() > 1 {
            push_new(&mut self.homes, home);
        }
    }

    /// Adds a user name (`root` is nobody's secret and too common a word to replace).
    pub(crate) fn add_user(&mut self, user: &str) {
        let user = user.trim();
        if !user.is_empty() && user != "root" {
            push_new(&mut self.users, user);
        }
    }

    /// Adds a host name (`localhost` identifies nothing).
    pub(crate) fn add_host(&mut self, host: &str) {
        let host = host.trim().trim_end_matches('.');
        if !host.is_empty() && !host.starts_with("localhost") {
            push_new(&mut self.hosts, host);
        }
    }
}

fn push_new(list: &mut Vec<String>, value: &str) {
    if !list.iter().any(|v| v == value) {
        list.push(value.to_string());
    }
}

/// How many values of one category were replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CategorySummary {
    /// What they were.
    pub category: Category,
    /// Its words (`user names`).
    pub label: &'static str,
    /// Distinct values (each got one placeholder).
    pub distinct: usize,
    /// Places replaced, over every file.
    pub occurrences: usize,
}

/// Words in a variable's name that make its value a secret.
const SECRET_WORDS: [&str; 9] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
];

/// Whether a variable (or JSON key) with this name holds a secret. Lowercase names need a
/// stronger word than `key` or `session`, which a JSON document uses for ordinary fields.
fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // The desktop session's descriptors and agents' socket paths are no secrets, and their
    // values (`ubuntu`, `wayland`) are words a report uses for other things.
    if upper.starts_with("XDG_") || upper.ends_with("_SOCK") || upper == "DESKTOP_SESSION" {
        return false;
    }
    if name == upper {
        SECRET_WORDS.iter().any(|word| upper.contains(word))
    } else {
        [
            "token",
            "secret",
            "password",
            "passwd",
            "credential",
            "cookie",
            "apikey",
            "api_key",
            "access_key",
            "private_key",
        ]
        .iter()
        .any(|word| name.to_ascii_lowercase().contains(word))
    }
}

/// The shortest value found by a pattern that is also replaced wherever else it appears; a
/// shorter one (`TOKEN_COUNT=3`) is replaced only where the pattern found it.
const MIN_LEARNED: usize = 6;

macro_rules! pattern {
    ($name:ident, $re:expr) => {
        static $name: LazyLock<Regex> =
            LazyLock::new(|| Regex::new($re).expect("a valid built-in pattern"));
    };
}

// Tokens whose shape gives them away anywhere: Hugging Face, GitHub, OpenAI-style keys, AWS
// access key ids, JWTs.
pattern!(
    TOKEN,
    r"\b(?:hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,})"
);
// `Authorization: Bearer ...` and `Basic ...`.
pattern!(
    BEARER,
    r"\b(?:Bearer|Basic|bearer)\s+([A-Za-z0-9._~+/-]{8,}=*)"
);
// `NAME=value` or `NAME: value` for any variable-like name; which names are secret is
// `secret_name`'s to say, and a long base64 or hex run is a secret under any name.
pattern!(
    ASSIGNMENT,
    r#"\b([A-Za-z_][A-Za-z0-9_.-]*)(["']?\s*[=:]\s*["']?)([^\s"',;]+)"#
);
pattern!(
    LONG_RUN,
    r"^(?:[A-Za-z0-9+/_-]{40,}={0,2}|[0-9a-fA-F]{32,})$"
);
// `/home/NAME` and `/Users/NAME`: NAME is a user.
pattern!(HOME_DIR, r"/(?:home|Users)/([A-Za-z0-9._-]+)");
// `Serial Number : 1655023034247` (nvidia-smi), `GPU Board Serial Number: ...` (NVRM),
// `ASIC_SERIAL: 0x...`, `PRODUCT_SERIAL` (amd-smi), `"serial_number": "..."`.
pattern!(
    SERIAL,
    r#"(?i)(serial(?:[ _]?(?:number|no))?)(["']?\s*[:=]\s*["']?)([A-Za-z0-9][A-Za-z0-9_-]{3,})"#
);
// GPU and MIG UUIDs (nvidia-smi, NVRM, CUDA_VISIBLE_DEVICES) and rocminfo's `GPU-<16 hex>`.
pattern!(
    GPU_UUID,
    r"\b(?:GPU|MIG)-(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F]{16})\b"
);
pattern!(MAC, r"\b[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}\b");
pattern!(IPV4, r"\b(?:\d{1,3}\.){3}\d{1,3}\b");
pattern!(
    IPV6,
    r"\b[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{0,4}){1,6}:[0-9A-Fa-f]{1,4}\b"
);
// A placeholder already written: never redacted again.
pattern!(PLACEHOLDER, r"^<(?:user|host|secret|serial|mac|ip)-\d+>$");

/// Replaces private values with placeholders; one per bundle, so that placeholders agree
/// across its files.
#[derive(Debug)]
pub(crate) struct Redactor {
    homes: Vec<String>,
    /// Values replaced wherever they appear, with their category.
    literals: BTreeMap<String, Category>,
    /// The placeholder of each value replaced so far.
    table: BTreeMap<(Category, String), String>,
    counts: BTreeMap<Category, usize>,
    /// The alternation of `literals`, rebuilt when they change.
    literal_re: Option<Regex>,
    /// Whether `literals` were too many for one automaton (until they change again).
    literals_too_many: bool,
}

impl Redactor {
    /// A redactor for what `identity` names (and whatever the patterns find).
    pub(crate) fn new(identity: &Identity) -> Redactor {
        let mut homes = identity.homes.clone();
        // The longer first, so `/home/a/b` is not taken as `/home/a` + `/b`.
        homes.sort_by_key(|h| std::cmp::Reverse(h.len()));
        let mut redactor = Redactor {
            homes,
            literals: BTreeMap::new(),
            table: BTreeMap::new(),
            counts: BTreeMap::new(),
            literal_re: None,
            literals_too_many: false,
        };
        for user in &identity.users {
            redactor.learn_value(Category::User, user, 1);
        }
        for host in &identity.hosts {
            redactor.learn_value(Category::Host, host, 1);
            // The short name of an FQDN is the same machine.
            if let Some((short, _)) = host.split_once('.') {
                redactor.learn_value(Category::Host, short, 1);
            }
        }
        for secret in &identity.secrets {
            redactor.learn_value(Category::Secret, secret, MIN_LEARNED);
        }
        for home in &identity.homes {
            redactor.learn_text(home);
        }
        redactor
    }

    fn learn_value(&mut self, category: Category, value: &str, min_len: usize) {
        if value.chars().count() < min_len || PLACEHOLDER.is_match(value) {
            return;
        }
        if self.literals.insert(value.to_string(), category).is_none() {
            self.literal_re = None;
            self.literals_too_many = false;
        }
    }

    /// Learns the values the patterns find in `text` (the first pass), changing nothing.
    pub(crate) fn learn_text(&mut self, text: &str) {
        for (category, value) in found_values(text) {
            let min = if matches!(category, Category::User | Category::Host) {
                1
            } else {
                MIN_LEARNED
            };
            self.learn_value(category, &value, min);
        }
    }

    /// Learns the values in every string of `value` (the first pass), keys included.
    pub(crate) fn learn_json(&mut self, value: &Value) {
        match value {
            Value::String(text) => self.learn_text(text),
            Value::Array(items) => items.iter().for_each(|item| self.learn_json(item)),
            Value::Object(map) => {
                for (key, item) in map {
                    self.learn_text(key);
                    match (key_category(key), item) {
                        (Some(category), Value::String(text)) if worth_redacting(text) => {
                            self.learn_value(category, text, 1)
                        }
                        _ => self.learn_json(item),
                    }
                }
            }
            _ => {}
        }
    }

    fn placeholder(&mut self, category: Category, value: &str) -> String {
        *self.counts.entry(category).or_default() += 1;
        if category == Category::HomePath {
            self.table
                .entry((category, value.to_string()))
                .or_insert_with(|| "~".into());
            return "~".into();
        }
        let next = self.table.keys().filter(|(c, _)| *c == category).count() + 1;
        self.table
            .entry((category, value.to_string()))
            .or_insert_with(|| format!("<{}-{next}>", category.prefix()))
            .clone()
    }

    /// `text` with every private value replaced (the second pass).
    pub(crate) fn text(&mut self, text: &str) -> String {
        self.text_in(text, false)
    }

    /// [`Redactor::text`]; `versions`: the text is a version (a JSON value under a
    /// `...version` key or in `packages`), where `13.1.0.3` is no IP address.
    fn text_in(&mut self, text: &str, versions: bool) -> String {
        let mut out = self.homes_replaced(text);
        if could_match_a_pattern(&out) {
            out = self.patterns_replaced(&out, versions);
        }
        // A replacement can make a word of its own of what was part of a longer one
        // (`aliceSerial: X` becomes `alice<serial-1>`), so names are replaced until none is
        // left; each round replaces at least one occurrence or ends.
        for _ in 0..16 {
            let next = self.literals_replaced(&out);
            if next == out {
                break;
            }
            out = next;
        }
        out
    }

    fn patterns_replaced(&mut self, text: &str, versions: bool) -> String {
        let mut out = text.to_string();
        out = self.replace(&TOKEN, &out, |_, _| Some((Category::Secret, 0)));
        out = self.replace(&BEARER, &out, |_, _| Some((Category::Secret, 1)));
        out = self.replace(&ASSIGNMENT, &out, |_, caps| {
            assignment_category(&caps[1], &caps[2], &caps[3]).map(|c| (c, 3))
        });
        out = self.replace(&SERIAL, &out, |_, _| Some((Category::Serial, 3)));
        out = self.replace(&GPU_UUID, &out, |_, _| Some((Category::Serial, 0)));
        out = self.replace(&HOME_DIR, &out, |_, _| Some((Category::User, 1)));
        out = self.replace(&MAC, &out, |_, caps| {
            private_mac(&caps[0]).then_some((Category::Mac, 0))
        });
        out = self.replace(&IPV4, &out, |text, caps| {
            let m = caps.get(0)?;
            (!versions && private_ipv4(text, m.start(), m.end())).then_some((Category::Ip, 0))
        });
        out = self.replace(&IPV6, &out, |_, caps| {
            private_ipv6(&caps[0]).then_some((Category::Ip, 0))
        });
        out
    }

    /// `value` with every string redacted (keys included); stays valid JSON.
    pub(crate) fn json(&mut self, value: &mut Value) {
        self.json_in(value, false);
    }

    fn json_in(&mut self, value: &mut Value, versions: bool) {
        match value {
            Value::String(text) => *text = self.text_in(text, versions),
            Value::Array(items) => items
                .iter_mut()
                .for_each(|item| self.json_in(item, versions)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (key, mut item) in old {
                    match (key_category(&key), &item) {
                        (Some(category), Value::String(text)) if worth_redacting(text) => {
                            item = Value::String(self.placeholder(category, &text.clone()));
                        }
                        _ => {
                            let lower = key.to_ascii_lowercase();
                            let versions =
                                versions || lower.contains("version") || lower == "packages";
                            self.json_in(&mut item, versions);
                        }
                    }
                    let key = self.text(&key);
                    map.insert(key, item);
                }
            }
            _ => {}
        }
    }

    /// What was replaced so far, per category, for every category with a replacement.
    pub(crate) fn summary(&self) -> Vec<CategorySummary> {
        Category::ALL
            .into_iter()
            .filter_map(|category| {
                let occurrences = self.counts.get(&category).copied().unwrap_or(0);
                (occurrences > 0).then(|| CategorySummary {
                    category,
                    label: category.label(),
                    distinct: self.table.keys().filter(|(c, _)| *c == category).count(),
                    occurrences,
                })
            })
            .collect()
    }

    fn homes_replaced(&mut self, text: &str) -> String {
        let mut out = text.to_string();
        for home in self.homes.clone() {
            if !out.contains(&home) {
                continue;
            }
            let mut result = String::with_capacity(out.len());
            let mut rest = out.as_str();
            while let Some(at) = rest.find(&home) {
                let after = &rest[at + home.len()..];
                let ends = after
                    .chars()
                    .next()
                    .is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-')));
                result.push_str(&rest[..at]);
                if ends {
                    result.push_str(&self.placeholder(Category::HomePath, &home));
                } else {
                    result.push_str(&home);
                }
                rest = after;
            }
            result.push_str(rest);
            out = result;
        }
        out
    }

    /// Runs `re` over `text`; `pick` says, for a match, the category and which group is the
    /// value (or `None`: leave it).
    fn replace(
        &mut self,
        re: &Regex,
        text: &str,
        pick: impl Fn(&str, &Captures<'_>) -> Option<(Category, usize)>,
    ) -> String {
        // Most strings hold nothing private: the cheap test first.
        if !re.is_match(text) {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for caps in re.captures_iter(text) {
            let Some((category, group)) = pick(text, &caps) else {
                continue;
            };
            let (Some(whole), Some(value)) = (caps.get(0), caps.get(group)) else {
                continue;
            };
            if PLACEHOLDER.is_match(value.as_str()) || value.as_str().starts_with('<') {
                continue;
            }
            out.push_str(&text[last..value.start()]);
            out.push_str(&self.placeholder(category, value.as_str()));
            out.push_str(&text[value.end()..whole.end()]);
            last = whole.end();
        }
        out.push_str(&text[last..]);
        out
    }

    fn literals_replaced(&mut self, text: &str) -> String {
        if self.literals.is_empty() {
            return text.to_string();
        }
        if self.literal_re.is_none() && !self.literals_too_many {
            let mut values: Vec<&String> = self.literals.keys().collect();
            values.sort_by_key(|v| std::cmp::Reverse(v.len()));
            // Placeholders first, so a user called `user` never rewrites `<user-1>`.
            let alternation = std::iter::once(r"<(?:user|host|secret|serial|mac|ip)-\d+>".into())
                .chain(values.into_iter().map(|v| regex::escape(v)))
                .collect::<Vec<String>>()
                .join("|");
            self.literal_re = Regex::new(&alternation).ok();
            self.literals_too_many = self.literal_re.is_none();
        }
        // Taken out and put back rather than cloned: a clone of a `Regex` starts with an
        // empty cache and would rebuild its automaton for every string.
        let Some(re) = self.literal_re.take() else {
            // Too many values for one automaton (the size limit): one scan per value.
            return self.literals_one_by_one(text);
        };
        let out = self.literals_with(&re, text);
        self.literal_re = Some(re);
        out
    }

    fn literals_one_by_one(&mut self, text: &str) -> String {
        let mut values: Vec<(String, Category)> =
            self.literals.iter().map(|(v, c)| (v.clone(), *c)).collect();
        values.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        let mut out = text.to_string();
        for (value, category) in values {
            if !out.contains(&value) {
                continue;
            }
            let Ok(re) = Regex::new(&format!(
                r"<(?:user|host|secret|serial|mac|ip)-\d+>|{}",
                regex::escape(&value)
            )) else {
                continue;
            };
            let mut one = BTreeMap::new();
            one.insert(value, category);
            let all = std::mem::replace(&mut self.literals, one);
            out = self.literals_with(&re, &out);
            self.literals = all;
        }
        out
    }

    fn literals_with(&mut self, re: &Regex, text: &str) -> String {
        if !re.is_match(text) {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        let mut at = 0;
        // `find_at` rather than `find_iter`: a longer value refused for its neighbours
        // (`GPU-zelda` inside `¹GPU-zelda`) must not hide a shorter one inside it (`zelda`).
        while let Some(m) = re.find_at(text, at) {
            let found = match self.literals.get(m.as_str()) {
                // A placeholder already there: kept as it is.
                None => {
                    at = m.end();
                    continue;
                }
                Some(&category) if self.replaceable(category, text, m.start(), m.end()) => {
                    Some((category, m.end()))
                }
                Some(_) => self.shorter_at(text, m.start(), m.len()),
            };
            let Some((category, end)) = found else {
                // Nothing replaceable starts here: look again one character on.
                at = m.start() + text[m.start()..].chars().next().map_or(1, char::len_utf8);
                continue;
            };
            out.push_str(&text[last..m.start()]);
            out.push_str(&self.placeholder(category, &text[m.start()..end]));
            last = end;
            at = end;
        }
        out.push_str(&text[last..]);
        out
    }

    /// Whether the value at `start..end` of `text` is replaced there: names (users and
    /// hosts) only as whole words, so `al` is not replaced inside `also`.
    fn replaceable(&self, category: Category, text: &str, start: usize, end: usize) -> bool {
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !matches!(category, Category::User | Category::Host)
            || !(word(text[..start].chars().next_back()) || word(text[end..].chars().next()))
    }

    /// The longest value shorter than `longer` bytes that starts at `start` of `text` and is
    /// replaceable there, with its category and end.
    fn shorter_at(&self, text: &str, start: usize, longer: usize) -> Option<(Category, usize)> {
        let rest = &text[start..];
        self.literals
            .iter()
            .filter(|(value, _)| value.len() < longer && rest.starts_with(value.as_str()))
            .filter(|(value, category)| {
                self.replaceable(**category, text, start, start + value.len())
            })
            .max_by_key(|(value, _)| value.len())
            .map(|(value, category)| (*category, start + value.len()))
    }
}

/// Whether any pattern could match `text`: each needs one of these characters (a token's
/// `_` or `-`, an assignment's `=` or `:`, a path's `/`, an address's `.` or `:`) or, for an
/// AWS key id or `Bearer ...`, at least 12 characters. Most strings of a report are short
/// words (`pass`, `cpu`) and skip the patterns' scans.
fn could_match_a_pattern(text: &str) -> bool {
    text.len() >= 12
        || text
            .bytes()
            .any(|b| matches!(b, b':' | b'=' | b'/' | b'.' | b'-' | b'_'))
}

/// The category of a JSON key whose string value is private as a whole.
fn key_category(key: &str) -> Option<Category> {
    let lower = key.to_ascii_lowercase();
    if matches!(lower.as_str(), "user" | "logname" | "username") {
        Some(Category::User)
    } else if lower == "hostname" || lower == "fqdn" {
        Some(Category::Host)
    } else if lower.contains("serial") && !lower.contains("serializ") || lower == "uuid" {
        Some(Category::Serial)
    } else if secret_name(key) {
        Some(Category::Secret)
    } else {
        None
    }
}

/// Whether a whole value is worth a placeholder: not empty, not `N/A`, not one already.
fn worth_redacting(text: &str) -> bool {
    let t = text.trim();
    !t.is_empty()
        && !matches!(
            t.to_ascii_lowercase().as_str(),
            "n/a" | "none" | "null" | "unknown"
        )
        && !PLACEHOLDER.is_match(t)
}

/// The category of the value of `name SEP value`, when it is private.
fn assignment_category(name: &str, separator: &str, value: &str) -> Option<Category> {
    if !worth_redacting(value) || value.starts_with('<') {
        return None;
    }
    let upper_name = name == name.to_ascii_uppercase();
    // `KeyError: 'x'` is no assignment: `:` counts only after a variable-like NAME.
    if separator.contains(':') && !upper_name {
        return None;
    }
    match name {
        env_vars::USER | env_vars::LOGNAME | "USERNAME" => return Some(Category::User),
        env_vars::HOSTNAME => return Some(Category::Host),
        _ => {}
    }
    if secret_name(name) {
        return Some(Category::Secret);
    }
    (separator.contains('=') && LONG_RUN.is_match(value)).then_some(Category::Secret)
}

/// Every private value the patterns find in `text`.
fn found_values(text: &str) -> Vec<(Category, String)> {
    let mut found = Vec::new();
    let mut all = |re: &Regex, group: usize, category: Category| {
        if !re.is_match(text) {
            return;
        }
        for caps in re.captures_iter(text) {
            if let Some(value) = caps.get(group) {
                found.push((category, value.as_str().to_string()));
            }
        }
    };
    all(&TOKEN, 0, Category::Secret);
    all(&BEARER, 1, Category::Secret);
    all(&SERIAL, 3, Category::Serial);
    all(&GPU_UUID, 0, Category::Serial);
    all(&HOME_DIR, 1, Category::User);
    for caps in ASSIGNMENT.captures_iter(text) {
        if let Some(category) = assignment_category(&caps[1], &caps[2], &caps[3]) {
            found.push((category, caps[3].to_string()));
        }
    }
    found
}

/// Whether a dotted quad is an address worth hiding: a valid one, not loopback, not the
/// unspecified or broadcast address, and not part of a longer dotted version (`1.2.3.4.5`).
fn private_ipv4(text: &str, start: usize, end: usize) -> bool {
    let quad = &text[start..end];
    let octets: Vec<u32> = quad.split('.').filter_map(|o| o.parse().ok()).collect();
    if octets.len() != 4 || octets.iter().any(|&o| o > 255) {
        return false;
    }
    if octets[0] == 127 || octets == [0, 0, 0, 0] || octets == [255, 255, 255, 255] {
        return false;
    }
    let before = text[..start].chars().next_back();
    // `nvidia-cublas==13.1.0.3`, `tensorrt-10.3.0.26`: a version, not an address.
    let prefix = &text[..start];
    if ["==", ">=", "<=", "~=", "!="]
        .iter()
        .any(|op| prefix.ends_with(op))
        || matches!(before, Some('-' | '+' | '_' | 'v'))
    {
        return false;
    }
    let after = text[end..].chars().next();
    let dotted = |c: Option<char>| c == Some('.');
    let after_dot_digit =
        dotted(after) && text[end + 1..].starts_with(|c: char| c.is_ascii_digit());
    !dotted(before) && !after_dot_digit
}

/// Whether a colon-hex run is an IPv6 address other than loopback: eight groups, or a `::`
/// with at least three groups (so `12:34:56` and `c10::Error` stay).
fn private_ipv6(candidate: &str) -> bool {
    let groups: Vec<&str> = candidate.split(':').filter(|g| !g.is_empty()).collect();
    let full = candidate.split(':').count() == 8 && !candidate.contains("::");
    let compressed = candidate.contains("::") && groups.len() >= 2;
    let values: Vec<u16> = groups
        .iter()
        .filter_map(|g| u16::from_str_radix(g, 16).ok())
        .collect();
    let loopback = values
        .split_last()
        .is_some_and(|(last, rest)| *last == 1 && rest.iter().all(|&v| v == 0));
    (full || compressed) && !loopback
}

/// Whether a MAC address identifies a board (not all zeros, not broadcast).
fn private_mac(mac: &str) -> bool {
    let lower = mac.to_ascii_lowercase();
    lower != "00:00:00:00:00:00" && lower != "ff:ff:ff:ff:ff:ff"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A bundle in miniature: two text files and a JSON document, redacted in the two passes.
    struct Redacted {
        originals: Vec<String>,
        original_json: String,
        texts: Vec<String>,
        json: Value,
        summary: Vec<CategorySummary>,
        redactor: Redactor,
    }

    impl Redacted {
        fn everything(&self) -> String {
            let mut all = self.texts.join("\n");
            all.push('\n');
            all.push_str(&serde_json::to_string(&self.json).unwrap());
            all
        }

        /// The placeholder `value` got.
        fn placeholder(&self, category: Category, value: &str) -> String {
            self.redactor.table[&(category, value.to_string())].clone()
        }

        /// Asserts that `value` is in no file, and that the one placeholder it got stands in
        /// every file that held it.
        fn gone(&self, category: Category, value: &str) {
            let all = self.everything();
            assert!(!all.contains(value), "{value:?} survived in:\n{all}");
            let placeholder = self.placeholder(category, value);
            for (original, text) in self.originals.iter().zip(&self.texts) {
                if original.contains(value) {
                    assert!(
                        text.contains(&placeholder),
                        "{placeholder} missing in:\n{text}"
                    );
                }
            }
            let json = serde_json::to_string(&self.json).unwrap();
            if self.original_json.contains(value) {
                assert!(
                    json.contains(&placeholder),
                    "{placeholder} missing in {json}"
                );
            }
        }

        fn count(&self, category: Category) -> (usize, usize) {
            self.summary
                .iter()
                .find(|s| s.category == category)
                .map_or((0, 0), |s| (s.distinct, s.occurrences))
        }
    }

    fn redact(identity: &Identity, texts: &[&str], json: Value) -> Redacted {
        let mut redactor = Redactor::new(identity);
        texts.iter().for_each(|t| redactor.learn_text(t));
        redactor.learn_json(&json);
        let originals = texts.iter().map(|t| t.to_string()).collect();
        let original_json = serde_json::to_string(&json).unwrap();
        let texts = texts.iter().map(|t| redactor.text(t)).collect();
        let mut json = json;
        redactor.json(&mut json);
        Redacted {
            originals,
            original_json,
            texts,
            json,
            summary: redactor.summary(),
            redactor,
        }
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_user_name_is_gone_everywhere_with_one_placeholder() {
        let identity = Identity::from_env(&env(&[("USER", "zelda"), ("LOGNAME", "zelda")]), &[]);
        let r = redact(
            &identity,
            &[
                "running as zelda on the box; also /home/otto/venv/bin/python",
                "owner zelda, USER=zelda",
            ],
            json!({"python": {"executable": "/home/otto/.venv/bin/python"}, "who": "zelda"}),
        );
        r.gone(Category::User, "zelda");
        assert_eq!(
            r.json["who"],
            r.placeholder(Category::User, "zelda").as_str()
        );
        assert!(!r.everything().contains("otto"), "{}", r.everything());
        let otto = r.placeholder(Category::User, "otto");
        assert!(
            r.texts[0].contains(&format!("/home/{otto}/venv/bin/python")),
            "{}",
            r.texts[0]
        );
        assert_eq!(r.count(Category::User).0, 2);
    }

    #[test]
    fn the_host_name_and_its_fqdn_are_gone_everywhere() {
        let identity = Identity::from_env(
            &env(&[("HOSTNAME", "gpubox7")]),
            &["gpubox7.lab.example.org".to_string()],
        );
        let r = redact(
            &identity,
            &[
                "ssh gpubox7.lab.example.org; prompt user@gpubox7:~$",
                "[12.0] gpubox7 kernel: amdgpu 0000:c5:00.0: fault",
            ],
            json!({"host": {"hostname": "gpubox7"}, "note": "from gpubox7.lab.example.org"}),
        );
        r.gone(Category::Host, "gpubox7");
        r.gone(Category::Host, "gpubox7.lab.example.org");
        assert!(
            !r.everything().contains("example.org"),
            "{}",
            r.everything()
        );
        // The same name gets the same placeholder in every file.
        let short = r.texts[1].split_whitespace().nth(1).unwrap().to_string();
        assert!(short.starts_with("<host-"), "{short}");
        assert!(serde_json::to_string(&r.json).unwrap().contains(&short));
        assert!(
            r.texts[0].contains(&format!("user@{short}:")),
            "{}",
            r.texts[0]
        );
        // The PCI address is not an IP address, nor a MAC.
        assert!(r.texts[1].contains("0000:c5:00.0"), "{}", r.texts[1]);
    }

    #[test]
    fn the_home_directory_becomes_a_tilde() {
        let identity = Identity::from_env(&env(&[("HOME", "/srv/people/kim/")]), &[]);
        let r = redact(
            &identity,
            &[
                "cache in /srv/people/kim/.cache/torch",
                "cwd=/srv/people/kim",
            ],
            json!({"path": "/srv/people/kim/.local/lib"}),
        );
        r.gone(Category::HomePath, "/srv/people/kim");
        assert!(r.texts[0].contains("~/.cache/torch"), "{}", r.texts[0]);
        assert!(r.texts[1].ends_with("cwd=~"), "{}", r.texts[1]);
        assert_eq!(r.json["path"], "~/.local/lib");
        assert_eq!(r.count(Category::HomePath), (1, 3));
        // A longer directory that only starts with the home is left alone.
        let r = redact(&identity, &["/srv/people/kimberly/x"], json!(null));
        assert_eq!(r.texts[0], "/srv/people/kimberly/x");
    }

    #[test]
    fn secrets_are_gone_by_name_by_shape_and_wherever_they_recur() {
        let identity = Identity::from_env(
            &env(&[
                ("MY_SERVICE_PASSWORD", "hunter2-correct-horse"),
                ("PATH", "/usr/bin"),
            ]),
            &[],
        );
        let hf = "hf_AbCdEfGhIjKlMnOpQrStUvWx";
        let gh = "ghp_0123456789abcdefghijABCDEFGHIJ";
        let aws = "AKIAIOSFODNN7EXAMPLE";
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r";
        let opaque = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo";
        let texts = [
            format!("HF_TOKEN={hf}\nexport GITHUB_TOKEN='{gh}'\nAuthorization: Bearer {jwt}"),
            format!(
                "login with {hf} failed; aws {aws}; pw hunter2-correct-horse; SOME_BLOB={opaque}"
            ),
            format!("token {gh} again; blob {opaque}; XDG_SESSION_ID: 3"),
        ];
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let r = redact(
            &identity,
            &texts,
            json!({"env": {"HF_TOKEN": hf, "OPENAI_API_KEY": "sk-proj-abcdefghijklmnop1234", "PATH": "/usr/bin"},
                   "line": format!("got {gh} and {hf}")}),
        );
        for secret in [
            hf,
            gh,
            aws,
            jwt,
            opaque,
            "hunter2-correct-horse",
            "sk-proj-abcdefghijklmnop1234",
        ] {
            r.gone(Category::Secret, secret);
        }
        // One placeholder per value, the same in every file.
        let hf_placeholder = r.texts[0]
            .lines()
            .next()
            .unwrap()
            .trim_start_matches("HF_TOKEN=")
            .to_string();
        assert!(hf_placeholder.starts_with("<secret-"), "{hf_placeholder}");
        assert!(r.texts[1].contains(&hf_placeholder));
        assert_eq!(r.json["env"]["HF_TOKEN"], hf_placeholder.as_str());
        assert!(r.json["line"].as_str().unwrap().contains(&hf_placeholder));
        // What is not secret stays.
        assert_eq!(r.json["env"]["PATH"], "/usr/bin");
        assert!(!r.redactor.literals.contains_key("ubuntu"));
        assert!(r.texts[0].contains("Authorization: Bearer <secret-"));
    }

    #[test]
    fn gpu_serial_numbers_and_uuids_are_gone() {
        // nvidia-smi -q (fixtures/nvidia-smi/h100-q.txt), the NVRM line the driver logs with an
        // Xid, amd-smi static text and JSON.
        let nvidia_smi = "    Serial Number                                      : 1655023034247\n    GPU UUID                                           : GPU-ea44a5c2-ba8f-5e6b-203c-23dd332e7afb\n        Chassis Serial Number                          : N/A";
        let nvrm = "[ 42.1] NVRM: GPU at PCI:0000:3b:00: GPU-ea44a5c2-ba8f-5e6b-203c-23dd332e7afb\n[ 42.1] NVRM: GPU Board Serial Number: 1655023034247\n[ 42.2] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.";
        let amd = "        ASIC_SERIAL: 0x1A2B3C4D5E6F7788\n        PRODUCT_SERIAL: 692245000123\n  Uuid:                    GPU-acfa08f5f8ea8075";
        let r = redact(
            &Identity::default(),
            &[nvidia_smi, nvrm, amd],
            json!({"extra": {"gpu.0.serial": "1655023034247", "asic_serial": "0x1A2B3C4D5E6F7788"},
                   "uuid": "GPU-ea44a5c2-ba8f-5e6b-203c-23dd332e7afb"}),
        );
        for serial in [
            "1655023034247",
            "ea44a5c2-ba8f-5e6b-203c-23dd332e7afb",
            "0x1A2B3C4D5E6F7788",
            "692245000123",
            "acfa08f5f8ea8075",
        ] {
            assert!(
                !r.everything().contains(serial),
                "{serial}:\n{}",
                r.everything()
            );
        }
        r.gone(Category::Serial, "1655023034247");
        r.gone(Category::Serial, "GPU-ea44a5c2-ba8f-5e6b-203c-23dd332e7afb");
        assert!(r.texts[0].contains("Chassis Serial Number                          : N/A"));
        assert!(
            r.texts[1].contains("Xid (PCI:0000:3b:00): 79"),
            "{}",
            r.texts[1]
        );
        assert_eq!(
            r.json["extra"]["gpu.0.serial"],
            r.placeholder(Category::Serial, "1655023034247").as_str()
        );
    }

    #[test]
    fn mac_and_ip_addresses_are_gone_but_loopback_and_versions_stay() {
        let r = redact(
            &Identity::default(),
            &[
                "eth0 ether 3c:ec:ef:12:34:56 inet 10.20.30.40 and 127.0.0.1 fe80::1ff:fe23:4567:890a",
                "NCCL INFO NET/Socket : Using [0]eth0:10.20.30.40<0> mac 3c:ec:ef:12:34:56; ::1; 2001:db8:0:0:1:0:0:1",
            ],
            json!({"MASTER_ADDR": "10.20.30.40", "note": "torch 2.5.1, driver 570.86.15, at 12:34:56, c10::Error, 1.2.3.4.5, nvidia-cublas==13.1.0.3, trt-10.3.0.26",
                   "packages": {"nvidia-cufft": "12.0.0.61"}, "vbios_version": "113.2.0.9"}),
        );
        r.gone(Category::Ip, "10.20.30.40");
        r.gone(Category::Mac, "3c:ec:ef:12:34:56");
        for ip in ["fe80::1ff:fe23:4567:890a", "2001:db8:0:0:1:0:0:1"] {
            assert!(!r.everything().contains(ip), "{ip}:\n{}", r.everything());
        }
        assert!(r.texts[0].contains("127.0.0.1"));
        assert!(r.texts[1].contains("; ::1;"));
        assert_eq!(
            r.json["note"],
            "torch 2.5.1, driver 570.86.15, at 12:34:56, c10::Error, 1.2.3.4.5, nvidia-cublas==13.1.0.3, trt-10.3.0.26"
        );
        assert_eq!(r.json["packages"]["nvidia-cufft"], "12.0.0.61");
        assert_eq!(r.json["vbios_version"], "113.2.0.9");
    }

    #[test]
    fn json_stays_valid_json_with_hostile_strings_and_keys() {
        let identity = Identity::from_env(&env(&[("USER", "zelda"), ("HOME", "/home/zelda")]), &[]);
        let mut value = json!({
            "/home/zelda/x": "quote \" backslash \\ newline \n ctrl \u{1b}[31m zelda",
            "list": ["HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWx", 1, null, true, {"USER": "zelda"}],
            "n": 1.5
        });
        let mut redactor = Redactor::new(&identity);
        redactor.learn_json(&value);
        redactor.json(&mut value);
        let text = serde_json::to_string_pretty(&value).unwrap();
        let back: Value = serde_json::from_str(&text).expect("still JSON");
        assert_eq!(back, value);
        assert!(
            !text.contains("zelda") && !text.contains("hf_AbC"),
            "{text}"
        );
        assert!(back.get("~/x").is_some(), "{text}");
        assert_eq!(back["list"][4]["USER"], "<user-1>");
        assert_eq!(back["n"], 1.5);
    }

    #[test]
    fn placeholders_are_never_redacted_again_and_short_names_are_words() {
        // A user called `user` or `ip` must not rewrite the placeholders themselves.
        let identity = Identity::from_env(&env(&[("USER", "user"), ("HOSTNAME", "ip")]), &[]);
        let r = redact(
            &identity,
            &["user on ip 10.1.2.3, skip the zip of user_data"],
            json!(null),
        );
        assert_eq!(
            r.texts[0],
            "<user-1> on <host-1> <ip-1>, skip the zip of user_data"
        );
        let mut again = Redactor::new(&identity);
        assert_eq!(again.text(&r.texts[0]), r.texts[0]);
    }

    #[test]
    fn one_pass_without_learning_still_redacts_every_shape() {
        let mut redactor = Redactor::new(&Identity::default());
        let text = redactor.text(
            "/home/otto/x USER=otto HOSTNAME=box9 HF_TOKEN=abcdefgh1234 ghp_0123456789abcdefghijABCDEFGHIJ \
             Bearer abcdefgh.ijk Serial Number: 1655023034247 GPU-acfa08f5f8ea8075 \
             3c:ec:ef:12:34:56 10.20.30.40 fe80::1ff:fe23:4567:890a",
        );
        assert_eq!(
            text,
            "/home/<user-1>/x USER=<user-1> HOSTNAME=<host-1> HF_TOKEN=<secret-3> <secret-1> \
             Bearer <secret-2> Serial Number: <serial-1> <serial-2> \
             <mac-1> <ip-1> <ip-2>"
        );
    }

    #[test]
    fn without_the_combined_automaton_every_value_is_still_replaced() {
        let identity = Identity::from_env(&env(&[("USER", "zelda"), ("HOSTNAME", "box9")]), &[]);
        let mut redactor = Redactor::new(&identity);
        // What happens when the alternation of all values is over the regex size limit.
        redactor.literal_re = None;
        let text = redactor.literals_one_by_one("zelda on box9, not zeldas");
        assert_eq!(text, "<user-1> on <host-1>, not zeldas");
    }

    #[test]
    fn a_longer_value_refused_for_its_neighbours_leaves_the_shorter_one_inside_replaced() {
        let identity = Identity::from_env(
            &env(&[
                ("USER", "zelda"),
                ("HOME", "/home/zelda"),
                ("HOSTNAME", "ab"),
            ]),
            &[],
        );
        let mut redactor = Redactor::new(&identity);
        let text = "/home/GPU-zelda ¹GPU-zelda== ab-c1";
        redactor.learn_text(text);
        redactor.learn_value(Category::Host, "ab-c", 1);
        // `GPU-zelda` (learned from the home path) is refused after `¹`, a digit; `zelda`
        // inside it is a word of its own. `ab-c` is refused before `1`; `ab` at the same
        // place is a word of its own.
        assert_eq!(
            redactor.text(text),
            "/home/<user-1> ¹GPU-<user-2>== <host-1>-c1"
        );
    }

    #[test]
    fn root_and_localhost_are_not_treated_as_private() {
        let identity =
            Identity::from_env(&env(&[("USER", "root"), ("HOSTNAME", "localhost")]), &[]);
        let r = redact(&identity, &["root@localhost: the root cause"], json!(null));
        assert_eq!(r.texts[0], "root@localhost: the root cause");
        assert!(r.summary.is_empty());
    }

    proptest::proptest! {
        /// Any text, hostile bytes and near-misses of every pattern included, is redacted
        /// without a panic, and any JSON string stays valid JSON.
        #[test]
        fn any_text_is_redacted_without_a_panic(
            text in r"(\PC|[\x00-\x1f]|/home/|HF_TOKEN=|Serial Number: |GPU-|::|[0-9a-f:.]{1,12}|==|<user-1>|zelda){0,40}"
        ) {
            let identity = Identity::from_env(
                &env(&[("USER", "zelda"), ("HOME", "/home/zelda"), ("HOSTNAME", "box")]),
                &[],
            );
            let mut redactor = Redactor::new(&identity);
            redactor.learn_text(&text);
            let out = redactor.text(&text);
            let mut value = json!({ text.clone(): [text.clone(), {"USER": text.clone()}] });
            redactor.learn_json(&value);
            redactor.json(&mut value);
            let back: Value = serde_json::from_str(&serde_json::to_string(&value).unwrap()).unwrap();
            proptest::prop_assert_eq!(back, value);
            // The user's name never survives as a word of its own (`zeldaHF` is another word).
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            for (at, _) in out.match_indices("zelda") {
                let alone = !word(out[..at].chars().next_back()) && !word(out[at + 5..].chars().next());
                proptest::prop_assert!(!alone, "{}", out);
            }
        }
    }
}
